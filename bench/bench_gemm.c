/* bench_gemm.c — every matrix product of a GPT-2 124M training step, at B·T = 256, 1024 and 4096:
 * GFLOP/s of gptc's gemm (best level; the reference at B·T = 256), its bf16 gemm_bf16 and OpenBLAS
 * called directly (cblas_sgemm), each the median of --reps runs after one warm-up, with its % of the
 * fp32 or bf16 peak gptc measures; a Markdown table. Products per layer: qkv, attn proj, fc, fc proj,
 * each fwd (NN), dinp (NT) and dW (TN); the tied classifier on the row chunks the fused classifier
 * runs (GPTC_CLASSIFIER_CHUNK rows at a time): fwd (x · wte^T, NT), dinp (dlogits · wte, NN) and dW
 * (dlogits^T · x, TN). The first lines say which OpenBLAS runs (openblas_get_config, its kernel set,
 * the library mapped, its threading and thread count, the environment that chose them);
 * bench/gemm.sh runs this in the peer's strongest configuration (bench/lib.sh).
 *   bench_gemm [--bt N[,N...]] [--threads N[,N...]] [--product TEXT] [--reps N]
 * e.g. bench_gemm --bt 1024 --threads 2 --product fc */
#include <cblas.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/core.h"
#include "kernels/kernels.h"
#include "model/gpt2.h"

static void blas_gemm(int ta, int tb, int M, int N, int K, const float *A, int lda, const float *B, int ldb,
                      float beta, const float *bias, float *C, int ldc) {
    (void)bias; /* always NULL here: the bench times the product alone */
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, M, N, K, 1.0f, A,
                lda, B, ldb, beta, C, ldc);
}

/* The path of the OpenBLAS library this process mapped (Debian's openblas-openmp or openblas-pthread
 * build, chosen by the alternatives system or LD_LIBRARY_PATH). */
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

/* One product as the step calls it: C (M,N) = beta*C + op(A) op(B), with its strides. */
typedef struct {
    const char *name, *op;
    int ta, tb, M, N, K, lda, ldb, ldc;
    float beta;
    int per_step; /* calls per step at this B·T: layers x 1, or the classifier's chunks */
} product;

/* The 15 products of a step at B·T = BT into p[]; returns the count. */
static int step_products(int BT, product *p) {
    const int C = 768, V = 50257, Vp = 50304, L = 12, R = BT < GPTC_CLASSIFIER_CHUNK ? BT : GPTC_CLASSIFIER_CHUNK;
    const struct { const char *name; int ic, oc; } layers[] = {
        {"qkv", C, 3 * C}, {"attn proj", C, C}, {"fc", C, 4 * C}, {"fc proj", 4 * C, C}};
    int n = 0;
    for (int s = 0; s < 4; s++) {
        int IC = layers[s].ic, OC = layers[s].oc;
        /* out (BT,OC) = inp (BT,IC) W (IC,OC); dinp (BT,IC) = dout (BT,OC) W^T; dW (IC,OC) += inp^T dout */
        p[n++] = (product){layers[s].name, "fwd NN", 0, 0, BT, OC, IC, IC, OC, OC, 0.0f, L};
        p[n++] = (product){layers[s].name, "dinp NT", 0, 1, BT, IC, OC, OC, OC, IC, 1.0f, L};
        p[n++] = (product){layers[s].name, "dW TN", 1, 0, IC, OC, BT, IC, OC, OC, 1.0f, L};
    }
    int chunks = (BT + GPTC_CLASSIFIER_CHUNK - 1) / GPTC_CLASSIFIER_CHUNK;
    /* logits (R,Vp) = x (R,C) wte^T (wte (V,C)); dx (R,C) = dlogits (R,Vp) wte; dwte (V,C) += dlogits^T x */
    p[n++] = (product){"classifier", "fwd NT", 0, 1, R, V, C, C, C, Vp, 0.0f, chunks};
    p[n++] = (product){"classifier", "dinp NN", 0, 0, R, C, V, Vp, C, C, 0.0f, chunks};
    p[n++] = (product){"classifier", "dW TN", 1, 0, V, C, R, Vp, C, C, 1.0f, chunks};
    return n;
}

static size_t a_floats(const product *p) { return (size_t)(p->ta ? p->K : p->M) * p->lda; }
static size_t b_floats(const product *p) { return (size_t)(p->tb ? p->N : p->K) * p->ldb; }
static size_t c_floats(const product *p) { return (size_t)p->M * p->ldc; }

