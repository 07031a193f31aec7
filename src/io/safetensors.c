/* safetensors.c — the safetensors reader (mmap, then validate every field before use) and writer
 * (back-to-back tensors, a CRC32C per tensor in the metadata, atomic replacement). */
#include "io.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* A header bigger than this is not a safetensors file (the reference reader uses the same cap). */
#define GPTC_ST_MAX_HEADER ((uint64_t)100000000)
/* Offsets and dims are read through cJSON's doubles: beyond 2^53 they are no longer exact. */
#define GPTC_ST_MAX_INT 9007199254740992.0
/* The data region starts at a multiple of this many bytes from the start of the file. */
#define GPTC_ST_ALIGN 64
#define GPTC_ST_CRC_PREFIX "crc32c."
#define GPTC_ST_HINT "the file is corrupt or not a safetensors file"

/* ---------------------------------------------------------------- dtypes */

static const char *const g_dtype_names[] = {"F32", "F64", "BF16", "F16", "I32", "I64", "U16", "U8"};
static const size_t g_dtype_sizes[] = {4, 8, 2, 2, 4, 8, 2, 1};
#define GPTC_NDTYPES ((int)(sizeof g_dtype_sizes / sizeof g_dtype_sizes[0]))

const char *gptc_dtype_name(gptc_dtype t) {
    return (int)t >= 0 && (int)t < GPTC_NDTYPES ? g_dtype_names[t] : "?";
}

size_t gptc_dtype_size(gptc_dtype t) { return (int)t >= 0 && (int)t < GPTC_NDTYPES ? g_dtype_sizes[t] : 0; }

static int gptc_st_dtype_parse(const char *s) {
    for (int i = 0; i < GPTC_NDTYPES; i++)
        if (strcmp(s, g_dtype_names[i]) == 0) return i;
    return -1;
}

/* ---------------------------------------------------------------- small helpers */

static char *gptc_st_strdup(const char *s, const char *what) {
    size_t n = strlen(s);
    char *d = gptc_alloc(n + 1, what);
    if (d) memcpy(d, s, n + 1);
    return d;
}

/* *out = prod(shape) with overflow checks, in order (as the reference reader does). */
static bool gptc_st_numel(const int64_t *shape, int ndim, size_t *out) {
    size_t n = 1;
    for (int d = 0; d < ndim; d++) {
        if (shape[d] < 0) return false;
        if (__builtin_mul_overflow(n, (size_t)shape[d], &n)) return false;
    }
    *out = n;
    return true;
}

/* A JSON number that is a non-negative integer small enough to be exact. */
static bool gptc_st_json_uint(const cJSON *j, uint64_t *out) {
    if (!cJSON_IsNumber(j)) return false;
    double d = j->valuedouble;
    if (!(d >= 0 && d < GPTC_ST_MAX_INT) || d != (double)(uint64_t)d) return false;
    *out = (uint64_t)d;
    return true;
}

/* RFC 3629 UTF-8 (no overlongs, no surrogates, at most U+10FFFF); the spec asks for a UTF-8 header. */
static bool gptc_st_utf8_ok(const unsigned char *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        unsigned c = s[i];
        if (c < 0x80) { i++; continue; }
        int k;
        unsigned lo = 0x80, hi = 0xBF;
        if (c >= 0xC2 && c <= 0xDF) k = 1;
        else if (c >= 0xE0 && c <= 0xEF) {
            k = 2;
            if (c == 0xE0) lo = 0xA0;
            if (c == 0xED) hi = 0x9F;
        } else if (c >= 0xF0 && c <= 0xF4) {
            k = 3;
            if (c == 0xF0) lo = 0x90;
            if (c == 0xF4) hi = 0x8F;
        } else return false;
        if (n - i <= (size_t)k) return false;
        if (s[i + 1] < lo || s[i + 1] > hi) return false;
        for (int j = 2; j <= k; j++)
            if ((s[i + j] & 0xC0) != 0x80) return false;
        i += (size_t)k + 1;
    }
    return true;
}

static bool gptc_st_parse_hex32(const char *s, uint32_t *out) {
    uint32_t v = 0;
    for (int i = 0; i < 8; i++) {
        char c = s[i];
        if (c >= '0' && c <= '9') v = v << 4 | (uint32_t)(c - '0');
        else if (c >= 'a' && c <= 'f') v = v << 4 | (uint32_t)(c - 'a' + 10);
        else return false;
    }
    if (s[8] != '\0') return false;
    *out = v;
    return true;
}

