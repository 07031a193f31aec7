/* test_trainlog.c — the pieces behind gptc train's per-step log: the rolling step-time statistics,
 * the cached peak (hit, miss, corrupt file rewritten) and triad bandwidth, thread pinning (checked the
 * way the kernel sees it, in /proc/self/task/ * /status), and --pin / --log through the CLI. */
#include "test.h"
#include "core/core.h"
#include "io/io.h"
#include "kernels/kernels.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

TEST(trainlog_window_stats) {
    gptc_window w = {0};
    double p50, p95, sd;
    gptc_window_stats(&w, &p50, &p95, &sd);
    CHECK(p50 == 0 && p95 == 0 && sd == 0);
    for (int i = 1; i <= 20; i++) gptc_window_add(&w, i); /* 1..20: mean 10.5, population stdev 5.766 */
    gptc_window_stats(&w, &p50, &p95, &sd);
    CHECK_NEAR(p50, 10.5, 1e-12);
    CHECK_NEAR(p95, 19, 1e-12); /* nearest rank: ceil(0.95 * 20) = 19th */
    CHECK_NEAR(sd, 100 * sqrt(399.0 / 12) / 10.5, 1e-9);
    for (int i = 0; i < GPTC_WINDOW; i++) gptc_window_add(&w, 7); /* the old values roll out */
    gptc_window_stats(&w, &p50, &p95, &sd);
    CHECK(w.n == GPTC_WINDOW && p50 == 7 && p95 == 7);
    CHECK_NEAR(sd, 0, 1e-9);
    double v[] = {3, 1, 2, 4};
    CHECK_NEAR(gptc_median(v, 4), 2.5, 1e-12);
    CHECK(isnan(gptc_median(v, 0)));
}

TEST(trainlog_peak_cache) {
    char dir[512], path[600];
    test_dir("peak-", "cache", dir, sizeof dir);
    test_path(path, sizeof path, "%s/peak.json", dir);
    bool cached = true;
    const char *kind = NULL;
    double a = gptc_peak_cached(dir, 0, 1, &kind, &cached);
    if (a <= 0) {
        printf("    SKIP: no FMA on this CPU, no peak\n");
        return;
    }
    CHECK(!cached && kind && strcmp(kind, "fp32") == 0 && gptc_is_file(path));
    double b = gptc_peak_cached(dir, 0, 1, NULL, &cached);
    CHECK(cached && a == b);
    /* another thread count is another entry */
    gptc_peak_cached(dir, 0, 2, NULL, &cached);
    CHECK(!cached);
    CHECK(gptc_peak_cached(dir, 0, 2, NULL, &cached) > 0 && cached);
    /* a corrupt file is measured afresh and rewritten as valid JSON */
    test_write_file(path, "{\"not json", 10);
    double c = gptc_peak_cached(dir, 0, 1, NULL, &cached);
    CHECK(c > 0 && !cached);
    char *text = NULL;
    size_t len = 0;
    CHECK_OK(gptc_file_read_all(path, &text, &len));
    cJSON *root = text ? cJSON_Parse(text) : NULL;
    CHECK_MSG(cJSON_IsObject(root) && cJSON_GetArraySize(root) == 1, "rewritten cache: %s", text);
    cJSON_Delete(root);
    gptc_free(text);
    CHECK(gptc_peak_cached(dir, 0, 1, NULL, &cached) == c && cached);
    /* a figure probed on a busy machine (here: far too low) is replaced by a new probe when it is
     * asked to be, and a higher one is kept whatever the new probe reads */
    char key[300], low[400];
    snprintf(key, sizeof key, "%s|%s|fp32|1", gptc_cpu()->brand,
             gptc_kernels_level("avx512") ? "avx512" : gptc_kernels_level("avx2") ? "avx2" : "none");
    int n = snprintf(low, sizeof low, "{\"%s\": 0.001}", key);
    test_write_file(path, low, (size_t)n);
    CHECK(gptc_peak_cached(dir, 0, 1, NULL, &cached) == 0.001 && cached);
    double d = gptc_peak_remeasure(dir, 0, 1);
    CHECK_MSG(d > 0.001, "remeasured %g", d);
    CHECK(gptc_peak_cached(dir, 0, 1, NULL, &cached) == d && cached);
    n = snprintf(low, sizeof low, "{\"%s\": 1e12}", key);
    test_write_file(path, low, (size_t)n);
    CHECK(gptc_peak_remeasure(dir, 0, 1) == 1e12);
    /* a probe taken elsewhere (gptc info) is kept only when it is higher */
    CHECK(gptc_peak_cache_offer(dir, 0, 1, 5.0) == 1e12);
    CHECK(gptc_peak_cache_offer(dir, 0, 1, 2e12) == 2e12);
    CHECK(gptc_peak_cached(dir, 0, 1, NULL, &cached) == 2e12 && cached);
}

