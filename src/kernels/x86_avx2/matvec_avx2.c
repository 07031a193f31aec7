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

#define MV_ROWS 4
#define MV_VECS 2

#include "kernels/matvec_simd.inc"
