/* shard.c — llm.c token shards: map one read-only and check its header, or write one atomically.
 *
 * Layout: 256 little-endian int32 header words (magic 20240520, version 1, token count, the rest 0),
 * then `count` little-endian uint16 tokens. The tokens are used in place inside the mapping, which
 * assumes a little-endian host (checked at compile time). */
#include "data/data.h"
#include "io/io.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "shards hold little-endian tokens used in place");

#define SHARD_HEADER_BYTES ((size_t)GPTC_SHARD_HEADER_INTS * 4)

/* The i-th little-endian int32 header word of hdr (SHARD_HEADER_BYTES bytes). */
static uint32_t shard_header_word(const unsigned char *hdr, int i) {
    const unsigned char *p = hdr + (size_t)i * 4;
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void shard_header_put(unsigned char *hdr, int i, uint32_t v) {
    unsigned char *p = hdr + (size_t)i * 4;
    p[0] = (unsigned char)v;
    p[1] = (unsigned char)(v >> 8);
    p[2] = (unsigned char)(v >> 16);
    p[3] = (unsigned char)(v >> 24);
}

gptc_status gptc_shard_open(gptc_shard *s, const char *path) {
    memset(s, 0, sizeof *s);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return gptc_fail(GPTC_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        int e = errno;
        close(fd);
        return gptc_fail(GPTC_ERR_IO, "%s: cannot stat: %s", path, strerror(e));
    }
    if (!S_ISREG(sb.st_mode)) {
        close(fd);
        return gptc_fail(GPTC_ERR_IO, "%s: not a regular file; expected a token shard (.bin)", path);
    }
    size_t size = (size_t)sb.st_size;
    if (size < SHARD_HEADER_BYTES) {
        close(fd);
        return gptc_fail(GPTC_ERR_FORMAT,
                         "%s: not a token shard (%zu bytes, shorter than the %zu-byte header); "
                         "make shards with `gptc prepare` or llm.c's data scripts",
                         path, size, SHARD_HEADER_BYTES);
    }
    void *map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
    int map_errno = errno;
    close(fd); /* the mapping stays valid without the descriptor */
    if (map == MAP_FAILED) return gptc_fail(GPTC_ERR_IO, "%s: cannot map: %s", path, strerror(map_errno));

    const unsigned char *hdr = map; /* [SHARD_HEADER_BYTES] */
    uint32_t magic = shard_header_word(hdr, 0), version = shard_header_word(hdr, 1);
    uint32_t count = shard_header_word(hdr, 2);
    gptc_status st = GPTC_OK;
    if (magic != GPTC_SHARD_MAGIC) {
        st = gptc_fail(GPTC_ERR_FORMAT,
                       "%s: not a token shard (magic %u, expected %d); make shards with `gptc prepare` "
                       "or llm.c's data scripts",
                       path, magic, GPTC_SHARD_MAGIC);
    } else if (version != GPTC_SHARD_VERSION) {
        st = gptc_fail(GPTC_ERR_FORMAT,
                       "%s: token shard version %u, expected %d (gptc reads uint16 tokens; llm.c's "
                       "version 2 holds uint32 LLaMA-3 tokens); re-make the shard with `gptc prepare`",
                       path, version, GPTC_SHARD_VERSION);
    } else if (size != SHARD_HEADER_BYTES + (size_t)count * 2) {
        st = gptc_fail(GPTC_ERR_FORMAT,
                       "%s: header says %u tokens (%zu bytes) but the file holds %zu bytes; the shard "
                       "is truncated or was written by another tool",
                       path, count, SHARD_HEADER_BYTES + (size_t)count * 2, size);
    }
    if (st == GPTC_OK) {
        s->path = strdup(path);
        if (!s->path) st = gptc_fail(GPTC_ERR_NOMEM, "%s: cannot allocate the path", path);
    }
    if (st != GPTC_OK) {
        munmap(map, size);
        memset(s, 0, sizeof *s);
        return st;
    }
    s->map = map;
    s->map_size = size;
    s->tokens = (const uint16_t *)(hdr + SHARD_HEADER_BYTES);
    s->ntok = count;
    return GPTC_OK;
}

void gptc_shard_close(gptc_shard *s) {
    if (s->map) munmap(s->map, s->map_size);
    free(s->path);
    memset(s, 0, sizeof *s);
}

gptc_status gptc_shard_write(const char *path, const uint16_t *tokens, size_t ntok) {
    if (ntok > INT32_MAX)
        return gptc_fail(GPTC_ERR_ARG, "%s: %zu tokens do not fit one shard (at most %d); write more shards",
                         path, ntok, INT32_MAX);
    unsigned char hdr[SHARD_HEADER_BYTES]; /* 256 little-endian int32 words */
    memset(hdr, 0, sizeof hdr);
    shard_header_put(hdr, 0, GPTC_SHARD_MAGIC);
    shard_header_put(hdr, 1, GPTC_SHARD_VERSION);
    shard_header_put(hdr, 2, (uint32_t)ntok);
    const void *parts[2] = {hdr, tokens};
    size_t lens[2] = {sizeof hdr, ntok * 2};
    return gptc_file_write_atomic(path, parts, lens, ntok ? 2 : 1);
}
