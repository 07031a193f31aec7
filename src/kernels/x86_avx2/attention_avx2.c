/* attention_avx2.c — avx2 attention kernels (none yet: the reference entries stay). */
#include "kernels/x86_avx2/avx2.h"

void gptc_avx2_overlay_attention(gptc_kernels *k) { (void)k; }
