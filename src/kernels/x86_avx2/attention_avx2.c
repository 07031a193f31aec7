/* attention_avx2.c — AVX2+FMA fused causal flash attention, fp32: the scheme of
 * x86_avx512/attention_avx512.c at 8 lanes — tiles of 64 query rows x 64 keys with the query rows in
 * the vector lanes (each head's rows transposed once), the scores and their gradients as register
 * tiles (4 keys x 16 rows), the online softmax lane-wise, the row-major products as 4 rows x 16
 * columns tiles (16 ymm registers: 8 accumulators each), any HS through masked tails. Contract in
 * kernels/attention.h; results agree with the reference to rounding. */
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

enum { BR = 64, FK = 64 };  /* query rows per forward task and backward block; keys per tile */
enum { SK = 4, SR = 16 };   /* S^T register tile: 4 keys x 16 rows (8 accumulators) */
enum { PR = 4, PC = 16 };   /* row-major register tile: 4 rows x 16 columns of HS (8 accumulators) */

/* per-thread scratch, grown on the first call and reused: nothing is allocated in a training step */
static _Thread_local gptc_workspace tl_tiles;

/* floats of the forward's scratch: Qt (HS,BR), S^T/P^T (FK,BR), a padded key tile (FK,HS), O's
 * accumulator (BR,HS), the rows' m, l and correction (3 x BR) */
static size_t fwd_scratch_floats(int HS) {
    return (size_t)HS * BR + (size_t)FK * BR + (size_t)FK * HS + (size_t)BR * HS + 3 * (size_t)BR;
}
/* floats of the backward's scratch: Qt and dOt (HS,Tp), D and L (Tp), P^T and dS^T (FK,BR), dK, dV,
 * the padded K and V tiles (FK,HS each) and dQ's block (BR,HS); Tp = T rounded up to BR */
static size_t bwd_scratch_floats(int T, int HS) {
    const size_t Tp = (size_t)(T + BR - 1) / BR * BR;
    return 2 * (size_t)HS * Tp + 2 * Tp + 2 * (size_t)FK * BR + 4 * (size_t)FK * HS + (size_t)BR * HS;
}

size_t gptc_flash_scratch_avx2(int T, int HS) {
    size_t fwd = fwd_scratch_floats(HS), bwd = bwd_scratch_floats(T, HS);
    return gptc_alloc_block_bytes(sizeof(float) * (fwd > bwd ? fwd : bwd));
}

/* lanes < n set (n in 0..8) */
static inline __m256i lanes_below(int n) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
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
static float dot8(const float *a, const float *b, int HS) {
    __m256 s = _mm256_setzero_ps();
    for (int c0 = 0; c0 < HS; c0 += 8) {
        __m256i m = lanes_below(HS - c0);
        s = _mm256_fmadd_ps(_mm256_maskload_ps(a + c0, m), _mm256_maskload_ps(b + c0, m), s);
    }
    return hsum8(s);
}

#define INLINE static inline __attribute__((always_inline))

