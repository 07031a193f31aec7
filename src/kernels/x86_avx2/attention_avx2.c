/* attention_avx2.c — AVX2+FMA fused causal flash attention: 8 keys per ymm. The same scheme as
 * x86_avx512/attention_avx512.c (key and value tiles packed transposed (HS,8), O and dq rows
 * updated over HS in 8-float chunks with a masked tail); contract in kernels/attention.h. */
#include "kernels/x86_avx2/avx2.h"
#include "kernels/attention.h"
#include "core/core.h"

#include <immintrin.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* the avx2 level's flash entries (the bf16 ones stay the reference's: no AVX2 bf16 kernel) */
void gptc_avx2_overlay_attention(gptc_kernels *k) {
    k->flash_fwd = gptc_flash_fwd_avx2;
    k->flash_bwd = gptc_flash_bwd_avx2;
    k->flash_scratch = gptc_flash_scratch_avx2;
}

enum { BR = 64, BC = 8 }; /* query rows per forward task, keys per tile (one ymm) */

/* per-thread scratch, grown on the first call and reused: nothing is allocated in a training step */
static _Thread_local gptc_workspace tl_rows, tl_tiles;

size_t gptc_flash_scratch_avx2(int T, int HS) {
    /* tl_rows: the backward's D (T); tl_tiles: the forward's key tile and accumulator, or the backward's
     * four (HS,BC) tiles, whichever is larger */
    size_t fwd = (size_t)HS * BC + (size_t)BR * HS, bwd = 4 * (size_t)HS * BC;
    return gptc_alloc_block_bytes(sizeof(float) * (size_t)T) +
           gptc_alloc_block_bytes(sizeof(float) * (fwd > bwd ? fwd : bwd));
}

/* lanes < n set (n in 0..8) */
static inline __m256i lanes_below(int n) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}
/* lane n set iff bit n of bits */
static inline __m256 lanes_of_bits(unsigned bits) {
    __m256i b = _mm256_and_si256(_mm256_set1_epi32((int)bits), _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128));
    return _mm256_castsi256_ps(_mm256_cmpgt_epi32(b, _mm256_setzero_si256()));
}

