/* matvec_avx2.c — AVX2 small-M product of decoding (kernels.h matvec; the kernel text is shared with
 * matvec_avx512.c): 4 rows x 2 vectors of 8 columns per register tile (16 ymm registers), W widened from
 * bf16 with a zero-extend and a shift. */
#include "kernels/x86_avx2/avx2.h"

#include <immintrin.h>
#include <omp.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define ISA(name) gptc_avx2_##name

#include "kernels/x86_avx2/vec_avx2.h"

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

#define MV_ROWS 4
#define MV_VECS 2

#include "kernels/matvec_simd.inc"