static int gptc_st_cmp_str(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Finds a repeated string; returns it or NULL. names is sorted in place. */
static const char *gptc_st_find_dup(const char **names, int n) {
    if (n < 2) return NULL;
    qsort(names, (size_t)n, sizeof names[0], gptc_st_cmp_str);
    for (int i = 1; i < n; i++)
        if (strcmp(names[i - 1], names[i]) == 0) return names[i];
    return NULL;
}

/* ---------------------------------------------------------------- reader */

typedef struct gptc_st_span {
    uint64_t begin, end;
    int idx;
} gptc_st_span;

static int gptc_st_cmp_span(const void *a, const void *b) {
    const gptc_st_span *x = a, *y = b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end) return x->end < y->end ? -1 : 1;
    return 0;
}

void gptc_st_close(gptc_st_file *f) {
    if (!f) return;
    if (f->map) munmap(f->map, f->map_size);
    if (f->tensors)
        for (int i = 0; i < f->ntensors; i++) gptc_free(f->tensors[i].name);
    gptc_free(f->tensors);
    for (int i = 0; i < f->nmeta; i++) {
        if (f->meta_keys) gptc_free(f->meta_keys[i]);
        if (f->meta_vals) gptc_free(f->meta_vals[i]);
    }
    gptc_free(f->meta_keys);
    gptc_free(f->meta_vals);
    gptc_free(f->path);
    memset(f, 0, sizeof *f);
}

/* Reads one tensor entry of the header into *t (name already set). data_size bounds the offsets. */
static gptc_status gptc_st_parse_tensor(const char *path, const cJSON *j, gptc_st_tensor *t, uint64_t *begin,
                                        uint64_t *end, uint64_t data_size) {
    const char *name = t->name;
    if (!cJSON_IsObject(j))
        return gptc_fail(GPTC_ERR_FORMAT, "%s: tensor %s: header entry is not an object; " GPTC_ST_HINT, path, name);
    const cJSON *jd = cJSON_GetObjectItemCaseSensitive(j, "dtype");
    const cJSON *js = cJSON_GetObjectItemCaseSensitive(j, "shape");
    const cJSON *jo = cJSON_GetObjectItemCaseSensitive(j, "data_offsets");
    if (!cJSON_IsString(jd) || !cJSON_IsArray(js) || !cJSON_IsArray(jo))
        return gptc_fail(GPTC_ERR_FORMAT,
                         "%s: tensor %s: needs \"dtype\" (a string), \"shape\" and \"data_offsets\" (arrays); " GPTC_ST_HINT,
                         path, name);
    int dt = gptc_st_dtype_parse(jd->valuestring);
    if (dt < 0)
        return gptc_fail(GPTC_ERR_FORMAT,
                         "%s: tensor %s: unsupported dtype \"%.32s\" (gptc reads F32 F64 BF16 F16 I32 I64 U16 U8); "
                         "convert the tensor first",
                         path, name, jd->valuestring);
    t->dtype = (gptc_dtype)dt;

    int ndim = cJSON_GetArraySize(js);
    if (ndim > GPTC_ST_MAX_DIMS)
        return gptc_fail(GPTC_ERR_FORMAT, "%s: tensor %s: %d dimensions (gptc reads at most %d)", path, name, ndim,
                         GPTC_ST_MAX_DIMS);
    t->ndim = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, js) {
        uint64_t v;
        if (!gptc_st_json_uint(e, &v))
            return gptc_fail(GPTC_ERR_FORMAT, "%s: tensor %s: shape entry %d is not a non-negative integer below 2^53; " GPTC_ST_HINT,
                             path, name, t->ndim);
        t->shape[t->ndim++] = (int64_t)v;
    }
    if (!gptc_st_numel(t->shape, t->ndim, &t->numel) ||
        __builtin_mul_overflow(t->numel, gptc_dtype_size(t->dtype), &t->nbytes))
        return gptc_fail(GPTC_ERR_FORMAT, "%s: tensor %s: the shape's size overflows; " GPTC_ST_HINT, path, name);

    if (cJSON_GetArraySize(jo) != 2 || !gptc_st_json_uint(cJSON_GetArrayItem(jo, 0), begin) ||
        !gptc_st_json_uint(cJSON_GetArrayItem(jo, 1), end))
        return gptc_fail(GPTC_ERR_FORMAT, "%s: tensor %s: data_offsets must be two non-negative integers [begin, end]; " GPTC_ST_HINT,
                         path, name);
    if (*begin > *end)
        return gptc_fail(GPTC_ERR_FORMAT, "%s: tensor %s: data_offsets [%" PRIu64 ", %" PRIu64 "] end before they begin; " GPTC_ST_HINT,
                         path, name, *begin, *end);
    if (*end > data_size)
        return gptc_fail(GPTC_ERR_FORMAT,
                         "%s: tensor %s: data_offsets [%" PRIu64 ", %" PRIu64 "] run past the data (%" PRIu64
                         " bytes); the file is truncated or corrupt",
                         path, name, *begin, *end, data_size);
    if (*end - *begin != (uint64_t)t->nbytes)
        return gptc_fail(GPTC_ERR_FORMAT,
                         "%s: tensor %s: data_offsets span %" PRIu64 " bytes but a %s tensor of %zu elements needs %zu; " GPTC_ST_HINT,
                         path, name, *end - *begin, gptc_dtype_name(t->dtype), t->numel, t->nbytes);
    return GPTC_OK;
}

