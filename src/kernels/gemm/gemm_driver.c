/* gemm_driver.c — portable BLIS-style GEMM: cache blocking, packing (absorbs transposes), OpenMP tiling. */
#include "kernels/gemm/gemm_driver.h"

#include <omp.h>
#include <stddef.h>
#include <stdlib.h>

#include "core/core.h"

#define GEMM_MIN(a, b) ((a) < (b) ? (a) : (b))

/* ---- workspace: one A block per thread, one B panel per calling thread; grows once, then reused */

static _Thread_local gptc_workspace tl_apack, tl_bpack;

/* ---- portable packers */

/* Rows i0..i0+m-1 of op(A) (op(A)(i,k) = trans ? X[k*ldx+i] : X[i*ldx+k]), columns k0..k0+kc-1, as
 * micro-panels of r rows: out[p*r*kc + k*r + i], zero padded. Serves B too: op(B)^T has the same
 * shape (columns of op(B) are rows of op(B)^T), with trans flipped by the caller. */
static void pack_panels(int trans, const float *X, int ldx, int i0, int k0, int m, int kc, int r, float *out) {
    for (int p = 0; p < m; p += r) {
        int rows = GEMM_MIN(r, m - p);
        float *o = out + (size_t)p * kc;
        if (trans) {
            for (int k = 0; k < kc; k++) {
                const float *x = X + (size_t)(k0 + k) * ldx + i0 + p;
                float *ok = o + (size_t)k * r;
                int i = 0;
                for (; i < rows; i++) ok[i] = x[i];
                for (; i < r; i++) ok[i] = 0.0f;
            }
        } else {
            for (int i = 0; i < rows; i++) {
                const float *x = X + (size_t)(i0 + p + i) * ldx + k0;
                for (int k = 0; k < kc; k++) o[(size_t)k * r + i] = x[k];
            }
            for (int i = rows; i < r; i++)
                for (int k = 0; k < kc; k++) o[(size_t)k * r + i] = 0.0f;
        }
    }
}

static size_t round_up(size_t x, size_t r) { return (x + r - 1) / r * r; }

/* ---- driver */

void gptc_gemm_blocked(const gptc_gemm_isa *g, int transA, int transB, int M, int N, int K, const float *A,
                       int lda, const float *B, int ldb, float beta, float *C, int ldc) {
    if (M <= 0 || N <= 0) return;
    if (K <= 0) {
        for (int i = 0; i < M; i++)
            for (int j = 0; j < N; j++) C[(size_t)i * ldc + j] = beta == 0.0f ? 0.0f : beta * C[(size_t)i * ldc + j];
        return;
    }
    const int MR = g->mr, NR = g->nr, MC = g->mc, KC = g->kc, NC = g->nc;
    gptc_gemm_pack pack_a = g->pack_a ? g->pack_a : pack_panels;
    gptc_gemm_pack pack_b = g->pack_b ? g->pack_b : pack_panels;
    const int kcmax = GEMM_MIN(KC, K);
    float *bpack = gptc_workspace_get(&tl_bpack, (size_t)kcmax * round_up((size_t)GEMM_MIN(NC, N), NR));
    const double flops = 2.0 * M * N * K;
    const int nth = flops < 4e6 ? 1 : omp_get_max_threads();
    const int nic = (M + MC - 1) / MC;

#pragma omp parallel num_threads(nth)
    {
        const int nt = omp_get_num_threads();
        float *apack = gptc_workspace_get(&tl_apack, (size_t)kcmax * round_up((size_t)GEMM_MIN(MC, M), MR));
        for (int jc = 0; jc < N; jc += NC) {
            const int nc = GEMM_MIN(NC, N - jc), npan = (nc + NR - 1) / NR;
            /* Split each A block's columns into chunks so that every thread gets work when M is small. */
            int nchunk = nt == 1 ? 1 : (8 * nt + nic - 1) / nic;
            if (nchunk > npan) nchunk = npan;
            for (int pc = 0; pc < K; pc += KC) {
                const int kc = GEMM_MIN(KC, K - pc);
                const float bt = pc == 0 ? beta : 1.0f;
                /* B panel: columns of op(B) are rows of op(B)^T, so pack it like A with trans flipped. */
#pragma omp for schedule(static)
                for (int q = 0; q < npan; q++)
                    pack_b(!transB, B, ldb, jc + q * NR, pc, GEMM_MIN(NR, nc - q * NR), kc, NR,
                           bpack + (size_t)q * NR * kc);
                int packed = -1;
                /* One thread per (A block, column chunk) tile: each C element's K order is fixed. */
#pragma omp for schedule(static)
                for (int t = 0; t < nic * nchunk; t++) {
                    const int ib = t / nchunk, ch = t % nchunk;
                    const int ic = ib * MC, mc = GEMM_MIN(MC, M - ic);
                    if (ib != packed) {
                        pack_a(transA, A, lda, ic, pc, mc, kc, MR, apack);
                        packed = ib;
                    }
                    const int q0 = (int)((long)ch * npan / nchunk), q1 = (int)((long)(ch + 1) * npan / nchunk);
                    for (int q = q0; q < q1; q++) {
                        const int j = jc + q * NR, n = GEMM_MIN(NR, N - j);
                        const float *bq = bpack + (size_t)q * NR * kc;
                        for (int ir = 0; ir < mc; ir += MR)
                            g->kernel(kc, apack + (size_t)ir * kc, bq, C + (size_t)(ic + ir) * ldc + j, ldc,
                                      GEMM_MIN(MR, mc - ir), n, bt);
                    }
                }
            }
        }
    }
}
