/* test_gemm_bf16.c — gemm_bf16 (bf16 operands, fp32 sums) of every level this machine runs (ref,
 * avx2, avx512 with AVX512_BF16 or its emulation, amx with AMX-BF16 tiles; the emulation on its own,
 * and the AMX kernel with its tile instructions carried out in C, amx-soft) against the reference
 * gemm_bf16 at ragged shapes, all four transposes, beta 0/1, bias; that rounding happens, to nearest
 * even; thread-count independence; the bf16 packers (AVX-512, AMX's A and B) and the driver's
 * rounding pass against scalar gptc_f32_to_bf16; the bf16 peak probe and the probe it uses.
 *
 * Tolerance: the products of bf16 values are exact in fp32, so a variant differs from the reference
 * only by the order of its fp32 sums: |got - ref| <= 1e-5 * (sum_k |a_ik| |b_kj| + |beta c_ij| + |bias_j|)
 * per element (the scale the sum's rounding errors are relative to; K here is at most 1700). */
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "kernels/gemm/gemm_driver.h"
#include "kernels/kernels.h"
#include "kernels/x86_amx/amx.h"
#include "kernels/x86_avx512/avx512.h"
#include "test.h"

#define BF16_TOL 1e-5
#define SENTINEL -777.0f

typedef void (*gemm_fn)(int ta, int tb, int M, int N, int K, const float *A, int lda, const float *B, int ldb,
                        float beta, const float *bias, float *C, int ldc);

/* uniform in [-1, 1), a splitmix64 stream */
static uint64_t g_state = 0x2545F4914F6CDD1Dull;
static float uniform(void) {
    uint64_t z = (g_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return (float)((double)(z >> 40) / 16777216.0 * 2.0 - 1.0);
}
static float *randoms(size_t n) {
    float *p = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) p[i] = uniform();
    return p;
}

/* The variants under test: each level's table entry, plus the AVX-512 emulation (the table picks it
 * only on CPUs without AVX512_BF16, so it is called directly here) and, where AVX512_BF16 runs its
 * packers, the AMX kernel with its tile instructions in C (never in the table; it checks the packing,
 * the tile plan and the epilogue of the AMX kernel on CPUs without AMX, which say so in one line). */
#define MAX_VARIANTS 7
typedef struct variant {
    const char *name;
    gemm_fn fn;
} variant;
static int variants(variant out[MAX_VARIANTS]) {
    int n = 0;
    const char *levels[] = {"ref", "avx2", "avx512", "amx"};
    for (int l = 0; l < 4; l++) {
        const gptc_kernels *k = gptc_kernels_level(levels[l]);
        if (k) out[n++] = (variant){levels[l], k->gemm_bf16};
    }
    if (gptc_kernels_level("avx512")) out[n++] = (variant){"avx512-emulated", gptc_avx512_gemm_bf16_emulated};
    if (gptc_kernels_level("avx512") && gptc_cpu()->avx512bf16) {
        out[n++] = (variant){"avx512-vdpbf16ps", gptc_avx512_gemm_bf16_dp};
        out[n++] = (variant){"amx-soft", gptc_amx_soft_gemm_bf16};
    }
    if (!gptc_kernels_level("amx")) printf("    no AMX-BF16 on this CPU: skipped\n");
    return n;
}

/* op(X)(i,k) of a stored matrix, trans meaning X is stored (k,i) */
static float op_at(const float *X, int ld, int trans, int i, int k) {
    return trans ? X[(size_t)k * ld + i] : X[(size_t)i * ld + k];
}

/* scale (M,N) = sum_k |op(A)_ik| |op(B)_kj| + |beta c0_ij| + |bias_j| */
static double *abs_scale(int ta, int tb, int M, int N, int K, const float *A, int lda, const float *B, int ldb,
                         float beta, const float *bias, const float *C0, int ldc) {
    double *s = malloc((size_t)M * N * sizeof(double));
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double acc = fabs((double)beta * C0[(size_t)i * ldc + j]) + (bias ? fabs(bias[j]) : 0.0);
            for (int k = 0; k < K; k++) acc += fabs(op_at(A, lda, ta, i, k)) * fabs(op_at(B, ldb, !tb, j, k));
            s[(size_t)i * N + j] = acc;
        }
    return s;
}

