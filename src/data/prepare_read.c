/* prepare_read.c — `gptc prepare`'s input side: streams the input files and cuts them into chunks
 * at document ends and safe cuts, so that chunks can be encoded in parallel (see data.h). */
#include "data/data.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Read-ahead granularity: at least this much per read(2). */
#define READ_MIN_BLOCK ((size_t)64 << 10)

static bool read_is_space(unsigned char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r';
}

bool gptc_prep_safe_cut(const unsigned char *text, size_t p) {
    if (p == 0 || text[p] != ' ') return false;
    unsigned char prev = text[p - 1];
    return prev < 0x80 && !read_is_space(prev);
}

void gptc_prep_reader_init(gptc_prep_reader *r, const char *const *paths, const uint64_t *sizes, int nfiles,
                           const char *sep, size_t chunk_bytes, size_t max_chunk, uint64_t val_at) {
    memset(r, 0, sizeof *r);
    r->paths = paths;
    r->sizes = sizes;
    r->nfiles = nfiles;
    r->sep = sep && sep[0] ? sep : NULL;
    r->seplen = r->sep ? strlen(sep) : 0;
    r->chunk_bytes = chunk_bytes ? chunk_bytes : 1;
    r->max_chunk = max_chunk > r->chunk_bytes ? max_chunk : r->chunk_bytes;
    r->block = r->chunk_bytes > READ_MIN_BLOCK ? r->chunk_bytes : READ_MIN_BLOCK;
    r->val_at = val_at;
    r->fd = -1;
    r->doc_start = true;
    r->sep_hit = UINT64_MAX;
}

void gptc_prep_reader_close(gptc_prep_reader *r) {
    if (r->fd >= 0) close(r->fd);
    free(r->buf);
    r->fd = -1;
    r->buf = NULL;
    r->cap = r->len = 0;
}

/* ---------------------------------------------------------------- files and the buffer */

static uint64_t read_file_end(const gptc_prep_reader *r) { return r->file_start + r->sizes[r->file]; }

/* Opens the current file and checks that it is the file the checks saw (same size). */
static gptc_status read_open(gptc_prep_reader *r) {
    const char *path = r->paths[r->file];
    r->fd = open(path, O_RDONLY | O_CLOEXEC);
    if (r->fd < 0) return gptc_fail(GPTC_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(r->fd, &sb) != 0) return gptc_fail(GPTC_ERR_IO, "%s: cannot stat: %s", path, strerror(errno));
    if (!S_ISREG(sb.st_mode) || (uint64_t)sb.st_size != r->sizes[r->file])
        return gptc_fail(GPTC_ERR_IO, "%s: changed while prepare ran (%llu bytes when checked, now %llu); "
                                      "leave the inputs alone until it is done",
                         path, (unsigned long long)r->sizes[r->file], (unsigned long long)sb.st_size);
    return GPTC_OK;
}

/* Reads the next block of the current file onto the end of the buffer (growing it as needed).
 * The caller makes sure the file has bytes left. */
static gptc_status read_more(gptc_prep_reader *r) {
    uint64_t have = r->base + r->len, left = read_file_end(r) - have;
    size_t want = left < r->block ? (size_t)left : r->block;
    if (r->len + want > r->cap) {
        size_t cap = r->cap ? r->cap : r->block;
        while (cap < r->len + want) cap *= 2;
        unsigned char *p = realloc(r->buf, cap);
        if (!p) return gptc_fail(GPTC_ERR_NOMEM, "%s: cannot allocate %zu bytes of read buffer", r->paths[r->file], cap);
        r->buf = p;
        r->cap = cap;
    }
    while (want > 0) {
        ssize_t got = read(r->fd, r->buf + r->len, want);
        if (got < 0 && errno == EINTR) continue;
        if (got < 0)
            return gptc_fail(GPTC_ERR_IO, "%s: cannot read at byte %llu: %s", r->paths[r->file],
                             (unsigned long long)(have - r->file_start), strerror(errno));
        if (got == 0)
            return gptc_fail(GPTC_ERR_IO, "%s: ended at byte %llu of %llu; it changed while prepare ran (leave the "
                                          "inputs alone until it is done)",
                             r->paths[r->file], (unsigned long long)(have - r->file_start),
                             (unsigned long long)r->sizes[r->file]);
        r->len += (size_t)got;
        have += (uint64_t)got;
        want -= (size_t)got;
    }
    return GPTC_OK;
}

/* Moves to the next file (opening it); the file boundary is a document boundary. */
static gptc_status read_next_file(gptc_prep_reader *r) {
    if (r->fd >= 0) close(r->fd);
    r->fd = -1;
    r->file_start += r->sizes[r->file];
    r->file++;
    r->doc_start = true;
    r->sep_hit = UINT64_MAX; /* separators never span files */
    r->sep_clear = r->file_start;
    return r->file < r->nfiles ? read_open(r) : GPTC_OK;
}

/* ---------------------------------------------------------------- cutting */

/* The first safe cut in [lo, hi) (offsets in the concatenation; lo - 1 is inside the chunk), or
 * UINT64_MAX. */
static uint64_t read_find_safe(const gptc_prep_reader *r, uint64_t lo, uint64_t hi) {
    const unsigned char *b = r->buf;
    size_t i = (size_t)(lo - r->base), end = (size_t)(hi - r->base);
    while (i < end) {
        const unsigned char *sp = memchr(b + i, ' ', end - i);
        if (!sp) break;
        i = (size_t)(sp - b);
        if (gptc_prep_safe_cut(b, i)) return r->base + i;
        i++;
    }
    return UINT64_MAX;
}

