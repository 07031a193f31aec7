/* gptc_op_plugin.h — the C ABI of a custom-operator plugin: a shared library that gives gptc its own
 * implementation of some of the training step's operators (`gptc train --op-plugin lib.so`, or
 * GPTC_OP_PLUGINS). Self-contained: a plugin includes only this header and builds with
 *
 *     cc -O2 -fPIC -shared -Ipath/to/gptc/include my_ops.c -o my_ops.so
 *
 * The library exports one function, gptc_op_plugin_entry, which returns a static description: the ABI
 * version it was built for, its name, and one gptc_op_impl per operator it replaces. Before the first
 * step gptc runs each implementation and the reference on probe inputs of the run's shapes and refuses
 * the plugin (exit 2, one line naming the library, the operator, the error and the tolerance) if they
 * disagree, or if the version or the shape contract does not fit the run. docs/extending.md has the
 * operators, the tolerances and a worked example (examples/op_plugin_gelu.c).
 *
 * The operators follow gptc's kernel contract: row-major float arrays, shapes in the comments, backward
 * operators ACCUMULATE (+=) into the gradients they write (except layernorm_bwd_residual's dinp and the
 * outputs the comments say are overwritten). Every operator of gptc's kernel table can be replaced. They
 * are called from the thread that runs the step and may use OpenMP inside; they must not keep pointers
 * to their arguments after returning. */
#ifndef GPTC_OP_PLUGIN_H
#define GPTC_OP_PLUGIN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Raised whenever a struct below or an operator's signature or contract changes. Version 2 made every
 * operator of gptc's table replaceable (version 1: the GELU tanh form, the LayerNorms and the naive
 * attention, whose signatures and contracts version 2 keeps, so gptc still loads a version 1 plugin). */
#define GPTC_OP_ABI_VERSION 2u
#define GPTC_OP_ABI_MIN_VERSION 1u /* the oldest version this header's gptc still loads */

/* ---- the operators a plugin may replace (the same signatures as gptc's kernel table) */

/* GELU, tanh form (the model's --gelu tanh, GPT-2's): out (N) = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) */
typedef void (*gptc_op_gelu_fwd_fn)(float *out, const float *inp, size_t N);
/* dinp (N) += gelu'(inp) * dout */
typedef void (*gptc_op_gelu_bwd_fn)(float *dinp, const float *inp, const float *dout, size_t N);
/* out (N,C) = (inp - mean) * rstd * w + b, rstd = 1/sqrt(var + 1e-5) (biased variance); mean, rstd (N) saved */
typedef void (*gptc_op_layernorm_fwd_fn)(float *out, float *mean, float *rstd, const float *inp, const float *w,
                                         const float *b, int N, int C);
/* dinp (N,C) +=, dw (C) +=, db (C) += : the LayerNorm backward from dout (N,C) */
typedef void (*gptc_op_layernorm_bwd_fn)(float *dinp, float *dw, float *db, const float *dout, const float *inp,
                                         const float *w, const float *mean, const float *rstd, int N, int C);
/* res (N,C) = a + b, then out (N,C) = LayerNorm(res) with w, bias; mean, rstd (N). res may alias a or b. */
typedef void (*gptc_op_residual_layernorm_fwd_fn)(float *res, float *out, float *mean, float *rstd, const float *a,
                                                  const float *b, const float *w, const float *bias, int N, int C);
/* dinp (N,C) = dskip + LayerNorm backward of dout (OVERWRITES dinp; dskip (N,C) may be NULL, meaning zero,
 * or alias dinp); dw, db (C) += */
typedef void (*gptc_op_layernorm_bwd_residual_fn)(float *dinp, float *dw, float *db, const float *dskip,
                                                  const float *dout, const float *inp, const float *w,
                                                  const float *mean, const float *rstd, int N, int C);
