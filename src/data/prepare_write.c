/* prepare_write.c — `gptc prepare`'s output side: appends tokens to shards kept under hidden temp
 * names (placeholder header, then the count, fsync) and renames them all once the run succeeded. */
#include "data/data.h"
#include "io/io.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "shards hold little-endian tokens, staged in host order");

#define WRITE_HEADER_BYTES ((size_t)GPTC_SHARD_HEADER_INTS * 4)

static const char *const k_split_name[2] = {"train", "val"};

gptc_status gptc_prep_writer_init(gptc_prep_writer *w, const char *dir, uint32_t shard_tokens) {
    memset(w, 0, sizeof *w);
    w->dir = dir;
    w->shard_tokens = shard_tokens;
    w->fd = -1;
    w->stage = malloc(GPTC_PREP_STAGE * sizeof *w->stage);
    if (!w->stage) return gptc_fail(GPTC_ERR_NOMEM, "cannot allocate the shard write buffer");
    return GPTC_OK;
}

void gptc_prep_writer_free(gptc_prep_writer *w) {
    if (w->fd >= 0) close(w->fd);
    for (int i = 0; i < w->nshards; i++) {
        free(w->shards[i].tmp);
        free(w->shards[i].final);
    }
    free(w->shards);
    free(w->stage);
    memset(w, 0, sizeof *w);
    w->fd = -1;
}

/* "DIR/NAME" with NAME from a format; NULL on OOM. */
static char *write_path(const char *dir, const char *fmt, const char *split, int index, long pid) {
    size_t dlen = strlen(dir), cap = dlen + 64;
    char *p = malloc(cap);
    if (!p) return NULL;
    int k = snprintf(p, cap, "%s%s", dir, dlen && dir[dlen - 1] == '/' ? "" : "/");
    snprintf(p + k, cap - (size_t)k, fmt, split, index, pid);
    return p;
}

/* Writes all n bytes at the current offset. Returns 0, or -1 with errno set. */
static int write_full(int fd, const void *buf, size_t n) {
    const char *p = buf;
    while (n > 0) {
        ssize_t got = write(fd, p, n);
        if (got < 0 && errno == EINTR) continue;
        if (got < 0) return -1;
        if (got == 0) {
            errno = EIO;
            return -1;
        }
        p += got;
        n -= (size_t)got;
    }
    return 0;
}

/* A write failure on shard s (named by its final name: the temp file is an inner detail). */
static gptc_status write_error(const gptc_prep_shard *s, const char *what) {
    return gptc_fail(GPTC_ERR_IO, "%s: %s: %s; check free space and the folder's permissions", s->final, what,
                     strerror(errno));
}

/* Starts a shard of split: a new temp file with an all-zero placeholder header (not a valid shard
 * until the count is in). */
