/* test_lora.c — fine-tuning a part of the model: --freeze (model/trainable.c: the patterns, gradients only for
 * the rest, frozen tensors untouched) and LoRA (model/lora.c, forward.c, train/adapters.c): a zero B leaves
 * the forward unchanged, the adapters' gradients against finite differences and against the merged model's
 * gradient in double, the merge equal to the adapted forward (in memory and through PEFT's files), resume
 * bit-exact, and the refusals of bad input. */
#include "test.h"
#include "model/gpt2.h"
#include "train/weights.h"
#include "io/io.h"

#include <stdlib.h>
#include <string.h>

#if defined(__aarch64__) /* the aarch64 cross gcc 12 ICEs vectorising some of these loops */
#pragma GCC optimize("no-tree-vectorize")
#endif

static const gptc_model_config k_cfg = {2, 4, 32, 16, 40, GPTC_GELU_KIND_TANH}; /* layers, heads, C, context, vocab */
enum { B = 3, T = 16, ALL_SITES = 15 };

static void tokens(int *x, int n, uint64_t seed) {
    gptc_rng r;
    gptc_rng_seed(&r, seed);
    for (int i = 0; i < n; i++) x[i] = (int)(gptc_rng_uniform(&r) * k_cfg.vocab);
}

/* A model of k_cfg with weights of seed 7; lora > 0 attaches adapters (targets, alpha 2 * r) and gives B random
 * values of scale bscale (0: the zero init); freeze: patterns (NULL: none). Allocated for (B, T). */
static gptc_precision g_dtype = GPTC_PRECISION_FP32; /* make()'s precision and recompute level */
static gptc_recompute g_recompute = GPTC_RECOMPUTE_NONE;
static void make(gptc_model *m, int lora, unsigned targets, float bscale, const char *freeze) {
    CHECK_OK(gptc_model_init(m, &k_cfg));
    m->precision = g_dtype;
    m->recompute = g_recompute;
    gptc_model_init_weights(m, 7);
    int nfrozen;
    if (freeze) CHECK_OK(gptc_model_freeze(m, freeze, &nfrozen));
    if (lora) {
        CHECK_OK(gptc_model_lora_attach(m, lora, 2.0f * lora, targets, 11));
        gptc_rng r;
        gptc_rng_seed(&r, 12);
        for (int i = 0; i < m->lora->ntensors; i++) {
            const gptc_tensor_desc *d = &m->lora->tensors[i];
            if (strstr(d->name, ".lora_B."))
                for (size_t j = 0; j < d->numel; j++)
                    m->lora->params[d->offset + j] = bscale * (float)(2 * gptc_rng_uniform(&r) - 1);
        }
    }
    CHECK_OK(gptc_model_alloc_train(m, B, T));
}

static double mean_loss(gptc_model *m, const int *in, const int *tg) {
    gptc_model_forward(m, in, tg, B, T);
    double s = 0;
    for (int i = 0; i < B * T; i++) s += m->a.losses[i];
    return s / (B * T);
}

TEST(freeze_patterns_match_names) {
    struct { const char *pat, *name; bool want; } c[] = {
        {"wte", "wte.weight", true},           {"wte", "wpe.weight", false},
        {"h.0-9.*", "h.9.mlp.c_fc.bias", true}, {"h.0-9.*", "h.10.ln_1.weight", false},
        {"h.1", "h.10.ln_1.weight", false},     {"h.1", "h.1.ln_1.weight", true},
        {"*.bias", "ln_f.bias", true},          {"*.bias", "h.3.attn.c_proj.weight", false},
        {"h.*.ln_1", "h.3.ln_1.weight", true},  {"h.*.attn.c_attn", "h.3.attn.c_proj.weight", false},
        {"ln_f", "ln_f.weight", true},          {"h.2-3.mlp", "h.2.mlp.c_proj.bias", true},
    };
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++)
        CHECK_MSG(gptc_freeze_match(c[i].pat, c[i].name) == c[i].want, "'%s' vs %s: expected %s", c[i].pat, c[i].name,
                  c[i].want ? "a match" : "none");
    unsigned t;
    CHECK_OK(gptc_lora_targets_parse("attn,mlp", &t));
    CHECK_EQ_INT(t, ALL_SITES);
    CHECK_OK(gptc_lora_targets_parse("c_attn,mlp.c_proj", &t));
    CHECK_EQ_INT(t, (1u << GPTC_LORA_QKV) | (1u << GPTC_LORA_FCPROJ));
    CHECK(gptc_lora_targets_parse("c_proj", &t) != GPTC_OK); /* ambiguous */
    CHECK(gptc_lora_targets_parse("attn,qkv", &t) != GPTC_OK);
}