/* One shape, both transposes of each operand, beta 0/1, bias NULL/not: every variant against the
 * reference. C has ldc = N + 3; the 3 padding columns must keep SENTINEL; beta 0 starts from NaN. */
static void check_shape(const variant *v, int nv, int M, int N, int K) {
    const gptc_kernels *ref = gptc_kernels_ref();
    const int ldc = N + 3;
    const size_t csz = (size_t)M * ldc;
    float *C0 = malloc(csz * sizeof(float)), *R = malloc(csz * sizeof(float)), *G = malloc(csz * sizeof(float));
    for (int t = 0; t < 4; t++) {
        const int ta = t >> 1, tb = t & 1;
        const int lda = ta ? M : K, ldb = tb ? K : N;
        float *A = randoms((size_t)M * K), *B = randoms((size_t)K * N), *bias = randoms((size_t)N);
        for (int b = 0; b < 2; b++)
            for (int wb = 0; wb < 2; wb++) {
                const float beta = (float)b;
                const float *bs = wb ? bias : NULL;
                for (size_t i = 0; i < csz; i++) C0[i] = (int)(i % ldc) >= N ? SENTINEL : beta == 0.0f ? NAN : uniform();
                memcpy(R, C0, csz * sizeof(float));
                ref->gemm_bf16(ta, tb, M, N, K, A, lda, B, ldb, beta, bs, R, ldc);
                double *scale = abs_scale(ta, tb, M, N, K, A, lda, B, ldb, beta, bs, beta == 0.0f ? R : C0,
                                          ldc); /* beta 0: C0 holds NaN, 0*NaN would poison the scale */
                for (int vi = 0; vi < nv; vi++) {
                    memcpy(G, C0, csz * sizeof(float));
                    v[vi].fn(ta, tb, M, N, K, A, lda, B, ldb, beta, bs, G, ldc);
                    double worst = 0;
                    int bad_pad = 0;
                    for (int i = 0; i < M; i++)
                        for (int j = 0; j < ldc; j++) {
                            const float g = G[(size_t)i * ldc + j], r = R[(size_t)i * ldc + j];
                            if (j >= N) {
                                bad_pad |= g != SENTINEL;
                                continue;
                            }
                            double e = fabs((double)g - r) / (scale[(size_t)i * N + j] + 1e-30);
                            if (!(e <= worst)) worst = e; /* NaN propagates */
                        }
                    CHECK_MSG(!bad_pad && worst <= BF16_TOL,
                              "%s gemm_bf16 ta=%d tb=%d M=%d N=%d K=%d beta=%g bias=%d: err/scale %g%s", v[vi].name,
                              ta, tb, M, N, K, beta, wb, worst, bad_pad ? " (padding written)" : "");
                }
                free(scale);
            }
        free(A), free(B), free(bias);
    }
    free(C0), free(R), free(G);
}

/* Ragged shapes around every tile and block: mr 6/12/32, nr 16/32, mc 144/168/512, kc 256/768/1536
 * (bf16), 512 (AMX), nc 3072/4080/2048; odd K, K = 1 and K < 32 (one zero-padded AMX k block); whole
 * 32 x 32 tiles (the AMX kernel's path straight between C and its tiles) beside ragged ones. */
TEST(gemm_bf16_ragged_shapes) {
    static const int shapes[][3] = {
        {1, 1, 1},   {1, 7, 13},    {7, 1, 31},     {13, 31, 7},    {31, 33, 65},    {33, 65, 1},
        {2, 3, 2},   {65, 13, 257}, {257, 33, 31},  {300, 47, 13},  {13, 4100, 40},  {20, 45, 1601},
        {150, 70, 1537}, {37, 29, 769}, {64, 64, 32}, {96, 64, 545}, {530, 40, 70}, {40, 2100, 19},
    };
    variant v[MAX_VARIANTS];
    int nv = variants(v);
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) check_shape(v, nv, shapes[s][0], shapes[s][1], shapes[s][2]);
}

/* gemm_bf16 against the fp32 gemm on the same random data: the difference is that of rounding each
 * operand (relative error <= 2^-9 each, so <= ~2^-8 per product): > 0 somewhere, < 2^-7 sum|a||b|. */
