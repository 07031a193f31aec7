/* attention_avx512.c — AVX-512 fused causal flash attention, fp32: tiles of 64 query rows x 64 keys
 * with the query rows in the vector lanes (each head's rows transposed once), so the scores and
 * their gradients are register-tiled products and the online softmax is lane-wise; every product
 * runs in FMA register tiles (8 keys x 32 rows, 4 rows x 64 columns), any HS through masked tails.
 * Same contract and dropout mask as the reference in kernels/ref/flash_ref.c; the summation order
 * differs, so results agree to rounding, not bits. */
#include "kernels/x86_avx512/avx512.h"
#include "kernels/x86_avx512/attention_avx512.h"
#include "kernels/x86_avx512/transpose16.h"
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
static _Thread_local gptc_workspace tl_tiles;

static size_t fwd_scratch_floats(int HS);
static size_t bwd_scratch_floats(int T, int HS);

size_t gptc_flash_scratch_avx512(int T, int HS) {
    /* tl_tiles: the forward's tiles (fwd_scratch_floats) or the backward's (bwd_scratch_floats),
     * whichever is larger */
    size_t fwd = fwd_scratch_floats(HS), bwd = bwd_scratch_floats(T, HS);
    return gptc_alloc_block_bytes(sizeof(float) * (fwd > bwd ? fwd : bwd));
}

/* The forward works with a task's query rows in the vector lanes: the scores of FK keys against
 * the task's BR rows are a small product S^T (FK,BR) = K_tile (FK,HS) . Qt (HS,BR), Qt the task's
 * rows transposed once, so the online softmax runs down columns of registers (a row's max and sum
 * are lane-wise, no horizontal reductions), and O (BR,HS) += P (BR,FK) . V_tile (FK,HS) reads V's
 * rows in place. Both products use register tiles of FMAs like the GEMM's microkernel. */
enum { FK = 64 };              /* keys per forward tile */
enum { SK = 8, SR = 32 };      /* S^T register tile: 8 keys x 32 rows (16 accumulators) */
enum { PR = 4, PC = 64 };      /* P.V register tile: 4 rows x 64 columns of HS (16 accumulators) */

/* floats of the forward's per-thread scratch: Qt (HS,BR), S^T/P^T (FK,BR), a padded key tile (FK,HS),
 * O's accumulator (BR,HS), and the rows' m, l and correction (3 x BR) */
static size_t fwd_scratch_floats(int HS) {
    return (size_t)HS * BR + (size_t)FK * BR + 2 * (size_t)FK * HS + 3 * (size_t)BR;
}

/* qt (HS,BR) = rows 0..nr-1 of q (rows of HS) transposed and times scale; rows nr..BR-1 zero */
static void pack_q_t(float *qt, const float *q, int nr, int HS, float scale) {
    const __m512 vs = _mm512_set1_ps(scale);
    for (int r0 = 0; r0 < BR; r0 += 16)
        for (int d0 = 0; d0 < HS; d0 += 16) {
            const __mmask16 dm = chunk_mask(d0, HS);
            __m512 t[16];
            for (int i = 0; i < 16; i++)
                t[i] = r0 + i < nr ? _mm512_mul_ps(_mm512_maskz_loadu_ps(dm, q + (size_t)(r0 + i) * HS + d0), vs)
                                   : _mm512_setzero_ps();
            transpose16(t);
            for (int j = 0; j < 16 && d0 + j < HS; j++) _mm512_store_ps(qt + (size_t)(d0 + j) * BR + r0, t[j]);
        }
}

