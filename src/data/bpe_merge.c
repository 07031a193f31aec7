/* bpe_merge.c — BPE merging: the (left id, right id) -> rank table, and the merge loop that
 * repeatedly merges the lowest-rank adjacent pair, leftmost first. Short pieces take a scan over a
 * compact array (quadratic, tiny constant); long ones a linked list of symbols plus a min-heap of
 * adjacent pairs keyed by (rank, start byte) with stale entries skipped when popped (O(n log n)).
 * Both give the same result: the heap pops pairs in exactly the order the scan picks them. */
#include "data/bpe.h"

#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- the rank table */

gptc_status gptc_bpe_ranks_init(gptc_bpe_ranks *r, size_t nmerges) {
    memset(r, 0, sizeof *r);
    size_t slots = 16;
    while (slots < 2 * nmerges + 2) slots *= 2; /* load at most 1/2: probes stay short */
    r->keys = malloc(slots * sizeof *r->keys);
    r->rank = malloc(slots * sizeof *r->rank);
    r->merged = malloc(slots * sizeof *r->merged);
    if (!r->keys || !r->rank || !r->merged) {
        gptc_bpe_ranks_free(r);
        return gptc_fail(GPTC_ERR_NOMEM, "tokenizer gpt2: cannot allocate the merge table (%zu slots)", slots);
    }
    memset(r->keys, 0xff, slots * sizeof *r->keys); /* UINT64_MAX: empty */
    r->mask = slots - 1;
    return GPTC_OK;
}

void gptc_bpe_ranks_free(gptc_bpe_ranks *r) {
    free(r->keys);
    free(r->rank);
    free(r->merged);
    memset(r, 0, sizeof *r);
}

int gptc_bpe_ranks_add(gptc_bpe_ranks *r, int left, int right, int rank, int merged) {
    GPTC_ASSERT(left >= 0 && right >= 0 && rank >= 0 && 2 * (r->n + 1) <= r->mask + 1);
    uint64_t key = (uint64_t)(uint32_t)left << 32 | (uint32_t)right;
    size_t i = gptc_bpe_pair_hash(key) & r->mask;
    while (r->keys[i] != UINT64_MAX) {
        if (r->keys[i] == key) return r->rank[i];
        i = (i + 1) & r->mask;
    }
    r->keys[i] = key;
    r->rank[i] = rank;
    r->merged[i] = merged;
    r->n++;
    return -1;
}

/* ---------------------------------------------------------------- scratch */

typedef struct heap_entry {
    uint64_t key;    /* rank << 32 | start byte of the left symbol */
    uint32_t right;  /* start byte of the right symbol when pushed */
    uint32_t end;    /* end byte of the right symbol when pushed */
    int32_t merged;  /* id of the merged symbol */
} heap_entry;

void gptc_bpe_work_init(gptc_bpe_work *w) {
    memset(w, 0, sizeof *w);
    w->heap_threshold = GPTC_BPE_HEAP_THRESHOLD;
}

void gptc_bpe_work_free(gptc_bpe_work *w) {
    free(w->id);
    free(w->pair_rank);
    free(w->pair_merged);
    free(w->next);
    free(w->prev);
    free(w->heap);
    size_t keep = w->heap_threshold;
    memset(w, 0, sizeof *w);
    w->heap_threshold = keep;
}

/* Makes room for a piece of len bytes; false (error set) when memory runs out. */
static bool work_reserve(gptc_bpe_work *w, size_t len) {
    if (len <= w->cap) return true;
    if (len > UINT32_MAX / 4) { /* positions are uint32 */
        gptc_fail(GPTC_ERR_NOMEM, "tokenizer gpt2: a piece of %zu bytes is too long to merge", len);
        return false;
    }
    size_t cap = w->cap ? w->cap : 64;
    while (cap < len) cap *= 2;
    void *p[6] = {realloc(w->id, cap * sizeof *w->id), NULL, NULL, NULL, NULL, NULL};
    if (p[0]) w->id = p[0];
    p[1] = realloc(w->pair_rank, cap * sizeof *w->pair_rank);
    if (p[1]) w->pair_rank = p[1];
    p[2] = realloc(w->pair_merged, cap * sizeof *w->pair_merged);
    if (p[2]) w->pair_merged = p[2];
    p[3] = realloc(w->next, cap * sizeof *w->next);
    if (p[3]) w->next = p[3];
    p[4] = realloc(w->prev, cap * sizeof *w->prev);
    if (p[4]) w->prev = p[4];
    p[5] = realloc(w->heap, 3 * cap * sizeof(heap_entry));
    if (p[5]) w->heap = p[5];
    for (int k = 0; k < 6; k++)
        if (!p[k]) {
            gptc_fail(GPTC_ERR_NOMEM, "tokenizer gpt2: cannot allocate scratch for a piece of %zu bytes", len);
            return false; /* the arrays that grew keep working at the old capacity */
        }
    w->cap = cap;
    return true;
}

/* ---------------------------------------------------------------- scan: short pieces */

/* pair_rank/pair_merged of the pair (i, i+1) of the compact symbol array */
static inline void scan_rank(const gptc_bpe_ranks *r, gptc_bpe_work *w, size_t i) {
    int merged = 0;
    int rank = gptc_bpe_ranks_get(r, w->id[i], w->id[i + 1], &merged);
    w->pair_rank[i] = rank < 0 ? UINT32_MAX : (uint32_t)rank;
    w->pair_merged[i] = merged;
}