/* exp(x), Cephes expf (about 1 ulp); inputs below -87.3 give about 1e-38 (callers mask lanes). */
static inline __m256 exp8(__m256 x) {
    x = _mm256_max_ps(_mm256_min_ps(x, _mm256_set1_ps(88.3f)), _mm256_set1_ps(-87.3f));
    __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                               _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
    __m256 p = _mm256_set1_ps(1.9875691500e-4f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
    p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
    __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
}

static inline float hsum8(__m256 x) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(x), _mm256_extractf128_ps(x, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}
static inline float hmax8(__m256 x) {
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(x), _mm256_extractf128_ps(x, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    s = _mm_max_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

static float dot8(const float *a, const float *b, int HS) {
    __m256 s = _mm256_setzero_ps();
    for (int c0 = 0; c0 < HS; c0 += 8) {
        __m256i m = lanes_below(HS - c0);
        s = _mm256_fmadd_ps(_mm256_maskload_ps(a + c0, m), _mm256_maskload_ps(b + c0, m), s);
    }
    return hsum8(s);
}

/* scores of row x against the packed tile xt (HS,8): sum_d x[d] * xt[d] */
static inline __m256 row_times_tile(const float *x, const float *xt, int HS) {
    __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps(), a2 = _mm256_setzero_ps(), a3 = _mm256_setzero_ps();
    int d = 0;
    for (; d + 4 <= HS; d += 4) {
        a0 = _mm256_fmadd_ps(_mm256_broadcast_ss(x + d), _mm256_load_ps(xt + (size_t)d * BC), a0);
        a1 = _mm256_fmadd_ps(_mm256_broadcast_ss(x + d + 1), _mm256_load_ps(xt + (size_t)(d + 1) * BC), a1);
        a2 = _mm256_fmadd_ps(_mm256_broadcast_ss(x + d + 2), _mm256_load_ps(xt + (size_t)(d + 2) * BC), a2);
        a3 = _mm256_fmadd_ps(_mm256_broadcast_ss(x + d + 3), _mm256_load_ps(xt + (size_t)(d + 3) * BC), a3);
    }
    for (; d < HS; d++) a0 = _mm256_fmadd_ps(_mm256_broadcast_ss(x + d), _mm256_load_ps(xt + (size_t)d * BC), a0);
    return _mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3));
}

/* xt (HS,8) = rows j0..j0+nk-1 of x (T,HS), transposed; lanes nk..7 zero */
static void pack_tile(float *xt, const float *x, int j0, int nk, int HS) {
    for (int d = 0; d < HS; d++) {
        float *dst = xt + (size_t)d * BC;
        for (int jj = 0; jj < BC; jj++) dst[jj] = jj < nk ? x[(size_t)(j0 + jj) * HS + d] : 0.0f;
    }
}

static inline __m256 keep8(uint64_t seed, uint64_t row, int j0, uint32_t thr) {
    unsigned bits = gptc_flash_keep4(seed, row, (uint32_t)(j0 / 4), thr) |
                    gptc_flash_keep4(seed, row, (uint32_t)(j0 / 4 + 1), thr) << 4;
    return lanes_of_bits(bits);
}

/* y (HS) = y * c + sum_{jj < n} w[jj] * x[jj*HS ..] */
static inline void rows_axpy(float *y, float c, const float *w, const float *x, int n, int HS) {
    __m256 vc = _mm256_set1_ps(c);
    for (int c0 = 0; c0 < HS; c0 += 8) {
        __m256i m = lanes_below(HS - c0);
        __m256 a = _mm256_mul_ps(_mm256_maskload_ps(y + c0, m), vc);
        for (int jj = 0; jj < n; jj++)
            a = _mm256_fmadd_ps(_mm256_broadcast_ss(w + jj), _mm256_maskload_ps(x + (size_t)jj * HS + c0, m), a);
        _mm256_maskstore_ps(y + c0, m, a);
    }
}

void gptc_flash_fwd_avx2(float *o, float *lse, const float *q, const float *k, const float *v, int B, int NH,
                         int T, int HS, float dropout, uint64_t seed) {
    GPTC_ASSERT(dropout >= 0.0f && dropout < 1.0f);
    const float scale = 1.0f / sqrtf((float)HS), inv_keep = 1.0f / (1.0f - dropout);
    const uint32_t thr = gptc_flash_threshold(dropout);
    const int ntiles = (T + BR - 1) / BR;
    const long ntasks = (long)B * NH * ntiles;
#pragma omp parallel
    {
        float *kt = gptc_workspace_get(&tl_tiles, (size_t)HS * BC + (size_t)BR * HS);
        float *acc = kt + (size_t)HS * BC; /* HS*BC is a multiple of the lanes: acc stays vector aligned */
        float m[BR], l[BR], pw[BC];
#pragma omp for schedule(dynamic, 1)
        for (long task = 0; task < ntasks; task++) {
            size_t bh = (size_t)(task / ntiles);
            int i0 = (int)(task % ntiles) * BR, i1 = i0 + BR < T ? i0 + BR : T;
            const float *qh = q + bh * T * HS, *kh = k + bh * T * HS, *vh = v + bh * T * HS;
            for (int r = 0; r < i1 - i0; r++) m[r] = -INFINITY, l[r] = 0;
            memset(acc, 0, (size_t)BR * HS * sizeof *acc);
            for (int j0 = 0; j0 < i1; j0 += BC) {
                int nk = i1 - j0 < BC ? i1 - j0 : BC;
                pack_tile(kt, kh, j0, nk, HS);
                for (int i = i0 > j0 ? i0 : j0; i < i1; i++) {
                    int nv = i + 1 - j0 < nk ? i + 1 - j0 : nk, r = i - i0;
                    __m256 valid = _mm256_castsi256_ps(lanes_below(nv));
                    __m256 s = _mm256_mul_ps(row_times_tile(qh + (size_t)i * HS, kt, HS), _mm256_set1_ps(scale));
                    float mb = hmax8(_mm256_blendv_ps(_mm256_set1_ps(-INFINITY), s, valid));
                    float mnew = m[r] > mb ? m[r] : mb, corr = expf(m[r] - mnew);
                    __m256 p = _mm256_and_ps(valid, exp8(_mm256_sub_ps(s, _mm256_set1_ps(mnew))));
                    l[r] = l[r] * corr + hsum8(p);
                    m[r] = mnew;
                    if (dropout > 0)
                        p = _mm256_mul_ps(p, _mm256_and_ps(keep8(seed, bh * T + i, j0, thr), _mm256_set1_ps(inv_keep)));
                    _mm256_storeu_ps(pw, p);
                    rows_axpy(acc + (size_t)r * HS, corr, pw, vh + (size_t)j0 * HS, nv, HS);
                }
            }
            for (int i = i0; i < i1; i++) {
                int r = i - i0;
                float *oi = o + (bh * T + i) * HS, *a = acc + (size_t)r * HS;
                __m256 inv = _mm256_set1_ps(1.0f / l[r]);
                for (int c0 = 0; c0 < HS; c0 += 8) {
                    __m256i cm = lanes_below(HS - c0);
                    _mm256_maskstore_ps(oi + c0, cm, _mm256_mul_ps(_mm256_maskload_ps(a + c0, cm), inv));
                }
                lse[bh * T + i] = m[r] + logf(l[r]);
            }
        }
    }
}

void gptc_flash_bwd_avx2(float *dq, float *dk, float *dv, const float *do_, const float *q, const float *k,
                         const float *v, const float *o, const float *lse, int B, int NH, int T, int HS,
                         float dropout, uint64_t seed) {
    GPTC_ASSERT(dropout >= 0.0f && dropout < 1.0f);
    const float scale = 1.0f / sqrtf((float)HS), inv_keep = 1.0f / (1.0f - dropout);
    const uint32_t thr = gptc_flash_threshold(dropout);
    const size_t tile = (size_t)HS * BC;
#pragma omp parallel
    {
        float *D = gptc_workspace_get(&tl_rows, (size_t)T);
        /* kt, vt: the packed key and value tiles; dkt, dvt: their gradients, same (HS,8) layout */
        float *buf = gptc_workspace_get(&tl_tiles, 4 * tile);
        float *kt = buf, *vt = buf + tile, *dkt = buf + 2 * tile, *dvt = buf + 3 * tile;
        float dsw[BC];
        GPTC_ASSERT(D && buf);
#pragma omp for schedule(dynamic, 1)
        for (long bhl = 0; bhl < (long)B * NH; bhl++) {
            size_t bh = (size_t)bhl, off = bh * T * HS;
            const float *qh = q + off, *kh = k + off, *vh = v + off, *doh = do_ + off, *L = lse + bh * T;
            float *dqh = dq + off, *dkh = dk + off, *dvh = dv + off;
            for (int i = 0; i < T; i++) D[i] = dot8(doh + (size_t)i * HS, o + off + (size_t)i * HS, HS);
            for (int j0 = 0; j0 < T; j0 += BC) {
                int nk = T - j0 < BC ? T - j0 : BC;
                pack_tile(kt, kh, j0, nk, HS);
                pack_tile(vt, vh, j0, nk, HS);
                memset(dkt, 0, 2 * tile * sizeof(float));
                for (int i = j0; i < T; i++) {
                    int nv = i + 1 - j0 < nk ? i + 1 - j0 : nk;
                    __m256 valid = _mm256_castsi256_ps(lanes_below(nv));
                    const float *qi = qh + (size_t)i * HS, *doi = doh + (size_t)i * HS;
                    __m256 s = row_times_tile(qi, kt, HS), dp = row_times_tile(doi, vt, HS);
                    __m256 p = _mm256_and_ps(
                        valid, exp8(_mm256_fmsub_ps(s, _mm256_set1_ps(scale), _mm256_set1_ps(L[i]))));
                    __m256 pz = p;
                    if (dropout > 0) {
                        __m256 z = _mm256_and_ps(keep8(seed, bh * T + i, j0, thr), _mm256_set1_ps(inv_keep));
                        pz = _mm256_mul_ps(p, z);
                        dp = _mm256_mul_ps(dp, z);
                    }
                    __m256 ds = _mm256_mul_ps(_mm256_mul_ps(p, _mm256_sub_ps(dp, _mm256_set1_ps(D[i]))),
                                              _mm256_set1_ps(scale));
                    for (int d = 0; d < HS; d++) {
                        float *dk_d = dkt + (size_t)d * BC, *dv_d = dvt + (size_t)d * BC;
                        _mm256_store_ps(dk_d, _mm256_fmadd_ps(_mm256_broadcast_ss(qi + d), ds, _mm256_load_ps(dk_d)));
                        _mm256_store_ps(dv_d, _mm256_fmadd_ps(_mm256_broadcast_ss(doi + d), pz, _mm256_load_ps(dv_d)));
                    }
                    _mm256_storeu_ps(dsw, ds);
                    rows_axpy(dqh + (size_t)i * HS, 1.0f, dsw, kh + (size_t)j0 * HS, nv, HS);
                }
                for (int jj = 0; jj < nk; jj++)
                    for (int d = 0; d < HS; d++) {
                        dkh[(size_t)(j0 + jj) * HS + d] += dkt[(size_t)d * BC + jj];
                        dvh[(size_t)(j0 + jj) * HS + d] += dvt[(size_t)d * BC + jj];
                    }
            }
        }
    }
}
