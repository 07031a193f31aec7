/* threads.c — the OpenMP thread count, set once per run. */
#include "core.h"

#include <omp.h>

void gptc_set_threads(int n) {
    if (n > 0) omp_set_num_threads(n);
}

int gptc_threads(void) { return omp_get_max_threads(); }
