/* plugin_probe.c — the replaceable operators (gptc_op_infos: every entry of the kernel table, with its
 * tolerance; their signatures checked against the table; which runs call each), and the probe that
 * validates an implementation of one against the reference table.
 *
 * Probes: random inputs from a fixed seed, at the run's shapes but bounded in cost. A size above
 * PROBE_CAP elements (rows for the row-wise operators: PROBE_CAP / width) is cut to at most the cap
 * while keeping its remainder modulo 64 x the contract's multiple, so the plugin's tail handling is
 * exercised as in the run; the attention (naive and flash) runs one sequence (or the contract's batch
 * multiple) of the run's T, C, NH, the flash attention with dropout 0.1 so the mask is checked too; the
 * GEMM runs the three patterns of a linear layer (bias, transposed operands, accumulation) on strided
 * views; the cross-entropy a vocabulary of 1000 padded to 1024. Gradient buffers start from random
 * values, not zeros, so an implementation that overwrites where it must accumulate (or the reverse) is
 * caught; every output carries a guard zone after its end. */
#include "kernels/plugin_ops.h"
#include "core/core.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define S(op) GPTC_KERNEL_SLOT(op)
const gptc_op_info gptc_op_infos[GPTC_OP_COUNT] = {
    [OP_GELU_FWD] = {"gelu_fwd", 1e-5, "only with 'model.gelu' tanh, the default ('dtype' bf16: only when sampling)", S(gelu_fwd), 1},
    [OP_GELU_BWD] = {"gelu_bwd", 1e-5, "only with 'model.gelu' tanh, the default", S(gelu_bwd), 1},
    [OP_LN_FWD] = {"layernorm_fwd", 2e-5, "with 'dtype' fp32 (fused: block 0's ln_1 and the block recompute; 'no_fusion': every LayerNorm), and when sampling", S(layernorm_fwd), 1},
    [OP_LN_BWD] = {"layernorm_bwd", 1e-4, "only with 'no_fusion'", S(layernorm_bwd), 1},
    [OP_RES_LN_FWD] = {"residual_layernorm_fwd", 2e-5, "only without 'no_fusion', with 'dtype' fp32", S(residual_layernorm_fwd), 1},
    [OP_LN_BWD_RES] = {"layernorm_bwd_residual", 1e-4, "only without 'no_fusion'", S(layernorm_bwd_residual), 1},
    [OP_ATT_FWD] = {"attention_fwd", 1e-4, "only with 'naive_attention'", S(attention_fwd), 1},
    [OP_ATT_BWD] = {"attention_bwd", 1e-4, "only with 'naive_attention'", S(attention_bwd), 1},
    [OP_GEMM] = {"gemm", 1e-4, "with 'dtype' fp32, the default, and when sampling", S(gemm), 2},
    [OP_GEMM_BF16] = {"gemm_bf16", 1e-4, "only with 'dtype' bf16 (the products of fp32 operands; those reading bf16-stored activations run gemm_bf16_in16)", S(gemm_bf16), 2},
    [OP_FLASH_FWD] = {"flash_fwd", 1e-4, "without 'naive_attention', with 'dtype' fp32", S(flash_fwd), 2},
    [OP_FLASH_BWD] = {"flash_bwd", 1e-4, "without 'naive_attention', with 'dtype' fp32", S(flash_bwd), 2},
    [OP_FLASH_FWD_BF16] = {"flash_fwd_bf16", 2e-3, "without 'naive_attention', with 'dtype' bf16", S(flash_fwd_bf16), 2},
    [OP_FLASH_BWD_BF16] = {"flash_bwd_bf16", 2e-3, "without 'naive_attention', with 'dtype' bf16", S(flash_bwd_bf16), 2},
    [OP_GELU_ERF_FWD] = {"gelu_erf_fwd", 1e-5, "only with 'model.gelu' erf ('dtype' bf16: only when sampling)", S(gelu_erf_fwd), 2},
    [OP_GELU_ERF_BWD] = {"gelu_erf_bwd", 1e-5, "only with 'model.gelu' erf", S(gelu_erf_bwd), 2},
    [OP_GELU_SIG_FWD] = {"gelu_sigmoid_fwd", 1e-5, "only with 'model.gelu' sigmoid ('dtype' bf16: only when sampling)", S(gelu_sigmoid_fwd), 2},
    [OP_GELU_SIG_BWD] = {"gelu_sigmoid_bwd", 1e-5, "only with 'model.gelu' sigmoid", S(gelu_sigmoid_bwd), 2},
    [OP_ENC_FWD] = {"encoder_fwd", 1e-6, "in every run", S(encoder_fwd), 2},
    [OP_ENC_BWD] = {"encoder_bwd", 1e-5, "in every run", S(encoder_bwd), 2},
    [OP_BIAS_FWD] = {"bias_fwd", 1e-6, "only with 'no_fusion'", S(bias_fwd), 2},
    [OP_BIAS_BWD] = {"bias_bwd", 1e-5, "in every run", S(bias_bwd), 2},
    [OP_ATT_DECODE] = {"attention_decode", 1e-5, "only when sampling", S(attention_decode), 2},
    [OP_RES_FWD] = {"residual_fwd", 1e-6, "only with 'no_fusion' or when sampling", S(residual_fwd), 2},
    [OP_RES_BWD] = {"residual_bwd", 1e-6, "never (the fused LayerNorm backward adds the skip gradient)", S(residual_bwd), 2},
    [OP_XENT_FWD] = {"crossentropy_fwd", 1e-4, "in every run (evaluation; 'no_fusion': every step)", S(crossentropy_fwd), 2},
    [OP_XENT_BWD] = {"crossentropy_bwd", 1e-5, "only with 'no_fusion'", S(crossentropy_bwd), 2},
    [OP_XENT_FUSED] = {"crossentropy_fused", 1e-4, "only without 'no_fusion'", S(crossentropy_fused), 2},
    [OP_ADAMW] = {"adamw", 1e-5, "in every run", S(adamw), 2},
    [OP_QKV_TO_HEADS] = {"qkv_to_heads", 0, "without 'naive_attention'", S(qkv_to_heads), 2},
    [OP_HEADS_TO_QKV_GRAD] = {"heads_to_qkv_grad", 0, "without 'naive_attention'", S(heads_to_qkv_grad), 2},
    [OP_HEADS_TO_ROWS] = {"heads_to_rows", 0, "without 'naive_attention', with 'dtype' fp32", S(heads_to_rows), 2},
    [OP_ROWS_TO_HEADS] = {"rows_to_heads", 0, "without 'naive_attention'", S(rows_to_heads), 2},
    [OP_DROPOUT] = {"dropout", 1e-6, "only with 'dropout' above 0", S(dropout), 2},
    [OP_ZERO] = {"zero", 0, "in every run", S(zero), 2},
    [OP_GRAD_SUMSQ] = {"grad_sumsq", 1e-6, "in every run", S(grad_sumsq), 2},
};
#undef S
const int gptc_op_ninfos = GPTC_OP_COUNT;

