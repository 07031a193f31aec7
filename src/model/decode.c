/* decode.c — forward passes for generation, on the model's backend (its memory and its table), unprofiled:
 *   gptc_model_decode_step: the one-token step of one sequence with a KV cache (fp32, gemm per product):
 *     position t costs one pass over the weights and attention over the t cached keys;
 *   gptc_decoder: what `gptc sample` runs — a prompt prefilled in one batched forward (GEMMs, flash
 *     attention), then S samples stepped together, each step one matvec per weight matrix for the S
 *     rows (the weights streamed once: a copy packed in panels, fp32 or bf16, or the model's rows) and
 *     one attention_decode_shared per layer (the prompt's keys and values, shared by the samples, read
 *     once for all; a bf16 decoder keeps them in bf16); on the CPU one OpenMP region per step (step_team). */
#include "model/gpt2.h"

#include <math.h>
#include <omp.h>
#include <string.h>

gptc_status gptc_kv_cache_init(gptc_kv_cache *c, const gptc_model *m) {
    memset(c, 0, sizeof *c);
    size_t L = m->cfg.layers, C = m->cfg.channels, maxT = m->cfg.context, NH = m->cfg.heads;
    gptc_plan p = {0};
    size_t ok = gptc_plan_take(&p, L * maxT * C), ov = gptc_plan_take(&p, L * maxT * C);
    size_t ox = gptc_plan_take(&p, C), oxn = gptc_plan_take(&p, C), oqkv = gptc_plan_take(&p, 3 * C);
    size_t oatty = gptc_plan_take(&p, C), otmp = gptc_plan_take(&p, C), ofch = gptc_plan_take(&p, 4 * C);
    size_t oatt = gptc_plan_take(&p, NH * maxT), ologits = gptc_plan_take(&p, m->Vp);
    size_t otoken = gptc_plan_take(&p, 1), ostats = gptc_plan_take(&p, 2); /* an int fits a float's slot */
    c->mem = m->be.mem;
    c->arena = c->mem->alloc(p.used * sizeof(float), "KV cache");
    if (!c->arena) return GPTC_ERR_NOMEM;
    c->maxT = (int)maxT;
    c->k = c->arena + ok;
    c->v = c->arena + ov;
    c->x = c->arena + ox;
    c->xn = c->arena + oxn;
    c->qkv = c->arena + oqkv;
    c->atty = c->arena + oatty;
    c->tmp = c->arena + otmp;
    c->fch = c->arena + ofch;
    c->att = c->arena + oatt;
    c->logits = c->arena + ologits;
    c->token = (int *)(c->arena + otoken);
    c->stats = c->arena + ostats;
    return GPTC_OK;
}

void gptc_kv_cache_free(gptc_kv_cache *c) {
    if (c->mem) c->mem->free(c->arena);
    memset(c, 0, sizeof *c);
}

