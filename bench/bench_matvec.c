/* bench_matvec.c — a decode step's weight stream: every matvec of one GPT-2 124M step (12 layers of qkv
 * (768,2304), attn proj (768,768), fc (768,3072), fc proj (3072,768), then the classifier over wte (50257
 * rows of 768)) in the four ways a decoder can read them — fp32 or bf16, the model's rows (the classifier
 * as dot products along wte's rows) or the panels gptc_matvec_pack makes (kernels.h GPTC_MV_PANELS) — for
 * S rows of x (samples), on the table `gptc info` reports. The formats alternate within each round so
 * the host's noise falls on all of them; prints the median ms per step, the weight bytes per second and
 * that against the cached STREAM triad (`gptc info`'s; measured now if none is cached).
 *   build/bench_matvec [ROUNDS [S...]]   (default 9 rounds, S = 1 4; threads: OMP_NUM_THREADS) */
#include "core/core.h"
#include "kernels/kernels.h"

#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { LAYERS = 12, C = 768, V = 50257, SITES = 5, MAX_S = 64 };

static int by_value(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void *buf(size_t bytes) {
    void *p = gptc_alloc(bytes, "bench buffer");
    if (!p) {
        fprintf(stderr, "bench_matvec: %s\n", gptc_last_error());
        exit(1);
    }
    return p;
}

/* one matrix of the step: op(W) (K,N); the classifier's W is wte (N,K) */
typedef struct site {
    int K, N, trans;
} site;
static const site k_sites[SITES] = {{C, 3 * C, 0}, {C, C, 0}, {C, 4 * C, 0}, {4 * C, C, 0}, {C, V, 1}};

/* the matrices of one step in one format: per layer and site, then the classifier */
typedef struct weights {
    int wfmt;
    const void *mat[LAYERS * 4 + 1];
    size_t bytes;
} weights;

static void make_weights(weights *w, int wfmt, gptc_rng *rng) {
    const int bf16 = wfmt & GPTC_MV_BF16, panels = wfmt & GPTC_MV_PANELS;
    const size_t es = bf16 ? sizeof(uint16_t) : sizeof(float);
    w->wfmt = wfmt, w->bytes = 0;
    for (int i = 0; i < LAYERS * 4 + 1; i++) {
        const site *s = &k_sites[i < LAYERS * 4 ? i % 4 : 4];
        size_t n = (size_t)s->K * s->N, stored = panels ? gptc_matvec_panel_elems(s->K, s->N) : n;
        float *f = buf(n * sizeof(float));
        for (size_t j = 0; j < n; j++) f[j] = 0.02f * (float)gptc_rng_normal(rng);
        void *m = buf(stored * es);
        if (panels)
            gptc_matvec_pack(m, bf16, f, s->trans ? s->K : s->N, s->trans, s->K, s->N);
        else if (bf16)
            for (size_t j = 0; j < n; j++) ((uint16_t *)m)[j] = gptc_f32_to_bf16(f[j]);
        else
            memcpy(m, f, n * sizeof(float));
        gptc_free(f);
        w->mat[i] = m;
        w->bytes += n * es; /* the weights' bytes, as the decoder's bound counts them */
    }
}

/* one step's matvecs for S rows of x: out (S, N) per site */
static double step_ms(const gptc_kernels *k, const weights *w, int S, const float *x, float *out) {
    double t0 = gptc_now();
    for (int i = 0; i < LAYERS * 4 + 1; i++) {
        const site *s = &k_sites[i < LAYERS * 4 ? i % 4 : 4];
        int trans = (w->wfmt & GPTC_MV_PANELS) ? 0 : s->trans, ldw = s->trans ? s->K : s->N;
        k->matvec(trans, w->wfmt, S, s->N, s->K, x, s->K, w->mat[i], ldw, NULL, out, s->N);
    }
    return (gptc_now() - t0) * 1e3;
}

int main(int argc, char **argv) {
    int rounds = argc > 1 ? atoi(argv[1]) : 9, nS = 0, Ss[8];
    for (int a = 2; a < argc && nS < 8; a++) Ss[nS++] = atoi(argv[a]);
    if (!nS) Ss[nS++] = 1, Ss[nS++] = 4;
    if (rounds < 1 || rounds > 1000) {
        fprintf(stderr, "bench_matvec: ROUNDS %d: give 1..1000\n", rounds);
        return 2;
    }
    for (int i = 0; i < nS; i++)
        if (Ss[i] < 1 || Ss[i] > MAX_S) {
            fprintf(stderr, "bench_matvec: S %d: give 1..%d\n", Ss[i], MAX_S);
            return 2;
        }
    const gptc_kernels *k = gptc_kernels_get();
    const int threads = omp_get_max_threads();
    double triad = gptc_triad_cached(NULL, threads, true, NULL);
    gptc_rng rng;
    gptc_rng_seed(&rng, 7);
    static const int fmts[4] = {0, GPTC_MV_PANELS, GPTC_MV_BF16, GPTC_MV_BF16 | GPTC_MV_PANELS};
    static const char *const names[4] = {"fp32, rows", "fp32, panels", "bf16, rows", "bf16, panels"};
    weights w[4];
    for (int f = 0; f < 4; f++) make_weights(&w[f], fmts[f], &rng);
    float *x = buf(sizeof(float) * MAX_S * 4 * C), *out = buf(sizeof(float) * MAX_S * (size_t)V);
    for (int i = 0; i < MAX_S * 4 * C; i++) x[i] = (float)gptc_rng_normal(&rng);
    double *t = buf(sizeof(double) * (size_t)rounds * 4);
    printf("GPT-2 124M decode step's weights (%d matvecs), %s table, %d threads, triad %.2f GB/s (cached), "
           "%d rounds alternating the formats; medians\n\n",
           LAYERS * 4 + 1, k->variant, threads, triad, rounds);
    printf("| S | weights | MB per step | ms per step | GB/s | %% of triad |\n|---:|---|---:|---:|---:|---:|\n");
    for (int si = 0; si < nS; si++) {
        int S = Ss[si];
        for (int f = 0; f < 4; f++) step_ms(k, &w[f], S, x, out); /* warm-up */
        for (int r = 0; r < rounds; r++)
            for (int f = 0; f < 4; f++) t[f * rounds + r] = step_ms(k, &w[f], S, x, out);
        for (int f = 0; f < 4; f++) {
            qsort(t + f * rounds, (size_t)rounds, sizeof(double), by_value);
            double ms = t[f * rounds + rounds / 2], gbps = w[f].bytes / (ms * 1e-3) / 1e9;
            printf("| %d | %s | %.1f | %.2f | %.2f | %.1f %% |\n", S, names[f], w[f].bytes / 1e6, ms, gbps,
                   triad > 0 ? 100.0 * gbps / triad : 0.0);
        }
    }
    return 0;
}
