/* fuzz_util.h — what the libFuzzer harnesses share: the library reads files by path, so an input
 * is handed over as an anonymous in-memory file (memfd) opened through /proc/self/fd. */
#ifndef GPTC_FUZZ_UTIL_H
#define GPTC_FUZZ_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

/* Writes data to a fresh memfd and puts its /proc path in path; returns the fd (close it after),
 * aborting when the kernel refuses (that is the harness's fault, not the input's). */
static inline int fuzz_memfile(const uint8_t *data, size_t size, char *path, size_t cap) {
    int fd = memfd_create("gptc-fuzz", MFD_CLOEXEC);
    if (fd < 0) { perror("memfd_create"); abort(); }
    size_t at = 0;
    while (at < size) {
        ssize_t n = write(fd, data + at, size - at);
        if (n <= 0) { perror("write"); abort(); }
        at += (size_t)n;
    }
    snprintf(path, cap, "/proc/self/fd/%d", fd);
    return fd;
}

#endif
