/* test_attention_bf16.c — bf16 mixed-precision flash attention (the bf16 contract of
 * kernels/attention.h): the AVX-512 variants (fp32 FMAs on rounded operands; vdpbf16ps where the CPU
 * has AVX512_BF16) against the bf16 reference on ragged shapes (forward o and lse, backward dq/dk/dv
 * accumulated onto random gradients), with and without dropout; the backward's += semantics; bit-identical results for 1 and 2 threads; the bf16 reference against the
 * fp32 reference (close, but not identical: the roundings happen), forward and backward; dispatch.
 * Finite differences of the bf16 forward are not meaningful (its roundings make it piecewise
 * constant at the eps scale), so the bf16 backward is checked against the fp32 reference backward.
 *
 * Tolerances (max |a-b| / max |b| over an array, test_rel_err_f), inputs N(0,1):
 *   VAR_TOL  4e-3: AVX-512 variants vs bf16 reference. Same rounding points, different fp32
 *            summation orders; a sum that lands on the other side of a bf16 rounding boundary changes
 *            one operand by one bf16 ulp (2^-8 = 3.9e-3 relative), so results are not bit-equal. With
 *            few keys one such operand (a dS, with dropout's 1/(1-p)) carries much of a gradient: the
 *            tolerance is that one ulp. lse 1e-5 (fp32 only). Measured max 1.8e-3 (dk; both variants
 *            the same, so the reference's order is the one that flips), 3e-4 (o), 2e-7 (lse).
 *   BF16_TOL 3e-2: bf16 reference vs fp32 reference: operands carry 2^-9 relative error each;
 *            measured max 9e-3 (lse), 6e-3 (dq, dk), 4e-3 (o, dv). At T=1 dq and dk are zero up to
 *            rounding noise in both, so they are not compared there.
 *   ACC_TOL  1e-6: (grad from g0) - g0 vs grad from zero: fp32 addition only. */
#include "test.h"
#include "test_attention.h"
#include "core/core.h"
#include "kernels/attention.h"
#include "kernels/kernels.h"
#include "kernels/x86_avx512/avx512.h"

#include <stdlib.h>
#include <string.h>

#define VAR_TOL 4e-3
#define LSE_TOL 1e-5
#define BF16_TOL 3e-2
#define ACC_TOL 1e-6

static gptc_rng g_rng;

static const variant k_ref_bf16 = {"bf16 ref", gptc_flash_fwd_bf16_ref, gptc_flash_bwd_bf16_ref};
static const variant k_ref_fp32 = {"fp32 ref", gptc_flash_fwd_ref, gptc_flash_bwd_ref};
static const variant k_avx512_bf16 = {"avx512 bf16", gptc_flash_fwd_bf16_avx512, gptc_flash_bwd_bf16_avx512};
static const variant k_dp_bf16 = {"avx512bf16 (vdpbf16ps)", gptc_flash_fwd_bf16_dp, gptc_flash_bwd_bf16_dp};

static int have_avx512_level(void) { return gptc_kernels_level("avx512") != NULL; }
static int have_bf16_dp(void) { return have_avx512_level() && gptc_cpu()->avx512bf16; }

/* the fast bf16 variants this CPU runs, after the reference: vs[0] = the reference; returns the count */
static int bf16_variants(variant vs[3]) {
    int n = 0;
    vs[n++] = k_ref_bf16;
    if (have_avx512_level()) vs[n++] = k_avx512_bf16;
    if (have_bf16_dp()) vs[n++] = k_dp_bf16;
    return n;
}

/* e[0..4] = rel errors of o, lse, dq, dk, dv of got against want */
static void fb_errs(double e[5], const fb_out *got, const fb_out *want, size_t n, size_t nl) {
    e[0] = test_rel_err_f(got->o, want->o, n), e[1] = test_rel_err_f(got->lse, want->lse, nl);
    e[2] = test_rel_err_f(got->dq, want->dq, n), e[3] = test_rel_err_f(got->dk, want->dk, n);
    e[4] = test_rel_err_f(got->dv, want->dv, n);
}
static const char *const k_what[5] = {"o", "lse", "dq", "dk", "dv"};