/* Reads "__metadata__" (an object of string -> string, or null) into f. */
static gptc_status gptc_st_parse_meta(gptc_st_file *f, const cJSON *jm) {
    if (cJSON_IsNull(jm)) return GPTC_OK;
    if (!cJSON_IsObject(jm))
        return gptc_fail(GPTC_ERR_FORMAT, "%s: __metadata__ is not an object; " GPTC_ST_HINT, f->path);
    int n = cJSON_GetArraySize(jm);
    f->meta_keys = gptc_alloc(sizeof(char *) * (size_t)n, "safetensors metadata");
    f->meta_vals = gptc_alloc(sizeof(char *) * (size_t)n, "safetensors metadata");
    if (!f->meta_keys || !f->meta_vals) return GPTC_ERR_NOMEM;
    const cJSON *e;
    cJSON_ArrayForEach(e, jm) {
        if (!cJSON_IsString(e))
            return gptc_fail(GPTC_ERR_FORMAT, "%s: __metadata__ value of \"%.200s\" is not a string; " GPTC_ST_HINT, f->path,
                             e->string);
        int i = f->nmeta;
        f->meta_keys[i] = gptc_st_strdup(e->string, "safetensors metadata");
        f->meta_vals[i] = gptc_st_strdup(e->valuestring, "safetensors metadata");
        f->nmeta++; /* counted before the check so that close frees a half-filled pair */
        if (!f->meta_keys[i] || !f->meta_vals[i]) return GPTC_ERR_NOMEM;
    }
    const char **keys = gptc_alloc(sizeof(char *) * (size_t)n, "safetensors metadata");
    if (!keys) return GPTC_ERR_NOMEM;
    memcpy(keys, f->meta_keys, sizeof(char *) * (size_t)n);
    const char *dup = gptc_st_find_dup(keys, n);
    gptc_status st = dup ? gptc_fail(GPTC_ERR_FORMAT, "%s: __metadata__ key \"%.200s\" appears twice; " GPTC_ST_HINT,
                                     f->path, dup)
                         : GPTC_OK;
    gptc_free(keys);
    return st;
}

/* Checks that the tensors tile [0, data_size) exactly: no overlaps, no holes. */
static gptc_status gptc_st_check_layout(const gptc_st_file *f, gptc_st_span *spans, uint64_t data_size) {
    int n = f->ntensors;
    qsort(spans, (size_t)n, sizeof spans[0], gptc_st_cmp_span);
    uint64_t at = 0;
    for (int i = 0; i < n; i++) {
        const char *name = f->tensors[spans[i].idx].name;
        if (spans[i].begin < at)
            return gptc_fail(GPTC_ERR_FORMAT, "%s: tensor %s at [%" PRIu64 ", %" PRIu64 "] overlaps tensor %s; " GPTC_ST_HINT,
                             f->path, name, spans[i].begin, spans[i].end, f->tensors[spans[i - 1].idx].name);
        if (spans[i].begin > at)
            return gptc_fail(GPTC_ERR_FORMAT,
                             "%s: bytes [%" PRIu64 ", %" PRIu64 ") of the data belong to no tensor (holes are not "
                             "allowed); " GPTC_ST_HINT,
                             f->path, at, spans[i].begin);
        at = spans[i].end;
    }
    if (at != data_size)
        return gptc_fail(GPTC_ERR_FORMAT,
                         "%s: the last %" PRIu64 " bytes of the data belong to no tensor (holes are not allowed); " GPTC_ST_HINT,
                         f->path, data_size - at);
    return GPTC_OK;
}

