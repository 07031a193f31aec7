/* peak_avx512.c — the FMA probe: 12 independent 16-lane FMA chains per thread in registers (enough
 * to cover the FMA latency on two pipes), timed, to measure the machine's fp32 peak; and the same
 * with vdpbf16ps (AVX512_BF16) for the bf16 peak. */
#include "kernels/x86_avx512/avx512.h"

#include <immintrin.h>


/* Runs iters x 12 FMAs of 16 lanes; returns a value that depends on every chain (so nothing is
 * optimised away). FLOPs = iters * 12 * 16 * 2. */
float gptc_avx512_fma_probe(long iters) {
    __m512 a = _mm512_set1_ps(1.0000001f), b = _mm512_set1_ps(0.9999999f);
    __m512 c0 = _mm512_set1_ps(0.1f), c1 = _mm512_set1_ps(0.2f), c2 = _mm512_set1_ps(0.3f), c3 = _mm512_set1_ps(0.4f), c4 = _mm512_set1_ps(0.5f), c5 = _mm512_set1_ps(0.6f);
    __m512 c6 = _mm512_set1_ps(0.7f), c7 = _mm512_set1_ps(0.8f), c8 = _mm512_set1_ps(0.9f), c9 = _mm512_set1_ps(1.0f), c10 = _mm512_set1_ps(1.1f), c11 = _mm512_set1_ps(1.2f);
    for (long i = 0; i < iters; i++) {
        c0 = _mm512_fmadd_ps(c0, a, b); c1 = _mm512_fmadd_ps(c1, a, b); c2 = _mm512_fmadd_ps(c2, a, b); c3 = _mm512_fmadd_ps(c3, a, b);
        c4 = _mm512_fmadd_ps(c4, a, b); c5 = _mm512_fmadd_ps(c5, a, b); c6 = _mm512_fmadd_ps(c6, a, b); c7 = _mm512_fmadd_ps(c7, a, b);
        c8 = _mm512_fmadd_ps(c8, a, b); c9 = _mm512_fmadd_ps(c9, a, b); c10 = _mm512_fmadd_ps(c10, a, b); c11 = _mm512_fmadd_ps(c11, a, b);
    }
    __m512 s = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(c0, c1), _mm512_add_ps(c2, c3)), _mm512_add_ps(_mm512_add_ps(c4, c5), _mm512_add_ps(c6, c7)));
    s = _mm512_add_ps(s, _mm512_add_ps(_mm512_add_ps(c8, c9), _mm512_add_ps(c10, c11)));
    return _mm512_reduce_add_ps(s);
}

/* Runs iters x 12 vdpbf16ps (12 independent chains, enough for its latency on this ISA's pipes); each
 * does 16 lanes x 2 bf16 multiply-adds, FLOPs = iters * 12 * 32 * 2. The operands are small (2^-10)
 * so the sums stay finite; returns a value that depends on every chain. */
float gptc_avx512_bf16_probe(long iters) {
    const __m512bh a = _mm512_cvtne2ps_pbh(_mm512_set1_ps(0x1p-10f), _mm512_set1_ps(0x1p-10f));
    __m512 c[12];
    for (int i = 0; i < 12; i++) c[i] = _mm512_set1_ps(0.1f * (float)(i + 1));
    for (long it = 0; it < iters; it++) {
#pragma GCC unroll 12
        for (int i = 0; i < 12; i++) c[i] = _mm512_dpbf16_ps(c[i], a, a);
    }
    __m512 s = _mm512_setzero_ps();
    for (int i = 0; i < 12; i++) s = _mm512_add_ps(s, c[i]);
    return _mm512_reduce_add_ps(s);
}