const float *gptc_model_decode_step(const gptc_model *m, gptc_kv_cache *c, int token) {
    GPTC_ASSERT(c->len < c->maxT && token >= 0 && token < m->cfg.vocab);
    const gptc_kernels *k = m->be.k;
    const gptc_backend_memory *mem = m->be.mem;
    int L = m->cfg.layers, C = m->cfg.channels, NH = m->cfg.heads, V = m->cfg.vocab, t = c->len;
    float *mean = c->stats, *rstd = c->stats + 1;
    mem->copy_h2d(c->token, &token, sizeof token);
    k->encoder_fwd(c->x, c->token, m->w.wte, m->w.wpe + (size_t)t * C, 1, 1, C);
    for (int l = 0; l < L; l++) {
        const gptc_layer *w = &m->w.layer[l];
        float *kc = c->k + (size_t)l * c->maxT * C, *vc = c->v + (size_t)l * c->maxT * C;
        k->layernorm_fwd(c->xn, mean, rstd, c->x, w->ln1w, w->ln1b, 1, C);
        k->gemm(0, 0, 1, 3 * C, C, c->xn, C, w->qkvw, 3 * C, 0.0f, w->qkvb, c->qkv, 3 * C);
        mem->copy(kc + (size_t)t * C, c->qkv + C, sizeof(float) * C);
        mem->copy(vc + (size_t)t * C, c->qkv + 2 * C, sizeof(float) * C);
        k->attention_decode(c->atty, c->att, c->qkv, kc, vc, t + 1, C, NH);
        k->gemm(0, 0, 1, C, C, c->atty, C, w->attprojw, C, 0.0f, w->attprojb, c->tmp, C);
        k->residual_fwd(c->x, c->x, c->tmp, C);
        k->layernorm_fwd(c->xn, mean, rstd, c->x, w->ln2w, w->ln2b, 1, C);
        k->gemm(0, 0, 1, 4 * C, C, c->xn, C, w->fcw, 4 * C, 0.0f, w->fcb, c->fch, 4 * C);
        gptc_gelu_fwd_entry(k, m->cfg.gelu)(c->fch, c->fch, (size_t)4 * C);
        k->gemm(0, 0, 1, C, 4 * C, c->fch, 4 * C, w->fcprojw, C, 0.0f, w->fcprojb, c->tmp, C);
        k->residual_fwd(c->x, c->x, c->tmp, C);
    }
    k->layernorm_fwd(c->xn, mean, rstd, c->x, m->w.lnfw, m->w.lnfb, 1, C);
    k->gemm(0, 1, 1, V, C, c->xn, C, m->w.wte, C, 0.0f, NULL, c->logits, m->Vp);
    c->len++;
    mem->synchronize();
    return c->logits; /* the CPU backend's memory is the host's, the CUDA backend's managed: read in place */
}

/* ---- the batched decoder */

/* Layer l's linear site (GPTC_LORA_QKV, _ATTPROJ, _FC, _FCPROJ: the LoRA sites' numbering): its weight
 * W (K,N) in the model, HF layout, and its bias (N) */
typedef struct layer_site {
    int K, N;
    const float *w, *b;
} layer_site;
static layer_site site_of(const gptc_model *m, int l, int site) {
    const gptc_layer *w = &m->w.layer[l];
    int C = m->cfg.channels;
    switch (site) {
    case GPTC_LORA_QKV: return (layer_site){C, 3 * C, w->qkvw, w->qkvb};
    case GPTC_LORA_ATTPROJ: return (layer_site){C, C, w->attprojw, w->attprojb};
    case GPTC_LORA_FC: return (layer_site){C, 4 * C, w->fcw, w->fcb};
    default: return (layer_site){4 * C, C, w->fcprojw, w->fcprojb};
    }
}

/* elements of layer l's sites before `site` in panel form (all four: site GPTC_LORA_SITES), and of the
 * packed copy (pack_weights'): every layer's four, then wte^T */
static size_t panel_elems_before(const gptc_model *m, int site) {
    size_t n = 0;
    for (int i = 0; i < site; i++) {
        layer_site s = site_of(m, 0, i);
        n += gptc_matvec_panel_elems(s.K, s.N);
    }
    return n;
}
static size_t packed_elems(const gptc_model *m) {
    return (size_t)m->cfg.layers * panel_elems_before(m, GPTC_LORA_SITES) +
           gptc_matvec_panel_elems(m->cfg.channels, m->cfg.vocab);
}

bool gptc_decoder_pack_fits(const gptc_model *m, gptc_precision dtype, size_t machine) {
    if (dtype == GPTC_PRECISION_BF16 || machine == 0) return true; /* bf16 needs its copy; unknown: try */
    size_t live = 0, bytes = gptc_alloc_block_bytes(packed_elems(m) * sizeof(float));
    gptc_alloc_stats(&live, NULL);
    return live + bytes <= machine / 10 * 9;
}

/* d->packed: every layer's four matrices in panel form (d->wfmt's element type), then the classifier's
 * wte^T (C,V); d->wfmt gains GPTC_MV_PANELS. */