/* every fast variant against the bf16 reference */
TEST(attention_bf16_avx512_vs_ref) {
    variant vs[3];
    const int nv = bf16_variants(vs);
    if (nv == 1) {
        printf("    (no AVX-512 on this CPU or level capped: the dispatch uses the bf16 reference)\n");
        return;
    }
    if (!have_bf16_dp()) printf("    (no AVX512_BF16 on this CPU: the vdpbf16ps variant is not run)\n");
    gptc_rng_seed(&g_rng, 21);
    const int Ts[] = {1, 2, 7, 16, 17, 64, 65, 130}, HSs[] = {1, 13, 24, 40, 64, 80, 128}, NHs[] = {1, 3};
    const float ps[] = {0.0f, 0.2f};
    const int B = 2;
    double worst[3][5] = {{0}};
    for (int ti = 0; ti < 8; ti++)
        for (int hi = 0; hi < 7; hi++)
            for (int ni = 0; ni < 2; ni++)
                for (int pi = 0; pi < 2; pi++) {
                    int T = Ts[ti], HS = HSs[hi], NH = NHs[ni];
                    float p = ps[pi];
                    size_t n = (size_t)B * NH * T * HS, nl = (size_t)B * NH * T;
                    float *q = test_randn_f(&g_rng, n, 1.0), *k = test_randn_f(&g_rng, n, 1.0);
                    float *v = test_randn_f(&g_rng, n, 1.0), *dO = test_randn_f(&g_rng, n, 1.0);
                    float *g0 = test_randn_f(&g_rng, 3 * n, 0.5);
                    fb_out want = run_fb(&k_ref_bf16, q, k, v, dO, g0, B, NH, T, HS, p, 77);
                    for (int vi = 1; vi < nv; vi++) {
                        fb_out got = run_fb(&vs[vi], q, k, v, dO, g0, B, NH, T, HS, p, 77);
                        double e[5];
                        fb_errs(e, &got, &want, n, nl);
                        for (int w = 0; w < 5; w++) {
                            if (e[w] > worst[vi][w]) worst[vi][w] = e[w];
                            CHECK_MSG(e[w] <= (w == 1 ? LSE_TOL : VAR_TOL), "%s T=%d HS=%d NH=%d p=%g: %s rel err %.3g",
                                      vs[vi].name, T, HS, NH, (double)p, k_what[w], e[w]);
                        }
                        fb_free(&got);
                    }
                    fb_free(&want);
                    free(q), free(k), free(v), free(dO), free(g0);
                }
    for (int vi = 1; vi < nv; vi++)
        printf("    %s: worst rel err o %.2g lse %.2g dq %.2g dk %.2g dv %.2g\n", vs[vi].name, worst[vi][0],
               worst[vi][1], worst[vi][2], worst[vi][3], worst[vi][4]);
}

/* The backward adds: from g0 it gives g0 + (its result from zero), to fp32 addition. */
TEST(attention_bf16_backward_accumulates) {
    variant vs[3];
    const int nv = bf16_variants(vs);
    gptc_rng_seed(&g_rng, 22);
    const int B = 1, NH = 2, T = 37, HS = 24;
    size_t n = (size_t)B * NH * T * HS;
    float *q = test_randn_f(&g_rng, n, 1.0), *k = test_randn_f(&g_rng, n, 1.0), *v = test_randn_f(&g_rng, n, 1.0);
    float *dO = test_randn_f(&g_rng, n, 1.0), *g0 = test_randn_f(&g_rng, 3 * n, 0.5), *z = test_zeros_f(3 * n);
    for (int vi = 0; vi < nv; vi++) {
        fb_out a = run_fb(&vs[vi], q, k, v, dO, g0, B, NH, T, HS, 0.1f, 3);
        fb_out b = run_fb(&vs[vi], q, k, v, dO, z, B, NH, T, HS, 0.1f, 3);
        float *gs[3] = {a.dq, a.dk, a.dv}, *hs[3] = {b.dq, b.dk, b.dv};
        for (int w = 0; w < 3; w++) {
            for (size_t i = 0; i < n; i++) gs[w][i] -= g0[(size_t)w * n + i];
            double e = test_rel_err_f(gs[w], hs[w], n);
            CHECK_MSG(e <= ACC_TOL, "%s: %s from g0 minus g0 vs from zero rel err %.3g", vs[vi].name, k_what[2 + w], e);
        }
        fb_free(&a), fb_free(&b);
    }
    free(q), free(k), free(v), free(dO), free(g0), free(z);
}