/* The gradients of the tensors --freeze leaves are those of the whole model, bit for bit (the backward only
 * skips work), the compact arena holds exactly them, and the backward stops above the lowest trained layer. */
TEST(freeze_gradients_equal_whole_model) {
    int in[B * T], tg[B * T];
    tokens(in, B * T, 1);
    tokens(tg, B * T, 2);
    gptc_model whole;
    make(&whole, 0, 0, 0, NULL);
    gptc_model_zero_grad(&whole);
    gptc_model_forward_backward(&whole, in, tg, B, T, 1.0f);
    const char *pats[] = {"wte,wpe,h.0.*", "*.bias,ln_f", "wpe,h.1.attn", "wte"};
    const int floors[] = {1, -1, -1, -1};
    for (int p = 0; p < 4; p++) {
        gptc_model m;
        make(&m, 0, 0, 0, pats[p]);
        CHECK_EQ_INT(m.bwd_floor, floors[p]);
        gptc_model_zero_grad(&m);
        float loss = gptc_model_forward_backward(&m, in, tg, B, T, 1.0f);
        CHECK(loss == whole.loss);
        int k = 0, bad = 0;
        size_t trained = 0;
        for (int i = 0; i < m.ntensors; i++) {
            if (m.frozen[i]) continue;
            const gptc_tensor_desc *d = &m.ps.t[k++];
            CHECK(strcmp(d->name, m.tensors[i].name) == 0);
            trained += d->numel;
            bad += memcmp(m.grads + d->offset, whole.grads + m.tensors[i].offset, d->numel * sizeof(float)) != 0;
        }
        CHECK_EQ_INT(k, m.ps.n);
        CHECK_MSG(bad == 0, "'%s': %d trained tensors' gradients differ from the whole model's", pats[p], bad);
        CHECK(m.ps.floats >= trained && m.ps.floats < trained + 16 * (size_t)m.ps.n);
        gptc_model_free(&m);
    }
    gptc_model_free(&whole);
}

/* Adapters with B = 0 (their initialisation) leave the forward unchanged, bit for bit. */
TEST(lora_zero_b_leaves_forward_unchanged) {
    int in[B * T], tg[B * T];
    tokens(in, B * T, 3);
    tokens(tg, B * T, 4);
    gptc_model base, ad;
    make(&base, 0, 0, 0, NULL);
    make(&ad, 4, ALL_SITES, 0, NULL);
    gptc_model_forward(&base, in, tg, B, T);
    gptc_model_forward(&ad, in, tg, B, T);
    CHECK(memcmp(base.a.losses, ad.a.losses, sizeof(float) * B * T) == 0);
    CHECK(base.loss == ad.loss);
    gptc_model_free(&base);
    gptc_model_free(&ad);
}

/* W' = W + s A^T B^T: the adapters' gradients from the merged model's weight gradient dW', in double:
 * dA[k][i] = s sum_j dW'[i][j] B[j][k], dB[j][k] = s sum_i dW'[i][j] A[k][i]. Both models run the same
 * function (the merged forward rounds differently, ~1e-7), so they agree to ~1e-5 of the largest entry. */
