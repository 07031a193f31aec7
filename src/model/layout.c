/* layout.c — plans the parameter arena and the activation arenas, allocates them through the
 * backend's memory, points the views into them, binds the backend, and applies GPT-2's
 * initialisation. The tensor tables and view arrays are host memory (gptc_alloc). */
#include "model/gpt2.h"
#include "backend/cuda.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const g_layer_names[GPTC_LAYER_TENSORS] = {
    "ln_1.weight", "ln_1.bias", "attn.c_attn.weight", "attn.c_attn.bias", "attn.c_proj.weight", "attn.c_proj.bias",
    "ln_2.weight", "ln_2.bias", "mlp.c_fc.weight", "mlp.c_fc.bias", "mlp.c_proj.weight", "mlp.c_proj.bias",
};

/* shape of layer tensor i for width C: rows, cols (cols 0 for 1-D) */
static void layer_shape(int i, int64_t C, int64_t *r, int64_t *c) {
    static const int rows_mul[GPTC_LAYER_TENSORS] = {1, 1, 1, 3, 1, 1, 1, 1, 1, 4, 4, 1};
    static const int cols_mul[GPTC_LAYER_TENSORS] = {0, 0, 3, 0, 1, 0, 0, 0, 4, 0, 1, 0};
    *r = rows_mul[i] * C;
    *c = cols_mul[i] * C;
}

/* Plans one tensor of rows x cols (reserve_rows rows of room); records its descriptor when m is set. */
static void add_tensor(gptc_model *m, gptc_plan *plan, const char *name, int64_t rows, int64_t cols,
                       size_t reserve_rows) {
    size_t offset = gptc_plan_take(plan, reserve_rows * (cols ? cols : 1));
    if (!m) return;
    gptc_tensor_desc *t = &m->tensors[m->ntensors++];
    snprintf(t->name, sizeof t->name, "%s", name);
    t->ndim = cols ? 2 : 1;
    t->shape[0] = rows;
    t->shape[1] = cols;
    t->numel = (size_t)rows * (cols ? cols : 1);
    t->decay = cols != 0;
    t->offset = t->src = t->ready = offset;
}

/* Plans the parameter arena: wte, wpe, each layer's tensors, ln_f (descriptors into m when set).
 * marks (NULL: not wanted) [L+1]: where each layer starts, then where ln_f starts. */
static void plan_params(gptc_model *m, const gptc_model_config *cfg, gptc_plan *plan, size_t *marks) {
    int64_t C = cfg->channels;
    add_tensor(m, plan, "wte.weight", cfg->vocab, C, gptc_padded_vocab(cfg->vocab));
    add_tensor(m, plan, "wpe.weight", cfg->context, C, cfg->context);
    for (int l = 0; l < cfg->layers; l++)
        for (int j = 0; j < GPTC_LAYER_TENSORS; j++) {
            if (marks && j == 0) marks[l] = gptc_plan_take(plan, 0);
            char name[48];
            int64_t r, c;
            layer_shape(j, C, &r, &c);
            snprintf(name, sizeof name, "h.%d.%s", l, g_layer_names[j]);
            add_tensor(m, plan, name, r, c, r);
        }
    if (marks) marks[cfg->layers] = gptc_plan_take(plan, 0);
    add_tensor(m, plan, "ln_f.weight", C, 0, C);
    add_tensor(m, plan, "ln_f.bias", C, 0, C);
}

int gptc_model_tensor_table(const gptc_model_config *cfg, gptc_tensor_desc *out) {
    if (!out) return cfg->layers * GPTC_LAYER_TENSORS + 4;
    gptc_model m = {.tensors = out};
    gptc_plan plan = {0};
    plan_params(&m, cfg, &plan, NULL);
    return m.ntensors;
}

size_t gptc_model_arena_floats(const gptc_model_config *cfg) {
    gptc_plan plan = {0};
    plan_params(NULL, cfg, &plan, NULL);
    return plan.used;
}

/* The compact gradient arena of fused_update (gpt2.h): *layer_lo, *stride, *lnf_lo as gptc_model's
 * fields; returns its floats, or 0 when the layers' strides differ (they cannot: every layer plans the
 * same tensors from 64-byte aligned starts; checked). */
