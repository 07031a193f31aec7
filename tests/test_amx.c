/* test_amx.c — AMX detection and dispatch, which run on any CPU: the feature bits agree with each other,
 * with /proc/cpuinfo and with Linux's permission; the amx level exists exactly when the AMX kernel may
 * run, and adds gemm_bf16 only; GPTC_KERNELS caps it and pins gemm_bf16 back to the avx512 kernel.
 * (The AMX kernel against the reference: test_gemm_bf16.c, as the amx and amx-soft variants.) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "kernels/kernels.h"
#include "test.h"

/* whether /proc/cpuinfo's first flags line lists flag (-1: no such file or line) */
static int cpuinfo_flag(const char *flag) {
    char *text = test_slurp("/proc/cpuinfo");
    int found = -1;
    char *line = strstr(text, "\nflags");
    if (line) {
        char *end = strchr(line + 1, '\n');
        if (end) *end = '\0';
        char want[64];
        snprintf(want, sizeof want, " %s", flag);
        char *at = strstr(line, want);
        found = at && (at[strlen(want)] == ' ' || at[strlen(want)] == '\0');
    }
    free(text);
    return found;
}

TEST(amx_detection_consistent) {
    const gptc_cpu_info *c = gptc_cpu();
    /* the bits only count with the OS saving tile state, and AMX-BF16 only with the tiles */
    CHECK(!c->amx_tile || c->os_amx);
    CHECK(!c->amx_bf16 || (c->amx_tile && c->os_amx));
    /* Linux lists amx_bf16 only when it enabled the tile state in XCR0 */
    const int listed = cpuinfo_flag("amx_bf16"), tile_listed = cpuinfo_flag("amx_tile");
    if (listed >= 0) {
        CHECK_MSG(!c->amx_bf16 || (listed && tile_listed), "CPUID says AMX-BF16, /proc/cpuinfo does not list it");
        CHECK_MSG(!(listed && tile_listed) || c->amx_bf16, "/proc/cpuinfo lists amx_bf16, gptc_cpu() says none");
    }
    /* the amx level: AVX-512 with AVX512_BF16, AMX, and the permission asked for on its first use */
    const gptc_kernels *amx = gptc_kernels_level("amx");
    const bool usable = gptc_cpu_amx_usable();
    CHECK_EQ_INT(amx != NULL, usable && c->avx512bf16 && gptc_kernels_level("avx512") != NULL);
    CHECK(!usable || c->amx_bf16);
    if (usable)
        CHECK_MSG(gptc_cpu_xcomp_perm() >> 18 & 1, "AMX usable, but ARCH_GET_XCOMP_PERM lacks XTILEDATA: %#llx",
                  (unsigned long long)gptc_cpu_xcomp_perm());
    CHECK_EQ_INT(gptc_cpu_amx_usable(), usable); /* asked once: the same answer */
    printf("    amx_tile=%d amx_bf16=%d os_amx=%d usable=%d xcomp_perm=%#llx (/proc/cpuinfo amx_bf16: %d)\n",
           c->amx_tile, c->amx_bf16, c->os_amx, usable, (unsigned long long)gptc_cpu_xcomp_perm(), listed);
    if (!amx) {
        CHECK(!gptc_kernels_gemm_bf16_is_amx(gptc_kernels_get()));
        CHECK(strcmp(gptc_kernels_get()->variant, "amx") != 0);
        printf("    no AMX-BF16 on this CPU: skipped (the level's contents)\n");
        return;
    }
    /* the amx table is the avx512 table but for gemm_bf16 (and its blocking) */
    const gptc_kernels *avx512 = gptc_kernels_level("avx512");
    CHECK(gptc_kernels_gemm_bf16_is_amx(amx) && !gptc_kernels_gemm_bf16_is_amx(avx512));
    CHECK(amx->gemm_bf16_isa != avx512->gemm_bf16_isa && amx->gemm_isa == avx512->gemm_isa);
    for (int i = 0; i < gptc_kernel_nops; i++) {
        const char *want = strcmp(gptc_kernel_ops[i].name, "gemm_bf16") == 0 ? "amx" : gptc_kernels_op_variant(avx512, i);
        CHECK_MSG(strcmp(gptc_kernels_op_variant(amx, i), want) == 0, "%s: %s in the amx table, want %s",
                  gptc_kernel_ops[i].name, gptc_kernels_op_variant(amx, i), want);
    }
}

/* GPTC_KERNELS=amx,gemm_bf16=avx512: where AMX runs, the amx table with gemm_bf16 pinned back to the
 * avx512 kernel (and so the vdpbf16ps peak); elsewhere a warning that caps the level, and amx_bf16=0
 * in the features line. */
TEST(amx_kernels_env_caps_and_pins) {
    if (!gptc_kernels_level("avx512")) {
        printf("    no AVX-512 on this CPU: skipped\n");
        return;
    }
    const int amx = gptc_kernels_level("amx") != NULL;
    test_cli_result r = test_cli("GPTC_KERNELS=amx,gemm_bf16=avx512", "info");
    CHECK_EQ_INT(r.rc, 0);
    CHECK_MSG(strstr(r.out, " gemm_bf16=avx512 "), "gemm_bf16 not pinned to avx512: %s", r.out);
    CHECK_MSG(strstr(r.out, amx ? " amx_bf16=1 " : " amx_bf16=0 "), "features line: %s", r.out);
    if (amx) {
        CHECK_MSG(strstr(r.out, "kernels (amx):") && !strstr(r.err, "cannot run"), "out: %s\nerr: %s", r.out, r.err);
        CHECK_MSG(!strstr(r.out, "tdpbf16ps"), "the peak probes AMX although gemm_bf16 is pinned away: %s", r.out);
    } else {
        CHECK_MSG(strstr(r.err, "the table=amx: this CPU (or OS) cannot run it; using avx512"), "err: %s", r.err);
        CHECK_MSG(strstr(r.out, "kernels (avx512):"), "out: %s", r.out);
    }
    test_cli_free(&r);
}
