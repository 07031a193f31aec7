/* ref_f32.c — the float instantiation of the reference kernels and the reference kernel table (every
 * entry: the flash attention, GELU forms, head reshapes and dropout come from their own files). */
#include "kernels/kernels.h"
#include "kernels/attention.h"
#include "kernels/dropout.h"
#include "kernels/gelu.h"
#include "kernels/ostate.h"

#define REAL float
#define FN(name) ref_f32_##name
#define R_EXP expf
#define R_LOG logf
#define R_SQRT sqrtf
#define R_TANH tanhf
#include "ref_ops.inc"

#include "core/core.h"

#include <math.h>

/* rows x cols of X (row stride ldx) rounded to bf16 into a fresh (rows, cols) copy */
static float *bf16_copy(const float *X, int ldx, int rows, int cols) {
    float *o = gptc_alloc(sizeof(float) * (size_t)rows * cols, "bf16 reference copy");
    GPTC_ASSERT(o != NULL);
    for (int i = 0; i < rows; i++)
        for (int j = 0; j < cols; j++) o[(size_t)i * cols + j] = gptc_bf16_round(X[(size_t)i * ldx + j]);
    return o;
}

/* The bf16 contract of kernels.h: the operands rounded to bf16 (as stored, so the transposes are
 * untouched), then the fp32 reference product (exact products of bf16 values, fp32 sums). */
static void ref_bf16_gemm(int transA, int transB, int M, int N, int K, const float *A, int lda, const float *B,
                          int ldb, float beta, const float *bias, float *C, int ldc) {
    if (M <= 0 || N <= 0) return;
    float *a = transA ? bf16_copy(A, lda, K, M) : bf16_copy(A, lda, M, K);
    float *b = transB ? bf16_copy(B, ldb, N, K) : bf16_copy(B, ldb, K, N);
    ref_f32_gemm(transA, transB, M, N, K, a, transA ? M : K, b, transB ? K : N, beta, bias, C, ldc);
    gptc_free(a);
    gptc_free(b);
}

/* The gemm_bf16_in16 contract: bf16 operands widened (exact), fp32 ones rounded, into copies as
 * stored; then the fp32 reference product, as ref_bf16_gemm. */
static float *bf16_operand(const void *X, int x16, int ldx, int rows, int cols) {
    if (!x16) return bf16_copy(X, ldx, rows, cols);
    const uint16_t *x = X;
    float *o = gptc_alloc(sizeof(float) * (size_t)rows * cols, "bf16 reference copy");
    GPTC_ASSERT(o != NULL);
    for (int i = 0; i < rows; i++)
        for (int j = 0; j < cols; j++) o[(size_t)i * cols + j] = gptc_bf16_to_f32(x[(size_t)i * ldx + j]);
    return o;
}

/* B (K,N) in matvec's panel form (kernels.h GPTC_GEMM_B_PANELS) as bf16_operand's (K,N) rows */
static float *bf16_operand_panels(const void *X, int x16, int K, int N) {
    float *o = gptc_alloc(sizeof(float) * (size_t)K * N, "bf16 reference copy");
    GPTC_ASSERT(o != NULL);
    for (int k = 0; k < K; k++)
        for (int n = 0; n < N; n++) {
            size_t i = gptc_matvec_panel_at(K, k, n, x16);
            o[(size_t)k * N + n] = x16 ? gptc_bf16_to_f32(((const uint16_t *)X)[i]) : gptc_bf16_round(((const float *)X)[i]);
        }
    return o;
}

static void ref_bf16_gemm_in16(int transA, int transB, int M, int N, int K, const void *A, int lda, const void *B,
                               int ldb, int in16, float beta, const float *bias, float *C, int ldc) {
    if (M <= 0 || N <= 0) return;
    int a16 = in16 & GPTC_GEMM_A16, b16 = in16 & GPTC_GEMM_B16;
    GPTC_ASSERT(!(in16 & GPTC_GEMM_B_PANELS) || !transB);
    float *a = transA ? bf16_operand(A, a16, lda, K, M) : bf16_operand(A, a16, lda, M, K);
    float *b = in16 & GPTC_GEMM_B_PANELS ? bf16_operand_panels(B, b16, K, N)
               : transB                  ? bf16_operand(B, b16, ldb, N, K)
                                         : bf16_operand(B, b16, ldb, K, N);
    ref_f32_gemm(transA, transB, M, N, K, a, transA ? M : K, b, transB ? K : N, beta, bias, C, ldc);
    gptc_free(a);
    gptc_free(b);
}

