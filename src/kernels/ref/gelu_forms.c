/* gelu_forms.c — reference C for the erf and sigmoid GELU forms (entries of the reference table), and
 * the form selector: each form is its own table entry, so nothing here looks at the level. */
#include "kernels/gelu.h"
#include "kernels/kernels.h"

#include <math.h>

/* out (n) = 0.5 x (1 + erf(x / sqrt2)) */
void gptc_gelu_erf_fwd_ref(float *out, const float *inp, size_t n) {
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) {
        float x = inp[i];
        out[i] = 0.5f * x * (1 + erff(x * 0.70710678118654752f));
    }
}

/* dinp (n) += (Phi(x) + x phi(x)) * dout */
void gptc_gelu_erf_bwd_ref(float *dinp, const float *inp, const float *dout, size_t n) {
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) {
        float x = inp[i];
        float cdf = 0.5f * (1 + erff(x * 0.70710678118654752f));
        float pdf = expf(-0.5f * x * x) * 0.3989422804014327f;
        dinp[i] += (cdf + x * pdf) * dout[i];
    }
}

/* out (n) = x sigmoid(1.702 x) */
void gptc_gelu_sigmoid_fwd_ref(float *out, const float *inp, size_t n) {
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) {
        float x = inp[i];
        out[i] = x / (1 + expf(-1.702f * x));
    }
}

/* dinp (n) += (s + 1.702 x s (1 - s)) * dout, s = sigmoid(1.702 x) */
void gptc_gelu_sigmoid_bwd_ref(float *dinp, const float *inp, const float *dout, size_t n) {
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) {
        float x = inp[i];
        float s = 1 / (1 + expf(-1.702f * x));
        dinp[i] += (s + 1.702f * x * s * (1 - s)) * dout[i];
    }
}

void gptc_gelu_ref_fwd(gptc_gelu_kind f, float *out, const float *inp, size_t n) {
    gptc_gelu_fwd_entry(gptc_kernels_ref(), f)(out, inp, n);
}

void gptc_gelu_ref_bwd(gptc_gelu_kind f, float *dinp, const float *inp, const float *dout, size_t n) {
    gptc_gelu_bwd_entry(gptc_kernels_ref(), f)(dinp, inp, dout, n);
}

gptc_gelu_fwd_fn gptc_gelu_fwd_entry(const gptc_kernels *k, gptc_gelu_kind f) {
    return f == GPTC_GELU_KIND_ERF ? k->gelu_erf_fwd : f == GPTC_GELU_KIND_SIGMOID ? k->gelu_sigmoid_fwd : k->gelu_fwd;
}

gptc_gelu_fwd_bf16_fn gptc_gelu_fwd_bf16_entry(const gptc_kernels *k, gptc_gelu_kind f) {
    return f == GPTC_GELU_KIND_ERF       ? k->gelu_erf_fwd_bf16
           : f == GPTC_GELU_KIND_SIGMOID ? k->gelu_sigmoid_fwd_bf16
                                         : k->gelu_fwd_bf16;
}

size_t gptc_gelu_fwd_bf16_slot(gptc_gelu_kind f) {
    return f == GPTC_GELU_KIND_ERF       ? GPTC_KERNEL_SLOT(gelu_erf_fwd_bf16)
           : f == GPTC_GELU_KIND_SIGMOID ? GPTC_KERNEL_SLOT(gelu_sigmoid_fwd_bf16)
                                         : GPTC_KERNEL_SLOT(gelu_fwd_bf16);
}

gptc_gelu_bwd_fn gptc_gelu_bwd_entry(const gptc_kernels *k, gptc_gelu_kind f) {
    return f == GPTC_GELU_KIND_ERF ? k->gelu_erf_bwd : f == GPTC_GELU_KIND_SIGMOID ? k->gelu_sigmoid_bwd : k->gelu_bwd;
}

size_t gptc_gelu_fwd_slot(gptc_gelu_kind f) {
    return f == GPTC_GELU_KIND_ERF       ? GPTC_KERNEL_SLOT(gelu_erf_fwd)
           : f == GPTC_GELU_KIND_SIGMOID ? GPTC_KERNEL_SLOT(gelu_sigmoid_fwd)
                                         : GPTC_KERNEL_SLOT(gelu_fwd);
}

size_t gptc_gelu_bwd_slot(gptc_gelu_kind f) {
    return f == GPTC_GELU_KIND_ERF       ? GPTC_KERNEL_SLOT(gelu_erf_bwd)
           : f == GPTC_GELU_KIND_SIGMOID ? GPTC_KERNEL_SLOT(gelu_sigmoid_bwd)
                                         : GPTC_KERNEL_SLOT(gelu_bwd);
}

void gptc_gelu_fwd_form(gptc_gelu_kind f, float *out, const float *inp, size_t n) {
    gptc_gelu_fwd_entry(gptc_kernels_get(), f)(out, inp, n);
}

void gptc_gelu_bwd_form(gptc_gelu_kind f, float *dinp, const float *inp, const float *dout, size_t n) {
    gptc_gelu_bwd_entry(gptc_kernels_get(), f)(dinp, inp, dout, n);
}
