/* gemm_avx2.c — AVX2+FMA GEMM microkernel (6 x 16, two ymm per row) for the portable blocked driver;
 * gemm_bf16 is the same kernel on panels the driver rounds to bf16 (products of bf16 values are exact
 * in fp32, so this is the bf16 contract without bf16 instructions). */
#include <immintrin.h>

#include "core/core.h"
#include "kernels/gemm/gemm_driver.h"
#include "kernels/x86_avx2/avx2.h"

#define MR 6
#define NR 16

/* Rows of the next B micro-panel asked for ahead of their copy (gemm_avx512.c's COPY_PF_ROWS) */
#define COPY_PF_ROWS 16

/* One depth of the tile: c0/c1 += a[i] * b's row; a and b step to the next depth */
#define TILE_AVX2_STEP()                                                                                           \
    do {                                                                                                           \
        const __m256 b0 = _mm256_load_ps(b), b1 = _mm256_load_ps(b + 8);                                         \
        _Pragma("GCC unroll 8") for (int i = 0; i < MR; i++) {                                                    \
            const __m256 ai = _mm256_broadcast_ss(a + i);                                                          \
            c0[i] = _mm256_fmadd_ps(ai, b0, c0[i]);                                                                \
            c1[i] = _mm256_fmadd_ps(ai, b1, c1[i]);                                                                \
        }                                                                                                          \
        a += MR;                                                                                                   \
        b += NR;                                                                                                   \
    } while (0)

/* c (m,n) = beta*c + a (MR,kc) b (kc,NR) [+ bias (n)]; a[k*MR+i], b[k*NR+j] packed, m <= MR, n <= NR; and
 * rows r < rows (0: none) of NR floats copied from src + r*lds to dst + r*NR as it goes, one after every
 * kc/rows depths, each asked for COPY_PF_ROWS rows ahead (gemm_driver.h kernel_copy). */
static inline __attribute__((always_inline)) void tile_avx2(int kc, const float *restrict a, const float *restrict b,
                                                            float *restrict c, int ldc, int m, int n, float beta,
                                                            const float *restrict bias, const float *restrict src,
                                                            size_t lds, float *restrict dst, int rows) {
    __m256 c0[MR], c1[MR];
#pragma GCC unroll 8
    for (int i = 0; i < MR; i++) c0[i] = c1[i] = _mm256_setzero_ps();
    const int every = rows > 0 ? kc / rows : kc;
    int k = 0;
    for (int r = 0; r < rows && r < COPY_PF_ROWS; r++) _mm_prefetch((const char *)(src + r * lds), _MM_HINT_T0);
    for (int r = 0; r < rows; r++) {
        for (int e = 0; e < every; e++, k++) TILE_AVX2_STEP();
        const float *s = src + r * lds;
        _mm256_store_ps(dst + (size_t)r * NR, _mm256_loadu_ps(s));
        _mm256_store_ps(dst + (size_t)r * NR + 8, _mm256_loadu_ps(s + 8));
        _mm_prefetch((const char *)(s + COPY_PF_ROWS * lds), _MM_HINT_T0); /* past the last: a hint */
    }
    for (; k < kc; k++) TILE_AVX2_STEP();
    /* Spill the tile with constant indices (runtime-indexed accumulators would live in memory
     * during the K loop), then full-width rows go to C with vector stores, a ragged edge by scalars. */
    float tile[MR][NR] __attribute__((aligned(32)));
#pragma GCC unroll 8
    for (int i = 0; i < MR; i++) {
        _mm256_store_ps(tile[i], c0[i]);
        _mm256_store_ps(tile[i] + 8, c1[i]);
    }
    if (bias)
        for (int i = 0; i < MR; i++)
            for (int j = 0; j < n; j++) tile[i][j] += bias[j];
    const __m256 vb = _mm256_set1_ps(beta);
    for (int i = 0; i < m; i++) {
        float *r = c + (size_t)i * ldc;
        const __m256 t0 = _mm256_load_ps(tile[i]), t1 = _mm256_load_ps(tile[i] + 8);
        if (n == NR) {
            if (beta == 0.0f) {
                _mm256_storeu_ps(r, t0);
                _mm256_storeu_ps(r + 8, t1);
            } else {
                _mm256_storeu_ps(r, _mm256_fmadd_ps(vb, _mm256_loadu_ps(r), t0));
                _mm256_storeu_ps(r + 8, _mm256_fmadd_ps(vb, _mm256_loadu_ps(r + 8), t1));
            }
        } else if (beta == 0.0f) {
            for (int j = 0; j < n; j++) r[j] = tile[i][j];
        } else {
            for (int j = 0; j < n; j++) r[j] = __builtin_fmaf(beta, r[j], tile[i][j]);
        }
    }
}