static gptc_status write_open(gptc_prep_writer *w, int split) {
    if (!w->dir_made) {
        gptc_status st = gptc_mkdir_p(w->dir);
        if (st != GPTC_OK) return st;
        w->dir_made = true;
    }
    if (w->nshards == w->cap) {
        int cap = w->cap ? w->cap * 2 : 16;
        gptc_prep_shard *s = realloc(w->shards, (size_t)cap * sizeof *s);
        if (!s) return gptc_fail(GPTC_ERR_NOMEM, "cannot allocate the list of shards");
        w->shards = s;
        w->cap = cap;
    }
    gptc_prep_shard *s = &w->shards[w->nshards];
    memset(s, 0, sizeof *s);
    s->split = split;
    s->index = w->next_index[split];
    s->tmp = write_path(w->dir, ".%s_%06d.bin.tmp-%ld", k_split_name[split], s->index, (long)getpid());
    s->final = write_path(w->dir, "%s_%06d.bin", k_split_name[split], s->index, 0);
    if (!s->tmp || !s->final) {
        free(s->tmp);
        free(s->final);
        return gptc_fail(GPTC_ERR_NOMEM, "cannot allocate a shard name");
    }
    w->nshards++; /* from here on discard removes the temp */
    w->fd = open(s->tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (w->fd < 0) return write_error(s, "cannot create");
    unsigned char hdr[WRITE_HEADER_BYTES];
    memset(hdr, 0, sizeof hdr);
    if (write_full(w->fd, hdr, sizeof hdr) != 0) return write_error(s, "cannot write");
    w->split = split;
    w->count = 0;
    w->next_index[split]++;
    return GPTC_OK;
}

static gptc_status write_flush(gptc_prep_writer *w) {
    if (w->nstage == 0) return GPTC_OK;
    if (write_full(w->fd, w->stage, w->nstage * sizeof *w->stage) != 0)
        return write_error(&w->shards[w->nshards - 1], "cannot write");
    w->nstage = 0;
    return GPTC_OK;
}

static void write_put32(unsigned char *p, uint32_t v) {
    p[0] = (unsigned char)v;
    p[1] = (unsigned char)(v >> 8);
    p[2] = (unsigned char)(v >> 16);
    p[3] = (unsigned char)(v >> 24);
}

/* Finishes the open shard: the rest of its tokens, the real header, fsync, close. */
static gptc_status write_close(gptc_prep_writer *w) {
    if (w->fd < 0) return GPTC_OK;
    gptc_prep_shard *s = &w->shards[w->nshards - 1];
    gptc_status st = write_flush(w);
    if (st != GPTC_OK) return st;
    unsigned char hdr[12];
    write_put32(hdr, GPTC_SHARD_MAGIC);
    write_put32(hdr + 4, GPTC_SHARD_VERSION);
    write_put32(hdr + 8, w->count);
    ssize_t got;
    do got = pwrite(w->fd, hdr, sizeof hdr, 0); while (got < 0 && errno == EINTR);
    if (got != (ssize_t)sizeof hdr) {
        if (got >= 0) errno = EIO;
        return write_error(s, "cannot write the header");
    }
    int rc;
    do rc = fsync(w->fd); while (rc != 0 && errno == EINTR);
    if (rc != 0) return write_error(s, "cannot sync");
    rc = close(w->fd);
    w->fd = -1;
    if (rc != 0 && errno != EINTR) return write_error(s, "cannot close");
    s->tokens = w->count;
    return GPTC_OK;
}

gptc_status gptc_prep_writer_put(gptc_prep_writer *w, int split, const int *ids, size_t n) {
    GPTC_ASSERT(split == 0 || split == 1);
    gptc_status st;
    if (w->fd >= 0 && w->split != split) {
        GPTC_ASSERT(split > w->split); /* train, then val */
        if ((st = write_close(w)) != GPTC_OK) return st;
    }
    for (size_t i = 0; i < n; i++) {
        int id = ids[i];
        if (id < 0 || id > 65535)
            return gptc_fail(GPTC_ERR_FORMAT,
                             "token id %d does not fit a shard (they hold uint16 ids, 0..65535); use a tokenizer "
                             "with at most 65536 ids",
                             id);
        if (w->fd < 0 && (st = write_open(w, split)) != GPTC_OK) return st;
        w->stage[w->nstage++] = (uint16_t)id;
        w->count++;
        w->tokens[split]++;
        if (w->nstage == GPTC_PREP_STAGE && (st = write_flush(w)) != GPTC_OK) return st;
        if (w->count == w->shard_tokens && (st = write_close(w)) != GPTC_OK) return st;
    }
    return GPTC_OK;
}

gptc_status gptc_prep_writer_commit(gptc_prep_writer *w) {
    gptc_status st = write_close(w);
    if (st != GPTC_OK) return st;
    for (int i = 0; i < w->nshards; i++) {
        gptc_prep_shard *s = &w->shards[i];
        if (rename(s->tmp, s->final) != 0)
            return gptc_fail(GPTC_ERR_IO, "%s: cannot rename %s to it: %s", s->final, s->tmp, strerror(errno));
        s->renamed = true;
    }
    return w->nshards ? gptc_fsync_dir(w->dir) : GPTC_OK;
}

void gptc_prep_writer_discard(gptc_prep_writer *w) {
    if (w->fd >= 0) close(w->fd);
    w->fd = -1;
    for (int i = 0; i < w->nshards; i++)
        if (!w->shards[i].renamed) unlink(w->shards[i].tmp);
}
