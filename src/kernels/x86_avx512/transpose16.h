/* transpose16.h — private to the AVX-512 kernels (x86_avx512, x86_amx; include only from files built
 * with AVX-512 flags): the in-register 16 x 16 transpose of 32-bit words their packers use. */
#ifndef GPTC_KERNELS_TRANSPOSE16_H
#define GPTC_KERNELS_TRANSPOSE16_H

#include <immintrin.h>

/* In-register 16 x 16 transpose of 32-bit words (fp32 values or bf16 pairs): on return r[c] holds
 * column c of the input rows r[0..15]. Three
 * stages: 32-bit interleave of row pairs, 64-bit interleave (each 128-bit lane l of b[4j+q] then
 * holds rows 4j..4j+3 of column 4l+q), then two 128-bit lane shuffles gather the four lanes. */
static inline void transpose16(__m512 r[16]) {
    __m512 a[16], b[16];
    for (int j = 0; j < 8; j++) {
        a[2 * j] = _mm512_unpacklo_ps(r[2 * j], r[2 * j + 1]);
        a[2 * j + 1] = _mm512_unpackhi_ps(r[2 * j], r[2 * j + 1]);
    }
    for (int j = 0; j < 4; j++) {
        __m512d x0 = _mm512_castps_pd(a[4 * j]), x1 = _mm512_castps_pd(a[4 * j + 1]);
        __m512d x2 = _mm512_castps_pd(a[4 * j + 2]), x3 = _mm512_castps_pd(a[4 * j + 3]);
        b[4 * j + 0] = _mm512_castpd_ps(_mm512_unpacklo_pd(x0, x2));
        b[4 * j + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(x0, x2));
        b[4 * j + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(x1, x3));
        b[4 * j + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(x1, x3));
    }
    for (int q = 0; q < 4; q++) {
        __m512 c0 = _mm512_shuffle_f32x4(b[q], b[4 + q], 0x44), c1 = _mm512_shuffle_f32x4(b[q], b[4 + q], 0xEE);
        __m512 d0 = _mm512_shuffle_f32x4(b[8 + q], b[12 + q], 0x44);
        __m512 d1 = _mm512_shuffle_f32x4(b[8 + q], b[12 + q], 0xEE);
        r[0 + q] = _mm512_shuffle_f32x4(c0, d0, 0x88);
        r[4 + q] = _mm512_shuffle_f32x4(c0, d0, 0xDD);
        r[8 + q] = _mm512_shuffle_f32x4(c1, d1, 0x88);
        r[12 + q] = _mm512_shuffle_f32x4(c1, d1, 0xDD);
    }
}

#endif