static const void *step_mat(const gptc_model *m, const gptc_decoder *d, int l, int site);
static gptc_status pack_weights(gptc_decoder *d, const gptc_model *m) {
    int L = m->cfg.layers, C = m->cfg.channels, bf16 = d->wfmt & GPTC_MV_BF16;
    size_t es = bf16 ? sizeof(uint16_t) : sizeof(float), V = m->cfg.vocab;
    size_t elems = packed_elems(m);
    d->packed = gptc_alloc(elems * es, "packed weights (sampling)");
    if (!d->packed)
        return gptc_fail(GPTC_ERR_NOMEM, "out of memory: the %s copy of the weights that decoding streams (%.1f MB)%s",
                         bf16 ? "bf16" : "packed", elems * (double)es / 1e6,
                         bf16 ? "" : "; sample without it: gptc sample --no-pack");
    d->wfmt |= GPTC_MV_PANELS;
    for (int l = 0; l < L; l++)
        for (int site = 0; site < GPTC_LORA_SITES; site++) {
            layer_site s = site_of(m, l, site);
            gptc_matvec_pack((void *)step_mat(m, d, l, site), bf16, s.w, s.N, 0, s.K, s.N);
        }
    void *cls = (char *)d->packed + (size_t)L * panel_elems_before(m, GPTC_LORA_SITES) * es;
    gptc_matvec_pack(cls, bf16, m->w.wte, C, 1, C, (int)V);
    d->cls = cls;
    return GPTC_OK;
}

/* Grows the kernels' per-thread packing buffers for the prefill's products of up to d->rows rows
 * (gptc_gemm_reserve: site_product's calls, and LoRA's fp32 products), so that a prefill allocates nothing */
static void reserve_prefill(const gptc_model *m, const gptc_decoder *d) {
    const int in16 = GPTC_GEMM_B16 | (d->wfmt & GPTC_MV_PANELS ? GPTC_GEMM_B_PANELS : 0);
    for (int site = 0; site < GPTC_LORA_SITES; site++) {
        layer_site s = site_of(m, 0, site);
        if (d->dtype == GPTC_PRECISION_BF16) gptc_gemm_reserve(m->be.k, 1, d->rows, s.N, s.K, in16);
        if (d->dtype != GPTC_PRECISION_BF16 || m->lora) gptc_gemm_reserve(m->be.k, 0, d->rows, s.N, s.K, 0);
    }
}

