/* dropout.h — counter-based dropout for the embeddings and the residual branches. Whether element
 * i of a buffer is kept is a pure function of (seed, stream, i): Philox4x32-10 (the generator of the
 * attention's mask, attention.h) with key = seed and counter = (i/4, i/4 >> 32, stream, stream >> 32),
 * word i%4's top 24 bits >= p * 2^24. So nothing is stored: the backward, a recomputed forward and
 * a resumed run draw the same mask, for any thread count. Kept elements are scaled by 1/(1-p). */
#ifndef GPTC_KERNELS_DROPOUT_H
#define GPTC_KERNELS_DROPOUT_H

#include <stddef.h>
#include <stdint.h>

/* out (n) = mask(seed, stream) * in / (1 - p); out may be in (in place). p in [0, 1); p == 0 copies.
 * The forward applies it to the activation, the backward to the incoming gradient (the map is
 * linear and its own transpose). */
void gptc_dropout_apply(float *out, const float *in, size_t n, float p, uint64_t seed, uint64_t stream);
/* whether element i is kept (for tests) */
int gptc_dropout_keep(uint64_t seed, uint64_t stream, size_t i, float p);

#endif