TEST(attention_bf16_threads_bitwise) {
    variant vs[3];
    check_flash_threads_bitwise(vs, bf16_variants(vs), 40, 23);
}

/* bf16 reference vs fp32 reference, forward and backward: within BF16_TOL, and not bit-equal */
TEST(attention_bf16_ref_vs_fp32_ref) {
    gptc_rng_seed(&g_rng, 24);
    const int Ts[] = {1, 17, 65, 130}, HSs[] = {13, 64};
    const float ps[] = {0.0f, 0.2f};
    const int B = 2, NH = 2;
    double worst[5] = {0};
    for (int ti = 0; ti < 4; ti++)
        for (int hi = 0; hi < 2; hi++)
            for (int pi = 0; pi < 2; pi++) {
                int T = Ts[ti], HS = HSs[hi];
                float p = ps[pi];
                size_t n = (size_t)B * NH * T * HS, nl = (size_t)B * NH * T;
                float *q = test_randn_f(&g_rng, n, 1.0), *k = test_randn_f(&g_rng, n, 1.0);
                float *v = test_randn_f(&g_rng, n, 1.0), *dO = test_randn_f(&g_rng, n, 1.0);
                float *g0 = test_zeros_f(3 * n);
                fb_out want = run_fb(&k_ref_fp32, q, k, v, dO, g0, B, NH, T, HS, p, 9);
                fb_out got = run_fb(&k_ref_bf16, q, k, v, dO, g0, B, NH, T, HS, p, 9);
                double e[5];
                fb_errs(e, &got, &want, n, nl);
                for (int w = 0; w < 5; w++) {
                    if (T == 1 && (w == 2 || w == 3)) continue; /* dq, dk are 0 up to rounding noise */
                    if (e[w] > worst[w]) worst[w] = e[w];
                    CHECK_MSG(e[w] <= BF16_TOL, "T=%d HS=%d p=%g: %s bf16 vs fp32 rel err %.3g", T, HS, (double)p,
                              k_what[w], e[w]);
                }
                /* the roundings happen (T=1: o is bf(v); dk is 0 up to noise) */
                CHECK_MSG(memcmp(got.o, want.o, n * 4) != 0, "T=%d HS=%d: bf16 o equals fp32 o", T, HS);
                CHECK_MSG(memcmp(got.dv, want.dv, n * 4) != 0, "T=%d HS=%d: bf16 dv equals fp32 dv", T, HS);
                if (T > 1) CHECK_MSG(memcmp(got.dk, want.dk, n * 4) != 0, "T=%d HS=%d: bf16 dk equals fp32", T, HS);
                fb_free(&got), fb_free(&want);
                free(q), free(k), free(v), free(dO), free(g0);
            }
    printf("    worst rel err o %.2g lse %.2g dq %.2g dk %.2g dv %.2g\n", worst[0], worst[1], worst[2], worst[3],
           worst[4]);
}

TEST(attention_bf16_dispatch) {
    const char *level = gptc_kernels_get()->variant; /* amx: the avx512 table but for gemm_bf16 */
    int fast = strcmp(level, "avx512") == 0 || strcmp(level, "amx") == 0;
    int dp = fast && gptc_avx512_bf16_native(); /* vdpbf16ps where gemm_bf16 runs it */
    const char *want = dp ? "avx512bf16" : fast ? "avx512" : "ref";
    CHECK_MSG(strcmp(gptc_flash_bf16_variant(), want) == 0, "bf16 flash %s, table %s, want %s",
              gptc_flash_bf16_variant(), gptc_kernels_get()->variant, want);
    gptc_flash_fwd_fn fwd = dp ? gptc_flash_fwd_bf16_dp : fast ? gptc_flash_fwd_bf16_avx512 : gptc_flash_fwd_bf16_ref;
    gptc_flash_bwd_fn bwd = dp ? gptc_flash_bwd_bf16_dp : fast ? gptc_flash_bwd_bf16_avx512 : gptc_flash_bwd_bf16_ref;
    CHECK(gptc_flash_fwd_bf16() == fwd);
    CHECK(gptc_flash_bwd_bf16() == bwd);
}
