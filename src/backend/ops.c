/* ops.c — the backend's profiled operator calls (ops.h): each runs one entry of the bound table in a
 * profiler span with the operator's cost (nothing is recorded while the profiler is off).
 *
 * The cost model. FLOPs: a matrix product 2*M*N*K; the causal attention counts its products over the
 * causal half only (the flash backward's 5 products include its recompute of the scores); elementwise
 * operators the EW_* FLOPs per element, estimates of the arithmetic (exp, tanh and sqrt as one).
 * Bytes: each operand read once and each result written once (accumulated results read and written),
 * what the operator must move at the least: caches and the GEMM's repeated panel reads make the real
 * traffic differ. The A and B operands of a GEMM count at the element size the multiply uses (2 bytes
 * in bf16, whose kernels round fp32 arrays to bf16 while packing); the activations stored in bf16
 * (ops.h: out16) count 2 bytes where they are written; everything else is fp32 (the attention too,
 * whatever the dtype). */
#include "backend/backend.h"
#include "core/core.h"
#include "kernels/gelu.h"

#include <omp.h>

#define EW_LN_FWD 8 /* mean, variance, normalise, scale and shift */
#define EW_LN_BWD 14
#define EW_GELU_FWD 12
#define EW_GELU_BWD 20
#define EW_XENT 5 /* max, subtract + exp, sum, normalise (+ the gradient's scale when fused) */
#define F32 4.0

/* The span name of a call of the entry in `slot`: a plugin's label where one replaced it, else site. */
static const char *span(const gptc_backend *be, size_t slot, const char *site) {
    return be->k->labels && be->k->labels[slot] ? be->k->labels[slot] : site;
}
#define SLOT(op) GPTC_KERNEL_SLOT(op)

static double gemm_flops(double M, double N, double K) { return 2 * M * N * K; }

/* C (M,N) = A (M,K) B (K,N), C read too when accumulated (beta 1), with or without a bias (N) */
static double gemm_bytes(const gptc_backend *be, double M, double N, double K, bool accumulate, bool bias) {
    double e = be->bf16 ? 2 : F32;
    return e * (M * K + K * N) + F32 * M * N * (accumulate ? 2 : 1) + (bias ? F32 * N : 0);
}

/* bytes of an activation element as stored: 2 for the bf16 ones */
static double act_bytes(bool b16) { return b16 ? 2.0 : F32; }

/* One product on the bound precision: operands marked in16 through gemm_bf16_in16, a packed B through
 * gptc_gemm_packed */
static void run_gemm(const gptc_backend *be, int transA, int transB, int M, int N, int K, const void *A, int lda,
                     const void *B, int ldb, int in16, float beta, const float *bias, float *C, int ldc) {
    if (in16 & GPTC_GEMM_B_PACKED) {
        GPTC_ASSERT(!transB);
        gptc_gemm_packed(be->k, be->bf16, transA, M, N, K, A, lda, in16 & GPTC_GEMM_A16, B, beta, bias, C, ldc);
    } else if (in16) {
        GPTC_ASSERT(be->bf16);
        be->k->gemm_bf16_in16(transA, transB, M, N, K, A, lda, B, ldb, in16, beta, bias, C, ldc);
    } else {
        be->gemm(transA, transB, M, N, K, A, lda, B, ldb, beta, bias, C, ldc);
    }
}

/* The table slot a product's span is named after (a plugin's label where one replaced it) */
static size_t gemm_slot(const gptc_backend *be, int in16) {
    return be->bf16 && in16 ? SLOT(gemm_bf16_in16) : be->gemm_slot;
}

/* B*NH*HS * T(T+1)/2 query-key pairs x 2: the causal half's products, C = NH*HS */
static double causal_pairs(int B, int T, int C) { return (double)B * T * (T + 1) * C; }

void gptc_be_phase_begin(const gptc_backend *be, const char *name, int l) {
    (void)be;
    gptc_prof_begin(GPTC_PROF_PHASE, name, l);
}

void gptc_be_phase_end(const gptc_backend *be) {
    (void)be;
    gptc_prof_end(0, 0);
}