/* The first separator that starts in [from, base+len) and fits in the buffer, or UINT64_MAX. */
static uint64_t read_find_sep(const gptc_prep_reader *r, uint64_t from) {
    size_t i = (size_t)(from - r->base);
    if (i >= r->len) return UINT64_MAX;
    const unsigned char *hit = memmem(r->buf + i, r->len - i, r->sep, r->seplen);
    return hit ? r->base + (uint64_t)(hit - r->buf) : UINT64_MAX;
}

/* Finds where the chunk that starts at r->pos ends. *cut is its end; *next is where the next
 * chunk starts (after a separator) and *doc_end says whether the document ends at *cut. Reads as
 * much as that needs; the decision depends only on the bytes. */
static gptc_status read_cut(gptc_prep_reader *r, uint64_t *cut, uint64_t *next, bool *doc_end) {
    uint64_t pos = r->pos, fend = read_file_end(r);
    uint64_t target = pos + r->chunk_bytes;
    if (!r->val && r->val_at > pos && r->val_at < target) target = r->val_at; /* cut exactly where val begins */
    uint64_t hard = fend - pos > r->max_chunk ? pos + r->max_chunk : UINT64_MAX;
    uint64_t k = pos; /* no separator starts in [pos, k), no safe cut lies in [target, k) */
    for (;;) {
        uint64_t avail = r->base + r->len;
        bool eof = avail == fend;
        uint64_t q = UINT64_MAX, free_end = avail; /* free_end: no separator starts before it */
        if (r->sep) {
            if (r->sep_hit == UINT64_MAX || r->sep_hit < pos) { /* search on from what is known */
                uint64_t from = r->sep_clear > k ? r->sep_clear : k;
                r->sep_hit = read_find_sep(r, from);
                if (r->sep_hit == UINT64_MAX)
                    r->sep_clear = eof ? avail : avail - from >= r->seplen ? avail - r->seplen + 1 : from;
            }
            q = r->sep_hit;
            free_end = q != UINT64_MAX ? q : r->sep_clear;
        }
        uint64_t lo = k > target ? k : target, hi = free_end < hard ? free_end : hard;
        uint64_t p = lo < hi ? read_find_safe(r, lo, hi) : UINT64_MAX;
        if (p != UINT64_MAX) {
            *cut = *next = p;
            *doc_end = false;
            return GPTC_OK;
        }
        if (q != UINT64_MAX && q <= hard) {
            *cut = q;
            *next = q + r->seplen;
            *doc_end = true;
            return GPTC_OK;
        }
        if (hard != UINT64_MAX && free_end > hard) {
            /* no safe cut for max_chunk bytes: cut at the start of a UTF-8 character */
            uint64_t c = hard;
            for (int i = 0; i < 3 && c > pos + 1 && (r->buf[c - r->base] & 0xC0) == 0x80; i++) c--;
            *cut = *next = c;
            *doc_end = false;
            return GPTC_OK;
        }
        if (eof) {
            *cut = *next = fend;
            *doc_end = true;
            return GPTC_OK;
        }
        k = free_end;
        gptc_status st = read_more(r);
        if (st != GPTC_OK) return st;
    }
}

/* The next non-empty chunk, or *have = false at the end of the input. */
static gptc_status read_chunk(gptc_prep_reader *r, gptc_prep_chunk *c, bool *have) {
    *have = false;
    for (;;) {
        if (r->file >= r->nfiles) return GPTC_OK;
        if (r->fd < 0 && r->pos == r->file_start) {
            gptc_status st = read_open(r);
            if (st != GPTC_OK) return st;
        }
        if (r->pos == read_file_end(r)) {
            gptc_status st = read_next_file(r);
            if (st != GPTC_OK) return st;
            continue;
        }
        uint64_t cut, next;
        bool doc_end;
        gptc_status st = read_cut(r, &cut, &next, &doc_end);
        if (st != GPTC_OK) return st;
        if (cut == r->pos) { /* an empty document (a separator at a document start): skip it */
            r->pos = next;
            r->doc_start = true;
            continue;
        }
        if (!r->val && r->pos >= r->val_at) r->val = true;
        c->off = (size_t)(r->pos - r->base);
        c->len = (size_t)(cut - r->pos);
        c->pos = r->pos;
        c->doc_start = r->doc_start;
        c->val = r->val;
        if (r->doc_start) r->documents++;
        r->pos = next;
        r->doc_start = doc_end;
        *have = true;
        return GPTC_OK;
    }
}

gptc_status gptc_prep_reader_batch(gptc_prep_reader *r, gptc_prep_chunk *chunks, int max, size_t budget, int *n) {
    *n = 0;
    /* the previous batch is done with: keep only the bytes from pos on */
    if (r->pos > r->base) {
        size_t drop = (size_t)(r->pos - r->base); /* <= len: a cut never lies past the bytes read */
        memmove(r->buf, r->buf + drop, r->len - drop);
        r->len -= drop;
        r->base += drop;
    }
    while (*n < max && r->pos - r->base < budget) {
        bool have;
        gptc_status st = read_chunk(r, &chunks[*n], &have);
        if (st != GPTC_OK) return st;
        if (!have) break;
        (*n)++;
    }
    return GPTC_OK;
}
