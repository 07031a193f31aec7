/* loader.c — the resumable (B, T+1) window loader over mapped token shards.
 *
 * Windows: shard s of n tokens holds (n-1)/T windows; window k starts at token k*T and spans T+1
 * tokens (T inputs, and the T targets one further). Windows are numbered shard by shard in path
 * order; that numbering is the sequential order.
 *
 * Shuffled order of epoch e: the identity 0..nwindows-1 permuted by Fisher-Yates (i from
 * nwindows-1 down to 1, j uniform in [0, i] by rejection sampling, swap i and j) drawing from a
 * gptc_rng seeded with gptc_hash64(seed ^ gptc_hash64(e)). It depends only on (seed, e, nwindows),
 * so a position (epoch, cursor) restores the loader exactly.
 *
 * Batches: a call to next() serves window order[cursor + rank*B + b] as row b, then advances cursor
 * by world*B (the whole global batch). When cursor + world*B > nwindows the epoch ends first:
 * epoch += 1, cursor = 0, and the order is rebuilt in place. next() never allocates. */
#include "data/data.h"

#include <stdlib.h>
#include <string.h>

/* A uniform integer in [0, bound) without modulo bias. */
static uint64_t loader_uniform_below(gptc_rng *r, uint64_t bound) {
    uint64_t threshold = (0 - bound) % bound; /* 2^64 mod bound: values below it are rejected */
    uint64_t x;
    do x = gptc_rng_next(r);
    while (x < threshold);
    return x % bound;
}

/* Fills l->order for epoch: the identity, permuted when shuffling. */
static void loader_build_order(gptc_loader *l, uint64_t epoch) {
    uint64_t *order = l->order; /* [nwindows] */
    for (size_t i = 0; i < l->nwindows; i++) order[i] = i;
    if (l->shuffle) {
        gptc_rng rng;
        gptc_rng_seed(&rng, gptc_hash64(l->seed ^ gptc_hash64(epoch)));
        for (size_t i = l->nwindows; i > 1; i--) {
            size_t j = (size_t)loader_uniform_below(&rng, i); /* j in [0, i-1] */
            uint64_t t = order[i - 1];
            order[i - 1] = order[j];
            order[j] = t;
        }
    }
    l->order_epoch = epoch;
}

/* Makes l->order the order of epoch (rebuilding only when shuffling and the epoch differs). */
static void loader_use_epoch(gptc_loader *l, uint64_t epoch) {
    if (l->shuffle && l->order_epoch != epoch) loader_build_order(l, epoch);
    l->order_epoch = epoch;
}

gptc_status gptc_loader_open(gptc_loader *l, char *const *paths, int npaths, int B, int T, int vocab,
                             bool shuffle, uint64_t seed, int rank, int world) {
    memset(l, 0, sizeof *l);
    if (npaths < 1) return gptc_fail(GPTC_ERR_ARG, "no shard files to load");
    if (B < 1) return gptc_fail(GPTC_ERR_ARG, "'batch' %d: must be at least 1", B);
    if (T < 1) return gptc_fail(GPTC_ERR_ARG, "'seq' %d: must be at least 1", T);
    if (vocab < 1) return gptc_fail(GPTC_ERR_ARG, "vocabulary %d: must be at least 1", vocab);
    if (world < 1 || rank < 0 || rank >= world)
        return gptc_fail(GPTC_ERR_ARG, "rank %d of %d ranks: need 0 <= rank < ranks", rank, world);
    l->B = B;
    l->T = T;
    l->vocab = vocab;
    l->shuffle = shuffle;
    l->seed = seed;
    l->rank = rank;
    l->world = world;

    gptc_status st = GPTC_OK;
    l->shards = gptc_alloc((size_t)npaths * sizeof *l->shards, "the shard table");
    if (!l->shards) return GPTC_ERR_NOMEM;
    size_t ntokens = 0;
    for (int i = 0; i < npaths; i++) {
        st = gptc_shard_open(&l->shards[i], paths[i]);
        if (st != GPTC_OK) goto fail;
        l->nshards = i + 1;
        size_t n = l->shards[i].ntok;
        ntokens += n;
        if (n > 0) l->nwindows += (n - 1) / (size_t)T;
    }
    size_t need = (size_t)B * (size_t)world;
    if (l->nwindows < need) {
        char what[4200];
        if (npaths == 1) snprintf(what, sizeof what, "%s", paths[0]);
        else snprintf(what, sizeof what, "%d shards (%s, ...)", npaths, paths[0]);
        st = gptc_fail(GPTC_ERR_ARG,
                       "%s: holds %zu tokens in %zu windows of %d+1, fewer than the %zu (%d per rank × %d "
                       "ranks) a batch needs; use a smaller 'batch' or 'seq', or more data",
                       what, ntokens, l->nwindows, T, need, B, world);
        goto fail;
    }
    l->win_shard = gptc_alloc(l->nwindows * sizeof *l->win_shard, "the window table");
    l->win_start = gptc_alloc(l->nwindows * sizeof *l->win_start, "the window table");
    l->order = gptc_alloc(l->nwindows * sizeof *l->order, "the window order");
    if (!l->win_shard || !l->win_start || !l->order) {
        st = GPTC_ERR_NOMEM;
        goto fail;
    }
    size_t w = 0;
    for (int s = 0; s < l->nshards; s++) {
        size_t n = l->shards[s].ntok, k = n > 0 ? (n - 1) / (size_t)T : 0;
        for (size_t i = 0; i < k; i++, w++) {
            l->win_shard[w] = (uint32_t)s;
            l->win_start[w] = (uint64_t)i * (uint64_t)T;
        }
    }
    GPTC_ASSERT(w == l->nwindows);
    loader_build_order(l, 0);
    return GPTC_OK;
fail:
    gptc_loader_close(l);
    return st;
}