TEST(gemm_bf16_rounds_operands) {
    const int M = 37, N = 45, K = 300;
    float *A = randoms((size_t)M * K), *B = randoms((size_t)K * N);
    float *F = malloc((size_t)M * N * sizeof(float)), *G = malloc((size_t)M * N * sizeof(float));
    gptc_kernels_ref()->gemm(0, 0, M, N, K, A, K, B, N, 0.0f, NULL, F, N);
    double *scale = abs_scale(0, 0, M, N, K, A, K, B, N, 0.0f, NULL, F, N);
    variant v[MAX_VARIANTS];
    int nv = variants(v);
    for (int vi = 0; vi < nv; vi++) {
        v[vi].fn(0, 0, M, N, K, A, K, B, N, 0.0f, NULL, G, N);
        double worst = 0, total = 0;
        for (size_t i = 0; i < (size_t)M * N; i++) {
            double e = fabs((double)G[i] - F[i]);
            total += e;
            if (!(e / scale[i] <= worst)) worst = e / scale[i];
        }
        CHECK_MSG(total > 0, "%s: gemm_bf16 equals the fp32 product: no rounding happened", v[vi].name);
        CHECK_MSG(worst < 0x1p-7, "%s: |bf16 - fp32| / sum|a||b| reaches %g (>= 2^-7)", v[vi].name, worst);
    }
    free(A), free(B), free(F), free(G), free(scale);
}

/* Round to nearest, ties to even. At 1 the bf16 step is 2^-7: 1 + 2^-8 is a tie between 1 (even) and
 * 1 + 2^-7 (odd) -> 1; 1 + 3*2^-8 is a tie between 1 + 2^-7 (odd) and 1 + 2^-6 (even) -> 1 + 2^-6; just
 * above a tie rounds up. X (4,4) of such values times the identity gives round(X) exactly (products
 * by 1 and 0, sums with zeros), for X as A and as B, stored plain or transposed. */
TEST(gemm_bf16_ties_to_even) {
    const float x[16] = {
        1.0f + 0x1p-8f,   1.0f + 3 * 0x1p-8f,   1.0f + 0x1p-8f + 0x1p-20f, -(1.0f + 0x1p-8f),
        -(1.0f + 3 * 0x1p-8f), 0x1p-20f * (1.0f + 0x1p-8f), 0x1p20f * (1.0f + 3 * 0x1p-8f), 1.5f + 0x1p-8f,
        2.0f + 0x1p-7f,   2.0f + 3 * 0x1p-7f,   0.75f,                     -0.5f - 0x1p-10f,
        3.0f + 0x1p-7f,   1.0f - 0x1p-9f,       0.1f,                      -1.0f + 0x1p-9f + 0x1p-22f,
    };
    const float want[16] = {
        1.0f,  1.0f + 0x1p-6f,  1.0f + 0x1p-7f, -1.0f, -(1.0f + 0x1p-6f), 0x1p-20f, 0x1p20f * (1.0f + 0x1p-6f), 1.5f,
        2.0f,  2.0f + 0x1p-5f,  0.75f,          -0.5f, 3.0f,             1.0f,     gptc_bf16_round(0.1f), -1.0f + 0x1p-8f,
    };
    /* check the hand-made expectations against the scalar rule too */
    for (int i = 0; i < 16; i++) CHECK_MSG(gptc_bf16_round(x[i]) == want[i], "gptc_bf16_round(x[%d])", i);
    float eye[16] = {0}, xt[16], C[16];
    for (int i = 0; i < 4; i++) eye[i * 5] = 1.0f;
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++) xt[j * 4 + i] = x[i * 4 + j];
    variant v[MAX_VARIANTS];
    int nv = variants(v);
    for (int vi = 0; vi < nv; vi++)
        for (int t = 0; t < 2; t++) {
            /* op(X) = x either way: stored x plain, or stored x^T with trans */
            const float *X = t ? xt : x;
            v[vi].fn(t, 0, 4, 4, 4, X, 4, eye, 4, 0.0f, NULL, C, 4); /* op(A) = x */
            CHECK_MSG(memcmp(C, want, sizeof C) == 0, "%s: A ties (transA=%d) not rounded to even", v[vi].name, t);
            v[vi].fn(0, t, 4, 4, 4, eye, 4, X, 4, 0.0f, NULL, C, 4); /* op(B) = x */
            CHECK_MSG(memcmp(C, want, sizeof C) == 0, "%s: B ties (transB=%d) not rounded to even", v[vi].name, t);
        }
}