gptc_status gptc_decoder_init(gptc_decoder *d, const gptc_model *m, int samples, int rows, gptc_precision dtype,
                              bool pack) {
    memset(d, 0, sizeof *d);
    GPTC_ASSERT(samples >= 1 && rows >= 1 && rows <= m->cfg.context);
    size_t L = m->cfg.layers, C = m->cfg.channels, maxT = m->cfg.context, NH = m->cfg.heads, S = samples;
    size_t R = rows, Vp = m->Vp;
    gptc_plan p = {0};
    bool bf16 = dtype == GPTC_PRECISION_BF16; /* bf16 weights and a bf16 cache (a float's slot holds two) */
    size_t cache = bf16 ? (L * S * maxT * C + 1) / 2 : L * S * maxT * C;
    size_t ok = gptc_plan_take(&p, cache), ov = gptc_plan_take(&p, cache);
    size_t ox = gptc_plan_take(&p, S * C), oxn = gptc_plan_take(&p, S * C), oqkv = gptc_plan_take(&p, S * 3 * C);
    size_t oatty = gptc_plan_take(&p, S * C), otmp = gptc_plan_take(&p, S * C), ofch = gptc_plan_take(&p, S * 4 * C);
    size_t omean = gptc_plan_take(&p, S), orstd = gptc_plan_take(&p, S), oatt = gptc_plan_take(&p, S * NH * maxT);
    size_t ologits = gptc_plan_take(&p, S * Vp);
    size_t opx = gptc_plan_take(&p, R * C), opxn = gptc_plan_take(&p, R * C), opqkv = gptc_plan_take(&p, R * 3 * C);
    size_t opatty = gptc_plan_take(&p, R * C), optmp = gptc_plan_take(&p, R * C), opfch = gptc_plan_take(&p, R * 4 * C);
    size_t opq = gptc_plan_take(&p, R * C), opk = gptc_plan_take(&p, R * C), opv = gptc_plan_take(&p, R * C);
    size_t opo = gptc_plan_take(&p, R * C), oplse = gptc_plan_take(&p, NH * R);
    size_t opmean = gptc_plan_take(&p, R), oprstd = gptc_plan_take(&p, R);
    size_t olu = gptc_plan_take(&p, m->lora ? (R > S ? R : S) * (size_t)m->lora->rank : 0); /* LoRA's (rows, r) */
    d->mem = m->be.mem;
    d->arena = d->mem->alloc(p.used * sizeof(float), "decoder (KV caches, buffers)");
    if (!d->arena) return gptc_fail(GPTC_ERR_NOMEM, "out of memory: the KV caches of %d samples and their buffers (%.1f MB)", samples, p.used * 4.0 / 1e6);
    float *a = d->arena;
    d->S = samples, d->maxT = (int)maxT, d->rows = rows, d->dtype = dtype, d->kv16 = bf16;
    d->k = a + ok, d->v = a + ov;
    d->x = a + ox, d->xn = a + oxn, d->qkv = a + oqkv, d->atty = a + oatty, d->tmp = a + otmp, d->fch = a + ofch;
    d->mean = a + omean, d->rstd = a + orstd, d->att = a + oatt, d->logits = a + ologits;
    d->px = a + opx, d->pxn = a + opxn, d->pqkv = a + opqkv, d->patty = a + opatty, d->ptmp = a + optmp;
    d->pfch = a + opfch, d->pq = a + opq, d->pk = a + opk, d->pv = a + opv, d->po = a + opo, d->plse = a + oplse;
    d->pmean = a + opmean, d->prstd = a + oprstd, d->lu = m->lora ? a + olu : NULL;
    d->wfmt = bf16 ? GPTC_MV_BF16 : 0;
    d->cls = m->w.wte;
    if (pack || (bf16 && !m->params16)) {
        gptc_status st = pack_weights(d, m);
        if (st) {
            gptc_decoder_free(d);
            return st;
        }
    } else if (bf16) { /* O2 training's copy, current after every update: read in place */
        d->w16 = m->params16;
        d->cls = m->params16 + (m->w.wte - m->params);
    }
    reserve_prefill(m, d);
    return GPTC_OK;
}

void gptc_decoder_free(gptc_decoder *d) {
    if (d->mem) d->mem->free(d->arena);
    gptc_free(d->packed);
    memset(d, 0, sizeof *d);
}

/* Layer l's site's weight as a step's matvec reads it: (K,N) rows (row stride N; the model's, or
 * m->params16's), or its panels in d->packed. */
static const void *step_mat(const gptc_model *m, const gptc_decoder *d, int l, int site) {
    const float *w = site_of(m, l, site).w;
    if (d->w16) return d->w16 + (w - m->params);
    if (!(d->wfmt & GPTC_MV_PANELS)) return w;
    size_t at = (size_t)l * panel_elems_before(m, GPTC_LORA_SITES) + panel_elems_before(m, site);
    return (const char *)d->packed + at * (d->wfmt & GPTC_MV_BF16 ? sizeof(uint16_t) : sizeof(float));
}

/* LoRA (gpt2.h gptc_lora), when layer l's site is adapted: out (n,OC) += (alpha/r) (x A^T) B^T for x (n,IC),
 * with the training forward's products (forward.c lora_forward) in fp32 */
