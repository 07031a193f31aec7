/* elementwise_avx512.c — AVX-512 elementwise kernels: GELU (tanh, erf, sigmoid forms), residual, bias,
 * layernorm, cross-entropy, encoder, AdamW and the fused residual + layernorm and cross-entropy ops
 * (the kernel text is shared with elementwise_avx2.c). */
#include "kernels/gelu.h"
#include "kernels/x86_avx512/avx512.h"

#include <immintrin.h>
#include <math.h>
#include <omp.h>
#include <stddef.h>

#define ISA(name) gptc_avx512_##name

#include "kernels/x86_avx512/vec_avx512.h"

#include "kernels/elementwise_simd.inc"