/* ---- bf16 storage (kernels.h): the fp32 reference's arithmetic, each output rounded to bf16 */

static void ref_layernorm_row_bf16(uint16_t *o, float *mean, float *rstd, const float *x, const float *w,
                                   const float *b, int C) {
    ref_f32_layernorm_stats(mean, rstd, x, C);
    float m = *mean, s = *rstd;
    for (int c = 0; c < C; c++) o[c] = gptc_f32_to_bf16((x[c] - m) * s * w[c] + b[c]);
}

static void ref_layernorm_fwd_bf16(uint16_t *out, float *mean, float *rstd, const float *inp, const float *w,
                                   const float *b, int N, int C) {
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++)
        ref_layernorm_row_bf16(out + (size_t)n * C, mean + n, rstd + n, inp + (size_t)n * C, w, b, C);
}

static void ref_residual_layernorm_fwd_bf16(float *res, uint16_t *out, float *mean, float *rstd, const float *a,
                                            const float *b, const float *w, const float *bias, int N, int C) {
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        float *x = res + (size_t)n * C;
        const float *ar = a + (size_t)n * C, *br = b + (size_t)n * C;
        for (int c = 0; c < C; c++) x[c] = ar[c] + br[c];
        ref_layernorm_row_bf16(out + (size_t)n * C, mean + n, rstd + n, x, w, bias, C);
    }
}

/* out (n) = bf16(f(inp)): f on chunks of GELU16_CHUNK floats (a stack row), each rounded as it is stored */
#define GELU16_CHUNK 256
static void map_bf16(void (*f)(float *, const float *, size_t), uint16_t *out, const float *inp, size_t n) {
    size_t nchunks = (n + GELU16_CHUNK - 1) / GELU16_CHUNK;
#pragma omp parallel for schedule(static)
    for (size_t ch = 0; ch < nchunks; ch++) {
        float row[GELU16_CHUNK];
        size_t i0 = ch * GELU16_CHUNK, len = n - i0 < GELU16_CHUNK ? n - i0 : GELU16_CHUNK;
        f(row, inp + i0, len);
        for (size_t j = 0; j < len; j++) out[i0 + j] = gptc_f32_to_bf16(row[j]);
    }
}
static void ref_gelu_fwd_bf16(uint16_t *out, const float *inp, size_t n) { map_bf16(ref_f32_gelu_fwd, out, inp, n); }
static void ref_gelu_erf_fwd_bf16(uint16_t *out, const float *inp, size_t n) {
    map_bf16(gptc_gelu_erf_fwd_ref, out, inp, n);
}
static void ref_gelu_sigmoid_fwd_bf16(uint16_t *out, const float *inp, size_t n) {
    map_bf16(gptc_gelu_sigmoid_fwd_ref, out, inp, n);
}

/* x (n) = 0 */
static void ref_zero(float *x, size_t n) { memset(x, 0, n * sizeof *x); }

/* x (n) *= s */
static void ref_scale(float *x, float s, size_t n) {
#pragma omp parallel for schedule(static) if (n >= ((size_t)1 << 16))
    for (size_t i = 0; i < n; i++) x[i] *= s;
}

/* out (n) = x rounded to bf16 */
static void ref_to_bf16(uint16_t *out, const float *x, size_t n) {
#pragma omp parallel for schedule(static) if (n >= ((size_t)1 << 16))
    for (size_t i = 0; i < n; i++) out[i] = gptc_f32_to_bf16(x[i]);
}

/* adamw, then p16 = p rounded to bf16 */
static void ref_adamw16(float *p, uint16_t *p16, const float *g, float *m, float *v, size_t n, float lr, float b1,
                        float b2, float eps, float wd, float grad_scale, int t) {
    ref_f32_adamw(p, g, m, v, n, lr, b1, b2, eps, wd, grad_scale, t);
    ref_to_bf16(p16, p, n);
}

/* element i of a cache of floats, or of bf16 values (kv16) widened */
static inline float kv_at(const void *base, int kv16, size_t i) {
    return kv16 ? gptc_bf16_to_f32(((const uint16_t *)base)[i]) : ((const float *)base)[i];
}

