/* avx512.h — private to src/kernels/x86_avx512: the registration function of each operator group. */
#ifndef GPTC_KERNELS_AVX512_H
#define GPTC_KERNELS_AVX512_H

#include "kernels/kernels.h"

void gptc_avx512_overlay_gemm(gptc_kernels *k);        /* gemm_avx512.c */
void gptc_avx512_overlay_elementwise(gptc_kernels *k); /* elementwise_avx512.c */
void gptc_avx512_overlay_attention(gptc_kernels *k);   /* attention_avx512.c */

#endif