/* The triad bandwidth: measured once and cached beside the FLOP/s peaks (its own key per thread count,
 * the larger of old and new kept); a lookup alone never probes. */
TEST(trainlog_triad_cache) {
    char dir[512], path[600];
    test_dir("triad-", "cache", dir, sizeof dir);
    test_path(path, sizeof path, "%s/peak.json", dir);
    bool cached = true;
    CHECK(gptc_triad_cached(dir, 1, false, &cached) == 0 && !cached && !gptc_is_file(path));
    double t0 = gptc_now();
    double a = gptc_triad_cached(dir, 1, true, &cached);
    printf("    triad on 1 thread: %.1f GB/s, probe %.2f s (last-level cache %.0f MiB)\n", a, gptc_now() - t0,
           gptc_cache_bytes(0) / 1048576.0);
    CHECK(a > 0 && !cached && gptc_is_file(path));
    CHECK(gptc_triad_cached(dir, 1, false, &cached) == a && cached);
    CHECK(gptc_triad_cached(dir, 1, true, &cached) == a && cached);
    CHECK(gptc_triad_cached(dir, 2, false, &cached) == 0 && !cached); /* another thread count, another entry */
    /* offered figures: a lower one leaves the entry, a higher one replaces it, 0 changes nothing */
    CHECK(gptc_triad_cache_offer(dir, 1, a / 2) == a);
    CHECK(gptc_triad_cache_offer(dir, 1, 0) == a);
    CHECK(gptc_triad_cache_offer(dir, 1, 1e6) == 1e6);
    CHECK(gptc_triad_cached(dir, 1, true, &cached) == 1e6 && cached);
    /* beside a FLOP/s peak in the same file: neither entry disturbs the other */
    CHECK(gptc_peak_cache_offer(dir, 0, 1, 7.0) == 7.0);
    CHECK(gptc_peak_cached(dir, 0, 1, NULL, &cached) == 7.0 && cached);
    CHECK(gptc_triad_cached(dir, 1, false, &cached) == 1e6 && cached);
    char key[300], *text = NULL;
    size_t len = 0;
    snprintf(key, sizeof key, "%s|memory|triad|1", gptc_cpu()->brand);
    CHECK_OK(gptc_file_read_all(path, &text, &len));
    cJSON *root = text ? cJSON_Parse(text) : NULL;
    CHECK_MSG(cJSON_IsObject(root) && cJSON_GetArraySize(root) == 2 && cJSON_GetObjectItem(root, key), "cache: %s", text);
    cJSON_Delete(root);
    gptc_free(text);
}