void gptc_st_release(const gptc_st_file *f, const gptc_st_tensor *t) {
    gptc_mapped_release(f->map, f->map_size, t->data, t->nbytes);
}

/* Verifies every crc32c.<name> entry of the metadata against its tensor's bytes (each tensor's pages
 * are released after its check, so verifying a file does not hold it all in memory). */
static gptc_status gptc_st_check_crcs(const gptc_st_file *f) {
    size_t plen = strlen(GPTC_ST_CRC_PREFIX);
    for (int i = 0; i < f->nmeta; i++) {
        if (strncmp(f->meta_keys[i], GPTC_ST_CRC_PREFIX, plen) != 0) continue;
        const char *name = f->meta_keys[i] + plen;
        const gptc_st_tensor *t = gptc_st_find(f, name);
        if (!t)
            return gptc_fail(GPTC_ERR_FORMAT, "%s: metadata holds a checksum for tensor %.200s, which is not in the file; " GPTC_ST_HINT,
                             f->path, name);
        uint32_t want;
        if (!gptc_st_parse_hex32(f->meta_vals[i], &want))
            return gptc_fail(GPTC_ERR_FORMAT, "%s: checksum of tensor %.200s is \"%.32s\", not 8 lowercase hex digits; " GPTC_ST_HINT,
                             f->path, name, f->meta_vals[i]);
        uint32_t got = gptc_crc32c(0, t->data, t->nbytes);
        gptc_st_release(f, t);
        if (got != want)
            return gptc_fail(GPTC_ERR_FORMAT,
                             "%s: tensor %.200s fails its checksum (crc32c %08x, expected %08x): the file is corrupt or "
                             "torn; use another checkpoint or re-create it",
                             f->path, name, got, want);
    }
    return GPTC_OK;
}

/* Everything after the mapping: header, entries, layout, and the checksums when verify is set. */
static gptc_status gptc_st_parse(gptc_st_file *f, bool verify) {
    const unsigned char *base = f->map;
    size_t size = f->map_size;
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = hlen << 8 | base[i];
    if (hlen == 0)
        return gptc_fail(GPTC_ERR_FORMAT, "%s: header length is 0; " GPTC_ST_HINT, f->path);
    if (hlen > GPTC_ST_MAX_HEADER)
        return gptc_fail(GPTC_ERR_FORMAT, "%s: header length %" PRIu64 " is over the 100 MB limit; " GPTC_ST_HINT, f->path,
                         hlen);
    if (hlen > size - 8)
        return gptc_fail(GPTC_ERR_FORMAT,
                         "%s: header length %" PRIu64 " is larger than the rest of the file (%zu bytes); the file is "
                         "truncated or not a safetensors file",
                         f->path, hlen, size - 8);
    const char *hdr = (const char *)base + 8;
    if (hdr[0] != '{')
        return gptc_fail(GPTC_ERR_FORMAT, "%s: header does not start with '{'; " GPTC_ST_HINT, f->path);
    if (memchr(hdr, '\0', hlen) || !gptc_st_utf8_ok((const unsigned char *)hdr, hlen))
        return gptc_fail(GPTC_ERR_FORMAT, "%s: header is not UTF-8 text (or holds a NUL byte); " GPTC_ST_HINT, f->path);
    const unsigned char *data = base + 8 + hlen;
    uint64_t data_size = size - 8 - hlen;

    /* cJSON wants a NUL-terminated string; the mapping has none, so copy (the header is small). */
    char *text = gptc_alloc(hlen + 1, "a safetensors header");
    if (!text) return GPTC_ERR_NOMEM;
    memcpy(text, hdr, hlen);
    text[hlen] = '\0';
    const char *stop = NULL;
    cJSON *root = cJSON_ParseWithOpts(text, &stop, 1);
    gptc_status st = GPTC_OK;
    gptc_st_span *spans = NULL;
    const char **names = NULL;
    if (!root) {
        long at = stop ? (long)(stop - text) : -1;
        st = gptc_fail(GPTC_ERR_FORMAT, "%s: header is not valid JSON (near byte %ld of %" PRIu64 "); " GPTC_ST_HINT,
                       f->path, at, hlen);
        goto done;
    }
    if (!cJSON_IsObject(root)) {
        st = gptc_fail(GPTC_ERR_FORMAT, "%s: header is JSON but not an object; " GPTC_ST_HINT, f->path);
        goto done;
    }

    int nentries = cJSON_GetArraySize(root), nmeta_seen = 0;
    f->tensors = gptc_alloc(sizeof(gptc_st_tensor) * (size_t)nentries, "safetensors tensors");
    spans = gptc_alloc(sizeof(gptc_st_span) * (size_t)nentries, "safetensors tensors");
    names = gptc_alloc(sizeof(char *) * (size_t)nentries, "safetensors tensors");
    if (!f->tensors || !spans || !names) {
        st = GPTC_ERR_NOMEM;
        goto done;
    }
    const cJSON *e;
    cJSON_ArrayForEach(e, root) {
        if (strcmp(e->string, "__metadata__") == 0) {
            if (nmeta_seen++) {
                st = gptc_fail(GPTC_ERR_FORMAT, "%s: __metadata__ appears twice; " GPTC_ST_HINT, f->path);
                goto done;
            }
            if ((st = gptc_st_parse_meta(f, e)) != GPTC_OK) goto done;
            continue;
        }
        int i = f->ntensors;
        gptc_st_tensor *t = &f->tensors[i];
        if (!(t->name = gptc_st_strdup(e->string, "a tensor name"))) {
            st = GPTC_ERR_NOMEM;
            goto done;
        }
        f->ntensors++;
        spans[i].idx = i;
        if ((st = gptc_st_parse_tensor(f->path, e, t, &spans[i].begin, &spans[i].end, data_size)) != GPTC_OK) goto done;
        t->data = data + spans[i].begin;
        names[i] = t->name;
    }
    const char *dup = gptc_st_find_dup(names, f->ntensors);
    if (dup) {
        st = gptc_fail(GPTC_ERR_FORMAT, "%s: tensor %.200s appears twice in the header; " GPTC_ST_HINT, f->path, dup);
        goto done;
    }
    if ((st = gptc_st_check_layout(f, spans, data_size)) != GPTC_OK) goto done;
    if (verify) st = gptc_st_check_crcs(f);

done:
    cJSON_Delete(root);
    gptc_free(text);
    gptc_free(spans);
    gptc_free(names);
    return st;
}