static size_t plan_fused_grads(const gptc_model_config *cfg, size_t *layer_lo, size_t *stride, size_t *lnf_lo) {
    int L = cfg->layers;
    size_t *marks = malloc(sizeof(size_t) * (L + 1)); /* host scratch, not the model's */
    if (!marks) return 0;
    gptc_plan plan = {0};
    plan_params(NULL, cfg, &plan, marks);
    *layer_lo = marks[0];
    *stride = marks[1] - marks[0];
    *lnf_lo = marks[L];
    bool equal = true;
    for (int l = 0; l < L; l++) equal = equal && marks[l + 1] - marks[l] == *stride;
    free(marks);
    return equal ? plan.used - (size_t)(L - 1) * *stride : 0;
}

size_t gptc_model_fused_grad_floats(const gptc_model_config *cfg) {
    size_t a, b, c;
    return plan_fused_grads(cfg, &a, &b, &c);
}

static void point_views(gptc_model *m, float *base, gptc_weights *w) {
    int L = m->cfg.layers, i = 0;
    w->wte = base + m->tensors[i++].offset;
    w->wpe = base + m->tensors[i++].offset;
    for (int l = 0; l < L; l++) {
        float **p = (float **)&w->layer[l];
        for (int j = 0; j < GPTC_LAYER_TENSORS; j++) p[j] = base + m->tensors[i++].offset;
    }
    w->lnfw = base + m->tensors[i++].offset;
    w->lnfb = base + m->tensors[i++].offset;
}

gptc_status gptc_model_init(gptc_model *m, const gptc_model_config *cfg) { return gptc_model_init_on(m, cfg, -1); }

gptc_status gptc_model_init_on(gptc_model *m, const gptc_model_config *cfg, int device) {
    memset(m, 0, sizeof *m);
    gptc_status st = gptc_model_config_check(cfg);
    if (st) return st;
    if (device >= 0 && (st = gptc_cuda_select(device))) return st;
    m->cfg = *cfg;
    m->Vp = gptc_padded_vocab(cfg->vocab);
    m->cuda = device >= 0;
    m->k = m->cuda ? gptc_cuda_kernels() : gptc_kernels_get();
    gptc_model_bind_kernels(m);
    const gptc_backend_memory *mem = m->be.mem;
    int L = cfg->layers;
    m->tensors = gptc_alloc(sizeof(gptc_tensor_desc) * (size_t)(L * GPTC_LAYER_TENSORS + 4), "tensor table");
    m->w.layer = gptc_alloc(sizeof(gptc_layer) * L, "layer views");
    m->g.layer = gptc_alloc(sizeof(gptc_layer) * L, "layer views");
    if (!m->tensors || !m->w.layer || !m->g.layer) goto fail;
    gptc_plan plan = {0};
    plan_params(m, cfg, &plan, NULL);
    m->num_floats = plan.used;
    m->params = mem->alloc(m->num_floats * sizeof(float), "parameters");
    if (!m->params) goto fail;
    point_views(m, m->params, &m->w);
    m->ps = (gptc_pset){.t = m->tensors, .n = m->ntensors, .values = m->params, .floats = m->num_floats,
                        .same_layout = true};
    m->bwd_floor = -1;
    return GPTC_OK;
fail:
    st = gptc_fail_prefix(GPTC_ERR_NOMEM, "model init");
    gptc_model_free(m);
    return st;
}

void gptc_model_params_changed(gptc_model *m, size_t lo, size_t hi) {
    if (lo >= hi) return;
    if (m->params16) { /* [lo, hi) but the part the optimizer's pass wrote already */
        const size_t a = m->p16_lo > lo ? m->p16_lo : lo, b = m->p16_hi < hi ? m->p16_hi : hi;
        const size_t cut_lo = a < b ? a : hi, cut_hi = a < b ? b : hi;
        const char *site = "weights.to_bf16";
        if (lo < cut_lo) gptc_be_to_bf16(&m->be, site, m->params16 + lo, m->params + lo, cut_lo - lo);
        if (cut_hi < hi) gptc_be_to_bf16(&m->be, site, m->params16 + cut_hi, m->params + cut_hi, hi - cut_hi);
    }
    m->p16_lo = m->p16_hi = 0;
    gptc_model_packed_changed(m, lo, hi);
}

