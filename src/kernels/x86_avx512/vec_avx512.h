/* vec_avx512.h — private to src/kernels/x86_avx512: the 16-lane (__m512) vector helpers (vf, vld, vst, masked
 * tails, ...) over which the shared kernel texts (kernels/elementwise_simd.inc, kernels/memops_simd.inc)
 * are written. Included only by files compiled with this ISA's flags. */
#ifndef GPTC_KERNELS_VEC_AVX512_H
#define GPTC_KERNELS_VEC_AVX512_H

#include <immintrin.h>
#include <stddef.h>
#include <stdint.h>

/* ---- 16-lane vector helpers ---- */
typedef __m512 vf;
typedef __mmask16 vm;
#define W 16
static inline vm tailmask(size_t n) { return (vm)((1u << n) - 1); } /* lanes 0..n-1, n <= 16 */
static inline vf vld(const float *p) { return _mm512_loadu_ps(p); }
static inline vf vldm(const float *p, vm m) { return _mm512_maskz_loadu_ps(m, p); } /* others 0 */
static inline void vst(float *p, vf x) { _mm512_storeu_ps(p, x); }
static inline void vstm(float *p, vm m, vf x) { _mm512_mask_storeu_ps(p, m, x); }
static inline vf vset(float a) { return _mm512_set1_ps(a); }
static inline vf vadd(vf a, vf b) { return _mm512_add_ps(a, b); }
static inline vf vsub(vf a, vf b) { return _mm512_sub_ps(a, b); }
static inline vf vmul(vf a, vf b) { return _mm512_mul_ps(a, b); }
static inline vf vdiv(vf a, vf b) { return _mm512_div_ps(a, b); }
static inline vf vsqrt(vf a) { return _mm512_sqrt_ps(a); }
static inline vf vmax(vf a, vf b) { return _mm512_max_ps(a, b); }
static inline vf vmin(vf a, vf b) { return _mm512_min_ps(a, b); }
static inline vf vabs(vf a) { return _mm512_abs_ps(a); }
static inline vf vfma(vf a, vf b, vf c) { return _mm512_fmadd_ps(a, b, c); }   /* a b + c */
static inline vf vfnma(vf a, vf b, vf c) { return _mm512_fnmadd_ps(a, b, c); } /* c - a b */
static inline vf vround(vf a) { return _mm512_roundscale_ps(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
/* 2^k for integral k in [-127, 127] (k = -127 gives 0) */
static inline vf vpow2i(vf k) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(k), _mm512_set1_epi32(127)), 23));
}
/* masks: not, and, any lane set, lanes where a > b (ordered) */
static inline vm vmnot(vm m) { return (vm)~m; }
static inline vm vmand(vm a, vm b) { return (vm)(a & b); }
static inline int vmany(vm m) { return m != 0; }
static inline vm vgt(vf a, vf b) { return _mm512_cmp_ps_mask(a, b, _CMP_GT_OQ); }
static inline vf vsel(vm m, vf a, vf b) { return _mm512_mask_blend_ps(m, a, b); } /* b where m */
static inline vf vzmask(vm m, vf a) { return _mm512_maskz_mov_ps(m, a); }          /* 0 outside m */
/* b where x has its sign bit set, else a */
static inline vf vsel_neg(vf x, vf a, vf b) { return _mm512_mask_blend_ps(_mm512_movepi32_mask(_mm512_castps_si512(x)), a, b); }
static inline float vhsum(vf a) { return _mm512_reduce_add_ps(a); }
static inline float vhmax(vf a) { return _mm512_reduce_max_ps(a); }
/* lane j = the sum of v[j]'s lanes, for the W vectors v[0..W): a tree of shuffles shared by all W (each
 * lane summed as ((0+2)+(1+3)) within its 128-bit quarter, then the quarters as (0+1)+(2+3)), so every
 * vector's sum is the same whichever lane it lands in */