/* Causal self-attention with materialised scores (`--naive-attention`): qkv (B,T,3C) = [q | k | v],
 * C = NH*HS; out (B,T,C); preatt, att (B,NH,T,T) scores and softmax probabilities, scaled by 1/sqrt(HS)
 * (only the causal half, key <= query, is read back) */
typedef void (*gptc_op_attention_fwd_fn)(float *out, float *preatt, float *att, const float *qkv, int B, int T,
                                         int C, int NH);
/* dqkv (B,T,3C) +=; dpreatt, datt (B,NH,T,T) scratch (overwritten) */
typedef void (*gptc_op_attention_bwd_fn)(float *dqkv, float *dpreatt, float *datt, const float *dout,
                                         const float *qkv, const float *att, int B, int T, int C, int NH);

/* ---- since version 2 */

/* C (M,N) = beta*C + op(A) op(B) [+ bias (N) on every row], op(X) = X or X^T: A is (M,K) or, when transA,
 * stored (K,M); B is (K,N) or, when transB, stored (N,K); lda, ldb, ldc the row strides as stored; beta
 * 0 (overwrite: C may hold garbage) or 1 (accumulate); bias NULL or (N). "gemm" is the fp32 product;
 * "gemm_bf16" rounds every element of op(A) and op(B) to bf16 (nearest, ties to even) and sums in fp32. */
typedef void (*gptc_op_gemm_fn)(int transA, int transB, int M, int N, int K, const float *A, int lda, const float *B,
                                int ldb, float beta, const float *bias, float *C, int ldc);
/* Causal flash attention over head-major q, k, v (B,NH,T,HS), scale 1/sqrt(HS), dropout with probability
 * `dropout` on the probabilities by gptc's counter-based Philox mask (src/kernels/attention.h): o
 * (B,NH,T,HS) and lse (B,NH,T), the natural log of each row's softmax denominator, overwritten.
 * "flash_fwd_bf16" is the bf16 mixed-precision contract of src/kernels/attention.h. */
typedef void (*gptc_op_flash_fwd_fn)(float *o, float *lse, const float *q, const float *k, const float *v, int B,
                                     int NH, int T, int HS, float dropout, uint64_t seed);
/* dq, dk, dv (B,NH,T,HS) += from do_ (B,NH,T,HS), with the forward's o and lse */
typedef void (*gptc_op_flash_bwd_fn)(float *dq, float *dk, float *dv, const float *do_, const float *q, const float *k,
                                     const float *v, const float *o, const float *lse, int B, int NH, int T, int HS,
                                     float dropout, uint64_t seed);
/* out (B,T,C) = wte[inp] + wpe[t]; inp (B,T) token ids */
typedef void (*gptc_op_encoder_fwd_fn)(float *out, const int *inp, const float *wte, const float *wpe, int B, int T,
                                       int C);
/* dwte (V,C) +=, dwpe (T,C) += from dout (B,T,C) (tokens repeat: rows of dwte receive several rows) */
typedef void (*gptc_op_encoder_bwd_fn)(float *dwte, float *dwpe, const float *dout, const int *inp, int B, int T, int C);
/* out (N,OC) += bias (OC) on every row */
typedef void (*gptc_op_bias_fwd_fn)(float *out, const float *bias, int N, int OC);
/* dbias (OC) += the column sums of dout (N,OC) */
typedef void (*gptc_op_bias_bwd_fn)(float *dbias, const float *dout, int N, int OC);
/* one query q (C) against Tc cached keys and values kcache, vcache (Tc,C): out (C); att (NH,Tc) scratch */
typedef void (*gptc_op_attention_decode_fn)(float *out, float *att, const float *q, const float *kcache,
                                            const float *vcache, int Tc, int C, int NH);
/* out (N) = a + b */
typedef void (*gptc_op_residual_fwd_fn)(float *out, const float *a, const float *b, size_t N);
/* da (N) += dout, db (N) += dout */
typedef void (*gptc_op_residual_bwd_fn)(float *da, float *db, const float *dout, size_t N);
/* softmax of the first V of Vp columns of logits (N,Vp) into probs (N,Vp) (padding columns 0, probs may be
 * logits), losses (N) = -log probs[target]; targets (N) */
