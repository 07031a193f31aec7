/* matvec_avx512.c — AVX-512 small-M product of decoding (kernels.h matvec; the kernel text is shared
 * with matvec_avx2.c): 4 rows x 4 vectors of 16 columns per register tile, W widened from bf16 with a
 * zero-extend and a shift. */
#include "kernels/x86_avx512/avx512.h"

#include <immintrin.h>
#include <omp.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define ISA(name) gptc_avx512_##name

#include "kernels/x86_avx512/vec_avx512.h"

/* 16 bf16 at p widened to floats (exact: the bf16 pattern is the float's top half) */
static inline vf vld16(const void *p) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)p)), 16));
}
/* the first n <= 16 of them, the other lanes 0 */
static inline vf vldm16(const void *p, size_t n) {
    __m256i h = _mm256_maskz_loadu_epi16((__mmask16)((1u << n) - 1), p);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

#define MV_ROWS 4
#define MV_VECS 4

#include "kernels/matvec_simd.inc"