/* sumsq is not filled here (the isa's kernel_sumsq is 0: the driver reads the tile back) */
static void kernel_avx2(int kc, const void *a, const void *b, float *restrict c, int ldc, int m, int n, float beta,
                        const float *restrict bias, double *sumsq) {
    tile_avx2(kc, a, b, c, ldc, m, n, beta, bias, NULL, 0, NULL, 0);
}

static void kernel_avx2_copy(int kc, const void *a, const void *b, float *restrict c, int ldc, int m, int n,
                             float beta, const float *restrict bias, double *sumsq, const void *src, size_t lds,
                             int form, void *dst, int rows) {
    GPTC_ASSERT(form == GPTC_GEMM_COPY_F32);
    tile_avx2(kc, a, b, c, ldc, m, n, beta, bias, src, lds, dst, rows);
}

/* p[0..n) rounded to bf16 in place, 8 at a time: gptc_gemm_round_bf16's bits (ties to even, NaNs kept
 * quiet), for the rounded panels of gemm_bf16 */
static void round_bf16_avx2(float *p, size_t n) {
    const __m256i lsb = _mm256_set1_epi32(1), half = _mm256_set1_epi32(0x7fff), top = _mm256_set1_epi32((int)0xffff0000u);
    const __m256i quiet = _mm256_set1_epi32(0x00400000), mag = _mm256_set1_epi32(0x7fffffff), inf = _mm256_set1_epi32(0x7f800000);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256i x = _mm256_loadu_si256((const __m256i *)(p + i));
        __m256i rne = _mm256_and_si256(_mm256_add_epi32(_mm256_add_epi32(x, half), _mm256_and_si256(_mm256_srli_epi32(x, 16), lsb)), top);
        __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(x, mag), inf);
        __m256i q = _mm256_and_si256(_mm256_or_si256(x, quiet), top);
        _mm256_storeu_si256((__m256i *)(p + i), _mm256_blendv_epi8(rne, q, nan));
    }
    gptc_gemm_round_bf16(p + i, n - i);
}

static const gptc_gemm_isa k_isa = {
    .mr = MR, .nr = NR, .mc = 168, .kc = 256, .nc = 4080, .esize = 4, .kstep = 1, .kernel = kernel_avx2,
    .kernel_copy = kernel_avx2_copy,
};
/* gemm_bf16: the same blocking (so the same workspace), the packed panels rounded to bf16. */
static const gptc_gemm_isa k_isa_bf16 = {
    .mr = MR, .nr = NR, .mc = 168, .kc = 256, .nc = 4080, .esize = 4, .kstep = 1, .round_bf16 = 1,
    .round = round_bf16_avx2, .kernel = kernel_avx2,
};

static void gemm_avx2(int transA, int transB, int M, int N, int K, const float *A, int lda, const float *B,
                      int ldb, float beta, const float *bias, float *C, int ldc) {
    gptc_gemm_blocked(&k_isa, transA, transB, M, N, K, A, lda, B, ldb, beta, bias, C, ldc);
}

static void gemm_bf16_avx2(int transA, int transB, int M, int N, int K, const float *A, int lda, const float *B,
                           int ldb, float beta, const float *bias, float *C, int ldc) {
    gptc_gemm_blocked(&k_isa_bf16, transA, transB, M, N, K, A, lda, B, ldb, beta, bias, C, ldc);
}

/* gemm_bf16_in16: bf16 operands widened by the portable packer (the panels' fp32 layout) */
static void gemm_bf16_in16_avx2(int transA, int transB, int M, int N, int K, const void *A, int lda, const void *B,
                                int ldb, int in16, float beta, const float *bias, float *C, int ldc) {
    gptc_gemm_blocked_in16(&k_isa_bf16, transA, transB, M, N, K, A, lda, B, ldb, in16, beta, bias, C, ldc);
}

void gptc_avx2_overlay_gemm(gptc_kernels *k) {
    k->gemm = gemm_avx2;
    k->gemm_isa = &k_isa;
    k->gemm_bf16 = gemm_bf16_avx2;
    k->gemm_bf16_isa = &k_isa_bf16;
    k->gemm_bf16_in16 = gemm_bf16_in16_avx2;
}
