/* avx2.h — private to src/kernels/x86_avx2: the registration function of each operator group. */
#ifndef GPTC_KERNELS_AVX2_H
#define GPTC_KERNELS_AVX2_H

#include "kernels/kernels.h"

void gptc_avx2_overlay_gemm(gptc_kernels *k);        /* gemm_avx2.c */
void gptc_avx2_overlay_elementwise(gptc_kernels *k); /* elementwise_avx2.c */
void gptc_avx2_overlay_attention(gptc_kernels *k);   /* attention_avx2.c */
void gptc_avx2_overlay_memops(gptc_kernels *k);      /* memops_avx2.c */
void gptc_avx2_overlay_matvec(gptc_kernels *k);      /* matvec_avx2.c */
/* memops_avx2.c: the zero entry's non-temporal path, which it takes for calls of one core's L2 cache
 * or more (any x, n), for tests */
void gptc_avx2_zero_stream(float *x, size_t n);

/* peak_avx2.c: runs iters x 12 FMAs of 8 lanes (iters*12*8*2 flops) in registers. */
float gptc_avx2_fma_probe(long iters);

#endif
