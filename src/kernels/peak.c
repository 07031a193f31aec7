/* peak.c — the machine's measured fp32 peak: the FMA probe of the widest ISA this CPU runs, on
 * every thread at once, best of a few timed rounds (the first round also warms the clocks). */
#include "kernels/kernels.h"
#include "kernels/x86_avx2/avx2.h"
#include "kernels/x86_avx512/avx512.h"
#include "core/core.h"

#include <omp.h>

double gptc_peak_gflops(int threads) {
    const gptc_cpu_info *c = gptc_cpu();
    int lanes = 0;
    float (*probe)(long) = NULL;
    if (gptc_kernels_level("avx512")) lanes = 16, probe = gptc_avx512_fma_probe;
    else if (gptc_kernels_level("avx2")) lanes = 8, probe = gptc_avx2_fma_probe;
    (void)c;
    if (!probe) return 0; /* no FMA: no meaningful peak */
    int nt = threads > 0 ? threads : omp_get_max_threads();
    const long iters = 2000000; /* ~ 0.4 GFLOP per thread per round */
    double best = 0;
    volatile float sink = 0;
    for (int round = 0; round < 4; round++) {
        double t0 = gptc_now();
#pragma omp parallel num_threads(nt)
        {
            float r = probe(iters);
#pragma omp atomic
            sink += r;
        }
        double dt = gptc_now() - t0;
        double gflops = (double)nt * iters * 12 * lanes * 2 / dt / 1e9;
        if (gflops > best) best = gflops;
    }
    return best;
}