/* st[jj*BR + r] = sum_d kt[jj*HS + d] * qt[d*ldq + r] for keys jj < SK, rows r0..r0+SR-1 */
static inline __attribute__((always_inline)) void scores_tile(float *st, const float *kt, const float *qt, int ldq,
                                                              int HS, int r0) {
    __m512 a0[SK], a1[SK];
    for (int j = 0; j < SK; j++) a0[j] = a1[j] = _mm512_setzero_ps();
    for (int d = 0; d < HS; d++) {
        const __m512 q0 = _mm512_loadu_ps(qt + (size_t)d * ldq + r0), q1 = _mm512_loadu_ps(qt + (size_t)d * ldq + r0 + 16);
        for (int j = 0; j < SK; j++) {
            const __m512 kb = _mm512_set1_ps(kt[(size_t)j * HS + d]);
            a0[j] = _mm512_fmadd_ps(kb, q0, a0[j]);
            a1[j] = _mm512_fmadd_ps(kb, q1, a1[j]);
        }
    }
    for (int j = 0; j < SK; j++) {
        _mm512_store_ps(st + (size_t)j * BR + r0, a0[j]);
        _mm512_store_ps(st + (size_t)j * BR + r0 + 16, a1[j]);
    }
}

/* acc rows r0..r0+PR-1, columns c0..c0+PC-1 (clipped to HS) = acc * corr[r] (corr NULL: 1) +
 * sum_{j < nj} pt[j*BR + r] v[j*HS ..] */
static inline __attribute__((always_inline)) void pv_tile(float *acc, const float *corr, const float *pt, const float *v,
                                                          int nj, int HS, int r0, int c0) {
    __mmask16 cm[PC / 16];
    for (int z = 0; z < PC / 16; z++) cm[z] = c0 + 16 * z < HS ? chunk_mask(c0 + 16 * z, HS) : 0;
    __m512 o[PR][PC / 16];
    for (int r = 0; r < PR; r++) {
        const __m512 c = _mm512_set1_ps(corr ? corr[r0 + r] : 1.0f);
        for (int z = 0; z < PC / 16; z++)
            o[r][z] = _mm512_mul_ps(_mm512_maskz_loadu_ps(cm[z], acc + (size_t)(r0 + r) * HS + c0 + 16 * z), c);
    }
    for (int j = 0; j < nj; j++) {
        __m512 vz[PC / 16];
        for (int z = 0; z < PC / 16; z++) vz[z] = _mm512_maskz_loadu_ps(cm[z], v + (size_t)j * HS + c0 + 16 * z);
        for (int r = 0; r < PR; r++) {
            const __m512 pb = _mm512_set1_ps(pt[(size_t)j * BR + r0 + r]);
            for (int z = 0; z < PC / 16; z++) o[r][z] = _mm512_fmadd_ps(pb, vz[z], o[r][z]);
        }
    }
    for (int r = 0; r < PR; r++)
        for (int z = 0; z < PC / 16; z++) _mm512_mask_storeu_ps(acc + (size_t)(r0 + r) * HS + c0 + 16 * z, cm[z], o[r][z]);
}

/* One key tile's online softmax over the task's rows, in place in st (FK,BR): keys j0..j0+nk-1 against
 * rows i0..i0+BR-1 (key j valid for row i when j <= i); updates m and l, writes the rows' rescaling
 * factor to corr and leaves the tile's probabilities exp(s - m) (0 where invalid) in st. */