void gptc_be_optim_begin(const gptc_backend *be, const char *name) {
    (void)be;
    gptc_prof_begin(GPTC_PROF_OPT, name, -1);
}

void gptc_be_optim_end(const gptc_backend *be, double flops, double bytes) {
    (void)be;
    gptc_prof_end(flops, bytes);
}

void gptc_be_encoder_fwd(const gptc_backend *be, const char *site, float *out, const int *inp, const float *wte,
                         const float *wpe, int B, int T, int C) {
    gptc_prof_begin(GPTC_PROF_FWD, span(be, SLOT(encoder_fwd), site), -1);
    be->k->encoder_fwd(out, inp, wte, wpe, B, T, C);
    double BT = (double)B * T;
    gptc_prof_end(BT * C, F32 * 3.0 * BT * C + sizeof(int) * BT);
}

void gptc_be_encoder_bwd(const gptc_backend *be, const char *site, float *dwte, float *dwpe, const float *dout,
                         const int *inp, int B, int T, int C) {
    if (!dwte && !dwpe) return;
    gptc_prof_begin(GPTC_PROF_BWD, span(be, SLOT(encoder_bwd), site), -1);
    be->k->encoder_bwd(dwte, dwpe, dout, inp, B, T, C);
    double BT = (double)B * T, btc = (double)((size_t)B * T * C);
    gptc_prof_end(2.0 * btc, F32 * 5.0 * btc + sizeof(int) * BT);
}

void gptc_be_layernorm_fwd(const gptc_backend *be, const char *site, int l, void *out, bool out16, float *mean,
                           float *rstd, const float *inp, const float *w, const float *b, int N, int C) {
    gptc_prof_begin(GPTC_PROF_FWD, span(be, out16 ? SLOT(layernorm_fwd_bf16) : SLOT(layernorm_fwd), site), l);
    if (out16) be->k->layernorm_fwd_bf16(out, mean, rstd, inp, w, b, N, C);
    else be->k->layernorm_fwd(out, mean, rstd, inp, w, b, N, C);
    double nc = (double)N * C;
    gptc_prof_end(EW_LN_FWD * nc, (F32 + act_bytes(out16)) * nc + F32 * (2.0 * N + 2.0 * C));
}

void gptc_be_residual_layernorm_fwd(const gptc_backend *be, const char *site, int l, float *res, void *out,
                                    bool out16, float *mean, float *rstd, const float *a, const float *b,
                                    const float *w, const float *bias, int N, int C) {
    size_t slot = be->fuse ? (out16 ? SLOT(residual_layernorm_fwd_bf16) : SLOT(residual_layernorm_fwd))
                           : (out16 ? SLOT(layernorm_fwd_bf16) : SLOT(layernorm_fwd));
    gptc_prof_begin(GPTC_PROF_FWD, span(be, slot, site), l);
    if (be->fuse && out16) {
        be->k->residual_layernorm_fwd_bf16(res, out, mean, rstd, a, b, w, bias, N, C);
    } else if (be->fuse) {
        be->k->residual_layernorm_fwd(res, out, mean, rstd, a, b, w, bias, N, C);
    } else {
        be->k->residual_fwd(res, a, b, (size_t)N * C);
        if (out16) be->k->layernorm_fwd_bf16(out, mean, rstd, res, w, bias, N, C);
        else be->k->layernorm_fwd(out, mean, rstd, res, w, bias, N, C);
    }
    double nc = (double)N * C;
    gptc_prof_end((EW_LN_FWD + 1) * nc, (3 * F32 + act_bytes(out16)) * nc + F32 * (2.0 * N + 2.0 * C));
}

