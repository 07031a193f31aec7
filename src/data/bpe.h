/* bpe.h — private to src/data: the byte-level BPE core under tokenizer_gpt2.c: the merge-rank table
 * keyed by token-id pairs, the merge loop (a quadratic scan for short pieces, a heap for long ones),
 * and the bounded per-state cache of pieces already encoded. */
#ifndef GPTC_DATA_BPE_H
#define GPTC_DATA_BPE_H

#include "core/core.h"

/* ---- merge ranks: (left id, right id) -> (rank, merged id); open addressing, read-only once built */
typedef struct gptc_bpe_ranks {
    uint64_t *keys;  /* [mask+1] (uint64)left << 32 | right, or UINT64_MAX for an empty slot */
    int32_t *rank;   /* [mask+1] line index in vocab.bpe (0 = merged first) */
    int32_t *merged; /* [mask+1] id of the concatenation */
    size_t mask;
    size_t n;
} gptc_bpe_ranks;

/* Sizes the table for nmerges pairs. GPTC_ERR_NOMEM on failure. */
gptc_status gptc_bpe_ranks_init(gptc_bpe_ranks *r, size_t nmerges);
void gptc_bpe_ranks_free(gptc_bpe_ranks *r);
/* Adds a pair; returns the rank already recorded for it (the pair is then left unchanged), or -1
 * when it was new. Never adds more than the nmerges given to init. */
int gptc_bpe_ranks_add(gptc_bpe_ranks *r, int left, int right, int rank, int merged);

static inline uint64_t gptc_bpe_pair_hash(uint64_t key) {
    uint64_t h = key * 0x9E3779B97F4A7C15ull;
    return h ^ (h >> 29);
}

/* The rank of a pair, or -1 if it never merges (*merged gets the id of the concatenation). */
static inline int gptc_bpe_ranks_get(const gptc_bpe_ranks *r, int left, int right, int *merged) {
    uint64_t key = (uint64_t)(uint32_t)left << 32 | (uint32_t)right;
    for (size_t i = gptc_bpe_pair_hash(key) & r->mask;; i = (i + 1) & r->mask) {
        if (r->keys[i] == key) {
            *merged = r->merged[i];
            return r->rank[i];
        }
        if (r->keys[i] == UINT64_MAX) return -1;
    }
}

/* ---- the merge loop. Scratch memory grows with the longest piece seen and is reused. */
typedef struct gptc_bpe_work {
    size_t cap;            /* bytes of piece the arrays are sized for */
    int32_t *id;           /* [cap] scan: id of symbol i; heap: id of the symbol starting at byte i
                            * (-1 once merged into its left neighbour) */
    uint32_t *pair_rank;   /* [cap] scan: rank of pair (i, i+1), UINT32_MAX if it never merges */
    int32_t *pair_merged;  /* [cap] scan: the id that pair would merge into */
    uint32_t *next, *prev; /* [cap] heap: start byte of the next / previous symbol */
    void *heap;            /* [3*cap] heap: pending pairs, ordered by (rank, start byte) */
    size_t heap_threshold; /* pieces of at least this many bytes take the heap */
} gptc_bpe_work;

/* The default heap_threshold: below it the scan's small constant wins. */
#define GPTC_BPE_HEAP_THRESHOLD 48

void gptc_bpe_work_init(gptc_bpe_work *w);
void gptc_bpe_work_free(gptc_bpe_work *w);

/* Encodes piece[0..len) (len >= 1): starts from byte_id[b] for each byte, then repeatedly merges
 * the adjacent pair of lowest rank, leftmost first, until no pair merges. Writes the ids to out
 * (room for len ids) and returns their count, or 0 with the error set when scratch memory cannot
 * be had (GPTC_ERR_NOMEM). */
size_t gptc_bpe_merge(const gptc_bpe_ranks *r, const int32_t *byte_id, const unsigned char *piece, size_t len,
                      gptc_bpe_work *w, int *out);

/* ---- the piece cache: piece bytes -> id list, bounded; when full it is emptied and refilled */
typedef struct gptc_bpe_cache {
    void *slots;          /* [mask+1] entries (count 0 = empty) */
    size_t mask;
    size_t count, max_count;
    unsigned char *keys;  /* [key_cap] piece bytes of the entries, back to back */
    size_t key_used, key_cap;
    int32_t *ids;         /* [id_cap] ids of the entries, back to back */
    size_t id_used, id_cap;
    uint64_t resets;      /* times it was emptied (for tests and benchmarks) */
} gptc_bpe_cache;

/* Pieces longer than this are not cached (they are rare, and would crowd out the common ones). */
#define GPTC_BPE_CACHE_MAX_PIECE 128

gptc_status gptc_bpe_cache_init(gptc_bpe_cache *c);
void gptc_bpe_cache_free(gptc_bpe_cache *c);
/* The hash that get and put take (computed once per piece). */
uint64_t gptc_bpe_cache_hash(const unsigned char *piece, size_t len);
/* The ids of a cached piece (and their count in *nids), or NULL. The pointer is valid until the
 * next put. */
const int32_t *gptc_bpe_cache_get(const gptc_bpe_cache *c, uint64_t hash, const unsigned char *piece, size_t len,
                                  size_t *nids);
/* Records a piece's ids (skipped when too long); empties the cache first when it is full. */
void gptc_bpe_cache_put(gptc_bpe_cache *c, uint64_t hash, const unsigned char *piece, size_t len, const int *ids,
                        size_t nids);

#endif