static void softmax_tile(float *st, float *m, float *l, float *corr, int i0, int j0, int nk) {
    const __m512i lane = _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
    for (int r0 = 0; r0 < BR; r0 += 16) {
        const __m512i row = _mm512_add_epi32(lane, _mm512_set1_epi32(i0 + r0));
        const int kmax = i0 + r0 + 15 - j0 + 1 < nk ? i0 + r0 + 15 - j0 + 1 : nk; /* keys any of these rows sees */
        __m512 mx = _mm512_set1_ps(-INFINITY);
        for (int j = 0; j < kmax; j++) {
            const __mmask16 valid = _mm512_cmpge_epi32_mask(row, _mm512_set1_epi32(j0 + j));
            mx = _mm512_mask_max_ps(mx, valid, mx, _mm512_load_ps(st + (size_t)j * BR + r0));
        }
        const __m512 mold = _mm512_load_ps(m + r0), mnew = _mm512_max_ps(mold, mx);
        /* a row's first tile: mold = -inf, corr = 0 (its acc and l are 0 anyway) */
        const __m512 c = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(mold, _mm512_set1_ps(-INFINITY), _CMP_NEQ_OQ),
                                             exp16(_mm512_sub_ps(mold, mnew)));
        __m512 sum = _mm512_setzero_ps();
        for (int j = 0; j < kmax; j++) {
            const __mmask16 valid = _mm512_cmpge_epi32_mask(row, _mm512_set1_epi32(j0 + j));
            const __m512 p = _mm512_maskz_mov_ps(valid, exp16(_mm512_sub_ps(_mm512_load_ps(st + (size_t)j * BR + r0), mnew)));
            _mm512_store_ps(st + (size_t)j * BR + r0, p);
            sum = _mm512_add_ps(sum, p);
        }
        for (int j = kmax; j < nk; j++) _mm512_store_ps(st + (size_t)j * BR + r0, _mm512_setzero_ps());
        _mm512_store_ps(l + r0, _mm512_fmadd_ps(_mm512_load_ps(l + r0), c, sum));
        _mm512_store_ps(m + r0, mnew);
        _mm512_store_ps(corr + r0, c);
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
        float *qt = gptc_workspace_get(&tl_tiles, fwd_scratch_floats(HS));
        /* every part a multiple of 16 floats from a 64-byte aligned start: vector aligned */
        float *st = qt + (size_t)HS * BR, *kpad = st + (size_t)FK * BR, *acc = kpad + (size_t)FK * HS;
        float *m = acc + (size_t)BR * HS, *l = m + BR, *corr = l + BR;
#pragma omp for schedule(dynamic, 1) nowait /* the region's end is the barrier */
        for (long task = 0; task < ntasks; task++) {
            const size_t bh = (size_t)(task / ntiles);
            const int i0 = (int)(task % ntiles) * BR, i1 = i0 + BR < T ? i0 + BR : T, nr = i1 - i0;
            const float *kh = k + bh * T * HS, *vh = v + bh * T * HS;
            pack_q_t(qt, q + (bh * T + i0) * HS, nr, HS, scale);
            for (int r = 0; r < BR; r++) m[r] = -INFINITY, l[r] = 0;
            memset(acc, 0, (size_t)BR * HS * sizeof *acc);
            for (int j0 = 0; j0 < i1; j0 += FK) {
                const int nk = i1 - j0 < FK ? i1 - j0 : FK, nk8 = (nk + SK - 1) / SK * SK;
                const float *kt = kh + (size_t)j0 * HS;
                if (nk8 != nk) { /* a ragged tile: its keys, then zero keys to a whole register tile */
                    memcpy(kpad, kt, (size_t)nk * HS * sizeof *kpad);
                    memset(kpad + (size_t)nk * HS, 0, (size_t)(nk8 - nk) * HS * sizeof *kpad);
                    kt = kpad;
                }
                for (int jj = 0; jj < nk8; jj += SK)
                    for (int r0 = 0; r0 < BR; r0 += SR)
                        if (j0 + jj <= i0 + r0 + SR - 1) /* else every key is past every row: masked below */
                            scores_tile(st + (size_t)jj * BR, kt + (size_t)jj * HS, qt, BR, HS, r0);
                        else
                            for (int j = 0; j < SK; j++) memset(st + (size_t)(jj + j) * BR + r0, 0, SR * sizeof *st);
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
                    for (int c0 = 0; c0 < HS; c0 += PC) pv_tile(acc, corr, st, vh + (size_t)j0 * HS, nj, HS, r0, c0);
                }
            }
            for (int r = 0; r < nr; r++) {
                float *oi = o + (bh * T + i0 + r) * HS, *a = acc + (size_t)r * HS;
                const __m512 inv = _mm512_set1_ps(1.0f / l[r]);
                for (int c0 = 0; c0 < HS; c0 += 16) {
                    const __mmask16 cm = chunk_mask(c0, HS);
                    _mm512_mask_storeu_ps(oi + c0, cm, _mm512_mul_ps(_mm512_maskz_loadu_ps(cm, a + c0), inv));
                }
                lse[bh * T + i0 + r] = m[r] + logf(l[r]);
            }
        }
        gptc_prof_end(0, 0);
    }
}

