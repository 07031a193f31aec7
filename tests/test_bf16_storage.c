/* test_bf16_storage.c — bf16 storage of the activations only bf16 GEMMs read (kernels.h): each
 * producer's _bf16 entry writes, at every level, exactly gptc_f32_to_bf16 of what its fp32 entry
 * writes (and the levels agree with the reference within one bf16 rounding); gemm_bf16_in16 gives
 * gemm_bf16's bits on the widened operands at every level, every transpose, ragged shapes and strides;
 * the AVX-512 packers from bf16 sources write the bytes the fp32 packers write from the widened values;
 * and a bf16 training step with bf16 storage gives the same loss and gradients, bit for bit, as one
 * that keeps those activations in fp32 (fused and unfused, flash and naive, recompute, dropout). */
#include "test.h"

/* The aarch64 cross gcc 12 dies vectorising this file's reductions (internal compiler error in
 * vect_transform_reduction); the tests do not need vector code. */
#if defined(__aarch64__)
#pragma GCC optimize("no-tree-vectorize")
#endif

#include "core/core.h"
#include "kernels/attention.h"
#include "kernels/gelu.h"
#include "kernels/gemm/gemm_driver.h"
#include "kernels/kernels.h"
#include "kernels/x86_amx/amx.h"
#include "kernels/x86_avx512/avx512.h"
#include "model/gpt2.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static const char *const k_levels[] = {"ref", "avx2", "avx512", "amx"};
#define NLEVELS 4

static uint64_t g_state = 0x51A7B0C3D2E1F405ull;
static float uniform(void) { /* [-1, 1) */
    uint64_t z = (g_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return (float)((double)(z >> 40) / 16777216.0 * 2.0 - 1.0);
}
static float *randoms(size_t n, float scale) {
    float *p = malloc((n ? n : 1) * sizeof(float));
    for (size_t i = 0; i < n; i++) p[i] = uniform() * scale;
    return p;
}
static uint16_t *halves(size_t n) { return malloc((n ? n : 1) * sizeof(uint16_t)); }

/* The number of i < n with out16[i] != gptc_f32_to_bf16(out32[i]) */
static size_t mismatches(const uint16_t *out16, const float *out32, size_t n) {
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) bad += out16[i] != gptc_f32_to_bf16(out32[i]);
    return bad;
}

/* max |a - r| / max |r| over n bf16 values */
static double rel_err16(const uint16_t *a, const uint16_t *r, size_t n) {
    double d = 0, s = 0;
    for (size_t i = 0; i < n; i++) {
        double x = gptc_bf16_to_f32(a[i]), y = gptc_bf16_to_f32(r[i]);
        d = fmax(d, fabs(x - y));
        s = fmax(s, fabs(y));
    }
    return d / (s > 0 ? s : 1);
}
/* one bf16 rounding (2^-8 relative) plus the fp32 kernels' own tolerance against the reference */
#define TOL_TWIN (1.0 / 256 + 2e-5)

static const int k_shapes[][2] = {{1, 1}, {3, 7}, {5, 17}, {2, 33}, {9, 100}, {7, 767}, {64, 768}};
#define NSHAPES (sizeof k_shapes / sizeof k_shapes[0])