TEST(lora_gradients_match_merged_model_gradient) {
    int in[B * T], tg[B * T];
    tokens(in, B * T, 5);
    tokens(tg, B * T, 6);
    gptc_model ad, merged;
    make(&ad, 3, ALL_SITES, 0.3f, NULL);
    make(&merged, 0, 0, 0, NULL);
    memcpy(merged.params, ad.params, ad.num_floats * sizeof(float));
    gptc_lora *lr = ad.lora;
    for (int l = 0; l < k_cfg.layers; l++)
        for (int s = 0; s < GPTC_LORA_SITES; s++) {
            gptc_lora_fold_site(&merged, l, s, lr->A[l * 4 + s], lr->B[l * 4 + s], lr->rank, lr->scale);
        }
    gptc_model_zero_grad(&ad);
    gptc_model_zero_grad(&merged);
    gptc_model_forward_backward(&ad, in, tg, B, T, 1.0f);
    gptc_model_forward_backward(&merged, in, tg, B, T, 1.0f);
    int r = lr->rank;
    double worst = 0;
    for (int l = 0; l < k_cfg.layers; l++)
        for (int s = 0; s < GPTC_LORA_SITES; s++) {
            int in_, out;
            gptc_lora_site_shape(s, k_cfg.channels, &in_, &out);
            const int weight[GPTC_LORA_SITES] = {GPTC_QKVW, GPTC_ATTPROJW, GPTC_FCW, GPTC_FCPROJW};
            const float *dW = ((float **)&merged.g.layer[l])[weight[s]];
            const float *A = lr->A[l * 4 + s], *Bm = lr->B[l * 4 + s], *gA = gptc_lora_grad(lr, A), *gB = gptc_lora_grad(lr, Bm);
            double big = 0, err = 0;
            for (int k = 0; k < r; k++)
                for (int i = 0; i < in_; i++) {
                    double e = 0;
                    for (int j = 0; j < out; j++) e += (double)dW[(size_t)i * out + j] * Bm[(size_t)j * r + k];
                    e *= lr->scale;
                    big = fmax(big, fabs(e));
                    err = fmax(err, fabs(e - gA[(size_t)k * in_ + i]));
                }
            for (int j = 0; j < out; j++)
                for (int k = 0; k < r; k++) {
                    double e = 0;
                    for (int i = 0; i < in_; i++) e += (double)dW[(size_t)i * out + j] * A[(size_t)k * in_ + i];
                    e *= lr->scale;
                    big = fmax(big, fabs(e));
                    err = fmax(err, fabs(e - gB[(size_t)j * r + k]));
                }
            CHECK_MSG(big > 0 && err <= 2e-5 * big, "layer %d %s: worst error %.3g of the largest %.3g", l,
                      gptc_lora_site_module(s), err, big);
            worst = fmax(worst, err / big);
        }
    printf("    adapters' gradients vs the merged model's dW (double): worst %.2e of the largest entry\n", worst);
    gptc_model_free(&ad);
    gptc_model_free(&merged);
}

/* The loss's slope along the adapters' own gradient (A's part and B's part separately), from central
 * differences at steps h and h/2 combined by Richardson extrapolation, equals |g|^2 (grad . d). */
TEST(lora_gradients_match_finite_differences) {
    int in[B * T], tg[B * T];
    tokens(in, B * T, 8);
    tokens(tg, B * T, 9);
    gptc_model m;
    make(&m, 2, ALL_SITES, 0.3f, NULL);
    gptc_lora *lr = m.lora;
    size_t n = lr->floats;
    gptc_model_zero_grad(&m);
    gptc_model_forward_backward(&m, in, tg, B, T, 1.0f);
    float *p0 = malloc(n * sizeof(float)), *dir = calloc(n, sizeof(float));
    memcpy(p0, lr->params, n * sizeof(float));
    for (int part = 0; part < 2; part++) { /* 0: the A matrices, 1: the B matrices */
        double gd = 0;
        memset(dir, 0, n * sizeof(float));
        for (int i = 0; i < lr->ntensors; i++) {
            const gptc_tensor_desc *d = &lr->tensors[i];
            if ((strstr(d->name, ".lora_B.") != NULL) != part) continue;
            for (size_t j = 0; j < d->numel; j++) {
                dir[d->offset + j] = lr->grads[d->offset + j];
                gd += (double)dir[d->offset + j] * dir[d->offset + j];
            }
        }
        double slope[2];
        for (int k = 0; k < 2; k++) {
            double h = (k ? 0.001 : 0.002) / sqrt(gd); /* steps of 0.002 and 0.001 in the adapters' space */
            for (size_t j = 0; j < n; j++) lr->params[j] = p0[j] + (float)h * dir[j];
            double lp = mean_loss(&m, in, tg);
            for (size_t j = 0; j < n; j++) lr->params[j] = p0[j] - (float)h * dir[j];
            double lm = mean_loss(&m, in, tg);
            slope[k] = (lp - lm) / (2 * h);
        }
        memcpy(lr->params, p0, n * sizeof(float));
        double fd = (4 * slope[1] - slope[0]) / 3, err = fabs(fd - gd) / fabs(fd);
        printf("    lora_%c: slope %.7g, |grad|^2 %.7g: rel err %.1e\n", part ? 'B' : 'A', fd, gd, err);
        CHECK_MSG(gd > 0 && err < 3e-4, "lora_%c: grad . d %.8g vs finite difference %.8g (rel err %g)", part ? 'B' : 'A',
                  gd, fd, err);
    }
    free(p0);
    free(dir);
    gptc_model_free(&m);
}

