/* memops_avx2.c — AVX2 streaming kernels: zeroing (non-temporal stores for buffers larger than
 * one core's L2 cache), the gradient's sum of squares (the reference's bits) and the head
 * reshapes (the kernel text is shared with memops_avx512.c). */
#include "kernels/x86_avx2/avx2.h"

#include <immintrin.h>
#include <stdint.h>

#define ISA(name) gptc_avx2_##name

#include "kernels/x86_avx2/vec_avx2.h"

#include "kernels/memops_simd.inc"