TEST(bf16_storage_layernorm_is_rounded_fp32) {
    const gptc_kernels *ref = gptc_kernels_ref();
    for (size_t s = 0; s < NSHAPES; s++) {
        int N = k_shapes[s][0], C = k_shapes[s][1];
        size_t nc = (size_t)N * C;
        float *x = randoms(nc, 3), *y = randoms(nc, 1), *w = randoms((size_t)C, 1), *b = randoms((size_t)C, 0.5f);
        uint16_t *ref16 = halves(nc), *ref16r = halves(nc);
        float *m0 = malloc(sizeof(float) * N), *r0 = malloc(sizeof(float) * N), *res0 = malloc(sizeof(float) * nc);
        ref->layernorm_fwd_bf16(ref16, m0, r0, x, w, b, N, C);
        ref->residual_layernorm_fwd_bf16(res0, ref16r, m0, r0, x, y, w, b, N, C);
        for (int l = 0; l < NLEVELS; l++) {
            const gptc_kernels *k = gptc_kernels_level(k_levels[l]);
            if (!k) continue;
            float *out = malloc(sizeof(float) * nc), *mean = malloc(sizeof(float) * N), *rstd = malloc(sizeof(float) * N);
            float *mean16 = malloc(sizeof(float) * N), *rstd16 = malloc(sizeof(float) * N);
            float *res = malloc(sizeof(float) * nc), *res16 = malloc(sizeof(float) * nc);
            uint16_t *out16 = halves(nc);
            k->layernorm_fwd(out, mean, rstd, x, w, b, N, C);
            k->layernorm_fwd_bf16(out16, mean16, rstd16, x, w, b, N, C);
            CHECK_MSG(mismatches(out16, out, nc) == 0, "%s layernorm_fwd_bf16 %dx%d: %zu values not the fp32 ones rounded",
                      k_levels[l], N, C, mismatches(out16, out, nc));
            CHECK(memcmp(mean, mean16, sizeof(float) * N) == 0 && memcmp(rstd, rstd16, sizeof(float) * N) == 0);
            CHECK_MSG(rel_err16(out16, ref16, nc) <= TOL_TWIN, "%s layernorm_fwd_bf16 %dx%d vs ref: %g", k_levels[l], N,
                      C, rel_err16(out16, ref16, nc));
            k->residual_layernorm_fwd(res, out, mean, rstd, x, y, w, b, N, C);
            k->residual_layernorm_fwd_bf16(res16, out16, mean16, rstd16, x, y, w, b, N, C);
            CHECK_MSG(mismatches(out16, out, nc) == 0, "%s residual_layernorm_fwd_bf16 %dx%d: %zu values", k_levels[l], N,
                      C, mismatches(out16, out, nc));
            CHECK(memcmp(res, res16, sizeof(float) * nc) == 0);
            CHECK(memcmp(mean, mean16, sizeof(float) * N) == 0 && memcmp(rstd, rstd16, sizeof(float) * N) == 0);
            CHECK_MSG(rel_err16(out16, ref16r, nc) <= TOL_TWIN, "%s residual_layernorm_fwd_bf16 vs ref: %g",
                      k_levels[l], rel_err16(out16, ref16r, nc));
            free(out), free(mean), free(rstd), free(mean16), free(rstd16), free(res), free(res16), free(out16);
        }
        free(x), free(y), free(w), free(b), free(ref16), free(ref16r), free(m0), free(r0), free(res0);
    }
}