typedef void (*gptc_op_crossentropy_fwd_fn)(float *losses, float *probs, const float *logits, const int *targets,
                                            int N, int V, int Vp);
/* dlogits (N,Vp) += (probs - onehot(target)) * dloss over the first V columns (padding untouched) */
typedef void (*gptc_op_crossentropy_bwd_fn)(float *dlogits, const float *probs, const int *targets, float dloss, int N,
                                            int V, int Vp);
/* in place: logits (N,Vp) become dlogits = (softmax - onehot(target)) * dloss (padding columns 0); losses (N) */
typedef void (*gptc_op_crossentropy_fused_fn)(float *losses, float *logits, const int *targets, float dloss, int N,
                                              int V, int Vp);
/* AdamW (torch.optim.AdamW) on n floats: g *= grad_scale; p -= lr*wd*p; m = b1 m + (1-b1) g;
 * v = b2 v + (1-b2) g^2; p -= lr (m/(1-b1^t)) / (sqrt(v/(1-b2^t)) + eps) */
typedef void (*gptc_op_adamw_fn)(float *p, const float *g, float *m, float *v, size_t n, float lr, float b1, float b2,
                                 float eps, float wd, float grad_scale, int t);
/* q, k, v (B,NH,T,HS) = the thirds of qkv (B,T,3C), split into heads (C = NH*HS) */
typedef void (*gptc_op_qkv_to_heads_fn)(float *q, float *k, float *v, const float *qkv, int B, int T, int C, int NH);
/* dqkv (B,T,3C) += dq, dk, dv (B,NH,T,HS) */
typedef void (*gptc_op_heads_to_qkv_grad_fn)(float *dqkv, const float *dq, const float *dk, const float *dv, int B,
                                             int T, int C, int NH);
/* out (B,T,C) = o (B,NH,T,HS) (heads side by side); the other way round for rows_to_heads */
typedef void (*gptc_op_heads_to_rows_fn)(float *out, const float *o, int B, int T, int C, int NH);
typedef void (*gptc_op_rows_to_heads_fn)(float *dheads, const float *drows, int B, int T, int C, int NH);
/* out (n) = mask(seed, stream) * in / (1 - p): gptc's counter-based Philox mask (src/kernels/dropout.h) */
typedef void (*gptc_op_dropout_fn)(float *out, const float *in, size_t n, float p, uint64_t seed, uint64_t stream);
/* x (n) = 0 */
typedef void (*gptc_op_zero_fn)(float *x, size_t n);
/* the sum of x[i]^2 over n floats, in double */
typedef double (*gptc_op_grad_sumsq_fn)(const float *x, size_t n);

/* One implementation, set through the member named like its operator (type-checked). The erf and
 * sigmoid GELU forms ("gelu_erf_fwd", "gelu_sigmoid_bwd", ...) take the gelu_fwd / gelu_bwd signatures. */
