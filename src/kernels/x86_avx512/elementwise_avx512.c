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