TEST(bf16_storage_gelu_and_head_merge_are_rounded_fp32) {
    static const size_t sizes[] = {1, 7, 15, 17, 33, 1000, 4097, 4 * 64 * 3072};
    const gptc_gelu_kind forms[] = {GPTC_GELU_KIND_TANH, GPTC_GELU_KIND_ERF, GPTC_GELU_KIND_SIGMOID};
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        size_t n = sizes[s];
        float *x = randoms(n, 4), *out = malloc(sizeof(float) * n);
        uint16_t *out16 = halves(n), *ref16 = halves(n);
        for (int f = 0; f < 3; f++) {
            gptc_gelu_fwd_bf16_entry(gptc_kernels_ref(), forms[f])(ref16, x, n);
            for (int l = 0; l < NLEVELS; l++) {
                const gptc_kernels *k = gptc_kernels_level(k_levels[l]);
                if (!k) continue;
                gptc_gelu_fwd_entry(k, forms[f])(out, x, n);
                gptc_gelu_fwd_bf16_entry(k, forms[f])(out16, x, n);
                CHECK_MSG(mismatches(out16, out, n) == 0, "%s gelu form %d bf16, n %zu: %zu values", k_levels[l], f, n,
                          mismatches(out16, out, n));
                CHECK_MSG(rel_err16(out16, ref16, n) <= TOL_TWIN, "%s gelu form %d bf16 vs ref, n %zu: %g", k_levels[l],
                          f, n, rel_err16(out16, ref16, n));
            }
        }
        free(x), free(out), free(out16), free(ref16);
    }
    /* the head merge: a pure copy, so every level's bf16 output is the reference's bit for bit */
    static const int shapes[][4] = {{1, 1, 8, 2}, {2, 5, 24, 3}, {2, 7, 68, 2}, {1, 9, 768, 12}}; /* B, T, C, NH */
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int B = shapes[s][0], T = shapes[s][1], C = shapes[s][2], NH = shapes[s][3];
        size_t n = (size_t)B * T * C;
        float *o = randoms(n, 2), *rows = malloc(sizeof(float) * n);
        uint16_t *rows16 = halves(n);
        for (int l = 0; l < NLEVELS; l++) {
            const gptc_kernels *k = gptc_kernels_level(k_levels[l]);
            if (!k) continue;
            k->heads_to_rows(rows, o, B, T, C, NH);
            k->heads_to_rows_bf16(rows16, o, B, T, C, NH);
            CHECK_MSG(mismatches(rows16, rows, n) == 0, "%s heads_to_rows_bf16 %d,%d,%d,%d", k_levels[l], B, T, C, NH);
        }
        free(o), free(rows), free(rows16);
    }
    /* NaN stays NaN and quiet, ties go to even: the vector rounding is gptc_f32_to_bf16's */
    const float special[16] = {NAN, -NAN, INFINITY, -INFINITY, 0.0f, -0.0f, 1.00390625f /* tie, even below */,
                               1.01171875f /* tie, odd below */, 1e-40f, -1e-40f, 3.4e38f, 1.0f, -2.5f, 0.1f, 7.0f, -0.3f};
    for (int l = 0; l < NLEVELS; l++) {
        const gptc_kernels *k = gptc_kernels_level(k_levels[l]);
        if (!k) continue;
        uint16_t got[16];
        k->heads_to_rows_bf16(got, special, 1, 1, 16, 1);
        for (int i = 0; i < 16; i++)
            CHECK_MSG(got[i] == gptc_f32_to_bf16(special[i]), "%s: %g rounds to %04x, want %04x", k_levels[l],
                      (double)special[i], got[i], gptc_f32_to_bf16(special[i]));
    }
}

/* copies of rows x cols (stride ld) of a bf16 array, widened, into a (rows, ld) float array */
static float *widen(const uint16_t *x, size_t n) {
    float *o = malloc((n ? n : 1) * sizeof(float));
    for (size_t i = 0; i < n; i++) o[i] = gptc_bf16_to_f32(x[i]);
    return o;
}
static uint16_t *to_bf16(const float *x, size_t n) {
    uint16_t *o = halves(n);
    for (size_t i = 0; i < n; i++) o[i] = gptc_f32_to_bf16(x[i]);
    return o;
}

typedef void (*gemm_fn)(int, int, int, int, int, const float *, int, const float *, int, float, const float *, float *,
                        int);
typedef void (*gemm16_fn)(int, int, int, int, int, const void *, int, const void *, int, int, float, const float *,
                          float *, int);

/* gemm_bf16_in16 of one variant against its gemm_bf16 on the widened operands: bit for bit, over
 * transposes, in16 patterns, ragged shapes, padded strides, beta 0 / 1, with and without a bias; and B
 * (untransposed) in matvec's panel form, fp32 or bf16 (GPTC_GEMM_B_PANELS). */