typedef union gptc_op_fn {
    gptc_op_gelu_fwd_fn gelu_fwd;
    gptc_op_gelu_bwd_fn gelu_bwd;
    gptc_op_layernorm_fwd_fn layernorm_fwd;
    gptc_op_layernorm_bwd_fn layernorm_bwd;
    gptc_op_residual_layernorm_fwd_fn residual_layernorm_fwd;
    gptc_op_layernorm_bwd_residual_fn layernorm_bwd_residual;
    gptc_op_attention_fwd_fn attention_fwd;
    gptc_op_attention_bwd_fn attention_bwd;
    /* since version 2 */
    gptc_op_gemm_fn gemm, gemm_bf16;
    gptc_op_flash_fwd_fn flash_fwd, flash_fwd_bf16;
    gptc_op_flash_bwd_fn flash_bwd, flash_bwd_bf16;
    gptc_op_gelu_fwd_fn gelu_erf_fwd, gelu_sigmoid_fwd;
    gptc_op_gelu_bwd_fn gelu_erf_bwd, gelu_sigmoid_bwd;
    gptc_op_encoder_fwd_fn encoder_fwd;
    gptc_op_encoder_bwd_fn encoder_bwd;
    gptc_op_bias_fwd_fn bias_fwd;
    gptc_op_bias_bwd_fn bias_bwd;
    gptc_op_attention_decode_fn attention_decode;
    gptc_op_residual_fwd_fn residual_fwd;
    gptc_op_residual_bwd_fn residual_bwd;
    gptc_op_crossentropy_fwd_fn crossentropy_fwd;
    gptc_op_crossentropy_bwd_fn crossentropy_bwd;
    gptc_op_crossentropy_fused_fn crossentropy_fused;
    gptc_op_adamw_fn adamw;
    gptc_op_qkv_to_heads_fn qkv_to_heads;
    gptc_op_heads_to_qkv_grad_fn heads_to_qkv_grad;
    gptc_op_heads_to_rows_fn heads_to_rows;
    gptc_op_rows_to_heads_fn rows_to_heads;
    gptc_op_dropout_fn dropout;
    gptc_op_zero_fn zero;
    gptc_op_grad_sumsq_fn grad_sumsq;
    void (*any)(void);
} gptc_op_fn;

/* The shapes an implementation accepts; every field 0 means "any". "N" is the signature's first size:
 * elements for gelu_* (every form), rows (B*T) for the LayerNorms, the batch B for attention_* and
 * flash_*. gptc checks these against every call the run will make and refuses the plugin, naming the
 * field, when one does not fit. The other operators (GEMM, encoder, bias, cross-entropy, ...) are called
 * at many shapes and take only the all-zero contract. */
typedef struct gptc_op_contract {
    int64_t n_multiple;  /* N must be a multiple of this */
    int64_t n_max;       /* N at most this */
    int32_t c_multiple;  /* C (channels) a multiple of this (LayerNorms, attention) */
    int32_t c_max;       /* C at most this */
    int32_t t_max;       /* T (sequence length) at most this (attention) */
    int32_t hs_multiple; /* HS = C/NH (head size) a multiple of this (attention) */
    int32_t reserved[4]; /* zero */
} gptc_op_contract;

typedef struct gptc_op_impl {
    const char *op;      /* the operator replaced: "gelu_fwd", "gemm", "flash_fwd", ... (the union's members) */
    const char *name;    /* this implementation's name: the profiler shows the operator as "OP[plugin:NAME]" */
    gptc_op_fn fn;
    gptc_op_contract contract;
} gptc_op_impl;

typedef struct gptc_op_plugin {
    uint32_t abi_version;        /* GPTC_OP_ABI_VERSION as the plugin was built (a version 1 plugin may
                                  * replace only version 1's operators); first in every version */
    const char *name;            /* the plugin's name, for messages */
    int32_t nimpls;
    const gptc_op_impl *impls;   /* [nimpls], each operator at most once */
} gptc_op_plugin;

/* The one symbol gptc looks up; its name and signature stay the same in every version. host_abi_version is the GPTC_OP_ABI_VERSION gptc was built with; a
 * plugin may return NULL to decline a version it does not speak. The result must stay valid while the
 * library is loaded (gptc keeps it loaded until the process ends). */
#define GPTC_OP_PLUGIN_ENTRY "gptc_op_plugin_entry"
typedef const gptc_op_plugin *(*gptc_op_plugin_entry_fn)(uint32_t host_abi_version);

#if defined(__GNUC__)
#define GPTC_OP_PLUGIN_EXPORT __attribute__((visibility("default")))
#else
#define GPTC_OP_PLUGIN_EXPORT
#endif

GPTC_OP_PLUGIN_EXPORT const gptc_op_plugin *gptc_op_plugin_entry(uint32_t host_abi_version);

#ifdef __cplusplus
}
#endif

#endif
