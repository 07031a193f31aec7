/* elementwise_avx2.c — AVX2+FMA elementwise kernels: GELU (tanh, erf, sigmoid forms), residual, bias,
 * layernorm, cross-entropy, encoder, AdamW and the fused residual + layernorm and cross-entropy ops
 * (the kernel text is shared with elementwise_avx512.c). */
#include "kernels/gelu.h"
#include "kernels/x86_avx2/avx2.h"

#include <immintrin.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define ISA(name) gptc_avx2_##name

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

/* bf16 storage: each lane rounded to nearest even (gptc_f32_to_bf16's rule: NaN kept quiet), the 8
 * 16-bit results packed (unsigned saturation leaves values <= 0xffff as they are) */
static inline __m128i bf16_rne(vf x) {
    const __m256i u = _mm256_castps_si256(x), hi = _mm256_srli_epi32(u, 16);
    const __m256i lsb = _mm256_and_si256(hi, _mm256_set1_epi32(1));
    __m256i r = _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(u, _mm256_set1_epi32(0x7fff)), lsb), 16);
    r = _mm256_blendv_epi8(r, _mm256_or_si256(hi, _mm256_set1_epi32(0x40)),
                           _mm256_castps_si256(_mm256_cmp_ps(x, x, _CMP_UNORD_Q)));
    return _mm_packus_epi32(_mm256_castsi256_si128(r), _mm256_extracti128_si256(r, 1));
}
static inline void vst16(uint16_t *p, vf x) { _mm_storeu_si128((__m128i *)p, bf16_rne(x)); }
/* the lanes of m, a tail mask (lanes 0..n-1) */
static inline void vst16m(uint16_t *p, vm m, vf x) {
    uint16_t t[W];
    _mm_storeu_si128((__m128i *)t, bf16_rne(x));
    memcpy(p, t, sizeof(uint16_t) * (size_t)__builtin_popcount((unsigned)_mm256_movemask_ps(_mm256_castsi256_ps(m))));
}

#include "kernels/elementwise_simd.inc"
