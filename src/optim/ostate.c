/* ostate.c — typed optimizer state (--optim-state fp32|bf16|int8, optimizer.h): names, sizes, the int8
 * block numbering and the ZeRO-1 bounds snapped to it, allocation, and the block-by-block driver that
 * runs an optimizer's fp32 arithmetic on a compact state (widen, update, store back through the
 * kernel table's ostate_* entries; kernels/ostate.h). */
#include "optim/optimizer.h"
#include "core/core.h"
#include "kernels/ostate.h"

#include <omp.h>
#include <string.h>

static const char *const g_names[] = {"fp32", "bf16", "int8"};

const char *gptc_ostate_name(gptc_ostate_type t) { return (unsigned)t < 3 ? g_names[t] : "?"; }

bool gptc_ostate_parse(const char *s, gptc_ostate_type *t) {
    for (int i = 0; s && i < 3; i++)
        if (strcmp(s, g_names[i]) == 0) {
            *t = (gptc_ostate_type)i;
            return true;
        }
    return false;
}

size_t gptc_ostate_elem(gptc_ostate_type t) { return t == GPTC_OSTATE_FP32 ? 4 : t == GPTC_OSTATE_BF16 ? 2 : 1; }

static size_t nblocks_of(size_t numel) { return (numel + GPTC_OSTATE_BLOCK - 1) / GPTC_OSTATE_BLOCK; }

size_t gptc_ostate_block_of(const gptc_tensor_desc *tensors, int nt, size_t pos) {
    size_t base = 0;
    for (int i = 0; i < nt; i++) {
        const gptc_tensor_desc *d = &tensors[i];
        if (pos < d->offset + d->numel) return base + (pos > d->offset ? (pos - d->offset) / GPTC_OSTATE_BLOCK : 0);
        base += nblocks_of(d->numel);
    }
    return base;
}

size_t gptc_ostate_snap_bounds(const gptc_tensor_desc *tensors, int nt, gptc_ostate_type t, int world, size_t *bounds) {
    if (t == GPTC_OSTATE_INT8)
        for (int r = 1; r < world; r++)
            for (int i = 0; i < nt; i++) {
                const gptc_tensor_desc *d = &tensors[i];
                size_t x = bounds[r];
                if (x > d->offset && x < d->offset + d->numel) /* inside tensor i: down to its block's start */
                    bounds[r] = d->offset + (x - d->offset) / GPTC_OSTATE_BLOCK * GPTC_OSTATE_BLOCK;
            }
    size_t share = 0;
    for (int r = 0; r < world; r++) share = bounds[r + 1] - bounds[r] > share ? bounds[r + 1] - bounds[r] : share;
    return share;
}

size_t gptc_ostate_bytes(const gptc_optimizer_kind *k, gptc_ostate_type t, size_t elems, size_t blocks) {
    if (!k || !elems) return 0;
    size_t one = gptc_alloc_block_bytes(elems * gptc_ostate_elem(t));
    if (t == GPTC_OSTATE_INT8) one += gptc_alloc_block_bytes((blocks ? blocks : 1) * sizeof(float));
    return (size_t)k->nstates * one;
}

gptc_status gptc_ostate_alloc(gptc_ostate *st, const gptc_optimizer_kind *k, gptc_ostate_type t, const gptc_model *m,
                              size_t lo, size_t hi) {
    memset(st, 0, sizeof *st);
    st->mem = m->be.mem ? m->be.mem : gptc_backend_cpu_memory(); /* the model's: the device's on a GPU */
    st->type = t;
    st->nstates = k->nstates;
    st->lo = lo;
    st->hi = hi;
    if (t == GPTC_OSTATE_INT8) {
        st->blk_lo = gptc_ostate_block_of(m->ps.t, m->ps.n, lo);
        st->nblocks = gptc_ostate_block_of(m->ps.t, m->ps.n, hi) - st->blk_lo;
    }
    size_t n = hi > lo ? hi - lo : 0;
    if (!n) return GPTC_OK;
    for (int s = 0; s < k->nstates; s++) {
        size_t bytes = n * gptc_ostate_elem(t);
        if (!(st->buf[s] = st->mem->alloc(bytes, "optimizer state"))) goto fail;
        st->mem->memset(st->buf[s], 0, bytes);
        if (t == GPTC_OSTATE_INT8) {
            size_t sb = (st->nblocks ? st->nblocks : 1) * sizeof(float);
            if (!(st->absmax[s] = st->mem->alloc(sb, "optimizer state scales"))) goto fail;
            st->mem->memset(st->absmax[s], 0, sb);
        }
    }
    return GPTC_OK;
fail:
    gptc_ostate_free(st);
    return GPTC_ERR_NOMEM;
}

