/* bench_attention.c — causal attention forward+backward: the materialised reference (qkv (B,T,3C),
 * preatt/att (B,NH,T,T) kept) against flash attention (O and LSE kept, the best variant, timed
 * with and without the layout conversions), B=4 NH=12 HS=64 at T = 64, 256, 1024 by default
 * (`build/bench_attention [RUNS [T...]]`); prints a Markdown table of median times. A second table
 * times the fp32 AVX-512 flash against the bf16 mixed-precision flash (gptc_flash_fwd_bf16(), the
 * vdpbf16ps kernel where the table uses it, and then also the fp32-FMA bf16 kernel beside it), forward
 * and backward separately. */
#include "core/core.h"
#include "kernels/attention.h"
#include "kernels/kernels.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int by_value(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static float *buf(size_t n) {
    float *p = gptc_alloc(n * sizeof(float), "bench buffer");
    if (!p) {
        fprintf(stderr, "bench_attention: %s\n", gptc_last_error());
        exit(1);
    }
    return p;
}

static double median(double *t, int n) {
    qsort(t, (size_t)n, sizeof *t, by_value);
    return t[n / 2];
}

/* Median forward and backward times (ms) of one flash variant on random head-major q, k, v, dO. */
static void time_flash(double ms[2], gptc_flash_fwd_fn fwd, gptc_flash_bwd_fn bwd, int runs, int B, int NH, int T,
                       int HS, gptc_rng *rng) {
    size_t n = (size_t)B * NH * T * HS, nl = (size_t)B * NH * T;
    float *q = buf(n), *k = buf(n), *v = buf(n), *o = buf(n), *lse = buf(nl), *dO = buf(n);
    float *dq = buf(n), *dk = buf(n), *dv = buf(n);
    float *in[] = {q, k, v, dO};
    for (int a = 0; a < 4; a++)
        for (size_t i = 0; i < n; i++) in[a][i] = (float)gptc_rng_normal(rng);
    double tf[100], tb[100];
    for (int r = 0; r < runs; r++) {
        double t0 = gptc_now();
        fwd(o, lse, q, k, v, B, NH, T, HS, 0.0f, 0);
        double t1 = gptc_now();
        bwd(dq, dk, dv, dO, q, k, v, o, lse, B, NH, T, HS, 0.0f, 0);
        tf[r] = t1 - t0, tb[r] = gptc_now() - t1;
    }
    ms[0] = median(tf, runs) * 1e3, ms[1] = median(tb, runs) * 1e3;
    float *all[] = {q, k, v, o, lse, dO, dq, dk, dv};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) gptc_free(all[i]);
}

