/* avx512.h — private to src/kernels/x86_avx512: the registration function of each operator group. */
#ifndef GPTC_KERNELS_AVX512_H
#define GPTC_KERNELS_AVX512_H

#include "kernels/kernels.h"

void gptc_avx512_overlay_gemm(gptc_kernels *k);        /* gemm_avx512.c */
/* gemm_avx512.c: its packer (the gptc_gemm_pack contract of gemm/gemm_driver.h), for tests */
void gptc_avx512_gemm_pack(int trans, const float *X, int ldx, int i0, int k0, int m, int kc, int r, float *out);
void gptc_avx512_overlay_elementwise(gptc_kernels *k); /* elementwise_avx512.c */
void gptc_avx512_overlay_attention(gptc_kernels *k);   /* attention_avx512.c */

/* peak_avx512.c: runs iters x 12 FMAs of 16 lanes (iters*12*16*2 flops) in registers. */
float gptc_avx512_fma_probe(long iters);

#endif
