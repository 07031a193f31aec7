/* backend.h — the backend: the one object the model and the optimizer run on. It owns
 *   (a) memory: alloc / free / memset / copies host<->backend / synchronize (memory.c for the CPU,
 *       today's counting allocator gptc_alloc behind it, which `gptc plan` checks against);
 *   (b) the operator table (kernels/kernels.h gptc_kernels: every operator the training step, the
 *       decoder and the optimizer call, flash attention and GEMM included), chosen per level at
 *       start-up and overlaid by plugins (kernels/plugin.h);
 *   (c) the profiler hook: the profiled operator calls of backend/ops.h open a span per call with its
 *       FLOPs and bytes (the cost model lives there, not in the model).
 * The precision (fp32 or bf16 GEMM and flash attention) and the fused-or-not kernels are bound once,
 * by gptc_backend_bind, so a call site never chooses a kernel.
 *
 * A new backend (CUDA, ...) is a gptc_backend_memory with its own functions and a gptc_kernels whose
 * entries run on it (docs/extending.md, "add a backend"). */
#ifndef GPTC_BACKEND_H
#define GPTC_BACKEND_H

#include "gptc.h"
#include "kernels/attention.h"
#include "kernels/kernels.h"

#include <stdbool.h>
#include <stddef.h>

/* Memory of a backend. Pointers it returns are backend pointers: only the operator table's entries and
 * the functions below may touch what they point to (on the CPU backend they are host pointers too). */
typedef struct gptc_backend_memory {
    const char *name;                                          /* "cpu" */
    void *(*alloc)(size_t bytes, const char *what);            /* 64-byte aligned; NULL when out of memory
                                                                * (the error is set, naming `what`) */
    void (*free)(void *p);                                     /* NULL is a no-op */
    void (*memset)(void *p, int byte, size_t bytes);
    void (*copy)(void *dst, const void *src, size_t bytes);    /* backend -> backend, no overlap */
    void (*copy_h2d)(void *dst, const void *src, size_t bytes); /* host -> backend */
    void (*copy_d2h)(void *dst, const void *src, size_t bytes); /* backend -> host */
    void (*synchronize)(void);                                 /* waits for every operator issued so far */
    size_t (*block_bytes)(size_t bytes);                       /* what alloc(bytes) adds to the live count */
} gptc_backend_memory;

typedef struct gptc_backend {
    const gptc_backend_memory *mem;
    const gptc_kernels *k; /* the operator table (with a plugin's entries, when one was loaded) */
    /* bound by gptc_backend_bind: */
    bool bf16;             /* GEMM and flash attention in bf16 mixed precision (--dtype bf16) */
    bool fuse;             /* bias in the GEMM's epilogue and residual+LayerNorm fused (else separate kernels) */
    gptc_gemm_fn gemm;     /* k->gemm or k->gemm_bf16: every matrix product of the training step */
    gptc_flash_fwd_fn flash_fwd; /* k->flash_fwd or k->flash_fwd_bf16 */
    gptc_flash_bwd_fn flash_bwd; /* k->flash_bwd or k->flash_bwd_bf16 */
    size_t gemm_slot, flash_fwd_slot, flash_bwd_slot; /* their GPTC_KERNEL_SLOT, for the profiler's labels */
} gptc_backend;

/* The CPU backend's memory: gptc_alloc / gptc_free (core/memory.c, counted by gptc_alloc_stats),
 * memset and memcpy, nothing to synchronize. */
const gptc_backend_memory *gptc_backend_cpu_memory(void);

/* Binds be: memory mem, table k, the precision's GEMM and flash entries, fused or separate kernels. */
void gptc_backend_bind(gptc_backend *be, const gptc_backend_memory *mem, const gptc_kernels *k, gptc_precision p,
                       bool fuse);

/* The process's default backend: the CPU, the table gptc_kernels_get() chose (GPTC_KERNELS), fp32,
 * fused. For callers without a model (the gradient norm of optim/optim.h, the planner). */
const gptc_backend *gptc_backend_default(void);

#include "backend/ops.h"

#endif