void gptc_be_layernorm_bwd_residual(const gptc_backend *be, const char *site, int l, float *dinp, float *dw,
                                    float *db, const float *dskip, const float *dout, const float *inp, const float *w,
                                    const float *mean, const float *rstd, int N, int C) {
    gptc_prof_begin(GPTC_PROF_BWD,
                    be->fuse ? span(be, SLOT(layernorm_bwd_residual), site) : span(be, SLOT(layernorm_bwd), site), l);
    if (be->fuse) {
        be->k->layernorm_bwd_residual(dinp, dw, db, dskip, dout, inp, w, mean, rstd, N, C);
    } else {
        if (!dskip) be->k->zero(dinp, (size_t)N * C);
        else if (dskip != dinp) be->mem->copy(dinp, dskip, sizeof(float) * (size_t)N * C);
        be->k->layernorm_bwd(dinp, dw, db, dout, inp, w, mean, rstd, N, C);
    }
    double nc = (double)N * C;
    gptc_prof_end(EW_LN_BWD * nc, F32 * ((dskip ? 4 : 3) * nc + 2.0 * N + 5.0 * C));
}

void gptc_be_matmul_fwd(const gptc_backend *be, const char *site, int l, float *out, const void *inp, bool inp16,
                        gptc_be_weight w, const float *b, int N, int IC, int OC) {
    int in16 = (inp16 ? GPTC_GEMM_A16 : 0) | (w.fwd ? GPTC_GEMM_B_PACKED : w.w16 ? GPTC_GEMM_B16 : 0);
    gptc_prof_begin(GPTC_PROF_FWD, span(be, gemm_slot(be, in16), site), l);
    run_gemm(be, 0, 0, N, OC, IC, inp, IC, w.fwd ? w.fwd : w.w, OC, in16, 0.0f, be->fuse ? b : NULL, out, OC);
    if (!be->fuse) be->k->bias_fwd(out, b, N, OC);
    gptc_prof_end(gemm_flops(N, OC, IC) + (double)N * OC, gemm_bytes(be, N, OC, IC, !be->fuse, true));
}

void gptc_be_matmul_bwd(const gptc_backend *be, gptc_linear_sites sites, int l, float *dinp, float *dw, float dw_beta,
                        float *db, const float *dout, const void *inp, bool inp16, gptc_be_weight w, int N, int IC,
                        int OC, double *dw_sumsq) {
    /* w^T: the packed form read in place (transB 0), or w itself transposed by the packer */
    gptc_be_gemm(be, GPTC_PROF_BWD, sites.dx, l, 0, !w.dx, N, IC, OC, dout, OC, w.dx ? w.dx : w.w, OC,
                 w.dx ? GPTC_GEMM_B_PACKED : w.w16 ? GPTC_GEMM_B16 : 0, 0.0f, NULL, dinp, IC);
    if (dw)
        gptc_be_gemm_sumsq(be, GPTC_PROF_BWD, sites.dw, l, 1, 0, IC, OC, N, inp, IC, dout, OC,
                           inp16 ? GPTC_GEMM_A16 : 0, dw_beta, NULL, dw, OC, dw_sumsq);
    if (!db) return;
    gptc_prof_begin(GPTC_PROF_BWD, span(be, SLOT(bias_bwd), sites.db), l);
    be->k->bias_bwd(db, dout, N, OC);
    gptc_prof_end((double)N * OC, F32 * ((double)N * OC + 2.0 * OC));
}

void gptc_be_gemm(const gptc_backend *be, gptc_prof_cat cat, const char *site, int l, int transA, int transB, int M,
                  int N, int K, const void *A, int lda, const void *B, int ldb, int in16, float beta,
                  const float *bias, float *C, int ldc) {
    gptc_be_gemm_sumsq(be, cat, site, l, transA, transB, M, N, K, A, lda, B, ldb, in16, beta, bias, C, ldc, NULL);
}

