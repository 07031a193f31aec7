/* cpu.c — CPU feature detection with CPUID, and the OS's XSAVE support read from XCR0, so a
 * feature counts only if the OS also saves its registers. Off x86 (aarch64) every x86 feature is
 * false, so the kernels stay at the reference level. */
#include "core.h"

#include <string.h>
#include <unistd.h>

static gptc_cpu_info g_cpu;
static int g_cpu_ready;

/* CPUID, XGETBV and <cpuid.h> exist only on x86 */
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>

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
    }
    if (max_leaf >= 7) {
        __get_cpuid_count(7, 0, &a, &b, &cx, &d);
        c->avx2 = b & bit_AVX2;
        c->avx512f = b & bit_AVX512F;
        c->avx512bw = b & bit_AVX512BW;
        c->avx512vl = b & bit_AVX512VL;
        __get_cpuid_count(7, 1, &a, &b, &cx, &d);
        c->avx512bf16 = a & (1u << 5);
    }
    unsigned ext;
    if (__get_cpuid(0x80000000, &ext, &b, &cx, &d) && ext >= 0x80000004) {
        unsigned *w = (unsigned *)c->brand;
        for (unsigned leaf = 0; leaf < 3; leaf++) __get_cpuid(0x80000002 + leaf, &w[leaf * 4], &w[leaf * 4 + 1], &w[leaf * 4 + 2], &w[leaf * 4 + 3]);
        c->brand[63] = '\0';
    }
    if (!c->os_avx) c->avx = c->avx2 = c->fma = false;
    if (!c->os_avx512) c->avx512f = c->avx512bw = c->avx512vl = c->avx512bf16 = false;
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

const gptc_cpu_info *gptc_cpu(void) {
    if (!__atomic_load_n(&g_cpu_ready, __ATOMIC_ACQUIRE)) {
        detect(&g_cpu);
        __atomic_store_n(&g_cpu_ready, 1, __ATOMIC_RELEASE);
    }
    return &g_cpu;
}
