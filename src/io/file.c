/* file.c — checked file I/O: atomic replacement (temp, fsync, rename, fsync the folder), whole-file
 * reads and folder helpers; every failure names the path and strerror(errno). */
#include <cjson/cJSON.h>
#include "io.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

/* One write(2) moves at most this much (Linux caps a call near 2 GiB anyway). */
#define GPTC_IO_CHUNK ((size_t)1 << 30)

/* Writes all n bytes, retrying short writes and EINTR. Returns 0, or -1 with errno set. */
static int gptc_file_write_full(int fd, const void *buf, size_t n) {
    const char *p = buf;
    while (n > 0) {
        size_t want = n < GPTC_IO_CHUNK ? n : GPTC_IO_CHUNK;
        ssize_t got = write(fd, p, want);
        if (got < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        if (got == 0) { /* should not happen for a regular file; avoid spinning */
            errno = EIO;
            return -1;
        }
        p += got;
        n -= (size_t)got;
    }
    return 0;
}

/* The folder that holds path ("." when path has no slash). Caller frees. NULL on OOM. */
static char *gptc_file_parent(const char *path) {
    const char *slash = strrchr(path, '/');
    size_t len = slash ? (size_t)(slash - path) : 0;
    if (slash && len == 0) len = 1; /* "/name" lives in "/" */
    char *dir = gptc_alloc(len + 2, "a folder name");
    if (!dir) return NULL;
    if (slash) memcpy(dir, path, len);
    else dir[len++] = '.';
    dir[len] = '\0';
    return dir;
}

gptc_status gptc_fsync_dir(const char *path) {
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return gptc_fail(GPTC_ERR_IO, "%s: cannot open folder to sync it: %s", path, strerror(errno));
    int rc;
    do rc = fsync(fd); while (rc != 0 && errno == EINTR);
    int err = errno;
    close(fd);
    /* Some file systems cannot fsync a folder (EINVAL); there is nothing more to do there. */
    if (rc != 0 && err != EINVAL && err != ENOTSUP)
        return gptc_fail(GPTC_ERR_IO, "%s: cannot sync folder: %s; check the disk", path, strerror(err));
    return GPTC_OK;
}

/* The failure of step `what` on f's path with errno err; removes the temp file and releases f. */
static gptc_status atomic_fail(gptc_atomic_file *f, const char *what, int err) {
    if (f->fd >= 0) close(f->fd);
    if (f->tmp) unlink(f->tmp);
    gptc_status st = gptc_fail(GPTC_ERR_IO, "%s: %s: %s; check that the folder exists, its permissions and free space",
                               f->path, what, strerror(err));
    gptc_free(f->tmp);
    *f = (gptc_atomic_file){.fd = -1};
    return st;
}

gptc_status gptc_atomic_open(gptc_atomic_file *f, const char *path) {
    *f = (gptc_atomic_file){.fd = -1, .path = path};
    if (!path || !*path) return gptc_fail(GPTC_ERR_ARG, "cannot write a file with an empty path");
    size_t tmplen = strlen(path) + 32;
    f->tmp = gptc_alloc(tmplen, "a temp file name");
    if (!f->tmp) return GPTC_ERR_NOMEM;
    snprintf(f->tmp, tmplen, "%s.tmp-%ld", path, (long)getpid());
    f->fd = open(f->tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (f->fd < 0) {
        int err = errno;
        gptc_free(f->tmp);
        f->tmp = NULL; /* nothing was created */
        return atomic_fail(f, "cannot create temp file", err);
    }
    return GPTC_OK;
}

gptc_status gptc_atomic_write(gptc_atomic_file *f, const void *buf, size_t n) {
    if (n > 0 && gptc_file_write_full(f->fd, buf, n) != 0) return atomic_fail(f, "cannot write", errno);
    return GPTC_OK;
}

void gptc_atomic_abort(gptc_atomic_file *f) {
    if (f->fd >= 0) close(f->fd);
    if (f->tmp) unlink(f->tmp);
    gptc_free(f->tmp);
    *f = (gptc_atomic_file){.fd = -1};
}

gptc_status gptc_atomic_commit(gptc_atomic_file *f) {
    int rc;
    do rc = fsync(f->fd); while (rc != 0 && errno == EINTR);
    if (rc != 0) return atomic_fail(f, "cannot sync", errno);
    rc = close(f->fd); /* on Linux the fd is gone even when this fails */
    f->fd = -1;
    if (rc != 0 && errno != EINTR) return atomic_fail(f, "cannot close", errno);
    if (rename(f->tmp, f->path) != 0) return atomic_fail(f, "cannot rename temp file over it", errno);
    gptc_free(f->tmp);
    const char *path = f->path;
    *f = (gptc_atomic_file){.fd = -1};
    /* The rename is durable only once the folder entry is on disk. */
    char *dir = gptc_file_parent(path);
    if (!dir) return GPTC_ERR_NOMEM;
    gptc_status st = gptc_fsync_dir(dir);
    gptc_free(dir);
    return st;
}

gptc_status gptc_file_write_atomic(const char *path, const void *const *parts, const size_t *lens, int nparts) {
    if (!path || !*path) return gptc_fail(GPTC_ERR_ARG, "cannot write a file with an empty path");
    if (nparts < 0 || (nparts > 0 && (!parts || !lens)))
        return gptc_fail(GPTC_ERR_ARG, "%s: cannot write: bad list of parts (%d)", path, nparts);
    for (int i = 0; i < nparts; i++)
        if (lens[i] > 0 && !parts[i])
            return gptc_fail(GPTC_ERR_ARG, "%s: cannot write: part %d has %zu bytes but no data", path, i, lens[i]);
    gptc_atomic_file f;
    gptc_status st = gptc_atomic_open(&f, path);
    for (int i = 0; i < nparts && st == GPTC_OK; i++) st = gptc_atomic_write(&f, parts[i], lens[i]);
    return st ? st : gptc_atomic_commit(&f);
}

gptc_status gptc_file_read_all(const char *path, char **data, size_t *len) {
    *data = NULL;
    *len = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return gptc_fail(GPTC_ERR_IO, "%s: cannot open: %s; check the path", path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        int err = errno;
        close(fd);
        return gptc_fail(GPTC_ERR_IO, "%s: cannot stat: %s", path, strerror(err));
    }
    if (S_ISDIR(sb.st_mode)) {
        close(fd);
        return gptc_fail(GPTC_ERR_IO, "%s: is a folder, not a file; check the path", path);
    }
    /* st_size is a hint (0 for pipes and /proc files): read to EOF, growing the buffer as needed. */
    size_t cap = sb.st_size > 0 ? (size_t)sb.st_size + 1 : 4096, n = 0;
    char *buf = gptc_alloc(cap, path);
    if (!buf) {
        close(fd);
        return GPTC_ERR_NOMEM;
    }
    for (;;) {
        if (n + 1 >= cap) {
            size_t ncap = cap * 2;
            char *nbuf = ncap > cap ? gptc_alloc(ncap, path) : NULL;
            if (!nbuf) {
                gptc_free(buf);
                close(fd);
                return GPTC_ERR_NOMEM;
            }
            memcpy(nbuf, buf, n);
            gptc_free(buf);
            buf = nbuf;
            cap = ncap;
        }
        size_t want = cap - 1 - n;
        if (want > GPTC_IO_CHUNK) want = GPTC_IO_CHUNK;
        ssize_t got = read(fd, buf + n, want);
        if (got < 0) {
            if (errno == EINTR) continue;
            int err = errno;
            gptc_free(buf);
            close(fd);
            return gptc_fail(GPTC_ERR_IO, "%s: cannot read: %s", path, strerror(err));
        }
        if (got == 0) break;
        n += (size_t)got;
    }
    close(fd);
    buf[n] = '\0';
    *data = buf;
    *len = n;
    return GPTC_OK;
}

gptc_status gptc_mkdir_p(const char *path) {
    if (!path || !*path) return gptc_fail(GPTC_ERR_ARG, "cannot create a folder with an empty name");
    size_t len = strlen(path);
    char *buf = gptc_alloc(len + 1, "a folder name");
    if (!buf) return GPTC_ERR_NOMEM;
    memcpy(buf, path, len + 1);
    /* Create each prefix that ends just before a slash, then the whole path. */
    for (size_t i = 1; i <= len; i++) {
        if (i < len && buf[i] != '/') continue;
        if (i < len && buf[i - 1] == '/') continue; /* "a//b" */
        char keep = buf[i];
        buf[i] = '\0';
        if (mkdir(buf, 0755) != 0) {
            int err = errno;
            if (err != EEXIST || !gptc_is_dir(buf)) {
                if (err == EEXIST) err = ENOTDIR;
                gptc_status st = gptc_fail(GPTC_ERR_IO, "%s: cannot create folder %s: %s; check the path and permissions",
                                           path, buf, strerror(err));
                gptc_free(buf);
                return st;
            }
        }
        buf[i] = keep;
    }
    gptc_free(buf);
    return GPTC_OK;
}

/* nftw has no user pointer: the first failure is recorded here (per thread). */
static _Thread_local int g_rm_errno;
static _Thread_local char g_rm_path[512];

static int gptc_remove_tree_entry(const char *fpath, const struct stat *sb, int typeflag, struct FTW *ftw) {
    (void)sb;
    (void)ftw;
    int rc = 0;
    if (typeflag == FTW_DNR || typeflag == FTW_NS) {
        rc = -1;
        errno = EACCES;
    } else {
        rc = typeflag == FTW_DP ? rmdir(fpath) : unlink(fpath);
    }
    if (rc != 0) {
        g_rm_errno = errno;
        snprintf(g_rm_path, sizeof g_rm_path, "%s", fpath);
        return 1; /* stop the walk */
    }
    return 0;
}

gptc_status gptc_remove_tree(const char *path) {
    if (!path || !*path) return gptc_fail(GPTC_ERR_ARG, "cannot remove a folder with an empty name");
    struct stat sb;
    if (lstat(path, &sb) != 0) {
        if (errno == ENOENT) return GPTC_OK; /* already gone */
        return gptc_fail(GPTC_ERR_IO, "%s: cannot remove: %s", path, strerror(errno));
    }
    if (!S_ISDIR(sb.st_mode))
        return gptc_fail(GPTC_ERR_ARG, "%s: cannot remove: not a folder (refusing to follow a link or delete a file)",
                         path);
    g_rm_errno = 0;
    g_rm_path[0] = '\0';
    int rc = nftw(path, gptc_remove_tree_entry, 16, FTW_DEPTH | FTW_PHYS | FTW_MOUNT);
    if (rc == 0) return GPTC_OK;
    int err = g_rm_errno ? g_rm_errno : errno;
    return gptc_fail(GPTC_ERR_IO, "%s: cannot remove %s: %s; check permissions", path,
                     g_rm_path[0] ? g_rm_path : path, strerror(err));
}

bool gptc_is_dir(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0 && S_ISDIR(sb.st_mode);
}

bool gptc_is_file(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0 && S_ISREG(sb.st_mode);
}

void gptc_mapped_release(const void *map, size_t map_size, const void *data, size_t n) {
    if (!map || !n) return;
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE), base = (uintptr_t)map;
    uintptr_t lo = (uintptr_t)data & ~(page - 1), hi = ((uintptr_t)data + n + page - 1) & ~(page - 1);
    uintptr_t end = (base + map_size + page - 1) & ~(page - 1);
    if (lo < base) lo = base;
    if (hi > end) hi = end;
    if (hi > lo) madvise((void *)lo, hi - lo, MADV_DONTNEED); /* a read-only private mapping: refaulted from the file */
}

gptc_status gptc_file_copy(const char *from, const char *to) {
    char *data = NULL;
    size_t len = 0;
    gptc_status st = gptc_file_read_all(from, &data, &len);
    if (st) return st;
    const void *parts[1] = {data};
    st = gptc_file_write_atomic(to, parts, &len, 1);
    gptc_free(data);
    return st;
}

gptc_status gptc_json_object_read(const char *path, cJSON **out, const char **why) {
    *out = NULL;
    *why = NULL;
    char *text = NULL;
    size_t len = 0;
    gptc_status st = gptc_file_read_all(path, &text, &len);
    if (st) return st;
    cJSON *o = len ? cJSON_ParseWithLength(text, len) : NULL;
    gptc_free(text);
    if (cJSON_IsObject(o)) *out = o;
    else {
        cJSON_Delete(o);
        *why = len ? "not a JSON object" : "file is empty";
    }
    return GPTC_OK;
}
