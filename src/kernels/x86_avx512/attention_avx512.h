/* attention_avx512.h — private to src/kernels/x86_avx512: the tiling and the vector helpers that the
 * fp32 flash attention (attention_avx512.c) and its bf16 twin (attention_bf16_avx512.c) share.
 * Only for files compiled with the AVX-512 flags (the Makefile's x86_avx512 rule). */
#ifndef GPTC_KERNELS_ATTENTION_AVX512_H
#define GPTC_KERNELS_ATTENTION_AVX512_H

#include "kernels/attention.h"

#include <immintrin.h>
#include <math.h>
#include <stdint.h>

enum { BR = 64, BC = 16 }; /* query rows per forward task, keys per tile (one zmm) */
_Static_assert((int)BC == (int)GPTC_FLASH_KEY_TILE, "the key tile is part of the bf16 contract (attention.h)");

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

/* One key tile of a query row's online softmax: s (16) scaled scores, the first nv valid; updates
 * the row's running max *m and denominator *l (unnormalised probabilities, before dropout), sets
 * *corr to the factor the row's accumulator must be rescaled by, and returns the tile's
 * probabilities exp(s - max) (zero past nv). */
static inline __m512 online_softmax16(__m512 s, int nv, float *m, float *l, float *corr) {
    __mmask16 valid = (__mmask16)((1u << nv) - 1u);
    float mb = _mm512_mask_reduce_max_ps(valid, s);
    float mnew = *m > mb ? *m : mb;
    *corr = expf(*m - mnew);
    __m512 p = _mm512_maskz_mov_ps(valid, exp16(_mm512_sub_ps(s, _mm512_set1_ps(mnew))));
    *l = *l * *corr + _mm512_reduce_add_ps(p);
    *m = mnew;
    return p;
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

/* keep mask of keys j0..j0+15 of query row `row` (bit jj: key j0+jj kept); j0 a multiple of 4 */
static inline __mmask16 keep16(uint64_t seed, uint64_t row, int j0, uint32_t thr) {
    unsigned bits = 0;
    for (int g = 0; g < 4; g++) bits |= gptc_flash_keep4(seed, row, (uint32_t)(j0 / 4 + g), thr) << (4 * g);
    return (__mmask16)bits;
}

#endif