/* The backward, per head (one thread each), per key tile of FK keys against every query block of BR
 * rows at or below it, with the rows in the lanes as in the forward: S^T and dP^T (FK,BR) are the
 * register-tiled products K . Qt and V . dOt (Qt, dOt the head's rows transposed once), P and dS
 * follow lane-wise, and dV += P^T dO, dK += dS^T Q (kept for the tile), dQ += dS K (per block) are
 * register tiles over rows of HS. */

/* floats of the backward's per-thread scratch at (T, HS): Qt and dOt (HS,Tp), D and L (Tp), P^T and
 * dS^T (FK,BR), dK, dV, the padded K and V tiles (FK,HS each) and dQ's block (BR,HS); Tp = T rounded
 * up to BR */
static size_t bwd_scratch_floats(int T, int HS) {
    const size_t Tp = (size_t)(T + BR - 1) / BR * BR;
    return 2 * (size_t)HS * Tp + 2 * Tp + 2 * (size_t)FK * BR + 4 * (size_t)FK * HS + (size_t)BR * HS;
}

/* xt (HS,ld) = rows 0..T-1 of x (rows of HS) transposed, times scale; columns T..ld-1 (ld a multiple
 * of 16) zero */
static void pack_rows_t(float *xt, int ld, const float *x, int T, int HS, float scale) {
    const __m512 vs = _mm512_set1_ps(scale);
    for (int r0 = 0; r0 < ld; r0 += 16)
        for (int d0 = 0; d0 < HS; d0 += 16) {
            const __mmask16 dm = chunk_mask(d0, HS);
            __m512 t[16];
            for (int i = 0; i < 16; i++)
                t[i] = r0 + i < T ? _mm512_mul_ps(_mm512_maskz_loadu_ps(dm, x + (size_t)(r0 + i) * HS + d0), vs)
                                  : _mm512_setzero_ps();
            transpose16(t);
            for (int j = 0; j < 16 && d0 + j < HS; j++) _mm512_store_ps(xt + (size_t)(d0 + j) * ld + r0, t[j]);
        }
}

/* acc rows j0..j0+PR-1 (keys; stride HS), columns c0..c0+PC-1 (clipped to HS) += sum_{r in [ra, nr)}
 * pt[j*BR + r] x[r*HS ..]: dV (pt = P^T, x = dO) and dK (pt = dS^T, x = Q) */
static inline __attribute__((always_inline)) void keys_tile(float *acc, const float *pt, const float *x, int ra,
                                                            int nr, int HS, int j0, int c0) {
    __mmask16 cm[PC / 16];
    for (int z = 0; z < PC / 16; z++) cm[z] = c0 + 16 * z < HS ? chunk_mask(c0 + 16 * z, HS) : 0;
    __m512 a[PR][PC / 16];
    for (int j = 0; j < PR; j++)
        for (int z = 0; z < PC / 16; z++) a[j][z] = _mm512_maskz_loadu_ps(cm[z], acc + (size_t)(j0 + j) * HS + c0 + 16 * z);
    for (int r = ra; r < nr; r++) {
        __m512 xz[PC / 16];
        for (int z = 0; z < PC / 16; z++) xz[z] = _mm512_maskz_loadu_ps(cm[z], x + (size_t)r * HS + c0 + 16 * z);
        for (int j = 0; j < PR; j++) {
            const __m512 pb = _mm512_set1_ps(pt[(size_t)(j0 + j) * BR + r]);
            for (int z = 0; z < PC / 16; z++) a[j][z] = _mm512_fmadd_ps(pb, xz[z], a[j][z]);
        }
    }
    for (int j = 0; j < PR; j++)
        for (int z = 0; z < PC / 16; z++) _mm512_mask_storeu_ps(acc + (size_t)(j0 + j) * HS + c0 + 16 * z, cm[z], a[j][z]);
}

