/* matvec_pack.c — the panel form of a (K,N) weight matrix that matvec streams with GPTC_MV_PANELS
 * (kernels.h): written once per decoder, in plain C (a pass at memory speed over the weights). */
#include "kernels/kernels.h"

#include "core/core.h"

#include <stdint.h>

size_t gptc_matvec_panel_elems(int K, int N) {
    size_t panels = ((size_t)N + GPTC_MV_PANEL - 1) / GPTC_MV_PANEL;
    return panels * GPTC_MV_PANEL * (size_t)K;
}

/* one value of the panel form: floats, or rounded to bf16 */
static inline void put(void *dst, int bf16, size_t at, float v) {
    if (bf16)
        ((uint16_t *)dst)[at] = gptc_f32_to_bf16(v);
    else
        ((float *)dst)[at] = v;
}

void gptc_matvec_pack(void *dst, int bf16, const float *W, int ldw, int transW, int K, int N) {
    const int P = GPTC_MV_PANEL, panels = (N + P - 1) / P;
#pragma omp parallel for schedule(static) if ((size_t)N * K >= ((size_t)1 << 16))
    for (int p = 0; p < panels; p++) {
        const int n0 = p * P, cn = N - n0 < P ? N - n0 : P;
        if (transW) { /* row n of W is column n of the panel: a pass over each row, written at stride P */
            for (int j = 0; j < P; j++)
                for (int k = 0; k < K; k++)
                    put(dst, bf16, gptc_matvec_panel_at(K, k, n0 + j, bf16), j < cn ? W[(size_t)(n0 + j) * ldw + k] : 0.0f);
            continue;
        }
        for (int k = 0; k < K; k++) /* row k of W, columns n0.. */
            for (int j = 0; j < P; j++)
                put(dst, bf16, gptc_matvec_panel_at(K, k, n0 + j, bf16), j < cn ? W[(size_t)k * ldw + n0 + j] : 0.0f);
    }
}
