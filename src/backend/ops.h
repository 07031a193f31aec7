/* ops.h — the backend's operator calls, one per operator of the model and the optimizer: each runs
 * the bound table entry (backend.h) inside a profiler span named `site` ("qkv.fwd", ...) with layer l
 * (-1: none) and the operator's FLOPs and bytes (the cost model of ops.c). When a plugin replaced the
 * entry, the span is named by the table's label instead ("gelu_fwd[plugin:NAME]"). Shapes and
 * accumulate-or-overwrite are the table's (kernels/kernels.h) unless a comment says otherwise.
 * Included by backend/backend.h. */
#ifndef GPTC_BACKEND_OPS_H
#define GPTC_BACKEND_OPS_H

#include "core/profile.h"
#include "gptc.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct gptc_backend gptc_backend;

/* The four span names of a linear layer's calls: GPTC_LINEAR_SITES("qkv") is qkv.fwd, qkv.dx.bwd,
 * qkv.dw.bwd, qkv.db.bwd (string literals: the profiler keeps the pointers). */
typedef struct gptc_linear_sites {
    const char *fwd, *dx, *dw, *db;
} gptc_linear_sites;
#define GPTC_LINEAR_SITES(s) ((gptc_linear_sites){s ".fwd", s ".dx.bwd", s ".dw.bwd", s ".db.bwd"})

/* A phase span (forward, backward, classifier, recompute): a name and a layer, no cost of its own. */
void gptc_be_phase_begin(const gptc_backend *be, const char *name, int l);
void gptc_be_phase_end(const gptc_backend *be);
/* An optimizer's span around its loop over the tensors (category optimizer, no layer): the optimizer
 * states its own cost, `flops` and `bytes` for the parameters it updated, at the end. */
void gptc_be_optim_begin(const gptc_backend *be, const char *name);
void gptc_be_optim_end(const gptc_backend *be, double flops, double bytes);

/* out (B,T,C) = wte[inp] + wpe[t]; inp (B,T) */
void gptc_be_encoder_fwd(const gptc_backend *be, const char *site, float *out, const int *inp, const float *wte,
                         const float *wpe, int B, int T, int C);
/* dwte (Vp,C) +=, dwpe (maxT,C) += from dout (B,T,C); either NULL (frozen): not formed, both: no call */
void gptc_be_encoder_bwd(const gptc_backend *be, const char *site, float *dwte, float *dwpe, const float *dout,
                         const int *inp, int B, int T, int C);

/* Outputs and operands marked 16 (out16, inp16, in16) are bf16 arrays (uint16_t) when the flag is set:
 * the activations only bf16 GEMMs read (kernels.h, bf16 storage), written by the producers' _bf16
 * entries and read by gemm_bf16_in16; a set flag needs a backend bound to bf16. */

/* out (N,C) = LayerNorm(inp (N,C)) with w, b (C); mean, rstd (N) */
void gptc_be_layernorm_fwd(const gptc_backend *be, const char *site, int l, void *out, bool out16, float *mean,
                           float *rstd, const float *inp, const float *w, const float *b, int N, int C);
/* res (N,C) = a + b; out = LayerNorm(res) with w, bias; mean, rstd (N). Fused or as two kernels. */
void gptc_be_residual_layernorm_fwd(const gptc_backend *be, const char *site, int l, float *res, void *out,
                                    bool out16, float *mean, float *rstd, const float *a, const float *b,
                                    const float *w, const float *bias, int N, int C);
/* dinp (N,C) = dskip (NULL: 0; may alias dinp) + LayerNorm backward of dout (OVERWRITES); dw, db (C) += */
void gptc_be_layernorm_bwd_residual(const gptc_backend *be, const char *site, int l, float *dinp, float *dw,
                                    float *db, const float *dskip, const float *dout, const float *inp, const float *w,
                                    const float *mean, const float *rstd, int N, int C);

/* A linear layer's weight as its products read it: w (IC,OC), the bf16 working copy of the weight when w16
 * (O2, model/gpt2.h params16); fwd, dx: where the model keeps it packed (kernels.h gptc_gemm_pack_b; model/gpt2.h
 * gptc_packed_weights) as the forward's B (W) and the input gradient's (W^T), read in place; NULL: each
 * product packs w itself. The bits are the same either way. */
typedef struct gptc_be_weight {
    const void *w;
    bool w16;
    const void *fwd, *dx;
} gptc_be_weight;

/* gptc_be_gemm, and *sumsq = the sum of squares of C (M x N floats, ldc N) afterwards (NULL: plain gptc_be_gemm):
 * summed tile by tile inside the product where the backend's GEMM is the blocked driver (kernels.h
 * gptc_gemm_sumsq), saving a pass over C from memory; else by the grad_sumsq entry over C after it (the norm's
 * pass, when C is a whole tensor). */
