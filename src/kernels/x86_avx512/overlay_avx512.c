/* overlay_avx512.c — the avx512 entries of the kernel table (compiled with this ISA's flags; called
 * only when CPUID and XCR0 allow). Each group of operators registers itself from its own file. */
#include "core/core.h"
#include "kernels/x86_avx512/avx512.h"

void gptc_kernels_overlay_avx512(gptc_kernels *k) {
    gptc_avx512_overlay_gemm(k);
    gptc_avx512_overlay_elementwise(k);
    gptc_avx512_bf16_convert(gptc_cpu()->avx512bf16);
    gptc_avx512_overlay_attention(k);
    gptc_avx512_overlay_memops(k);
    gptc_avx512_overlay_matvec(k);
}
