/* attention_avx512.c — AVX-512 fused causal flash attention, fp32 and bf16 mixed precision: the
 * shared text kernels/flash_simd.inc at 16 lanes (register tiles of 8 keys x 32 rows for the scores,
 * 4 rows x 64 columns for the row-major products) with the bf16 contract's entries, whose roundings
 * run on fp32 FMAs (no AVX512_BF16 needed; it issues at half rate on Intel cores anyway), and
 * flash_bf16dp.inc's bf16 entries on vdpbf16ps, the table's where gemm_bf16 runs it too. */
#include "kernels/x86_avx512/avx512.h"
#include "kernels/x86_avx512/transpose16.h"
#include "kernels/x86_avx512/vec_avx512.h"
#include "kernels/attention.h"
#include "core/core.h"
#include "core/profile.h"
#include "core/team.h"

#include <immintrin.h>
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

/* the avx512 level's flash entries, fp32 and bf16 */
void gptc_avx512_overlay_attention(gptc_kernels *k) {
    k->flash_fwd = gptc_flash_fwd_avx512;
    k->flash_bwd = gptc_flash_bwd_avx512;
    k->flash_scratch = gptc_flash_scratch_avx512;
    const bool dp = gptc_avx512_bf16_native(); /* AVX512_BF16, and not an Intel core's half rate */
    k->flash_fwd_bf16 = dp ? gptc_flash_fwd_bf16_dp : gptc_flash_fwd_bf16_avx512;
    k->flash_bwd_bf16 = dp ? gptc_flash_bwd_bf16_dp : gptc_flash_bwd_bf16_avx512;
    k->flash_scratch_bf16 = dp ? gptc_flash_scratch_bf16_dp : gptc_flash_scratch_bf16_avx512;
}

/* x rounded to the nearest bf16 (ties to even) and back: gptc_bf16_round lane-wise (NaN kept, quiet) */
static inline vf vround_bf16(vf x) {
    const __m512i u = _mm512_castps_si512(x), lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
    __m512i r = _mm512_and_si512(_mm512_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0x7fff)), lsb),
                                 _mm512_set1_epi32((int)0xffff0000u));
    r = _mm512_mask_mov_epi32(r, _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q),
                              _mm512_and_si512(_mm512_or_si512(u, _mm512_set1_epi32(0x00400000)),
                                               _mm512_set1_epi32((int)0xffff0000u)));
    return _mm512_castsi512_ps(r);
}
static inline void vtranspose(vf t[W]) { transpose16(t); }

#define FLASH_NAME(x) gptc_flash_##x##_avx512
#define FLASH_SK 8
#define FLASH_SRV 2
#define FLASH_PR 4
#define FLASH_PCV 4
#define FLASH_BF16 1
#include "kernels/flash_simd.inc"
#include "kernels/x86_avx512/flash_bf16dp.inc"