/* Files whose checksums this process verified, by identity: device, inode, size, and the modification
 * and status-change times to the nanosecond (a write in place, or a rename over the path, changes one of
 * them; restoring the modification time changes the status-change time). Only files last changed at
 * least VERIFIED_AGE_S before their check are kept: the kernel stamps files from a clock that ticks every
 * few milliseconds, so a write right after a change could leave both times as they were, but not one a
 * second later. Finding a checkpoint verifies the weights it picks, then loading them opens them again:
 * the second open skips the pass (for XL's 6 GB of weights about a second; on a resume the optimizer
 * state's too). */
typedef struct verified_file {
    dev_t dev;
    ino_t ino;
    off_t size;
    struct timespec mtime, ctime;
} verified_file;
#define VERIFIED_FILES 8
#define VERIFIED_AGE_S 1
static verified_file g_verified[VERIFIED_FILES];
static int g_nverified, g_verified_next;
static pthread_mutex_t g_verified_lock = PTHREAD_MUTEX_INITIALIZER;

static verified_file file_identity(const struct stat *sb) {
    return (verified_file){sb->st_dev, sb->st_ino, sb->st_size, sb->st_mtim, sb->st_ctim};
}
static bool same_file(const verified_file *a, const verified_file *b) {
    return a->dev == b->dev && a->ino == b->ino && a->size == b->size && a->mtime.tv_sec == b->mtime.tv_sec &&
           a->mtime.tv_nsec == b->mtime.tv_nsec && a->ctime.tv_sec == b->ctime.tv_sec && a->ctime.tv_nsec == b->ctime.tv_nsec;
}
static bool was_verified(const verified_file *id) {
    pthread_mutex_lock(&g_verified_lock);
    bool hit = false;
    for (int i = 0; i < g_nverified && !hit; i++) hit = same_file(&g_verified[i], id);
    pthread_mutex_unlock(&g_verified_lock);
    return hit;
}
static void remember_verified(const verified_file *id) {
    struct timespec now;
    if (clock_gettime(CLOCK_REALTIME, &now) != 0) return;
    const struct timespec *changed[2] = {&id->mtime, &id->ctime};
    for (int i = 0; i < 2; i++) {
        double age = (double)(now.tv_sec - changed[i]->tv_sec) + 1e-9 * (double)(now.tv_nsec - changed[i]->tv_nsec);
        if (age < VERIFIED_AGE_S) return; /* changed too recently */
    }
    pthread_mutex_lock(&g_verified_lock);
    g_verified[g_verified_next] = *id;
    g_verified_next = (g_verified_next + 1) % VERIFIED_FILES;
    if (g_nverified < VERIFIED_FILES) g_nverified++;
    pthread_mutex_unlock(&g_verified_lock);
}