/* Each C element's sum order must not depend on the thread count (K > the bf16 KC of 1536, so the
 * k blocks and beta/bias of the first block are exercised too). amx-soft, slow, on 100 x 200 x 600
 * instead (K > its KC of 512). */
TEST(gemm_bf16_deterministic_threads) {
    const int M0 = 300, N0 = 769, K0 = 1700;
    variant v[MAX_VARIANTS];
    int nv = variants(v);
    float *A = randoms((size_t)M0 * K0), *B = randoms((size_t)K0 * N0), *bias = randoms(N0);
    float *C0 = randoms((size_t)M0 * N0);
    float *C1 = malloc((size_t)M0 * N0 * sizeof(float)), *C2 = malloc((size_t)M0 * N0 * sizeof(float));
    const int saved = omp_get_max_threads();
    for (int vi = 0; vi < nv; vi++) {
        if (strcmp(v[vi].name, "ref") == 0) continue;
        const int soft = strcmp(v[vi].name, "amx-soft") == 0;
        const int M = soft ? 100 : M0, N = soft ? 200 : N0, K = soft ? 600 : K0;
        for (int t = 0; t < 4; t++) {
            const int ta = t >> 1, tb = t & 1;
            memcpy(C1, C0, (size_t)M * N * sizeof(float));
            omp_set_num_threads(1);
            v[vi].fn(ta, tb, M, N, K, A, ta ? M : K, B, tb ? K : N, 1.0f, bias, C1, N);
            for (int nt = 2; nt <= 3; nt++) {
                memcpy(C2, C0, (size_t)M * N * sizeof(float));
                omp_set_num_threads(nt);
                v[vi].fn(ta, tb, M, N, K, A, ta ? M : K, B, tb ? K : N, 1.0f, bias, C2, N);
                CHECK_MSG(memcmp(C1, C2, (size_t)M * N * sizeof(float)) == 0, "%s gemm_bf16 ta=%d tb=%d: 1 vs %d threads differ",
                          v[vi].name, ta, tb, nt);
            }
        }
    }
    omp_set_num_threads(saved);
    free(A), free(B), free(bias), free(C0), free(C1), free(C2);
}

/* The scalar bf16 packing (gemm_driver.h layout, s = 2): element (i, k) of micro-panel p at
 * out[p*r*kcp + (k/2)*2r + 2i + k%2], zero past m and kc. */
static void pack_bf16_scalar(int trans, const float *X, int ldx, int i0, int k0, int m, int kc, int r, uint16_t *out) {
    const int kcp = (kc + 1) & ~1;
    for (int p = 0; p < m; p += r)
        for (int i = 0; i < r; i++)
            for (int k = 0; k < kcp; k++) {
                const int row = p + i;
                const float x = row < m && k < kc ? op_at(X, ldx, trans, i0 + row, k0 + k) : 0.0f;
                out[(size_t)p * kcp + (size_t)(k / 2) * 2 * r + 2 * i + k % 2] = gptc_f32_to_bf16(x);
            }
}

