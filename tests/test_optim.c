/* test_optim.c — the global gradient norm: exact against a long-double sum on ragged sizes, and the
 * same bits for any thread count. */
#include "test.h"
#include "optim/optim.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>

TEST(optim_grad_norm_exact_and_thread_independent) {
    const size_t sizes[] = {0, 1, 7, 63, 64, 65, 1000, 1000003};
    float *g = malloc(sizeof(float) * 1000003);
    gptc_rng r;
    gptc_rng_seed(&r, 9);
    for (size_t i = 0; i < 1000003; i++) g[i] = (float)gptc_rng_normal(&r) * (i % 97 == 0 ? 30.0f : 0.01f);
    int saved = omp_get_max_threads();
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        size_t n = sizes[s];
        long double ref = 0;
        for (size_t i = 0; i < n; i++) ref += (long double)g[i] * g[i];
        double want = sqrtl(ref);
        omp_set_num_threads(1);
        double a = gptc_grad_norm(g, n);
        omp_set_num_threads(2);
        double b = gptc_grad_norm(g, n);
        omp_set_num_threads(3);
        double c = gptc_grad_norm(g, n);
        CHECK_MSG(fabs(a - want) <= 1e-12 * want, "n=%zu: norm %.17g want %.17g", n, a, want);
        CHECK_MSG(a == b && a == c, "n=%zu: thread counts differ (%.17g %.17g %.17g)", n, a, b, c);
    }
    omp_set_num_threads(saved);
    free(g);
}
