/* ostate.h — compact optimizer state (--optim-state bf16|int8): the arithmetic the kernel table's
 * ostate_* entries share (kernels.h), written once here.
 *
 * bf16: a moment is stored as a bf16 value (the top half of its fp32 pattern). Reading widens it
 * exactly; writing rounds STOCHASTICALLY: the 16 bits below the kept half are compared against 16
 * random bits, i.e. the value rounds up with probability equal to its distance from the lower bf16
 * neighbour (unbiased in expectation). The bits are a counter-based hash, gptc_ostate_sr_bits(key,
 * index), of a per-(seed, step, state) key and the parameter's absolute index in the arena: no RNG
 * state, and the same bits for any thread count, any ZeRO-1 shard layout and a resumed run.
 *
 * int8: the block-wise 8-bit state of Dettmers et al. 2022 ("8-bit Optimizers via Block-wise
 * Quantization"): blocks of GPTC_OSTATE_BLOCK values (relative to each tensor's start, the last one
 * partial), each with an fp32 absmax; a value x is stored as the index of the code of a 256-entry
 * dynamic-tree map nearest to x / absmax. The maps (ref/qmap.c) are built from the paper's
 * definition: a sign bit (signed map only); then E zero bits, the decimal exponent (the magnitude is
 * scaled by 10^-E); an indicator bit 1; then the remaining F bits a linear fraction in (0.1, 1]:
 * code = 10^-E * (0.1 + 0.9 * (k + 1) / 2^F), k the F-bit integer. All-zero magnitude bits are 0.
 *   signed (first moment): 7 magnitude bits, E = 0..6, F = 6 - E: 127 magnitudes in [1e-6, 1], each with
 *     both signs, and 0; the one pattern the tree leaves unused (sign set, magnitude bits all zero,
 *     "-0") decodes to +1e-7, one more decade, so the 256 codes are distinct. Contains 0, -1 and +1.
 *   unsigned (second moment): no sign bit, so one more fraction bit at every exponent: 8 magnitude bits,
 *     E = 0..7, F = 7 - E: 255 magnitudes in [1e-7, 1], and 0.
 * A stored byte is the code's index in the map sorted by value (the maps are sorted), so comparing
 * bytes compares values. */
#ifndef GPTC_KERNELS_OSTATE_H
#define GPTC_KERNELS_OSTATE_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* values per int8 block (one absmax each), and the work unit of every compact-state update */
#define GPTC_OSTATE_BLOCK 2048

/* The nearest-code table's buckets: a float's top 16 bits (sign, exponent, 7 mantissa bits) with the
 * magnitude part clamped to [GPTC_QMAP_LO, GPTC_QMAP_HI]: from 2^-26 (every smaller magnitude shares the
 * first bucket: the smallest nonzero code is 1e-7, the midpoint to 0 is 5e-8) to 1.0 (a normalised value
 * never exceeds it), per sign. 2 x 3329 one-byte entries: 6.5 KB, resident in L1. */
#define GPTC_QMAP_LO 0x3280u /* top bits of 2^-26 */
#define GPTC_QMAP_HI 0x3f80u /* top bits of 1.0 */
#define GPTC_QMAP_HALF (GPTC_QMAP_HI - GPTC_QMAP_LO + 1)

/* One quantisation map: code[256] sorted ascending (code[256], past the end, is +Inf so that stepping
 * up from 255 never wins), and lut[b] for each bucket b (gptc_qmap_bucket): the index of the code
 * nearest to the bucket's smallest value (ties to the lower index). The nearest code of any x is
 * lut[bucket(x)] or above (nearest is monotone in x), and at most two codes above: a bucket spans 2^-7
 * of its value, more than the closest codes' relative spacing (0.9 / 128 at the top of the unsigned map)
 * but less than twice it; the build checks it for every bucket. */
typedef struct gptc_qmap {
    float code[257];
    uint8_t lut[2 * GPTC_QMAP_HALF];
} gptc_qmap;

/* The signed (first moment) or unsigned (second moment) map, built once (thread-safe). */
const gptc_qmap *gptc_qmap_get(int is_signed);

