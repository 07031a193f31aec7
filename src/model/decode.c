/* decode.c — one-token forward with a KV cache: position t costs one pass over the weights and
 * attention over the t cached keys, so N new tokens cost N incremental steps, not N full passes.
 * Runs on the model's backend (its memory and the fp32 entries of its table), unprofiled. */
#include "model/gpt2.h"

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
