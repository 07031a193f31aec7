/* memops_avx512.c — AVX-512 streaming kernels: zeroing (non-temporal stores for buffers larger than
 * one core's L2 cache), the gradient's sum of squares (the reference's bits) and the head
 * reshapes (the kernel text is shared with memops_avx2.c). */
#include "kernels/x86_avx512/avx512.h"

#include <immintrin.h>
#include <stdint.h>

#define ISA(name) gptc_avx512_##name

#include "kernels/x86_avx512/vec_avx512.h"

#include "kernels/memops_simd.inc"
