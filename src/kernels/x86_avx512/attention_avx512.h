/* attention_avx512.h — private to src/kernels/x86_avx512: the query tile and the vector helpers of
 * the flash attention (attention_avx512.c: fp32 and bf16). Only for files compiled with the AVX-512
 * flags (the Makefile's x86_avx512 rule). */
#ifndef GPTC_KERNELS_ATTENTION_AVX512_H
#define GPTC_KERNELS_ATTENTION_AVX512_H

#include "kernels/attention.h"

#include <immintrin.h>
#include <math.h>
#include <stdint.h>

enum { BR = 64 }; /* query rows per forward task and per backward block */

/* exp(x), Cephes expf's range reduction and polynomial (about 1 ulp); 2^n applied by scalef so
 * that large negative inputs underflow cleanly to 0. */
static inline __m512 exp16(__m512 x) {
    x = _mm512_max_ps(_mm512_min_ps(x, _mm512_set1_ps(88.7f)), _mm512_set1_ps(-103.0f));
    __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
    __m512 p = _mm512_set1_ps(1.9875691500e-4f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
    p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
    return _mm512_scalef_ps(p, n);
}

/* The 16 lanes of chunk c0 of a length-HS row: all, or the tail. */
static inline __mmask16 chunk_mask(int c0, int HS) {
    int n = HS - c0;
    return n >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << n) - 1u);
}

static inline float dot16(const float *a, const float *b, int HS) {
    __m512 s = _mm512_setzero_ps();
    for (int c0 = 0; c0 < HS; c0 += 16) {
        __mmask16 m = chunk_mask(c0, HS);
        s = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, a + c0), _mm512_maskz_loadu_ps(m, b + c0), s);
    }
    return _mm512_reduce_add_ps(s);
}

#endif