void gptc_be_gemm_sumsq(const gptc_backend *be, gptc_prof_cat cat, const char *site, int l, int transA, int transB,
                        int M, int N, int K, const void *A, int lda, const void *B, int ldb, int in16, float beta,
                        const float *bias, float *C, int ldc, double *sumsq) {
    GPTC_ASSERT(!sumsq || ldc == N); /* C is one tensor's M x N floats */
    gptc_prof_begin(cat, span(be, gemm_slot(be, in16), site), l);
    /* the blocked driver's product where it is this backend's (gptc_gemm_sumsq checks for a plugin's) */
    const bool done = sumsq && be->mem == gptc_backend_cpu_memory() &&
                      gptc_gemm_sumsq(be->k, be->bf16, transA, transB, M, N, K, A, lda, B, ldb, in16, beta, bias, C,
                                      ldc, sumsq);
    if (!done) run_gemm(be, transA, transB, M, N, K, A, lda, B, ldb, in16, beta, bias, C, ldc);
    gptc_prof_end(gemm_flops(M, N, K) + (bias ? (double)M * N : 0), gemm_bytes(be, M, N, K, beta != 0, bias != NULL));
    if (sumsq && !done) *sumsq = gptc_be_grad_sumsq(be, C, (size_t)M * N); /* as the norm's pass over C */
}

void gptc_be_attention_fwd(const gptc_backend *be, const char *site, int l, float *out, float *preatt, float *att,
                           const float *qkv, int B, int T, int C, int NH) {
    gptc_prof_begin(GPTC_PROF_FWD, span(be, SLOT(attention_fwd), site), l);
    be->k->attention_fwd(out, preatt, att, qkv, B, T, C, NH);
    double btc = (double)B * T * C;
    gptc_prof_end(2 * causal_pairs(B, T, C), F32 * (4 * btc + (double)B * NH * T * (T + 1)));
}

void gptc_be_attention_bwd(const gptc_backend *be, const char *site, int l, float *dqkv, float *dpreatt, float *datt,
                           const float *dout, const float *qkv, const float *att, int B, int T, int C, int NH) {
    gptc_prof_begin(GPTC_PROF_BWD, span(be, SLOT(attention_bwd), site), l);
    be->k->attention_bwd(dqkv, dpreatt, datt, dout, qkv, att, B, T, C, NH);
    double btc = (double)((size_t)B * T * C);
    gptc_prof_end(4 * causal_pairs(B, T, C), F32 * (10.0 * btc + 1.5 * B * NH * T * (T + 1)));
}

void gptc_be_qkv_to_heads(const gptc_backend *be, const char *site, int l, float *q, float *k, float *v,
                          const float *qkv, int B, int T, int C, int NH) {
    gptc_prof_begin(GPTC_PROF_FWD, span(be, SLOT(qkv_to_heads), site), l);
    be->k->qkv_to_heads(q, k, v, qkv, B, T, C, NH);
    gptc_prof_end(0, F32 * 6 * ((double)B * T * C));
}

void gptc_be_scale(const gptc_backend *be, gptc_prof_cat cat, const char *site, int l, float *x, float s, size_t n) {
    gptc_prof_begin(cat, span(be, SLOT(scale), site), l);
    be->k->scale(x, s, n);
    gptc_prof_end((double)n, 2.0 * F32 * (double)n);
}

void gptc_be_to_bf16(const gptc_backend *be, const char *site, uint16_t *out, const float *x, size_t n) {
    gptc_prof_begin(GPTC_PROF_OPT, span(be, SLOT(to_bf16), site), -1);
    be->k->to_bf16(out, x, n);
    gptc_prof_end(0, 6.0 * (double)n);
}

void gptc_be_heads_to_rows(const gptc_backend *be, const char *site, int l, void *out, bool out16, const float *o,
                           int B, int T, int C, int NH) {
    gptc_prof_begin(GPTC_PROF_FWD, span(be, out16 ? SLOT(heads_to_rows_bf16) : SLOT(heads_to_rows), site), l);
    if (out16) be->k->heads_to_rows_bf16(out, o, B, T, C, NH);
    else be->k->heads_to_rows(out, o, B, T, C, NH);
    gptc_prof_end(0, (F32 + act_bytes(out16)) * ((double)B * T * C));
}

void gptc_be_rows_to_heads(const gptc_backend *be, const char *site, int l, float *dheads, const float *drows, int B,
                           int T, int C, int NH) {
    gptc_prof_begin(GPTC_PROF_BWD, span(be, SLOT(rows_to_heads), site), l);
    be->k->rows_to_heads(dheads, drows, B, T, C, NH);
    gptc_prof_end(0, F32 * 2 * (double)((size_t)B * T * C));
}

