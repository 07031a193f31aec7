/* attention_avx2.c — AVX2+FMA fused causal flash attention, fp32: the shared text
 * kernels/flash_simd.inc at 8 lanes, register tiles of 4 keys x 16 rows for the scores and 4 rows x 16
 * columns for the row-major products (AVX2 has 16 registers). No bf16 entries at this level (they stay
 * the reference's). */
#include "kernels/x86_avx2/avx2.h"
#include "kernels/x86_avx2/vec_avx2.h"
#include "kernels/attention.h"
#include "core/core.h"
#include "core/profile.h"
#include "core/team.h"

#include <immintrin.h>
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

/* the avx2 level's flash entries (the bf16 ones stay the reference's: no AVX2 bf16 kernel) */
void gptc_avx2_overlay_attention(gptc_kernels *k) {
    k->flash_fwd = gptc_flash_fwd_avx2;
    k->flash_bwd = gptc_flash_bwd_avx2;
    k->flash_scratch = gptc_flash_scratch_avx2;
}

/* the 8 x 8 transpose of r[0..7] in place: r[c] becomes column c */
static inline void vtranspose(vf r[W]) {
    __m256 t[8], u[8];
    for (int j = 0; j < 4; j++) {
        t[2 * j] = _mm256_unpacklo_ps(r[2 * j], r[2 * j + 1]);
        t[2 * j + 1] = _mm256_unpackhi_ps(r[2 * j], r[2 * j + 1]);
    }
    for (int j = 0; j < 2; j++) {
        u[4 * j + 0] = _mm256_shuffle_ps(t[4 * j], t[4 * j + 2], 0x44);
        u[4 * j + 1] = _mm256_shuffle_ps(t[4 * j], t[4 * j + 2], 0xEE);
        u[4 * j + 2] = _mm256_shuffle_ps(t[4 * j + 1], t[4 * j + 3], 0x44);
        u[4 * j + 3] = _mm256_shuffle_ps(t[4 * j + 1], t[4 * j + 3], 0xEE);
    }
    for (int q = 0; q < 4; q++) {
        r[q] = _mm256_permute2f128_ps(u[q], u[4 + q], 0x20);
        r[4 + q] = _mm256_permute2f128_ps(u[q], u[4 + q], 0x31);
    }
}

#define FLASH_NAME(x) gptc_flash_##x##_avx2
#define FLASH_SK 4
#define FLASH_SRV 2
#define FLASH_PR 4
#define FLASH_PCV 2
#include "kernels/flash_simd.inc"
