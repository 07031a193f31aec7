/* peak_cache.c — the measured peaks (fp32 and bf16 FLOP/s, the triad's memory bandwidth), cached per
 * machine in a small JSON file so that every training run after the first skips the probes. */
#include "kernels/kernels.h"
#include "core/core.h"
#include "io/io.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void cache_folder(const char *cache_dir, char *buf, size_t cap) {
    const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    if (cache_dir) snprintf(buf, cap, "%s", cache_dir);
    else if (xdg && *xdg) snprintf(buf, cap, "%s/gptc", xdg);
    else snprintf(buf, cap, "%s/.cache/gptc", home && *home ? home : "/tmp");
}

void gptc_peak_cache_file(const char *cache_dir, char *buf, size_t cap) {
    char dir[2048];
    cache_folder(cache_dir, dir, sizeof dir);
    snprintf(buf, cap, "%s/peak.json", dir);
}

/* What a cache entry holds: the fp32 or bf16 FLOP/s peak, or the triad's GB/s. */
typedef enum { PROBE_FP32, PROBE_BF16, PROBE_TRIAD } probe_kind;

/* How an entry is read: the cached figure or none (LOOKUP), the cached figure or a measurement (CACHED),
 * a measurement now (FORCE), or a figure measured elsewhere (OFFER). */
typedef enum { LOOKUP, CACHED, FORCE, OFFER } entry_mode;

static double measure(probe_kind what, int nt) {
    if (what == PROBE_TRIAD) return gptc_triad_gbps(nt);
    return what == PROBE_BF16 ? gptc_peak_bf16_gflops(nt) : gptc_peak_gflops(nt);
}

/* The cached figure, or (when there is none, or with FORCE / OFFER) a measurement now (or `given`),
 * stored as the larger of it and the cached one: a probe disturbed by other processes reads low,
 * never high. The key is "CPU brand|ISA level|fp32 or bf16|threads" for a FLOP/s peak and
 * "CPU brand|memory|triad|threads" for the bandwidth. */
static double cache_entry(const char *cache_dir, probe_kind what, int threads, bool *cached, entry_mode mode,
                          double given) {
    int nt = threads > 0 ? threads : omp_get_max_threads();
    const char *isa = gptc_kernels_level("avx512") ? "avx512" : gptc_kernels_level("avx2") ? "avx2" : "none";
    if (cached) *cached = false;
    char dir[2048], path[2100], key[256];
    cache_folder(cache_dir, dir, sizeof dir);
    gptc_peak_cache_file(cache_dir, path, sizeof path);
    if (what == PROBE_TRIAD) snprintf(key, sizeof key, "%s|memory|triad|%d", gptc_cpu()->brand, nt);
    else snprintf(key, sizeof key, "%s|%s|%s|%d", gptc_cpu()->brand, isa, what == PROBE_BF16 ? gptc_peak_bf16_kind() : "fp32", nt);

    char *text = NULL;
    size_t len = 0;
    cJSON *root = NULL;
    if (gptc_is_file(path) && gptc_file_read_all(path, &text, &len) == GPTC_OK) {
        root = cJSON_ParseWithLength(text, len);
        gptc_free(text);
    }
    if (root && !cJSON_IsObject(root)) { /* corrupt: start afresh */
        cJSON_Delete(root);
        root = NULL;
    }
    const cJSON *hit = root ? cJSON_GetObjectItemCaseSensitive(root, key) : NULL;
    double before = cJSON_IsNumber(hit) && hit->valuedouble > 0 ? hit->valuedouble : 0;
    if ((before > 0 && mode == CACHED) || mode == LOOKUP) {
        cJSON_Delete(root);
        if (cached) *cached = before > 0;
        return before;
    }
    gptc_clear_error();
    double peak = mode == OFFER ? given : measure(what, nt);
    if (peak <= 0) { /* no FMA (or no memory for the triad); an empty offer leaves the entry as it is */
        cJSON_Delete(root);
        return mode == OFFER ? before : 0;
    }
    peak = round(peak * 100) / 100; /* so that the figure read back from the file is the same double */
    if (peak < before) peak = before;
    if (!root) root = cJSON_CreateObject();
    cJSON_DeleteItemFromObjectCaseSensitive(root, key);
    cJSON_AddNumberToObject(root, key, peak);
    char *out = cJSON_Print(root);
    if (out && gptc_mkdir_p(dir) == GPTC_OK) {
        const void *parts[] = {out, "\n"};
        size_t lens[] = {strlen(out), 1};
        gptc_file_write_atomic(path, parts, lens, 2); /* a cache that cannot be written is only skipped */
    }
    gptc_clear_error();
    free(out);
    cJSON_Delete(root);
    return peak;
}

/* The FLOP/s probe a run of this dtype is measured against: the instruction gemm_bf16 runs — bf16
 * pairs (vdpbf16ps, or tdpbf16ps on AMX: "amx_bf16" entries of their own) where it uses them, else
 * fp32 FMAs. */
static probe_kind flops_kind(int bf16) { return bf16 && gptc_gemm_bf16_uses_dpbf16() ? PROBE_BF16 : PROBE_FP32; }

double gptc_peak_cached(const char *cache_dir, int bf16, int threads, const char **kind, bool *cached) {
    probe_kind what = flops_kind(bf16);
    if (kind) *kind = what == PROBE_BF16 ? gptc_peak_bf16_kind() : "fp32";
    return cache_entry(cache_dir, what, threads, cached, CACHED, 0);
}

double gptc_peak_remeasure(const char *cache_dir, int bf16, int threads) {
    return cache_entry(cache_dir, flops_kind(bf16), threads, NULL, FORCE, 0);
}

double gptc_peak_cache_offer(const char *cache_dir, int bf16, int threads, double gflops) {
    /* a bf16 probe's figure where gemm_bf16 runs fp32 FMAs (kernels chosen by GPTC_KERNELS, say) is no
     * peak of what runs: it would land in the fp32 entry, twice as high as the FMAs can go */
    const probe_kind what = flops_kind(bf16);
    if (bf16 && what != PROBE_BF16) return 0;
    return cache_entry(cache_dir, what, threads, NULL, OFFER, gflops);
}

double gptc_triad_cached(const char *cache_dir, int threads, bool measure_if_missing, bool *cached) {
    return cache_entry(cache_dir, PROBE_TRIAD, threads, cached, measure_if_missing ? CACHED : LOOKUP, 0);
}

double gptc_triad_cache_offer(const char *cache_dir, int threads, double gbps) {
    return cache_entry(cache_dir, PROBE_TRIAD, threads, NULL, OFFER, gbps);
}
