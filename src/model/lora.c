/* lora.c — LoRA adapters on the model's linear layers (gpt2.h gptc_lora): the targets' names, the
 * adapters' table in PEFT's naming, attaching them to a model (their arena from the model's backend
 * memory, A initialised as PEFT does, B zero), and folding them into the base weights (--merge-lora).
 * forward.c runs them; train/adapters.c reads and writes them. */
#include "model/gpt2.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* each site's module (the Hugging Face name under h.N), its weight's index among a layer's tensors, and
 * its in / out widths as multiples of C */
static const struct {
    const char *module, *group;
    int weight, in_mul, out_mul;
} k_sites[GPTC_LORA_SITES] = {
    [GPTC_LORA_QKV] = {"attn.c_attn", "attn", GPTC_QKVW, 1, 3},
    [GPTC_LORA_ATTPROJ] = {"attn.c_proj", "attn", GPTC_ATTPROJW, 1, 1},
    [GPTC_LORA_FC] = {"mlp.c_fc", "mlp", GPTC_FCW, 1, 4},
    [GPTC_LORA_FCPROJ] = {"mlp.c_proj", "mlp", GPTC_FCPROJW, 4, 1},
};

const char *gptc_lora_site_module(int s) { return k_sites[s].module; }

int gptc_lora_site_weight(int s) { return k_sites[s].weight; }

void gptc_lora_site_shape(int s, int C, int *in, int *out) {
    *in = k_sites[s].in_mul * C;
    *out = k_sites[s].out_mul * C;
}

gptc_status gptc_lora_targets_parse(const char *spec, unsigned *targets) {
    *targets = 0;
    const char *p = spec && *spec ? spec : "attn";
    char word[32];
    int got;
    while ((got = gptc_list_next(&p, word, sizeof word)) != 0) {
        if (got < 0)
            return gptc_fail(GPTC_ERR_ARG, "'lora_targets' %s: expected a comma-separated list of attn, mlp, c_attn, "
                             "attn.c_proj, c_fc, mlp.c_proj", spec);
        unsigned bits = 0;
        for (int s = 0; s < GPTC_LORA_SITES; s++) {
            const char *mod = k_sites[s].module, *leaf = strchr(mod, '.') + 1;
            if (!strcmp(word, k_sites[s].group) || !strcmp(word, mod) ||
                (!strcmp(word, leaf) && strcmp(leaf, "c_proj") != 0))
                bits |= 1u << s;
        }
        if (!bits)
            return gptc_fail(GPTC_ERR_ARG, "'lora_targets' %s: '%s' names no linear layer; use attn, mlp, c_attn, "
                             "attn.c_proj, c_fc or mlp.c_proj (c_proj alone is ambiguous)", spec, word);
        *targets |= bits;
    }
    return GPTC_OK;
}

void gptc_lora_targets_name(unsigned targets, char *out, size_t cap) {
    size_t k = 0;
    out[0] = '\0';
    for (int s = 0; s < GPTC_LORA_SITES && k < cap; s++)
        if (targets & 1u << s) k += (size_t)snprintf(out + k, cap - k, "%s%s", k ? "," : "", k_sites[s].module);
}

int gptc_lora_table(const gptc_model_config *cfg, int rank, unsigned targets, gptc_tensor_desc *out, size_t *floats) {
    gptc_plan plan = {0};
    int n = 0;
    size_t layer0 = 0;
    gptc_tensor_desc *model = NULL;
    if (out) { /* the ready watermark: each layer's first model float */
        model = malloc(sizeof *model * (size_t)gptc_model_tensor_table(cfg, NULL));
        if (model) gptc_model_tensor_table(cfg, model);
    }
    for (int l = 0; l < cfg->layers; l++) {
        if (model) layer0 = model[2 + l * GPTC_LAYER_TENSORS].offset;
        for (int s = 0; s < GPTC_LORA_SITES; s++) {
            if (!(targets & 1u << s)) continue;
            int in, o;
            gptc_lora_site_shape(s, cfg->channels, &in, &o);
            for (int ab = 0; ab < 2; ab++) {
                int64_t rows = ab ? o : rank, cols = ab ? rank : in;
                size_t off = gptc_plan_take(&plan, (size_t)(rows * cols));
                if (out) {
                    gptc_tensor_desc *d = &out[n];
                    memset(d, 0, sizeof *d);
                    snprintf(d->name, sizeof d->name, "h.%d.%s.lora_%c.weight", l, k_sites[s].module, ab ? 'B' : 'A');
                    d->ndim = 2;
                    d->shape[0] = rows;
                    d->shape[1] = cols;
                    d->numel = (size_t)(rows * cols);
                    d->decay = true;
                    d->offset = d->src = off;
                    d->ready = layer0;
                }
                n++;
            }
        }
    }
    free(model);
    if (floats) *floats = plan.used;
    return n;
}

void gptc_lora_peft_name(const char *name, char *out, size_t cap) {
    snprintf(out, cap, "base_model.model.transformer.%s", name);
}

/* host bytes of the adapters' table and views, and backend bytes of their values (for the planner) */
void gptc_lora_bytes(const gptc_model_config *cfg, int rank, unsigned targets, size_t *host, size_t *values) {
    size_t floats;
    int n = gptc_lora_table(cfg, rank, targets, NULL, &floats);
    size_t views = (size_t)cfg->layers * GPTC_LORA_SITES * sizeof(float *);
    *host = gptc_alloc_block_bytes(sizeof(gptc_lora)) + gptc_alloc_block_bytes(sizeof(gptc_tensor_desc) * (size_t)n) +
            2 * gptc_alloc_block_bytes(views);
    *values = gptc_backend_cpu_memory()->block_bytes(floats * sizeof(float));
}

