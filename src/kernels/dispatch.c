/* dispatch.c — builds the kernel table once: the reference entries, overlaid with AVX2+FMA entries
 * when CPUID and XCR0 say the CPU and OS support them, then with AVX-512 entries, then with the
 * AMX-BF16 gemm_bf16 where the process may use the tiles; GPTC_KERNELS caps the level. One binary
 * runs on any x86-64: the ISA-specific code lives in files compiled with their own flags and is only
 * called after these checks. */
#include "kernels/kernels.h"
#include "core/core.h"
#if defined(__x86_64__) || defined(__i386__)
#include "kernels/x86_amx/amx.h"
#endif

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define OP(name) {#name, offsetof(gptc_kernels, name)}
const gptc_kernel_op gptc_kernel_ops[] = {
    OP(encoder_fwd), OP(encoder_bwd), OP(layernorm_fwd), OP(layernorm_bwd), OP(gemm), OP(gemm_bf16), OP(bias_fwd),
    OP(bias_bwd), OP(attention_fwd), OP(attention_bwd), OP(attention_decode), OP(gelu_fwd), OP(gelu_bwd),
    OP(residual_fwd), OP(residual_bwd), OP(crossentropy_fwd), OP(crossentropy_bwd), OP(residual_layernorm_fwd),
    OP(layernorm_bwd_residual), OP(crossentropy_fused), OP(adamw), OP(flash_fwd), OP(flash_bwd), OP(flash_fwd_bf16),
    OP(flash_bwd_bf16), OP(gelu_erf_fwd), OP(gelu_erf_bwd), OP(gelu_sigmoid_fwd), OP(gelu_sigmoid_bwd),
    OP(qkv_to_heads), OP(heads_to_qkv_grad), OP(heads_to_rows), OP(rows_to_heads), OP(dropout), OP(zero),
    OP(grad_sumsq), OP(layernorm_fwd_bf16), OP(residual_layernorm_fwd_bf16), OP(gelu_fwd_bf16),
    OP(gelu_erf_fwd_bf16), OP(gelu_sigmoid_fwd_bf16), OP(heads_to_rows_bf16), OP(gemm_bf16_in16), OP(to_bf16),
    OP(adamw16), OP(ostate_bf16_load), OP(ostate_bf16_store), OP(ostate_q8_load), OP(ostate_q8_store),
    OP(matvec), OP(scale), OP(attention_decode_shared),
};
#undef OP
const int gptc_kernel_nops = sizeof gptc_kernel_ops / sizeof gptc_kernel_ops[0];

enum { LEVEL_REF, LEVEL_AVX2, LEVEL_AVX512, LEVEL_AMX, LEVELS };
static const char *const k_level_names[LEVELS] = {"ref", "avx2", "avx512", "amx"};
static gptc_kernels g_tables[LEVELS];
static bool g_ready[LEVELS];
static const gptc_kernels *g_table;

static bool level_supported(int level) {
#if !(defined(__x86_64__) || defined(__i386__)) /* the x86 kernels are built for an x86 target only (Makefile) */
    if (level != LEVEL_REF) return false;
#endif
    const gptc_cpu_info *c = gptc_cpu();
    if (level == LEVEL_AVX2) return c->avx2 && c->fma && c->os_avx;
    if (level == LEVEL_AVX512) return c->avx512f && c->avx512bw && c->avx512vl && c->fma && c->avx2 && c->os_avx512;
    /* the AMX kernel's packers and epilogue are AVX-512 with AVX512_BF16; the first time this is asked
     * the process asks Linux for the tile state (gptc_cpu_amx_usable) */
    if (level == LEVEL_AMX) return level_supported(LEVEL_AVX512) && c->avx512bf16 && gptc_cpu_amx_usable();
    return true;
}

/* The table for a level, built on first use (not thread-safe: called at start-up). */
static const gptc_kernels *build(int level) {
    if (!level_supported(level)) return NULL;
    if (!g_ready[level]) {
        gptc_kernels *k = &g_tables[level];
        /* each overlay sets the entries its level implements, flash attention and GELU forms included */
        *k = *gptc_kernels_ref();
#if defined(__x86_64__) || defined(__i386__) /* the x86 kernels are built for an x86 target only (Makefile) */
        if (level >= LEVEL_AVX2) gptc_kernels_overlay_avx2(k);
        if (level >= LEVEL_AVX512) gptc_kernels_overlay_avx512(k);
        if (level >= LEVEL_AMX) gptc_kernels_overlay_amx(k);
#endif
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

/* level index of name, or -1 */
static int level_of(const char *name, size_t len) {
    for (int l = 0; l < LEVELS; l++)
        if (strlen(k_level_names[l]) == len && strncmp(name, k_level_names[l], len) == 0) return l;
    return -1;
}

/* The asked level capped at what this CPU runs (warning when capped). */
static int capped(int asked, int best, const char *what) {
    if (asked <= best) return asked;
    gptc_warn("GPTC_KERNELS: %s=%s: this CPU (or OS) cannot run it; using %s", what, k_level_names[asked],
              k_level_names[best]);
    return best;
}

static gptc_kernels g_custom; /* the table when GPTC_KERNELS overrides single operators */

/* Copies entry `off` (a function pointer's offset in gptc_kernels) of src into dst. */
static void copy_entry(gptc_kernels *dst, const gptc_kernels *src, size_t off) {
    memcpy((char *)dst + off, (const char *)src + off, sizeof(void *));
}

/* Applies "name=level" to g_custom; false when name or level is unknown. `flash` names the four flash
 * entries (fp32 and bf16) with their scratch sizes, gemm and gemm_bf16 bring their blocking along. */
static bool override_op(const char *item, size_t len, int best) {
    const char *eq = memchr(item, '=', len);
    if (!eq) return false;
    size_t nlen = (size_t)(eq - item);
    int l = level_of(eq + 1, len - nlen - 1);
    if (l < 0) return false;
    char name[64];
    snprintf(name, sizeof name, "%.*s", (int)nlen, item);
    l = capped(l, best, name);
    const gptc_kernels *t = build(l);
    if (strcmp(name, "flash") == 0) {
        static const size_t group[] = {offsetof(gptc_kernels, flash_fwd), offsetof(gptc_kernels, flash_bwd),
                                       offsetof(gptc_kernels, flash_fwd_bf16), offsetof(gptc_kernels, flash_bwd_bf16),
                                       offsetof(gptc_kernels, flash_scratch), offsetof(gptc_kernels, flash_scratch_bf16)};
        for (size_t i = 0; i < sizeof group / sizeof group[0]; i++) copy_entry(&g_custom, t, group[i]);
        return true;
    }
    for (int i = 0; i < gptc_kernel_nops; i++)
        if (strcmp(name, gptc_kernel_ops[i].name) == 0) {
            copy_entry(&g_custom, t, gptc_kernel_ops[i].offset);
            if (strcmp(name, "gemm") == 0) g_custom.gemm_isa = t->gemm_isa;
            if (strcmp(name, "gemm_bf16") == 0) { /* with its bf16-operand twin: one product, one blocking */
                g_custom.gemm_bf16_isa = t->gemm_bf16_isa;
                g_custom.gemm_bf16_in16 = t->gemm_bf16_in16;
            }
            if (strcmp(name, "gemm_bf16_in16") == 0) { /* and the reverse */
                g_custom.gemm_bf16_isa = t->gemm_bf16_isa;
                g_custom.gemm_bf16 = t->gemm_bf16;
            }
            if (strcmp(name, "matvec") == 0) g_custom.matvec_part = t->matvec_part; /* with its shares */
            if (strcmp(name, "attention_decode_shared") == 0) g_custom.attention_decode_part = t->attention_decode_part;
            if (strcmp(name, "flash_fwd") == 0) g_custom.flash_scratch = t->flash_scratch;
            if (strcmp(name, "flash_fwd_bf16") == 0) g_custom.flash_scratch_bf16 = t->flash_scratch_bf16;
            return true;
        }
    return false;
}

const gptc_kernels *gptc_kernels_get(void) {
    if (g_table) return g_table;
    int best = LEVEL_REF;
    for (int l = LEVELS - 1; l > LEVEL_REF; l--)
        if (level_supported(l)) {
            best = l;
            break;
        }
    int want = best;
    /* GPTC_KERNELS=LEVEL[,OP=LEVEL...]: the level of the whole table, then single operators (names as
     * `gptc info` lists them, and `flash` for the flash attention) set to another level */
    const char *env = getenv("GPTC_KERNELS");
    size_t head = env ? strcspn(env, ",") : 0;
    if (env && *env) {
        int asked = level_of(env, head);
        if (asked < 0)
            gptc_warn("GPTC_KERNELS=%s: unknown variant %.*s (expected ref, avx2, avx512 or amx); using %s", env, (int)head,
                      env, k_level_names[best]);
        else
            want = capped(asked, best, "the table");
    }
    g_table = build(want);
    if (env && env[head] == ',') {
        g_custom = *g_table;
        for (const char *item = env + head + 1; *item;) {
            size_t len = strcspn(item, ",");
            if (!override_op(item, len, best))
                gptc_warn("GPTC_KERNELS=%s: '%.*s' is not OP=LEVEL with an operator of `gptc info` (or flash) and "
                          "ref, avx2, avx512 or amx; ignored", env, (int)len, item);
            item += len + (item[len] == ',');
        }
        g_table = &g_custom;
    }
    return g_table;
}

const char *gptc_kernels_op_variant(const gptc_kernels *k, int i) {
    size_t off = gptc_kernel_ops[i].offset;
    void *fn;
    memcpy(&fn, (const char *)k + off, sizeof fn);
    for (int l = LEVELS - 1; l > LEVEL_REF; l--) {
        const gptc_kernels *t = build(l), *below = build(l - 1);
        if (!t || !below) continue;
        void *a, *b;
        memcpy(&a, (const char *)t + off, sizeof a);
        memcpy(&b, (const char *)below + off, sizeof b);
        if (fn == a && a != b) return k_level_names[l];
    }
    return "ref";
}

bool gptc_kernels_gemm_bf16_is_amx(const gptc_kernels *k) {
    const gptc_kernels *amx = build(LEVEL_AMX);
    return amx && k->gemm_bf16 == amx->gemm_bf16;
}
