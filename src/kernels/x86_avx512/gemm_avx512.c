/* gemm_avx512.c — AVX-512 GEMM for the portable blocked driver: a 12 x 32 microkernel (two zmm per
 * row, bias in the epilogue) and a packer that transposes 16 x 16 tiles in registers. */
#include <immintrin.h>

#include "kernels/gemm/gemm_driver.h"
#include "kernels/x86_avx512/avx512.h"

#define MR 12
#define NR 32

/* c (m,n) = beta*c + a (MR,kc) b (kc,NR) [+ bias (n)]; a[k*MR+i], b[k*NR+j] packed, m <= MR, n <= NR. */
static void kernel_avx512(int kc, const float *restrict a, const float *restrict b, float *restrict c, int ldc,
                          int m, int n, float beta, const float *restrict bias) {
    __m512 c0[MR], c1[MR];
#pragma GCC unroll 16
    for (int i = 0; i < MR; i++) c0[i] = c1[i] = _mm512_setzero_ps();
    for (int k = 0; k < kc; k++) {
        const __m512 b0 = _mm512_load_ps(b), b1 = _mm512_load_ps(b + 16);
#pragma GCC unroll 16
        for (int i = 0; i < MR; i++) {
            const __m512 ai = _mm512_set1_ps(a[i]);
            c0[i] = _mm512_fmadd_ps(ai, b0, c0[i]);
            c1[i] = _mm512_fmadd_ps(ai, b1, c1[i]);
        }
        a += MR;
        b += NR;
    }
    const __mmask16 m0 = n >= 16 ? 0xFFFF : (__mmask16)((1u << n) - 1);
    const __mmask16 m1 = n >= 32 ? 0xFFFF : n > 16 ? (__mmask16)((1u << (n - 16)) - 1) : 0;
    if (bias) {
        const __m512 bv0 = _mm512_maskz_loadu_ps(m0, bias), bv1 = _mm512_maskz_loadu_ps(m1, bias + 16);
#pragma GCC unroll 16
        for (int i = 0; i < MR; i++) {
            c0[i] = _mm512_add_ps(c0[i], bv0);
            c1[i] = _mm512_add_ps(c1[i], bv1);
        }
    }
    if (beta == 0.0f) {
        for (int i = 0; i < m; i++) {
            float *r = c + (size_t)i * ldc;
            _mm512_mask_storeu_ps(r, m0, c0[i]);
            _mm512_mask_storeu_ps(r + 16, m1, c1[i]);
        }
    } else {
        const __m512 vb = _mm512_set1_ps(beta);
        for (int i = 0; i < m; i++) {
            float *r = c + (size_t)i * ldc;
            _mm512_mask_storeu_ps(r, m0, _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(m0, r), c0[i]));
            _mm512_mask_storeu_ps(r + 16, m1, _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(m1, r + 16), c1[i]));
        }
    }
}

static inline __mmask16 low_mask(int n) { return n >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << n) - 1); }

/* In-register 16 x 16 transpose: on return r[c] holds column c of the input rows r[0..15]. Three
 * stages: 32-bit interleave of row pairs, 64-bit interleave (each 128-bit lane l of b[4j+q] then
 * holds rows 4j..4j+3 of column 4l+q), then two 128-bit lane shuffles gather the four lanes. */
