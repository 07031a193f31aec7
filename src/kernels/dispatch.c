/* dispatch.c — picks the kernel table once at start-up. Only the reference variant exists at
 * this stage; GPTC_KERNELS names a variant, and asking for one that is not built (or that this CPU
 * cannot run) is reported and falls back to the reference. */
#include "kernels/kernels.h"
#include "core/core.h"

#include <stdlib.h>
#include <string.h>

static const gptc_kernels *g_table;

const gptc_kernels *gptc_kernels_get(void) {
    if (g_table) return g_table;
    const char *want = getenv("GPTC_KERNELS");
    if (want && *want && strcmp(want, "ref") != 0) {
        if (strcmp(want, "avx2") == 0 || strcmp(want, "avx512") == 0)
            gptc_warn("GPTC_KERNELS=%s: no %s kernels are built yet; using the reference kernels", want, want);
        else
            gptc_warn("GPTC_KERNELS=%s: unknown variant (expected ref, avx2 or avx512); using the reference kernels", want);
    }
    g_table = gptc_kernels_ref();
    return g_table;
}