/* S queries against caches sharing their first P positions (kernels.h attention_decode_shared), sample s
 * and head h: the scores of positions 0..Tc-1 (the shared rows below P, the sample's own from P), their
 * softmax and the probabilities' sum of values, in position order, as attention_decode does. */
static void ref_decode_head(int s, int h, float *out, int ldo, float *att, const float *q, int ldq, const void *kp,
                            const void *vp, int P, const void *k, const void *v, size_t lds, int Tc, int C, int NH,
                            int kv16) {
    int HS = C / NH;
    float scale = 1 / sqrtf((float)HS);
    float *a = att + ((size_t)s * NH + h) * Tc, maxv = -INFINITY, sum = 0;
    const float *qh = q + (size_t)s * ldq + (size_t)h * HS;
    for (int t = 0; t < Tc; t++) {
        const void *kb = t < P ? kp : k;
        size_t at = (t < P ? 0 : (size_t)s * lds) + (size_t)t * C + (size_t)h * HS;
        float d = 0;
        for (int i = 0; i < HS; i++) d += qh[i] * kv_at(kb, kv16, at + i);
        a[t] = d * scale;
        if (a[t] > maxv) maxv = a[t];
    }
    for (int t = 0; t < Tc; t++) {
        a[t] = expf(a[t] - maxv);
        sum += a[t];
    }
    float *o = out + (size_t)s * ldo + (size_t)h * HS;
    for (int i = 0; i < HS; i++) o[i] = 0;
    for (int t = 0; t < Tc; t++) {
        const void *vb = t < P ? vp : v;
        size_t at = (t < P ? 0 : (size_t)s * lds) + (size_t)t * C + (size_t)h * HS;
        float w = a[t] / sum;
        for (int i = 0; i < HS; i++) o[i] += w * kv_at(vb, kv16, at + i);
    }
}

static void ref_attention_decode_shared(float *out, int ldo, float *att, const float *q, int ldq, const void *kp,
                                        const void *vp, int P, const void *k, const void *v, size_t lds, int Tc,
                                        int S, int C, int NH, int kv16) {
#pragma omp parallel for schedule(static) collapse(2)
    for (int s = 0; s < S; s++)
        for (int h = 0; h < NH; h++)
            ref_decode_head(s, h, out, ldo, att, q, ldq, kp, vp, P, k, v, lds, Tc, C, NH, kv16);
}

/* kernels.h attention_decode_part: heads NH*part/parts.. of every sample */
static void ref_attention_decode_part(int part, int parts, float *out, int ldo, float *att, const float *q, int ldq,
                                      const void *kp, const void *vp, int P, const void *k, const void *v, size_t lds,
                                      int Tc, int S, int C, int NH, int kv16) {
    for (int s = 0; s < S; s++)
        for (int h = gptc_share_at(NH, part, parts); h < gptc_share_at(NH, part + 1, parts); h++)
            ref_decode_head(s, h, out, ldo, att, q, ldq, kp, vp, P, k, v, lds, Tc, C, NH, kv16);
}

/* Column n of out (M,N) = x (M,K) @ op(W) [+ bias] (kernels.h matvec): each element summed over k in
 * order, from 0, then the bias added; W read as floats or widened from bf16, from rows or from panels. */
static void ref_matvec_col(int n, int transW, int wfmt, int M, int K, const float *x, int ldx, const void *W, int ldw,
                           const float *bias, float *out, int ldo) {
    const float *wf = W;
    const uint16_t *wh = W;
    const int w16 = wfmt & GPTC_MV_BF16, panels = wfmt & GPTC_MV_PANELS;
    for (int m = 0; m < M; m++) {
        const float *xr = x + (size_t)m * ldx;
        float s = 0;
        for (int k = 0; k < K; k++) {
            size_t i = panels   ? gptc_matvec_panel_at(K, k, n, w16)
                       : transW ? (size_t)n * ldw + k
                                : (size_t)k * ldw + n;
            s += xr[k] * (w16 ? gptc_bf16_to_f32(wh[i]) : wf[i]);
        }
        out[(size_t)m * ldo + n] = bias ? s + bias[n] : s;
    }
}

static void ref_matvec(int transW, int wfmt, int M, int N, int K, const float *x, int ldx, const void *W, int ldw,
                       const float *bias, float *out, int ldo) {
#pragma omp parallel for schedule(static) if ((size_t)N * K >= ((size_t)1 << 16))
    for (int n = 0; n < N; n++) ref_matvec_col(n, transW, wfmt, M, K, x, ldx, W, ldw, bias, out, ldo);
}

