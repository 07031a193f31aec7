/* attention_avx512.c — AVX-512 fused causal flash attention: 16 keys per zmm. Key (and value) tiles
 * are packed transposed, (HS,16), so a query row's 16 scores are HS broadcast-FMAs with no
 * horizontal sums; O and dq rows are updated over HS in 16-float chunks with a masked tail (any
 * HS). Same tiling, mask and contract as the reference in kernels/ref/flash_ref.c. */
#include "kernels/x86_avx512/avx512.h"
#include "kernels/x86_avx512/attention_avx512.h"
#include "kernels/attention.h"
#include "core/core.h"
#include "core/profile.h"

#include <immintrin.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* the avx512 level's flash entries; the bf16 ones only on a CPU with AVX512_BF16 (else they stay the
 * bf16 reference) */
void gptc_avx512_overlay_attention(gptc_kernels *k) {
    k->flash_fwd = gptc_flash_fwd_avx512;
    k->flash_bwd = gptc_flash_bwd_avx512;
    k->flash_scratch = gptc_flash_scratch_avx512;
    if (gptc_cpu()->avx512bf16) {
        k->flash_fwd_bf16 = gptc_flash_fwd_bf16_avx512;
        k->flash_bwd_bf16 = gptc_flash_bwd_bf16_avx512;
        k->flash_scratch_bf16 = gptc_flash_scratch_bf16_avx512;
    }
}


/* per-thread scratch, grown on the first call and reused: nothing is allocated in a training step */
static _Thread_local gptc_workspace tl_rows, tl_tiles;

size_t gptc_flash_scratch_avx512(int T, int HS) {
    /* tl_rows: the backward's D (T); tl_tiles: the forward's key tile and accumulator, or the backward's
     * four (HS,BC) tiles, whichever is larger */
    size_t fwd = (size_t)HS * BC + (size_t)BR * HS, bwd = 4 * (size_t)HS * BC;
    return gptc_alloc_block_bytes(sizeof(float) * (size_t)T) +
           gptc_alloc_block_bytes(sizeof(float) * (fwd > bwd ? fwd : bwd));
}

/* scores of row x against the packed tile xt (HS,16): sum_d x[d] * xt[d] */
static inline __m512 row_times_tile(const float *x, const float *xt, int HS) {
    __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps(), a2 = _mm512_setzero_ps(), a3 = _mm512_setzero_ps();
    int d = 0;
    for (; d + 4 <= HS; d += 4) {
        a0 = _mm512_fmadd_ps(_mm512_set1_ps(x[d]), _mm512_load_ps(xt + (size_t)d * BC), a0);
        a1 = _mm512_fmadd_ps(_mm512_set1_ps(x[d + 1]), _mm512_load_ps(xt + (size_t)(d + 1) * BC), a1);
        a2 = _mm512_fmadd_ps(_mm512_set1_ps(x[d + 2]), _mm512_load_ps(xt + (size_t)(d + 2) * BC), a2);
        a3 = _mm512_fmadd_ps(_mm512_set1_ps(x[d + 3]), _mm512_load_ps(xt + (size_t)(d + 3) * BC), a3);
    }
    for (; d < HS; d++) a0 = _mm512_fmadd_ps(_mm512_set1_ps(x[d]), _mm512_load_ps(xt + (size_t)d * BC), a0);
    return _mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3));
}

/* xt (HS,16) = rows j0..j0+nk-1 of x (T,HS), transposed; lanes nk..15 zero */
static void pack_tile(float *xt, const float *x, int j0, int nk, int HS) {
    for (int d = 0; d < HS; d++) {
        float *dst = xt + (size_t)d * BC;
        for (int jj = 0; jj < BC; jj++) dst[jj] = jj < nk ? x[(size_t)(j0 + jj) * HS + d] : 0.0f;
    }
}

/* y (HS) = y * c + sum_{jj < n} w[jj] * x[jj*HS ..] */
static inline void rows_axpy(float *y, float c, const float *w, const float *x, int n, int HS) {
    __m512 vc = _mm512_set1_ps(c);
    for (int c0 = 0; c0 < HS; c0 += 16) {
        __mmask16 m = chunk_mask(c0, HS);
        __m512 a = _mm512_mul_ps(_mm512_maskz_loadu_ps(m, y + c0), vc);
        for (int jj = 0; jj < n; jj++)
            a = _mm512_fmadd_ps(_mm512_set1_ps(w[jj]), _mm512_maskz_loadu_ps(m, x + (size_t)jj * HS + c0), a);
        _mm512_mask_storeu_ps(y + c0, m, a);
    }
}