TEST(gemm_bf16_pack_avx512_matches_scalar) {
    if (!gptc_kernels_level("avx512") || !gptc_cpu()->avx512bf16) {
        printf("    (no AVX512_BF16 on this CPU: nothing to compare)\n");
        return;
    }
    const int rs[] = {12, 32}, ms[] = {1, 11, 12, 13, 16, 17, 31, 32, 33, 45, 64, 70};
    const int kcs[] = {1, 2, 3, 15, 16, 17, 31, 32, 33, 64, 100, 101};
    const int ldxs[] = {150, 1024}, rows = 140; /* cover i0 + m and k0 + kc either way round; rows 4 KiB apart */
    for (int li = 0; li < 2; li++) {
        const int ldx = ldxs[li];
        float *X = randoms((size_t)rows * ldx);
        /* some ties and near-ties for the rounding */
        for (int i = 0; i < rows * ldx; i += 7) X[i] = (i & 8 ? -1.0f : 1.0f) * (1.0f + (i & 16 ? 3 : 1) * 0x1p-8f);
        for (int ri = 0; ri < 2; ri++)
            for (int trans = 0; trans < 2; trans++)
                for (size_t mi = 0; mi < sizeof ms / sizeof ms[0]; mi++)
                    for (size_t ki = 0; ki < sizeof kcs / sizeof kcs[0]; ki++) {
                        const int r = rs[ri], m = ms[mi], kc = kcs[ki], i0 = 3, k0 = 5;
                        const size_t n = (size_t)((m + r - 1) / r) * r * ((kc + 1) & ~1);
                        uint16_t *o1 = malloc(n * 2), *o2 = malloc(n * 2);
                        memset(o2, 0xA5, n * 2);
                        pack_bf16_scalar(trans, X, ldx, i0, k0, m, kc, r, o1);
                        gptc_avx512_gemm_pack_bf16(trans, X, ldx, i0, k0, m, kc, r, o2);
                        CHECK_MSG(memcmp(o1, o2, n * 2) == 0, "ldx=%d r=%d trans=%d m=%d kc=%d: bf16 packs differ", ldx, r,
                                  trans, m, kc);
                        free(o1), free(o2);
                    }
        free(X);
    }
}

/* The AMX packers' layouts (gemm_driver.h) in scalar code: A with s = 32, element (i, k) of micro-panel
 * p at out[p*r*kcp + (k/32)*32r + 32i + k%32]; B with s = 2, at out[p*r*kcp + (k/2)*2r + 2i + k%2];
 * kcp = kc rounded up to 32 for both; zero past m and kc. */
static void pack_amx_scalar(int b_side, int trans, const float *X, int ldx, int i0, int k0, int m, int kc, int r,
                            uint16_t *out) {
    const int kcp = (kc + 31) / 32 * 32, s = b_side ? 2 : 32;
    for (int p = 0; p < m; p += r)
        for (int i = 0; i < r; i++)
            for (int k = 0; k < kcp; k++) {
                const int row = p + i;
                const float x = row < m && k < kc ? op_at(X, ldx, trans, i0 + row, k0 + k) : 0.0f;
                out[(size_t)p * kcp + (size_t)(k / s) * s * r + (size_t)s * i + k % s] = gptc_f32_to_bf16(x);
            }
}

/* Both AMX packers against the scalar layouts: A with r = 32 (the kernel's) and 16, B with r = 32; both
 * transposes; m and kc around 16, 32 and their multiples (K < 32, odd, several k blocks). They need
 * AVX512_BF16 only, so they run wherever the amx-soft variant does. */
TEST(gemm_bf16_pack_amx_matches_scalar) {
    if (!gptc_kernels_level("avx512") || !gptc_cpu()->avx512bf16) {
        printf("    (no AVX512_BF16 on this CPU: nothing to compare)\n");
        return;
    }
    const int ms[] = {1, 11, 16, 17, 31, 32, 33, 45, 64, 70};
    const int kcs[] = {1, 2, 3, 15, 16, 17, 31, 32, 33, 63, 64, 65, 100};
    const int ldx = 150, rows = 140;
    float *X = randoms((size_t)rows * ldx);
    for (int i = 0; i < rows * ldx; i += 7) X[i] = (i & 8 ? -1.0f : 1.0f) * (1.0f + (i & 16 ? 3 : 1) * 0x1p-8f);
    const struct { int b_side, r; } cases[] = {{0, 32}, {0, 16}, {1, 32}};
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++)
        for (int trans = 0; trans < 2; trans++)
            for (size_t mi = 0; mi < sizeof ms / sizeof ms[0]; mi++)
                for (size_t ki = 0; ki < sizeof kcs / sizeof kcs[0]; ki++) {
                    const int r = cases[ci].r, m = ms[mi], kc = kcs[ki], i0 = 3, k0 = 5;
                    const size_t n = (size_t)((m + r - 1) / r) * r * ((kc + 31) / 32 * 32);
                    uint16_t *o1 = malloc(n * 2), *o2 = malloc(n * 2);
                    memset(o2, 0xA5, n * 2);
                    pack_amx_scalar(cases[ci].b_side, trans, X, ldx, i0, k0, m, kc, r, o1);
                    (cases[ci].b_side ? gptc_amx_gemm_pack_b : gptc_amx_gemm_pack_a)(trans, X, ldx, i0, k0, m, kc, r, o2);
                    CHECK_MSG(memcmp(o1, o2, n * 2) == 0, "%s r=%d trans=%d m=%d kc=%d: AMX packs differ",
                              cases[ci].b_side ? "B" : "A", r, trans, m, kc);
                    free(o1), free(o2);
                }
    free(X);
}

