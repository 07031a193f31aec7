/* elementwise_avx512.c — AVX-512 elementwise kernels: GELU (tanh, erf, sigmoid forms), residual, bias,
 * layernorm, cross-entropy, encoder, AdamW and the fused residual + layernorm and cross-entropy ops
 * (the kernel text is shared with elementwise_avx2.c). */
#include "kernels/gelu.h"
#include "kernels/x86_avx512/avx512.h"

#include <immintrin.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>

#define ISA(name) gptc_avx512_##name

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
static inline vf vsel(vm m, vf a, vf b) { return _mm512_mask_blend_ps(m, a, b); } /* b where m */
static inline vf vzmask(vm m, vf a) { return _mm512_maskz_mov_ps(m, a); }          /* 0 outside m */
/* b where x has its sign bit set, else a */
static inline vf vsel_neg(vf x, vf a, vf b) { return _mm512_mask_blend_ps(_mm512_movepi32_mask(_mm512_castps_si512(x)), a, b); }
static inline float vhsum(vf a) { return _mm512_reduce_add_ps(a); }
static inline float vhmax(vf a) { return _mm512_reduce_max_ps(a); }

/* bf16 storage: each lane rounded to nearest even (gptc_f32_to_bf16's rule: NaN kept quiet, no
 * flushing, unlike vcvtneps2bf16), the 16-bit results stored (all 16, or the lanes of m) */
static inline __m512i bf16_rne(vf x) {
    const __m512i u = _mm512_castps_si512(x), hi = _mm512_srli_epi32(u, 16);
    const __m512i lsb = _mm512_and_si512(hi, _mm512_set1_epi32(1));
    const __m512i r = _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0x7fff)), lsb), 16);
    return _mm512_mask_mov_epi32(r, _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), _mm512_or_si512(hi, _mm512_set1_epi32(0x40)));
}
static inline void vst16(uint16_t *p, vf x) { _mm256_storeu_si256((__m256i *)p, _mm512_cvtepi32_epi16(bf16_rne(x))); }
static inline void vst16m(uint16_t *p, vm m, vf x) { _mm512_mask_cvtepi32_storeu_epi16(p, m, bf16_rne(x)); }

#include "kernels/elementwise_simd.inc"
