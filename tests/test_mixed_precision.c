/* test_mixed_precision.c — the model in --dtype bf16 against fp32 on the same weights and batch:
 * the loss and every parameter's gradient agree within bf16 tolerances (and differ, so bf16 really
 * runs); the bf16 step with the fast kernels agrees with the bf16 reference kernels much more
 * closely than with fp32; fused and unfused, flash and naive attention. */
#include "test.h"
#include "kernels/attention.h"
#include "model/gpt2.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* C = 64 (HS = 32), B*T = 2*77 rows: ragged against every tile */
static const gptc_model_config k_cfg = {.layers = 2, .heads = 2, .channels = 64, .context = 80, .vocab = 200};
enum { B = 2, T = 77 };

/* One training step's loss and gradients (malloc'd, num_floats) of a fresh model with seed-5 weights;
 * ref: the reference table (its flash attention entries included). */
static float *grads_of(gptc_precision p, bool ref, bool naive, bool fuse, float *loss, size_t *n) {
    gptc_model m;
    if (gptc_model_init(&m, &k_cfg)) return NULL;
    gptc_model_init_weights(&m, 5);
    if (ref) m.k = gptc_kernels_ref();
    m.precision = p;
    m.naive_attention = naive;
    m.fuse = fuse;
    if (gptc_model_alloc_train(&m, B, T)) return NULL;
    int in[B * T], tg[B * T];
    gptc_rng r;
    gptc_rng_seed(&r, 11);
    for (int i = 0; i < B * T; i++) in[i] = (int)(gptc_rng_next(&r) % k_cfg.vocab);
    for (int i = 0; i < B * T; i++) tg[i] = (int)(gptc_rng_next(&r) % k_cfg.vocab);
    gptc_model_zero_grad(&m);
    *loss = gptc_model_forward_backward(&m, in, tg, B, T, 1.0f);
    *n = m.num_floats;
    float *g = malloc(sizeof(float) * m.num_floats);
    memcpy(g, m.grads, sizeof(float) * m.num_floats);
    gptc_model_free(&m);
    return g;
}

/* ||a - b|| / ||b|| over n floats */
static double rel_norm(const float *a, const float *b, size_t n) {
    double d = 0, s = 0;
    for (size_t i = 0; i < n; i++) d += ((double)a[i] - b[i]) * ((double)a[i] - b[i]), s += (double)b[i] * b[i];
    return sqrt(d / (s > 0 ? s : 1e-300));
}

TEST(bf16_model_gradients_track_fp32) {
    for (int naive = 0; naive < 2; naive++)
        for (int fuse = 0; fuse < 2; fuse++) {
            float l32, l16, l16r;
            size_t n;
            float *g32 = grads_of(GPTC_PRECISION_FP32, false, naive, fuse, &l32, &n);
            float *g16 = grads_of(GPTC_PRECISION_BF16, false, naive, fuse, &l16, &n);
            float *g16r = grads_of(GPTC_PRECISION_BF16, true, naive, fuse, &l16r, &n);
            CHECK(g32 && g16 && g16r);
            if (!g32 || !g16 || !g16r) return;
            double e_fp32 = rel_norm(g16, g32, n), e_ref = rel_norm(g16, g16r, n);
            printf("    %s, %s: loss fp32 %.6f bf16 %.6f (bf16 ref %.6f); gradients bf16 vs fp32 %.2e, "
                   "bf16 fast vs bf16 ref %.2e\n",
                   naive ? "naive" : "flash", fuse ? "fused" : "unfused", l32, l16, l16r, e_fp32, e_ref);
            /* bf16 keeps 8 significant bits: a relative error of 2^-9 per operand, partly averaged out */
            CHECK_NEAR(l16, l32, 5e-3 * l32);
            CHECK(l16 != l32);
            CHECK_MSG(e_fp32 < 3e-2, "bf16 gradients off fp32 by %.3g", e_fp32);
            CHECK_MSG(e_fp32 > 1e-5, "bf16 gradients equal fp32 (%.3g): is bf16 running?", e_fp32);
            /* the same roundings, only summation orders (and rare rounding flips) differ */
            CHECK_MSG(e_ref < e_fp32 / 4, "bf16 fast vs reference %.3g, not well inside bf16 vs fp32 %.3g", e_ref,
                      e_fp32);
            CHECK_NEAR(l16, l16r, 1e-4 * l16r);
            free(g32);
            free(g16);
            free(g16r);
        }
}
