/* test_packed.c — weights packed once for many products (kernels.h gptc_gemm_pack_b / gptc_gemm_packed,
 * model/packed.c, --pack-weights) give the bits of the products that pack B themselves: the driver in both
 * loop orders with blockings small enough for many depth blocks and panels, fp32 and bf16 from fp32 or bf16
 * sources, ragged shapes, 1 and 2 threads; a model training with them (repacked after every update) and
 * without; LoRA through gptc_train. And gptc_model_zero_grad leaving the products' gradients for the
 * backward to overwrite: the same gradients as zeroing everything, from an arena poisoned with NaN. */
#include "test.h"
#include "kernels/gemm/gemm_driver.h"
#include "model/gpt2.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

static float *rand_floats(gptc_rng *r, size_t n) {
    float *p = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) p[i] = (float)gptc_rng_normal(r);
    return p;
}

/* C (M,N) from isa with B packed per call and with B packed whole; bit for bit, or a failed check */
static void compare_case(const gptc_gemm_isa *g, const char *what, int ta, int tb, int M, int N, int K, int src16,
                         int threads, gptc_rng *r) {
    const int lda = ta ? M : K, ldb = tb ? K : N;
    float *A = rand_floats(r, (size_t)M * K), *B = rand_floats(r, (size_t)K * N), *bias = rand_floats(r, (size_t)N);
    float *C1 = rand_floats(r, (size_t)M * N), *C2 = malloc(sizeof(float) * (size_t)M * N);
    memcpy(C2, C1, sizeof(float) * (size_t)M * N);
    uint16_t *B16 = malloc(sizeof(uint16_t) * (size_t)K * N);
    for (size_t i = 0; i < (size_t)K * N; i++) B16[i] = gptc_f32_to_bf16(B[i]);
    const void *src = src16 ? (const void *)B16 : (const void *)B;
    void *P = aligned_alloc(64, (gptc_gemm_whole_b_bytes(g, N, K) + 63) / 64 * 64); /* panels are 64-byte aligned */
    int saved = omp_get_max_threads();
    omp_set_num_threads(threads);
    gptc_gemm_blocked_in16(g, ta, tb, M, N, K, A, lda, src, ldb, src16 ? GPTC_GEMM_B16 : 0, 1.0f, bias, C1, N);
    gptc_gemm_pack_whole_b(g, tb, N, K, src, ldb, src16, P);
    gptc_gemm_blocked_in16(g, ta, 0, M, N, K, A, lda, P, 0, GPTC_GEMM_B_PACKED, 1.0f, bias, C2, N);
    omp_set_num_threads(saved);
    CHECK_MSG(memcmp(C1, C2, sizeof(float) * (size_t)M * N) == 0, "%s ta=%d tb=%d %dx%dx%d src16=%d threads %d: differ",
              what, ta, tb, M, N, K, src16, threads);
    free(A), free(B), free(bias), free(C1), free(C2), free(B16), free(P);
}