/* kernels.h matvec_part: columns N*part/parts.. */
static void ref_matvec_part(int part, int parts, int transW, int wfmt, int M, int N, int K, const float *x, int ldx,
                            const void *W, int ldw, const float *bias, float *out, int ldo) {
    for (int n = gptc_share_at(N, part, parts); n < gptc_share_at(N, part + 1, parts); n++)
        ref_matvec_col(n, transW, wfmt, M, K, x, ldx, W, ldw, bias, out, ldo);
}

static const gptc_kernels g_ref = {
    .variant = "ref",
    .encoder_fwd = ref_f32_encoder_fwd,
    .encoder_bwd = ref_f32_encoder_bwd,
    .layernorm_fwd = ref_f32_layernorm_fwd,
    .layernorm_bwd = ref_f32_layernorm_bwd,
    .gemm = ref_f32_gemm,
    .gemm_bf16 = ref_bf16_gemm,
    .bias_fwd = ref_f32_bias_fwd,
    .bias_bwd = ref_f32_bias_bwd,
    .attention_fwd = ref_f32_attention_fwd,
    .attention_bwd = ref_f32_attention_bwd,
    .attention_decode = ref_f32_attention_decode,
    .gelu_fwd = ref_f32_gelu_fwd,
    .gelu_bwd = ref_f32_gelu_bwd,
    .residual_fwd = ref_f32_residual_fwd,
    .residual_bwd = ref_f32_residual_bwd,
    .crossentropy_fwd = ref_f32_crossentropy_fwd,
    .crossentropy_bwd = ref_f32_crossentropy_bwd,
    .residual_layernorm_fwd = ref_f32_residual_layernorm_fwd,
    .layernorm_bwd_residual = ref_f32_layernorm_bwd_residual,
    .crossentropy_fused = ref_f32_crossentropy_fused,
    .adamw = ref_f32_adamw,
    .flash_fwd = gptc_flash_fwd_ref,
    .flash_bwd = gptc_flash_bwd_ref,
    .flash_fwd_bf16 = gptc_flash_fwd_bf16_ref,
    .flash_bwd_bf16 = gptc_flash_bwd_bf16_ref,
    .gelu_erf_fwd = gptc_gelu_erf_fwd_ref,
    .gelu_erf_bwd = gptc_gelu_erf_bwd_ref,
    .gelu_sigmoid_fwd = gptc_gelu_sigmoid_fwd_ref,
    .gelu_sigmoid_bwd = gptc_gelu_sigmoid_bwd_ref,
    .qkv_to_heads = gptc_qkv_to_heads,
    .heads_to_qkv_grad = gptc_heads_to_qkv_grad,
    .heads_to_rows = gptc_heads_to_rows,
    .rows_to_heads = gptc_rows_to_heads,
    .dropout = gptc_dropout_apply,
    .zero = ref_zero,
    .grad_sumsq = gptc_grad_sumsq_ref,
    .layernorm_fwd_bf16 = ref_layernorm_fwd_bf16,
    .residual_layernorm_fwd_bf16 = ref_residual_layernorm_fwd_bf16,
    .gelu_fwd_bf16 = ref_gelu_fwd_bf16,
    .gelu_erf_fwd_bf16 = ref_gelu_erf_fwd_bf16,
    .gelu_sigmoid_fwd_bf16 = ref_gelu_sigmoid_fwd_bf16,
    .heads_to_rows_bf16 = gptc_heads_to_rows_bf16,
    .to_bf16 = ref_to_bf16,
    .adamw16 = ref_adamw16,
    .gemm_bf16_in16 = ref_bf16_gemm_in16,
    .ostate_bf16_load = gptc_ostate_bf16_load_ref,
    .ostate_bf16_store = gptc_ostate_bf16_store_ref,
    .ostate_q8_load = gptc_ostate_q8_load_ref,
    .ostate_q8_store = gptc_ostate_q8_store_ref,
    .matvec = ref_matvec,
    .scale = ref_scale,
    .attention_decode_shared = ref_attention_decode_shared,
    .matvec_part = ref_matvec_part,
    .attention_decode_part = ref_attention_decode_part,
    .flash_scratch = gptc_flash_scratch_ref,
    .flash_scratch_bf16 = gptc_flash_scratch_bf16_ref,
};

const gptc_kernels *gptc_kernels_ref(void) { return &g_ref; }
