/* elementwise_avx2.c — AVX2+FMA elementwise kernels: GELU (tanh, erf, sigmoid forms), residual, bias,
 * layernorm, cross-entropy, encoder, AdamW and the fused residual + layernorm and cross-entropy ops
 * (the kernel text is shared with elementwise_avx512.c). */
#include "kernels/gelu.h"
#include "kernels/x86_avx2/avx2.h"

#include <immintrin.h>
#include <math.h>
#include <omp.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define ISA(name) gptc_avx2_##name

#include "kernels/x86_avx2/vec_avx2.h"

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
