/* gelu_forms.c — reference C for the erf and sigmoid GELU forms, and the form dispatcher. */
#include "kernels/gelu.h"
#include "kernels/kernels.h"

#include <math.h>
#include <string.h>

/* out (n) = 0.5 x (1 + erf(x / sqrt2)) */
static void gelu_erf_fwd(float *out, const float *inp, size_t n) {
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) {
        float x = inp[i];
        out[i] = 0.5f * x * (1 + erff(x * 0.70710678118654752f));
    }
}

/* dinp (n) += (Phi(x) + x phi(x)) * dout */
static void gelu_erf_bwd(float *dinp, const float *inp, const float *dout, size_t n) {
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) {
        float x = inp[i];
        float cdf = 0.5f * (1 + erff(x * 0.70710678118654752f));
        float pdf = expf(-0.5f * x * x) * 0.3989422804014327f;
        dinp[i] += (cdf + x * pdf) * dout[i];
    }
}

/* out (n) = x sigmoid(1.702 x) */
static void gelu_sig_fwd(float *out, const float *inp, size_t n) {
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) {
        float x = inp[i];
        out[i] = x / (1 + expf(-1.702f * x));
    }
}

/* dinp (n) += (s + 1.702 x s (1 - s)) * dout, s = sigmoid(1.702 x) */
static void gelu_sig_bwd(float *dinp, const float *inp, const float *dout, size_t n) {
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) {
        float x = inp[i];
        float s = 1 / (1 + expf(-1.702f * x));
        dinp[i] += (s + 1.702f * x * s * (1 - s)) * dout[i];
    }
}

void gptc_gelu_ref_fwd(gptc_gelu_kind f, float *out, const float *inp, size_t n) {
    if (f == GPTC_GELU_KIND_ERF) gelu_erf_fwd(out, inp, n);
    else if (f == GPTC_GELU_KIND_SIGMOID) gelu_sig_fwd(out, inp, n);
    else gptc_kernels_ref()->gelu_fwd(out, inp, n);
}

void gptc_gelu_ref_bwd(gptc_gelu_kind f, float *dinp, const float *inp, const float *dout, size_t n) {
    if (f == GPTC_GELU_KIND_ERF) gelu_erf_bwd(dinp, inp, dout, n);
    else if (f == GPTC_GELU_KIND_SIGMOID) gelu_sig_bwd(dinp, inp, dout, n);
    else gptc_kernels_ref()->gelu_bwd(dinp, inp, dout, n);
}

/* The level is the table's variant, so GPTC_KERNELS caps these forms too. */
void gptc_gelu_fwd_k(const gptc_kernels *k, gptc_gelu_kind f, float *out, const float *inp, size_t n) {
    if (f == GPTC_GELU_KIND_TANH) k->gelu_fwd(out, inp, n);
#if defined(__x86_64__) || defined(__i386__) /* the x86 kernels are built for an x86 target only (Makefile) */
    else if (strcmp(k->variant, "avx512") == 0) gptc_avx512_gelu_fwd(f, out, inp, n);
    else if (strcmp(k->variant, "avx2") == 0) gptc_avx2_gelu_fwd(f, out, inp, n);
#endif
    else gptc_gelu_ref_fwd(f, out, inp, n);
}

void gptc_gelu_bwd_k(const gptc_kernels *k, gptc_gelu_kind f, float *dinp, const float *inp, const float *dout,
                     size_t n) {
    if (f == GPTC_GELU_KIND_TANH) k->gelu_bwd(dinp, inp, dout, n);
#if defined(__x86_64__) || defined(__i386__) /* the x86 kernels are built for an x86 target only (Makefile) */
    else if (strcmp(k->variant, "avx512") == 0) gptc_avx512_gelu_bwd(f, dinp, inp, dout, n);
    else if (strcmp(k->variant, "avx2") == 0) gptc_avx2_gelu_bwd(f, dinp, inp, dout, n);
#endif
    else gptc_gelu_ref_bwd(f, dinp, inp, dout, n);
}

void gptc_gelu_fwd_form(gptc_gelu_kind f, float *out, const float *inp, size_t n) {
    gptc_gelu_fwd_k(gptc_kernels_get(), f, out, inp, n);
}

void gptc_gelu_bwd_form(gptc_gelu_kind f, float *dinp, const float *inp, const float *dout, size_t n) {
    gptc_gelu_bwd_k(gptc_kernels_get(), f, dinp, inp, dout, n);
}
