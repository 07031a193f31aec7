/* test_attention.h — shared by the flash attention tests (test_attention.c, test_attention_bf16.c):
 * a variant as a forward/backward pair and one forward+backward run of it. */
#ifndef GPTC_TEST_ATTENTION_H
#define GPTC_TEST_ATTENTION_H

#include "kernels/attention.h"

typedef struct {
    const char *name;
    gptc_flash_fwd_fn fwd;
    gptc_flash_bwd_fn bwd;
} variant;

/* o (B,NH,T,HS), lse (B,NH,T) from the forward; dq, dk, dv (B,NH,T,HS) = g0's thirds + the backward */
typedef struct {
    float *o, *lse, *dq, *dk, *dv;
} fb_out;

/* Runs vr forward then backward (do_ = dO, same dropout p and seed); g0 is (3, B*NH*T*HS). */
fb_out run_fb(const variant *vr, const float *q, const float *k, const float *v, const float *dO, const float *g0,
              int B, int NH, int T, int HS, float p, uint64_t seed);
void fb_free(fb_out *r);
/* Each of the nv variants, forward and backward with and without dropout, gives the same bits on 1 and
 * 2 threads (B=2, NH=3, T=130, the given HS; inputs drawn from seed). */
void check_flash_threads_bitwise(const variant *vs, int nv, int HS, uint64_t seed);

#endif