static gptc_status st_open(gptc_st_file *f, const char *path, bool verify) {
    memset(f, 0, sizeof *f);
    if (!(f->path = gptc_st_strdup(path, "a file name"))) return GPTC_ERR_NOMEM;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        gptc_status st = gptc_fail(GPTC_ERR_IO, "%s: cannot open: %s; check the path", path, strerror(errno));
        gptc_st_close(f);
        return st;
    }
    struct stat sb;
    gptc_status st = GPTC_OK;
    if (fstat(fd, &sb) != 0) st = gptc_fail(GPTC_ERR_IO, "%s: cannot stat: %s", path, strerror(errno));
    else if (!S_ISREG(sb.st_mode))
        st = gptc_fail(GPTC_ERR_IO, "%s: not a regular file; give the path of a .safetensors file", path);
    else if (sb.st_size == 0)
        st = gptc_fail(GPTC_ERR_FORMAT, "%s: file is empty; it was never written or a write was cut short", path);
    else if (sb.st_size < 8)
        st = gptc_fail(GPTC_ERR_FORMAT,
                       "%s: file is %lld bytes, too short for the 8-byte header length; the file is truncated or not "
                       "safetensors",
                       path, (long long)sb.st_size);
    else if ((uint64_t)sb.st_size > (uint64_t)SIZE_MAX)
        st = gptc_fail(GPTC_ERR_IO, "%s: file is too large to map", path);
    if (st == GPTC_OK) {
        void *map = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (map == MAP_FAILED) st = gptc_fail(GPTC_ERR_IO, "%s: cannot map: %s", path, strerror(errno));
        else {
            f->map = map;
            f->map_size = (size_t)sb.st_size;
        }
    }
    close(fd);
    if (st == GPTC_OK) {
        verified_file id = file_identity(&sb);
        bool known = verify && was_verified(&id);
        st = gptc_st_parse(f, verify && !known);
        if (st == GPTC_OK && verify && !known) remember_verified(&id);
    }
    if (st != GPTC_OK) gptc_st_close(f);
    return st;
}

gptc_status gptc_st_open(gptc_st_file *f, const char *path) { return st_open(f, path, true); }

gptc_status gptc_st_open_header(gptc_st_file *f, const char *path) { return st_open(f, path, false); }

const gptc_st_tensor *gptc_st_find(const gptc_st_file *f, const char *name) {
    for (int i = 0; i < f->ntensors; i++)
        if (strcmp(f->tensors[i].name, name) == 0) return &f->tensors[i];
    return NULL;
}

const char *gptc_st_meta(const gptc_st_file *f, const char *key) {
    for (int i = 0; i < f->nmeta; i++)
        if (strcmp(f->meta_keys[i], key) == 0) return f->meta_vals[i];
    return NULL;
}

/* ---------------------------------------------------------------- writer */

typedef struct gptc_st_slot {
    int idx;
    size_t align;
} gptc_st_slot;

/* Wider dtypes first, then the order given: back-to-back tensors then sit at multiples of their
 * own element size (as Hugging Face's writer arranges), with no padding between them. */
static int gptc_st_cmp_slot(const void *a, const void *b) {
    const gptc_st_slot *x = a, *y = b;
    if (x->align != y->align) return x->align > y->align ? -1 : 1;
    return (x->idx > y->idx) - (x->idx < y->idx);
}

static cJSON *gptc_st_json_u64(uint64_t v) {
    char buf[24];
    snprintf(buf, sizeof buf, "%" PRIu64, v);
    return cJSON_CreateRaw(buf); /* exact digits; cJSON's double printing would go to 1e+15 */
}