void gptc_model_params16_written(gptc_model *m, size_t lo, size_t hi) {
    m->p16_lo = lo;
    m->p16_hi = hi;
}

void gptc_model_free(gptc_model *m) {
    const gptc_backend_memory *mem = m->be.mem ? m->be.mem : gptc_backend_cpu_memory();
    gptc_model_lora_free(m); /* its gradients are m->grads */
    gptc_model_packed_free(m);
    mem->free(m->params);
    mem->free(m->grads);
    mem->free(m->params16);
    mem->free(m->cgrads);
    mem->free(m->gscratch);
    gptc_free(m->frozen);
    gptc_free(m->ps_table);
    gptc_free(m->tensors);
    gptc_free(m->w.layer);
    gptc_free(m->g.layer);
    gptc_free(m->zero_bufs);
    gptc_free(m->zero_ns);
    mem->free(m->act_arena);
    mem->free(m->dact_arena);
    gptc_free(m->a.ln1);
    mem->free(m->inputs);
    mem->free(m->targets);
    memset(m, 0, sizeof *m);
}

void gptc_model_init_weights(gptc_model *m, uint64_t seed) {
    gptc_rng rng;
    gptc_rng_seed(&rng, seed);
    memset(m->params, 0, m->num_floats * sizeof(float));
    double resid_std = 0.02 / sqrt(2.0 * m->cfg.layers);
    for (int i = 0; i < m->ntensors; i++) {
        gptc_tensor_desc *t = &m->tensors[i];
        float *p = m->params + t->offset;
        const char *n = t->name;
        size_t len = strlen(n);
        bool is_ln_weight = t->ndim == 1 && strstr(n, "ln_") && strcmp(n + len - 6, "weight") == 0;
        if (is_ln_weight) {
            for (size_t j = 0; j < t->numel; j++) p[j] = 1.0f;
        } else if (t->ndim == 2) {
            bool resid = strstr(n, "c_proj.weight") != NULL; /* attn.c_proj and mlp.c_proj */
            double std = resid ? resid_std : 0.02;
            for (size_t j = 0; j < t->numel; j++) p[j] = (float)(std * gptc_rng_normal(&rng));
        } /* biases stay 0 */
    }
    gptc_model_params_changed(m, 0, m->num_floats);
}

/* ---- activations */

/* Takes n floats from the plan; when base is set, points *dst at them. */
static void take(gptc_plan *p, float *base, float **dst, size_t n) {
    size_t off = gptc_plan_take(p, n);
    if (base) *dst = base + off;
}

/* Takes n elements of an activation that bf16 storage may hold (gptc_acts): 2 bytes each when b16,
 * else floats; when base is set, points *dst at them. */
static void take16(gptc_plan *p, float *base, void **dst, size_t n, bool b16) {
    size_t off = gptc_plan_take(p, b16 ? (n + 1) / 2 : n);
    if (base) *dst = base + off;
}

/* Takes layer l's region of a per-layer tensor of n floats into views[l] (views NULL: planning only):
 * its own region, or, when shared, the one region layer 0 took, which every layer's view points at. */
static void take_layer(gptc_plan *p, float *base, float **views, int l, size_t n, bool shared) {
    float *sink;
    if (shared && l > 0) {
        if (base) views[l] = views[0];
        return;
    }
    take(p, base, views ? &views[l] : &sink, n);
}

/* take_layer for the tensors of take16 */
static void take_layer16(gptc_plan *p, float *base, void **views, int l, size_t n, bool shared, bool b16) {
    void *sink;
    if (shared && l > 0) {
        if (base) views[l] = views[0];
        return;
    }
    take16(p, base, views ? &views[l] : &sink, n, b16);
}

/* Plans the activation and activation-gradient arenas (sizes in *acts_out, *dacts_out); with m
 * non-NULL also points m's views into abase and dbase. rc: the tensors gpt2.h's gptc_acts lists
 * for each level are one shared buffer instead of one per layer. act16: bf16 storage (gptc_acts) for
 * ln1, ln2, lnf, fch_gelu and, with flash attention, atty. */