static void lora_add(const gptc_model *m, const gptc_decoder *d, int l, int site, int n, int IC, int OC, const float *x,
                     float *out) {
    const gptc_lora *lr = m->lora;
    if (!lr || !lr->A[l * GPTC_LORA_SITES + site]) return;
    const gptc_kernels *k = m->be.k;
    int r = lr->rank;
    k->gemm(0, 1, n, r, IC, x, IC, lr->A[l * GPTC_LORA_SITES + site], IC, 0.0f, NULL, d->lu, r);
    k->scale(d->lu, lr->scale, (size_t)n * r);
    k->gemm(0, 1, n, OC, r, d->lu, r, lr->B[l * GPTC_LORA_SITES + site], r, 1.0f, NULL, out, OC);
}

/* out (n,N) = x (n,K) @ W (K,N) + bias for layer l's site, then its adapter's term (lora_add): a step's
 * matvec over the weights it streams (n = S rows), or a prefill's GEMM — fp32 on the model's weights, or
 * under bf16 gemm_bf16_in16 on the bf16 weights the steps read (their panels, or m->params16's rows) */
static void site_product(const gptc_model *m, const gptc_decoder *d, int l, int site, bool prefill, int n,
                         const float *x, float *out) {
    const gptc_kernels *k = m->be.k;
    layer_site s = site_of(m, l, site);
    int panels = d->wfmt & GPTC_MV_PANELS;
    if (!prefill)
        k->matvec(0, d->wfmt, n, s.N, s.K, x, s.K, step_mat(m, d, l, site), s.N, s.b, out, s.N);
    else if (d->dtype == GPTC_PRECISION_BF16)
        k->gemm_bf16_in16(0, 0, n, s.N, s.K, x, s.K, step_mat(m, d, l, site), panels ? 0 : s.N,
                          GPTC_GEMM_B16 | (panels ? GPTC_GEMM_B_PANELS : 0), 0.0f, s.b, out, s.N);
    else
        k->gemm(0, 0, n, s.N, s.K, x, s.K, s.w, s.N, 0.0f, s.b, out, s.N);
    lora_add(m, d, l, site, n, s.K, s.N, x, out);
}

/* the bytes of one cache element */
static size_t cache_es(const gptc_decoder *d) { return d->kv16 ? sizeof(uint16_t) : sizeof(float); }

/* the cache rows of layer l, sample s: (maxT, C) elements */
static void *cache_at(const gptc_decoder *d, void *base, int l, int s, int C) {
    return (char *)base + ((size_t)l * d->S + s) * d->maxT * C * cache_es(d);
}

/* C values from src into the cache at dst + i elements: copied, or rounded to bf16 */
static void cache_put(const gptc_model *m, const gptc_decoder *d, void *dst, size_t i, const float *src, int C) {
    if (d->kv16)
        m->be.k->to_bf16((uint16_t *)dst + i, src, (size_t)C);
    else
        m->be.mem->copy((float *)dst + i, src, sizeof(float) * C);
}

/* n rows of C values (row t at src + t*lds) into the cache's positions 0..n-1 at dst: copied, or (bf16 cache)
 * first gathered into stage (n, C) and rounded in one call, a pass the kernel spreads over the threads rather
 * than a call per row */
static void cache_put_rows(const gptc_model *m, const gptc_decoder *d, void *dst, const float *src, size_t lds, int n,
                           int C, float *stage) {
    float *to = d->kv16 ? stage : dst;
    for (int t = 0; t < n; t++) m->be.mem->copy(to + (size_t)t * C, src + (size_t)t * lds, sizeof(float) * C);
    if (d->kv16) m->be.k->to_bf16(dst, stage, (size_t)n * C);
}

/* Copies the shared positions (sample 0's first d->shared rows) into every other sample's own rows. */
static void unshare(const gptc_model *m, gptc_decoder *d) {
    int L = m->cfg.layers, C = m->cfg.channels;
    size_t bytes = cache_es(d) * (size_t)d->shared * C;
    for (int l = 0; l < L; l++)
        for (int s = 1; s < d->S; s++) {
            m->be.mem->copy(cache_at(d, d->k, l, s, C), cache_at(d, d->k, l, 0, C), bytes);
            m->be.mem->copy(cache_at(d, d->v, l, s, C), cache_at(d, d->v, l, 0, C), bytes);
        }
    d->shared = 0;
}