/* Checks the writer's arguments; sizes[i] gets each tensor's byte count. */
static gptc_status gptc_st_check_entries(const char *path, const gptc_st_entry *entries, int n,
                                         const char *const *meta_keys, const char *const *meta_vals, int nmeta,
                                         size_t *sizes) {
    for (int i = 0; i < n; i++) {
        const gptc_st_entry *e = &entries[i];
        if (!e->name || !*e->name || strcmp(e->name, "__metadata__") == 0)
            return gptc_fail(GPTC_ERR_ARG, "%s: tensor %d has an empty or reserved name", path, i);
        if (gptc_dtype_size(e->dtype) == 0)
            return gptc_fail(GPTC_ERR_ARG, "%s: tensor %s has an unknown dtype %d", path, e->name, (int)e->dtype);
        if (e->ndim < 0 || e->ndim > GPTC_ST_MAX_DIMS)
            return gptc_fail(GPTC_ERR_ARG, "%s: tensor %s has %d dimensions (0..%d allowed)", path, e->name, e->ndim,
                             GPTC_ST_MAX_DIMS);
        size_t numel;
        for (int d = 0; d < e->ndim; d++)
            if (e->shape[d] < 0 || (double)e->shape[d] >= GPTC_ST_MAX_INT)
                return gptc_fail(GPTC_ERR_ARG, "%s: tensor %s has a bad dimension %" PRId64, path, e->name, e->shape[d]);
        if (!gptc_st_numel(e->shape, e->ndim, &numel) ||
            __builtin_mul_overflow(numel, gptc_dtype_size(e->dtype), &sizes[i]))
            return gptc_fail(GPTC_ERR_ARG, "%s: tensor %s: the shape's size overflows", path, e->name);
        if (sizes[i] > 0 && !e->data) return gptc_fail(GPTC_ERR_ARG, "%s: tensor %s has no data", path, e->name);
    }
    for (int i = 0; i < nmeta; i++) {
        if (!meta_keys[i] || !meta_vals[i])
            return gptc_fail(GPTC_ERR_ARG, "%s: metadata entry %d is missing its key or value", path, i);
        if (strncmp(meta_keys[i], GPTC_ST_CRC_PREFIX, strlen(GPTC_ST_CRC_PREFIX)) == 0)
            return gptc_fail(GPTC_ERR_ARG, "%s: metadata key %s is reserved for gptc's checksums", path, meta_keys[i]);
    }
    int nmax = n > nmeta ? n : nmeta;
    const char **names = gptc_alloc(sizeof(char *) * (size_t)nmax, "tensor names");
    if (!names) return GPTC_ERR_NOMEM;
    for (int i = 0; i < n; i++) names[i] = entries[i].name;
    const char *dup = gptc_st_find_dup(names, n);
    gptc_status st = GPTC_OK;
    if (dup) st = gptc_fail(GPTC_ERR_ARG, "%s: tensor name %s is used twice; names must be unique", path, dup);
    if (st == GPTC_OK) {
        for (int i = 0; i < nmeta; i++) names[i] = meta_keys[i];
        dup = gptc_st_find_dup(names, nmeta);
        if (dup) st = gptc_fail(GPTC_ERR_ARG, "%s: metadata key %s is given twice", path, dup);
    }
    gptc_free(names);
    return st;
}