static inline vf vhsums(const vf v[W]) {
    vf a[8], b[4];
    for (int i = 0; i < 8; i++)
        a[i] = _mm512_add_ps(_mm512_unpacklo_ps(v[2 * i], v[2 * i + 1]), _mm512_unpackhi_ps(v[2 * i], v[2 * i + 1]));
    for (int i = 0; i < 4; i++) /* per quarter: the quarter's sums of v[4i..4i+3] */
        b[i] = _mm512_add_ps(_mm512_shuffle_ps(a[2 * i], a[2 * i + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                             _mm512_shuffle_ps(a[2 * i], a[2 * i + 1], _MM_SHUFFLE(3, 2, 3, 2)));
    const vf d01 = _mm512_add_ps(_mm512_shuffle_f32x4(b[0], b[1], _MM_SHUFFLE(2, 0, 2, 0)),
                                 _mm512_shuffle_f32x4(b[0], b[1], _MM_SHUFFLE(3, 1, 3, 1)));
    const vf d23 = _mm512_add_ps(_mm512_shuffle_f32x4(b[2], b[3], _MM_SHUFFLE(2, 0, 2, 0)),
                                 _mm512_shuffle_f32x4(b[2], b[3], _MM_SHUFFLE(3, 1, 3, 1)));
    return _mm512_add_ps(_mm512_shuffle_f32x4(d01, d23, _MM_SHUFFLE(2, 0, 2, 0)),
                         _mm512_shuffle_f32x4(d01, d23, _MM_SHUFFLE(3, 1, 3, 1)));
}
/* 16 bf16 at p widened to floats (exact: the bf16 pattern is the float's top half) */
static inline vf vld16(const void *p) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)p)), 16));
}
/* the first n <= 16 of them, the other lanes 0 */
static inline vf vldm16(const void *p, size_t n) {
    __m256i h = _mm256_maskz_loadu_epi16((__mmask16)((1u << n) - 1), p);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}
/* 16 words at p, each a pair of bf16 values, widened: *lo the low halves, *hi the high ones */
static inline void vld16pairs(const void *p, vf *lo, vf *hi) {
    const __m512i w = _mm512_loadu_si512(p);
    *lo = _mm512_castsi512_ps(_mm512_slli_epi32(w, 16));
    *hi = _mm512_castsi512_ps(_mm512_and_si512(w, _mm512_set1_epi32((int)0xffff0000u)));
}

/* even/odd split of the 2W values a (first W), b (next W): *even their elements 0, 2, .., 2W-2, *odd
 * 1, 3, .., 2W-1 (the order vld16pairs gives a run of 2W bf16 values) */
static inline void vunzip(vf a, vf b, vf *even, vf *odd) {
    const __m512i ie = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
    const __m512i io = _mm512_set_epi32(31, 29, 27, 25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1);
    *even = _mm512_permutex2var_ps(a, ie, b);
    *odd = _mm512_permutex2var_ps(a, io, b);
}
/* vunzip's inverse: *a = (even0, odd0, even1, odd1, ..), *b the same from lane W/2 on */
static inline void vzip(vf even, vf odd, vf *a, vf *b) {
    const __m512i ia = _mm512_set_epi32(23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
    const __m512i ib = _mm512_set_epi32(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8);
    *a = _mm512_permutex2var_ps(even, ia, odd);
    *b = _mm512_permutex2var_ps(even, ib, odd);
}

/* ---- streaming stores and sums of squares (kernels/memops_simd.inc) ---- */
#define VALIGN 64 /* bytes: vstream's alignment */
/* a non-temporal store of a whole vector to p (VALIGN-aligned): the line is written without being read */
static inline void vstream(float *p, vf x) { _mm512_stream_ps(p, x); }
/* 8 double lanes: lane j of a block of 8 floats accumulates float j's square */
typedef __m512d vd8;
static inline vd8 vd8_zero(void) { return _mm512_setzero_pd(); }
/* acc + x^2 over the 8 floats at p: the square of a float is exact in double, the add rounds once */
static inline vd8 vd8_add_sq(vd8 acc, const float *p) {
    __m512d x = _mm512_cvtps_pd(_mm256_loadu_ps(p));
    return _mm512_add_pd(acc, _mm512_mul_pd(x, x));
}
/* the same over the first n < 8 floats at p; the other lanes add +0, which leaves them as they are */
static inline vd8 vd8_add_sq_n(vd8 acc, const float *p, size_t n) {
    __m512d x = _mm512_cvtps_pd(_mm256_maskz_loadu_ps((__mmask8)((1u << n) - 1), p));
    return _mm512_add_pd(acc, _mm512_mul_pd(x, x));
}
static inline void vd8_store(double *out, vd8 acc) { _mm512_storeu_pd(out, acc); }

#endif
