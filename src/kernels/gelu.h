/* gelu.h — the three GELU forms (tanh, erf, sigmoid), forward and backward, with a dispatcher that
 * picks the best implementation available (the tanh form goes through the kernel table). */
#ifndef GPTC_GELU_H
#define GPTC_GELU_H

#include <stddef.h>

#include "gptc.h" /* gptc_gelu_kind: the forms, as the model config names them */
#include "kernels/kernels.h"

/* out (n) = gelu_f(inp) with table k: the tanh form is k->gelu_fwd (a plugin's, when one replaced it),
 * the other forms run at k's level (k->variant). The model calls these with its table m->k. */
void gptc_gelu_fwd_k(const gptc_kernels *k, gptc_gelu_kind f, float *out, const float *inp, size_t n);
void gptc_gelu_bwd_k(const gptc_kernels *k, gptc_gelu_kind f, float *dinp, const float *inp, const float *dout,
                     size_t n);
/* out (n) = gelu_f(inp), at the kernel level in use (gptc_kernels_get(): GPTC_KERNELS caps it) */
void gptc_gelu_fwd_form(gptc_gelu_kind f, float *out, const float *inp, size_t n);
/* dinp (n) += gelu_f'(inp) * dout */
void gptc_gelu_bwd_form(gptc_gelu_kind f, float *dinp, const float *inp, const float *dout, size_t n);

/* The plain C reference of each form (kernels/ref/gelu_forms.c; the tanh form is the reference
 * table's gelu_fwd/bwd). */
void gptc_gelu_ref_fwd(gptc_gelu_kind f, float *out, const float *inp, size_t n);
void gptc_gelu_ref_bwd(gptc_gelu_kind f, float *dinp, const float *inp, const float *dout, size_t n);

/* Per-ISA versions (kernels/x86_avx2, kernels/x86_avx512): call only when gptc_kernels_level()
 * returns a table for that level. The *_tanh functions expose the vectorised tanh for tests. */
void gptc_avx2_gelu_fwd(gptc_gelu_kind f, float *out, const float *inp, size_t n);
void gptc_avx2_gelu_bwd(gptc_gelu_kind f, float *dinp, const float *inp, const float *dout, size_t n);
void gptc_avx2_tanh(float *out, const float *inp, size_t n);
void gptc_avx512_gelu_fwd(gptc_gelu_kind f, float *out, const float *inp, size_t n);
void gptc_avx512_gelu_bwd(gptc_gelu_kind f, float *dinp, const float *inp, const float *dout, size_t n);
void gptc_avx512_tanh(float *out, const float *inp, size_t n);

#endif