void gptc_be_heads_to_qkv_grad(const gptc_backend *be, const char *site, int l, float *dqkv, const float *dq,
                               const float *dk, const float *dv, int B, int T, int C, int NH) {
    gptc_prof_begin(GPTC_PROF_BWD, span(be, SLOT(heads_to_qkv_grad), site), l);
    be->k->heads_to_qkv_grad(dqkv, dq, dk, dv, B, T, C, NH);
    double btc = (double)((size_t)B * T * C);
    gptc_prof_end(3.0 * btc, F32 * 9 * btc);
}

void gptc_be_flash_fwd(const gptc_backend *be, const char *site, int l, float *o, float *lse, const float *q,
                       const float *k, const float *v, int B, int NH, int T, int HS, float dropout, uint64_t seed) {
    gptc_prof_begin(GPTC_PROF_FWD, span(be, be->flash_fwd_slot, site), l);
    be->flash_fwd(o, lse, q, k, v, B, NH, T, HS, dropout, seed);
    int C = NH * HS;
    double btc = (double)B * T * C;
    gptc_prof_end(2 * causal_pairs(B, T, C), F32 * (4 * btc + (double)B * NH * T));
}

void gptc_be_flash_bwd(const gptc_backend *be, const char *site, int l, float *dq, float *dk, float *dv,
                       const float *do_, const float *q, const float *k, const float *v, const float *o,
                       const float *lse, int B, int NH, int T, int HS, float dropout, uint64_t seed) {
    gptc_prof_begin(GPTC_PROF_BWD, span(be, be->flash_bwd_slot, site), l);
    be->flash_bwd(dq, dk, dv, do_, q, k, v, o, lse, B, NH, T, HS, dropout, seed);
    int C = NH * HS;
    double btc = (double)((size_t)B * T * C);
    gptc_prof_end(5 * causal_pairs(B, T, C), F32 * (11.0 * btc + (double)B * NH * T));
}

void gptc_be_gelu_fwd(const gptc_backend *be, const char *site, int l, gptc_gelu_kind f, void *out, bool out16,
                      const float *inp, size_t n) {
    gptc_prof_begin(GPTC_PROF_FWD, span(be, out16 ? gptc_gelu_fwd_bf16_slot(f) : gptc_gelu_fwd_slot(f), site), l);
    if (out16) gptc_gelu_fwd_bf16_entry(be->k, f)(out, inp, n);
    else gptc_gelu_fwd_entry(be->k, f)(out, inp, n);
    gptc_prof_end(EW_GELU_FWD * (double)n, (F32 + act_bytes(out16)) * (double)n);
}

void gptc_be_gelu_bwd(const gptc_backend *be, const char *site, int l, gptc_gelu_kind f, float *dinp,
                      const float *inp, const float *dout, size_t n) {
    gptc_prof_begin(GPTC_PROF_BWD, span(be, gptc_gelu_bwd_slot(f), site), l);
    gptc_gelu_bwd_entry(be->k, f)(dinp, inp, dout, n);
    gptc_prof_end(EW_GELU_BWD * (double)n, F32 * 4 * (double)n);
}

void gptc_be_dropout_fwd(const gptc_backend *be, const char *site, int l, float *x, size_t n, float p, uint64_t seed,
                         uint64_t stream) {
    if (p <= 0) return;
    gptc_prof_begin(GPTC_PROF_FWD, span(be, SLOT(dropout), site), l);
    be->k->dropout(x, x, n, p, seed, stream);
    gptc_prof_end((double)n, F32 * 2.0 * n);
}

const float *gptc_be_dropout_bwd(const gptc_backend *be, const char *site, int l, float *out, const float *dout,
                                 size_t n, float p, uint64_t seed, uint64_t stream) {
    if (p <= 0) return dout;
    gptc_prof_begin(GPTC_PROF_BWD, span(be, SLOT(dropout), site), l);
    be->k->dropout(out, dout, n, p, seed, stream);
    gptc_prof_end((double)n, F32 * 2.0 * n);
    return out;
}