void gptc_flash_bwd_avx512(float *dq, float *dk, float *dv, const float *do_, const float *q, const float *k,
                           const float *v, const float *o, const float *lse, int B, int NH, int T, int HS,
                           float dropout, uint64_t seed) {
    GPTC_ASSERT(dropout >= 0.0f && dropout < 1.0f);
    const float scale = 1.0f / sqrtf((float)HS), inv_keep = 1.0f / (1.0f - dropout);
    const uint32_t thr = gptc_flash_threshold(dropout);
    const int Tp = (T + BR - 1) / BR * BR;
    const __m512i lane = _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
#pragma omp parallel
    {
        gptc_prof_begin(GPTC_PROF_THREAD, "flash_bwd.thread", -1); /* this thread's share, without the wait */
        /* every part a multiple of 16 floats from a 64-byte aligned start: vector aligned */
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
                D[i] = i < T ? dot16(doh + (size_t)i * HS, o + off + (size_t)i * HS, HS) : 0.0f;
                L[i] = i < T ? lse[bh * T + i] : 0.0f;
            }
            for (int j0 = 0; j0 < T; j0 += FK) {
                const int nk = T - j0 < FK ? T - j0 : FK, nk8 = (nk + SK - 1) / SK * SK;
                const float *kt = kh + (size_t)j0 * HS, *vt = vh + (size_t)j0 * HS;
                if (nk8 != nk) { /* a ragged tile: its keys, then zero keys to whole register tiles */
                    memset(kpad, 0, (size_t)FK * HS * sizeof *kpad);
                    memset(vpad, 0, (size_t)FK * HS * sizeof *vpad);
                    memcpy(kpad, kt, (size_t)nk * HS * sizeof *kpad);
                    memcpy(vpad, vt, (size_t)nk * HS * sizeof *vpad);
                    kt = kpad, vt = vpad;
                }
                memset(dka, 0, 2 * (size_t)FK * HS * sizeof *dka); /* dK and dV of the tile */
                for (int i0 = j0 / BR * BR; i0 < T; i0 += BR) {
                    const int nr = T - i0 < BR ? T - i0 : BR;
                    /* S^T (scaled, as Qt is) and dP^T, blocks wholly above the diagonal skipped (masked below) */
                    for (int jj = 0; jj < nk8; jj += SK)
                        for (int r0 = 0; r0 < BR; r0 += SR)
                            if (j0 + jj <= i0 + r0 + SR - 1) {
                                scores_tile(pt + (size_t)jj * BR, kt + (size_t)jj * HS, qt + i0, Tp, HS, r0);
                                scores_tile(dst + (size_t)jj * BR, vt + (size_t)jj * HS, dot + i0, Tp, HS, r0);
                            }
                    /* P^T (times the dropout factor) and dS^T = P (Z dP - D) scale, 0 where key > row or row >= T */
                    for (int r0 = 0; r0 < BR; r0 += 16) {
                        const __m512i row = _mm512_add_epi32(lane, _mm512_set1_epi32(i0 + r0));
                        const __mmask16 live = _mm512_cmplt_epi32_mask(row, _mm512_set1_epi32(T));
                        const __m512 Lr = _mm512_load_ps(L + i0 + r0), Dr = _mm512_load_ps(D + i0 + r0);
                        for (int j = 0; j < nk; j++) {
                            const __mmask16 valid = live & _mm512_cmpge_epi32_mask(row, _mm512_set1_epi32(j0 + j));
                            float *pj = pt + (size_t)j * BR + r0, *dj = dst + (size_t)j * BR + r0;
                            if (!valid) {
                                _mm512_store_ps(pj, _mm512_setzero_ps());
                                _mm512_store_ps(dj, _mm512_setzero_ps());
                                continue;
                            }
                            const __m512 p = _mm512_maskz_mov_ps(valid, exp16(_mm512_sub_ps(_mm512_load_ps(pj), Lr)));
                            __m512 pz = p, dp = _mm512_load_ps(dj);
                            if (dropout > 0) {
                                unsigned keep = 0;
                                for (int r = 0; r < 16; r++)
                                    keep |= ((gptc_flash_keep4(seed, bh * T + (size_t)(i0 + r0 + r), (uint32_t)((j0 + j) / 4), thr) >>
                                              ((j0 + j) % 4)) & 1u) << r;
                                const __m512 z = _mm512_maskz_mov_ps((__mmask16)keep, _mm512_set1_ps(inv_keep));
                                pz = _mm512_mul_ps(p, z);
                                dp = _mm512_mul_ps(dp, z);
                            }
                            _mm512_store_ps(pj, pz);
                            _mm512_store_ps(dj, _mm512_mul_ps(_mm512_mul_ps(p, _mm512_sub_ps(dp, Dr)), _mm512_set1_ps(scale)));
                        }
                    }
                    /* dV += (P Z)^T dO, dK += dS^T Q over the rows that see each group of keys */
                    for (int jg = 0; jg < nk8; jg += PR) {
                        const int ra = j0 + jg - i0 > 0 ? j0 + jg - i0 : 0;
                        if (jg >= nk) { /* keys past the tile: zero in pt and dst; nothing to add */
                            break;
                        }
                        for (int c0 = 0; c0 < HS; c0 += PC) {
                            keys_tile(dva, pt, doh + (size_t)i0 * HS, ra, nr, HS, jg, c0);
                            keys_tile(dka, dst, qh + (size_t)i0 * HS, ra, nr, HS, jg, c0);
                        }
                    }
                    /* dQ rows += dS K over the keys each group of rows sees */
                    memset(dqa, 0, (size_t)BR * HS * sizeof *dqa);
                    for (int r0 = 0; r0 < nr; r0 += PR) {
                        const int last = i0 + r0 + PR - 1, nj = last - j0 + 1 < nk ? last - j0 + 1 : nk;
                        for (int c0 = 0; c0 < HS; c0 += PC) pv_tile(dqa, NULL, dst, kt, nj, HS, r0, c0);
                    }
                    for (int r = 0; r < nr; r++)
                        for (int c0 = 0; c0 < HS; c0 += 16) {
                            const __mmask16 cm = chunk_mask(c0, HS);
                            float *d = dqh + (size_t)(i0 + r) * HS + c0;
                            _mm512_mask_storeu_ps(d, cm, _mm512_add_ps(_mm512_maskz_loadu_ps(cm, d),
                                                                       _mm512_maskz_loadu_ps(cm, dqa + (size_t)r * HS + c0)));
                        }
                }
                for (int j = 0; j < nk; j++)
                    for (int c0 = 0; c0 < HS; c0 += 16) {
                        const __mmask16 cm = chunk_mask(c0, HS);
                        float *a = dkh + (size_t)(j0 + j) * HS + c0, *b = dvh + (size_t)(j0 + j) * HS + c0;
                        _mm512_mask_storeu_ps(a, cm, _mm512_add_ps(_mm512_maskz_loadu_ps(cm, a),
                                                                   _mm512_maskz_loadu_ps(cm, dka + (size_t)j * HS + c0)));
                        _mm512_mask_storeu_ps(b, cm, _mm512_add_ps(_mm512_maskz_loadu_ps(cm, b),
                                                                   _mm512_maskz_loadu_ps(cm, dva + (size_t)j * HS + c0)));
                    }
            }
        }
        gptc_prof_end(0, 0);
    }
}
