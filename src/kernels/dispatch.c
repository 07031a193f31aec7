/* dispatch.c — builds the kernel table once: the reference entries, overlaid with AVX2+FMA entries
 * when CPUID and XCR0 say the CPU and OS support them, then with AVX-512 entries; GPTC_KERNELS
 * caps the level. One binary runs on any x86-64: the ISA-specific code lives in files compiled
 * with their own flags and is only called after these checks. */
#include "kernels/kernels.h"
#include "core/core.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#define OP(name) {#name, offsetof(gptc_kernels, name)}
const gptc_kernel_op gptc_kernel_ops[] = {
    OP(encoder_fwd), OP(encoder_bwd), OP(layernorm_fwd), OP(layernorm_bwd), OP(gemm), OP(gemm_bf16), OP(bias_fwd),
    OP(bias_bwd), OP(attention_fwd), OP(attention_bwd), OP(attention_decode), OP(gelu_fwd), OP(gelu_bwd),
    OP(residual_fwd), OP(residual_bwd), OP(crossentropy_fwd), OP(crossentropy_bwd), OP(residual_layernorm_fwd),
    OP(layernorm_bwd_residual), OP(crossentropy_fused), OP(adamw),
};
#undef OP
const int gptc_kernel_nops = sizeof gptc_kernel_ops / sizeof gptc_kernel_ops[0];

enum { LEVEL_REF, LEVEL_AVX2, LEVEL_AVX512, LEVELS };
static const char *const k_level_names[LEVELS] = {"ref", "avx2", "avx512"};
static gptc_kernels g_tables[LEVELS];
static bool g_ready[LEVELS];
static const gptc_kernels *g_table;

static bool level_supported(int level) {
    const gptc_cpu_info *c = gptc_cpu();
    if (level == LEVEL_AVX2) return c->avx2 && c->fma && c->os_avx;
    if (level == LEVEL_AVX512) return c->avx512f && c->avx512bw && c->avx512vl && c->fma && c->avx2 && c->os_avx512;
    return true;
}

/* The table for a level, built on first use (not thread-safe: called at start-up). */
static const gptc_kernels *build(int level) {
    if (!level_supported(level)) return NULL;
    if (!g_ready[level]) {
        gptc_kernels *k = &g_tables[level];
        *k = *gptc_kernels_ref();
        if (level >= LEVEL_AVX2) gptc_kernels_overlay_avx2(k);
        if (level >= LEVEL_AVX512) gptc_kernels_overlay_avx512(k);
        k->variant = k_level_names[level];
        g_ready[level] = true;
    }
    return &g_tables[level];
}

const gptc_kernels *gptc_kernels_level(const char *name) {
    for (int l = 0; l < LEVELS; l++)
        if (strcmp(name, k_level_names[l]) == 0) return build(l);
    return NULL;
}

const gptc_kernels *gptc_kernels_get(void) {
    if (g_table) return g_table;
    int best = LEVEL_REF;
    for (int l = LEVEL_AVX512; l > LEVEL_REF; l--)
        if (level_supported(l)) {
            best = l;
            break;
        }
    int want = best;
    const char *env = getenv("GPTC_KERNELS");
    if (env && *env) {
        int asked = -1;
        for (int l = 0; l < LEVELS; l++)
            if (strcmp(env, k_level_names[l]) == 0) asked = l;
        if (asked < 0)
            gptc_warn("GPTC_KERNELS=%s: unknown variant (expected ref, avx2 or avx512); using %s", env, k_level_names[best]);
        else if (asked > best)
            gptc_warn("GPTC_KERNELS=%s: this CPU (or OS) cannot run it; using %s", env, k_level_names[best]);
        else
            want = asked;
    }
    g_table = build(want);
    return g_table;
}

const char *gptc_kernels_op_variant(const gptc_kernels *k, int i) {
    size_t off = gptc_kernel_ops[i].offset;
    void *fn;
    memcpy(&fn, (const char *)k + off, sizeof fn);
    for (int l = LEVELS - 1; l > LEVEL_REF; l--) {
        const gptc_kernels *t = build(l);
        const gptc_kernels *below = l == LEVEL_AVX512 ? build(LEVEL_AVX2) : gptc_kernels_ref();
        if (!t || !below) continue;
        void *a, *b;
        memcpy(&a, (const char *)t + off, sizeof a);
        memcpy(&b, (const char *)below + off, sizeof b);
        if (fn == a && a != b) return k_level_names[l];
    }
    return "ref";
}