void gptc_lora_pair_site(unsigned targets, int p, int *l, int *s) {
    int per = __builtin_popcount(targets), k = p % per;
    *l = p / per;
    for (*s = 0; !(targets >> *s & 1) || k-- > 0; (*s)++) {
    }
}

void gptc_model_lora_free(gptc_model *m) {
    gptc_lora *lr = m->lora;
    if (!lr) return;
    const gptc_backend_memory *mem = m->be.mem ? m->be.mem : gptc_backend_cpu_memory();
    mem->free(lr->params);
    if (lr->grads == m->grads) m->grads = NULL; /* the trainable set's gradients: the adapters' */
    mem->free(lr->grads);
    mem->free(lr->u);
    mem->free(lr->du);
    gptc_free(lr->tensors);
    gptc_free(lr->A);
    gptc_free(lr->B);
    gptc_free(lr);
    m->lora = NULL;
}

/* A uniform in +-1/sqrt(in) as PEFT's kaiming_uniform(a=sqrt(5)) (deterministic in seed), B zero. */
static void lora_init(gptc_lora *lr, uint64_t seed) {
    gptc_rng rng;
    gptc_rng_seed(&rng, seed ^ 0x4C6F5241ULL); /* "LoRA": not the base init's stream */
    memset(lr->params, 0, lr->floats * sizeof(float));
    for (int i = 0; i < lr->ntensors; i++) {
        const gptc_tensor_desc *d = &lr->tensors[i];
        if (i % 2) continue; /* B (the table lists each site's A, then its B): zero */
        double bound = 1.0 / sqrt((double)d->shape[1]); /* kaiming_uniform(a=sqrt(5)) on (r, in) */
        float *p = lr->params + d->offset;
        for (size_t j = 0; j < d->numel; j++) p[j] = (float)(bound * (2 * gptc_rng_uniform(&rng) - 1));
    }
}

gptc_status gptc_model_lora_attach(gptc_model *m, int rank, float alpha, unsigned targets, uint64_t seed) {
    GPTC_ASSERT(!m->lora && !m->grads && !m->act_arena);
    if (rank < 1 || rank > m->cfg.channels)
        return gptc_fail(GPTC_ERR_ARG, "'lora' %d: the rank must be in 1..%d (the model's width)", rank, m->cfg.channels);
    if (!(alpha > 0 && isfinite(alpha))) return gptc_fail(GPTC_ERR_ARG, "'lora_alpha' %g: must be positive", alpha);
    if (!targets) return gptc_fail(GPTC_ERR_ARG, "'lora_targets': no linear layer chosen");
    gptc_lora *lr = gptc_alloc(sizeof *lr, "LoRA adapters"); /* zeroed */
    if (!lr) return GPTC_ERR_NOMEM;
    m->lora = lr;
    lr->rank = rank;
    lr->alpha = alpha;
    lr->scale = alpha / (float)rank;
    lr->targets = targets;
    lr->ntensors = gptc_lora_table(&m->cfg, rank, targets, NULL, &lr->floats);
    size_t views = (size_t)m->cfg.layers * GPTC_LORA_SITES * sizeof(float *);
    lr->tensors = gptc_alloc(sizeof(gptc_tensor_desc) * (size_t)lr->ntensors, "LoRA tensor table");
    lr->A = gptc_alloc(views, "LoRA views");
    lr->B = gptc_alloc(views, "LoRA views");
    lr->params = m->be.mem->alloc(lr->floats * sizeof(float), "LoRA adapters");
    if (!lr->tensors || !lr->A || !lr->B || !lr->params) {
        gptc_model_lora_free(m);
        return gptc_fail(GPTC_ERR_NOMEM, "out of memory: LoRA adapters of rank %d", rank);
    }
    gptc_lora_table(&m->cfg, rank, targets, lr->tensors, NULL);
    for (int p = 0; p < lr->ntensors / 2; p++) { /* the views of adapted sites (gptc_alloc zeroed the rest) */
        int l, site;
        gptc_lora_pair_site(targets, p, &l, &site);
        lr->A[l * GPTC_LORA_SITES + site] = lr->params + lr->tensors[2 * p].offset;
        lr->B[l * GPTC_LORA_SITES + site] = lr->params + lr->tensors[2 * p + 1].offset;
    }
    lora_init(lr, seed);
    return GPTC_OK;
}

/* W (in, out) += scale A^T B^T for A (r, in), B (out, r): each element's sum over r in double, added once */
static void fold(float *W, const float *A, const float *B, int in, int out, int r, double scale) {
#pragma omp parallel for schedule(static)
    for (int i = 0; i < in; i++)
        for (int j = 0; j < out; j++) {
            double acc = 0;
            for (int k = 0; k < r; k++) acc += (double)A[(size_t)k * in + i] * B[(size_t)j * r + k];
            W[(size_t)i * out + j] += (float)(scale * acc);
        }
}

void gptc_lora_fold_site(gptc_model *m, int l, int s, const float *A, const float *B, int r, double scale) {
    int in, out;
    gptc_lora_site_shape(s, m->cfg.channels, &in, &out);
    fold(((float **)&m->w.layer[l])[k_sites[s].weight], A, B, in, out, r, scale);
}