/* Every signature of the ABI is the kernel table's. */
#define SAME_TYPE(type, op)                                                                                         \
    _Static_assert(__builtin_types_compatible_p(gptc_op_##type##_fn, __typeof__(((gptc_kernels *)0)->op)),         \
                   "gptc_op_plugin.h: " #op " differs from kernels.h")
SAME_TYPE(gelu_fwd, gelu_fwd);
SAME_TYPE(gelu_bwd, gelu_bwd);
SAME_TYPE(layernorm_fwd, layernorm_fwd);
SAME_TYPE(layernorm_bwd, layernorm_bwd);
SAME_TYPE(residual_layernorm_fwd, residual_layernorm_fwd);
SAME_TYPE(layernorm_bwd_residual, layernorm_bwd_residual);
SAME_TYPE(attention_fwd, attention_fwd);
SAME_TYPE(attention_bwd, attention_bwd);
SAME_TYPE(gemm, gemm);
SAME_TYPE(gemm, gemm_bf16);
SAME_TYPE(flash_fwd, flash_fwd);
SAME_TYPE(flash_bwd, flash_bwd);
SAME_TYPE(flash_fwd, flash_fwd_bf16);
SAME_TYPE(flash_bwd, flash_bwd_bf16);
SAME_TYPE(gelu_fwd, gelu_erf_fwd);
SAME_TYPE(gelu_bwd, gelu_erf_bwd);
SAME_TYPE(gelu_fwd, gelu_sigmoid_fwd);
SAME_TYPE(gelu_bwd, gelu_sigmoid_bwd);
SAME_TYPE(encoder_fwd, encoder_fwd);
SAME_TYPE(encoder_bwd, encoder_bwd);
SAME_TYPE(bias_fwd, bias_fwd);
SAME_TYPE(bias_bwd, bias_bwd);
SAME_TYPE(attention_decode, attention_decode);
SAME_TYPE(residual_fwd, residual_fwd);
SAME_TYPE(residual_bwd, residual_bwd);
SAME_TYPE(crossentropy_fwd, crossentropy_fwd);
SAME_TYPE(crossentropy_bwd, crossentropy_bwd);
SAME_TYPE(crossentropy_fused, crossentropy_fused);
SAME_TYPE(adamw, adamw);
SAME_TYPE(qkv_to_heads, qkv_to_heads);
SAME_TYPE(heads_to_qkv_grad, heads_to_qkv_grad);
SAME_TYPE(heads_to_rows, heads_to_rows);
SAME_TYPE(rows_to_heads, rows_to_heads);
SAME_TYPE(dropout, dropout);
SAME_TYPE(zero, zero);
SAME_TYPE(grad_sumsq, grad_sumsq);
/* and every operator of the table is one of them: the table's slots but its 8 others (variant, gemm_isa,
 * gemm_bf16_isa, labels, matvec_part, attention_decode_part (the shares of two decode operators),
 * flash_scratch, flash_scratch_bf16; tests/test_backend.c checks that gptc_kernel_ops lists the same
 * count), the 7 bf16-storage twins (layernorm_fwd_bf16 to
 * gemm_bf16_in16), which a plugin does not replace: under 'dtype' bf16 the run calls them instead of
 * the LayerNorm, GELU and head-merge forwards (gptc_op_runs), to_bf16 and adamw16 (the O2 weights' copy,
 * alone and with the update; a plugin's adamw is called with to_bf16 after it instead); the
 * 4 compact optimizer-state entries (ostate_*: --optim-state bf16|int8), matvec and
 * attention_decode_shared (decoding's small-M product and its attention of samples sharing a prompt,
 * gptc sample only), and scale (LoRA's alpha/r), which are not plugin operators either */
enum { BF16_STORAGE_OPS = 9, OSTATE_OPS = 4, DECODE_OPS = 2, LORA_OPS = 1 };
_Static_assert(GPTC_OP_COUNT + 8 + BF16_STORAGE_OPS + OSTATE_OPS + DECODE_OPS + LORA_OPS == GPTC_KERNEL_SLOTS,
               "a kernel table entry without a plugin operator (plugin_ops.h)");

/* Whether the run calls op (its training step, evaluation, sampling or optimizer update). */
bool gptc_op_runs(int op, const gptc_op_run *r) {
    bool flash = !r->naive_attention;
    switch (op) {
    /* under bf16 the training step's LayerNorm, GELU and head-merge forwards are the bf16-storage
     * twins; decoding (fp32) still calls the fp32 LayerNorm and GELU */
    case OP_GELU_FWD: return r->gelu == GPTC_GELU_KIND_TANH && (!r->bf16 || r->decode);
    case OP_GELU_ERF_FWD: return r->gelu == GPTC_GELU_KIND_ERF && (!r->bf16 || r->decode);
    case OP_GELU_SIG_FWD: return r->gelu == GPTC_GELU_KIND_SIGMOID && (!r->bf16 || r->decode);
    case OP_GELU_BWD: return r->gelu == GPTC_GELU_KIND_TANH;
    case OP_GELU_ERF_BWD: return r->gelu == GPTC_GELU_KIND_ERF;
    case OP_GELU_SIG_BWD: return r->gelu == GPTC_GELU_KIND_SIGMOID;
    case OP_LN_FWD: return !r->bf16 || r->decode;
    case OP_LN_BWD: case OP_BIAS_FWD: case OP_XENT_BWD: return !r->fuse;
    case OP_RES_LN_FWD: return r->fuse && !r->bf16;
    case OP_LN_BWD_RES: case OP_XENT_FUSED: return r->fuse;
    case OP_ATT_FWD: case OP_ATT_BWD: return r->naive_attention;
    case OP_GEMM: return !r->bf16 || r->decode;
    case OP_GEMM_BF16: return r->bf16;
    case OP_FLASH_FWD: case OP_FLASH_BWD: return flash && !r->bf16;
    case OP_FLASH_FWD_BF16: case OP_FLASH_BWD_BF16: return flash && r->bf16;
    case OP_QKV_TO_HEADS: case OP_HEADS_TO_QKV_GRAD: case OP_ROWS_TO_HEADS: return flash;
    case OP_HEADS_TO_ROWS: return flash && !r->bf16;
    case OP_ATT_DECODE: return r->decode;
    case OP_RES_FWD: return !r->fuse || r->decode;
    case OP_RES_BWD: return false;
    case OP_DROPOUT: return r->dropout;
    default: return true; /* layernorm_fwd, encoder, bias_bwd, crossentropy_fwd, adamw, zero, grad_sumsq */
    }
}

/* The reference table's entry of op. */
static gptc_op_fn ref_entry(int op) {
    gptc_op_fn f;
    memcpy(&f.any, (const char *)gptc_kernels_ref() + gptc_op_infos[op].slot * sizeof(void *), sizeof f.any);
    return f;
}

#define PROBE_CAP ((int64_t)1 << 20) /* elements of the largest probe operand (rows x C for the LayerNorms) */
#define GUARD 16                      /* floats after every buffer, checked after each call */
/* The guard's words: quiet NaNs whose payload differs per buffer and word, so that even a kernel that
 * runs past its input's end (reading the guard) into its output's is caught. */
#define SENTINEL(b, i) (0x7fc00000u | (uint32_t)(((b) * GUARD + (i) + 1) & 0x3fffff))
#define MAXBUF 32

typedef struct probe {
    gptc_rng rng;
    float *bufs[MAXBUF];
    int nbufs;
    bool nomem;
    double err;           /* the largest error so far */
    const char *worst;    /* its output */
    const char *overrun;  /* an output written past its end, or NULL */
} probe;

static float *buf(probe *p, size_t n) {
    float *b = p->nbufs < MAXBUF ? malloc(sizeof(float) * (n + GUARD)) : NULL;
    if (!b) {
        p->nomem = true;
        return NULL;
    }
    for (size_t i = 0; i < GUARD; i++) {
        uint32_t s = SENTINEL(p->nbufs, i);
        memcpy(b + n + i, &s, sizeof s);
    }
    p->bufs[p->nbufs++] = b;
    return b;
}

/* uniform in [lo, hi) */
static float *rnd(probe *p, size_t n, double lo, double hi) {
    float *b = buf(p, n);
    for (size_t i = 0; b && i < n; i++) b[i] = (float)(lo + (hi - lo) * gptc_rng_uniform(&p->rng));
    return b;
}

static float *copy(probe *p, const float *x, size_t n) {
    float *b = x ? buf(p, n) : NULL;
    if (b) memcpy(b, x, sizeof(float) * n);
    return b;
}

static bool guard_intact(const probe *p, const float *b, size_t n) {
    int k = 0;
    while (k < p->nbufs && p->bufs[k] != b) k++;
    for (size_t i = 0; i < GUARD; i++) {
        uint32_t s;
        memcpy(&s, b + n + i, sizeof s);
        if (s != SENTINEL(k, i)) return false;
    }
    return true;
}

/* The error of output `what` (got against want, n floats; with T > 0 only the causal half of
 * (rows of T) x T blocks, key <= query). */
static void compare(probe *p, const char *what, const float *got, const float *want, size_t n, int T) {
    if (!guard_intact(p, got, n) && !p->overrun) p->overrun = what;
    double diff = 0, scale = 1;
    for (size_t i = 0; i < n; i++) {
        if (T > 0 && (int)(i % T) > (int)((i / T) % T)) continue;
        double d = fabs((double)got[i] - want[i]);
        if (!(d <= diff)) diff = isnan(d) || isinf(d) ? INFINITY : d; /* NaN or inf: infinite */
        if (fabs(want[i]) > scale) scale = fabs(want[i]);
    }
    double e = diff / scale;
    if (e > p->err || !p->worst) {
        p->err = e;
        p->worst = what;
    }
}

/* A probe size for a run's size n: n itself up to cap, else at most cap with n's remainder modulo
 * 64 x mult kept. */
static int64_t probe_size(int64_t n, int64_t cap, int64_t mult) {
    if (n <= cap) return n;
    int64_t step = 64 * (mult > 1 ? mult : 1), r = n % step;
    int64_t k = cap > r ? (cap - r) / step : 0, s = r + k * step;
    return s > 0 ? s : step;
}


/* Elements of a probe over the run's (B*T) x width. */
static size_t probe_elems(const gptc_op_run *r, int64_t width, const gptc_op_contract *c) {
    return (size_t)probe_size((int64_t)r->B * r->T * width, PROBE_CAP, c->n_multiple);
}
/* Rows of a probe over the run's B*T rows of `width` floats. */
static int probe_rows(const gptc_op_run *r, int64_t width, int64_t cap_rows) {
    int64_t cap = PROBE_CAP / width > 0 ? PROBE_CAP / width : 1;
    return (int)probe_size((int64_t)r->B * r->T, cap < cap_rows ? cap : cap_rows, 1);
}
/* The batch of a probe over whole sequences: the contract's multiple, else 1. */
static int probe_batch(const gptc_op_contract *c) { return c->n_multiple > 1 ? (int)c->n_multiple : 1; }

/* Any GELU form, forward or backward: n = B*T*4C elements. */
static void probe_gelu(probe *p, int op, gptc_op_fn fn, const gptc_op_run *r, const gptc_op_contract *c) {
    gptc_op_fn ref = ref_entry(op);
    bool fwd = op == OP_GELU_FWD || op == OP_GELU_ERF_FWD || op == OP_GELU_SIG_FWD;
    size_t n = probe_elems(r, 4 * (int64_t)r->C, c);
    float *inp = rnd(p, n, -6, 6), *dout = rnd(p, n, -1, 1), *a = rnd(p, n, -1, 1), *b = copy(p, a, n);
    if (p->nomem) return;
    if (fwd) {
        fn.gelu_fwd(a, inp, n);
        ref.gelu_fwd(b, inp, n);
        compare(p, "out", a, b, n, 0);
    } else {
        fn.gelu_bwd(a, inp, dout, n);
        ref.gelu_bwd(b, inp, dout, n);
        compare(p, "dinp", a, b, n, 0);
    }
}

/* One GEMM call through fn and the reference on the same operands and starting C (m x ldc floats). */
static void gemm_case(probe *p, gptc_gemm_fn fn, gptc_gemm_fn ref, const char *what, int ta, int tb, int M, int N,
                      int K, int lda, int ldb, int ldc, float beta, bool bias) {
    float *A = rnd(p, (size_t)(ta ? K : M) * lda, -1, 1), *B = rnd(p, (size_t)(tb ? N : K) * ldb, -1, 1);
    float *bv = bias ? rnd(p, (size_t)N, -1, 1) : NULL, *C = rnd(p, (size_t)M * ldc, -1, 1), *R = copy(p, C, (size_t)M * ldc);
    if (p->nomem) return;
    fn(ta, tb, M, N, K, A, lda, B, ldb, beta, bv, C, ldc);
    ref(ta, tb, M, N, K, A, lda, B, ldb, beta, bv, R, ldc);
    compare(p, what, C, R, (size_t)M * ldc, 0);
}

/* A linear layer's three products at the run's width: forward with the bias in the epilogue, the input
 * gradient (B transposed, strided A and C), the weight gradient (A transposed, accumulated). */
static void probe_gemm(probe *p, int op, gptc_op_fn fn, const gptc_op_run *r) {
    gptc_gemm_fn ref = ref_entry(op).gemm, f = fn.gemm;
    int C = r->C, N3 = 3 * r->C, rows = probe_rows(r, N3, 256);
    gemm_case(p, f, ref, "C (forward, bias)", 0, 0, rows, N3, C, C, N3, N3, 0.0f, true);
    gemm_case(p, f, ref, "C (B transposed, strided)", 0, 1, rows, C, N3, N3 + 3, N3, C + 5, 0.0f, false);
    gemm_case(p, f, ref, "C (A transposed, accumulated)", 1, 0, C, N3, rows, C, N3, N3, 1.0f, false);
}

/* The flash attention, forward or backward, fp32 or bf16: one sequence (or the contract's batch
 * multiple) at the run's T, NH, HS, dropout 0.1. */
static void probe_flash(probe *p, int op, gptc_op_fn fn, const gptc_op_run *r, const gptc_op_contract *c) {
    bool bf16 = op == OP_FLASH_FWD_BF16 || op == OP_FLASH_BWD_BF16;
    gptc_op_fn ref_f = ref_entry(bf16 ? OP_FLASH_FWD_BF16 : OP_FLASH_FWD), ref_b = ref_entry(bf16 ? OP_FLASH_BWD_BF16 : OP_FLASH_BWD);
    int B = probe_batch(c), T = r->T, NH = r->NH, HS = r->C / r->NH;
    size_t n = (size_t)B * NH * T * HS, nl = (size_t)B * NH * T;
    const float drop = 0.1f;
    const uint64_t seed = 0x5eed5eedULL;
    float *q = rnd(p, n, -1, 1), *k = rnd(p, n, -1, 1), *v = rnd(p, n, -1, 1), *o_r = buf(p, n), *lse_r = buf(p, nl);
    if (p->nomem) return;
    ref_f.flash_fwd(o_r, lse_r, q, k, v, B, NH, T, HS, drop, seed);
    if (op == OP_FLASH_FWD || op == OP_FLASH_FWD_BF16) {
        float *o = rnd(p, n, -1, 1), *lse = rnd(p, nl, -1, 1);
        if (p->nomem) return;
        fn.flash_fwd(o, lse, q, k, v, B, NH, T, HS, drop, seed);
        compare(p, "o", o, o_r, n, 0);
        compare(p, "lse", lse, lse_r, nl, 0);
        return;
    }
    float *dout = rnd(p, n, -1, 1), *dq = rnd(p, n, -1, 1), *dk = rnd(p, n, -1, 1), *dv = rnd(p, n, -1, 1);
    float *dq_r = copy(p, dq, n), *dk_r = copy(p, dk, n), *dv_r = copy(p, dv, n);
    if (p->nomem) return;
    fn.flash_bwd(dq, dk, dv, dout, q, k, v, o_r, lse_r, B, NH, T, HS, drop, seed);
    ref_b.flash_bwd(dq_r, dk_r, dv_r, dout, q, k, v, o_r, lse_r, B, NH, T, HS, drop, seed);
    compare(p, "dq", dq, dq_r, n, 0);
    compare(p, "dk", dk, dk_r, n, 0);
    compare(p, "dv", dv, dv_r, n, 0);
}

/* token ids (n) uniform in [0, V), in a probe buffer */
static int *tokens(probe *p, size_t n, int V) {
    int *t = (int *)buf(p, n);
    for (size_t i = 0; t && i < n; i++) t[i] = (int)(gptc_rng_next(&p->rng) % (uint64_t)V);
    return t;
}

/* The encoder: whole sequences of the run's T and C over a vocabulary of 97 (tokens repeat). */
static void probe_encoder(probe *p, int op, gptc_op_fn fn, const gptc_op_run *r) {
    gptc_op_fn ref = ref_entry(op);
    int T = r->T, C = r->C, V = 97, B = (int64_t)r->B * T * C <= PROBE_CAP ? r->B : 1;
    size_t btc = (size_t)B * T * C;
    int *inp = tokens(p, (size_t)B * T, V);
    float *wte = rnd(p, (size_t)V * C, -1, 1), *wpe = rnd(p, (size_t)T * C, -1, 1), *x = rnd(p, btc, -1, 1);
    if (p->nomem) return;
    if (op == OP_ENC_FWD) {
        float *out = rnd(p, btc, -1, 1), *out_r = buf(p, btc);
        if (p->nomem) return;
        fn.encoder_fwd(out, inp, wte, wpe, B, T, C);
        ref.encoder_fwd(out_r, inp, wte, wpe, B, T, C);
        compare(p, "out", out, out_r, btc, 0);
        return;
    }
    float *wte_r = copy(p, wte, (size_t)V * C), *wpe_r = copy(p, wpe, (size_t)T * C);
    if (p->nomem) return;
    fn.encoder_bwd(wte, wpe, x, inp, B, T, C);
    ref.encoder_bwd(wte_r, wpe_r, x, inp, B, T, C);
    compare(p, "dwte", wte, wte_r, (size_t)V * C, 0);
    compare(p, "dwpe", wpe, wpe_r, (size_t)T * C, 0);
}

/* The bias of the qkv layer: rows of 3C. */
static void probe_bias(probe *p, int op, gptc_op_fn fn, const gptc_op_run *r) {
    gptc_op_fn ref = ref_entry(op);
    int OC = 3 * r->C, N = probe_rows(r, OC, INT32_MAX);
    size_t n = (size_t)N * OC;
    float *x = rnd(p, n, -1, 1), *b = rnd(p, (size_t)OC, -1, 1), *b_r = copy(p, b, (size_t)OC), *x_r = copy(p, x, n);
    if (p->nomem) return;
    if (op == OP_BIAS_FWD) {
        fn.bias_fwd(x, b, N, OC);
        ref.bias_fwd(x_r, b, N, OC);
        compare(p, "out", x, x_r, n, 0);
    } else {
        fn.bias_bwd(b, x, N, OC);
        ref.bias_bwd(b_r, x, N, OC);
        compare(p, "dbias", b, b_r, (size_t)OC, 0);
    }
}

/* One decoding query against a cache of the run's T positions. */
static void probe_decode(probe *p, gptc_op_fn fn, const gptc_op_run *r) {
    int C = r->C, NH = r->NH, T = r->T;
    float *q = rnd(p, (size_t)C, -1, 1), *kc = rnd(p, (size_t)T * C, -1, 1), *vc = rnd(p, (size_t)T * C, -1, 1);
    float *out = rnd(p, (size_t)C, -1, 1), *out_r = buf(p, (size_t)C), *att = buf(p, (size_t)NH * T);
    float *att_r = buf(p, (size_t)NH * T);
    if (p->nomem) return;
    fn.attention_decode(out, att, q, kc, vc, T, C, NH);
    ref_entry(OP_ATT_DECODE).attention_decode(out_r, att_r, q, kc, vc, T, C, NH);
    compare(p, "out", out, out_r, (size_t)C, 0);
}

/* The elementwise operators over B*T*C floats: residual, AdamW, dropout, zero. */
static void probe_elementwise(probe *p, int op, gptc_op_fn fn, const gptc_op_run *r, const gptc_op_contract *c) {
    gptc_op_fn ref = ref_entry(op);
    size_t n = probe_elems(r, r->C, c);
    float *a = rnd(p, n, -1, 1), *b = rnd(p, n, -1, 1), *x = rnd(p, n, -1, 1), *x_r = copy(p, x, n);
    if (p->nomem) return;
    switch (op) {
    case OP_RES_FWD:
        fn.residual_fwd(x, a, b, n);
        ref.residual_fwd(x_r, a, b, n);
        compare(p, "out", x, x_r, n, 0);
        break;
    case OP_RES_BWD: {
        float *a_r = copy(p, a, n);
        if (p->nomem) return;
        fn.residual_bwd(a, x, b, n);
        ref.residual_bwd(a_r, x_r, b, n);
        compare(p, "da", a, a_r, n, 0);
        compare(p, "db", x, x_r, n, 0);
        break;
    }
    case OP_ADAMW: { /* p = x, g = a, m = b (moments near 0), v >= 0 */
        float *v = rnd(p, n, 0, 0.01), *b_r = copy(p, b, n), *v_r = copy(p, v, n);
        if (p->nomem) return;
        fn.adamw(x, a, b, v, n, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 0.5f, 3);
        ref.adamw(x_r, a, b_r, v_r, n, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 0.5f, 3);
        compare(p, "p", x, x_r, n, 0);
        compare(p, "m", b, b_r, n, 0);
        compare(p, "v", v, v_r, n, 0);
        break;
    }
    case OP_DROPOUT:
        fn.dropout(x, a, n, 0.1f, 0x5eedULL, (uint64_t)3 << 32 | 7);
        ref.dropout(x_r, a, n, 0.1f, 0x5eedULL, (uint64_t)3 << 32 | 7);
        compare(p, "out", x, x_r, n, 0);
        break;
    case OP_ZERO:
        memset(x_r, 0, sizeof(float) * n);
        fn.zero(x, n);
        compare(p, "x", x, x_r, n, 0);
        break;
    default: { /* grad_sumsq: a double, not an array */
        double got = fn.grad_sumsq(a, n), want = ref.grad_sumsq(a, n), d = fabs(got - want);
        double e = isnan(d) || isinf(d) ? INFINITY : d / (fabs(want) > 1 ? fabs(want) : 1);
        if (e > p->err || !p->worst) p->err = e, p->worst = "sum";
    }
    }
}

/* The cross-entropy: rows of a vocabulary of 1000 padded to 1024 (at most 64 rows). */
static void probe_xent(probe *p, int op, gptc_op_fn fn, const gptc_op_run *r) {
    gptc_op_fn ref = ref_entry(op);
    const gptc_kernels *rk = gptc_kernels_ref();
    int V = 1000, Vp = 1024, N = probe_rows(r, Vp, 64);
    size_t nv = (size_t)N * Vp;
    const float dloss = 0.25f;
    int *tg = tokens(p, (size_t)N, V);
    float *logits = rnd(p, nv, -4, 4), *losses = rnd(p, (size_t)N, -1, 1), *losses_r = copy(p, losses, (size_t)N);
    float *x = rnd(p, nv, -1, 1), *x_r = copy(p, x, nv);
    if (p->nomem) return;
    if (op == OP_XENT_FWD) {
        fn.crossentropy_fwd(losses, x, logits, tg, N, V, Vp);
        ref.crossentropy_fwd(losses_r, x_r, logits, tg, N, V, Vp);
        compare(p, "losses", losses, losses_r, (size_t)N, 0);
        compare(p, "probs", x, x_r, nv, 0);
    } else if (op == OP_XENT_BWD) {
        float *probs = buf(p, nv);
        if (p->nomem) return;
        rk->crossentropy_fwd(losses_r, probs, logits, tg, N, V, Vp);
        fn.crossentropy_bwd(x, probs, tg, dloss, N, V, Vp);
        ref.crossentropy_bwd(x_r, probs, tg, dloss, N, V, Vp);
        compare(p, "dlogits", x, x_r, nv, 0);
    } else {
        memcpy(x, logits, sizeof(float) * nv);
        memcpy(x_r, logits, sizeof(float) * nv);
        fn.crossentropy_fused(losses, x, tg, dloss, N, V, Vp);
        ref.crossentropy_fused(losses_r, x_r, tg, dloss, N, V, Vp);
        compare(p, "losses", losses, losses_r, (size_t)N, 0);
        compare(p, "dlogits", x, x_r, nv, 0);
    }
}

/* The head reshapes: whole sequences of the run's T, C, NH (B as the run's while it fits the cap). */
static void probe_heads(probe *p, int op, gptc_op_fn fn, const gptc_op_run *r) {
    gptc_op_fn ref = ref_entry(op);
    int T = r->T, C = r->C, NH = r->NH, B = (int64_t)r->B * T * 3 * C <= PROBE_CAP ? r->B : 1;
    size_t btc = (size_t)B * T * C;
    float *rows = rnd(p, 3 * btc, -1, 1), *rows_r = copy(p, rows, 3 * btc);
    float *h1 = rnd(p, btc, -1, 1), *h2 = rnd(p, btc, -1, 1), *h3 = rnd(p, btc, -1, 1);
    float *g1 = copy(p, h1, btc), *g2 = copy(p, h2, btc), *g3 = copy(p, h3, btc);
    if (p->nomem) return;
    switch (op) {
    case OP_QKV_TO_HEADS:
        fn.qkv_to_heads(h1, h2, h3, rows, B, T, C, NH);
        ref.qkv_to_heads(g1, g2, g3, rows, B, T, C, NH);
        compare(p, "q", h1, g1, btc, 0);
        compare(p, "k", h2, g2, btc, 0);
        compare(p, "v", h3, g3, btc, 0);
        break;
    case OP_HEADS_TO_QKV_GRAD:
        fn.heads_to_qkv_grad(rows, h1, h2, h3, B, T, C, NH);
        ref.heads_to_qkv_grad(rows_r, h1, h2, h3, B, T, C, NH);
        compare(p, "dqkv", rows, rows_r, 3 * btc, 0);
        break;
    case OP_HEADS_TO_ROWS:
        fn.heads_to_rows(h1, h2, B, T, C, NH);
        ref.heads_to_rows(g1, h2, B, T, C, NH);
        compare(p, "out", h1, g1, btc, 0);
        break;
    default:
        fn.rows_to_heads(h1, h2, B, T, C, NH);
        ref.rows_to_heads(g1, h2, B, T, C, NH);
        compare(p, "dheads", h1, g1, btc, 0);
    }
}

/* The operators of ABI version 1: the GELU tanh form, the LayerNorms, the naive attention. */
static void probe_v1(probe *p, int op, gptc_op_fn fn, const gptc_op_run *r, const gptc_op_contract *c) {
    const gptc_kernels *ref = gptc_kernels_ref();
    int C = r->C;
    if (op == OP_GELU_FWD || op == OP_GELU_BWD) {
        probe_gelu(p, op, fn, r, c);
        return;
    }
    if (op == OP_ATT_FWD || op == OP_ATT_BWD) {
        int B = c->n_multiple > 1 ? (int)c->n_multiple : 1, T = r->T, NH = r->NH; /* the contract held: B divides */
        size_t btc = (size_t)B * T * C, att = (size_t)B * NH * T * T;
        float *qkv = rnd(p, 3 * btc, -1, 1), *dout = rnd(p, btc, -1, 1);
        float *out_r = buf(p, btc), *pre_r = buf(p, att), *att_r = buf(p, att);
        if (p->nomem) return;
        memset(pre_r, 0, sizeof(float) * att);
        memset(att_r, 0, sizeof(float) * att);
        ref->attention_fwd(out_r, pre_r, att_r, qkv, B, T, C, NH);
        if (op == OP_ATT_FWD) {
            float *out = rnd(p, btc, -1, 1), *pre = rnd(p, att, -1, 1), *at = rnd(p, att, -1, 1);
            if (p->nomem) return;
            fn.attention_fwd(out, pre, at, qkv, B, T, C, NH);
            compare(p, "out", out, out_r, btc, 0);
            compare(p, "preatt", pre, pre_r, att, T);
            compare(p, "att", at, att_r, att, T);
        } else {
            float *dq = rnd(p, 3 * btc, -1, 1), *dq_r = copy(p, dq, 3 * btc);
            float *s1 = buf(p, att), *s2 = buf(p, att), *s3 = buf(p, att), *s4 = buf(p, att);
            if (p->nomem) return;
            fn.attention_bwd(dq, s1, s2, dout, qkv, att_r, B, T, C, NH);
            ref->attention_bwd(dq_r, s3, s4, dout, qkv, att_r, B, T, C, NH);
            compare(p, "dqkv", dq, dq_r, 3 * btc, 0);
        }
        return;
    }
    /* the LayerNorms: N rows of C */
    int64_t mult = c->n_multiple;
    int N = (int)probe_size((int64_t)r->B * r->T, PROBE_CAP / C > 0 ? PROBE_CAP / C : 1, mult);
    size_t nc = (size_t)N * C;
    float *x = rnd(p, nc, -2, 2), *w = rnd(p, C, 0.5, 1.5), *bias = rnd(p, C, -0.5, 0.5);
    float *skip = rnd(p, nc, -1, 1), *dout = rnd(p, nc, -1, 1);
    float *res_r = buf(p, nc), *out_r = buf(p, nc), *mean_r = buf(p, N), *rstd_r = buf(p, N);
    if (p->nomem) return;
    for (int i = 0; i < N; i++) { /* rows with their own offset and spread */
        float off = (float)(4 * gptc_rng_uniform(&p->rng) - 2), sc = (float)(0.2 + 2 * gptc_rng_uniform(&p->rng));
        for (int j = 0; j < C; j++) x[(size_t)i * C + j] = off + sc * x[(size_t)i * C + j];
    }
    ref->residual_layernorm_fwd(res_r, out_r, mean_r, rstd_r, x, skip, w, bias, N, C);
    if (op == OP_LN_FWD || op == OP_RES_LN_FWD) {
        float *res = rnd(p, nc, -1, 1), *out = rnd(p, nc, -1, 1), *mean = rnd(p, N, -1, 1), *rstd = rnd(p, N, -1, 1);
        float *out2 = buf(p, nc), *mean2 = buf(p, N), *rstd2 = buf(p, N);
        if (p->nomem) return;
        if (op == OP_LN_FWD) {
            fn.layernorm_fwd(out, mean, rstd, res_r, w, bias, N, C);
            ref->layernorm_fwd(out2, mean2, rstd2, res_r, w, bias, N, C);
        } else {
            fn.residual_layernorm_fwd(res, out, mean, rstd, x, skip, w, bias, N, C);
            ref->residual_layernorm_fwd(res_r, out2, mean2, rstd2, x, skip, w, bias, N, C);
            compare(p, "res", res, res_r, nc, 0);
        }
        compare(p, "out", out, out2, nc, 0);
        compare(p, "mean", mean, mean2, N, 0);
        compare(p, "rstd", rstd, rstd2, N, 0);
        return;
    }
    /* backward: dinp, dw, db start from the same random values on both sides */
    float *dinp = rnd(p, nc, -1, 1), *dw = rnd(p, C, -1, 1), *db = rnd(p, C, -1, 1);
    float *dinp_r = copy(p, dinp, nc), *dw_r = copy(p, dw, C), *db_r = copy(p, db, C);
    if (p->nomem) return;
    if (op == OP_LN_BWD) {
        fn.layernorm_bwd(dinp, dw, db, dout, res_r, w, mean_r, rstd_r, N, C);
        ref->layernorm_bwd(dinp_r, dw_r, db_r, dout, res_r, w, mean_r, rstd_r, N, C);
    } else {
        fn.layernorm_bwd_residual(dinp, dw, db, skip, dout, res_r, w, mean_r, rstd_r, N, C);
        ref->layernorm_bwd_residual(dinp_r, dw_r, db_r, skip, dout, res_r, w, mean_r, rstd_r, N, C);
    }
    compare(p, "dinp", dinp, dinp_r, nc, 0);
    compare(p, "dw", dw, dw_r, C, 0);
    compare(p, "db", db, db_r, C, 0);
    if (op == OP_LN_BWD_RES) { /* and without a skip gradient (dskip NULL: ln_f's backward) */
        float *d2 = rnd(p, nc, -1, 1), *d2_r = copy(p, d2, nc);
        if (p->nomem) return;
        fn.layernorm_bwd_residual(d2, dw, db, NULL, dout, res_r, w, mean_r, rstd_r, N, C);
        ref->layernorm_bwd_residual(d2_r, dw_r, db_r, NULL, dout, res_r, w, mean_r, rstd_r, N, C);
        compare(p, "dinp (dskip NULL)", d2, d2_r, nc, 0);
    }
}

static void run_probe(probe *p, int op, gptc_op_fn fn, const gptc_op_run *r, const gptc_op_contract *c) {
    switch (op) {
    case OP_GEMM: case OP_GEMM_BF16: probe_gemm(p, op, fn, r); break;
    case OP_FLASH_FWD: case OP_FLASH_BWD: case OP_FLASH_FWD_BF16: case OP_FLASH_BWD_BF16: probe_flash(p, op, fn, r, c); break;
    case OP_GELU_ERF_FWD: case OP_GELU_ERF_BWD: case OP_GELU_SIG_FWD: case OP_GELU_SIG_BWD: probe_gelu(p, op, fn, r, c); break;
    case OP_ENC_FWD: case OP_ENC_BWD: probe_encoder(p, op, fn, r); break;
    case OP_BIAS_FWD: case OP_BIAS_BWD: probe_bias(p, op, fn, r); break;
    case OP_ATT_DECODE: probe_decode(p, fn, r); break;
    case OP_RES_FWD: case OP_RES_BWD: case OP_ADAMW: case OP_DROPOUT: case OP_ZERO: case OP_GRAD_SUMSQ:
        probe_elementwise(p, op, fn, r, c);
        break;
    case OP_XENT_FWD: case OP_XENT_BWD: case OP_XENT_FUSED: probe_xent(p, op, fn, r); break;
    case OP_QKV_TO_HEADS: case OP_HEADS_TO_QKV_GRAD: case OP_HEADS_TO_ROWS: case OP_ROWS_TO_HEADS:
        probe_heads(p, op, fn, r);
        break;
    default: probe_v1(p, op, fn, r, c);
    }
}

gptc_status gptc_op_probe_index(int op, gptc_op_fn fn, const gptc_op_run *r, const gptc_op_contract *c, double *err,
                            const char **what) {
    probe p = {.err = 0};
    gptc_rng_seed(&p.rng, 0x9e3779b97f4a7c15ull + (uint64_t)op);
    run_probe(&p, op, fn, r, c);
    for (int i = 0; i < p.nbufs; i++) free(p.bufs[i]);
    *err = p.err;
    *what = p.worst ? p.worst : "";
    if (p.nomem) return gptc_fail(GPTC_ERR_NOMEM, "%s: out of memory for the probe inputs", gptc_op_infos[op].name);
    if (p.overrun) {
        *what = p.overrun;
        return gptc_fail(GPTC_ERR_STATE, "%s wrote past the end of its output %s", gptc_op_infos[op].name, p.overrun);
    }
    return GPTC_OK;
}

gptc_status gptc_op_probe(const char *op, gptc_op_fn fn, const gptc_op_run *run, const gptc_op_contract *contract,
                          double *err, double *tol, const char **what) {
    int i = -1;
    for (int j = 0; op && j < GPTC_OP_COUNT; j++)
        if (strcmp(op, gptc_op_infos[j].name) == 0) i = j;
    if (i < 0) return gptc_fail(GPTC_ERR_ARG, "%s: not an operator a plugin can replace", op ? op : "(null)");
    gptc_op_contract none = {0};
    *tol = gptc_op_infos[i].tol;
    return gptc_op_probe_index(i, fn, run, contract ? contract : &none, err, what);
}
