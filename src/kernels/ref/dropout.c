/* dropout.c — the counter-based dropout mask applied to a buffer (see dropout.h). One Philox call
 * decides four elements; threads take whole groups of four, so every element's value depends only
 * on its index. */
#include "kernels/dropout.h"
#include "kernels/attention.h"

#include <string.h>

int gptc_dropout_keep(uint64_t seed, uint64_t stream, size_t i, float p) {
    uint32_t w[4];
    gptc_dropout_word4(w, seed, stream, i / 4);
    return (w[i % 4] >> 8) >= gptc_flash_threshold(p);
}

void gptc_dropout_apply(float *out, const float *in, size_t n, float p, uint64_t seed, uint64_t stream) {
    if (p <= 0) {
        if (out != in) memcpy(out, in, n * sizeof(float));
        return;
    }
    uint32_t threshold = gptc_flash_threshold(p);
    float scale = 1.0f / (1.0f - p);
    long groups = (long)((n + 3) / 4);
#pragma omp parallel for schedule(static)
    for (long g = 0; g < groups; g++) {
        uint32_t w[4];
        gptc_dropout_word4(w, seed, stream, (uint64_t)g);
        for (size_t j = 0; j < 4; j++) {
            size_t i = (size_t)g * 4 + j;
            if (i < n) out[i] = (w[j] >> 8) >= threshold ? in[i] * scale : 0.0f;
        }
    }
}