TEST(gemm_packed_b_matches_packing_per_call) {
    static const int shapes[][3] = {{1, 1, 1}, {13, 31, 7}, {65, 97, 130}, {100, 33, 257}, {37, 200, 81}};
    static const char *const levels[] = {"avx2", "avx512"};
    gptc_rng r;
    gptc_rng_seed(&r, 11);
    int cases = 0;
    for (int l = 0; l < 2; l++) {
        const gptc_kernels *k = gptc_kernels_level(levels[l]);
        if (!k) continue;
        const gptc_gemm_isa *isas[2] = {k->gemm_isa, k->gemm_bf16_isa};
        for (int which = 0; which < 2; which++) {
            if (!isas[which]) continue;
            for (int order = 0; order < 2; order++) {
                gptc_gemm_isa g = *isas[which];
                g.mc = 3 * g.mr, g.kc = 20 * g.kstep, g.nc = 2 * g.nr, g.order = order;
                char what[64];
                snprintf(what, sizeof what, "%s %s order %d", levels[l], which ? "bf16" : "fp32", order);
                for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
                    for (int t = 0; t < 4; t++)
                        for (int src16 = 0; src16 <= which; src16++, cases++)
                            compare_case(&g, what, t >> 1, t & 1, shapes[s][0], shapes[s][1], shapes[s][2], src16,
                                         1 + (t & 1), &r);
            }
        }
        /* the table's own blocking through the public entry points, against the table's products */
        const int M = 70, N = 300, K = 1700; /* K: more than one depth block at every blocking */
        float *A = rand_floats(&r, (size_t)M * K), *Bm = rand_floats(&r, (size_t)K * N);
        float *C1 = calloc((size_t)M * N, sizeof(float)), *C2 = calloc((size_t)M * N, sizeof(float));
        for (int bf16 = 0; bf16 < 2; bf16++) {
            size_t bytes = gptc_gemm_packed_bytes(k, bf16, N, K);
            CHECK_MSG(bytes > 0, "%s: no packed form (bf16 %d)", levels[l], bf16);
            void *P = aligned_alloc(64, (bytes + 63) / 64 * 64);
            gptc_gemm_pack_b(k, bf16, 1, N, K, Bm, K, 0, P); /* B stored (N,K) */
            if (bf16)
                k->gemm_bf16_in16(0, 1, M, N, K, A, K, Bm, K, 0, 0.0f, NULL, C1, N);
            else
                k->gemm(0, 1, M, N, K, A, K, Bm, K, 0.0f, NULL, C1, N);
            gptc_gemm_packed(k, bf16, 0, M, N, K, A, K, 0, P, 0.0f, NULL, C2, N);
            CHECK_MSG(memcmp(C1, C2, sizeof(float) * (size_t)M * N) == 0, "%s bf16 %d: gptc_gemm_packed differs",
                      levels[l], bf16);
            free(P);
        }
        free(A), free(Bm), free(C1), free(C2);
    }
    /* the reference packs nothing: no packed form, and a model keeps none */
    CHECK_EQ_INT((int)gptc_gemm_packed_bytes(gptc_kernels_ref(), 0, 100, 100), 0);
    printf("    %d driver cases bit for bit\n", cases);
}

/* ---- a model training with packed weights and without */

static const gptc_model_config k_cfg = {.layers = 2, .heads = 2, .channels = 40, .context = 64, .vocab = 300};
enum { B = 3, T = 50, STEPS = 3, MICRO = 2 };

static void tokens(int *x, int n, uint64_t seed) {
    gptc_rng r;
    gptc_rng_seed(&r, seed);
    for (int i = 0; i < n; i++) x[i] = (int)(gptc_rng_next(&r) % k_cfg.vocab);
}

/* STEPS updates of MICRO micro-steps each (forward_backward, then forward + backward), an SGD update and
 * gptc_model_params_changed after each; losses (STEPS * MICRO) and the final params (malloc'd) */
static float *train(const gptc_kernels *k, gptc_precision prec, bool pack, bool full_zero, float *losses, size_t *n,
                    bool *packed) {
    gptc_model m;
    if (gptc_model_init(&m, &k_cfg)) return NULL;
    gptc_model_init_weights(&m, 3);
    m.k = k;
    m.precision = prec;
    if (gptc_model_alloc_train(&m, B, T)) return NULL;
    if (pack && gptc_model_pack_weights(&m)) return NULL;
    *packed = m.packed != NULL;
    if (full_zero) m.zero_count = 0; /* the whole arena zeroed, as before the products overwrote theirs */
    int in[B * T], tg[B * T];
    for (int s = 0; s < STEPS; s++) {
        for (size_t i = 0; i < m.num_floats; i++) m.grads[i] = NAN; /* what zero_grad leaves must be overwritten */
        gptc_model_zero_grad(&m);
        for (int u = 0; u < MICRO; u++) {
            tokens(in, B * T, 100 + 10 * s + u);
            tokens(tg, B * T, 200 + 10 * s + u);
            if (u == 0) {
                losses[s * MICRO + u] = gptc_model_forward_backward(&m, in, tg, B, T, 1.0f / MICRO);
            } else {
                losses[s * MICRO + u] = gptc_model_forward(&m, in, tg, B, T);
                gptc_model_backward(&m, 1.0f / MICRO);
            }
        }
        for (size_t i = 0; i < m.num_floats; i++) m.params[i] -= 0.05f * m.grads[i];
        gptc_model_params_changed(&m, 0, m.num_floats);
    }
    *n = m.num_floats;
    float *p = malloc(sizeof(float) * m.num_floats);
    memcpy(p, m.params, sizeof(float) * m.num_floats);
    gptc_model_free(&m);
    return p;
}

