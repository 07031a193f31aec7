/* gemm_driver.c — portable BLIS-style GEMM: cache blocking, packing (absorbs transposes), a
 * barrier-free 2-D split of C over OpenMP threads, and the bias in the microkernel's epilogue.
 * Element size and k granularity come from the ISA description, so the same code drives the fp32
 * and the bf16 kernels. */
#include "kernels/gemm/gemm_driver.h"

#include <omp.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "core/profile.h"
#include "kernels/kernels.h"

#define GEMM_MIN(a, b) ((a) < (b) ? (a) : (b))

/* Per-thread packing buffers: one A block and one B panel; they grow once, then are reused. */
static _Thread_local gptc_workspace tl_apack, tl_bpack;

void gptc_gemm_pack_portable(int trans, const float *X, int ldx, int i0, int k0, int m, int kc, int r,
                             void *out_) {
    float *out = out_;
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

/* Branch-free so that it vectorises: x + 0x7fff + lsb then truncation is round to nearest, ties to
 * even; a NaN keeps its top bits and is made quiet (gptc_f32_to_bf16's rule). */
void gptc_gemm_round_bf16(float *p, size_t n) {
    for (size_t i = 0; i < n; i++) {
        uint32_t x;
        memcpy(&x, p + i, sizeof x);
        const uint32_t rne = (x + 0x7fffu + ((x >> 16) & 1u)) & 0xffff0000u;
        const uint32_t nan = (x | 0x00400000u) & 0xffff0000u;
        x = (x & 0x7fffffffu) > 0x7f800000u ? nan : rne;
        memcpy(p + i, &x, sizeof x);
    }
}

static size_t round_up(size_t x, size_t r) { return (x + r - 1) / r * r; }

/* The thread grid tm x tn (tm * tn = nt) with the least work on its busiest thread: multiply-adds
 * of its block plus packing, an element packed costing about as much as 16 multiply-adds (a
 * vector load and store against a 16-wide FMA). A is packed once per B panel width nc. */
static void choose_grid(int nt, int mpan, int npan, int mr, int nr, int nc, int *tm, int *tn) {
    double best = -1;
    for (int a = 1; a <= nt; a++) {
        if (nt % a) continue;
        int b = nt / a;
        double rows = (double)((mpan + a - 1) / a) * mr, cols = (double)((npan + b - 1) / b) * nr;
        double nblk = (cols + nc - 1) / nc;
        double cost = rows * cols + 16.0 * (rows * (nblk < 1 ? 1 : nblk) + cols);
        if (best < 0 || cost < best) best = cost, *tm = a, *tn = b;
    }
}

/* One thread's block of C: rows [r0, r1), columns [c0, c1) (multiples of the micro-tile but at
 * the matrix edge), all of K in KC steps. apack / bpack hold one packed A block / B panel. */
static void gemm_block(const gptc_gemm_isa *g, gptc_gemm_pack pack, gptc_gemm_pack pack_b, int transA, int transB,
                       int r0, int r1, int c0, int c1, int K, const float *A, int lda, const float *B, int ldb,
                       float beta, const float *bias, float *C, int ldc, char *apack, char *bpack) {
    const int MR = g->mr, NR = g->nr, MC = g->mc, KC = g->kc, NC = g->nc;
    for (int jc = c0; jc < c1; jc += NC) {
        const int nc = GEMM_MIN(NC, c1 - jc);
        for (int pc = 0; pc < K; pc += KC) {
            const int kc = GEMM_MIN(KC, K - pc);
            const size_t kbytes = round_up((size_t)kc, (size_t)g->kstep) * (size_t)g->esize; /* one row of a panel */
            const float bt = pc == 0 ? beta : 1.0f;
            const float *bs = pc == 0 ? bias : NULL; /* the bias joins the first partial sum */
            pack_b(!transB, B, ldb, jc, pc, nc, kc, NR, bpack);
            if (g->round_bf16) gptc_gemm_round_bf16((float *)bpack, round_up((size_t)nc, NR) * kbytes / sizeof(float));
            for (int ic = r0; ic < r1; ic += MC) {
                const int mc = GEMM_MIN(MC, r1 - ic);
                pack(transA, A, lda, ic, pc, mc, kc, MR, apack);
                if (g->round_bf16)
                    gptc_gemm_round_bf16((float *)apack, round_up((size_t)mc, MR) * kbytes / sizeof(float));
                for (int jr = 0; jr < nc; jr += NR) {
                    const int n = GEMM_MIN(NR, nc - jr);
                    const char *bq = bpack + (size_t)jr * kbytes;
                    const float *bb = bs ? bs + jc + jr : NULL;
                    for (int ir = 0; ir < mc; ir += MR)
                        g->kernel(kc, apack + (size_t)ir * kbytes, bq, C + (size_t)(ic + ir) * ldc + jc + jr, ldc,
                                  GEMM_MIN(MR, mc - ir), n, bt, bb);
                }
            }
        }
    }
}

/* How a call splits C over threads: nt threads in a tm x tn grid of mpan x npan micro-panels. */
typedef struct gemm_split {
    int nt, tm, tn, mpan, npan;
} gemm_split;

static gemm_split split_for(const gptc_gemm_isa *g, int M, int N, int K, int max_threads) {
    gemm_split s = {.mpan = (M + g->mr - 1) / g->mr, .npan = (N + g->nr - 1) / g->nr, .tm = 1, .tn = 1};
    const double flops = 2.0 * M * N * K;
    s.nt = flops < 4e6 ? 1 : max_threads;
    if (s.nt > s.mpan * s.npan) s.nt = s.mpan * s.npan;
    choose_grid(s.nt, s.mpan, s.npan, g->mr, g->nr, g->nc, &s.tm, &s.tn);
    return s;
}

/* Thread t's block of C: rows [*r0, *r1), columns [*c0, *c1) (whole micro-panels, spread evenly) */
static void thread_block(const gptc_gemm_isa *g, const gemm_split *s, int t, int M, int N, int *r0, int *r1, int *c0,
                         int *c1) {
    const int ti = t / s->tn, tj = t % s->tn, MR = g->mr, NR = g->nr;
    *r0 = (int)((long)ti * s->mpan / s->tm) * MR, *r1 = GEMM_MIN((int)((long)(ti + 1) * s->mpan / s->tm) * MR, M);
    *c0 = (int)((long)tj * s->npan / s->tn) * NR, *c1 = GEMM_MIN((int)((long)(tj + 1) * s->npan / s->tn) * NR, N);
}

/* floats (rounded up) taking the packed rows of one block: all of its depth, esize bytes each */
static size_t pack_floats(const gptc_gemm_isa *g, int K, size_t rows) {
    size_t kbytes = round_up((size_t)GEMM_MIN(g->kc, K), (size_t)g->kstep) * (size_t)g->esize;
    return (kbytes * rows + sizeof(float) - 1) / sizeof(float);
}
/* floats of the A block and the B panel a thread packs for its block */
static size_t apack_floats(const gptc_gemm_isa *g, int K, int r0, int r1) {
    return pack_floats(g, K, round_up((size_t)GEMM_MIN(g->mc, r1 - r0), g->mr));
}
static size_t bpack_floats(const gptc_gemm_isa *g, int K, int c0, int c1) {
    return pack_floats(g, K, round_up((size_t)GEMM_MIN(g->nc, c1 - c0), g->nr));
}

void gptc_gemm_blocked(const gptc_gemm_isa *g, int transA, int transB, int M, int N, int K, const float *A,
                       int lda, const float *B, int ldb, float beta, const float *bias, float *C, int ldc) {
    if (M <= 0 || N <= 0) return;
    if (K <= 0) {
        for (int i = 0; i < M; i++)
            for (int j = 0; j < N; j++) {
                float *c = C + (size_t)i * ldc + j;
                *c = (beta == 0.0f ? 0.0f : beta * *c) + (bias ? bias[j] : 0.0f);
            }
        return;
    }
    gptc_gemm_pack pack = g->pack ? g->pack : gptc_gemm_pack_portable;
    gptc_gemm_pack pack_b = g->pack_b ? g->pack_b : pack;
    const gemm_split s = split_for(g, M, N, K, omp_get_max_threads());

#pragma omp parallel num_threads(s.nt)
    {
        int r0, r1, c0, c1;
        thread_block(g, &s, omp_get_thread_num(), M, N, &r0, &r1, &c0, &c1);
        if (r0 < r1 && c0 < c1) {
            gptc_prof_begin(GPTC_PROF_THREAD, "gemm.thread", -1); /* this thread's block, without the end's wait */
            char *apack = (char *)gptc_workspace_get(&tl_apack, apack_floats(g, K, r0, r1));
            char *bpack = (char *)gptc_workspace_get(&tl_bpack, bpack_floats(g, K, c0, c1));
            if (g->thread_begin) g->thread_begin();
            gemm_block(g, pack, pack_b, transA, transB, r0, r1, c0, c1, K, A, lda, B, ldb, beta, bias, C, ldc, apack,
                       bpack);
            if (g->thread_end) g->thread_end();
            gptc_prof_end(2.0 * (r1 - r0) * (c1 - c0) * K, 0);
        }
    }
}

void gptc_gemm_scratch(const gptc_kernels *k, int bf16, int M, int N, int K, int threads, size_t *apack,
                       size_t *bpack, size_t *transient) {
    for (int t = 0; t < threads; t++) apack[t] = bpack[t] = 0;
    *transient = 0;
    if (M <= 0 || N <= 0) return;
    /* the reference bf16 product rounds copies of both operands, then runs the reference fp32 one */
    if (bf16 && k->gemm_bf16 == gptc_kernels_ref()->gemm_bf16) {
        *transient = gptc_alloc_block_bytes(sizeof(float) * (size_t)M * K) +
                     gptc_alloc_block_bytes(sizeof(float) * (size_t)K * N);
        return;
    }
    const gptc_gemm_isa *g = bf16 ? k->gemm_bf16_isa : k->gemm_isa;
    if (!g || K <= 0) return;
    const gemm_split s = split_for(g, M, N, K, threads);
    for (int t = 0; t < s.nt; t++) {
        int r0, r1, c0, c1;
        thread_block(g, &s, t, M, N, &r0, &r1, &c0, &c1);
        if (r0 < r1 && c0 < c1) {
            apack[t] = gptc_alloc_block_bytes(sizeof(float) * apack_floats(g, K, r0, r1));
            bpack[t] = gptc_alloc_block_bytes(sizeof(float) * bpack_floats(g, K, c0, c1));
        }
    }
}