/* ---- several buffers in one parallel region: thread j of nt takes the j-th share of their floats laid
 * end to end, cut at whole lines of 16 floats (64 bytes) of a buffer, and runs the entry on its part of
 * each with one thread (the entry's own parallel loop nests inside this region). Both neighbours of a
 * cut compute the same cut, so the parts tile every buffer exactly. */

/* Thread j's share [a, b) of total floats, in whole lines. */
static void share_of(size_t total, size_t *a, size_t *b) {
    size_t nt = (size_t)omp_get_num_threads(), j = (size_t)omp_get_thread_num();
    size_t per = ((total + 15) / 16 + nt - 1) / nt * 16;
    *a = j * per < total ? j * per : total;
    *b = *a + per < total ? *a + per : total;
}

/* Where the end-to-end position x cuts a buffer of n floats that starts at position base: 0 before
 * it, n after it, else x - base rounded down to a whole line. */
static size_t cut_at(size_t x, size_t base, size_t n) {
    if (x <= base) return 0;
    if (x >= base + n) return n;
    return (x - base) & ~(size_t)15;
}

/* Whether entry `slot` is called from this thread only, buffer by buffer: it came from a plugin, or the
 * backend is not the CPU (a device's entries queue work on its stream; a parallel region would only
 * split the launches). */
static bool from_plugin(const gptc_backend *be, size_t slot) {
    return (be->k->labels && be->k->labels[slot]) || be->mem != gptc_backend_cpu_memory();
}

void gptc_be_zero(const gptc_backend *be, gptc_prof_cat cat, const char *site, int l, int count, float *const bufs[],
                  const size_t n[]) {
    gptc_prof_begin(cat, span(be, SLOT(zero), site), l);
    size_t total = 0;
    for (int i = 0; i < count; i++) total += n[i];
    if (count == 1 || from_plugin(be, SLOT(zero))) { /* one buffer: the entry's own threads, its own choice of stores */
        for (int i = 0; i < count; i++) be->k->zero(bufs[i], n[i]);
    } else {
#pragma omp parallel
        {
            size_t a, b, base = 0;
            share_of(total, &a, &b);
            omp_set_num_threads(1); /* this thread's nested regions: the entry's loop runs here */
            for (int i = 0; i < count; base += n[i], i++) {
                size_t lo = cut_at(a, base, n[i]), hi = cut_at(b, base, n[i]);
                if (lo < hi) be->k->zero(bufs[i] + lo, hi - lo);
            }
        }
    }
    gptc_prof_end(0, F32 * (double)total);
}

/* The cost of a softmax cross-entropy pass over N rows of V logits, read and written in place. */
static void xent_end(int N, int V) {
    double nv = (double)N * V;
    gptc_prof_end(EW_XENT * nv, F32 * 2 * nv + (F32 + sizeof(int)) * N);
}

void gptc_be_crossentropy_fwd(const gptc_backend *be, const char *site, float *losses, float *probs,
                              const float *logits, const int *targets, int N, int V, int Vp) {
    gptc_prof_begin(GPTC_PROF_FWD, span(be, SLOT(crossentropy_fwd), site), -1);
    be->k->crossentropy_fwd(losses, probs, logits, targets, N, V, Vp);
    xent_end(N, V);
}

void gptc_be_crossentropy_fused(const gptc_backend *be, const char *site, float *losses, float *logits,
                                const int *targets, float dloss, int N, int V, int Vp) {
    gptc_prof_begin(GPTC_PROF_FWD, span(be, SLOT(crossentropy_fused), site), -1);
    be->k->crossentropy_fused(losses, logits, targets, dloss, N, V, Vp);
    xent_end(N, V);
}

void gptc_be_crossentropy_bwd(const gptc_backend *be, const char *site, float *dlogits, const float *probs,
                              const int *targets, float dloss, int N, int V, int Vp) {
    gptc_prof_begin(GPTC_PROF_BWD, span(be, SLOT(crossentropy_bwd), site), -1);
    be->k->zero(dlogits, (size_t)N * Vp);
    be->k->crossentropy_bwd(dlogits, probs, targets, dloss, N, V, Vp);
    xent_end(N, V);
}

