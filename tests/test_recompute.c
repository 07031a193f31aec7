/* test_recompute.c — activation recomputation (--recompute gelu|attn|block): the same losses and
 * gradients as keeping everything, bit for bit, at every kernel level, fused and unfused, flash and
 * naive attention, fp32 and (at the best level) bf16; the fused residual+LayerNorm gives the bits of residual then LayerNorm (what the
 * block recompute relies on); and the planned activation arenas shrink level by level. */
#include "test.h"
#include "model/gpt2.h"

#include <stdlib.h>
#include <string.h>

/* C = 40 (not a multiple of any vector width; HS = 20), B*T = 3*93 = 279 rows: a full classifier chunk
 * of 256 and a ragged one of 23, and no multiple of the GEMM or attention tiles */
static const gptc_model_config k_cfg = {.layers = 3, .heads = 2, .channels = 40, .context = 96, .vocab = 300};
enum { B = 3, T = 93, STEPS = 2 };
static const char *const k_levels[] = {"ref", "avx2", "avx512"};

static void tokens(int *x, int n, uint64_t seed) {
    gptc_rng r;
    gptc_rng_seed(&r, seed);
    for (int i = 0; i < n; i++) x[i] = (int)(gptc_rng_next(&r) % k_cfg.vocab);
}

/* STEPS training steps (the first through forward_backward, the second through forward then backward,
 * an SGD update between them) of a fresh model; losses[STEPS] and the gradients of each step,
 * grads (STEPS, num_floats) (malloc'd, the caller frees). */
static gptc_precision g_precision; /* of the models run() makes */

static float *run(int level, bool naive, bool fuse, gptc_recompute rc, float *losses, size_t *n) {
    gptc_model m;
    if (gptc_model_init(&m, &k_cfg)) return NULL;
    gptc_model_init_weights(&m, 5);
    m.k = gptc_kernels_level(k_levels[level]);
    m.naive_attention = naive;
    m.fuse = fuse;
    m.recompute = rc;
    m.precision = g_precision;
    if (gptc_model_alloc_train(&m, B, T)) return NULL;
    *n = m.num_floats;
    float *g = malloc(sizeof(float) * STEPS * m.num_floats);
    int in[B * T], tg[B * T];
    for (int s = 0; s < STEPS; s++) {
        tokens(in, B * T, 100 + s);
        tokens(tg, B * T, 200 + s);
        gptc_model_zero_grad(&m);
        if (s == 0) {
            losses[s] = gptc_model_forward_backward(&m, in, tg, B, T, 1.0f);
        } else {
            losses[s] = gptc_model_forward(&m, in, tg, B, T);
            gptc_model_backward(&m, 1.0f);
        }
        memcpy(g + s * m.num_floats, m.grads, sizeof(float) * m.num_floats);
        for (size_t i = 0; i < m.num_floats; i++) m.params[i] -= 0.05f * m.grads[i];
    }
    gptc_model_free(&m);
    return g;
}

/* every recompute level against none, bit for bit, for kernel levels [lo, hi], naive and flash, fused and
 * unfused, in g_precision */
static void check_levels(int lo, int hi) {
    int combos = 0;
    for (int level = lo; level <= hi; level++) {
        if (!gptc_kernels_level(k_levels[level])) {
            printf("    %s: not available on this CPU, skipped\n", k_levels[level]);
            continue;
        }
        for (int naive = 0; naive < 2; naive++)
            for (int fuse = 0; fuse < 2; fuse++) {
                float l0[STEPS], l[STEPS];
                size_t n;
                float *g0 = run(level, naive, fuse, GPTC_RECOMPUTE_NONE, l0, &n);
                CHECK(g0 != NULL);
                if (!g0) return;
                for (int rc = GPTC_RECOMPUTE_GELU; rc <= GPTC_RECOMPUTE_BLOCK; rc++) {
                    float *g = run(level, naive, fuse, (gptc_recompute)rc, l, &n);
                    CHECK(g != NULL);
                    if (!g) continue;
                    for (int s = 0; s < STEPS; s++) {
                        CHECK_MSG(memcmp(&l[s], &l0[s], sizeof(float)) == 0, "%s %s %s recompute %s step %d: loss %.9g vs %.9g",
                                  k_levels[level], naive ? "naive" : "flash", fuse ? "fused" : "unfused",
                                  gptc_recompute_name(rc), s + 1, l[s], l0[s]);
                        CHECK_MSG(memcmp(g + s * n, g0 + s * n, sizeof(float) * n) == 0,
                                  "%s %s %s recompute %s step %d: gradients differ (rel err %g)", k_levels[level],
                                  naive ? "naive" : "flash", fuse ? "fused" : "unfused", gptc_recompute_name(rc), s + 1,
                                  test_rel_err_f(g + s * n, g0 + s * n, n));
                    }
                    free(g);
                    combos++;
                }
                free(g0);
            }
    }
    CHECK(combos > 0);
}

TEST(recompute_bit_identical) {
    g_precision = GPTC_PRECISION_FP32;
    check_levels(0, 2);
}

