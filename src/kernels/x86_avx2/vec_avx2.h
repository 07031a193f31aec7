/* vec_avx2.h — private to src/kernels/x86_avx2: the 8-lane (__m256) vector helpers (vf, vld, vst, masked
 * tails, ...) over which the shared kernel texts (kernels/elementwise_simd.inc, kernels/memops_simd.inc)
 * are written. Included only by files compiled with this ISA's flags. */
#ifndef GPTC_KERNELS_VEC_AVX2_H
#define GPTC_KERNELS_VEC_AVX2_H

#include <immintrin.h>
#include <stddef.h>
#include <stdint.h>

/* ---- 8-lane vector helpers ---- */
typedef __m256 vf;
typedef __m256i vm;
#define W 8
static inline vm tailmask(size_t n) { /* lanes 0..n-1, n <= 8 */
    return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}
static inline vf vld(const float *p) { return _mm256_loadu_ps(p); }
static inline vf vldm(const float *p, vm m) { return _mm256_maskload_ps(p, m); } /* others 0 */
static inline void vst(float *p, vf x) { _mm256_storeu_ps(p, x); }
static inline void vstm(float *p, vm m, vf x) { _mm256_maskstore_ps(p, m, x); }
static inline vf vset(float a) { return _mm256_set1_ps(a); }
static inline vf vadd(vf a, vf b) { return _mm256_add_ps(a, b); }
static inline vf vsub(vf a, vf b) { return _mm256_sub_ps(a, b); }
static inline vf vmul(vf a, vf b) { return _mm256_mul_ps(a, b); }
static inline vf vdiv(vf a, vf b) { return _mm256_div_ps(a, b); }
static inline vf vsqrt(vf a) { return _mm256_sqrt_ps(a); }
static inline vf vmax(vf a, vf b) { return _mm256_max_ps(a, b); }
static inline vf vmin(vf a, vf b) { return _mm256_min_ps(a, b); }
static inline vf vabs(vf a) { return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), a); }
static inline vf vfma(vf a, vf b, vf c) { return _mm256_fmadd_ps(a, b, c); }   /* a b + c */
static inline vf vfnma(vf a, vf b, vf c) { return _mm256_fnmadd_ps(a, b, c); } /* c - a b */
static inline vf vround(vf a) { return _mm256_round_ps(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
/* 2^k for integral k in [-127, 127] (k = -127 gives 0) */
static inline vf vpow2i(vf k) {
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(k), _mm256_set1_epi32(127)), 23));
}
/* masks: not, and, any lane set, lanes where a > b (ordered) */
static inline vm vmnot(vm m) { return _mm256_xor_si256(m, _mm256_set1_epi32(-1)); }
static inline vm vmand(vm a, vm b) { return _mm256_and_si256(a, b); }
static inline int vmany(vm m) { return !_mm256_testz_si256(m, m); }
static inline vm vgt(vf a, vf b) { return _mm256_castps_si256(_mm256_cmp_ps(a, b, _CMP_GT_OQ)); }
static inline vf vsel(vm m, vf a, vf b) { return _mm256_blendv_ps(a, b, _mm256_castsi256_ps(m)); } /* b where m */
static inline vf vzmask(vm m, vf a) { return _mm256_and_ps(a, _mm256_castsi256_ps(m)); }          /* 0 outside m */
/* b where x has its sign bit set, else a */
static inline vf vsel_neg(vf x, vf a, vf b) { return _mm256_blendv_ps(a, b, x); }
static inline float vhsum(vf a) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    return _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));
}
static inline float vhmax(vf a) {
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    return _mm_cvtss_f32(_mm_max_ss(s, _mm_movehdup_ps(s)));
}
/* lane j = the sum of v[j]'s lanes, for the W vectors v[0..W): a tree of shuffles shared by all W (each
 * lane summed as ((0+2)+(1+3)) within its 128-bit half, then the halves added), so every vector's sum is
 * the same whichever lane it lands in */