void gptc_ostate_free(gptc_ostate *st) {
    for (int s = 0; s < GPTC_OPTIM_MAX_STATES; s++) {
        if (st->mem) { /* allocated by gptc_ostate_alloc */
            st->mem->free(st->buf[s]);
            st->mem->free(st->absmax[s]);
        } else {
            gptc_free(st->buf[s]);
            gptc_free(st->absmax[s]);
        }
        st->buf[s] = NULL;
        st->absmax[s] = NULL;
    }
}

gptc_ostate gptc_ostate_fp32(float *const *bufs, int nstates, size_t lo, size_t hi) {
    gptc_ostate st = {.type = GPTC_OSTATE_FP32, .nstates = nstates, .lo = lo, .hi = hi};
    for (int s = 0; s < nstates; s++) st.buf[s] = bufs[s];
    return st;
}

/* The piece of tensor d inside [lo, hi): [*a, *b), and its blocks: the first one's index within the
 * tensor (*j0) and how many (return value; 0 when the tensor is outside the range). */
static size_t piece_blocks(const gptc_tensor_desc *d, size_t lo, size_t hi, size_t *a, size_t *b, size_t *j0) {
    *a = d->offset > lo ? d->offset : lo;
    *b = d->offset + d->numel < hi ? d->offset + d->numel : hi;
    if (*a >= *b) return 0;
    *j0 = (*a - d->offset) / GPTC_OSTATE_BLOCK;
    return (*b - d->offset - 1) / GPTC_OSTATE_BLOCK - *j0 + 1;
}

size_t gptc_ostate_update(const gptc_model *m, const gptc_ostate *st, const float *g, size_t lo, size_t hi, float wd,
                        uint64_t seed, int t, gptc_ostate_block_fn fn, void *ctx) {
    const gptc_kernels *k = m->be.k;
    const gptc_pset *ps = &m->ps; /* the trainable set (gpt2.h): the whole arena by default */
    size_t total = 0, updated = 0;
    for (int i = 0; i < ps->n; i++) {
        size_t a, b, j0;
        total += piece_blocks(&ps->t[i], lo, hi, &a, &b, &j0);
        updated += b > a ? b - a : 0;
    }
    uint64_t key[GPTC_OPTIM_MAX_STATES];
    for (int s = 0; s < st->nstates; s++) key[s] = gptc_ostate_sr_key(seed, (uint64_t)t, s);
    /* the int8 block index of the range's first tensor piece, relative to the scales' first */
    size_t blk0 = st->type == GPTC_OSTATE_INT8 ? gptc_ostate_block_of(ps->t, ps->n, lo) - st->blk_lo : 0;
#pragma omp parallel if (total > 1)
    {
        /* this thread's blocks: an equal static share of the range's, in order */
        int nth = omp_get_num_threads(), me = omp_get_thread_num();
        size_t ba = total * (size_t)me / (size_t)nth, bb = total * (size_t)(me + 1) / (size_t)nth;
        omp_set_num_threads(1); /* fn's own loops run on this thread */
        float w[GPTC_OPTIM_MAX_STATES][GPTC_OSTATE_BLOCK];
        float *ws[GPTC_OPTIM_MAX_STATES];
        for (int s = 0; s < GPTC_OPTIM_MAX_STATES; s++) ws[s] = w[s];
        size_t seen = 0, blk = blk0; /* blocks of the range before tensor i; their int8 scale index */
        for (int i = 0; i < ps->n && seen < bb; i++) {
            const gptc_tensor_desc *d = &ps->t[i];
            size_t a, b, j0, nb = piece_blocks(d, lo, hi, &a, &b, &j0);
            if (!nb) continue;
            float dwd = d->decay ? wd : 0.0f;
            for (size_t j = 0; j < nb; j++) {
                size_t q = seen + j;
                if (q < ba || q >= bb) continue;
                size_t x = d->offset + (j0 + j) * GPTC_OSTATE_BLOCK, y = x + GPTC_OSTATE_BLOCK;
                x = x > a ? x : a;
                y = y < b ? y : b;
                size_t n = y - x, e = x - st->lo; /* element e of the buffers */
                for (int s = 0; s < st->nstates; s++) {
                    if (st->type == GPTC_OSTATE_BF16) k->ostate_bf16_load(w[s], (const uint16_t *)st->buf[s] + e, n);
                    else k->ostate_q8_load(w[s], (const uint8_t *)st->buf[s] + e, n, st->absmax[s][blk + j], s == 0);
                }
                fn(ctx, ps->values + d->src + (x - d->offset), g + (x - lo), ws, n, dwd);
                for (int s = 0; s < st->nstates; s++) {
                    if (st->type == GPTC_OSTATE_BF16) k->ostate_bf16_store((uint16_t *)st->buf[s] + e, w[s], n, key[s], x);
                    else k->ostate_q8_store((uint8_t *)st->buf[s] + e, &st->absmax[s][blk + j], w[s], n, s == 0);
                }
            }
            seen += nb;
            blk += nb;
        }
    }
    return updated;
}
