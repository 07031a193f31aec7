/* packed.c — the training step's weight matrices kept packed (gpt2.h gptc_packed_weights): each linear
 * layer's W (IC,OC) and wte (Vp,C) packed whole as the B operand of the products that read them
 * (kernels.h gptc_gemm_pack_b), in the two forms a step reads — the forward's and the input gradient's —
 * so that no product of the step packs a weight again. A product on a packed form gives the bits of the
 * same product packing W itself; what changes is that W is packed once per update instead of once per
 * product (at GPT-2's T = 64, a sixth of the GEMMs' time went to packing, most of it the weights).
 * Each matrix remembers its range of the parameter arena: gptc_model_params_changed marks the forms it
 * touches stale, and gptc_model_packed_refresh (the start of every forward) repacks those. */
#include "model/gpt2.h"

#include <string.h>

/* Matrix i of the set: layer l = i / (2 * SITES), its site, the form (GPTC_PACK_FWD / _DX); the last two
 * are wte's. How a product reads it: op(B) (K,N) from B (row stride ldb) with transB; numel floats. Linear
 * layers' W (IC,OC): forward out = x W (op(B) = W: K IC, N OC), input gradient dx = dout W^T (op(B) = W^T:
 * K OC, N IC). wte (V rows of C used): logits = x wte^T (op(B) = wte^T: K C, N V), dx = dlogits wte (K V,
 * N C). */
typedef struct packed_shape {
    int site; /* GPTC_LORA_* of a layer's matrix; -1 for wte */
    int transB, N, K, ldb;
    size_t numel;
} packed_shape;

static packed_shape shape_of(const gptc_model_config *cfg, int i) {
    int C = cfg->channels, IC, OC;
    bool fwd = i % GPTC_PACK_FORMS == GPTC_PACK_FWD;
    if (i / GPTC_PACK_FORMS == cfg->layers * GPTC_LORA_SITES)
        return fwd ? (packed_shape){-1, 1, cfg->vocab, C, C, (size_t)cfg->vocab * C}
                   : (packed_shape){-1, 0, C, cfg->vocab, C, (size_t)cfg->vocab * C};
    int site = i / GPTC_PACK_FORMS % GPTC_LORA_SITES;
    gptc_lora_site_shape(site, C, &IC, &OC);
    return fwd ? (packed_shape){site, 0, OC, IC, OC, (size_t)IC * OC}
               : (packed_shape){site, 1, IC, OC, OC, (size_t)IC * OC};
}

/* Matrix i's fp32 master in m->params (a layer's views are its tensors' pointers in tensor order) */
static const float *weight_of(const gptc_model *m, int i, packed_shape s) {
    if (s.site < 0) return m->w.wte;
    return ((float *const *)&m->w.layer[i / GPTC_PACK_FORMS / GPTC_LORA_SITES])[gptc_lora_site_weight(s.site)];
}

static int packed_count(const gptc_model_config *cfg) { return (cfg->layers * GPTC_LORA_SITES + 1) * GPTC_PACK_FORMS; }

/* Bytes of matrix i's packed form on k, 64-byte aligned; 0 where k cannot take it. */
static size_t form_bytes(const gptc_kernels *k, bool bf16, const gptc_model_config *cfg, int i) {
    packed_shape s = shape_of(cfg, i);
    return (gptc_gemm_packed_bytes(k, bf16, s.N, s.K) + 63) / 64 * 64;
}

size_t gptc_model_packed_bytes(const gptc_kernels *k, const gptc_model_config *cfg, bool bf16) {
    size_t total = 0;
    for (int i = 0; i < packed_count(cfg); i++) {
        size_t b = form_bytes(k, bf16, cfg, i);
        if (!b) return 0;
        total += b;
    }
    return total;
}

size_t gptc_model_packed_table_bytes(const gptc_model_config *cfg) {
    return gptc_alloc_block_bytes(sizeof(gptc_packed_weights) + sizeof(gptc_packed_mat) * (size_t)packed_count(cfg));
}

gptc_status gptc_model_pack_weights(gptc_model *m) {
    GPTC_ASSERT(!m->packed);
    const bool bf16 = m->precision == GPTC_PRECISION_BF16;
    size_t bytes = gptc_model_packed_bytes(m->be.k, &m->cfg, bf16);
    if (!bytes) return GPTC_OK; /* these kernels pack inside every product */
    int n = packed_count(&m->cfg);
    gptc_packed_weights *p = gptc_alloc(sizeof *p + sizeof(gptc_packed_mat) * (size_t)n, "packed weights (table)");
    if (!p) return GPTC_ERR_NOMEM;
    memset(p, 0, sizeof *p);
    p->n = n;
    p->mats = (gptc_packed_mat *)(p + 1);
    p->arena = m->be.mem->alloc(bytes, "packed weights");
    if (!p->arena) {
        gptc_free(p);
        return gptc_fail(GPTC_ERR_NOMEM, "out of memory: the packed weights (%.1f MB); train with 'pack_weights' off",
                         bytes / 1e6);
    }
    p->bytes = bytes;
    size_t at = 0;
    for (int i = 0; i < n; i++) {
        packed_shape s = shape_of(&m->cfg, i);
        size_t lo = (size_t)(weight_of(m, i, s) - m->params);
        p->mats[i] = (gptc_packed_mat){.p = p->arena + at, .lo = lo, .hi = lo + s.numel, .stale = true};
        at += form_bytes(m->be.k, bf16, &m->cfg, i);
    }
    m->packed = p;
    return GPTC_OK;
}

void gptc_model_packed_free(gptc_model *m) {
    if (!m->packed) return;
    m->be.mem->free(m->packed->arena);
    gptc_free(m->packed);
    m->packed = NULL;
}

void gptc_model_packed_changed(gptc_model *m, size_t lo, size_t hi) {
    gptc_packed_weights *p = m->packed;
    if (!p) return;
    for (int i = 0; i < p->n; i++)
        if (p->mats[i].lo < hi && lo < p->mats[i].hi) p->mats[i].stale = true;
}

void gptc_model_packed_refresh(gptc_model *m) {
    gptc_packed_weights *p = m->packed;
    if (!p) return;
    const bool bf16 = m->precision == GPTC_PRECISION_BF16;
    double moved = 0;
    bool began = false;
    for (int i = 0; i < p->n; i++) {
        if (!p->mats[i].stale) continue;
        if (!began) gptc_be_optim_begin(&m->be, "weights.pack"), began = true;
        packed_shape s = shape_of(&m->cfg, i);
        const float *w = weight_of(m, i, s);
        /* under bf16 the working copy m->params16 (its values are what the products read), else the master */
        const void *b = m->params16 ? (const void *)(m->params16 + (w - m->params)) : (const void *)w;
        gptc_gemm_pack_b(m->be.k, bf16, s.transB, s.N, s.K, b, s.ldb, m->params16 != NULL, p->mats[i].p);
        p->mats[i].stale = false;
        moved += (double)s.numel * (m->params16 ? 2 : 4) + form_bytes(m->be.k, bf16, &m->cfg, i);
    }
    if (began) gptc_be_optim_end(&m->be, 0, moved);
}

const void *gptc_model_packed_form(const gptc_model *m, int l, int site, int form) {
    if (!m->packed) return NULL;
    int i = (l < 0 ? m->cfg.layers * GPTC_LORA_SITES : l * GPTC_LORA_SITES + site) * GPTC_PACK_FORMS + form;
    GPTC_ASSERT(!m->packed->mats[i].stale);
    return m->packed->mats[i].p;
}
