/* test_model.c — model-level properties: initialisation, KV-cache decoding equal to the full
 * forward, vocabulary padding that never changes a loss, determinism across runs and thread
 * counts, gradient accumulation equal to one large batch, and the GELU form of the config used by
 * the forward, the backward and decoding alike. */
#include "test.h"
#include "model/gpt2.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

static const gptc_model_config k_small = {2, 4, 32, 24, 70, GPTC_GELU_KIND_TANH}; /* vocab 70 pads to 128 */
static const gptc_gelu_kind k_forms[] = {GPTC_GELU_KIND_TANH, GPTC_GELU_KIND_ERF, GPTC_GELU_KIND_SIGMOID};

static void random_tokens(int *x, int n, int vocab, uint64_t seed) {
    gptc_rng r;
    gptc_rng_seed(&r, seed);
    for (int i = 0; i < n; i++) x[i] = (int)(gptc_rng_next(&r) % vocab);
}

TEST(model_init_statistics) {
    gptc_model_config cfg = {4, 4, 64, 32, 300, GPTC_GELU_KIND_TANH};
    gptc_model a, b;
    CHECK_OK(gptc_model_init(&a, &cfg));
    CHECK_OK(gptc_model_init(&b, &cfg));
    gptc_model_init_weights(&a, 7);
    gptc_model_init_weights(&b, 7);
    CHECK(memcmp(a.params, b.params, a.num_floats * sizeof(float)) == 0);
    gptc_model_init_weights(&b, 8);
    CHECK(memcmp(a.params, b.params, a.num_floats * sizeof(float)) != 0);
    CHECK_EQ_INT(a.ntensors, 2 + 12 * cfg.layers + 2);
    size_t counted = 0;
    for (int i = 0; i < a.ntensors; i++) {
        const gptc_tensor_desc *d = &a.tensors[i];
        const float *p = a.params + d->offset;
        double s = 0, s2 = 0;
        for (size_t j = 0; j < d->numel; j++) s += p[j], s2 += (double)p[j] * p[j];
        double mean = s / d->numel, sd = sqrt(s2 / d->numel - mean * mean);
        counted += d->numel;
        if (d->ndim == 2) {
            double want = strstr(d->name, "c_proj.weight") ? 0.02 / sqrt(2.0 * cfg.layers) : 0.02;
            CHECK_MSG(fabs(sd - want) < 0.1 * want && fabs(mean) < 0.1 * want, "%s: sd %g want %g", d->name, sd, want);
            CHECK(d->decay);
        } else if (strstr(d->name, "ln_") && strstr(d->name, "weight")) {
            CHECK_MSG(mean == 1 && sd == 0, "%s not ones", d->name);
            CHECK(!d->decay);
        } else {
            CHECK_MSG(mean == 0 && sd == 0, "%s not zeros", d->name);
            CHECK(!d->decay);
        }
    }
    CHECK_EQ_INT(counted, gptc_model_num_params(&cfg));
    CHECK_EQ_INT(gptc_model_num_params(&(gptc_model_config){12, 12, 768, 1024, 50257, GPTC_GELU_KIND_TANH}), 124439808);
    /* padding rows of wte are zero */
    for (size_t j = (size_t)cfg.vocab * cfg.channels; j < (size_t)a.Vp * cfg.channels; j++) CHECK(a.params[j] == 0);
    gptc_model_free(&a);
    gptc_model_free(&b);
}

/* Spreads the MLP pre-activations over roughly N(0, 1.5^2) (GPT-2's init keeps them near 0, where
 * the three GELU forms nearly agree), so that a wrong form shows. */
static void spread_mlp_inputs(gptc_model *m, uint64_t seed) {
    gptc_rng r;
    gptc_rng_seed(&r, seed);
    float scale = 1.5f / (0.02f * sqrtf((float)m->cfg.channels));
    for (int i = 0; i < m->ntensors; i++) {
        const gptc_tensor_desc *d = &m->tensors[i];
        float *p = m->params + d->offset;
        if (strstr(d->name, "mlp.c_fc.weight"))
            for (size_t j = 0; j < d->numel; j++) p[j] *= scale;
        else if (strstr(d->name, "mlp.c_fc.bias"))
            for (size_t j = 0; j < d->numel; j++) p[j] = (float)(gptc_rng_uniform(&r) - 0.5);
    }
}

