/* elementwise_avx2.c — AVX2+FMA elementwise kernels: GELU (tanh, erf, sigmoid forms), residual, bias,
 * layernorm, cross-entropy, encoder, AdamW and the fused residual + layernorm and cross-entropy ops
 * (the kernel text is shared with elementwise_avx512.c). */
#include "kernels/gelu.h"
#include "kernels/x86_avx2/avx2.h"

#include <immintrin.h>
#include <math.h>
#include <omp.h>
#include <stddef.h>

#define ISA(name) gptc_avx2_##name

#include "kernels/x86_avx2/vec_avx2.h"

#include "kernels/elementwise_simd.inc"