static inline void transpose16(__m512 r[16]) {
    __m512 a[16], b[16];
    for (int j = 0; j < 8; j++) {
        a[2 * j] = _mm512_unpacklo_ps(r[2 * j], r[2 * j + 1]);
        a[2 * j + 1] = _mm512_unpackhi_ps(r[2 * j], r[2 * j + 1]);
    }
    for (int j = 0; j < 4; j++) {
        __m512d x0 = _mm512_castps_pd(a[4 * j]), x1 = _mm512_castps_pd(a[4 * j + 1]);
        __m512d x2 = _mm512_castps_pd(a[4 * j + 2]), x3 = _mm512_castps_pd(a[4 * j + 3]);
        b[4 * j + 0] = _mm512_castpd_ps(_mm512_unpacklo_pd(x0, x2));
        b[4 * j + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(x0, x2));
        b[4 * j + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(x1, x3));
        b[4 * j + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(x1, x3));
    }
    for (int q = 0; q < 4; q++) {
        __m512 c0 = _mm512_shuffle_f32x4(b[q], b[4 + q], 0x44), c1 = _mm512_shuffle_f32x4(b[q], b[4 + q], 0xEE);
        __m512 d0 = _mm512_shuffle_f32x4(b[8 + q], b[12 + q], 0x44);
        __m512 d1 = _mm512_shuffle_f32x4(b[8 + q], b[12 + q], 0xEE);
        r[0 + q] = _mm512_shuffle_f32x4(c0, d0, 0x88);
        r[4 + q] = _mm512_shuffle_f32x4(c0, d0, 0xDD);
        r[8 + q] = _mm512_shuffle_f32x4(c1, d1, 0x88);
        r[12 + q] = _mm512_shuffle_f32x4(c1, d1, 0xDD);
    }
}

/* The packer contract of gemm_driver.h. trans: each k is a contiguous run of r values (a masked
 * copy); not trans: each row is a contiguous run of k values, moved 16 x 16 at a time through
 * transpose16. Rows past m and k past kc read as zero. */
static void pack_avx512(int trans, const float *X, int ldx, int i0, int k0, int m, int kc, int r, float *out) {
    for (int p = 0; p < m; p += r) {
        const int rows = m - p < r ? m - p : r;
        float *o = out + (size_t)p * kc;
        for (int g = 0; g < r; g += 16) {
            const int w = r - g < 16 ? r - g : 16, nrow = rows - g < 0 ? 0 : rows - g < w ? rows - g : w;
            const __mmask16 wm = low_mask(w), rm = low_mask(nrow);
            if (trans) {
                const float *x = X + (size_t)k0 * ldx + i0 + p + g;
                for (int k = 0; k < kc; k++, x += ldx)
                    _mm512_mask_storeu_ps(o + (size_t)k * r + g, wm, _mm512_maskz_loadu_ps(rm, x));
                continue;
            }
            for (int k = 0; k < kc; k += 16) {
                const int kk = kc - k < 16 ? kc - k : 16;
                const __mmask16 km = low_mask(kk);
                __m512 t[16];
                for (int i = 0; i < 16; i++)
                    t[i] = i < nrow ? _mm512_maskz_loadu_ps(km, X + (size_t)(i0 + p + g + i) * ldx + k0 + k)
                                    : _mm512_setzero_ps();
                transpose16(t);
                for (int j = 0; j < kk; j++) _mm512_mask_storeu_ps(o + (size_t)(k + j) * r + g, wm, t[j]);
            }
        }
    }
}

/* Zen 4 (1 MiB L2 per core, 32 MiB L3): A block 144 x 768 (432 KiB) stays in L2, B panel 768 x 3072
 * (9 MiB) in L3; KC = 768 covers GPT-2's C in one pass (measured: 384 -> 768 gave +3-5%). */
static const gptc_gemm_isa k_isa = {
    .mr = MR, .nr = NR, .mc = 144, .kc = 768, .nc = 3072, .kernel = kernel_avx512, .pack = pack_avx512,
};

static void gemm_avx512(int transA, int transB, int M, int N, int K, const float *A, int lda, const float *B,
                        int ldb, float beta, const float *bias, float *C, int ldc) {
    gptc_gemm_blocked(&k_isa, transA, transB, M, N, K, A, lda, B, ldb, beta, bias, C, ldc);
}

void gptc_avx512_overlay_gemm(gptc_kernels *k) {
    k->gemm = gemm_avx512;
    k->gemm_isa = &k_isa;
}

void gptc_avx512_gemm_pack(int trans, const float *X, int ldx, int i0, int k0, int m, int kc, int r, float *out) {
    pack_avx512(trans, X, ldx, i0, k0, m, kc, r, out);
}