const float *gptc_decoder_prefill(const gptc_model *m, gptc_decoder *d, int s, const int *tokens, int n) {
    GPTC_ASSERT(n >= 1 && n <= d->rows && s >= 0 && s < d->S);
    const gptc_kernels *k = m->be.k;
    const gptc_backend_memory *mem = m->be.mem;
    int L = m->cfg.layers, C = m->cfg.channels, NH = m->cfg.heads, V = m->cfg.vocab, HS = C / NH;
    if (d->shared) unshare(m, d); /* the other samples keep their positions, now in their own rows */
    k->encoder_fwd(d->px, tokens, m->w.wte, m->w.wpe, 1, n, C);
    k->layernorm_fwd(d->pxn, d->pmean, d->prstd, d->px, m->w.layer[0].ln1w, m->w.layer[0].ln1b, n, C);
    for (int l = 0; l < L; l++) { /* pxn: LayerNorm 1 of px, from the encoder or the previous layer's fused residual */
        const gptc_layer *w = &m->w.layer[l];
        void *kc = cache_at(d, d->k, l, s, C), *vc = cache_at(d, d->v, l, s, C);
        site_product(m, d, l, GPTC_LORA_QKV, true, n, d->pxn, d->pqkv);
        /* every position's key and value into the cache (ptmp free until the attention's projection) */
        cache_put_rows(m, d, kc, d->pqkv + C, 3 * (size_t)C, n, C, d->ptmp);
        cache_put_rows(m, d, vc, d->pqkv + 2 * C, 3 * (size_t)C, n, C, d->ptmp);
        k->qkv_to_heads(d->pq, d->pk, d->pv, d->pqkv, 1, n, C, NH);
        k->flash_fwd(d->po, d->plse, d->pq, d->pk, d->pv, 1, NH, n, HS, 0.0f, 0);
        k->heads_to_rows(d->patty, d->po, 1, n, C, NH);
        site_product(m, d, l, GPTC_LORA_ATTPROJ, true, n, d->patty, d->ptmp);
        k->residual_layernorm_fwd(d->px, d->pxn, d->pmean, d->prstd, d->px, d->ptmp, w->ln2w, w->ln2b, n, C);
        site_product(m, d, l, GPTC_LORA_FC, true, n, d->pxn, d->pfch);
        gptc_gelu_fwd_entry(k, m->cfg.gelu)(d->pfch, d->pfch, (size_t)n * 4 * C);
        site_product(m, d, l, GPTC_LORA_FCPROJ, true, n, d->pfch, d->ptmp);
        if (l + 1 < L) /* the residual, and the next layer's LayerNorm 1 in the same pass */
            k->residual_layernorm_fwd(d->px, d->pxn, d->pmean, d->prstd, d->px, d->ptmp, m->w.layer[l + 1].ln1w,
                                      m->w.layer[l + 1].ln1b, n, C);
        else
            k->residual_fwd(d->px, d->px, d->ptmp, (size_t)n * C);
    }
    /* the last position's logits only */
    float *xn = d->xn + (size_t)s * C, *logits = d->logits + (size_t)s * m->Vp;
    k->layernorm_fwd(xn, d->mean, d->rstd, d->px + (size_t)(n - 1) * C, m->w.lnfw, m->w.lnfb, 1, C);
    k->matvec(1, d->wfmt, 1, V, C, xn, C, d->cls, C, NULL, logits, m->Vp);
    d->len = n;
    mem->synchronize();
    return logits;
}

