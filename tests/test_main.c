/* test_main.c — runs every registered test (or those whose name contains one of the arguments) and
 * ends with the line "N passed, N failed"; the exit status is nonzero if any failed. The peaks and
 * bandwidth the suite's runs measure are cached in its own temporary folder, not the user's. */
#include "test.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_TESTS 512
static struct { const char *name; test_fn fn; } g_tests[MAX_TESTS];
static int g_ntests, g_cur_fail;

void test_register(const char *name, test_fn fn) {
    if (g_ntests == MAX_TESTS) { fprintf(stderr, "too many tests\n"); abort(); }
    g_tests[g_ntests].name = name;
    g_tests[g_ntests].fn = fn;
    g_ntests++;
}

void test_fail_at(const char *file, int line, const char *fmt, ...) {
    if (g_cur_fail < 10) {
        va_list ap;
        va_start(ap, fmt);
        fprintf(stdout, "    %s:%d: ", file, line);
        vfprintf(stdout, fmt, ap);
        fputc('\n', stdout);
        va_end(ap);
    }
    g_cur_fail++;
}

int test_failures_in_current(void) { return g_cur_fail; }

static int by_name(const void *a, const void *b) {
    const char *x = *(const char *const *)a, *y = *(const char *const *)b;
    return strcmp(x, y);
}

/* XDG_CACHE_HOME for this process and every one it starts (gptc, and this binary again: those keep the
 * first process's folder), so that `gptc info`, MFU and the benchmarks' peaks (kernels/peak_cache.c) go to
 * the suite's temporary folder and leave the user's ~/.cache/gptc as it was. */
static void private_cache(void) {
    if (getenv("GPTC_TEST_CACHE")) return;
    char dir[600];
    snprintf(dir, sizeof dir, "%s/cache", test_tmpdir());
    setenv("XDG_CACHE_HOME", dir, 1);
    setenv("GPTC_TEST_CACHE", dir, 1);
}

int main(int argc, char **argv) {
    int passed = 0, failed = 0;
    private_cache();
    /* run in a stable order: by name */
    const char *names[MAX_TESTS];
    for (int i = 0; i < g_ntests; i++) names[i] = g_tests[i].name;
    qsort(names, g_ntests, sizeof names[0], by_name);
    for (int n = 0; n < g_ntests; n++) {
        int i = 0;
        while (g_tests[i].name != names[n]) i++;
        bool match = argc == 1; /* no arguments: all; else the tests whose name contains any of them */
        for (int a = 1; a < argc && !match; a++) match = strstr(g_tests[i].name, argv[a]) != NULL;
        if (!match) continue;
        g_cur_fail = 0;
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        fprintf(stdout, "[ run  ] %s\n", g_tests[i].name);
        fflush(stdout);
        g_tests[i].fn();
        clock_gettime(CLOCK_MONOTONIC, &t1);
        double s = (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) * 1e-9;
        fprintf(stdout, "[ %s ] %s (%.2f s)\n", g_cur_fail ? "FAIL" : " ok ", g_tests[i].name, s);
        fflush(stdout);
        if (g_cur_fail) failed++; else passed++;
    }
    fprintf(stdout, "%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
