/* ref_f32.c — the float instantiation of the reference kernels and the reference kernel table. */
#include "kernels/kernels.h"

#define REAL float
#define FN(name) ref_f32_##name
#define R_EXP expf
#define R_LOG logf
#define R_SQRT sqrtf
#define R_TANH tanhf
#include "ref_ops.inc"

static const gptc_kernels g_ref = {
    .variant = "ref",
    .encoder_fwd = ref_f32_encoder_fwd,
    .encoder_bwd = ref_f32_encoder_bwd,
    .layernorm_fwd = ref_f32_layernorm_fwd,
    .layernorm_bwd = ref_f32_layernorm_bwd,
    .gemm = ref_f32_gemm,
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