/* The Cpus_allowed_list of every thread of this process, joined with ';' into buf; returns the count. */
static int task_cpu_lists(char *buf, size_t cap, int *single) {
    DIR *d = opendir("/proc/self/task");
    struct dirent *e;
    int n = 0;
    size_t k = 0;
    *single = 0;
    buf[0] = '\0';
    while (d && (e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char p[300], line[512];
        snprintf(p, sizeof p, "/proc/self/task/%s/status", e->d_name);
        FILE *f = fopen(p, "r");
        while (f && fgets(line, sizeof line, f))
            if (strncmp(line, "Cpus_allowed_list:", 18) == 0) {
                char *v = line + 18 + strspn(line + 18, " \t");
                v[strcspn(v, "\n")] = '\0';
                if (!strpbrk(v, ",-")) (*single)++;
                k += (size_t)snprintf(buf + k, k < cap ? cap - k : 0, "%s;", v);
                n++;
            }
        if (f) fclose(f);
    }
    if (d) closedir(d);
    return n;
}

TEST(trainlog_pin_threads) {
    cpu_set_t mask;
    CHECK(sched_getaffinity(0, sizeof mask, &mask) == 0);
    if (CPU_COUNT(&mask) < 2) {
        printf("    SKIP: this process may run on one CPU only\n");
        return;
    }
    int saved = gptc_threads();
    gptc_set_threads(2);
    int cpus[2] = {-1, -1}, single = 0;
    CHECK_EQ_INT(gptc_pin_threads(cpus, 2), 2);
    CHECK(cpus[0] >= 0 && cpus[1] >= 0 && cpus[0] != cpus[1]);
    char lists[4096];
    int tasks = task_cpu_lists(lists, sizeof lists, &single);
    /* the main thread and the team's other thread, each on one CPU: the ones gptc_pin_threads said */
    CHECK_MSG(single >= 2, "%d of %d threads bound to one CPU: %s", single, tasks, lists);
    char want[32];
    snprintf(want, sizeof want, "%d;", cpus[1]);
    CHECK_MSG(strstr(lists, want), "no thread on CPU %d: %s", cpus[1], lists);
    gptc_unpin_threads();
    task_cpu_lists(lists, sizeof lists, &single);
    CHECK_MSG(single == 0, "still bound after unpinning: %s", lists);
    gptc_set_threads(saved);
}

TEST(trainlog_cli_log_and_pin) {
    const char *d = test_shakespeare_data();
    char log[600], cmd[2048], *out = NULL;
    test_path(log, sizeof log, "%s/pin-log.jsonl", test_tmpdir());
    snprintf(cmd, sizeof cmd, "%s train --model tiny --data %s --batch 4 --seq 32 --steps 5 --eval-every 0 --threads 2 "
             "--pin --log %s", test_gptc_bin(), d, log);
    CHECK_EQ_INT(test_run(cmd, &out), 0);
    CHECK_MSG(out && strstr(out, "pinned to CPUs") && strstr(out, "| MFU ") && strstr(out, "ms ±") &&
                  strstr(out, "MiB | ETA") && strstr(out, "train: step time p50"),
              "output: %s", out);
    free(out);
    char *text = NULL;
    size_t len = 0;
    CHECK_OK(gptc_file_read_all(log, &text, &len));
    int steps = 0, starts = 0;
    for (char *line = text ? strtok(text, "\n") : NULL; line; line = strtok(NULL, "\n")) {
        cJSON *o = cJSON_Parse(line);
        const char *type = cJSON_GetStringValue(cJSON_GetObjectItem(o, "type"));
        CHECK_MSG(o && type, "bad line: %s", line);
        if (type && strcmp(type, "start") == 0) {
            starts++;
            CHECK(cJSON_IsTrue(cJSON_GetObjectItem(o, "pin")) && cJSON_GetObjectItem(o, "threads")->valueint == 2);
        }
        if (type && strcmp(type, "step") == 0) steps++;
        cJSON_Delete(o);
    }
    CHECK(starts == 1 && steps == 5);
    gptc_free(text);
    /* a --log that cannot be written: one line naming it, exit 2, nothing run */
    snprintf(cmd, sizeof cmd, "%s train --model tiny --data %s --steps 5 --log /nonexistent/dir/log.jsonl",
             test_gptc_bin(), d);
    CHECK_EQ_INT(test_run(cmd, &out), 2);
    CHECK_MSG(out && strstr(out, "--log /nonexistent/dir/log.jsonl: folder /nonexistent/dir does not exist") &&
                  !strstr(out, "step 1"),
              "output: %s", out);
    free(out);
}