/* Median GFLOP/s of reps runs after one warm-up (workspace, page faults). */
static double measure(gptc_gemm_fn f, const product *p, const float *A, const float *B, float *C, int reps) {
    double t[64];
    f(p->ta, p->tb, p->M, p->N, p->K, A, p->lda, B, p->ldb, p->beta, NULL, C, p->ldc);
    for (int i = 0; i < reps; i++) {
        double t0 = gptc_now();
        f(p->ta, p->tb, p->M, p->N, p->K, A, p->lda, B, p->ldb, p->beta, NULL, C, p->ldc);
        t[i] = gptc_now() - t0;
    }
    return 2.0 * p->M * p->N * p->K / gptc_median(t, (size_t)reps) * 1e-9;
}

/* Parses "N[,N...]" of integers in [1, max] into v (at most cap); returns the count, 0 when malformed. */
static int parse_list(const char *s, int *v, int cap, int max) {
    int n = 0;
    while (*s && n < cap) {
        char *end;
        long x = strtol(s, &end, 10);
        if (end == s || x < 1 || x > max || (*end && *end != ',')) return 0;
        v[n++] = (int)x;
        s = *end ? end + 1 : end;
    }
    return *s ? 0 : n;
}

static int usage(void) {
    printf("usage: bench_gemm [--bt N[,N...]] [--threads N[,N...]] [--product TEXT] [--reps N]\n"
           "  --bt       B*T of the step (default 256,1024,4096)\n"
           "  --threads  thread counts (default 1 and omp_get_max_threads(), i.e. OMP_NUM_THREADS)\n"
           "  --product  only the rows whose \"product op\" contains TEXT, e.g. classifier, \"fc fwd\", dW\n"
           "  --reps     timed runs per figure, after one warm-up; the median is shown (default 5)\n");
    return 0;
}

/* One line on stderr naming what was refused; exit status 2. */
static int refuse(const char *msg) {
    fprintf(stderr, "bench_gemm: %s; bench_gemm --help lists the options\n", msg);
    return 2;
}

