/* overlay_avx2.c — the avx2 entries of the kernel table (compiled with this ISA's flags; called
 * only when CPUID and XCR0 allow). Each group of operators registers itself from its own file. */
#include "kernels/x86_avx2/avx2.h"

void gptc_kernels_overlay_avx2(gptc_kernels *k) {
    gptc_avx2_overlay_gemm(k);
    gptc_avx2_overlay_elementwise(k);
    gptc_avx2_overlay_attention(k);
    gptc_avx2_overlay_memops(k);
    gptc_avx2_overlay_matvec(k);
}