static void plan_acts(gptc_model *m, const gptc_model_config *cfg, int B, int T, bool naive, bool fuse,
                      gptc_recompute rc, bool act16, float *abase, float *dbase, size_t *acts_out,
                      size_t *dacts_out) {
    int L = cfg->layers;
    size_t C = cfg->channels, NH = cfg->heads, BT = (size_t)B * T, Vp = gptc_padded_vocab(cfg->vocab);
    size_t TT = naive ? (size_t)B * NH * T * T : 0, BTC = naive ? 0 : BT * C, BHT = naive ? 0 : (size_t)B * NH * T;
    bool gelu = rc >= GPTC_RECOMPUTE_GELU, attn = rc >= GPTC_RECOMPUTE_ATTN, block = rc >= GPTC_RECOMPUTE_BLOCK;
    float *sink;
    void *vsink;
    bool atty16 = act16 && !naive;
    gptc_acts *a = m ? &m->a : NULL;
    if (a) a->act16 = act16, a->atty16 = atty16;
    gptc_dacts *d = m ? &m->d : NULL;
    gptc_plan p = {0};
#define A(field) (a ? &a->field : &sink)
#define LAYER(field, n, shared) take_layer(&p, abase, a ? a->field : NULL, l, n, shared)
#define LAYER16(field, n, shared, b16) take_layer16(&p, abase, a ? a->field : NULL, l, n, shared, b16)
    take(&p, abase, A(encoded), BT * C);
    for (int l = 0; l < L; l++) {
        LAYER16(ln1, BT * C, block, act16);
        LAYER(ln1_mean, BT, block);
        LAYER(ln1_rstd, BT, block);
        LAYER(qkv, BT * 3 * C, block);
        LAYER16(atty, BT * C, attn, atty16);
        LAYER(preatt, TT, attn);
        LAYER(att, TT, attn);
        LAYER(q, BTC, attn);
        LAYER(k, BTC, attn);
        LAYER(v, BTC, attn);
        LAYER(o, BTC, attn);
        LAYER(lse, BHT, attn);
        LAYER(attproj, BT * C, block);
        LAYER(residual2, BT * C, block);
        LAYER16(ln2, BT * C, block, act16);
        LAYER(ln2_mean, BT, block);
        LAYER(ln2_rstd, BT, block);
        LAYER(fch, BT * 4 * C, block);
        LAYER16(fch_gelu, BT * 4 * C, gelu, act16);
        LAYER(fcproj, BT * C, block);
        LAYER(residual3, BT * C, false);
    }
#undef LAYER
#undef LAYER16
    take16(&p, abase, a ? &a->lnf : &vsink, BT * C, act16);
    take(&p, abase, A(lnf_mean), BT);
    take(&p, abase, A(lnf_rstd), BT);
    size_t logit_rows = fuse ? (BT < GPTC_CLASSIFIER_CHUNK ? BT : GPTC_CLASSIFIER_CHUNK) : BT;
    take(&p, abase, A(logits), logit_rows * Vp);
    take(&p, abase, A(losses), BT);
#undef A
    *acts_out = p.used;
    gptc_plan q = {0};
#define D(field) (d ? &d->field : &sink)
    take(&q, dbase, D(dres_out), BT * C);
    take(&q, dbase, D(dres_in), BT * C);
    take(&q, dbase, D(dlnf), BT * C);
    take(&q, dbase, D(dlogits), fuse ? 0 : BT * Vp);
    take(&q, dbase, D(dln1), BT * C);
    take(&q, dbase, D(dqkv), BT * 3 * C);
    take(&q, dbase, D(datty), BT * C);
    take(&q, dbase, D(dpreatt), TT);
    take(&q, dbase, D(datt), TT);
    take(&q, dbase, D(dq), BTC);
    take(&q, dbase, D(dk), BTC);
    take(&q, dbase, D(dv), BTC);
    take(&q, dbase, D(dout_heads), BTC);
    take(&q, dbase, D(dres2), BT * C);
    take(&q, dbase, D(dln2), BT * C);
    take(&q, dbase, D(dfch), BT * 4 * C);
    take(&q, dbase, D(dfch_gelu), BT * 4 * C);
#undef D
    *dacts_out = q.used;
}

void gptc_model_act_bytes(const gptc_model_config *cfg, int B, int T, bool naive, bool fuse, gptc_recompute rc,
                          gptc_precision precision, size_t *acts, size_t *dacts) {
    plan_acts(NULL, cfg, B, T, naive, fuse, rc, precision == GPTC_PRECISION_BF16, NULL, NULL, acts, dacts);
    *acts *= sizeof(float);
    *dacts *= sizeof(float);
}