void gptc_be_gemm_sumsq(const gptc_backend *be, gptc_prof_cat cat, const char *site, int l, int transA, int transB,
                        int M, int N, int K, const void *A, int lda, const void *B, int ldb, int in16, float beta,
                        const float *bias, float *C, int ldc, double *sumsq);
/* The sum of squares of rows rows[0..n) (each of C floats) of x: each row by the grad_sumsq entry into part[i]
 * (the caller's scratch, n doubles), the rows' sums added in the order given (the same for any thread count). The
 * embeddings' backward touches only the batch's token rows of wte's gradient: their sums before and after it
 * correct wte's share of the norm. */
double gptc_be_rows_sumsq(const gptc_backend *be, const float *x, int C, const int *rows, int n, double *part);

/* A linear layer: out (N,OC) = inp (N,IC) @ w (IC,OC) + b (OC) (the bias in the GEMM's epilogue when
 * fused, else its own pass) */
void gptc_be_matmul_fwd(const gptc_backend *be, const char *site, int l, float *out, const void *inp, bool inp16,
                        gptc_be_weight w, const float *b, int N, int IC, int OC);
/* its backward: dinp (N,IC) = dout @ w^T (OVERWRITES), dw (IC,OC) = dw_beta * dw + inp^T dout (dw_beta 1:
 * accumulate; 0: overwrite, dw may hold anything), db (OC) += column sums; dw or db NULL (a frozen tensor):
 * that product or sum is not run. dw_sumsq: NULL, or *dw_sumsq = the sum of squares of dw afterwards (its share
 * of the global gradient norm, as gptc_be_gemm_sumsq takes it). */
void gptc_be_matmul_bwd(const gptc_backend *be, gptc_linear_sites sites, int l, float *dinp, float *dw, float dw_beta,
                        float *db, const float *dout, const void *inp, bool inp16, gptc_be_weight w, int N, int IC,
                        int OC, double *dw_sumsq);
/* x (n) *= s (LoRA's alpha/r; span category cat) */
void gptc_be_scale(const gptc_backend *be, gptc_prof_cat cat, const char *site, int l, float *x, float s, size_t n);
/* out (n) = x rounded to bf16 (the O2 working copy of the weights; span category optimizer) */
void gptc_be_to_bf16(const gptc_backend *be, const char *site, uint16_t *out, const float *x, size_t n);
/* One product with the bound GEMM (the kernels.h contract), span category cat; in16 (GPTC_GEMM_A16,
 * GPTC_GEMM_B16 bits) marks bf16 operands, 0 for fp32 ones; GPTC_GEMM_B_PACKED (transB 0, ldb unused): B is
 * op(B) packed whole by kernels.h gptc_gemm_pack_b for the bound precision. */
void gptc_be_gemm(const gptc_backend *be, gptc_prof_cat cat, const char *site, int l, int transA, int transB, int M,
                  int N, int K, const void *A, int lda, const void *B, int ldb, int in16, float beta,
                  const float *bias, float *C, int ldc);

/* Materialised causal attention (--naive-attention): out (B,T,C), preatt, att (B,NH,T,T) from qkv (B,T,3C) */
void gptc_be_attention_fwd(const gptc_backend *be, const char *site, int l, float *out, float *preatt, float *att,
                           const float *qkv, int B, int T, int C, int NH);
/* dqkv (B,T,3C) +=; dpreatt, datt (B,NH,T,T) scratch */
void gptc_be_attention_bwd(const gptc_backend *be, const char *site, int l, float *dqkv, float *dpreatt, float *datt,
                           const float *dout, const float *qkv, const float *att, int B, int T, int C, int NH);
/* The head reshapes (kernels.h): q, k, v (B,NH,T,HS) = qkv (B,T,3C); out (B,T,C) = o (B,NH,T,HS);
 * dheads (B,NH,T,HS) = drows (B,T,C); dqkv (B,T,3C) += dq, dk, dv */
void gptc_be_qkv_to_heads(const gptc_backend *be, const char *site, int l, float *q, float *k, float *v,
                          const float *qkv, int B, int T, int C, int NH);
void gptc_be_heads_to_rows(const gptc_backend *be, const char *site, int l, void *out, bool out16, const float *o,
                           int B, int T, int C, int NH);
void gptc_be_rows_to_heads(const gptc_backend *be, const char *site, int l, float *dheads, const float *drows, int B,
                           int T, int C, int NH);
void gptc_be_heads_to_qkv_grad(const gptc_backend *be, const char *site, int l, float *dqkv, const float *dq,
                               const float *dk, const float *dv, int B, int T, int C, int NH);