/* Folding the adapters in gives the adapted model's losses (to float rounding): in memory, and through
 * the files (a base folder with PEFT's adapter files beside it, read back merged by gptc_weights_load). */
TEST(lora_merge_equals_adapted_forward) {
    int in[B * T], tg[B * T];
    tokens(in, B * T, 13);
    tokens(tg, B * T, 14);
    gptc_model ad;
    make(&ad, 4, (1u << GPTC_LORA_QKV) | (1u << GPTC_LORA_FC), 0.5f, NULL);
    double adapted = mean_loss(&ad, in, tg);
    float *losses = malloc(sizeof(float) * B * T);
    memcpy(losses, ad.a.losses, sizeof(float) * B * T);
    char dir[600];
    test_path(dir, sizeof dir, "%s/lora-merge", test_tmpdir());
    CHECK_OK(gptc_mkdir_p(dir));
    CHECK_OK(gptc_weights_write_hf(dir, &ad, "", GPTC_F32, true));
    CHECK_OK(gptc_adapters_write(dir, &ad, "base"));
    /* PEFT's names and config */
    char path[700];
    gptc_st_file f = {0};
    CHECK_OK(gptc_st_open(&f, test_path(path, sizeof path, "%s/adapter_model.safetensors", dir)));
    CHECK(gptc_st_find(&f, "base_model.model.transformer.h.1.attn.c_attn.lora_A.weight") != NULL);
    const gptc_st_tensor *bt = gptc_st_find(&f, "base_model.model.transformer.h.0.mlp.c_fc.lora_B.weight");
    CHECK(bt && bt->shape[0] == 4 * k_cfg.channels && bt->shape[1] == 4);
    CHECK(gptc_st_find(&f, "base_model.model.transformer.h.0.attn.c_proj.lora_A.weight") == NULL);
    CHECK_EQ_INT(f.ntensors, 2 * 2 * k_cfg.layers);
    gptc_st_close(&f);
    gptc_adapters_info ai;
    CHECK_OK(gptc_adapters_probe(dir, &ai));
    CHECK(ai.found && ai.rank == 4 && ai.alpha == 8.0f);
    CHECK_EQ_INT(ai.targets, (1u << GPTC_LORA_QKV) | (1u << GPTC_LORA_FC));
    for (int how = 0; how < 2; how++) { /* 0: gptc_lora_fold_site on ad's adapters in memory, 1: the files */
        gptc_model m;
        make(&m, 0, 0, 0, NULL);
        if (how == 0) {
            const gptc_lora *lr = ad.lora;
            memcpy(m.params, ad.params, ad.num_floats * sizeof(float));
            for (int i = 0; i < k_cfg.layers * GPTC_LORA_SITES; i++)
                if (lr->A[i])
                    gptc_lora_fold_site(&m, i / GPTC_LORA_SITES, i % GPTC_LORA_SITES, lr->A[i], lr->B[i], lr->rank,
                                        lr->scale);
        } else {
            gptc_weights_info wi;
            CHECK_OK(gptc_weights_find(dir, &wi));
            CHECK(wi.adapters.found);
            CHECK_OK(gptc_weights_load(&wi, &m));
        }
        double merged = mean_loss(&m, in, tg), worst = 0;
        for (int i = 0; i < B * T; i++) worst = fmax(worst, fabs(m.a.losses[i] - losses[i]) / fabs(losses[i]));
        printf("    merged (%s): loss %.9g vs adapted %.9g, worst token %.1e\n", how ? "files" : "memory", merged,
               adapted, worst);
        CHECK_MSG(worst < 2e-5, "merged %s: token loss off by %.3g relative", how ? "from files" : "in memory", worst);
        gptc_model_free(&m);
    }
    free(losses);
    gptc_model_free(&ad);
}

