/* cpu.c — CPU feature detection with CPUID, and the OS's XSAVE support read from XCR0, so a
 * feature counts only if the OS also saves its registers; for AMX, Linux's per-process permission
 * for the tile data state (arch_prctl), asked for once when the AMX kernel is first selected. Off
 * x86 (aarch64) every x86 feature is false, so the kernels stay at the reference level. */
#include "core.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#if defined(__linux__) && defined(__x86_64__)
#include <sys/syscall.h>
#endif

static gptc_cpu_info g_cpu;
static int g_cpu_ready;

/* Sizes of the data (or unified) caches of levels 1..3 from sysfs, for any size still 0: what Linux
 * read from the firmware's tables, on any architecture. */
static void caches_from_sysfs(gptc_cpu_info *c) {
    for (int i = 0; i < 8; i++) {
        char path[128], type[32] = "", size[32] = "";
        int level = 0;
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/level", i);
        FILE *f = fopen(path, "r");
        if (!f) break;
        if (fscanf(f, "%d", &level) != 1) level = 0;
        fclose(f);
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/type", i);
        if ((f = fopen(path, "r"))) { if (fscanf(f, "%31s", type) != 1) type[0] = 0; fclose(f); }
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/size", i);
        if ((f = fopen(path, "r"))) { if (fscanf(f, "%31s", size) != 1) size[0] = 0; fclose(f); }
        if (!strcmp(type, "Instruction")) continue;
        char *end;
        long v = strtol(size, &end, 10);
        if (*end == 'K') v <<= 10;
        else if (*end == 'M') v <<= 20;
        long *slot = level == 1 ? &c->l1d_bytes : level == 2 ? &c->l2_bytes : level == 3 ? &c->l3_bytes : NULL;
        if (slot && *slot == 0 && v > 0) *slot = v;
    }
}

void gptc_cpu_caches_from_amd_legacy(gptc_cpu_info *c, uint32_t ecx5, uint32_t ecx6) {
    if (c->l1d_bytes == 0) c->l1d_bytes = (long)(ecx5 >> 24) << 10;
    if (c->l2_bytes == 0) c->l2_bytes = (long)(ecx6 >> 16) << 10;
}

/* CPUID, XGETBV and <cpuid.h> exist only on x86 */
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>

#define XCR0_AMX ((1ull << 17) | (1ull << 18)) /* XTILECFG, XTILEDATA */

