/* sumsq.c — the reference grad_sumsq entry: the sum of squares under the global gradient norm
 * (optim/optim.h gptc_grad_sumsq), moved here unchanged from optim/schedule.c. */
#include "kernels/kernels.h"

/* The sum of squares in GPTC_SUMSQ_CHUNKS fixed chunks, each summed in 8 independent double lanes (which the
 * compiler vectorises, and which keep the adds off one latency chain), then added in chunk order:
 * the same bits for any thread count. x (n). */
double gptc_grad_sumsq_ref(const float *g, size_t n) {
    double partial[GPTC_SUMSQ_CHUNKS];
    size_t per = (n + GPTC_SUMSQ_CHUNKS - 1) / GPTC_SUMSQ_CHUNKS;
    per = (per + 7) & ~(size_t)7;
#pragma omp parallel for schedule(static)
    for (int c = 0; c < GPTC_SUMSQ_CHUNKS; c++) {
        size_t lo = (size_t)c * per < n ? (size_t)c * per : n, hi = lo + per < n ? lo + per : n;
        double lane[8] = {0};
        size_t i = lo;
        for (; i + 8 <= hi; i += 8)
            for (int j = 0; j < 8; j++) lane[j] += (double)g[i + j] * g[i + j];
        for (; i < hi; i++) lane[i & 7] += (double)g[i] * g[i];
        partial[c] = ((lane[0] + lane[1]) + (lane[2] + lane[3])) + ((lane[4] + lane[5]) + (lane[6] + lane[7]));
    }
    double total = 0;
    for (int c = 0; c < GPTC_SUMSQ_CHUNKS; c++) total += partial[c];
    return total;
}