static void check_in16(const char *name, gemm_fn g, gemm16_fn g16) {
    static const int shapes[][3] = {{1, 1, 1}, {13, 33, 7}, {29, 65, 130}, {64, 96, 769}, {37, 200, 64}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int ta = 0; ta < 2; ta++)
            for (int tb = 0; tb < 2; tb++)
                for (int in16 = 1; in16 <= 3 + 4 * !tb; in16++) { /* 4..7: the panel form of B */
                    int M = shapes[s][0], N = shapes[s][1], K = shapes[s][2];
                    int lda = (ta ? M : K) + 3, ldb = (tb ? K : N) + 5, ldc = N + 2;
                    size_t na = (size_t)(ta ? K : M) * lda, nb = (size_t)(tb ? N : K) * ldb, nc = (size_t)M * ldc;
                    float *A = randoms(na, 1), *B = randoms(nb, 1), *bias = randoms((size_t)N, 1), *C0 = randoms(nc, 1);
                    uint16_t *A16 = to_bf16(A, na), *B16 = to_bf16(B, nb);
                    float *Aw = widen(A16, na), *Bw = widen(B16, nb);
                    float *c1 = malloc(sizeof(float) * nc), *c2 = malloc(sizeof(float) * nc);
                    const void *a = in16 & GPTC_GEMM_A16 ? (const void *)A16 : A;
                    const void *b = in16 & GPTC_GEMM_B16 ? (const void *)B16 : B;
                    void *panels = NULL;
                    if (in16 & GPTC_GEMM_B_PANELS) { /* from B: gptc_matvec_pack rounds as B16 holds it */
                        panels = malloc(sizeof(float) * gptc_matvec_panel_elems(K, N));
                        gptc_matvec_pack(panels, in16 & GPTC_GEMM_B16, B, ldb, 0, K, N);
                        b = panels;
                    }
                    for (int beta = 0; beta < 2; beta++) {
                        memcpy(c1, C0, sizeof(float) * nc);
                        memcpy(c2, C0, sizeof(float) * nc);
                        const float *bs = beta ? NULL : bias;
                        g(ta, tb, M, N, K, in16 & GPTC_GEMM_A16 ? Aw : A, lda, in16 & GPTC_GEMM_B16 ? Bw : B, ldb,
                          (float)beta, bs, c1, ldc);
                        g16(ta, tb, M, N, K, a, lda, b, ldb, in16, (float)beta, bs, c2, ldc);
                        CHECK_MSG(memcmp(c1, c2, sizeof(float) * nc) == 0,
                                  "%s: gemm_bf16_in16 (in16 %d, trans %d%d, %dx%dx%d, beta %d) differs from gemm_bf16",
                                  name, in16, ta, tb, M, N, K, beta);
                    }
                    free(A), free(B), free(bias), free(C0), free(A16), free(B16), free(Aw), free(Bw), free(c1), free(c2);
                    free(panels);
                }
}

TEST(gemm_bf16_in16_matches_gemm_bf16) {
    for (int l = 0; l < NLEVELS; l++) {
        const gptc_kernels *k = gptc_kernels_level(k_levels[l]);
        if (k) check_in16(k_levels[l], k->gemm_bf16, k->gemm_bf16_in16);
    }
    if (gptc_kernels_level("avx512")) {
        check_in16("avx512-emulated", gptc_avx512_gemm_bf16_emulated, gptc_avx512_gemm_bf16_emulated_in16);
        if (gptc_cpu()->avx512bf16) {
            check_in16("avx512-vdpbf16ps", gptc_avx512_gemm_bf16_dp, gptc_avx512_gemm_bf16_dp_in16);
            check_in16("amx-soft", gptc_amx_soft_gemm_bf16, gptc_amx_soft_gemm_bf16_in16);
        } else
            printf("    (no AVX512_BF16: the vdpbf16ps variant is not run)\n");
    }
}