void gptc_decoder_fork(const gptc_model *m, gptc_decoder *d, int src) {
    int L = m->cfg.layers, C = m->cfg.channels;
    if (src != 0)
        for (int l = 0; l < L; l++) {
            m->be.mem->copy(cache_at(d, d->k, l, 0, C), cache_at(d, d->k, l, src, C), cache_es(d) * d->len * C);
            m->be.mem->copy(cache_at(d, d->v, l, 0, C), cache_at(d, d->v, l, src, C), cache_es(d) * d->len * C);
        }
    d->shared = d->len; /* read from sample 0's rows by every sample */
    for (int s = 0; s < d->S; s++)
        if (s != src) memcpy(d->logits + (size_t)s * m->Vp, d->logits + (size_t)src * m->Vp, sizeof(float) * m->Vp);
}

/* Who runs a step's layers: the threads of one OpenMP region (shares: each matvec and attention split into
 * the table's shares, matvec_part and attention_decode_part, the same bits as the whole operations; the row
 * operators on the first thread; a spinning barrier between dependent steps), or the calling thread alone
 * (nt 1, no region: every operation whole, opening its own regions; its barriers return at once). */
typedef struct step_team {
    gptc_spin_barrier *bar;
    int tid, nt, sense;
    bool shares;
} step_team;

static void team_wait(step_team *tm) { gptc_spin_barrier_wait(tm->bar, tm->nt, &tm->sense); }

/* out (S,N) = x (S,K) @ W + bias for layer l's site: this thread's share, or the whole product with its
 * adapter's term (site_product) */
static void step_product(const gptc_model *m, const gptc_decoder *d, step_team *tm, int l, int site, const float *x,
                         float *out) {
    if (!tm->shares) {
        site_product(m, d, l, site, false, d->S, x, out);
        return;
    }
    layer_site s = site_of(m, l, site);
    m->be.k->matvec_part(tm->tid, tm->nt, 0, d->wfmt, d->S, s.N, s.K, x, s.K, step_mat(m, d, l, site), s.N, s.b,
                         out, s.N);
}

/* gptc_decoder_step's layers and classifier, from xn (LayerNorm 1 of the step's rows) to the logits */
static void step_layers(const gptc_model *m, gptc_decoder *d, step_team *tm) {
    const gptc_kernels *k = m->be.k;
    const int L = m->cfg.layers, C = m->cfg.channels, NH = m->cfg.heads, V = m->cfg.vocab, S = d->S, t = d->len;
    const bool first = tm->tid == 0, last = tm->tid == tm->nt - 1;
    const size_t lds = (size_t)d->maxT * C; /* sample s's cache rows: + s*lds */
    for (int l = 0; l < L; l++) { /* xn: LayerNorm 1 of x, after the encoder or the previous layer's fused residual */
        const gptc_layer *w = &m->w.layer[l];
        step_product(m, d, tm, l, GPTC_LORA_QKV, d->xn, d->qkv);
        team_wait(tm);
        void *kc = cache_at(d, d->k, l, 0, C), *vc = cache_at(d, d->v, l, 0, C);
        for (int s = 0; s < S; s++) { /* position t's key (first thread) and value (last) into each sample's rows */
            const float *qkv = d->qkv + (size_t)s * 3 * C;
            if (first) cache_put(m, d, kc, s * lds + (size_t)t * C, qkv + C, C);
            if (last) cache_put(m, d, vc, s * lds + (size_t)t * C, qkv + 2 * C, C);
        }
        team_wait(tm);
        if (tm->shares)
            k->attention_decode_part(tm->tid, tm->nt, d->atty, C, d->att, d->qkv, 3 * C, kc, vc, d->shared, kc, vc, lds,
                                     t + 1, S, C, NH, d->kv16);
        else
            k->attention_decode_shared(d->atty, C, d->att, d->qkv, 3 * C, kc, vc, d->shared, kc, vc, lds, t + 1, S, C,
                                       NH, d->kv16);
        team_wait(tm);
        step_product(m, d, tm, l, GPTC_LORA_ATTPROJ, d->atty, d->tmp);
        team_wait(tm);
        if (first) k->residual_layernorm_fwd(d->x, d->xn, d->mean, d->rstd, d->x, d->tmp, w->ln2w, w->ln2b, S, C);
        team_wait(tm);
        step_product(m, d, tm, l, GPTC_LORA_FC, d->xn, d->fch);
        team_wait(tm);
        if (first) gptc_gelu_fwd_entry(k, m->cfg.gelu)(d->fch, d->fch, (size_t)S * 4 * C);
        team_wait(tm);
        step_product(m, d, tm, l, GPTC_LORA_FCPROJ, d->fch, d->tmp);
        team_wait(tm);
        /* the residual, and the next layer's LayerNorm 1 (after the last, the final LayerNorm) in the same pass */
        const bool end = l + 1 == L;
        const float *lnw = end ? m->w.lnfw : m->w.layer[l + 1].ln1w, *lnb = end ? m->w.lnfb : m->w.layer[l + 1].ln1b;
        if (first) k->residual_layernorm_fwd(d->x, d->xn, d->mean, d->rstd, d->x, d->tmp, lnw, lnb, S, C);
        team_wait(tm);
    }
    if (tm->shares)
        k->matvec_part(tm->tid, tm->nt, 1, d->wfmt, S, V, C, d->xn, C, d->cls, C, NULL, d->logits, m->Vp);
    else
        k->matvec(1, d->wfmt, S, V, C, d->xn, C, d->cls, C, NULL, d->logits, m->Vp);
}

