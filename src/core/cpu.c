/* cpu.c — CPU feature detection with CPUID, and the OS's XSAVE support read from XCR0, so a
 * feature counts only if the OS also saves its registers; for AMX, Linux's per-process permission
 * for the tile data state (arch_prctl), asked for once when the AMX kernel is first selected. Off
 * x86 (aarch64) every x86 feature is false, so the kernels stay at the reference level. */
#include "core.h"

#include <string.h>
#include <unistd.h>
#if defined(__linux__) && defined(__x86_64__)
#include <sys/syscall.h>
#endif

static gptc_cpu_info g_cpu;
static int g_cpu_ready;

/* CPUID, XGETBV and <cpuid.h> exist only on x86 */
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>

#define XCR0_AMX ((1ull << 17) | (1ull << 18)) /* XTILECFG, XTILEDATA */

static uint64_t read_xcr0(void) {
    uint32_t eax, edx;
    __asm__ volatile("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
    return ((uint64_t)edx << 32) | eax;
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