void gptc_model_bind_kernels(gptc_model *m) {
    gptc_backend_bind(&m->be, m->cuda ? gptc_cuda_memory() : gptc_backend_cpu_memory(), m->k, m->precision, m->fuse);
}

/* the [L] pointer arrays of gptc_acts, in one block: 4 per-layer fields of either storage (void *:
 * ln1, atty, ln2, fch_gelu; ln1's array first, so that it is the block) and 17 of floats */
enum { ACT_VFIELDS = 4, ACT_FFIELDS = 17 };
static size_t act_views_bytes(size_t L) { return (sizeof(void *) * ACT_VFIELDS + sizeof(float *) * ACT_FFIELDS) * L; }

void gptc_model_alloc_bytes(const gptc_model_config *cfg, int B, int T, bool naive, bool fuse, gptc_recompute rc,
                            gptc_precision precision, gptc_model_bytes *out) {
    size_t L = cfg->layers, arena = gptc_model_arena_floats(cfg) * sizeof(float), acts, dacts;
    gptc_model_act_bytes(cfg, B, T, naive, fuse, rc, precision, &acts, &dacts);
    size_t (*dev)(size_t) = gptc_backend_cpu_memory()->block_bytes; /* the arenas: backend memory */
    out->params = gptc_alloc_block_bytes(sizeof(gptc_tensor_desc) * (L * GPTC_LAYER_TENSORS + 4)) +
                  2 * gptc_alloc_block_bytes(sizeof(gptc_layer) * L) + dev(arena);
    out->grads = dev(arena);
    out->weights16 = precision == GPTC_PRECISION_BF16 ? dev(arena / 2) : 0;
    out->acts = gptc_alloc_block_bytes(act_views_bytes(L)) + dev(acts) + dev(dacts) +
                2 * dev(sizeof(int) * (size_t)B * T);
}

/* ---- a trainable set other than the whole model (gpt2.h gptc_pset): LoRA's adapters, or what 'freeze'
 * leaves. m->grads is its compact arena; the model's gradient views of frozen tensors are NULL. */

/* the set's table and compact gradient arena (zeroed by gptc_model_zero_grad before use); NULL: no memory */
static float *alloc_part_grads(gptc_model *m) {
    const gptc_backend_memory *mem = m->be.mem;
    if (m->lora) {
        gptc_lora *lr = m->lora;
        m->ps = (gptc_pset){.t = lr->tensors, .n = lr->ntensors, .values = lr->params, .floats = lr->floats,
                            .same_layout = true, .adapters = true};
        return m->grads = lr->grads = mem->alloc(lr->floats * sizeof(float), "LoRA gradients");
    }
    size_t floats;
    int n = gptc_model_trainable_table(m->tensors, m->ntensors, m->frozen, NULL, &floats);
    if (!(m->ps_table = gptc_alloc(sizeof(gptc_tensor_desc) * (size_t)n, "trainable tensor table"))) return NULL;
    gptc_model_trainable_table(m->tensors, m->ntensors, m->frozen, m->ps_table, NULL);
    m->ps = (gptc_pset){.t = m->ps_table, .n = n, .values = m->params, .floats = floats};
    return m->grads = mem->alloc(floats * sizeof(float), "gradients (trainable tensors)");
}

/* The gradient view of tensor i of the model's table (the order point_views fills them in). */
static float **grad_view(gptc_model *m, int i) {
    int n = m->ntensors;
    if (i == 0) return &m->g.wte;
    if (i == 1) return &m->g.wpe;
    if (i == n - 2) return &m->g.lnfw;
    if (i == n - 1) return &m->g.lnfb;
    return &((float **)&m->g.layer[(i - 2) / GPTC_LAYER_TENSORS])[(i - 2) % GPTC_LAYER_TENSORS];
}

/* Whether tensor i (of the model's table) has a gradient: not frozen, and no adapters. */
static bool trained(const gptc_model *m, int i) { return !m->lora && !(m->frozen && m->frozen[i]); }

/* The views of a partial set: the model's gradients of trainable tensors into the compact arena (NULL for
 * the frozen), LoRA's gradient views and activations, the scratch of frozen LayerNorms, and the lowest
 * layer the backward must reach. false: out of memory. */
