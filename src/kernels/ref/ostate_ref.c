/* ostate_ref.c — the reference compact-optimizer-state entries (kernels.h ostate_*): widen bf16 moments
 * to fp32, store fp32 moments as bf16 with stochastic rounding, and dequantise / quantise one block of
 * 8-bit moments against the dynamic maps (kernels/ostate.h). Plain C, one thread per call: the caller
 * (optim/ostate.c) gives each thread whole blocks. */
#include "kernels/ostate.h"

#include <math.h>

/* out (n) = in (n) widened: exact */
void gptc_ostate_bf16_load_ref(float *out, const uint16_t *in, size_t n) {
    for (size_t i = 0; i < n; i++) {
        uint32_t u = (uint32_t)in[i] << 16;
        memcpy(&out[i], &u, 4);
    }
}

/* out (n) = in (n) rounded stochastically, element i with the bits of arena index index + i */
void gptc_ostate_bf16_store_ref(uint16_t *out, const float *in, size_t n, uint64_t key, uint64_t index) {
    for (size_t i = 0; i < n; i++) out[i] = gptc_ostate_bf16_sr(in[i], gptc_ostate_sr_bits(key, index + i));
}

/* out (n) = code[in[i]] * absmax, n <= GPTC_OSTATE_BLOCK (one block) */
void gptc_ostate_q8_load_ref(float *out, const uint8_t *in, size_t n, float absmax, int is_signed) {
    const float *code = gptc_qmap_get(is_signed)->code;
    for (size_t i = 0; i < n; i++) out[i] = code[in[i]] * absmax;
}

/* *absmax = max |in[i]| over the block (n values); out[i] = the nearest code of in[i] / absmax (all the
 * code of 0 when absmax is 0) */
void gptc_ostate_q8_store_ref(uint8_t *out, float *absmax, const float *in, size_t n, int is_signed) {
    const gptc_qmap *q = gptc_qmap_get(is_signed);
    /* max |in| on the bit patterns: for magnitudes the integer order is the float order, and a NaN's
     * pattern is above Inf's, so a NaN wins and makes the block's scale NaN, visibly (integer max
     * vectorises where a float max with NaN semantics does not) */
    uint32_t top = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &in[i], 4);
        u &= 0x7fffffffu;
        top = u > top ? u : top;
    }
    float amax;
    memcpy(&amax, &top, 4);
    *absmax = amax;
    int nan = top > 0x7f800000u;
    float inv = amax > 0 && !nan ? 1.0f / amax : 0.0f;
    for (size_t i = 0; i < n; i++) {
        /* x / absmax, but never past +-1 (the reciprocal's rounding could) */
        float x = in[i] * inv;
        x = x > 1.0f ? 1.0f : x < -1.0f ? -1.0f : x;
        out[i] = gptc_qmap_nearest(q, x);
    }
}