/* The AVX-512 packers from bf16 sources write what the fp32 packers write from the widened values. */
TEST(gemm_pack16_avx512_matches_pack) {
    if (!gptc_kernels_level("avx512")) {
        printf("    (no AVX-512: skipped)\n");
        return;
    }
    bool pairs = gptc_cpu()->avx512bf16;
    static const int cases[][4] = {{1, 1, 12, 0}, {7, 5, 12, 3}, {12, 33, 12, 1}, {31, 70, 32, 2}, {40, 17, 32, 0}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
        for (int v = 0; v < 4; v++) {
            /* v 2, 3: from bf16 rows 4 KiB apart (the order A's micro-panels are packed in depends on it) */
            const int trans = v & 1, wide = v >= 2;
            int m = cases[c][0], kc = cases[c][1], r = cases[c][2], off = cases[c][3];
            int rows = trans ? kc + off : m + off, ldx = wide ? 2048 : (trans ? m : kc) + off + 3;
            size_t n = (size_t)rows * ldx;
            float *X = randoms(n, 1);
            uint16_t *X16 = to_bf16(X, n);
            float *Xw = widen(X16, n);
            int panels = (m + r - 1) / r;
            size_t bytes = (size_t)panels * r * (kc + 1) * sizeof(float) + 64;
            char *o1 = calloc(1, bytes), *o2 = calloc(1, bytes);
            gptc_avx512_gemm_pack(trans, Xw, ldx, off, off, m, kc, r, o1);
            gptc_avx512_gemm_pack16(trans, X16, ldx, off, off, m, kc, r, o2);
            CHECK_MSG(memcmp(o1, o2, bytes) == 0, "fp32 layout: m %d kc %d r %d trans %d ldx %d", m, kc, r, trans, ldx);
            gptc_gemm_pack_portable(trans, Xw, ldx, off, off, m, kc, r, o1);
            gptc_gemm_pack16_portable(trans, X16, ldx, off, off, m, kc, r, o2);
            CHECK_MSG(memcmp(o1, o2, bytes) == 0, "portable: m %d kc %d r %d trans %d", m, kc, r, trans);
            if (pairs) {
                memset(o1, 0, bytes), memset(o2, 0, bytes);
                gptc_avx512_gemm_pack_bf16(trans, Xw, ldx, off, off, m, kc, r, o1);
                gptc_avx512_gemm_pack16_bf16(trans, X16, ldx, off, off, m, kc, r, o2);
                CHECK_MSG(memcmp(o1, o2, bytes) == 0, "bf16 pairs: m %d kc %d r %d trans %d ldx %d", m, kc, r, trans, ldx);
            }
            free(X), free(X16), free(Xw), free(o1), free(o2);
        }
}

/* x (n) := random bit patterns from r (NaN, inf, subnormal, huge: any float), every tie_every-th made a tie
 * (its low 16 bits exactly half way) */
static void any_bit_patterns(float *x, size_t n, gptc_rng *r, int tie_every) {
    for (size_t i = 0; i < n; i++) {
        union { uint32_t u; float f; } v = {(uint32_t)gptc_rng_next(r)};
        if (i % tie_every == 0) v.u = (v.u & 0xffff0000u) | 0x8000u;
        x[i] = v.f;
    }
}

/* ---- to_bf16, the O2 working copy's conversion: every level equals gptc_f32_to_bf16, ragged lengths,
 * ties, subnormals, infinities and NaN included */
TEST(to_bf16_levels_match_scalar_rounding) {
    const char *levels[] = {"ref", "avx2", "avx512"};
    size_t cap = 70001;
    float *x = malloc(sizeof(float) * cap);
    uint16_t *out = malloc(sizeof(uint16_t) * cap);
    gptc_rng r;
    gptc_rng_seed(&r, 3);
    any_bit_patterns(x, cap, &r, 5);
    x[1] = NAN, x[2] = INFINITY, x[3] = -INFINITY, x[4] = 1e-40f, x[6] = -0.0f, x[7] = 3.3895314e38f;
    for (int l = 0; l < 3; l++) {
        const gptc_kernels *k = gptc_kernels_level(levels[l]);
        if (!k) continue;
        const size_t lens[] = {0, 1, 15, 17, 33, 1000, cap};
        for (int j = 0; j < 7; j++) {
            size_t n = lens[j], bad = 0;
            memset(out, 0xAB, sizeof(uint16_t) * cap);
            k->to_bf16(out, x, n);
            for (size_t i = 0; i < n; i++) bad += out[i] != gptc_f32_to_bf16(x[i]);
            for (size_t i = n; i < cap; i++) bad += out[i] != 0xABAB; /* nothing written past n */
            CHECK_MSG(bad == 0, "%s n=%zu: %zu values differ from gptc_f32_to_bf16", levels[l], n, bad);
        }
    }
    free(x), free(out);
}

/* ---- the AVX-512 bf16 stores round with vcvtneps2bf16 where the CPU has AVX512_BF16 (a vector holding a
 * subnormal, which that instruction reads as zero, is rounded with integer operations instead), else with
 * integer operations only: either way to_bf16, gelu_fwd_bf16 and adamw16 store gptc_f32_to_bf16's bits,
 * subnormals, NaN and ties included */
TEST(bf16_stores_avx512_both_roundings_match_scalar) {
    const gptc_kernels *k = gptc_kernels_level("avx512");
    if (!k) {
        printf("    (no AVX-512: skipped)\n");
        return;
    }
    const bool native = gptc_cpu()->avx512bf16, was = gptc_avx512_bf16_convert(false);
    CHECK_MSG(was == native, "the overlay set vcvtneps2bf16 %s on a CPU %s AVX512_BF16", was ? "on" : "off",
              native ? "with" : "without");
    const size_t n = 4099;
    float *x = malloc(sizeof(float) * n), *y = malloc(sizeof(float) * n), *p = malloc(sizeof(float) * n);
    float *p2 = malloc(sizeof(float) * n), *g = malloc(sizeof(float) * n), *mv = calloc(4 * n, sizeof(float));
    uint16_t *out = halves(n);
    gptc_rng r;
    gptc_rng_seed(&r, 9);
    any_bit_patterns(x, n, &r, 7);
    for (size_t i = 5; i < n; i += 97) { /* a subnormal (or zero): the exponent cleared */
        union { float f; uint32_t u; } v = {x[i]};
        v.u &= 0x807fffffu;
        x[i] = v.f;
    }
    for (int use = 0; use <= (int)native; use++) {
        gptc_avx512_bf16_convert(use);
        size_t bad = 0;
        k->to_bf16(out, x, n);
        for (size_t i = 0; i < n; i++) bad += out[i] != gptc_f32_to_bf16(x[i]);
        CHECK_MSG(bad == 0, "to_bf16, vcvtneps2bf16 %s: %zu values differ from gptc_f32_to_bf16", use ? "on" : "off", bad);
        /* GELU of small inputs is about half of them: subnormal outputs where the input is tiny */
        for (size_t i = 0; i < n; i++)
            y[i] = (float)((int)(gptc_rng_next(&r) % 2001) - 1000) * (i % 13 == 0 ? 1e-41f : 4e-3f);
        k->gelu_fwd(p, y, n);
        size_t tiny = 0;
        for (size_t i = 0; i < n; i++) tiny += p[i] != 0 && fabsf(p[i]) < 1.17549435e-38f;
        CHECK_MSG(tiny > 100, "only %zu subnormal GELU outputs", tiny);
        k->gelu_fwd_bf16(out, y, n);
        CHECK_MSG(mismatches(out, p, n) == 0, "gelu_fwd_bf16, vcvtneps2bf16 %s: %zu values", use ? "on" : "off",
                  mismatches(out, p, n));
        /* AdamW with no gradient at every 11th parameter, a subnormal there: p stays subnormal */
        for (size_t i = 0; i < n; i++) {
            p[i] = p2[i] = i % 11 == 0 ? 3e-39f * (float)(i % 5 + 1) : y[i];
            g[i] = i % 11 == 0 ? 0.0f : 0.01f * (float)(i % 17) - 0.08f;
        }
        memset(mv, 0, sizeof(float) * 4 * n);
        k->adamw(p, g, mv, mv + n, n, 1e-3f, 0.9f, 0.999f, 1e-8f, 0.0f, 1.0f, 1);
        k->adamw16(p2, out, g, mv + 2 * n, mv + 3 * n, n, 1e-3f, 0.9f, 0.999f, 1e-8f, 0.0f, 1.0f, 1);
        CHECK_MSG(memcmp(p, p2, sizeof(float) * n) == 0, "adamw16's update differs from adamw's");
        CHECK_MSG(mismatches(out, p2, n) == 0, "adamw16's copy, vcvtneps2bf16 %s: %zu values", use ? "on" : "off",
                  mismatches(out, p2, n));
    }
    gptc_avx512_bf16_convert(was);
    free(x), free(y), free(p), free(p2), free(g), free(mv), free(out);
}

/* ---- the model: bf16 storage and the O2 working copy of the weights change no bit of a bf16 training step */

static const gptc_model_config k_cfg = {.layers = 2, .heads = 2, .channels = 64, .context = 80, .vocab = 200};
enum { MB = 2, MT = 77 };

typedef struct step_case {
    bool naive, fuse, dropout;
    gptc_recompute rc;
} step_case;

/* Two training steps (the second after an AdamW-free weight nudge, so the recompute paths see new
 * values): returns the gradients of the second (malloc'd) and both losses. fp32_store: activations and
 * weights kept in fp32 (the GEMMs round them as they pack), else bf16 storage and the O2 weights copy. */
static float *step_grads(const step_case *c, bool fp32_store, const gptc_kernels *k, float loss[2], size_t *n,
                         size_t *act_floats) {
    gptc_model m;
    if (gptc_model_init(&m, &k_cfg)) return NULL;
    gptc_model_init_weights(&m, 5);
    m.k = k;
    m.precision = GPTC_PRECISION_BF16;
    m.naive_attention = c->naive;
    m.fuse = c->fuse;
    m.recompute = c->rc;
    m.fp32_acts = fp32_store;
    m.fp32_weights = fp32_store;
    if (c->dropout) m.dropout = 0.1f, m.attn_dropout = c->naive ? 0.0f : 0.1f;
    if (gptc_model_alloc_train(&m, MB, MT)) return NULL;
    if ((m.params16 != NULL) == fp32_store) return NULL; /* O2's copy exists exactly when asked for */
    int in[MB * MT], tg[MB * MT];
    gptc_rng r;
    gptc_rng_seed(&r, 11);
    for (int i = 0; i < MB * MT; i++) in[i] = (int)(gptc_rng_next(&r) % k_cfg.vocab);
    for (int i = 0; i < MB * MT; i++) tg[i] = (int)(gptc_rng_next(&r) % k_cfg.vocab);
    for (int s = 0; s < 2; s++) {
        m.dropout_seed = 100 + s;
        gptc_model_zero_grad(&m);
        loss[s] = gptc_model_forward_backward(&m, in, tg, MB, MT, 1.0f);
        if (s == 0)
            for (size_t i = 0; i < m.num_floats; i++) m.params[i] -= 1e-2f * m.grads[i];
        gptc_model_params_changed(&m, 0, m.num_floats); /* what the optimizer's caller does */
    }
    *n = m.num_floats;
    *act_floats = m.act_floats;
    float *g = malloc(sizeof(float) * m.num_floats);
    memcpy(g, m.grads, sizeof(float) * m.num_floats);
    gptc_model_free(&m);
    return g;
}

TEST(bf16_storage_step_is_bit_identical) {
    const step_case cases[] = {
        {false, true, false, GPTC_RECOMPUTE_NONE}, {false, false, false, GPTC_RECOMPUTE_NONE},
        {true, true, false, GPTC_RECOMPUTE_NONE},  {true, false, true, GPTC_RECOMPUTE_ATTN},
        {false, true, true, GPTC_RECOMPUTE_GELU},  {false, true, false, GPTC_RECOMPUTE_BLOCK},
        {false, false, true, GPTC_RECOMPUTE_BLOCK},
    };
    const char *levels[] = {"avx512", "ref"};
    for (int l = 0; l < 2; l++) {
        const gptc_kernels *k = gptc_kernels_level(levels[l]);
        if (!k) continue;
        for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
            if (l == 1 && c > 1) break; /* the reference level: two cases keep the test short */
            float l32[2], l16[2];
            size_t n32, n16, a32, a16;
            float *g32 = step_grads(&cases[c], true, k, l32, &n32, &a32);
            float *g16 = step_grads(&cases[c], false, k, l16, &n16, &a16);
            CHECK(g32 && g16 && n32 == n16);
            if (!g32 || !g16) return;
            CHECK_MSG(memcmp(l32, l16, sizeof l32) == 0 && memcmp(g32, g16, sizeof(float) * n32) == 0,
                      "%s case %zu (naive %d fuse %d dropout %d recompute %d): bf16 storage / O2 changed the step (loss %.9g "
                      "vs %.9g)",
                      levels[l], c, cases[c].naive, cases[c].fuse, cases[c].dropout, (int)cases[c].rc, (double)l16[1],
                      (double)l32[1]);
            CHECK_MSG(a16 < a32, "case %zu: the arena did not shrink (%zu vs %zu floats)", c, a16, a32);
            if (c == 0)
                printf("    %s: losses %.7f, %.7f; activation arena %.2f MiB (fp32 storage) -> %.2f MiB (bf16)\n",
                       levels[l], (double)l16[0], (double)l16[1], a32 * 4.0 / 1048576, a16 * 4.0 / 1048576);
            free(g32), free(g16);
        }
    }
}