static size_t merge_scan(const gptc_bpe_ranks *r, const int32_t *byte_id, const unsigned char *piece, size_t len,
                         gptc_bpe_work *w, int *out) {
    int32_t *id = w->id;           /* [m] the symbols */
    uint32_t *prank = w->pair_rank; /* [m-1] rank of pair (i, i+1) */
    int32_t *pmerged = w->pair_merged;
    size_t m = len;
    for (size_t i = 0; i < m; i++) id[i] = byte_id[piece[i]];
    for (size_t i = 0; i + 1 < m; i++) scan_rank(r, w, i);
    while (m > 1) {
        size_t best = 0;
        uint32_t best_rank = UINT32_MAX;
        for (size_t i = 0; i + 1 < m; i++)
            if (prank[i] < best_rank) { /* strict: the leftmost of equal ranks wins */
                best_rank = prank[i];
                best = i;
            }
        if (best_rank == UINT32_MAX) break;
        id[best] = pmerged[best];
        /* drop symbol best+1 and pair best+1 (which started at it); pair best is recomputed */
        memmove(id + best + 1, id + best + 2, (m - best - 2) * sizeof *id);
        if (best + 2 < m) {
            memmove(prank + best + 1, prank + best + 2, (m - best - 3) * sizeof *prank);
            memmove(pmerged + best + 1, pmerged + best + 2, (m - best - 3) * sizeof *pmerged);
        }
        m--;
        if (best + 1 < m) scan_rank(r, w, best);
        if (best > 0) scan_rank(r, w, best - 1);
    }
    for (size_t i = 0; i < m; i++) out[i] = id[i];
    return m;
}

/* ---------------------------------------------------------------- heap: long pieces */

static inline void heap_push(heap_entry *h, size_t *n, heap_entry e) {
    size_t i = (*n)++;
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (h[parent].key <= e.key) break;
        h[i] = h[parent];
        i = parent;
    }
    h[i] = e;
}

static inline void heap_sift_down(heap_entry *h, size_t n, size_t i) {
    heap_entry e = h[i];
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && h[c + 1].key < h[c].key) c++;
        if (e.key <= h[c].key) break;
        h[i] = h[c];
        i = c;
    }
    h[i] = e;
}

#define NONE UINT32_MAX

/* Pushes the pair (left, right) if it merges; right ends at next[right]. */
static inline void heap_offer(const gptc_bpe_ranks *r, gptc_bpe_work *w, heap_entry *h, size_t *n, uint32_t left,
                              uint32_t right) {
    int merged = 0;
    int rank = gptc_bpe_ranks_get(r, w->id[left], w->id[right], &merged);
    if (rank < 0) return;
    heap_entry e = {(uint64_t)(uint32_t)rank << 32 | left, right, w->next[right], merged};
    heap_push(h, n, e);
}

static size_t merge_heap(const gptc_bpe_ranks *r, const int32_t *byte_id, const unsigned char *piece, size_t len,
                         gptc_bpe_work *w, int *out) {
    int32_t *id = w->id;
    uint32_t *next = w->next, *prev = w->prev;
    heap_entry *h = w->heap; /* at most (len-1) initial pairs + 2 per merge (len-1 merges) */
    uint32_t n = (uint32_t)len;
    for (uint32_t i = 0; i < n; i++) {
        id[i] = byte_id[piece[i]];
        next[i] = i + 1;
        prev[i] = i == 0 ? NONE : i - 1;
    }
    size_t hn = 0;
    for (uint32_t i = 0; i + 1 < n; i++) {
        int merged = 0;
        int rank = gptc_bpe_ranks_get(r, id[i], id[i + 1], &merged);
        if (rank >= 0) h[hn++] = (heap_entry){(uint64_t)(uint32_t)rank << 32 | i, i + 1, i + 2, merged};
    }
    for (size_t i = hn / 2; i-- > 0;) heap_sift_down(h, hn, i); /* heapify */
    while (hn > 0) {
        heap_entry e = h[0];
        h[0] = h[--hn];
        if (hn > 0) heap_sift_down(h, hn, 0);
        uint32_t left = (uint32_t)e.key, right = e.right;
        /* stale unless both symbols still span exactly what they spanned when pushed */
        if (id[left] < 0 || next[left] != right || id[right] < 0 || next[right] != e.end) continue;
        id[left] = e.merged;
        id[right] = -1;
        next[left] = e.end;
        if (e.end < n) prev[e.end] = left;
        if (prev[left] != NONE) heap_offer(r, w, h, &hn, prev[left], left);
        if (next[left] < n) heap_offer(r, w, h, &hn, left, next[left]);
    }
    size_t m = 0;
    for (uint32_t i = 0; i < n; i = next[i]) out[m++] = id[i];
    return m;
}

size_t gptc_bpe_merge(const gptc_bpe_ranks *r, const int32_t *byte_id, const unsigned char *piece, size_t len,
                      gptc_bpe_work *w, int *out) {
    GPTC_ASSERT(len > 0);
    if (len == 1) {
        out[0] = byte_id[piece[0]];
        return 1;
    }
    if (!work_reserve(w, len)) return 0;
    if (len >= w->heap_threshold) return merge_heap(r, byte_id, piece, len, w, out);
    return merge_scan(r, byte_id, piece, len, w, out);
}