int main(int argc, char **argv) {
    int runs = argc > 1 ? atoi(argv[1]) : 5;
    int Ts[16] = {64, 256, 1024}, nT = 3;
    if (argc > 2) {
        nT = 0;
        for (int a = 2; a < argc && nT < 16; a++) Ts[nT++] = atoi(argv[a]);
    }
    if (runs < 1 || runs > 100) {
        fprintf(stderr, "usage: %s [RUNS (1..100) [T...]]\n", argv[0]);
        return 2;
    }
    const int B = 4, NH = 12, HS = 64, C = NH * HS;
    const gptc_kernels *ref = gptc_kernels_ref();
    gptc_flash_fwd_fn ffwd = gptc_flash_fwd();
    gptc_flash_bwd_fn fbwd = gptc_flash_bwd();
    gptc_rng rng;
    gptc_rng_seed(&rng, 1);
    printf("B=%d NH=%d HS=%d, %d threads, flash variant %s, median of %d runs (fwd+bwd, ms)\n\n", B, NH, HS,
           gptc_threads(), gptc_flash_variant(), runs);
    printf("| T | reference ms | flash ms | flash+conversions ms | speedup | reference kept (MiB) | flash kept "
           "(MiB) |\n|---:|---:|---:|---:|---:|---:|---:|\n");
    for (int ti = 0; ti < nT; ti++) {
        int T = Ts[ti];
        size_t nqkv = (size_t)B * T * 3 * C, nrow = (size_t)B * T * C, natt = (size_t)B * NH * T * T;
        size_t nl = (size_t)B * NH * T;
        float *qkv = buf(nqkv), *dout = buf(nrow), *dqkv = buf(nqkv), *out = buf(nrow);
        for (size_t i = 0; i < nqkv; i++) qkv[i] = (float)gptc_rng_normal(&rng);
        for (size_t i = 0; i < nrow; i++) dout[i] = (float)gptc_rng_normal(&rng);
        double tr[100], tf[100], tc[100];
        {
            float *preatt = buf(natt), *att = buf(natt), *dpre = buf(natt), *datt = buf(natt);
            for (int r = 0; r < runs; r++) {
                double t0 = gptc_now();
                ref->attention_fwd(out, preatt, att, qkv, B, T, C, NH);
                ref->attention_bwd(dqkv, dpre, datt, dout, qkv, att, B, T, C, NH);
                tr[r] = gptc_now() - t0;
            }
            gptc_free(preatt), gptc_free(att), gptc_free(dpre), gptc_free(datt);
        }
        float *q = buf(nrow), *k = buf(nrow), *v = buf(nrow), *o = buf(nrow), *lse = buf(nl), *dO = buf(nrow);
        float *dq = buf(nrow), *dk = buf(nrow), *dv = buf(nrow);
        for (int r = 0; r < runs; r++) {
            double t0 = gptc_now();
            gptc_qkv_to_heads(q, k, v, qkv, B, T, C, NH);
            double t1 = gptc_now();
            ffwd(o, lse, q, k, v, B, NH, T, HS, 0.0f, 0);
            double t2 = gptc_now();
            gptc_heads_to_rows(out, o, B, T, C, NH);
            gptc_rows_to_heads(dO, dout, B, T, C, NH);
            memset(dq, 0, nrow * sizeof *dq), memset(dk, 0, nrow * sizeof *dk), memset(dv, 0, nrow * sizeof *dv);
            double t3 = gptc_now();
            fbwd(dq, dk, dv, dO, q, k, v, o, lse, B, NH, T, HS, 0.0f, 0);
            double t4 = gptc_now();
            gptc_heads_to_qkv_grad(dqkv, dq, dk, dv, B, T, C, NH);
            double t5 = gptc_now();
            tf[r] = (t2 - t1) + (t4 - t3);
            tc[r] = (t5 - t0);
        }
        double mr = median(tr, runs) * 1e3, mf = median(tf, runs) * 1e3, mc = median(tc, runs) * 1e3;
        double kept_ref = 2.0 * natt * sizeof(float) / 1048576.0;
        double kept_flash = (double)nl * (HS + 1) * sizeof(float) / 1048576.0;
        printf("| %d | %.2f | %.2f | %.2f | %.1fx | %.2f | %.2f |\n", T, mr, mf, mc, mr / mc, kept_ref, kept_flash);
        fflush(stdout);
        float *all[] = {qkv, dout, dqkv, out, q, k, v, o, lse, dO, dq, dk, dv};
        for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) gptc_free(all[i]);
    }

    if (!gptc_kernels_level("avx512")) {
        printf("\n(no AVX-512: the fp32 AVX-512 vs bf16 table is skipped)\n");
        return 0;
    }
    /* the bf16 flash in use, and the fp32-FMA one beside it where that is another (vdpbf16ps in use) */
    const int both = gptc_flash_fwd_bf16() != gptc_flash_fwd_bf16_avx512;
    printf("\nfp32 AVX-512 flash vs bf16 flash (%s%s), B=%d NH=%d HS=%d, median of %d runs (ms)\n\n",
           gptc_flash_bf16_variant(), both ? "; and avx512, its fp32 FMAs on rounded operands" : "", B, NH, HS, runs);
    printf("| T | fp32 fwd | bf16 fwd | fwd speedup |%s fp32 bwd | bf16 bwd | bwd speedup |%s\n"
           "|---:|---:|---:|---:|%s---:|---:|---:|%s\n",
           both ? " avx512 bf16 fwd |" : "", both ? " avx512 bf16 bwd |" : "", both ? "---:|" : "",
           both ? "---:|" : "");
    for (int ti = 0; ti < nT; ti++) {
        int T = Ts[ti];
        double f[2], h[2], e[2];
        time_flash(f, gptc_flash_fwd_avx512, gptc_flash_bwd_avx512, runs, B, NH, T, HS, &rng);
        time_flash(h, gptc_flash_fwd_bf16(), gptc_flash_bwd_bf16(), runs, B, NH, T, HS, &rng);
        if (both) time_flash(e, gptc_flash_fwd_bf16_avx512, gptc_flash_bwd_bf16_avx512, runs, B, NH, T, HS, &rng);
        printf("| %d | %.2f | %.2f | %.2fx |", T, f[0], h[0], f[0] / h[0]);
        if (both) printf(" %.2f |", e[0]);
        printf(" %.2f | %.2f | %.2fx |", f[1], h[1], f[1] / h[1]);
        if (both) printf(" %.2f |", e[1]);
        printf("\n");
        fflush(stdout);
    }
    return 0;
}