static bool point_part_views(gptc_model *m, int B, int T) {
    const gptc_backend_memory *mem = m->be.mem;
    int L = m->cfg.layers, C = m->cfg.channels;
    /* the trained tensors' views at their compact places (the set lists them in table order), NULL for the rest */
    int k = 0;
    for (int i = 0; i < m->ntensors; i++) *grad_view(m, i) = trained(m, i) ? m->grads + m->ps.t[k++].offset : NULL;
    if (!(m->gscratch = mem->alloc(sizeof(float) * 2 * (size_t)C, "frozen LayerNorm scratch"))) return false;
    /* the lowest layer holding something trained: the backward stops there (-1: the embeddings too) */
    m->bwd_floor = L;
    if (trained(m, 0) || trained(m, 1)) m->bwd_floor = -1;
    for (int l = 0; l < L && m->bwd_floor == L; l++)
        for (int j = 0; j < GPTC_LAYER_TENSORS; j++)
            if (trained(m, 2 + l * GPTC_LAYER_TENSORS + j)) m->bwd_floor = l;
    gptc_lora *lr = m->lora;
    if (!lr) return true;
    for (int l = L - 1; l >= 0; l--)
        for (int s = 0; s < GPTC_LORA_SITES; s++)
            if (lr->A[l * GPTC_LORA_SITES + s]) m->bwd_floor = l;
    size_t BT = (size_t)B * T, r = (size_t)lr->rank;
    lr->u = mem->alloc(sizeof(float) * (size_t)L * GPTC_LORA_SITES * BT * r, "LoRA activations");
    lr->du = lr->u ? mem->alloc(sizeof(float) * BT * r, "LoRA activation gradients") : NULL;
    return lr->du != NULL;
}

/* The ranges of m->grads that gptc_model_zero_grad zeroes when the products write their gradients first
 * (gpt2.h grads_fresh): the whole arena but each layer's four matrices (written by their dW products) and
 * wte's V rows (by the classifier's; the padding rows and the rest stay zeroed, as the encoder's scatter
 * and the kernels that add into biases and LayerNorms need). zero_range_before: the range from *at up to
 * the product-written gradient g (n floats), then *at past it. */
static void zero_range_before(gptc_model *m, size_t *at, const float *g, size_t n) {
    size_t start = (size_t)(g - m->grads);
    GPTC_ASSERT(start >= *at); /* the product-written gradients come in arena order */
    if (start > *at) {
        m->zero_bufs[m->zero_count] = m->grads + *at;
        m->zero_ns[m->zero_count++] = start - *at;
    }
    *at = start + n;
}

static gptc_status plan_zero_ranges(gptc_model *m) {
    int L = m->cfg.layers;
    size_t C = (size_t)m->cfg.channels, at = 0, most = 4 * (size_t)L + 2; /* ranges: before each, and the tail */
    m->zero_bufs = gptc_alloc(sizeof(float *) * most, "zero_grad ranges");
    m->zero_ns = gptc_alloc(sizeof(size_t) * most, "zero_grad ranges");
    if (!m->zero_bufs || !m->zero_ns) return GPTC_ERR_NOMEM;
    m->zero_count = 0;
    zero_range_before(m, &at, m->g.wte, (size_t)m->cfg.vocab * C);
    for (int l = 0; l < L; l++) {
        const gptc_layer *g = &m->g.layer[l];
        zero_range_before(m, &at, g->qkvw, 3 * C * C);
        zero_range_before(m, &at, g->attprojw, C * C);
        zero_range_before(m, &at, g->fcw, 4 * C * C);
        zero_range_before(m, &at, g->fcprojw, 4 * C * C);
    }
    zero_range_before(m, &at, m->grads + m->num_floats, 0); /* the rest: the last layer's tail, ln_f */
    return GPTC_OK;
}

