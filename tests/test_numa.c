/* test_numa.c — first-touch placement (`gptc train --numa`, src/core/numa.c): large blocks become
 * fresh mappings zeroed part by part by the OpenMP threads, accounted and freed like any block, and
 * a run placed that way gives the same bits as one that is not. (This machine may have one NUMA node:
 * where the pages land is not observable here, only that nothing else changes.) */
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "test.h"

TEST(numa_first_touch_blocks_are_zeroed_accounted_and_freed) {
    CHECK(gptc_numa_nodes() >= 1);
    const size_t sizes[] = {100, (1u << 20) - 64, 1u << 20, (3u << 20) + 5, 7777777};
    const int saved = gptc_threads();
    gptc_set_threads(2);
    for (int on = 0; on < 2; on++) {
        gptc_alloc_set_first_touch(on);
        for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
            size_t before, after, freed;
            gptc_alloc_stats(&before, NULL);
            unsigned char *p = gptc_alloc(sizes[i], "numa test");
            CHECK(p != NULL && ((uintptr_t)p & 63) == 0);
            gptc_alloc_stats(&after, NULL);
            CHECK_MSG(after - before == gptc_alloc_block_bytes(sizes[i]), "first touch %d, %zu bytes: live grew %zu",
                      on, sizes[i], after - before);
            size_t nonzero = 0;
            for (size_t j = 0; j < sizes[i]; j++) nonzero += p[j] != 0;
            CHECK_MSG(nonzero == 0, "first touch %d, %zu bytes: %zu bytes not zero", on, sizes[i], nonzero);
            memset(p, 0xab, sizes[i]);
            gptc_free(p);
            gptc_alloc_stats(&freed, NULL);
            CHECK(freed == before);
        }
    }
    gptc_alloc_set_first_touch(false);
    gptc_set_threads(saved);
}

/* thread t of n zeroes the t-th contiguous part: every byte, including a tail that is not a whole float */
TEST(numa_first_touch_zero_covers_odd_sizes) {
    for (int threads = 1; threads <= 3; threads++) {
        const int saved = gptc_threads();
        gptc_set_threads(threads);
        for (size_t n = 1; n < 70; n += 7) {
            unsigned char *p = malloc(n);
            memset(p, 0xff, n);
            gptc_first_touch_zero(p, n);
            for (size_t j = 0; j < n; j++) CHECK_MSG(p[j] == 0, "%d threads, %zu bytes: byte %zu", threads, n, j);
            free(p);
        }
        gptc_set_threads(saved);
    }
}

static char *losses_of(const char *extra, const char *name) {
    char path[700];
    snprintf(path, sizeof path, "%s/%s", test_tmpdir(), name);
    test_cli_result r = test_cli(NULL, "train --model small-cpu --data %s --batch 2 --seq 64 --steps 3 --threads 2 "
                                       "--eval-every 0 --eval-batches 1 --log-losses %s %s",
                                 test_shakespeare_data(), path, extra);
    CHECK_MSG(r.rc == 0, "gptc train %s: rc %d: %s", extra, r.rc, r.err);
    if (*extra) CHECK_MSG(strstr(r.out, "numa first touch") != NULL, "the log does not say --numa: %s", r.out);
    test_cli_free(&r);
    return test_slurp(path);
}

TEST(numa_train_gives_the_same_bits) {
    char *plain = losses_of("", "numa-off.losses"), *placed = losses_of("--numa", "numa-on.losses");
    CHECK(test_count_lines(plain) == 3);
    CHECK_MSG(strcmp(plain, placed) == 0, "--numa changed the losses:\n%s\nvs\n%s", plain, placed);
    free(plain), free(placed);
}

/* libgomp binds the main thread to one core when OMP_PROC_BIND / OMP_PLACES are set, before gptc reads
 * its affinity: --pin and --numa would put every thread on that core, so they are refused, naming both */
TEST(numa_and_pin_refused_beside_omp_proc_bind) {
    const char *flags[] = {"--pin", "--numa"};
    for (int i = 0; i < 2; i++) {
        test_cli_result r = test_cli("OMP_PROC_BIND=close", "train --model tiny --data %s --steps 1 --threads 2 %s",
                                     test_shakespeare_data(), flags[i]);
        CHECK_MSG(r.rc == 2 && strstr(r.err, "OMP_PROC_BIND") && strstr(r.err, flags[i]) && test_count_lines(r.err) == 1,
                  "%s with OMP_PROC_BIND: rc %d, %s", flags[i], r.rc, r.err);
        test_cli_free(&r);
    }
}
