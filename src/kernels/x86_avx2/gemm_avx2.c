/* gemm_avx2.c — avx2 gemm kernels (none yet: the reference entries stay). */
#include "kernels/x86_avx2/avx2.h"

void gptc_avx2_overlay_gemm(gptc_kernels *k) { (void)k; }
