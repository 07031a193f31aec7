/* elementwise_avx512.c — avx512 elementwise kernels (none yet: the reference entries stay). */
#include "kernels/x86_avx512/avx512.h"

void gptc_avx512_overlay_elementwise(gptc_kernels *k) { (void)k; }
