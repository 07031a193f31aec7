/* peak_bw.c — the machine's measured memory bandwidth: a STREAM-like triad a[i] = b[i] + s*c[i] over
 * three float arrays much larger than the last-level cache, on N threads, best of a few rounds.
 *
 * The figure follows STREAM's convention: 12 bytes per element (b and c read, a written; the read of
 * a's lines that a plain store also costs, "write allocate", is not counted), so it compares with
 * published STREAM triad results, and it is what the profiler's "% bw" column divides by. Each
 * thread first-touches the part of the arrays it then streams (a static split of whole cache lines),
 * as a NUMA-aware kernel would. */
#include "kernels/kernels.h"
#include "core/core.h"

#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define MIB ((size_t)1 << 20)
#define TRIAD_MIN (64 * MIB)  /* per array, whatever the caches */
/* per array: three of them is 768 MiB at most. Faulting the pages in is most of the probe's time (on
 * a VM about 1 s per GiB on 2 threads, more when the host is busy), which keeps it near 1 s. */
#define TRIAD_MAX (256 * MIB)
#define TRIAD_ROUNDS 5

/* The size of cpu0's data (or unified) cache at `level` from sysfs ("2048K", "260M"), or with level 0
 * the largest of them; 0 when sysfs does not say. */
size_t gptc_cache_bytes(int level) {
    size_t best = 0;
    for (int i = 0; i < 16; i++) {
        char path[128], type[32] = "";
        int lv = 0;
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/type", i);
        FILE *f = fopen(path, "r");
        if (!f) continue;
        int ok = fscanf(f, "%31s", type) == 1;
        fclose(f);
        if (!ok || strcmp(type, "Instruction") == 0) continue;
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/level", i);
        if (!(f = fopen(path, "r"))) continue;
        ok = fscanf(f, "%d", &lv) == 1;
        fclose(f);
        if (!ok || (level > 0 && lv != level)) continue;
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/size", i);
        if (!(f = fopen(path, "r"))) continue;
        unsigned long v = 0;
        char unit = 0;
        int got = fscanf(f, "%lu%c", &v, &unit);
        fclose(f);
        if (got < 1) continue;
        size_t bytes = v * (unit == 'K' ? 1024 : unit == 'M' ? MIB : unit == 'G' ? 1024 * MIB : 1);
        if (bytes > best) best = bytes;
    }
    return best;
}

/* Bytes per array: 4x the last-level cache within [TRIAD_MIN, TRIAD_MAX] (the most when unknown), a
 * whole number of 64-byte lines. At the cap the three arrays are 3x a 256 MiB cache, which a sweep
 * evicts before it comes round again. */
static size_t array_bytes(void) {
    size_t llc = gptc_cache_bytes(0), want = llc ? 4 * llc : TRIAD_MAX;
    if (want < TRIAD_MIN) want = TRIAD_MIN;
    if (want > TRIAD_MAX) want = TRIAD_MAX;
    return want & ~(size_t)63;
}

/* Thread t of nt's share [lo, hi) of n floats: whole lines of 16, in order. */
static void share(size_t n, int t, int nt, size_t *lo, size_t *hi) {
    size_t lines = n / 16, per = (lines + (size_t)nt - 1) / (size_t)nt;
    *lo = (size_t)t * per * 16 < n ? (size_t)t * per * 16 : n;
    *hi = *lo + per * 16 < n ? *lo + per * 16 : n;
}

double gptc_triad_gbps(int threads) {
    int nt = threads > 0 ? threads : omp_get_max_threads();
    size_t bytes = array_bytes(), n = bytes / sizeof(float);
    /* mmap, not gptc_alloc: the probe's 192-768 MiB is neither zeroed by one thread first nor counted
     * in the allocator's peak that the memory plan is checked against, and munmap returns it */
    float *arr[3];
    for (int i = 0; i < 3; i++) {
        arr[i] = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (arr[i] == MAP_FAILED) {
            for (int j = 0; j < i; j++) munmap(arr[j], bytes);
            return 0;
        }
    }
    float *a = arr[0];
    const float *b = arr[1], *c = arr[2];
    const float s = 3.0f;
    double best = 0;
#pragma omp parallel num_threads(nt)
    {
        size_t lo, hi;
        share(n, omp_get_thread_num(), omp_get_num_threads(), &lo, &hi);
        for (size_t i = lo; i < hi; i++) arr[0][i] = 0.0f, arr[1][i] = 1.0f, arr[2][i] = 2.0f; /* first touch */
        for (int round = 0; round < TRIAD_ROUNDS; round++) {
#pragma omp barrier
            double t0 = gptc_now();
#pragma omp barrier
            for (size_t i = lo; i < hi; i++) a[i] = b[i] + s * c[i];
#pragma omp barrier
#pragma omp master
            {
                double gbps = 12.0 * (double)n / (gptc_now() - t0) * 1e-9; /* STREAM: 3 x 4 bytes per element */
                if (gbps > best) best = gbps;
            }
        }
    }
    volatile float sink = a[n / 2]; /* a is used: the loop stays */
    (void)sink;
    for (int i = 0; i < 3; i++) munmap(arr[i], bytes);
    return best;
}
