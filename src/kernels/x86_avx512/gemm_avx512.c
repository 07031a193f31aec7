/* gemm_avx512.c — avx512 gemm kernels (none yet: the reference entries stay). */
#include "kernels/x86_avx512/avx512.h"

void gptc_avx512_overlay_gemm(gptc_kernels *k) { (void)k; }
