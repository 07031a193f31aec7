/* gelu.h — the three GELU forms (tanh, erf, sigmoid), forward and backward. Each form is its own
 * entry of the kernel table (gelu_fwd/bwd the tanh form, gelu_erf_*, gelu_sigmoid_*), set per level
 * by the overlays; the functions here only pick a form's entry. */
#ifndef GPTC_GELU_H
#define GPTC_GELU_H

#include <stddef.h>
#include <stdint.h>

#include "gptc.h" /* gptc_gelu_kind: the forms, as the model config names them */
#include "kernels/kernels.h"

typedef void (*gptc_gelu_fwd_fn)(float *out, const float *inp, size_t n);
typedef void (*gptc_gelu_bwd_fn)(float *dinp, const float *inp, const float *dout, size_t n);
/* Form f's entries of table k, and their slots (GPTC_KERNEL_SLOT) for the table's labels. */
gptc_gelu_fwd_fn gptc_gelu_fwd_entry(const gptc_kernels *k, gptc_gelu_kind f);
gptc_gelu_bwd_fn gptc_gelu_bwd_entry(const gptc_kernels *k, gptc_gelu_kind f);
size_t gptc_gelu_fwd_slot(gptc_gelu_kind f);
/* The bf16-output forward of form f (kernels.h gelu_fwd_bf16 and its twins) and its slot. */
typedef void (*gptc_gelu_fwd_bf16_fn)(uint16_t *out, const float *inp, size_t n);
gptc_gelu_fwd_bf16_fn gptc_gelu_fwd_bf16_entry(const gptc_kernels *k, gptc_gelu_kind f);
size_t gptc_gelu_fwd_bf16_slot(gptc_gelu_kind f);
size_t gptc_gelu_bwd_slot(gptc_gelu_kind f);
/* out (n) = gelu_f(inp), at the kernel level in use (gptc_kernels_get(): GPTC_KERNELS caps it) */
void gptc_gelu_fwd_form(gptc_gelu_kind f, float *out, const float *inp, size_t n);
/* dinp (n) += gelu_f'(inp) * dout */
void gptc_gelu_bwd_form(gptc_gelu_kind f, float *dinp, const float *inp, const float *dout, size_t n);

/* The plain C reference of each form (the reference table's entries). */
void gptc_gelu_ref_fwd(gptc_gelu_kind f, float *out, const float *inp, size_t n);
void gptc_gelu_ref_bwd(gptc_gelu_kind f, float *dinp, const float *inp, const float *dout, size_t n);
void gptc_gelu_erf_fwd_ref(float *out, const float *inp, size_t n);
void gptc_gelu_erf_bwd_ref(float *dinp, const float *inp, const float *dout, size_t n);
void gptc_gelu_sigmoid_fwd_ref(float *out, const float *inp, size_t n);
void gptc_gelu_sigmoid_bwd_ref(float *dinp, const float *inp, const float *dout, size_t n);

/* Per-ISA versions (kernels/x86_avx2, kernels/x86_avx512): call only when gptc_kernels_level()
 * returns a table for that level. The *_tanh functions expose the vectorised tanh for tests. */
void gptc_avx2_gelu_fwd(gptc_gelu_kind f, float *out, const float *inp, size_t n);
void gptc_avx2_gelu_bwd(gptc_gelu_kind f, float *dinp, const float *inp, const float *dout, size_t n);
void gptc_avx2_tanh(float *out, const float *inp, size_t n);
void gptc_avx512_gelu_fwd(gptc_gelu_kind f, float *out, const float *inp, size_t n);
void gptc_avx512_gelu_bwd(gptc_gelu_kind f, float *dinp, const float *inp, const float *dout, size_t n);
void gptc_avx512_tanh(float *out, const float *inp, size_t n);

#endif