/* On the CPU a step is one OpenMP region (step_team's shares): entering and leaving a region for each of a
 * step's ~100 operations cost 3.3 us on the 2-vCPU VM of docs/performance.md, one wait at OpenMP's barrier
 * 1.5 us, at the spinning one 0.2. One region per operation where the table has no shares (CUDA's), for
 * LoRA (its products are GEMMs), and with more threads than CPUs (spinning threads would keep a waiting one
 * off its CPU). */
const float *gptc_decoder_step(const gptc_model *m, gptc_decoder *d, const int *tokens) {
    GPTC_ASSERT(d->len < d->maxT);
    const gptc_kernels *k = m->be.k;
    const int C = m->cfg.channels, V = m->cfg.vocab, S = d->S, t = d->len;
    for (int s = 0; s < S; s++) GPTC_ASSERT(tokens[s] >= 0 && tokens[s] < V);
    k->encoder_fwd(d->x, tokens, m->w.wte, m->w.wpe + (size_t)t * C, S, 1, C); /* S rows at position t */
    k->layernorm_fwd(d->xn, d->mean, d->rstd, d->x, m->w.layer[0].ln1w, m->w.layer[0].ln1b, S, C);
    gptc_spin_barrier bar = {0};
    if (k->matvec_part && k->attention_decode_part && !m->lora && omp_get_max_threads() <= gptc_cpu()->logical_cpus) {
#pragma omp parallel
        {
            step_team tm = {&bar, omp_get_thread_num(), omp_get_num_threads(), 0, true};
            step_layers(m, d, &tm);
        }
    } else {
        step_team tm = {&bar, 0, 1, 0, false};
        step_layers(m, d, &tm);
    }
    d->len++;
    m->be.mem->synchronize();
    return d->logits;
}

size_t gptc_decoder_step_weight_bytes(const gptc_model *m, gptc_precision dtype) {
    size_t L = m->cfg.layers, C = m->cfg.channels, V = m->cfg.vocab, e = dtype == GPTC_PRECISION_BF16 ? 2 : 4;
    size_t mats = L * 12 * C * C + V * C;           /* qkv, attn proj, fc, fc proj; the classifier's rows */
    size_t vecs = L * (3 * C + C + 4 * C + C + 4 * C) + 2 * C + C; /* biases, LayerNorms, ln_f, a wpe row */
    return mats * e + vecs * sizeof(float);
}

double gptc_decoder_prefill_flops(const gptc_model *m, int n) {
    double L = m->cfg.layers, C = m->cfg.channels, V = m->cfg.vocab;
    return 2.0 * n * L * 12 * C * C + L * 2.0 * n * (double)n * C + 2.0 * V * C;
}