/* The decoder (gptc sample, the samples in a LoRA run's log) applies the adapters: a prompt's prefill and
 * then steps give the adapted training forward's logits. */
TEST(lora_decoder_matches_adapted_forward) {
    int in[B * T];
    tokens(in, B * T, 31);
    gptc_model m;
    make(&m, 4, ALL_SITES, 0.5f, NULL); /* unfused (the default of a bare model): the forward keeps its logits */
    gptc_model_forward(&m, in, NULL, B, T);
    gptc_decoder d;
    CHECK_OK(gptc_decoder_init(&d, &m, 2, T, GPTC_PRECISION_FP32, true));
    int p = T / 2;
    double worst = 0, big = 0;
    const float *lg = gptc_decoder_prefill(&m, &d, 0, in, p);
    for (int v = 0; v < k_cfg.vocab; v++) {
        double want = m.a.logits[(size_t)(p - 1) * m.Vp + v];
        worst = fmax(worst, fabs(lg[v] - want)), big = fmax(big, fabs(want));
    }
    gptc_decoder_fork(&m, &d, 0);
    for (int t = p; t < T; t++) {
        int two[2] = {in[t], in[t]};
        lg = gptc_decoder_step(&m, &d, two);
        for (int s = 0; s < 2; s++)
            for (int v = 0; v < k_cfg.vocab; v++) {
                double want = m.a.logits[(size_t)t * m.Vp + v];
                worst = fmax(worst, fabs(lg[(size_t)s * m.Vp + v] - want)), big = fmax(big, fabs(want));
            }
    }
    printf("    decoder vs adapted forward: worst logit %.2e of the largest %.3g\n", worst, big);
    CHECK_MSG(worst <= 1e-5 * fmax(big, 1.0), "decoder logits off by %.3g", worst);
    /* and the adapters matter: the base's logits are further away */
    gptc_lora *lr = m.lora;
    m.lora = NULL;
    gptc_model_forward(&m, in, NULL, B, T);
    m.lora = lr;
    double base = 0;
    for (int v = 0; v < k_cfg.vocab; v++) base = fmax(base, fabs(lg[(size_t)v] - m.a.logits[(size_t)(T - 1) * m.Vp + v]));
    CHECK_MSG(base > 100 * worst, "the adapters change the logits by only %.3g", base);
    gptc_decoder_free(&d);
    gptc_model_free(&m);
}

/* Under bf16 (the O2 weight copy, bf16 activations) the adapters' gradients are the same bits with every
 * recompute level, and within bf16's rounding of the fp32 ones. */
TEST(lora_bf16_and_recompute) {
    int in[B * T], tg[B * T];
    tokens(in, B * T, 21);
    tokens(tg, B * T, 22);
    float *ref = NULL, *fp32 = NULL;
    size_t n = 0;
    const gptc_recompute levels[] = {GPTC_RECOMPUTE_NONE, GPTC_RECOMPUTE_GELU, GPTC_RECOMPUTE_ATTN, GPTC_RECOMPUTE_BLOCK};
    for (int v = -1; v < 4; v++) { /* -1: fp32 */
        g_dtype = v < 0 ? GPTC_PRECISION_FP32 : GPTC_PRECISION_BF16;
        g_recompute = v < 0 ? GPTC_RECOMPUTE_NONE : levels[v];
        gptc_model m;
        make(&m, 4, ALL_SITES, 0.3f, NULL);
        gptc_model_zero_grad(&m);
        gptc_model_forward_backward(&m, in, tg, B, T, 1.0f);
        n = m.lora->floats;
        float *g = malloc(n * sizeof(float));
        memcpy(g, m.grads, n * sizeof(float));
        if (v < 0) fp32 = g;
        else if (v == 0) ref = g;
        else {
            CHECK_MSG(memcmp(g, ref, n * sizeof(float)) == 0, "bf16 recompute %s: the adapters' gradients differ from none's",
                      gptc_recompute_name(levels[v]));
            free(g);
        }
        gptc_model_free(&m);
    }
    g_dtype = GPTC_PRECISION_FP32;
    g_recompute = GPTC_RECOMPUTE_NONE;
    double big = 0, err = 0;
    for (size_t i = 0; i < n; i++) big = fmax(big, fabs(fp32[i])), err = fmax(err, fabs(fp32[i] - ref[i]));
    printf("    bf16 vs fp32 adapters' gradients: worst %.2e of the largest entry\n", err / big);
    CHECK_MSG(err <= 0.05 * big, "bf16 adapters' gradients off by %.3g of the largest fp32 entry", err / big);
    free(ref);
    free(fp32);
}

