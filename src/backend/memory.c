/* memory.c — the CPU backend: its memory (the counting allocator of core/memory.c, memset, memcpy)
 * and the binding of a backend's precision and kernels. */
#include "backend/backend.h"
#include "core/core.h"

#include <string.h>

static void *cpu_alloc(size_t bytes, const char *what) { return gptc_alloc(bytes, what); }
static void cpu_free(void *p) { gptc_free(p); }
static void cpu_memset(void *p, int byte, size_t bytes) { memset(p, byte, bytes); }
static void cpu_copy(void *dst, const void *src, size_t bytes) { memcpy(dst, src, bytes); }
static void cpu_synchronize(void) {}

static const gptc_backend_memory g_cpu = {
    .name = "cpu",
    .alloc = cpu_alloc,
    .free = cpu_free,
    .memset = cpu_memset,
    .copy = cpu_copy,
    .copy_h2d = cpu_copy,
    .copy_d2h = cpu_copy,
    .synchronize = cpu_synchronize,
    .block_bytes = gptc_alloc_block_bytes,
};

const gptc_backend_memory *gptc_backend_cpu_memory(void) { return &g_cpu; }

void gptc_backend_bind(gptc_backend *be, const gptc_backend_memory *mem, const gptc_kernels *k, gptc_precision p,
                       bool fuse) {
    bool bf16 = p == GPTC_PRECISION_BF16;
    *be = (gptc_backend){
        .mem = mem,
        .k = k,
        .bf16 = bf16,
        .fuse = fuse,
        .gemm = bf16 ? k->gemm_bf16 : k->gemm,
        .flash_fwd = bf16 ? k->flash_fwd_bf16 : k->flash_fwd,
        .flash_bwd = bf16 ? k->flash_bwd_bf16 : k->flash_bwd,
        .gemm_slot = bf16 ? GPTC_KERNEL_SLOT(gemm_bf16) : GPTC_KERNEL_SLOT(gemm),
        .flash_fwd_slot = bf16 ? GPTC_KERNEL_SLOT(flash_fwd_bf16) : GPTC_KERNEL_SLOT(flash_fwd),
        .flash_bwd_slot = bf16 ? GPTC_KERNEL_SLOT(flash_bwd_bf16) : GPTC_KERNEL_SLOT(flash_bwd),
    };
}

const gptc_backend *gptc_backend_default(void) {
    static gptc_backend be;
    static bool ready;
    if (!ready) { /* start-up, like gptc_kernels_get */
        gptc_backend_bind(&be, &g_cpu, gptc_kernels_get(), GPTC_PRECISION_FP32, true);
        ready = true;
    }
    return &be;
}