int main(int argc, char **argv) {
    int bts[8] = {256, 1024, 4096}, nbt = 3, ths[8] = {1, omp_get_max_threads()}, nth = ths[1] > 1 ? 2 : 1, reps = 5;
    const char *only = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) return usage();
        if (!v) return refuse("every option takes a value");
        if (!strcmp(a, "--bt")) {
            if (!(nbt = parse_list(v, bts, 8, 1 << 16))) return refuse("--bt: expected N[,N...], 1 <= N <= 65536");
        } else if (!strcmp(a, "--threads")) {
            if (!(nth = parse_list(v, ths, 8, 4096))) return refuse("--threads: expected N[,N...], 1 <= N <= 4096");
        } else if (!strcmp(a, "--product")) {
            only = v;
        } else if (!strcmp(a, "--reps")) {
            if (parse_list(v, &reps, 1, 64) != 1) return refuse("--reps: expected N, 1 <= N <= 64");
        } else {
            char msg[160];
            snprintf(msg, sizeof msg, "unknown option '%.100s' (expected --bt, --threads, --product or --reps)", a);
            return refuse(msg);
        }
        i++;
    }

    /* the products to run, and the largest operands among them */
    product prods[8][16];
    int np[8];
    size_t amax = 1, bmax = 1, cmax = 1;
    for (int b = 0; b < nbt; b++) {
        product all[16];
        int n = step_products(bts[b], all);
        np[b] = 0;
        for (int j = 0; j < n; j++) {
            char label[64];
            snprintf(label, sizeof label, "%s %s", all[j].name, all[j].op);
            if (only && !strcasestr(label, only)) continue;
            prods[b][np[b]++] = all[j];
            if (a_floats(&all[j]) > amax) amax = a_floats(&all[j]);
            if (b_floats(&all[j]) > bmax) bmax = b_floats(&all[j]);
            if (c_floats(&all[j]) > cmax) cmax = c_floats(&all[j]);
        }
    }
    /* the trainer's allocator (2 MiB pages where the kernel grants them), for both sides: the classifier's
     * operands of 150-200 MiB on 4 KiB pages ran at 46-62 % of peak on 2 threads (gptc and OpenBLAS alike
     * lost) against 84-88 % in a training step's profile */
    float *A = gptc_alloc(amax * sizeof(float), "bench A"), *B = gptc_alloc(bmax * sizeof(float), "bench B");
    float *Cb = gptc_alloc(cmax * sizeof(float), "bench C");
    if (!A || !B || !Cb) {
        fprintf(stderr, "bench_gemm: out of memory; fewer --bt values need less\n");
        return 1;
    }
    for (size_t i = 0; i < amax; i++) A[i] = (float)((i * 2654435761u) % 1000) * 1e-3f - 0.5f;
    for (size_t i = 0; i < bmax; i++) B[i] = (float)((i * 40503u) % 1000) * 1e-3f - 0.5f;
    for (size_t i = 0; i < cmax; i++) Cb[i] = 0.0f;

    const gptc_kernels *best = gptc_kernels_get(), *ref = gptc_kernels_ref();
    char blas[512];
    loaded_blas(blas, sizeof blas);
    const char *par[] = {"sequential", "pthreads", "OpenMP"};
    int pm = openblas_get_parallel(); /* 0 sequential, 1 pthreads, 2 OpenMP */
    const char *env_ct = getenv("OPENBLAS_CORETYPE"), *env_l2 = getenv("OPENBLAS_L2_SIZE");
    const char *bind = getenv("OMP_PROC_BIND"), *places = getenv("OMP_PLACES");
    printf("OpenBLAS: %s; kernels %s; %s; %s threading, %d threads at start; OPENBLAS_CORETYPE=%s, "
           "OPENBLAS_L2_SIZE=%s, OMP_PROC_BIND=%s, OMP_PLACES=%s\n",
           openblas_get_config(), openblas_get_corename(), blas, pm >= 0 && pm <= 2 ? par[pm] : "unknown",
           openblas_get_num_threads(), env_ct ? env_ct : "(unset)", env_l2 ? env_l2 : "(unset)",
           bind ? bind : "(unset)", places ? places : "(unset)");
    if (env_ct && *env_ct && strcasecmp(env_ct, openblas_get_corename()) != 0) {
        fprintf(stderr, "bench_gemm: OPENBLAS_CORETYPE=%s but OpenBLAS runs its %s kernels\n", env_ct,
                openblas_get_corename());
        return 1;
    }
    /* gemm_bf16's peak is that of the instruction it runs: vdpbf16ps / tdpbf16ps on bf16 pairs, or fp32
     * FMAs on bf16-rounded operands (no AVX512_BF16, or an Intel core without AMX) */
    const bool pairs = gptc_gemm_bf16_uses_dpbf16();
    double peak[8], bpeak[8];
    printf("gptc: gemm %s; gemm_bf16 on %s; peaks measured per thread count:", best->variant,
           pairs ? gptc_peak_bf16_kind() : "fp32 FMAs (bf16-rounded operands)");
    for (int t = 0; t < nth; t++) {
        peak[t] = gptc_peak_gflops(ths[t]);
        bpeak[t] = pairs ? gptc_peak_bf16_gflops(ths[t]) : peak[t];
        printf(" %d thread%s fp32 %.0f, bf16 %.0f GFLOP/s%s", ths[t], ths[t] > 1 ? "s" : "", peak[t], bpeak[t],
               t + 1 < nth ? ";" : "\n");
    }
    printf("each figure the median of %d runs after one warm-up; classifier rows are one chunk of at most %d rows "
           "(the fused classifier's), \"per step\" counts the calls a step makes\n\n",
           reps, GPTC_CLASSIFIER_CHUNK);
    printf("| B·T | product | op | M×N×K | per step | thr | gptc %s GFLOP/s (%% peak) | gptc %s gemm_bf16 (%% bf16 peak) "
           "| gptc ref | OpenBLAS | gptc / OpenBLAS |\n", best->variant, best->variant);
    printf("|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|\n");
    for (int b = 0; b < nbt; b++)
        for (int j = 0; j < np[b]; j++) {
            const product *p = &prods[b][j];
            for (int t = 0; t < nth; t++) {
                omp_set_num_threads(ths[t]);
                openblas_set_num_threads(ths[t]);
                double g = measure(best->gemm, p, A, B, Cb, reps);
                double h = measure(best->gemm_bf16, p, A, B, Cb, reps);
                double o = measure(blas_gemm, p, A, B, Cb, reps);
                char hs[64], rs[64] = "—";
                if (bpeak[t] > 0) snprintf(hs, sizeof hs, "%.1f (%.0f%%)", h, 100 * h / bpeak[t]);
                else snprintf(hs, sizeof hs, "%.1f (—)", h); /* emulated: fp32 FMAs on rounded operands */
                if (bts[b] <= 256) {
                    double r = measure(ref->gemm, p, A, B, Cb, reps < 3 ? reps : 3);
                    snprintf(rs, sizeof rs, "%.1f (%.0f%%)", r, 100 * r / peak[t]);
                }
                printf("| %d | %s | %s | %d×%d×%d | %d | %d | %.1f (%.0f%%) | %s | %s | %.1f (%.0f%%) | %.2f× |\n",
                       bts[b], p->name, p->op, p->M, p->N, p->K, p->per_step, ths[t], g, 100 * g / peak[t], hs, rs, o,
                       100 * o / peak[t], g / o);
                fflush(stdout);
            }
        }
    gptc_free(A), gptc_free(B), gptc_free(Cb);
    return 0;
}