void gptc_be_adamw_pieces(const gptc_backend *be, const gptc_adamw_piece *pieces, int count, float lr, float b1,
                          float b2, float eps, float grad_scale, int t) {
    if (from_plugin(be, SLOT(adamw))) {
        for (int i = 0; i < count; i++) {
            const gptc_adamw_piece *x = &pieces[i];
            be->k->adamw(x->p, x->g, x->m, x->v, x->n, lr, b1, b2, eps, x->wd, grad_scale, t);
            if (x->p16) be->k->to_bf16(x->p16, x->p, x->n);
        }
        return;
    }
    size_t total = 0;
    for (int i = 0; i < count; i++) total += pieces[i].n;
#pragma omp parallel
    {
        size_t a, b, base = 0;
        share_of(total, &a, &b);
        omp_set_num_threads(1); /* this thread's nested regions: the entry's loop runs here */
        for (int i = 0; i < count; base += pieces[i].n, i++) {
            const gptc_adamw_piece *x = &pieces[i];
            size_t lo = cut_at(a, base, x->n), hi = cut_at(b, base, x->n);
            if (lo >= hi) continue;
            if (x->p16)
                be->k->adamw16(x->p + lo, x->p16 + lo, x->g + lo, x->m + lo, x->v + lo, hi - lo, lr, b1, b2, eps, x->wd,
                               grad_scale, t);
            else
                be->k->adamw(x->p + lo, x->g + lo, x->m + lo, x->v + lo, hi - lo, lr, b1, b2, eps, x->wd, grad_scale, t);
        }
    }
}

double gptc_be_rows_sumsq(const gptc_backend *be, const float *x, int C, const int *rows, int n, double *part) {
    if (n <= 0) return 0;
    double total = 0;
    gptc_prof_begin(GPTC_PROF_OPT, span(be, SLOT(grad_sumsq), "grad_norm"), -1);
    if (from_plugin(be, SLOT(grad_sumsq))) {
        for (int i = 0; i < n; i++) part[i] = be->k->grad_sumsq(x + (size_t)rows[i] * C, (size_t)C);
    } else {
#pragma omp parallel
        {
            omp_set_num_threads(1); /* this thread's nested regions: the entry's loop runs here */
#pragma omp for schedule(static)
            for (int i = 0; i < n; i++) part[i] = be->k->grad_sumsq(x + (size_t)rows[i] * C, (size_t)C);
        }
    }
    for (int i = 0; i < n; i++) total += part[i];
    gptc_prof_end(2.0 * n * C, 4.0 * n * C);
    return total;
}

void gptc_be_grad_sumsq_pieces(const gptc_backend *be, const float *const pieces[], const size_t n[], int count,
                               double out[]) {
    size_t total = 0;
    for (int i = 0; i < count; i++) total += n[i];
    gptc_prof_begin(GPTC_PROF_OPT, span(be, SLOT(grad_sumsq), "grad_norm"), -1);
    if (from_plugin(be, SLOT(grad_sumsq))) {
        for (int i = 0; i < count; i++) out[i] = be->k->grad_sumsq(pieces[i], n[i]);
    } else {
#pragma omp parallel
        {
            const size_t nt = (size_t)omp_get_num_threads(), j = (size_t)omp_get_thread_num();
            omp_set_num_threads(1); /* this thread's nested regions: the entry's loop runs here */
            size_t base = 0;
            for (int i = 0; i < count; base += n[i], i++) /* piece i to the thread whose share holds its middle */
                if ((base + n[i] / 2) * nt / (total ? total : 1) == j) out[i] = be->k->grad_sumsq(pieces[i], n[i]);
        }
    }
    gptc_prof_end(2.0 * total, 4.0 * total);
}

double gptc_be_grad_sumsq(const gptc_backend *be, const float *g, size_t n) {
    gptc_prof_begin(GPTC_PROF_OPT, span(be, SLOT(grad_sumsq), "grad_norm"), -1);
    double total = be->k->grad_sumsq(g, n);
    gptc_prof_end(2.0 * n, 4.0 * n); /* a multiply-add per float read */
    return total;
}