/* The driver's in-place rounding pass (the emulated variants), portable and each level's own (the ISA's
 * round, where it has one), is gptc_bf16_round, bit for bit, on random values and on ties, infinities,
 * NaNs, subnormals and the largest float (which rounds to inf); lengths not a multiple of the vector. */
TEST(gemm_bf16_round_pass_matches_scalar) {
    const int n = 1000;
    float *p = randoms(n), *q = malloc(n * sizeof(float));
    const uint32_t special[] = {0x3f808000u, 0x3f818000u, 0xbf808000u, 0x7f800000u, 0xff800000u, 0x7fc00001u,
                                0x7f800001u, 0xffa00000u, 0x00000001u, 0x00018000u, 0x807fffffu, 0x7f7fffffu,
                                0x00000000u, 0x80000000u, 0x3f80ffffu, 0x3f807fffu};
    for (size_t i = 0; i < sizeof special / sizeof special[0]; i++) memcpy(p + 3 * i, &special[i], 4);
    static const char *const levels[] = {"ref", "avx2", "avx512"};
    for (int l = 0; l < 3; l++) {
        const gptc_kernels *k = gptc_kernels_level(levels[l]);
        const gptc_gemm_isa *g = k ? k->gemm_bf16_isa : NULL;
        void (*pass)(float *, size_t) = g && g->round ? g->round : gptc_gemm_round_bf16;
        if (l > 0 && pass == gptc_gemm_round_bf16) continue; /* no level of its own here */
        int bad = 0;
        for (int len = n - 13; len <= n; len += 13) { /* a ragged tail, then all */
            memcpy(q, p, n * sizeof(float));
            pass(q, (size_t)len);
            for (int i = 0; i < n; i++) {
                float w = i < len ? gptc_bf16_round(p[i]) : p[i];
                if (memcmp(&w, q + i, 4) && bad++ < 3)
                    printf("    %s: element %d (%a): pass gives %a, expected %a\n", levels[l], i, p[i], q[i], w);
            }
        }
        CHECK_MSG(bad == 0, "%s: %d elements differ", levels[l], bad);
    }
    free(p), free(q);
}

/* The bf16 peak probes the instruction the table's gemm_bf16 multiplies with: tdpbf16ps where that is
 * the AMX kernel, else vdpbf16ps; on an AMX CPU the AMX probe also runs on its own and must sum its
 * tiles to a finite positive value (its speed is printed, not checked). */
TEST(gemm_bf16_peak_probe) {
    const double p = gptc_peak_bf16_gflops(1);
    const int amx = gptc_kernels_gemm_bf16_is_amx(gptc_kernels_get());
    CHECK_MSG(strcmp(gptc_peak_bf16_kind(), amx ? "amx_bf16" : "bf16") == 0, "probe %s, gemm_bf16 amx %d",
              gptc_peak_bf16_kind(), amx);
    if (gptc_kernels_level("avx512") && gptc_cpu()->avx512bf16)
        CHECK_MSG(p > 0, "bf16 peak %g on a CPU with AVX512_BF16", p);
    else
        CHECK_MSG(p == 0, "bf16 peak %g on a CPU without AVX512_BF16", p);
    if (!gptc_kernels_level("amx")) {
        printf("    no AMX-BF16 on this CPU: skipped\n");
        return;
    }
    const long iters = 20000;
    double t0 = gptc_now();
    const float r = gptc_amx_bf16_probe(iters);
    const double amx_gflops = iters * 6.0 * 16384 / (gptc_now() - t0) / 1e9;
    CHECK_MSG(isfinite(r) && r > 0, "AMX probe returned %g", r);
    printf("    tdpbf16ps probe: %.0f GFLOP/s on 1 thread\n", amx_gflops);
}
