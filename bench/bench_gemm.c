/* bench_gemm.c — GFLOP/s of gptc's gemm (best level, ref), its bf16 gemm_bf16 (best level) and OpenBLAS on
 * GPT-2 124M shapes, each with its % of the measured fp32 or bf16 peak; Markdown table. */
#include <cblas.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "kernels/kernels.h"

typedef void (*gemm_fn)(int ta, int tb, int M, int N, int K, const float *A, int lda, const float *B, int ldb,
                        float beta, const float *bias, float *C, int ldc);

static void blas_gemm(int ta, int tb, int M, int N, int K, const float *A, int lda, const float *B, int ldb,
                      float beta, const float *bias, float *C, int ldc) {
    (void)bias; /* always NULL here: the bench times the product alone */
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, M, N, K, 1.0f, A,
                lda, B, ldb, beta, C, ldc);
}

/* The OpenBLAS library this process mapped (Debian's openblas-openmp or openblas-pthread build,
 * chosen by the alternatives system or LD_LIBRARY_PATH). */
static void loaded_blas(char *out, size_t cap) {
    snprintf(out, cap, "unknown");
    FILE *f = fopen("/proc/self/maps", "r");
    if (!f) return;
    char line[1024];
    while (fgets(line, sizeof line, f)) {
        char *path = strchr(line, '/');
        if (path && strstr(path, "libopenblas")) {
            path[strcspn(path, "\n")] = 0;
            snprintf(out, cap, "%s", path);
            break;
        }
    }
    fclose(f);
}

static int by_value(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Median GFLOP/s over repetitions: at least 3 (1 when one run exceeds max_one seconds), more for
 * short products until about 0.3 s have been spent (at most 15). */
static double measure(gemm_fn f, int ta, int tb, int M, int N, int K, const float *A, const float *B, float beta,
                      float *C, int ldc, double max_one) {
    double t[15];
    int n = 0;
    double spent = 0;
    int lda = ta ? M : K, ldb = tb ? K : N;
    f(ta, tb, M, N, K, A, lda, B, ldb, beta, NULL, C, ldc); /* warm-up: workspace, page faults */
    while (n < 15) {
        double t0 = gptc_now();
        f(ta, tb, M, N, K, A, lda, B, ldb, beta, NULL, C, ldc);
        t[n] = gptc_now() - t0;
        spent += t[n++];
        if (t[0] > max_one) break;
        if (n >= 3 && spent > 0.3) break;
    }
    qsort(t, n, sizeof t[0], by_value);
    return 2.0 * M * N * K / t[n / 2] * 1e-9;
}

int main(void) {
    const gptc_kernels *best = gptc_kernels_get(), *ref = gptc_kernels_ref();
    const int C = 768, V = 50257, Vp = 50304, BTs[2] = {256, 4096};
    const struct { const char *name; int ic, oc; } layers[] = {
        {"qkv", C, 3 * C}, {"attn proj", C, C}, {"fc", C, 4 * C}, {"fc proj", 4 * C, C}};
    size_t amax = (size_t)4096 * 4 * C, bmax = (size_t)V * C, cmax = (size_t)4096 * Vp;
    float *A = malloc(amax * sizeof(float)), *B = malloc(bmax * sizeof(float)), *Cb = malloc(cmax * sizeof(float));
    if (!A || !B || !Cb) { fprintf(stderr, "bench_gemm: out of memory\n"); return 1; }
    for (size_t i = 0; i < amax; i++) A[i] = (float)((i * 2654435761u) % 1000) * 1e-3f - 0.5f;
    for (size_t i = 0; i < bmax; i++) B[i] = (float)((i * 40503u) % 1000) * 1e-3f - 0.5f;
    for (size_t i = 0; i < cmax; i++) Cb[i] = 0.0f;

    double peak[3] = {0, gptc_peak_gflops(1), gptc_peak_gflops(2)};
    double bpeak[3] = {0, gptc_peak_bf16_gflops(1), gptc_peak_bf16_gflops(2)}; /* 0: no AVX512_BF16 */
    char blas[512];
    loaded_blas(blas, sizeof blas);
    printf("gemm: gptc %s vs ref vs OpenBLAS %s (%s); fp32 peak %.0f GFLOP/s (1 thread), %.0f (2 threads); "
           "bf16 peak %.0f (1 thread), %.0f (2 threads)\n\n",
           best->variant, openblas_get_config(), blas, peak[1], peak[2], bpeak[1], bpeak[2]);
    printf("| B·T | product | M×N×K | op | thr | gptc %s GFLOP/s (%% peak) | gptc %s gemm_bf16 (%% bf16 peak) "
           "| gptc ref | OpenBLAS |\n", best->variant, best->variant);
    printf("|---|---|---|---|---|---|---|---|---|\n");
    for (int b = 0; b < 2; b++) {
        int BT = BTs[b];
        for (int s = 0; s < 5; s++) {
            for (int p = 0; p < 3; p++) {
                int ta, tb, M, N, K, ldc;
                float beta;
                const char *name = s < 4 ? layers[s].name : "classifier", *op;
                if (s == 4) {
                    if (p > 0) break;
                    ta = 0, tb = 1, M = BT, N = V, K = C, ldc = Vp, beta = 0, op = "fwd NT";
                } else {
                    int IC = layers[s].ic, OC = layers[s].oc;
                    if (p == 0) ta = 0, tb = 0, M = BT, N = OC, K = IC, beta = 0, op = "fwd NN";
                    else if (p == 1) ta = 0, tb = 1, M = BT, N = IC, K = OC, beta = 1, op = "dinp NT";
                    else ta = 1, tb = 0, M = IC, N = OC, K = BT, beta = 1, op = "dW TN";
                    ldc = N;
                }
                for (int th = 1; th <= 2; th++) {
                    omp_set_num_threads(th);
                    openblas_set_num_threads(th);
                    double g = measure(best->gemm, ta, tb, M, N, K, A, B, beta, Cb, ldc, 1.0);
                    double h = measure(best->gemm_bf16, ta, tb, M, N, K, A, B, beta, Cb, ldc, 1.0);
                    char hs[64];
                    if (bpeak[th] > 0) snprintf(hs, sizeof hs, "%.1f (%.0f%%)", h, 100 * h / bpeak[th]);
                    else snprintf(hs, sizeof hs, "%.1f (—)", h); /* emulated: fp32 FMAs on rounded operands */
                    double o = measure(blas_gemm, ta, tb, M, N, K, A, B, beta, Cb, ldc, 1.0);
                    char rs[64] = "—";
                    if (BT == 256) {
                        double r = measure(ref->gemm, ta, tb, M, N, K, A, B, beta, Cb, ldc, 0.2);
                        snprintf(rs, sizeof rs, "%.1f (%.0f%%)", r, 100 * r / peak[th]);
                    }
                    printf("| %d | %s | %d×%d×%d | %s | %d | %.1f (%.0f%%) | %s | %s | %.1f (%.0f%%) |\n", BT, name, M, N,
                           K, op, th, g, 100 * g / peak[th], hs, rs, o, 100 * o / peak[th]);
                    fflush(stdout);
                }
            }
        }
    }
    free(A), free(B), free(Cb);
    return 0;
}