/* the 8 x 8 transpose of r[0..7] in place: r[c] becomes column c */
INLINE void transpose8(__m256 r[8]) {
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

/* xt (HS,ld) = rows 0..n-1 of x (rows of HS) transposed, times scale; columns n..ld-1 (ld a multiple
 * of 8) zero */
static void pack_rows_t(float *xt, int ld, const float *x, int n, int HS, float scale) {
    const __m256 vs = _mm256_set1_ps(scale);
    for (int r0 = 0; r0 < ld; r0 += 8)
        for (int d0 = 0; d0 < HS; d0 += 8) {
            const __m256i dm = lanes_below(HS - d0);
            __m256 t[8];
            for (int i = 0; i < 8; i++)
                t[i] = r0 + i < n ? _mm256_mul_ps(_mm256_maskload_ps(x + (size_t)(r0 + i) * HS + d0, dm), vs)
                                  : _mm256_setzero_ps();
            transpose8(t);
            for (int j = 0; j < 8 && d0 + j < HS; j++) _mm256_store_ps(xt + (size_t)(d0 + j) * ld + r0, t[j]);
        }
}

/* The key (or value) tile's rows as the products read them: x itself, or (a ragged tile) a copy in
 * pad, zero past n up to whole register tiles */
static const float *tile_rows(float *pad, const float *x, int n, int HS) {
    const int n4 = (n + SK - 1) / SK * SK;
    if (n4 == n) return x;
    memcpy(pad, x, (size_t)n * HS * sizeof *pad);
    memset(pad + (size_t)n * HS, 0, (size_t)(n4 - n) * HS * sizeof *pad);
    return pad;
}

/* st[jj*BR + r] = sum_d kt[jj*HS + d] * qt[d*ldq + r] for keys jj < SK, rows r0..r0+SR-1 */
INLINE void scores_tile(float *st, const float *kt, const float *qt, int ldq, int HS, int r0) {
    __m256 a0[SK], a1[SK];
    for (int j = 0; j < SK; j++) a0[j] = a1[j] = _mm256_setzero_ps();
    for (int d = 0; d < HS; d++) {
        const __m256 q0 = _mm256_loadu_ps(qt + (size_t)d * ldq + r0), q1 = _mm256_loadu_ps(qt + (size_t)d * ldq + r0 + 8);
        for (int j = 0; j < SK; j++) {
            const __m256 kb = _mm256_broadcast_ss(kt + (size_t)j * HS + d);
            a0[j] = _mm256_fmadd_ps(kb, q0, a0[j]);
            a1[j] = _mm256_fmadd_ps(kb, q1, a1[j]);
        }
    }
    for (int j = 0; j < SK; j++) {
        _mm256_store_ps(st + (size_t)j * BR + r0, a0[j]);
        _mm256_store_ps(st + (size_t)j * BR + r0 + 8, a1[j]);
    }
}

/* S^T (FK,BR) of keys kt (nk4 rows, a multiple of SK) against the rows in qt (ldq) of the block at
 * i0; register tiles wholly above the diagonal skipped (never read) */
static void scores(float *st, const float *kt, const float *qt, int ldq, int HS, int i0, int j0, int nk4) {
    for (int jj = 0; jj < nk4; jj += SK)
        for (int r0 = 0; r0 < BR; r0 += SR)
            if (j0 + jj <= i0 + r0 + SR - 1) scores_tile(st + (size_t)jj * BR, kt + (size_t)jj * HS, qt, ldq, HS, r0);
}

/* acc rows r0..r0+PR-1, columns c0..c0+PC-1 (clipped to HS) = acc * corr[r] (corr NULL: 1) +
 * sum_{j < nj} pt[j*BR + r] x[j*HS ..]: the forward's O += P V, the backward's dQ += dS K */
INLINE void rows_tile(float *acc, const float *corr, const float *pt, const float *x, int nj, int HS, int r0, int c0) {
    const __m256i m0 = lanes_below(HS - c0), m1 = lanes_below(HS - c0 - 8);
    __m256 o[PR][2];
    for (int r = 0; r < PR; r++) {
        const __m256 c = _mm256_set1_ps(corr ? corr[r0 + r] : 1.0f);
        const float *a = acc + (size_t)(r0 + r) * HS + c0;
        o[r][0] = _mm256_mul_ps(_mm256_maskload_ps(a, m0), c);
        o[r][1] = _mm256_mul_ps(_mm256_maskload_ps(a + 8, m1), c);
    }
    for (int j = 0; j < nj; j++) {
        const __m256 x0 = _mm256_maskload_ps(x + (size_t)j * HS + c0, m0), x1 = _mm256_maskload_ps(x + (size_t)j * HS + c0 + 8, m1);
        for (int r = 0; r < PR; r++) {
            const __m256 pb = _mm256_broadcast_ss(pt + (size_t)j * BR + r0 + r);
            o[r][0] = _mm256_fmadd_ps(pb, x0, o[r][0]);
            o[r][1] = _mm256_fmadd_ps(pb, x1, o[r][1]);
        }
    }
    for (int r = 0; r < PR; r++) {
        float *a = acc + (size_t)(r0 + r) * HS + c0;
        _mm256_maskstore_ps(a, m0, o[r][0]);
        _mm256_maskstore_ps(a + 8, m1, o[r][1]);
    }
}

/* acc rows j0..j0+PR-1 (keys; stride HS), columns c0..c0+PC-1 (clipped to HS) += sum_{r in [ra, nr)}
 * pt[j*BR + r] x[r*HS ..]: the backward's dV += P^T dO and dK += dS^T Q */
INLINE void keys_tile(float *acc, const float *pt, const float *x, int ra, int nr, int HS, int j0, int c0) {
    const __m256i m0 = lanes_below(HS - c0), m1 = lanes_below(HS - c0 - 8);
    __m256 a[PR][2];
    for (int j = 0; j < PR; j++) {
        const float *p = acc + (size_t)(j0 + j) * HS + c0;
        a[j][0] = _mm256_maskload_ps(p, m0);
        a[j][1] = _mm256_maskload_ps(p + 8, m1);
    }
    for (int r = ra; r < nr; r++) {
        const __m256 x0 = _mm256_maskload_ps(x + (size_t)r * HS + c0, m0), x1 = _mm256_maskload_ps(x + (size_t)r * HS + c0 + 8, m1);
        for (int j = 0; j < PR; j++) {
            const __m256 pb = _mm256_broadcast_ss(pt + (size_t)(j0 + j) * BR + r);
            a[j][0] = _mm256_fmadd_ps(pb, x0, a[j][0]);
            a[j][1] = _mm256_fmadd_ps(pb, x1, a[j][1]);
        }
    }
    for (int j = 0; j < PR; j++) {
        float *p = acc + (size_t)(j0 + j) * HS + c0;
        _mm256_maskstore_ps(p, m0, a[j][0]);
        _mm256_maskstore_ps(p + 8, m1, a[j][1]);
    }
}

/* y (rows x HS, stride HS) += x (same shape) */
static void add_rows(float *y, const float *x, int rows, int HS) {
    for (int r = 0; r < rows; r++)
        for (int c0 = 0; c0 < HS; c0 += 8) {
            const __m256i m = lanes_below(HS - c0);
            float *d = y + (size_t)r * HS + c0;
            _mm256_maskstore_ps(d, m, _mm256_add_ps(_mm256_maskload_ps(d, m), _mm256_maskload_ps(x + (size_t)r * HS + c0, m)));
        }
}

/* lanes of row >= key (key valid for the row) */
INLINE __m256 valid_lanes(__m256i row, int key) {
    return _mm256_castsi256_ps(_mm256_cmpgt_epi32(row, _mm256_set1_epi32(key - 1)));
}

/* One key tile's online softmax over the task's rows, in place in st (FK,BR): keys j0..j0+nk-1 against
 * rows i0..i0+BR-1 (key j valid for row i when j <= i); updates m and l, writes each row's rescaling
 * factor to corr and leaves exp(s - m) (0 where invalid) in st. */
static void softmax_tile(float *st, float *m, float *l, float *corr, int i0, int j0, int nk) {
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    const __m256 ninf = _mm256_set1_ps(-INFINITY);
    for (int r0 = 0; r0 < BR; r0 += 8) {
        const __m256i row = _mm256_add_epi32(lane, _mm256_set1_epi32(i0 + r0));
        const int kmax = i0 + r0 + 7 - j0 + 1 < nk ? i0 + r0 + 7 - j0 + 1 : nk; /* keys any of these rows sees */
        __m256 mx = ninf;
        for (int j = 0; j < kmax; j++)
            mx = _mm256_blendv_ps(mx, _mm256_max_ps(mx, _mm256_load_ps(st + (size_t)j * BR + r0)), valid_lanes(row, j0 + j));
        const __m256 mold = _mm256_load_ps(m + r0), mnew = _mm256_max_ps(mold, mx);
        /* a row's first tile: mold = -inf, corr = 0 (its acc and l are 0 anyway) */
        const __m256 c = _mm256_and_ps(_mm256_cmp_ps(mold, ninf, _CMP_NEQ_OQ), exp8(_mm256_sub_ps(mold, mnew)));
        __m256 sum = _mm256_setzero_ps();
        for (int j = 0; j < kmax; j++) {
            const __m256 p = _mm256_and_ps(valid_lanes(row, j0 + j), exp8(_mm256_sub_ps(_mm256_load_ps(st + (size_t)j * BR + r0), mnew)));
            _mm256_store_ps(st + (size_t)j * BR + r0, p);
            sum = _mm256_add_ps(sum, p);
        }
        for (int j = kmax; j < nk; j++) _mm256_store_ps(st + (size_t)j * BR + r0, _mm256_setzero_ps());
        _mm256_store_ps(l + r0, _mm256_fmadd_ps(_mm256_load_ps(l + r0), c, sum));
        _mm256_store_ps(m + r0, mnew);
        _mm256_store_ps(corr + r0, c);
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
        float *qt = gptc_workspace_get(&tl_tiles, fwd_scratch_floats(HS));
        /* every part a multiple of 8 floats from a 64-byte aligned start: vector aligned */
        float *st = qt + (size_t)HS * BR, *kpad = st + (size_t)FK * BR, *acc = kpad + (size_t)FK * HS;
        float *m = acc + (size_t)BR * HS, *l = m + BR, *corr = l + BR;
#pragma omp for schedule(dynamic, 1) nowait /* the region's end is the barrier */
        for (long task = 0; task < ntasks; task++) {
            const size_t bh = (size_t)(task / ntiles);
            const int i0 = (int)(task % ntiles) * BR, i1 = i0 + BR < T ? i0 + BR : T, nr = i1 - i0;
            const float *kh = k + bh * T * HS, *vh = v + bh * T * HS;
            pack_rows_t(qt, BR, q + (bh * T + i0) * HS, nr, HS, scale);
            for (int r = 0; r < BR; r++) m[r] = -INFINITY, l[r] = 0;
            memset(acc, 0, (size_t)BR * HS * sizeof *acc);
            for (int j0 = 0; j0 < i1; j0 += FK) {
                const int nk = i1 - j0 < FK ? i1 - j0 : FK, nk4 = (nk + SK - 1) / SK * SK;
                const float *kt = tile_rows(kpad, kh + (size_t)j0 * HS, nk, HS), *vt = vh + (size_t)j0 * HS;
                scores(st, kt, qt, BR, HS, i0, j0, nk4);
                softmax_tile(st, m, l, corr, i0, j0, nk);
                if (dropout > 0) /* P.V uses the kept probabilities, scaled; l keeps the undropped sum */
                    for (int r = 0; r < nr; r++)
                        for (int g = 0; g < (nk + 3) / 4; g++) {
                            unsigned bits = gptc_flash_keep4(seed, bh * T + i0 + r, (uint32_t)(j0 / 4 + g), thr);
                            for (int n = 0; n < 4 && 4 * g + n < nk; n++)
                                st[(size_t)(4 * g + n) * BR + r] *= (bits >> n) & 1u ? inv_keep : 0.0f;
                        }
                for (int r0 = 0; r0 < nr; r0 += PR) {
                    const int last = i0 + r0 + PR - 1, nj = last - j0 + 1 < nk ? last - j0 + 1 : nk;
                    for (int c0 = 0; c0 < HS; c0 += PC) rows_tile(acc, corr, st, vt, nj, HS, r0, c0);
                }
            }
            for (int r = 0; r < nr; r++) {
                float *oi = o + (bh * T + i0 + r) * HS, *a = acc + (size_t)r * HS;
                const __m256 inv = _mm256_set1_ps(1.0f / l[r]);
                for (int c0 = 0; c0 < HS; c0 += 8) {
                    const __m256i cm = lanes_below(HS - c0);
                    _mm256_maskstore_ps(oi + c0, cm, _mm256_mul_ps(_mm256_maskload_ps(a + c0, cm), inv));
                }
                lse[bh * T + i0 + r] = m[r] + logf(l[r]);
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
    const int Tp = (T + BR - 1) / BR * BR;
#pragma omp parallel
    {
        const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
        float *qt = gptc_workspace_get(&tl_tiles, bwd_scratch_floats(T, HS));
        float *dot = qt + (size_t)HS * Tp, *D = dot + (size_t)HS * Tp, *L = D + Tp;
        float *pt = L + Tp, *dst = pt + (size_t)FK * BR, *dka = dst + (size_t)FK * BR, *dva = dka + (size_t)FK * HS;
        float *kpad = dva + (size_t)FK * HS, *vpad = kpad + (size_t)FK * HS, *dqa = vpad + (size_t)FK * HS;
        GPTC_ASSERT(qt);
#pragma omp for schedule(dynamic, 1) nowait /* the region's end is the barrier */
        for (long bhl = 0; bhl < (long)B * NH; bhl++) {
            const size_t bh = (size_t)bhl, off = bh * T * HS;
            const float *qh = q + off, *kh = k + off, *vh = v + off, *doh = do_ + off;
            float *dqh = dq + off, *dkh = dk + off, *dvh = dv + off;
            pack_rows_t(qt, Tp, qh, T, HS, scale);
            pack_rows_t(dot, Tp, doh, T, HS, 1.0f);
            for (int i = 0; i < Tp; i++) {
                D[i] = i < T ? dot8(doh + (size_t)i * HS, o + off + (size_t)i * HS, HS) : 0.0f;
                L[i] = i < T ? lse[bh * T + i] : 0.0f;
            }
            for (int j0 = 0; j0 < T; j0 += FK) {
                const int nk = T - j0 < FK ? T - j0 : FK, nk4 = (nk + SK - 1) / SK * SK;
                const float *kt = tile_rows(kpad, kh + (size_t)j0 * HS, nk, HS);
                const float *vt = tile_rows(vpad, vh + (size_t)j0 * HS, nk, HS);
                memset(dka, 0, 2 * (size_t)FK * HS * sizeof *dka); /* dK and dV of the tile */
                for (int i0 = j0; i0 < T; i0 += BR) {
                    const int nr = T - i0 < BR ? T - i0 : BR;
                    scores(pt, kt, qt + i0, Tp, HS, i0, j0, nk4);  /* S^T, scaled as Qt is */
                    scores(dst, vt, dot + i0, Tp, HS, i0, j0, nk4); /* dP^T */
                    /* P^T z and dS^T = P (z dP - D) scale; 0 where key > row or row >= T */
                    for (int r0 = 0; r0 < BR; r0 += 8) {
                        const __m256i row = _mm256_add_epi32(lane, _mm256_set1_epi32(i0 + r0));
                        const __m256 live = _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32(T), row));
                        const __m256 Lr = _mm256_load_ps(L + i0 + r0), Dr = _mm256_load_ps(D + i0 + r0);
                        for (int j = 0; j < nk; j++) {
                            const __m256 valid = _mm256_and_ps(live, valid_lanes(row, j0 + j));
                            float *pj = pt + (size_t)j * BR + r0, *dj = dst + (size_t)j * BR + r0;
                            if (_mm256_testz_ps(valid, valid)) {
                                _mm256_store_ps(pj, _mm256_setzero_ps());
                                _mm256_store_ps(dj, _mm256_setzero_ps());
                                continue;
                            }
                            const __m256 p = _mm256_and_ps(valid, exp8(_mm256_sub_ps(_mm256_load_ps(pj), Lr)));
                            __m256 pz = p, dp = _mm256_load_ps(dj);
                            if (dropout > 0) {
                                float z[8] __attribute__((aligned(32)));
                                for (int r = 0; r < 8; r++)
                                    z[r] = (gptc_flash_keep4(seed, bh * T + (size_t)(i0 + r0 + r), (uint32_t)((j0 + j) / 4), thr) >>
                                            ((j0 + j) % 4)) & 1u ? inv_keep : 0.0f;
                                const __m256 zv = _mm256_load_ps(z);
                                pz = _mm256_mul_ps(p, zv);
                                dp = _mm256_mul_ps(dp, zv);
                            }
                            _mm256_store_ps(pj, pz);
                            _mm256_store_ps(dj, _mm256_mul_ps(_mm256_mul_ps(p, _mm256_sub_ps(dp, Dr)), _mm256_set1_ps(scale)));
                        }
                    }
                    /* dV += (P z)^T dO, dK += dS^T Q, each key group over the rows that see it */
                    for (int jg = 0; jg < nk; jg += PR) {
                        const int ra = j0 + jg - i0 > 0 ? j0 + jg - i0 : 0;
                        for (int c0 = 0; c0 < HS; c0 += PC) {
                            keys_tile(dva, pt, doh + (size_t)i0 * HS, ra, nr, HS, jg, c0);
                            keys_tile(dka, dst, qh + (size_t)i0 * HS, ra, nr, HS, jg, c0);
                        }
                    }
                    /* dQ rows += dS K, each row group over the keys it sees */
                    memset(dqa, 0, (size_t)BR * HS * sizeof *dqa);
                    for (int r0 = 0; r0 < nr; r0 += PR) {
                        const int last = i0 + r0 + PR - 1, nj = last - j0 + 1 < nk ? last - j0 + 1 : nk;
                        for (int c0 = 0; c0 < HS; c0 += PC) rows_tile(dqa, NULL, dst, kt, nj, HS, r0, c0);
                    }
                    add_rows(dqh + (size_t)i0 * HS, dqa, nr, HS);
                }
                add_rows(dkh + (size_t)j0 * HS, dka, nk, HS);
                add_rows(dvh + (size_t)j0 * HS, dva, nk, HS);
            }
        }
    }
}