static inline vf vhsums(const vf v[W]) {
    vf a[4], b[2];
    for (int i = 0; i < 4; i++)
        a[i] = _mm256_add_ps(_mm256_unpacklo_ps(v[2 * i], v[2 * i + 1]), _mm256_unpackhi_ps(v[2 * i], v[2 * i + 1]));
    for (int i = 0; i < 2; i++) /* per half: the half's sums of v[4i..4i+3] */
        b[i] = _mm256_add_ps(_mm256_shuffle_ps(a[2 * i], a[2 * i + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                             _mm256_shuffle_ps(a[2 * i], a[2 * i + 1], _MM_SHUFFLE(3, 2, 3, 2)));
    return _mm256_add_ps(_mm256_permute2f128_ps(b[0], b[1], 0x20), _mm256_permute2f128_ps(b[0], b[1], 0x31));
}
/* 8 bf16 at p widened to floats (exact: the bf16 pattern is the float's top half) */
static inline vf vld16(const void *p) {
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p)), 16));
}
/* the first n <= 8 of them, the other lanes 0 (AVX2 has no 16-bit masked load: through a copy) */
static inline vf vldm16(const void *p, size_t n) {
    uint16_t t[8] = {0};
    for (size_t i = 0; i < n; i++) t[i] = ((const uint16_t *)p)[i];
    return vld16(t);
}
/* 8 words at p, each a pair of bf16 values, widened: *lo the low halves, *hi the high ones */
static inline void vld16pairs(const void *p, vf *lo, vf *hi) {
    const __m256i w = _mm256_loadu_si256((const __m256i *)p);
    *lo = _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
    *hi = _mm256_castsi256_ps(_mm256_and_si256(w, _mm256_set1_epi32((int)0xffff0000u)));
}

/* even/odd split of the 2W values a (first W), b (next W): *even their elements 0, 2, .., 2W-2, *odd
 * 1, 3, .., 2W-1 (the order vld16pairs gives a run of 2W bf16 values) */
static inline void vunzip(vf a, vf b, vf *even, vf *odd) {
    const __m256 e = _mm256_shuffle_ps(a, b, _MM_SHUFFLE(2, 0, 2, 0)); /* a0 a2 b0 b2 | a4 a6 b4 b6 */
    const __m256 o = _mm256_shuffle_ps(a, b, _MM_SHUFFLE(3, 1, 3, 1));
    *even = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(e), _MM_SHUFFLE(3, 1, 2, 0)));
    *odd = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(o), _MM_SHUFFLE(3, 1, 2, 0)));
}
/* vunzip's inverse: *a = (even0, odd0, even1, odd1, ..), *b the same from lane W/2 on */
static inline void vzip(vf even, vf odd, vf *a, vf *b) {
    const __m256 l = _mm256_unpacklo_ps(even, odd), h = _mm256_unpackhi_ps(even, odd);
    *a = _mm256_permute2f128_ps(l, h, 0x20);
    *b = _mm256_permute2f128_ps(l, h, 0x31);
}

/* ---- streaming stores and sums of squares (kernels/memops_simd.inc) ---- */
#define VALIGN 32 /* bytes: vstream's alignment */
/* a non-temporal store of a whole vector to p (VALIGN-aligned): the line is written without being read */
static inline void vstream(float *p, vf x) { _mm256_stream_ps(p, x); }
/* 8 double lanes in two halves: lane j of a block of 8 floats accumulates float j's square */
typedef struct {
    __m256d lo, hi;
} vd8;
static inline vd8 vd8_zero(void) { return (vd8){_mm256_setzero_pd(), _mm256_setzero_pd()}; }
/* acc + x^2 over the 8 floats f: the square of a float is exact in double, the add rounds once */
static inline vd8 vd8_add_sq_v(vd8 acc, __m256 f) {
    __m256d lo = _mm256_cvtps_pd(_mm256_castps256_ps128(f)), hi = _mm256_cvtps_pd(_mm256_extractf128_ps(f, 1));
    return (vd8){_mm256_add_pd(acc.lo, _mm256_mul_pd(lo, lo)), _mm256_add_pd(acc.hi, _mm256_mul_pd(hi, hi))};
}
static inline vd8 vd8_add_sq(vd8 acc, const float *p) { return vd8_add_sq_v(acc, _mm256_loadu_ps(p)); }
/* the same over the first n < 8 floats at p; the other lanes add +0, which leaves them as they are */
static inline vd8 vd8_add_sq_n(vd8 acc, const float *p, size_t n) { return vd8_add_sq_v(acc, vldm(p, tailmask(n))); }
static inline void vd8_store(double *out, vd8 acc) {
    _mm256_storeu_pd(out, acc.lo);
    _mm256_storeu_pd(out + 4, acc.hi);
}

#endif