gptc_status gptc_st_write(const char *path, const gptc_st_entry *entries, int n,
                          const char *const *meta_keys, const char *const *meta_vals, int nmeta) {
    if (n < 0 || nmeta < 0 || (n > 0 && !entries) || (nmeta > 0 && (!meta_keys || !meta_vals)))
        return gptc_fail(GPTC_ERR_ARG, "%s: bad tensor or metadata list (%d tensors, %d metadata entries)", path, n, nmeta);

    gptc_status st = GPTC_OK;
    cJSON *root = NULL;
    char *json = NULL, *header = NULL;
    const void **parts = NULL;
    size_t *lens = NULL;
    size_t *sizes = gptc_alloc(sizeof(size_t) * (size_t)n, "safetensors layout");
    uint64_t *offsets = gptc_alloc(sizeof(uint64_t) * (size_t)n, "safetensors layout");
    gptc_st_slot *order = gptc_alloc(sizeof(gptc_st_slot) * (size_t)n, "safetensors layout");
    parts = gptc_alloc(sizeof(void *) * ((size_t)n + 2), "safetensors layout");
    lens = gptc_alloc(sizeof(size_t) * ((size_t)n + 2), "safetensors layout");
    if (!sizes || !offsets || !order || !parts || !lens) {
        st = GPTC_ERR_NOMEM;
        goto done;
    }
    if ((st = gptc_st_check_entries(path, entries, n, meta_keys, meta_vals, nmeta, sizes)) != GPTC_OK) goto done;

    /* Layout: back to back (the format allows no holes), widest dtype first. */
    for (int i = 0; i < n; i++) {
        order[i].idx = i;
        order[i].align = gptc_dtype_size(entries[i].dtype);
    }
    qsort(order, (size_t)n, sizeof order[0], gptc_st_cmp_slot);
    uint64_t at = 0;
    for (int k = 0; k < n; k++) {
        int i = order[k].idx;
        offsets[i] = at;
        if (__builtin_add_overflow(at, (uint64_t)sizes[i], &at)) {
            st = gptc_fail(GPTC_ERR_ARG, "%s: tensors too large in total", path);
            goto done;
        }
        parts[k + 2] = entries[i].data;
        lens[k + 2] = sizes[i];
    }

    /* Header: __metadata__ first (given pairs, then a checksum per tensor), then the tensors. */
    root = cJSON_CreateObject();
    cJSON *meta = root ? cJSON_AddObjectToObject(root, "__metadata__") : NULL;
    if (!meta) goto nomem;
    for (int i = 0; i < nmeta; i++)
        if (!cJSON_AddStringToObject(meta, meta_keys[i], meta_vals[i])) goto nomem;
    for (int i = 0; i < n; i++) {
        size_t klen = strlen(GPTC_ST_CRC_PREFIX) + strlen(entries[i].name) + 1;
        char *key = gptc_alloc(klen, "a metadata key");
        if (!key) {
            st = GPTC_ERR_NOMEM;
            goto done;
        }
        snprintf(key, klen, "%s%s", GPTC_ST_CRC_PREFIX, entries[i].name);
        char hex[9];
        snprintf(hex, sizeof hex, "%08x", gptc_crc32c(0, entries[i].data, sizes[i]));
        cJSON *v = cJSON_AddStringToObject(meta, key, hex);
        gptc_free(key);
        if (!v) goto nomem;
    }
    for (int i = 0; i < n; i++) {
        const gptc_st_entry *e = &entries[i];
        cJSON *t = cJSON_AddObjectToObject(root, e->name);
        if (!t || !cJSON_AddStringToObject(t, "dtype", gptc_dtype_name(e->dtype))) goto nomem;
        cJSON *shape = cJSON_AddArrayToObject(t, "shape");
        cJSON *offs = cJSON_AddArrayToObject(t, "data_offsets");
        if (!shape || !offs) goto nomem;
        for (int d = 0; d < e->ndim; d++) {
            cJSON *v = gptc_st_json_u64((uint64_t)e->shape[d]);
            if (!v || !cJSON_AddItemToArray(shape, v)) {
                cJSON_Delete(v);
                goto nomem;
            }
        }
        for (int k = 0; k < 2; k++) {
            cJSON *v = gptc_st_json_u64(k == 0 ? offsets[i] : offsets[i] + sizes[i]);
            if (!v || !cJSON_AddItemToArray(offs, v)) {
                cJSON_Delete(v);
                goto nomem;
            }
        }
    }
    if (!(json = cJSON_PrintUnformatted(root))) goto nomem;

    /* Pad the header with spaces so that the data starts at a multiple of GPTC_ST_ALIGN. */
    size_t jlen = strlen(json);
    size_t hlen = jlen + (GPTC_ST_ALIGN - (8 + jlen) % GPTC_ST_ALIGN) % GPTC_ST_ALIGN;
    if (!(header = gptc_alloc(hlen, "a safetensors header"))) {
        st = GPTC_ERR_NOMEM;
        goto done;
    }
    memcpy(header, json, jlen);
    memset(header + jlen, ' ', hlen - jlen);
    unsigned char len8[8];
    for (int i = 0; i < 8; i++) len8[i] = (unsigned char)((uint64_t)hlen >> (8 * i));
    parts[0] = len8;
    lens[0] = 8;
    parts[1] = header;
    lens[1] = hlen;
    st = gptc_file_write_atomic(path, parts, lens, n + 2);
    goto done;

nomem:
    st = gptc_fail(GPTC_ERR_NOMEM, "%s: out of memory while building the safetensors header", path);
done:
    cJSON_Delete(root);
    if (json) cJSON_free(json);
    gptc_free(header);
    gptc_free(sizes);
    gptc_free(offsets);
    gptc_free(order);
    gptc_free(parts);
    gptc_free(lens);
    return st;
}