/* the bucket of a float with bit pattern u: positive magnitudes first, then negative ones */
static inline unsigned gptc_qmap_bucket(uint32_t u) {
    unsigned mag = (u >> 16) & 0x7fffu;
    mag = mag < GPTC_QMAP_LO ? GPTC_QMAP_LO : mag > GPTC_QMAP_HI ? GPTC_QMAP_HI : mag;
    return (mag - GPTC_QMAP_LO) + (u >> 31) * GPTC_QMAP_HALF;
}

/* one step up from code i when code i + 1 is strictly closer to x (branch-free) */
static inline unsigned gptc_qmap_step(const gptc_qmap *q, float x, unsigned i) {
    return i + (fabsf(q->code[i + 1] - x) < fabsf(x - q->code[i])); /* fabsf: a mask, no branch */
}

/* The index of the code nearest to x, |x| <= 1 (ties to the lower index, i.e. the smaller value; NaN
 * gives some index). Exact against a search over all 256 codes (tests/test_ostate.c): the table's guess,
 * then two branch-free steps (from 255 a step never moves: code[256] is +Inf). */
static inline uint8_t gptc_qmap_nearest(const gptc_qmap *q, float x) {
    uint32_t u;
    memcpy(&u, &x, 4);
    unsigned i = q->lut[gptc_qmap_bucket(u)];
    i = gptc_qmap_step(q, x, i);
    i = gptc_qmap_step(q, x, i);
    return (uint8_t)i;
}

/* splitmix64's finaliser: a bijective mix of 64 bits */
static inline uint64_t gptc_ostate_mix(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* The stochastic-rounding key of state buffer `state` at update `step` of a run seeded `seed`. */
static inline uint64_t gptc_ostate_sr_key(uint64_t seed, uint64_t step, int state) {
    return gptc_ostate_mix(gptc_ostate_mix(seed ^ 0x6f737461746531ULL) + gptc_ostate_mix(step * 0x9e3779b97f4a7c15ULL) +
                           (uint64_t)(state + 1) * 0xd1b54a32d192ed03ULL);
}

/* 16 random bits for arena element `index` under `key`: a 32-bit avalanche hash (lowbias32) of the
 * index mixed with the key; 32-bit arithmetic, so the loops over elements vectorise */
static inline uint32_t gptc_ostate_sr_bits(uint64_t key, uint64_t index) {
    uint32_t x = (uint32_t)index ^ (uint32_t)key;
    x += (uint32_t)(index >> 32) * 0x9e3779b9u + (uint32_t)(key >> 32);
    x ^= x >> 16;
    x *= 0x7feb352du;
    x ^= x >> 15;
    x *= 0x846ca68bu;
    x ^= x >> 16;
    return x >> 16;
}

/* x rounded to bf16 stochastically with the random bits r (16 bits): the kept half of x's pattern
 * plus one ulp when the dropped half plus r carries. Inf and NaN keep round-to-nearest's result. */
static inline uint16_t gptc_ostate_bf16_sr(float x, uint32_t r) {
    uint32_t u;
    memcpy(&u, &x, 4);
    if ((u & 0x7f800000u) == 0x7f800000u) { /* Inf, NaN: no rounding (NaN stays quiet NaN) */
        if (u & 0x007fffffu) return (uint16_t)((u >> 16) | 0x0040u);
        return (uint16_t)(u >> 16);
    }
    return (uint16_t)((u + r) >> 16); /* may carry into the exponent: up to the next binade, or Inf */
}

/* the reference entries (ref/ostate_ref.c): the contracts are kernels.h's */
void gptc_ostate_bf16_load_ref(float *out, const uint16_t *in, size_t n);
void gptc_ostate_bf16_store_ref(uint16_t *out, const float *in, size_t n, uint64_t key, uint64_t index);
void gptc_ostate_q8_load_ref(float *out, const uint8_t *in, size_t n, float absmax, int is_signed);
void gptc_ostate_q8_store_ref(uint8_t *out, float *absmax, const float *in, size_t n, int is_signed);

#endif