static void compare_runs(const gptc_kernels *k, gptc_precision prec, bool pack, bool full_zero, const char *what) {
    float l0[STEPS * MICRO], l1[STEPS * MICRO];
    size_t n0 = 0, n1 = 0;
    bool p0, p1;
    float *a = train(k, prec, false, false, l0, &n0, &p0), *b = train(k, prec, pack, full_zero, l1, &n1, &p1);
    CHECK(a && b && n0 == n1);
    CHECK_MSG(!pack || p1, "%s: the model kept no packed weights", what);
    for (int i = 0; i < STEPS * MICRO; i++)
        CHECK_MSG(memcmp(&l0[i], &l1[i], sizeof(float)) == 0 && isfinite(l0[i]), "%s micro-step %d: loss %.9g vs %.9g",
                  what, i, l0[i], l1[i]);
    size_t bad = 0;
    for (size_t i = 0; a && b && i < n0; i++) bad += memcmp(&a[i], &b[i], sizeof(float)) != 0 || !isfinite(a[i]);
    CHECK_MSG(bad == 0, "%s: %zu parameters differ after %d updates", what, bad, STEPS);
    free(a), free(b);
}

TEST(packed_weights_train_as_unpacked) {
    static const char *const levels[] = {"avx2", "avx512"};
    for (int l = 0; l < 2; l++) {
        const gptc_kernels *k = gptc_kernels_level(levels[l]);
        if (!k) {
            printf("    %s: not available on this CPU, skipped\n", levels[l]);
            continue;
        }
        for (int bf16 = 0; bf16 < 2; bf16++) {
            char what[64];
            snprintf(what, sizeof what, "%s %s", levels[l], bf16 ? "bf16" : "fp32");
            compare_runs(k, bf16 ? GPTC_PRECISION_BF16 : GPTC_PRECISION_FP32, true, false, what);
        }
    }
}

/* gptc_model_zero_grad's ranges (the products overwrite the rest) against zeroing the whole arena: the same
 * losses and updates, bit for bit, at every level, from gradients poisoned with NaN before each zeroing */
TEST(zero_grad_leaves_product_gradients_to_the_backward) {
    static const char *const levels[] = {"ref", "avx2", "avx512"};
    for (int l = 0; l < 3; l++) {
        const gptc_kernels *k = gptc_kernels_level(levels[l]);
        if (!k) continue;
        compare_runs(k, GPTC_PRECISION_FP32, false, true, levels[l]);
    }
}

/* LoRA through gptc_train with --pack-weights on and off: the same losses, bit for bit (the frozen base is
 * packed once, the adapters train around it) */
typedef struct { float loss[16]; int n; } seen;
static int record(void *user, const gptc_step_info *in) {
    seen *s = user;
    if (in->event == GPTC_EVENT_STEP && s->n < 16) s->loss[s->n++] = in->loss;
    return 0;
}

TEST(pack_weights_lora_run_as_without) {
    seen runs[2] = {{{0}, 0}, {{0}, 0}};
    for (int i = 0; i < 2; i++) {
        gptc_train_options o;
        test_tiny_train_options(&o, test_shakespeare_data());
        o.steps = 6;
        o.lr = 1e-2f;
        o.lora = 4, o.lora_targets = "attn,mlp";
        o.pack_weights = i ? "on" : "off";
        gptc_train_result r;
        CHECK_OK(gptc_train(&o, record, &runs[i], &r));
    }
    CHECK_EQ_INT(runs[0].n, 6);
    CHECK_EQ_INT(runs[1].n, 6);
    for (int s = 0; s < 6; s++)
        CHECK_MSG(memcmp(&runs[0].loss[s], &runs[1].loss[s], sizeof(float)) == 0, "step %d: %.9g vs %.9g", s + 1,
                  runs[0].loss[s], runs[1].loss[s]);
}
