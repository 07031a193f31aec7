/* philox.h — the counter-based generator behind every dropout mask (the attention's, attention.h, and
 * the embeddings' and residual branches', dropout.h), written once for the C kernels and the CUDA
 * kernels (src/backend/cuda/): under nvcc GPTC_HD makes each function __host__ __device__, so the GPU
 * runs the same integer arithmetic and draws the same masks, bit for bit. No float is involved but the
 * threshold, computed as the C code computes it.
 *
 * Philox4x32-10 (Salmon et al., SC'11), key = the seed's two halves. The attention's counter is
 * (row, row >> 32, j / 4, 0) where row = (b*NH + h)*T + i is the query row's offset; word j % 4 of the
 * output decides key j: kept iff its top 24 bits >= dropout * 2^24. The buffer dropout's counter is
 * (i/4, i/4 >> 32, stream, stream >> 32), word i % 4 deciding element i (gptc_dropout_word4). */
#ifndef GPTC_KERNELS_PHILOX_H
#define GPTC_KERNELS_PHILOX_H

#include <stdint.h>

#if defined(__CUDACC__)
#define GPTC_HD __host__ __device__
#else
#define GPTC_HD
#endif

GPTC_HD static inline void gptc_philox4x32(uint32_t out[4], uint32_t c0, uint32_t c1, uint32_t c2, uint32_t c3,
                                           uint64_t seed) {
    uint32_t k0 = (uint32_t)seed, k1 = (uint32_t)(seed >> 32);
    for (int r = 0; r < 10; r++) {
        uint64_t p0 = (uint64_t)0xD2511F53u * c0, p1 = (uint64_t)0xCD9E8D57u * c2;
        uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1 ^ k0, n2 = (uint32_t)(p0 >> 32) ^ c3 ^ k1;
        c1 = (uint32_t)p1;
        c3 = (uint32_t)p0;
        c0 = n0;
        c2 = n2;
        k0 += 0x9E3779B9u;
        k1 += 0xBB67AE85u;
    }
    out[0] = c0, out[1] = c1, out[2] = c2, out[3] = c3;
}
/* The threshold on the 24-bit draw for a dropout probability (0 keeps everything). */
GPTC_HD static inline uint32_t gptc_flash_threshold(float dropout) { return (uint32_t)((double)dropout * 16777216.0); }
/* Keep flags of keys 4*g .. 4*g+3 of query row `row` (bit n set: key 4*g+n kept). */
GPTC_HD static inline unsigned gptc_flash_keep4(uint64_t seed, uint64_t row, uint32_t g, uint32_t threshold) {
    uint32_t w[4];
    gptc_philox4x32(w, (uint32_t)row, (uint32_t)(row >> 32), g, 0, seed);
    unsigned bits = 0;
    for (int n = 0; n < 4; n++) bits |= (unsigned)((w[n] >> 8) >= threshold) << n;
    return bits;
}
GPTC_HD static inline int gptc_flash_keep(uint64_t seed, uint64_t row, uint32_t j, uint32_t threshold) {
    return (int)((gptc_flash_keep4(seed, row, j >> 2, threshold) >> (j & 3)) & 1u);
}
/* The buffer dropout's four words for elements 4g .. 4g+3 of stream `stream` (dropout.h). */
GPTC_HD static inline void gptc_dropout_word4(uint32_t w[4], uint64_t seed, uint64_t stream, uint64_t g) {
    gptc_philox4x32(w, (uint32_t)g, (uint32_t)(g >> 32), (uint32_t)stream, (uint32_t)(stream >> 32), seed);
}

#endif
