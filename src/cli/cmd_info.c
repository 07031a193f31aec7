/* cmd_info.c — `gptc info`: the CPU's features, the CUDA devices (a build with make CUDA=1), the kernel variant of every operator, the measured FLOP/s
 * peaks and memory bandwidth, presets. */
#include "cli/commands.h"
#include "backend/cuda.h"
#include "core/core.h"
#include "kernels/kernels.h"
#include "kernels/gemm/gemm_driver.h"
#include "kernels/attention.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

int gptc_cmd_info(int argc, char **argv) {
    if (argc > 0 && (strcmp(argv[0], "--help") == 0 || strcmp(argv[0], "-h") == 0)) {
        printf("usage: gptc info\nShows the CPU, the CUDA devices (built with make CUDA=1), the kernel variant of every operator, the measured FMA peaks and memory bandwidth, the model presets and the GELU forms.\n");
        return 0;
    }
    if (argc > 0) {
        fprintf(stderr, "gptc: %s: unexpected argument (gptc info takes none)\n", argv[0]);
        return 2;
    }
    const gptc_cpu_info *c = gptc_cpu();
    printf("cpu: %s (%s), %d logical cpus, %d OpenMP threads\n", c->brand, c->vendor, c->logical_cpus, gptc_threads());
    /* amx_bf16 counts the process's permission for the tiles too (asked for here, as the dispatch does) */
    printf("features: sse4.2=%d avx=%d avx2=%d fma=%d avx512f=%d avx512bw=%d avx512vl=%d avx512_bf16=%d "
           "amx_bf16=%d (os saves ymm=%d zmm=%d tiles=%d%s)\n",
           c->sse42, c->avx, c->avx2, c->fma, c->avx512f, c->avx512bw, c->avx512vl, c->avx512bf16,
           gptc_cpu_amx_usable(), c->os_avx, c->os_avx512, c->os_amx,
           c->amx_bf16 && !gptc_cpu_amx_usable() ? "; Linux refused this process the tile state" : "");
    printf("numa nodes: %d (gptc train --numa places each arena part on the node of the thread that uses it)\n",
           gptc_numa_nodes());
    printf("family %d model %d%s; caches: L1d %ld KiB, L2 %ld KiB per core, L3 %ld MiB (0: unknown)\n", c->family,
           c->model, c->fma512_half_width ? ", 512-bit FMAs at half width" : "", c->l1d_bytes >> 10,
           c->l2_bytes >> 10, c->l3_bytes >> 20);
    if (!gptc_cuda_built()) {
        printf("gpus: built without CUDA (make CUDA=1)\n");
    } else {
        int n = gptc_cuda_device_count();
        printf("gpus: %d CUDA device%s%s\n", n, n == 1 ? "" : "s", n ? " (gptc train --device cuda:N)" : "");
        for (int i = 0; i < n; i++) {
            gptc_cuda_device_info d;
            if (gptc_cuda_device_info_get(i, &d)) continue;
            printf("  cuda:%d %s, %d SMs, compute capability %d.%d, memory %.1f GiB (%.1f GiB free)\n", i, d.name, d.sms,
                   d.cc_major, d.cc_minor, d.mem_total / 1073741824.0, d.mem_free / 1073741824.0);
        }
    }
    const gptc_kernels *k = gptc_kernels_get();
    for (int b = 0; b < 2; b++) {
        const gptc_gemm_isa *g = b ? k->gemm_bf16_isa : k->gemm_isa;
        if (g)
            printf("gemm%s blocking: %dx%d micro-tile, mc %d kc %d nc %d, %s in L1%s\n", b ? "_bf16" : "", g->mr,
                   g->nr, g->mc, g->kc, g->nc, g->order == GPTC_GEMM_A_IN_L1 ? "A micro-panel" : "B micro-panel",
                   !b ? "" : g->esize == 2 ? ", vdpbf16ps on bf16 pairs" : ", fp32 FMAs on bf16-rounded operands");
    }
    printf("kernels (%s):", k->variant);
    for (int i = 0; i < gptc_kernel_nops; i++) printf(" %s=%s", gptc_kernel_ops[i].name, gptc_kernels_op_variant(k, i));
    printf("\nflash attention (used by training; attention_* above are the naive reference and decoding): %s; "
           "--dtype bf16 runs %s",
           gptc_flash_variant(), gptc_flash_bf16_variant());
    double p1 = gptc_peak_gflops(1), pn = gptc_peak_gflops(0);
    printf("\npeak (measured, fp32 FMA): %.1f GFLOP/s on 1 thread, %.1f GFLOP/s on %d threads\n", p1, pn, gptc_threads());
    double b1 = gptc_peak_bf16_gflops(1), bn = b1 > 0 ? gptc_peak_bf16_gflops(0) : 0;
    if (b1 > 0)
        printf("peak (measured, bf16 %s): %.1f GFLOP/s on 1 thread, %.1f GFLOP/s on %d threads\n",
               strcmp(gptc_peak_bf16_kind(), "amx_bf16") == 0 ? "AMX tdpbf16ps" : "vdpbf16ps", b1, bn, gptc_threads());
    else
        printf("peak (bf16): no AVX512_BF16 (gemm_bf16 rounds operands and uses fp32 FMAs)\n");
    double m1 = gptc_triad_gbps(1), mn = gptc_triad_gbps(0);
    size_t llc = gptc_cache_bytes(0);
    if (m1 > 0)
        printf("memory bandwidth (measured, STREAM triad a = b + s*c, 12 bytes/element): %.1f GB/s on 1 thread, "
               "%.1f GB/s on %d threads (arrays of 4x the %.0f MiB last-level cache, at most 256 MiB)\n",
               m1, mn, gptc_threads(), llc / 1048576.0);
    else
        printf("memory bandwidth: the triad's arrays could not be mapped\n");
    /* what training measures MFU and the profile's %% bw against: these probes update its cache where
     * they read higher */
    if (p1 > 0) gptc_peak_cache_offer(NULL, 0, 1, round(p1 * 100) / 100);
    if (pn > 0) gptc_peak_cache_offer(NULL, 0, 0, round(pn * 100) / 100);
    if (b1 > 0) gptc_peak_cache_offer(NULL, 1, 1, round(b1 * 100) / 100);
    if (bn > 0) gptc_peak_cache_offer(NULL, 1, 0, round(bn * 100) / 100);
    if (m1 > 0) gptc_triad_cache_offer(NULL, 1, round(m1 * 100) / 100);
    if (mn > 0) gptc_triad_cache_offer(NULL, 0, round(mn * 100) / 100);
    char cache[4096];
    gptc_peak_cache_file(NULL, cache, sizeof cache);
    printf("peak cache (the larger of these and earlier probes, per thread count): %s\n", cache);
    printf("presets:\n");
    /* the one preset list (src/model/config.c), "a, b, c" */
    const char *list = gptc_model_preset_names();
    while (*list) {
        char name[32];
        size_t len = strcspn(list, ",");
        snprintf(name, sizeof name, "%.*s", (int)len, list);
        list += len;
        while (*list == ',' || *list == ' ') list++;
        gptc_model_config m;
        if (gptc_model_preset(name, &m)) continue;
        int vocab_given = m.vocab;
        if (!m.vocab) m.vocab = 257;
        printf("  %-12s layers %2d heads %2d channels %4d context %4d vocab %s  %8.2fM params%s\n", name, m.layers,
               m.heads, m.channels, m.context, vocab_given ? "50257" : "data ", gptc_model_num_params(&m) / 1e6,
               vocab_given ? "" : " (with the byte vocab)");
    }
    printf("gelu forms (train --gelu): tanh (GPT-2's, the default), erf, sigmoid\n");
    return 0;
}
