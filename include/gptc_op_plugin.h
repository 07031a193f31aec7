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
 * operators ACCUMULATE (+=) into the gradients they write (except layernorm_bwd_residual's dinp). They
 * are called from the thread that runs the step and may use OpenMP inside; they must not keep pointers
 * to their arguments after returning. */
#ifndef GPTC_OP_PLUGIN_H
#define GPTC_OP_PLUGIN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Raised whenever a struct below or an operator's signature or contract changes. */
#define GPTC_OP_ABI_VERSION 1u

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

/* One implementation, set through the member named like its operator (type-checked). */
typedef union gptc_op_fn {
    gptc_op_gelu_fwd_fn gelu_fwd;
    gptc_op_gelu_bwd_fn gelu_bwd;
    gptc_op_layernorm_fwd_fn layernorm_fwd;
    gptc_op_layernorm_bwd_fn layernorm_bwd;
    gptc_op_residual_layernorm_fwd_fn residual_layernorm_fwd;
    gptc_op_layernorm_bwd_residual_fn layernorm_bwd_residual;
    gptc_op_attention_fwd_fn attention_fwd;
    gptc_op_attention_bwd_fn attention_bwd;
    void (*any)(void);
} gptc_op_fn;

/* The shapes an implementation accepts; every field 0 means "any". "N" is the signature's first size:
 * elements for gelu_*, rows (B*T) for the LayerNorms, the batch B for attention_*. gptc checks these
 * against every call the run will make and refuses the plugin, naming the field, when one does not fit. */
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
    const char *op;      /* the operator replaced: "gelu_fwd", "layernorm_bwd", ... (the names above) */
    const char *name;    /* this implementation's name: the profiler shows the operator as "OP[plugin:NAME]" */
    gptc_op_fn fn;
    gptc_op_contract contract;
} gptc_op_impl;

typedef struct gptc_op_plugin {
    uint32_t abi_version;        /* GPTC_OP_ABI_VERSION as the plugin was built; first in every version */
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
