/* elementwise_avx512.c — AVX-512 elementwise kernels: GELU (tanh, erf, sigmoid forms), residual, bias,
 * layernorm, cross-entropy, encoder, AdamW and the fused residual + layernorm and cross-entropy ops
 * (the kernel text is shared with elementwise_avx2.c). */
#include "kernels/gelu.h"
#include "kernels/x86_avx512/avx512.h"

#include <immintrin.h>
#include <math.h>
#include <omp.h>
#include <stddef.h>
#include <stdint.h>

#define ISA(name) gptc_avx512_##name

#include "kernels/x86_avx512/vec_avx512.h"

/* bf16 storage: each lane rounded to nearest even (gptc_f32_to_bf16's rule: NaN kept quiet, no
 * flushing), the 16-bit results stored (all 16, or the lanes of m). bf16_rne does it with integer
 * operations on any AVX-512 CPU. Where the CPU has AVX512_BF16, bf16_of uses vcvtneps2bf16, which rounds
 * the same way and quiets NaN the same way but reads a subnormal input as zero: a vector holding one goes
 * to bf16_rne instead. In the bf16 step at GPT-2 T=64, GELU with its bf16 output took 0.146 instead of
 * 0.18 ms a call (docs/performance.md, eighteenth session). */
static inline __m512i bf16_rne(vf x) {
    const __m512i u = _mm512_castps_si512(x), hi = _mm512_srli_epi32(u, 16);
    const __m512i lsb = _mm512_and_si512(hi, _mm512_set1_epi32(1));
    const __m512i r = _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0x7fff)), lsb), 16);
    return _mm512_mask_mov_epi32(r, _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), _mm512_or_si512(hi, _mm512_set1_epi32(0x40)));
}
static bool cvt_bf16; /* vcvtneps2bf16 may be used (gptc_avx512_bf16_convert) */
enum { FPCLASS_SUBNORMAL = 0x20 }; /* vfpclassps's category bit for a denormal input */
static inline __m256i bf16_of(vf x) {
    if (cvt_bf16 && __builtin_expect(!_mm512_fpclass_ps_mask(x, FPCLASS_SUBNORMAL), 1))
        return (__m256i)_mm512_cvtneps_pbh(x);
    return _mm512_cvtepi32_epi16(bf16_rne(x));
}
static inline void vst16(uint16_t *p, vf x) { _mm256_storeu_si256((__m256i *)p, bf16_of(x)); }
static inline void vst16m(uint16_t *p, vm m, vf x) { _mm256_mask_storeu_epi16(p, m, bf16_of(x)); }

bool gptc_avx512_bf16_convert(bool on) {
    bool was = cvt_bf16;
    cvt_bf16 = on;
    return was;
}

#include "kernels/elementwise_simd.inc"
