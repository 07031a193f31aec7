/* ref_f32.c — the float instantiation of the reference kernels and the reference kernel table. */
#include "kernels/kernels.h"

#define REAL float
#define FN(name) ref_f32_##name
#define R_EXP expf
#define R_LOG logf
#define R_SQRT sqrtf
#define R_TANH tanhf
#include "ref_ops.inc"

#include "core/core.h"

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
};

const gptc_kernels *gptc_kernels_ref(void) { return &g_ref; }