/* bf16 (the GEMMs and flash attention of --dtype bf16) at the best level this CPU runs */
TEST(recompute_bit_identical_bf16) {
    g_precision = GPTC_PRECISION_BF16;
    int best = gptc_kernels_level("avx512") ? 2 : gptc_kernels_level("avx2") ? 1 : 0;
    check_levels(best, best);
    g_precision = GPTC_PRECISION_FP32;
}

/* The block recompute normalises a stored residual with layernorm_fwd where the fused forward used
 * residual_layernorm_fwd: every level must give the same bits (C with and without a vector tail). */
TEST(recompute_residual_layernorm_bits) {
    for (int level = 0; level < 3; level++) {
        const gptc_kernels *k = gptc_kernels_level(k_levels[level]);
        if (!k) continue;
        const int cs[] = {40, 773};
        for (int ci = 0; ci < 2; ci++) {
            int N = 37, C = cs[ci];
            size_t nc = (size_t)N * C;
            float *buf = malloc(sizeof(float) * (6 * nc + 2 * C + 4 * N));
            float *a = buf, *b = a + nc, *res = b + nc, *out1 = res + nc, *out2 = out1 + nc, *res2 = out2 + nc;
            float *w = res2 + nc, *bias = w + C, *m1 = bias + C, *r1 = m1 + N, *m2 = r1 + N, *r2 = m2 + N;
            gptc_rng rng;
            gptc_rng_seed(&rng, 9 + ci);
            for (size_t i = 0; i < nc; i++) a[i] = (float)gptc_rng_normal(&rng), b[i] = (float)(3 * gptc_rng_normal(&rng) + 1);
            for (int i = 0; i < C; i++) w[i] = (float)(1 + 0.1 * gptc_rng_normal(&rng)), bias[i] = (float)gptc_rng_normal(&rng);
            k->residual_layernorm_fwd(res, out1, m1, r1, a, b, w, bias, N, C);
            k->residual_fwd(res2, a, b, nc);
            k->layernorm_fwd(out2, m2, r2, res, w, bias, N, C);
            CHECK_MSG(memcmp(res, res2, sizeof(float) * nc) == 0, "%s C=%d: residual differs", k_levels[level], C);
            CHECK_MSG(memcmp(out1, out2, sizeof(float) * nc) == 0 && memcmp(m1, m2, sizeof(float) * N) == 0 &&
                          memcmp(r1, r2, sizeof(float) * N) == 0,
                      "%s C=%d: layernorm_fwd on the stored residual differs from residual_layernorm_fwd", k_levels[level], C);
            free(buf);
        }
    }
}

/* Each level plans strictly less than the one before it, for GPT-2 124M's shape; and a model
 * allocates exactly what the plan says. */
TEST(recompute_memory_shrinks) {
    gptc_model_config gpt2;
    CHECK_OK(gptc_model_preset("gpt2", &gpt2));
    for (int naive = 0; naive < 2; naive++)
        for (int fuse = 0; fuse < 2; fuse++) {
            int b = naive ? 2 : 8, t = naive ? 256 : 1024;
            size_t prev = 0;
            for (int rc = GPTC_RECOMPUTE_NONE; rc <= GPTC_RECOMPUTE_BLOCK; rc++) {
                size_t acts, dacts;
                gptc_model_act_bytes(&gpt2, b, t, naive, fuse, (gptc_recompute)rc, GPTC_PRECISION_FP32, &acts, &dacts);
                size_t total = acts + dacts;
                if (rc > GPTC_RECOMPUTE_NONE)
                    CHECK_MSG(total < prev, "%s %s: recompute %s plans %zu bytes, not less than %zu", naive ? "naive" : "flash",
                              fuse ? "fused" : "unfused", gptc_recompute_name(rc), total, prev);
                if (!naive && fuse)
                    printf("    GPT-2 124M B=%d T=%d recompute %-5s: activations %.1f MiB + activation gradients %.1f MiB\n",
                           b, t, gptc_recompute_name(rc), acts / 1048576.0, dacts / 1048576.0);
                prev = total;
            }
        }
    gptc_model m;
    CHECK_OK(gptc_model_init(&m, &k_cfg));
    m.recompute = GPTC_RECOMPUTE_BLOCK;
    CHECK_OK(gptc_model_alloc_train(&m, B, T));
    size_t acts, dacts;
    gptc_model_act_bytes(&k_cfg, B, T, false, false, GPTC_RECOMPUTE_BLOCK, GPTC_PRECISION_FP32, &acts, &dacts);
    CHECK_EQ_INT(m.act_floats * sizeof(float), acts);
    CHECK_EQ_INT(m.dact_floats * sizeof(float), dacts);
    /* the dropped tensors are one buffer for all layers */
    CHECK(m.a.fch[0] == m.a.fch[2] && m.a.qkv[0] == m.a.qkv[1] && m.a.residual3[0] != m.a.residual3[1]);
    gptc_model_free(&m);
}
