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

#define MV_ROWS 4
#define MV_VECS 4

#include "kernels/matvec_simd.inc"