/* the three forms, written here in double from their definitions */
static double gelu_ref(gptc_gelu_kind f, double x) {
    if (f == GPTC_GELU_KIND_ERF) return 0.5 * x * (1 + erf(x / sqrt(2.0)));
    if (f == GPTC_GELU_KIND_SIGMOID) return x / (1 + exp(-1.702 * x));
    return 0.5 * x * (1 + tanh(sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
}

TEST(model_decode_matches_forward) {
    for (int f = 0; f < 3; f++) {
        gptc_model_config cfg = k_small;
        cfg.gelu = k_forms[f];
        gptc_model m;
        CHECK_OK(gptc_model_init(&m, &cfg));
        gptc_model_init_weights(&m, 3);
        spread_mlp_inputs(&m, 3);
        int T = cfg.context, tokens[64];
        random_tokens(tokens, T, cfg.vocab, 11);
        CHECK_OK(gptc_model_alloc_train(&m, 1, T));
        gptc_model_forward(&m, tokens, NULL, 1, T);
        gptc_kv_cache kv;
        CHECK_OK(gptc_kv_cache_init(&kv, &m));
        for (int t = 0; t < T; t++) {
            const float *lg = gptc_model_decode_step(&m, &kv, tokens[t]);
            double e = test_rel_err_f(lg, m.a.logits + (size_t)t * m.Vp, cfg.vocab);
            CHECK_MSG(e < 1e-5, "gelu %s, position %d: rel err %g", gptc_gelu_name(cfg.gelu), t, e);
        }
        CHECK_EQ_INT(kv.len, T);
        gptc_kv_cache_free(&kv);
        gptc_model_free(&m);
    }
}

/* Same weights, three forms: each forward applies its own form to the MLP pre-activations of every
 * layer (checked element by element against the definition), and erf and sigmoid change the
 * logits from tanh's. */
TEST(model_gelu_forms_forward) {
    int B = 2, T = 16, in[32];
    random_tokens(in, B * T, k_small.vocab, 21);
    float *logits[3];
    size_t nlogits = 0;
    for (int f = 0; f < 3; f++) {
        gptc_model_config cfg = k_small;
        cfg.gelu = k_forms[f];
        gptc_model m;
        CHECK_OK(gptc_model_init(&m, &cfg));
        gptc_model_init_weights(&m, 13);
        spread_mlp_inputs(&m, 13);
        CHECK_OK(gptc_model_alloc_train(&m, B, T));
        gptc_model_forward(&m, in, NULL, B, T);
        size_t n = (size_t)B * T * 4 * cfg.channels;
        double worst = 0, spread = 0;
        for (int l = 0; l < cfg.layers; l++)
            for (size_t i = 0; i < n; i++) {
                double x = m.a.fch[l][i], want = gelu_ref(cfg.gelu, x);
                double e = fabs(((const float *)m.a.fch_gelu[l])[i] - want) / fmax(1.0, fabs(want));
                if (e > worst) worst = e;
                if (fabs(x) > spread) spread = fabs(x);
            }
        CHECK_MSG(worst < 1e-5, "gelu %s: MLP activation differs from the definition by %g", gptc_gelu_name(cfg.gelu), worst);
        CHECK_MSG(spread > 2, "pre-activations only reach %g", spread);
        nlogits = (size_t)B * T * m.Vp;
        logits[f] = malloc(nlogits * sizeof(float));
        memcpy(logits[f], m.a.logits, nlogits * sizeof(float));
        gptc_model_free(&m);
    }
    for (int f = 1; f < 3; f++) {
        double e = test_rel_err_f(logits[f], logits[0], nlogits);
        CHECK_MSG(e > 1e-5, "gelu %s: logits equal tanh's (rel err %g)", gptc_gelu_name(k_forms[f]), e);
    }
    for (int f = 0; f < 3; f++) free(logits[f]);
}

TEST(model_padding_never_changes_loss) {
    gptc_model m;
    CHECK_OK(gptc_model_init(&m, &k_small));
    gptc_model_init_weights(&m, 4);
    int B = 2, T = 16, in[32], tg[32];
    random_tokens(in, B * T, k_small.vocab, 1);
    random_tokens(tg, B * T, k_small.vocab, 2);
    CHECK_OK(gptc_model_alloc_train(&m, B, T));
    float l0 = gptc_model_forward(&m, in, tg, B, T);
    for (size_t j = (size_t)k_small.vocab * k_small.channels; j < (size_t)m.Vp * k_small.channels; j++) m.params[j] = 1e3f;
    float l1 = gptc_model_forward(&m, in, tg, B, T);
    CHECK(l0 == l1);
    /* and no gradient reaches the padding */
    gptc_model_zero_grad(&m);
    gptc_model_backward(&m, 1.0f);
    for (size_t j = (size_t)k_small.vocab * k_small.channels; j < (size_t)m.Vp * k_small.channels; j++)
        if (m.grads[j] != 0) { CHECK_MSG(0, "gradient in padding at %zu", j); break; }
    gptc_model_free(&m);
}

/* one step's gradients with a given thread count */
static float *grads_with_threads(int threads, float *loss) {
    int saved = omp_get_max_threads();
    omp_set_num_threads(threads);
    gptc_model m;
    gptc_model_init(&m, &k_small);
    gptc_model_init_weights(&m, 5);
    int B = 3, T = 20, in[60], tg[60];
    random_tokens(in, B * T, k_small.vocab, 3);
    random_tokens(tg, B * T, k_small.vocab, 4);
    gptc_model_alloc_train(&m, B, T);
    *loss = gptc_model_forward(&m, in, tg, B, T);
    gptc_model_zero_grad(&m);
    gptc_model_backward(&m, 1.0f);
    float *g = malloc(m.num_floats * sizeof(float));
    memcpy(g, m.grads, m.num_floats * sizeof(float));
    gptc_model_free(&m);
    omp_set_num_threads(saved);
    return g;
}

TEST(model_bitwise_deterministic_across_runs_and_threads) {
    gptc_model m;
    gptc_model_init(&m, &k_small);
    size_t n = m.num_floats;
    gptc_model_free(&m);
    float la, lb, lc;
    float *a = grads_with_threads(2, &la), *b = grads_with_threads(2, &lb), *c = grads_with_threads(1, &lc);
    CHECK(la == lb && memcmp(a, b, n * sizeof(float)) == 0);
    /* every output element is computed by one thread in a fixed order, so even the thread count
     * does not change the result */
    CHECK(la == lc && memcmp(a, c, n * sizeof(float)) == 0);
    free(a);
    free(b);
    free(c);
}

TEST(model_gradient_accumulation_equals_large_batch) {
    gptc_model big, small;
    CHECK_OK(gptc_model_init(&big, &k_small));
    CHECK_OK(gptc_model_init(&small, &k_small));
    gptc_model_init_weights(&big, 6);
    gptc_model_init_weights(&small, 6);
    int B = 4, T = 12, in[48], tg[48];
    random_tokens(in, B * T, k_small.vocab, 5);
    random_tokens(tg, B * T, k_small.vocab, 6);
    CHECK_OK(gptc_model_alloc_train(&big, B, T));
    CHECK_OK(gptc_model_alloc_train(&small, B / 2, T));
    float lbig = gptc_model_forward(&big, in, tg, B, T);
    gptc_model_zero_grad(&big);
    gptc_model_backward(&big, 1.0f);
    gptc_model_zero_grad(&small);
    float lsum = 0;
    for (int h = 0; h < 2; h++) {
        lsum += gptc_model_forward(&small, in + h * (B / 2) * T, tg + h * (B / 2) * T, B / 2, T);
        gptc_model_backward(&small, 0.5f);
    }
    CHECK_NEAR(lsum / 2, lbig, 1e-5);
    double e = test_rel_err_f(small.grads, big.grads, big.num_floats);
    CHECK_MSG(e < 1e-5, "accumulated gradient rel err %g", e);
    gptc_model_free(&big);
    gptc_model_free(&small);
}

TEST(model_config_checks) {
    gptc_model_config c;
    CHECK_OK(gptc_model_preset("gpt2-xl", &c));
    CHECK(c.layers == 48 && c.heads == 25 && c.channels == 1600 && c.vocab == 50257);
    /* the seed system's 1.3B GPT-2: 24 layers of 2048 channels, 16 heads, context 1024 */
    CHECK_OK(gptc_model_preset("gpt2-1.3b", &c));
    CHECK(c.layers == 24 && c.heads == 16 && c.channels == 2048 && c.context == 1024 && c.vocab == 50257);
    size_t np = gptc_model_num_params(&c);
    CHECK_MSG(np > 1300000000u && np < 1320000000u, "gpt2-1.3b has %zu parameters", np);
    CHECK(gptc_model_preset("gpt5", &c) == GPTC_ERR_ARG);
    c = (gptc_model_config){2, 3, 64, 32, 100, GPTC_GELU_KIND_TANH};
    CHECK(gptc_model_config_check(&c) == GPTC_ERR_ARG);
    CHECK(strstr(gptc_last_error(), "'model.heads' 3") != NULL);
    c = (gptc_model_config){0, 2, 64, 32, 100, GPTC_GELU_KIND_TANH};
    CHECK(gptc_model_config_check(&c) == GPTC_ERR_ARG);
    /* the GELU form: presets are GPT-2's tanh, names round-trip, unknown values are refused */
    CHECK_OK(gptc_model_preset("tiny", &c));
    CHECK(c.gelu == GPTC_GELU_KIND_TANH);
    for (int f = 0; f < 3; f++) {
        gptc_gelu_kind back = GPTC_GELU_KIND_TANH;
        CHECK_OK(gptc_gelu_from_name(gptc_gelu_name(k_forms[f]), &back));
        CHECK(back == k_forms[f]);
    }
    CHECK(strcmp(gptc_gelu_name(GPTC_GELU_KIND_ERF), "erf") == 0 && strcmp(gptc_gelu_name((gptc_gelu_kind)7), "?") == 0);
    gptc_gelu_kind g;
    CHECK(gptc_gelu_from_name("fast", &g) == GPTC_ERR_ARG);
    CHECK(strstr(gptc_last_error(), "'model.gelu' fast") && strstr(gptc_last_error(), "tanh, erf or sigmoid"));
    c = (gptc_model_config){2, 2, 64, 32, 100, (gptc_gelu_kind)3};
    CHECK(gptc_model_config_check(&c) == GPTC_ERR_ARG);
    CHECK(strstr(gptc_last_error(), "gelu 3") != NULL);
    CHECK_EQ_INT(gptc_padded_vocab(50257), 50304);
    CHECK_EQ_INT(gptc_padded_vocab(257), 320);
    CHECK_EQ_INT(gptc_padded_vocab(64), 64);
}

TEST(model_flash_attention_matches_naive) {
    gptc_model naive, flash;
    CHECK_OK(gptc_model_init(&naive, &k_small));
    CHECK_OK(gptc_model_init(&flash, &k_small));
    gptc_model_init_weights(&naive, 12);
    gptc_model_init_weights(&flash, 12);
    naive.naive_attention = true;
    int B = 2, T = 21, in[42], tg[42];
    random_tokens(in, B * T, k_small.vocab, 7);
    random_tokens(tg, B * T, k_small.vocab, 8);
    CHECK_OK(gptc_model_alloc_train(&naive, B, T));
    CHECK_OK(gptc_model_alloc_train(&flash, B, T));
    float ln = gptc_model_forward(&naive, in, tg, B, T), lf = gptc_model_forward(&flash, in, tg, B, T);
    CHECK_NEAR(lf, ln, 1e-5 * ln);
    gptc_model_zero_grad(&naive);
    gptc_model_zero_grad(&flash);
    gptc_model_backward(&naive, 1.0f);
    gptc_model_backward(&flash, 1.0f);
    double e = test_rel_err_f(flash.grads, naive.grads, naive.num_floats);
    CHECK_MSG(e < 1e-4, "flash vs naive gradients: rel err %g", e);
    /* the flash model keeps no T x T buffer */
    CHECK(flash.act_floats < naive.act_floats);
    gptc_model_free(&naive);
    gptc_model_free(&flash);
}

/* mean loss in double from the per-token losses (the float mean would round the differences away) */
static double loss_at(gptc_model *m, const int *in, const int *tg, int B, int T) {
    gptc_model_forward(m, in, tg, B, T);
    double s = 0;
    for (int i = 0; i < B * T; i++) s += m->a.losses[i];
    return s / (B * T);
}

/* The gradient agrees with the loss, and it is the gradient of the forward's own form. A tiny model
 * whose MLP pre-activations sit near 2, where the slopes of the forms differ most (tanh's exceeds
 * erf's by 8.7e-4 and sigmoid's by 1.2e-2, about 0.08% and 1%), is moved along d = the gradient of
 * the c_fc weights and biases (the parameters right below the GELU: each of their gradient elements
 * carries a factor gelu'(x)). The loss's slope along d, from central differences at steps s and s/2
 * combined by Richardson extrapolation (the O(s^2) error cancels; float rounding is what remains,
 * about 2e-5 relative), must match grad . d, and do so clearly better than grad . d from a backward
 * with either other form after the same forward (what a backward ignoring the config would give). */
TEST(model_gelu_backward_matches_finite_difference) {
    const gptc_model_config base = {1, 2, 16, 8, 30, GPTC_GELU_KIND_TANH};
    int B = 4, T = 8, in[32], tg[32];
    random_tokens(in, B * T, base.vocab, 31);
    random_tokens(tg, B * T, base.vocab, 32);
    for (int f = 0; f < 3; f++) {
        gptc_model_config cfg = base;
        cfg.gelu = k_forms[f];
        gptc_model m;
        CHECK_OK(gptc_model_init(&m, &cfg));
        gptc_model_init_weights(&m, 41);
        gptc_rng r;
        gptc_rng_seed(&r, 42);
        for (int i = 0; i < m.ntensors; i++) /* pre-activations 2 +- 0.15 (the c_fc weights add ~0.1) */
            if (strstr(m.tensors[i].name, "mlp.c_fc.bias"))
                for (size_t j = 0; j < m.tensors[i].numel; j++)
                    m.params[m.tensors[i].offset + j] = 2.0f + 0.3f * (float)(gptc_rng_uniform(&r) - 0.5);
        CHECK_OK(gptc_model_alloc_train(&m, B, T));
        float *w0 = malloc(m.num_floats * sizeof(float)), *dir = calloc(m.num_floats, sizeof(float));
        memcpy(w0, m.params, m.num_floats * sizeof(float));
        /* grad . d with the backward of each form, after the forward of this one (first: d itself) */
        double gd[3] = {0}, norm2 = 0;
        for (int i = 0; i < 3; i++) {
            int b = (f + i) % 3;
            m.cfg.gelu = cfg.gelu;
            gptc_model_forward(&m, in, tg, B, T);
            m.cfg.gelu = k_forms[b];
            gptc_model_zero_grad(&m);
            gptc_model_backward(&m, 1.0f);
            for (int t = 0; t < m.ntensors; t++) {
                const gptc_tensor_desc *desc = &m.tensors[t];
                if (!strstr(desc->name, "mlp.c_fc.")) continue;
                for (size_t j = desc->offset; j < desc->offset + desc->numel; j++) {
                    if (i == 0) dir[j] = m.grads[j], norm2 += (double)m.grads[j] * m.grads[j];
                    gd[b] += (double)m.grads[j] * dir[j];
                }
            }
        }
        m.cfg.gelu = cfg.gelu;
        double slope[2];
        for (int k = 0; k < 2; k++) {
            double h = (k ? 0.1 : 0.2) / sqrt(norm2); /* steps of 0.2 and 0.1 in weight space */
            for (size_t j = 0; j < m.num_floats; j++) m.params[j] = w0[j] + (float)h * dir[j];
            double lp = loss_at(&m, in, tg, B, T);
            for (size_t j = 0; j < m.num_floats; j++) m.params[j] = w0[j] - (float)h * dir[j];
            double lm = loss_at(&m, in, tg, B, T);
            slope[k] = (lp - lm) / (2 * h);
        }
        double fd = (4 * slope[1] - slope[0]) / 3, err = fabs(fd - gd[f]) / fabs(fd), other = INFINITY;
        for (int b = 0; b < 3; b++)
            if (b != f) other = fmin(other, fabs(fd - gd[b]) / fabs(fd));
        printf("    gelu %-7s: slope %.7g, grad . d %.7g: rel err %.1e (another form's backward: %.1e)\n",
               gptc_gelu_name(cfg.gelu), fd, gd[f], err, other);
        CHECK_MSG(err < 1e-4, "gelu %s: grad . d %.8g vs finite difference %.8g (rel err %g)", gptc_gelu_name(cfg.gelu),
                  gd[f], fd, err);
        CHECK_MSG(other > 4 * err, "gelu %s: another form's backward is as close (%g vs %g)", gptc_gelu_name(cfg.gelu),
                  other, err);
        free(w0);
        free(dir);
        gptc_model_free(&m);
    }
}

/* The weight gradients' shares of the global norm from their products (gpt2.h wsumsq): after one backward every
 * layer's four weights and wte have one, equal to the sum of squares of the gradient there (relative 1e-6: each
 * tile summed in float), wte's corrected for the rows the embeddings' backward adds to (the batch repeats tokens,
 * and the padding rows stay zero); nothing else is marked. fp32 and bf16 products, 1 and 2 threads (the same
 * sums), and gradients accumulated over two backwards (the second's products finish them). */
TEST(model_weight_gradient_sums_of_squares_from_the_products) {
    for (int bf16 = 0; bf16 < 2; bf16++)
        for (int accum = 1; accum <= 2; accum++) {
            double first[64] = {0};
            for (int threads = 1; threads <= 2; threads++) {
                int saved = omp_get_max_threads();
                omp_set_num_threads(threads);
                gptc_model m;
                CHECK_OK(gptc_model_init(&m, &k_small));
                gptc_model_init_weights(&m, 6);
                if (bf16) m.precision = GPTC_PRECISION_BF16;
                int B = 3, T = 20, in[60], tg[60];
                random_tokens(in, B * T, 9, 5); /* 9 distinct tokens at most: rows repeat */
                random_tokens(tg, B * T, k_small.vocab, 6);
                CHECK_OK(gptc_model_alloc_train(&m, B, T));
                CHECK(m.ntensors <= 64);
                double sums[64], part[60];
                bool set[64];
                int rows[60];
                gptc_wsumsq ws = {sums, set, rows, part};
                gptc_model_zero_grad(&m);
                for (int a = 0; a < accum; a++) {
                    const bool last = a == accum - 1;
                    memset(set, 0, sizeof set);
                    m.wsumsq = last ? &ws : NULL;
                    gptc_model_forward_backward(&m, in, tg, B, T, 1.0f);
                }
                m.wsumsq = NULL;
                for (int i = 0; i < m.ntensors; i++) {
                    const gptc_tensor_desc *d = &m.tensors[i];
                    const int j = i < 2 ? -1 : (i - 2) % GPTC_LAYER_TENSORS;
                    const bool weight = i == 0 || (i >= 2 && i < m.ntensors - 2 && (j == GPTC_QKVW || j == GPTC_ATTPROJW ||
                                                                                    j == GPTC_FCW || j == GPTC_FCPROJW));
                    CHECK_MSG(set[i] == weight, "bf16 %d accum %d: tensor %s %s a share from its product", bf16, accum,
                              d->name, set[i] ? "has" : "lacks");
                    if (!set[i]) continue;
                    double want = 0;
                    for (size_t e = 0; e < d->numel; e++) want += (double)m.grads[d->offset + e] * m.grads[d->offset + e];
                    CHECK_MSG(fabs(sums[i] - want) <= 1e-6 * want && want > 0, "bf16 %d accum %d threads %d: %s share %.17g, "
                              "its gradient's %.17g", bf16, accum, threads, d->name, sums[i], want);
                    if (threads == 1) first[i] = sums[i];
                    else CHECK_MSG(sums[i] == first[i], "bf16 %d accum %d: %s share differs between 1 and 2 threads",
                                   bf16, accum, d->name);
                }
                gptc_model_free(&m);
                omp_set_num_threads(saved);
            }
        }
}
