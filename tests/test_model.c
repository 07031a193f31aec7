/* test_model.c — model-level properties: initialisation, KV-cache decoding equal to the full
 * forward, vocabulary padding that never changes a loss, determinism across runs and thread
 * counts, and gradient accumulation equal to one large batch. */
#include "test.h"
#include "model/gpt2.h"

#include <omp.h>
#include <stdlib.h>
#include <string.h>

static const gptc_model_config k_small = {2, 4, 32, 24, 70}; /* vocab 70 pads to 128 */

static void random_tokens(int *x, int n, int vocab, uint64_t seed) {
    gptc_rng r;
    gptc_rng_seed(&r, seed);
    for (int i = 0; i < n; i++) x[i] = (int)(gptc_rng_next(&r) % vocab);
}

TEST(model_init_statistics) {
    gptc_model_config cfg = {4, 4, 64, 32, 300};
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
    CHECK_EQ_INT(gptc_model_num_params(&(gptc_model_config){12, 12, 768, 1024, 50257}), 124439808);
    /* padding rows of wte are zero */
    for (size_t j = (size_t)cfg.vocab * cfg.channels; j < (size_t)a.Vp * cfg.channels; j++) CHECK(a.params[j] == 0);
    gptc_model_free(&a);
    gptc_model_free(&b);
}

TEST(model_decode_matches_forward) {
    gptc_model m;
    CHECK_OK(gptc_model_init(&m, &k_small));
    gptc_model_init_weights(&m, 3);
    int T = k_small.context, tokens[64];
    random_tokens(tokens, T, k_small.vocab, 11);
    CHECK_OK(gptc_model_alloc_train(&m, 1, T));
    gptc_model_forward(&m, tokens, NULL, 1, T);
    gptc_kv_cache kv;
    CHECK_OK(gptc_kv_cache_init(&kv, &m));
    for (int t = 0; t < T; t++) {
        const float *lg = gptc_model_decode_step(&m, &kv, tokens[t]);
        double e = test_rel_err_f(lg, m.a.logits + (size_t)t * m.Vp, k_small.vocab);
        CHECK_MSG(e < 1e-5, "position %d: rel err %g", t, e);
    }
    CHECK_EQ_INT(kv.len, T);
    gptc_kv_cache_free(&kv);
    gptc_model_free(&m);
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
    CHECK(gptc_model_preset("gpt5", &c) == GPTC_ERR_ARG);
    c = (gptc_model_config){2, 3, 64, 32, 100};
    CHECK(gptc_model_config_check(&c) == GPTC_ERR_ARG);
    CHECK(strstr(gptc_last_error(), "--heads 3") != NULL);
    c = (gptc_model_config){0, 2, 64, 32, 100};
    CHECK(gptc_model_config_check(&c) == GPTC_ERR_ARG);
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
