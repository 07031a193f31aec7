/* peak_cache.c — the measured peak, cached per machine in a small JSON file so that every training
 * run after the first skips the ~0.4 s probe. */
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

/* The cached figure, or (when there is none, or with force) a measurement now, stored as the larger
 * of it and the cached one: a probe disturbed by other processes reads low, never high. */
static double peak_entry(const char *cache_dir, int bf16, int threads, const char **kind, bool *cached, bool force,
                         double given) {
    int nt = threads > 0 ? threads : omp_get_max_threads();
    const char *isa = gptc_kernels_level("avx512") ? "avx512" : gptc_kernels_level("avx2") ? "avx2" : "none";
    bool use_bf16 = bf16 && gptc_gemm_bf16_uses_dpbf16();
    const char *probe = use_bf16 ? gptc_peak_bf16_kind() : "fp32"; /* "amx_bf16" has its own entries */
    if (kind) *kind = probe;
    if (cached) *cached = false;
    char dir[2048], path[2100], key[256];
    cache_folder(cache_dir, dir, sizeof dir);
    gptc_peak_cache_file(cache_dir, path, sizeof path);
    snprintf(key, sizeof key, "%s|%s|%s|%d", gptc_cpu()->brand, isa, probe, nt);

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
    if (before > 0 && !force) {
        double v = before;
        cJSON_Delete(root);
        if (cached) *cached = true;
        return v;
    }
    gptc_clear_error();
    double peak = given > 0 ? given : use_bf16 ? gptc_peak_bf16_gflops(nt) : gptc_peak_gflops(nt);
    if (peak <= 0) {
        cJSON_Delete(root);
        return 0;
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

double gptc_peak_cached(const char *cache_dir, int bf16, int threads, const char **kind, bool *cached) {
    return peak_entry(cache_dir, bf16, threads, kind, cached, false, 0);
}

double gptc_peak_remeasure(const char *cache_dir, int bf16, int threads) {
    return peak_entry(cache_dir, bf16, threads, NULL, NULL, true, 0);
}

double gptc_peak_cache_offer(const char *cache_dir, int bf16, int threads, double gflops) {
    return peak_entry(cache_dir, bf16, threads, NULL, NULL, true, gflops);
}