void gptc_loader_close(gptc_loader *l) {
    for (int i = 0; i < l->nshards; i++) gptc_shard_close(&l->shards[i]);
    gptc_free(l->shards);
    gptc_free(l->win_shard);
    gptc_free(l->win_start);
    gptc_free(l->order);
    memset(l, 0, sizeof *l);
}

gptc_status gptc_loader_next(gptc_loader *l, int *inputs, int *targets) {
    /* inputs (B,T), targets (B,T) */
    const size_t B = (size_t)l->B, T = (size_t)l->T, global = B * (size_t)l->world;
    gptc_loader_pos pos = l->pos;
    if (pos.cursor + global > l->nwindows) {
        pos.epoch++;
        pos.cursor = 0;
    }
    loader_use_epoch(l, pos.epoch);
    const uint64_t *block = l->order + pos.cursor + (size_t)l->rank * B; /* [B] windows of this rank */
    for (size_t b = 0; b < B; b++) {
        uint64_t w = block[b];
        const gptc_shard *s = &l->shards[l->win_shard[w]];
        const uint16_t *tok = s->tokens + l->win_start[w]; /* [T+1] */
        for (size_t t = 0; t <= T; t++)
            if (tok[t] >= l->vocab)
                return gptc_fail(GPTC_ERR_FORMAT,
                                 "%s: token id %d at offset %llu is >= the model's vocabulary %d; the "
                                 "shard was made with another tokenizer: prepare the data with the "
                                 "model's tokenizer, or train a model with a larger vocabulary",
                                 s->path, tok[t], (unsigned long long)(l->win_start[w] + t), l->vocab);
        int *in = inputs + b * T, *tg = targets + b * T; /* [T] each */
        for (size_t t = 0; t < T; t++) {
            in[t] = tok[t];
            tg[t] = tok[t + 1];
        }
    }
    pos.cursor += global;
    l->pos = pos;
    return GPTC_OK;
}

gptc_loader_pos gptc_loader_tell(const gptc_loader *l) { return l->pos; }

gptc_status gptc_loader_seek(gptc_loader *l, gptc_loader_pos pos) {
    if (pos.cursor > l->nwindows)
        return gptc_fail(GPTC_ERR_STATE,
                         "data position (epoch %llu, window %llu) is past the %zu windows of this data; "
                         "resume with the same data, 'batch' and 'seq' the run started with",
                         (unsigned long long)pos.epoch, (unsigned long long)pos.cursor, l->nwindows);
    loader_use_epoch(l, pos.epoch);
    l->pos = pos;
    return GPTC_OK;
}

void gptc_loader_rewind(gptc_loader *l) {
    gptc_loader_pos zero = {0, 0};
    loader_use_epoch(l, 0);
    l->pos = zero;
}

gptc_status gptc_loader_check_vocab(const gptc_loader *l, int part, int parts) {
    size_t total = 0;
    for (int s = 0; s < l->nshards; s++) total += l->shards[s].ntok;
    size_t lo = (size_t)((unsigned __int128)total * (unsigned)part / (unsigned)parts);
    size_t hi = (size_t)((unsigned __int128)total * (unsigned)(part + 1) / (unsigned)parts);
    size_t base = 0; /* the first token of shard s in the concatenation */
    for (int s = 0; s < l->nshards; base += l->shards[s].ntok, s++) {
        const gptc_shard *sh = &l->shards[s];
        size_t a = lo > base ? lo - base : 0, b = hi - base < sh->ntok ? hi - base : sh->ntok;
        if (hi <= base || a >= b) continue;
        const uint16_t *tok = sh->tokens; /* [ntok] */
        unsigned top = 0;
        #pragma omp parallel for reduction(max : top) schedule(static)
        for (size_t i = a; i < b; i++) top = tok[i] > top ? tok[i] : top;
        if ((int)top < l->vocab) continue;
        for (size_t i = a; i < b; i++)
            if (tok[i] >= l->vocab)
                return gptc_fail(GPTC_ERR_FORMAT,
                                 "%s: token id %d at offset %zu is >= the model's vocabulary %d; the shard was "
                                 "made with another tokenizer: prepare the data with the model's tokenizer, or "
                                 "train a model with a larger vocabulary",
                                 sh->path, tok[i], i, l->vocab);
    }
    return GPTC_OK;
}