gptc_status gptc_model_alloc_train(gptc_model *m, int B, int T) {
    GPTC_ASSERT(!m->grads && !m->cgrads && !m->act_arena);
    gptc_model_bind_kernels(m);
    if (T > m->cfg.context)
        return gptc_fail(GPTC_ERR_ARG, "'seq' %d: longer than the model's context %d", T, m->cfg.context);
    int L = m->cfg.layers;
    char *block = gptc_alloc(act_views_bytes(L), "activation views");
    if (!block) return GPTC_ERR_NOMEM;
    void **vptrs = (void **)block;
    float **fptrs = (float **)(block + sizeof(void *) * ACT_VFIELDS * L);
    void ***vfields[ACT_VFIELDS] = {&m->a.ln1, &m->a.atty, &m->a.ln2, &m->a.fch_gelu};
    float ***ffields[ACT_FFIELDS] = {&m->a.ln1_mean, &m->a.ln1_rstd, &m->a.qkv, &m->a.preatt, &m->a.att,
                                     &m->a.attproj, &m->a.residual2, &m->a.ln2_mean, &m->a.ln2_rstd, &m->a.fch,
                                     &m->a.fcproj, &m->a.residual3, &m->a.q, &m->a.k, &m->a.v, &m->a.o, &m->a.lse};
    for (int i = 0; i < ACT_VFIELDS; i++) *vfields[i] = vptrs + (size_t)i * L;
    for (int i = 0; i < ACT_FFIELDS; i++) *ffields[i] = fptrs + (size_t)i * L;
    bool naive = m->naive_attention, act16 = m->precision == GPTC_PRECISION_BF16 && !m->fp32_acts;
    plan_acts(NULL, &m->cfg, B, T, naive, m->fuse, m->recompute, act16, NULL, NULL, &m->act_floats, &m->dact_floats);
    const gptc_backend_memory *mem = m->be.mem;
    float *grads;
    bool part = m->lora || m->frozen; /* a trainable set other than the whole model */
    if (part && m->fused_update)
        return gptc_fail(GPTC_ERR_ARG, "'fused_update': not with 'freeze' or 'lora' (their gradients are already small)");
    if (part) {
        if ((grads = alloc_part_grads(m)) == NULL) return GPTC_ERR_NOMEM;
    } else if (m->fused_update) {
        m->cgrad_floats = plan_fused_grads(&m->cfg, &m->layer_lo, &m->layer_stride, &m->lnf_lo);
        if (!m->cgrad_floats) return gptc_fail(GPTC_ERR_STATE, "'fused_update': the layers' strides in the arena differ");
        grads = m->cgrads = mem->alloc(m->cgrad_floats * sizeof(float), "gradients (fused update: one layer slot)");
    } else {
        grads = m->grads = mem->alloc(m->num_floats * sizeof(float), "gradients");
    }
    m->act_arena = grads ? mem->alloc(m->act_floats * sizeof(float), "activations") : NULL;
    m->dact_arena = m->act_arena ? mem->alloc(m->dact_floats * sizeof(float), "activation gradients") : NULL;
    m->inputs = m->dact_arena ? mem->alloc(sizeof(int) * B * T, "inputs") : NULL;
    m->targets = m->inputs ? mem->alloc(sizeof(int) * B * T, "targets") : NULL;
    if (!m->targets) return GPTC_ERR_NOMEM; /* gptc_model_free releases what was allocated */
    if (m->precision == GPTC_PRECISION_BF16 && !m->fp32_weights) {
        if (!(m->params16 = mem->alloc(m->num_floats * sizeof(uint16_t), "bf16 working weights"))) return GPTC_ERR_NOMEM;
        gptc_model_params_changed(m, 0, m->num_floats);
    }
    plan_acts(m, &m->cfg, B, T, naive, m->fuse, m->recompute, act16, m->act_arena, m->dact_arena, &m->act_floats,
              &m->dact_floats);
    if (m->fused_update) {
        /* every tensor at its arena offset, then the layers' views moved onto the slot (layer 0's place) and
         * ln_f's down by the L-1 layers cut out */
        point_views(m, m->cgrads, &m->g);
        size_t cut = (size_t)(L - 1) * m->layer_stride;
        for (int l = 1; l < L; l++) m->g.layer[l] = m->g.layer[0];
        m->g.lnfw -= cut;
        m->g.lnfb -= cut;
    } else if (part) {
        if (!point_part_views(m, B, T)) return GPTC_ERR_NOMEM;
    } else {
        point_views(m, m->grads, &m->g);
        gptc_status st = plan_zero_ranges(m);
        if (st) return st;
    }
    m->B = B;
    m->T = T;
    return GPTC_OK;
}
