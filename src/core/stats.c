/* stats.c — small statistics for the training log: a rolling window of step times (median, 95th
 * percentile, relative standard deviation) and the median of an array. */
#include "core.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double gptc_median(double *v, size_t n) {
    if (n == 0) return NAN;
    qsort(v, n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

void gptc_window_add(gptc_window *w, double x) {
    w->v[w->next] = x;
    w->next = (w->next + 1) % GPTC_WINDOW;
    if (w->n < GPTC_WINDOW) w->n++;
}

void gptc_spread(double *v, size_t n, double *p50, double *p95, double *stdev_pct) {
    *p50 = *p95 = *stdev_pct = 0;
    if (n == 0) return;
    double mean = 0, var = 0;
    for (size_t i = 0; i < n; i++) mean += v[i] / n;
    for (size_t i = 0; i < n; i++) var += (v[i] - mean) * (v[i] - mean) / n;
    *p50 = gptc_median(v, n); /* sorted from here on */
    size_t rank = (size_t)ceil(0.95 * n); /* nearest rank, 1-based */
    *p95 = v[rank < 1 ? 0 : rank - 1];
    *stdev_pct = mean > 0 ? 100.0 * sqrt(var) / mean : 0;
}

void gptc_window_stats(const gptc_window *w, double *p50, double *p95, double *stdev_pct) {
    double s[GPTC_WINDOW];
    memcpy(s, w->v, sizeof(double) * w->n);
    gptc_spread(s, w->n, p50, p95, stdev_pct);
}
