/* peak.c — the machine's measured peaks: the fp32 FMA probe of the widest ISA this CPU runs, and the
 * bf16 probe of the instruction gemm_bf16 uses (tdpbf16ps with AMX-BF16, else vdpbf16ps with
 * AVX512_BF16), on every thread at once, best of a few timed rounds (the first round also warms the
 * clocks). */
#include "kernels/kernels.h"
#include "kernels/x86_amx/amx.h"
#include "kernels/x86_avx2/avx2.h"
#include "kernels/x86_avx512/avx512.h"
#include "core/core.h"
#include "kernels/gemm/gemm_driver.h"

#include <omp.h>

#if defined(__x86_64__) || defined(__i386__) /* the probes are built for an x86 target only (Makefile) */
/* GFLOP/s of probe(iters) on nt threads, flops_per_iter FLOPs per iteration, best of 10 rounds (~0.4 s
 * in all), so that another process taking a core for part of the time does not halve the figure. */
static double measure(float (*probe)(long), long iters, double flops_per_iter, int threads) {
    int nt = threads > 0 ? threads : omp_get_max_threads();
    double best = 0;
    volatile float sink = 0;
    for (int round = 0; round < 10; round++) {
        double t0 = gptc_now();
#pragma omp parallel num_threads(nt)
        {
            float r = probe(iters);
#pragma omp atomic
            sink += r;
        }
        double dt = gptc_now() - t0;
        double gflops = (double)nt * iters * flops_per_iter / dt / 1e9;
        if (gflops > best) best = gflops;
    }
    return best;
}
#endif

double gptc_peak_gflops(int threads) {
#if defined(__x86_64__) || defined(__i386__) /* the probes are built for an x86 target only (Makefile) */
    /* 12 FMAs of 16 (AVX-512) or 8 (AVX2) lanes per iteration, 2 FLOPs each */
    /* 2e6 iterations: ~ 0.4 GFLOP (fp32) / 0.8 GFLOP (vdpbf16ps) per thread per round */
    if (gptc_kernels_level("avx512")) return measure(gptc_avx512_fma_probe, 2000000, 12.0 * 16 * 2, threads);
    if (gptc_kernels_level("avx2")) return measure(gptc_avx2_fma_probe, 2000000, 12.0 * 8 * 2, threads);
#endif
    return 0; /* no FMA: no meaningful peak */
}

const char *gptc_peak_bf16_kind(void) {
    return gptc_kernels_gemm_bf16_is_amx(gptc_kernels_get()) ? "amx_bf16" : "bf16";
}

double gptc_peak_bf16_gflops(int threads) {
#if defined(__x86_64__) || defined(__i386__) /* the probes are built for an x86 target only (Makefile) */
    /* 6 tdpbf16ps per iteration, 16 x 16 x 32 multiply-adds each; 16 cycles apiece on Sapphire Rapids,
     * so 3e5 iterations are ~ 30 ms (~ 29 GFLOP) per thread per round */
    if (gptc_kernels_gemm_bf16_is_amx(gptc_kernels_get()))
        return measure(gptc_amx_bf16_probe, 300000, 6.0 * 16 * 16 * 32 * 2, threads);
    /* 12 vdpbf16ps per iteration, 32 multiply-adds each (16 lanes x a pair), 2 FLOPs each */
    if (gptc_kernels_level("avx512") && gptc_cpu()->avx512bf16)
        return measure(gptc_avx512_bf16_probe, 2000000, 12.0 * 32 * 2, threads);
#endif
    return 0;
}

bool gptc_gemm_bf16_uses_dpbf16(void) {
    const gptc_gemm_isa *g = gptc_kernels_get()->gemm_bf16_isa;
    return g && g->esize == 2;
}