/* ---- through gptc_train and the CLI */

typedef struct { float loss[64]; int n, stop_at; } losses_seen;
static int record(void *user, const gptc_step_info *in) {
    losses_seen *r = user;
    if (in->event != GPTC_EVENT_STEP) return 0;
    if (r->n < 64) r->loss[r->n++] = in->loss;
    return r->stop_at && in->step == r->stop_at;
}

/* the values of tensor `name` in a safetensors file (malloc'd), or NULL */
static float *tensor_of(const char *file, const char *name, size_t *n) {
    gptc_st_file f = {0};
    if (gptc_st_open(&f, file) != GPTC_OK) return NULL;
    const gptc_st_tensor *t = gptc_st_find(&f, name);
    float *out = t ? malloc(t->nbytes) : NULL;
    if (out) memcpy(out, t->data, t->nbytes), *n = t->numel;
    gptc_st_close(&f);
    return out;
}

/* A LoRA run and a --freeze run resume bit for bit; what they freeze is the starting weights, bit for bit;
 * what they train moves. */
TEST(lora_and_freeze_resume_bit_exact_base_untouched) {
    for (int kind = 0; kind < 2; kind++) { /* 0: LoRA r=4 on attn and mlp, 1: --freeze wte,wpe,h.0.* */
        gptc_train_options o;
        test_tiny_train_options(&o, test_shakespeare_data());
        o.steps = 12;
        o.lr = 1e-2f;
        if (kind == 0) o.lora = 4, o.lora_targets = "attn,mlp";
        else o.freeze = "wte,wpe,h.0.*";
        char start[600], dir[600], file[700];
        test_path(start, sizeof start, "%s/%s-start", test_tmpdir(), kind ? "freeze" : "lora");
        test_path(dir, sizeof dir, "%s/%s-run", test_tmpdir(), kind ? "freeze" : "lora");
        /* the starting weights: one plain step's checkpoint */
        gptc_train_options s = o;
        s.lora = 0, s.freeze = NULL, s.steps = 1, s.ckpt_dir = start;
        gptc_train_result r;
        CHECK_OK(gptc_train(&s, NULL, NULL, &r));
        test_path(file, sizeof file, "%s/step-00000001", start);
        o.init = strdup(file);
        losses_seen whole = {0}, first = {0}, second = {0};
        CHECK_OK(gptc_train(&o, record, &whole, &r));
        CHECK_EQ_INT(whole.n, 12);
        o.ckpt_dir = dir;
        first.stop_at = 5;
        CHECK_OK(gptc_train(&o, record, &first, &r));
        CHECK_OK(gptc_train(&o, record, &second, &r));
        CHECK_EQ_INT(second.n, 7);
        for (int i = 0; i < 7; i++)
            CHECK_MSG(second.loss[i] == whole.loss[5 + i], "%s step %d after resume: %.9g vs %.9g", kind ? "freeze" : "lora",
                      6 + i, second.loss[i], whole.loss[5 + i]);
        /* the frozen weights: as they started */
        char base[700], end[700];
        test_path(base, sizeof base, "%s/model.safetensors", file);
        test_path(end, sizeof end, "%s/step-00000012/model.safetensors", dir);
        const char *same[] = {"wpe.weight", "h.0.attn.c_attn.weight", "h.1.mlp.c_fc.weight"};
        for (int i = 0; i < 3; i++) {
            size_t na = 0, nb = 0;
            float *a = tensor_of(base, same[i], &na), *b = tensor_of(end, same[i], &nb);
            bool frozen = kind == 0 || i < 2;
            CHECK_MSG(a && b && na == nb && (memcmp(a, b, na * sizeof(float)) == 0) == frozen, "%s: %s %s", kind ? "freeze" : "lora",
                      same[i], frozen ? "changed though frozen" : "did not train");
            free(a), free(b);
        }
        if (kind == 0) {
            test_path(end, sizeof end, "%s/step-00000012/adapter_model.safetensors", dir);
            size_t n = 0;
            float *bm = tensor_of(end, "base_model.model.transformer.h.1.mlp.c_proj.lora_B.weight", &n);
            double sum = 0;
            for (size_t i = 0; bm && i < n; i++) sum += fabs(bm[i]);
            CHECK_MSG(bm && sum > 0, "the adapters' B did not train");
            free(bm);
        }
        free((char *)o.init);
    }
}