/* The bound flash attention (fp32 or bf16): o (B,NH,T,HS), lse (B,NH,T); the backward's dq, dk, dv += */
void gptc_be_flash_fwd(const gptc_backend *be, const char *site, int l, float *o, float *lse, const float *q,
                       const float *k, const float *v, int B, int NH, int T, int HS, float dropout, uint64_t seed);
void gptc_be_flash_bwd(const gptc_backend *be, const char *site, int l, float *dq, float *dk, float *dv,
                       const float *do_, const float *q, const float *k, const float *v, const float *o,
                       const float *lse, int B, int NH, int T, int HS, float dropout, uint64_t seed);

/* GELU of form f: out (n) = gelu_f(inp); the backward dinp (n) += gelu_f'(inp) dout */
void gptc_be_gelu_fwd(const gptc_backend *be, const char *site, int l, gptc_gelu_kind f, void *out, bool out16,
                      const float *inp, size_t n);
void gptc_be_gelu_bwd(const gptc_backend *be, const char *site, int l, gptc_gelu_kind f, float *dinp,
                      const float *inp, const float *dout, size_t n);

/* Dropout with probability p at (seed, stream) (kernels/dropout.h), in place on x (n); nothing (and no
 * span) when p is 0. */
void gptc_be_dropout_fwd(const gptc_backend *be, const char *site, int l, float *x, size_t n, float p, uint64_t seed,
                         uint64_t stream);
/* out (n) = the same mask applied to dout (n); returns out, or dout itself when p is 0 (nothing run) */
const float *gptc_be_dropout_bwd(const gptc_backend *be, const char *site, int l, float *out, const float *dout,
                                 size_t n, float p, uint64_t seed, uint64_t stream);

/* bufs[i] (n[i]) = 0 for i < count, one span of category cat. Several buffers are zeroed in one
 * parallel region (each thread its share of them, the zero entry with one thread): the team is woken
 * once, not once per buffer. */
void gptc_be_zero(const gptc_backend *be, gptc_prof_cat cat, const char *site, int l, int count, float *const bufs[],
                  const size_t n[]);

/* Softmax cross-entropy over the first V of Vp columns (kernels.h): losses (N), probs (N,Vp) (may be logits) */
void gptc_be_crossentropy_fwd(const gptc_backend *be, const char *site, float *losses, float *probs,
                              const float *logits, const int *targets, int N, int V, int Vp);
/* in place: logits (N,Vp) become dlogits, losses (N) */
void gptc_be_crossentropy_fused(const gptc_backend *be, const char *site, float *losses, float *logits,
                                const int *targets, float dloss, int N, int V, int Vp);
/* dlogits (N,Vp) = (probs - onehot(target)) * dloss (OVERWRITES: zeroed, then the entry's +=) */
void gptc_be_crossentropy_bwd(const gptc_backend *be, const char *site, float *dlogits, const float *probs,
                              const int *targets, float dloss, int N, int V, int Vp);

/* The optimizer's entries. One piece of an AdamW update: n floats of p, g, m, v with their weight
 * decay (a tensor, or the part of one inside a ZeRO-1 shard). */
typedef struct gptc_adamw_piece {
    float *p;
    const float *g;
    float *m, *v;
    size_t n;
    float wd;
    uint16_t *p16; /* NULL, or p's bf16 copy (n), rewritten from the updated p (kernels.h adamw16) */
} gptc_adamw_piece;
/* AdamW on each of count pieces (kernels.h adamw; no span: the optimizer spans its loop). The CPU
 * backend runs them in one parallel region: each thread takes an equal share of the pieces' floats
 * laid end to end (cut at whole 64-byte lines of a piece) and calls the entry on its parts with one
 * thread, so a step wakes the team once instead of once per tensor (on a machine shared with other
 * processes each wake-up can wait for a time slice). The update is elementwise: any split gives the
 * same bits. A piece with p16 goes to the adamw16 entry (the bf16 copy written in the same pass). An adamw
 * from a plugin (or a device's table) is called piece by piece on this thread, to_bf16 after it. */
void gptc_be_adamw_pieces(const gptc_backend *be, const gptc_adamw_piece *pieces, int count, float lr, float b1,
                          float b2, float eps, float grad_scale, int t);
/* out[i] = the sum of squares of pieces[i] (n[i] floats) for i < count, each by the grad_sumsq entry (its bits for
 * any thread count), in one parallel region: each thread takes whole pieces, a contiguous run of about an equal
 * share of their floats, and runs the entry on them with one thread; the team is woken once, not once per piece
 * (GPT-2 124M's norm has 99 small tensors besides its weights). Span "grad_norm". */
void gptc_be_grad_sumsq_pieces(const gptc_backend *be, const float *const pieces[], const size_t n[], int count,
                               double out[]);
/* sum of g[i]^2 over n floats (the global gradient norm's reduction), span "grad_norm" */
double gptc_be_grad_sumsq(const gptc_backend *be, const float *g, size_t n);

#endif