static uint64_t read_xcr0(void) {
    uint32_t eax, edx;
    __asm__ volatile("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
    return ((uint64_t)edx << 32) | eax;
}

/* Cache sizes from the deterministic cache parameters leaf (4 on Intel, 0x8000001D on AMD; both
 * use one layout): per subleaf, EAX[4:0] the type (0 ends the list, 2 instruction), EAX[7:5] the level,
 * EBX ways-1 [31:22], partitions-1 [21:12], line bytes-1 [11:0], ECX sets-1. */
static void caches_from_cpuid(gptc_cpu_info *c, unsigned leaf) {
    unsigned a, b, cx, d;
    for (unsigned i = 0; i < 16; i++) {
        __cpuid_count(leaf, i, a, b, cx, d);
        unsigned type = a & 0x1f, level = (a >> 5) & 7;
        if (type == 0) break;
        if (type == 2) continue;
        long size = (long)((b >> 22) + 1) * (((b >> 12) & 0x3ff) + 1) * ((b & 0xfff) + 1) * ((long)cx + 1);
        long *slot = level == 1 ? &c->l1d_bytes : level == 2 ? &c->l2_bytes : level == 3 ? &c->l3_bytes : NULL;
        if (slot) *slot = size;
    }
}

/* AMD's older cache leaves, read where 0x8000001D is missing (virtual machines that hide it, with the
 * topology-extensions bit clear, often keep these): gptc_cpu_caches_from_amd_legacy decodes them. */
static void caches_from_amd_legacy(gptc_cpu_info *c, unsigned maxext) {
    unsigned a = 0, b = 0, ecx5 = 0, ecx6 = 0, d = 0;
    if (maxext < 0x80000006) return;
    __get_cpuid(0x80000005, &a, &b, &ecx5, &d);
    __get_cpuid(0x80000006, &a, &b, &ecx6, &d);
    gptc_cpu_caches_from_amd_legacy(c, ecx5, ecx6);
}

static void detect(gptc_cpu_info *c) {
    unsigned a, b, cx, d;
    memset(c, 0, sizeof *c);
    c->logical_cpus = (int)sysconf(_SC_NPROCESSORS_ONLN);
    if (!__get_cpuid(0, &a, &b, &cx, &d)) return;
    unsigned max_leaf = a;
    memcpy(c->vendor, &b, 4);
    memcpy(c->vendor + 4, &d, 4);
    memcpy(c->vendor + 8, &cx, 4);
    __get_cpuid(1, &a, &b, &cx, &d);
    c->family = (int)((a >> 8) & 0xf), c->model = (int)((a >> 4) & 0xf);
    if (c->family == 0xf) c->family += (int)((a >> 20) & 0xff);
    if (c->family == 0x6 || c->family >= 0xf) c->model += (int)((a >> 16) & 0xf) << 4;
    c->sse42 = cx & bit_SSE4_2;
    c->fma = cx & bit_FMA;
    bool osxsave = cx & bit_OSXSAVE;
    c->avx = cx & bit_AVX;
    if (osxsave) {
        uint64_t xcr0 = read_xcr0();
        c->os_avx = (xcr0 & 0x6) == 0x6;
        c->os_avx512 = (xcr0 & 0xe6) == 0xe6;
        c->os_amx = (xcr0 & XCR0_AMX) == XCR0_AMX;
    }
    if (max_leaf >= 7) {
        __get_cpuid_count(7, 0, &a, &b, &cx, &d);
        c->avx2 = b & bit_AVX2;
        c->avx512f = b & bit_AVX512F;
        c->avx512bw = b & bit_AVX512BW;
        c->avx512vl = b & bit_AVX512VL;
        c->amx_tile = d & (1u << 24);
        c->amx_bf16 = d & (1u << 22);
        __get_cpuid_count(7, 1, &a, &b, &cx, &d);
        c->avx512bf16 = a & (1u << 5);
    }
    /* The tile shape the kernels configure must fit palette 1 (leaf 0x1D sub-leaf 1: EBX bytes per
     * row in bits 15:0, tile registers in 31:16; ECX rows in 15:0). */
    if (c->amx_tile && max_leaf >= 0x1D) {
        unsigned palettes = 0;
        __get_cpuid_count(0x1D, 0, &palettes, &b, &cx, &d);
        __get_cpuid_count(0x1D, 1, &a, &b, &cx, &d);
        if (palettes < 1 || (b & 0xffff) < 64 || (b >> 16) < 8 || (cx & 0xffff) < 16) c->amx_tile = false;
    } else {
        c->amx_tile = false;
    }
    unsigned ext;
    if (__get_cpuid(0x80000000, &ext, &b, &cx, &d) && ext >= 0x80000004) {
        unsigned *w = (unsigned *)c->brand;
        for (unsigned leaf = 0; leaf < 3; leaf++) __get_cpuid(0x80000002 + leaf, &w[leaf * 4], &w[leaf * 4 + 1], &w[leaf * 4 + 2], &w[leaf * 4 + 3]);
        c->brand[63] = '\0';
    }
    bool amd = !strcmp(c->vendor, "AuthenticAMD");
    unsigned maxext = 0;
    __get_cpuid(0x80000000, &maxext, &b, &cx, &d);
    if (!amd && max_leaf >= 4) caches_from_cpuid(c, 4);
    if (amd && maxext >= 0x8000001D) caches_from_cpuid(c, 0x8000001D);
    caches_from_sysfs(c);
    if (amd) caches_from_amd_legacy(c, maxext);
    c->fma512_half_width = amd && c->family == 0x19; /* Zen 4; Zen 5 (0x1A) runs them at full width */
    if (!c->os_avx) c->avx = c->avx2 = c->fma = false;
    if (!c->os_avx512) c->avx512f = c->avx512bw = c->avx512vl = c->avx512bf16 = false;
    if (!c->os_amx || !c->amx_tile) c->amx_tile = c->amx_bf16 = false;
}
#else
#include <sys/utsname.h>
/* no x86 features; the brand (peak cache key, `gptc info`, the train log) is the machine (uname -m) */
static void detect(gptc_cpu_info *c) {
    struct utsname u;
    memset(c, 0, sizeof *c);
    c->logical_cpus = (int)sysconf(_SC_NPROCESSORS_ONLN);
    snprintf(c->brand, sizeof c->brand, "%s", uname(&u) == 0 ? u.machine : "unknown");
    caches_from_sysfs(c);
}
#endif

/* Linux's dynamic XSTATE permission (Documentation/arch/x86/xstate.rst): a process asks once for the
 * tile data state, XSTATE component 18, before its first tile instruction (which is otherwise trapped
 * and ends it with SIGILL); the permission then holds for every thread of the process. */
#define ARCH_GET_XCOMP_PERM_ 0x1022
#define ARCH_REQ_XCOMP_PERM_ 0x1023
#define XFEATURE_XTILEDATA 18

uint64_t gptc_cpu_xcomp_perm(void) {
    uint64_t perm = 0;
#if defined(__linux__) && defined(__x86_64__)
    if (syscall(SYS_arch_prctl, ARCH_GET_XCOMP_PERM_, &perm) != 0) perm = 0;
#endif
    return perm;
}

static int g_amx_state; /* 0: not asked yet, 1: permitted, -1: no AMX */

bool gptc_cpu_amx_usable(void) {
    int st = __atomic_load_n(&g_amx_state, __ATOMIC_ACQUIRE);
    if (st == 0) {
        const gptc_cpu_info *c = gptc_cpu();
        bool ok = false;
#if defined(__linux__) && defined(__x86_64__)
        /* two threads asking at once both ask: the request is idempotent */
        if (c->amx_tile && c->amx_bf16)
            ok = syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM_, XFEATURE_XTILEDATA) == 0 &&
                 (gptc_cpu_xcomp_perm() >> XFEATURE_XTILEDATA & 1);
#else
        (void)c;
#endif
        st = ok ? 1 : -1;
        __atomic_store_n(&g_amx_state, st, __ATOMIC_RELEASE);
    }
    return st == 1;
}

const gptc_cpu_info *gptc_cpu(void) {
    if (!__atomic_load_n(&g_cpu_ready, __ATOMIC_ACQUIRE)) {
        detect(&g_cpu);
        __atomic_store_n(&g_cpu_ready, 1, __ATOMIC_RELEASE);
    }
    return &g_cpu;
}