/* Bad input: one line naming the flag, exit 2. */
TEST(lora_and_freeze_refuse_bad_input) {
    const char *data = test_shakespeare_data(), *tmp = test_tmpdir();
    char ck[600];
    test_path(ck, sizeof ck, "%s/lora-bad", tmp);
    const char *base = "--model tiny --batch 2 --seq 16 --eval-batches 1 --threads 2";
    struct { const char *args, *want; } c[] = {
        {"--freeze h.9.*", "--freeze h.9.*: 'h.9.*' matches no tensor"},
        {"--freeze wte --lora 4", "not with --lora"},
        {"--lora 4 --fused-update", "--fused-update: not with --lora"},
        {"--lora 4 --lora-targets qkv", "--lora-targets qkv: 'qkv' names no linear layer"},
    };
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        test_cli_result r = test_cli(NULL, "train --data %s %s --steps 1 %s", data, base, c[i].args);
        CHECK_MSG(r.rc == 2 && strstr(r.err, c[i].want) && test_count_lines(r.err) == 1, "%s: rc %d, stderr: %s",
                  c[i].args, r.rc, r.err);
        test_cli_free(&r);
    }
    /* a LoRA checkpoint of rank 4: another rank from it, and resuming it without --lora, are refused */
    test_cli_result r = test_cli(NULL, "train --data %s %s --steps 2 --lora 4 --ckpt %s", data, base, ck);
    CHECK_EQ_INT(r.rc, 0);
    test_cli_free(&r);
    r = test_cli(NULL, "train --data %s %s --steps 3 --lora 8 --init %s --ckpt %s/other", data, base, ck, tmp);
    CHECK_MSG(r.rc == 2 && strstr(r.err, "adapters of rank 4") && test_count_lines(r.err) == 1, "rank 8 on rank 4: rc %d, %s",
              r.rc, r.err);
    test_cli_free(&r);
    r = test_cli(NULL, "train --data %s %s --steps 3 --ckpt %s", data, base, ck);
    CHECK_MSG(r.rc == 2 && strstr(r.err, "a LoRA run's checkpoint") && test_count_lines(r.err) == 1, "resume without --lora: "
              "rc %d, %s", r.rc, r.err);
    test_cli_free(&r);
    /* export: --merge-lora without adapters, llmc with them */
    char out[700];
    r = test_cli(NULL, "export --ckpt %s --format llmc --out %s", ck, test_path(out, sizeof out, "%s/x.bin", tmp));
    CHECK_MSG(r.rc == 2 && strstr(r.err, "--merge-lora"), "llmc with adapters: rc %d, %s", r.rc, r.err);
    test_cli_free(&r);
    r = test_cli(NULL, "export --ckpt %s --format hf --out %s/peft", ck, tmp);
    CHECK_EQ_INT(r.rc, 0);
    test_cli_free(&r);
    r = test_cli(NULL, "export --ckpt %s/peft --format hf --out %s/peft2 --merge-lora", tmp, tmp);
    CHECK_EQ_INT(r.rc, 0);
    test_cli_free(&r);
    r = test_cli(NULL, "export --ckpt %s/peft2 --format hf --out %s/peft3 --merge-lora", tmp, tmp);
    CHECK_MSG(r.rc == 2 && strstr(r.err, "holds no LoRA adapters"), "--merge-lora without adapters: rc %d, %s", r.rc, r.err);
    test_cli_free(&r);
}
