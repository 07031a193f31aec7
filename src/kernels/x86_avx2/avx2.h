/* avx2.h — private to src/kernels/x86_avx2: the registration function of each operator group. */
#ifndef GPTC_KERNELS_AVX2_H
#define GPTC_KERNELS_AVX2_H

#include "kernels/kernels.h"

void gptc_avx2_overlay_gemm(gptc_kernels *k);        /* gemm_avx2.c */
void gptc_avx2_overlay_elementwise(gptc_kernels *k); /* elementwise_avx2.c */
void gptc_avx2_overlay_attention(gptc_kernels *k);   /* attention_avx2.c */

#endif