void gptc_flash_fwd_avx512(float *o, float *lse, const float *q, const float *k, const float *v, int B, int NH,
                           int T, int HS, float dropout, uint64_t seed) {
    GPTC_ASSERT(dropout >= 0.0f && dropout < 1.0f);
    const float scale = 1.0f / sqrtf((float)HS), inv_keep = 1.0f / (1.0f - dropout);
    const uint32_t thr = gptc_flash_threshold(dropout);
    const int ntiles = (T + BR - 1) / BR;
    const long ntasks = (long)B * NH * ntiles;
#pragma omp parallel
    {
        gptc_prof_begin(GPTC_PROF_THREAD, "flash_fwd.thread", -1); /* this thread's share, without the wait */
        float *kt = gptc_workspace_get(&tl_tiles, (size_t)HS * BC + (size_t)BR * HS);
        float *acc = kt + (size_t)HS * BC; /* HS*BC is a multiple of the lanes: acc stays vector aligned */
        float m[BR], l[BR], pw[BC];
#pragma omp for schedule(dynamic, 1) nowait /* the region's end is the barrier */
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
                    __m512 s = _mm512_mul_ps(row_times_tile(qh + (size_t)i * HS, kt, HS), _mm512_set1_ps(scale));
                    float corr;
                    __m512 p = online_softmax16(s, nv, &m[r], &l[r], &corr);
                    if (dropout > 0)
                        p = _mm512_maskz_mul_ps(keep16(seed, bh * T + i, j0, thr), p, _mm512_set1_ps(inv_keep));
                    _mm512_storeu_ps(pw, p);
                    rows_axpy(acc + (size_t)r * HS, corr, pw, vh + (size_t)j0 * HS, nv, HS);
                }
            }
            for (int i = i0; i < i1; i++) {
                int r = i - i0;
                float *oi = o + (bh * T + i) * HS, *a = acc + (size_t)r * HS;
                __m512 inv = _mm512_set1_ps(1.0f / l[r]);
                for (int c0 = 0; c0 < HS; c0 += 16) {
                    __mmask16 cm = chunk_mask(c0, HS);
                    _mm512_mask_storeu_ps(oi + c0, cm, _mm512_mul_ps(_mm512_maskz_loadu_ps(cm, a + c0), inv));
                }
                lse[bh * T + i] = m[r] + logf(l[r]);
            }
        }
        gptc_prof_end(0, 0);
    }
}

void gptc_flash_bwd_avx512(float *dq, float *dk, float *dv, const float *do_, const float *q, const float *k,
                           const float *v, const float *o, const float *lse, int B, int NH, int T, int HS,
                           float dropout, uint64_t seed) {
    GPTC_ASSERT(dropout >= 0.0f && dropout < 1.0f);
    const float scale = 1.0f / sqrtf((float)HS), inv_keep = 1.0f / (1.0f - dropout);
    const uint32_t thr = gptc_flash_threshold(dropout);
    const size_t tile = (size_t)HS * BC;
#pragma omp parallel
    {
        gptc_prof_begin(GPTC_PROF_THREAD, "flash_bwd.thread", -1); /* this thread's share, without the wait */
        float *D = gptc_workspace_get(&tl_rows, (size_t)T);
        /* kt, vt: the packed key and value tiles; dkt, dvt: their gradients, same (HS,16) layout */
        float *buf = gptc_workspace_get(&tl_tiles, 4 * tile);
        float *kt = buf, *vt = buf + tile, *dkt = buf + 2 * tile, *dvt = buf + 3 * tile;
        float dsw[BC];
        GPTC_ASSERT(D && buf);
#pragma omp for schedule(dynamic, 1) nowait /* the region's end is the barrier */
        for (long bhl = 0; bhl < (long)B * NH; bhl++) {
            size_t bh = (size_t)bhl, off = bh * T * HS;
            const float *qh = q + off, *kh = k + off, *vh = v + off, *doh = do_ + off, *L = lse + bh * T;
            float *dqh = dq + off, *dkh = dk + off, *dvh = dv + off;
            for (int i = 0; i < T; i++) D[i] = dot16(doh + (size_t)i * HS, o + off + (size_t)i * HS, HS);
            for (int j0 = 0; j0 < T; j0 += BC) {
                int nk = T - j0 < BC ? T - j0 : BC;
                pack_tile(kt, kh, j0, nk, HS);
                pack_tile(vt, vh, j0, nk, HS);
                memset(dkt, 0, 2 * tile * sizeof(float));
                for (int i = j0; i < T; i++) {
                    int nv = i + 1 - j0 < nk ? i + 1 - j0 : nk;
                    __mmask16 valid = (__mmask16)((1u << nv) - 1u);
                    const float *qi = qh + (size_t)i * HS, *doi = doh + (size_t)i * HS;
                    __m512 s = row_times_tile(qi, kt, HS), dp = row_times_tile(doi, vt, HS);
                    __m512 p = _mm512_maskz_mov_ps(
                        valid, exp16(_mm512_fmsub_ps(s, _mm512_set1_ps(scale), _mm512_set1_ps(L[i]))));
                    __m512 pz = p;
                    if (dropout > 0) {
                        __m512 z = _mm512_maskz_mov_ps(keep16(seed, bh * T + i, j0, thr), _mm512_set1_ps(inv_keep));
                        pz = _mm512_mul_ps(p, z);
                        dp = _mm512_mul_ps(dp, z);
                    }
                    __m512 ds = _mm512_mul_ps(_mm512_mul_ps(p, _mm512_sub_ps(dp, _mm512_set1_ps(D[i]))),
                                              _mm512_set1_ps(scale));
                    for (int d = 0; d < HS; d++) {
                        float *dk_d = dkt + (size_t)d * BC, *dv_d = dvt + (size_t)d * BC;
                        _mm512_store_ps(dk_d, _mm512_fmadd_ps(_mm512_set1_ps(qi[d]), ds, _mm512_load_ps(dk_d)));
                        _mm512_store_ps(dv_d, _mm512_fmadd_ps(_mm512_set1_ps(doi[d]), pz, _mm512_load_ps(dv_d)));
                    }
                    _mm512_storeu_ps(dsw, ds);
                    rows_axpy(dqh + (size_t)i * HS, 1.0f, dsw, kh + (size_t)j0 * HS, nv, HS);
                }
                for (int jj = 0; jj < nk; jj++)
                    for (int d = 0; d < HS; d++) {
                        dkh[(size_t)(j0 + jj) * HS + d] += dkt[(size_t)d * BC + jj];
                        dvh[(size_t)(j0 + jj) * HS + d] += dvt[(size_t)d * BC + jj];
                    }
            }
        }
        gptc_prof_end(0, 0);
    }
}
