/* attention_bf16_avx512.c — fused causal flash attention in bf16 mixed precision with AVX512_BF16:
 * the products are vdpbf16ps (16 fp32 lanes, each += the dot of a pair of bf16), the softmax and
 * every accumulator fp32. Implements the bf16 contract of kernels/attention.h with the fp32 kernel's
 * tiling (attention_avx512.c: BR query rows per forward task, BC = 16 keys per tile, one zmm of
 * scores per query row; FlashAttention-2 backward with key tiles outer).
 *
 * A "pair" is two bf16 in one 32-bit word (the first in the low half), paired along the reduction
 * dimension of the product that reads it. With HP = ceil(HS/2) and HSP = HS rounded up to 16:
 *   row pairs   xb (rows,HP):  xb[i][p]       = bf(x_i[2p]), bf(x_i[2p+1])   (broadcast for q.k, dO.v)
 *   score tile  kt (HP,16):    kt[p][jj]      = bf(x_j[2p]), bf(x_j[2p+1]), j = j0+jj
 *   key pairs   vt (8,HSP):    vt[jp][d]      = bf(x_j[d]), bf(x_{j+1}[d]), j = j0+2jp  (P.V, dS.K)
 *   row pairs   xp (T/2,HSP):  xp[i/2][d]     = bf(x_i[d]), bf(x_{i+1}[d]), i even      (P^T.dO, dS^T.Q)
 * Odd HS, T and partial tiles pad with zero pairs, so any HS works. Per-thread gptc_workspace
 * scratch; nothing is allocated per call after the first. */
#include "kernels/x86_avx512/attention_avx512.h"
#include "kernels/attention.h"
#include "core/core.h"
#include "core/profile.h"

#include <immintrin.h>
#include <math.h>
#include <string.h>

static _Thread_local gptc_workspace tl_fwd, tl_bwd;

static inline size_t up16(size_t n) { return (n + 15) & ~(size_t)15; }

/* Words (= floats) of each per-thread scratch region, each a multiple of 16 so every region is
 * aligned; one definition for the kernels and gptc_flash_scratch_bf16_avx512. */
#define FWD_SIZES(HS)                                                                                     \
    const size_t n_acc = (size_t)BR * up16((size_t)(HS)), n_qb = up16((size_t)BR * (((HS) + 1) / 2));    \
    const size_t n_kt = (size_t)(((HS) + 1) / 2) * BC, n_vt = (size_t)BC / 2 * up16((size_t)(HS));       \
    const size_t n_tmp = (size_t)BC * (((HS) + 1) / 2)
#define BWD_SIZES(T, HS)                                                                                  \
    const size_t n_D = up16((size_t)(T)), n_rows = up16((size_t)(T) * (((HS) + 1) / 2));                  \
    const size_t n_pairs = (size_t)(((T) + 1) / 2) * up16((size_t)(HS));                                 \
    const size_t n_kt = (size_t)(((HS) + 1) / 2) * BC, n_kv = (size_t)BC / 2 * up16((size_t)(HS));       \
    const size_t n_tmp = (size_t)BC * (((HS) + 1) / 2), n_grad = (size_t)(HS) * BC

size_t gptc_flash_scratch_bf16_avx512(int T, int HS) {
    size_t fwd, bwd;
    {
        FWD_SIZES(HS);
        fwd = n_acc + n_qb + n_kt + n_vt + n_tmp;
    }
    {
        BWD_SIZES(T, HS);
        bwd = n_D + 2 * n_rows + 2 * n_pairs + 2 * n_kt + n_kv + n_tmp + 2 * n_grad;
    }
    return gptc_alloc_block_bytes(sizeof(float) * fwd) + gptc_alloc_block_bytes(sizeof(float) * bwd);
}

/* acc + the pairwise dot of the pair word x (broadcast) with the 16 pairs at tile (64-byte aligned) */
static inline __m512 dp_bcast(__m512 acc, uint32_t x, const uint32_t *tile) {
    return _mm512_dpbf16_ps(acc, (__m512bh)_mm512_set1_epi32((int)x), (__m512bh)_mm512_load_si512(tile));
}

/* 16 pair words from two vectors already in bf16: lane n = lo[n] | hi[n] << 16 */
static inline __m512i pair_bh(__m256bh lo, __m256bh hi) {
    return _mm512_or_si512(_mm512_cvtepu16_epi32((__m256i)lo),
                           _mm512_slli_epi32(_mm512_cvtepu16_epi32((__m256i)hi), 16));
}

/* xb (HP) = the row x (HS) as pairs along its length; an odd HS ends with a zero half */
static void row_pairs(uint32_t *xb, const float *x, int HS) {
    for (int c0 = 0; c0 < HS; c0 += 32) {
        __m512 lo = _mm512_maskz_loadu_ps(chunk_mask(c0, HS), x + c0);
        __m512 hi = c0 + 16 < HS ? _mm512_maskz_loadu_ps(chunk_mask(c0 + 16, HS), x + c0 + 16) : _mm512_setzero_ps();
        int n = (HS - c0 + 1) / 2;
        _mm512_mask_storeu_epi32(xb + c0 / 2, n >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << n) - 1u),
                                 (__m512i)_mm512_cvtne2ps_pbh(hi, lo));
    }
}

/* xp (HSP) = pairs of the rows x0, x1 (HS) element by element; a NULL row reads as zeros */
static void rows_interleave(uint32_t *xp, const float *x0, const float *x1, int HS) {
    for (int c0 = 0; c0 < HS; c0 += 16) {
        __mmask16 m = chunk_mask(c0, HS);
        __m512 a = x0 ? _mm512_maskz_loadu_ps(m, x0 + c0) : _mm512_setzero_ps();
        __m512 b = x1 ? _mm512_maskz_loadu_ps(m, x1 + c0) : _mm512_setzero_ps();
        _mm512_storeu_si512(xp + c0, pair_bh(_mm512_cvtneps_pbh(a), _mm512_cvtneps_pbh(b)));
    }
}

/* kt (HP,16) = the score tile of rows j0..j0+nk-1 of x (T,HS); keys nk..15 zero. tmp: 16*HP words */
static void pack_score_tile(uint32_t *kt, uint32_t *tmp, const float *x, int j0, int nk, int HS) {
    int HP = (HS + 1) / 2;
    for (int jj = 0; jj < nk; jj++) row_pairs(tmp + (size_t)jj * HP, x + (size_t)(j0 + jj) * HS, HS);
    for (int p = 0; p < HP; p++)
        for (int jj = 0; jj < BC; jj++) kt[(size_t)p * BC + jj] = jj < nk ? tmp[(size_t)jj * HP + p] : 0u;
}

/* vt (8,HSP) = the key pairs of rows j0..j0+nk-1 of x (T,HS); missing keys zero */
static void pack_key_pairs(uint32_t *vt, const float *x, int j0, int nk, int HS, int HSP) {
    for (int jp = 0; jp < BC / 2; jp++) {
        const float *x0 = 2 * jp < nk ? x + (size_t)(j0 + 2 * jp) * HS : NULL;
        const float *x1 = 2 * jp + 1 < nk ? x + (size_t)(j0 + 2 * jp + 1) * HS : NULL;
        rows_interleave(vt + (size_t)jp * HSP, x0, x1, HS);
    }
}

/* 16 fp32 sums, lane jj = sum_p xb[p] . kt[p][jj] (xb (HP) row pairs, kt (HP,16) score tile) */
static inline __m512 row_dot_tile(const uint32_t *xb, const uint32_t *kt, int HP) {
    __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps(), a2 = _mm512_setzero_ps(), a3 = _mm512_setzero_ps();
    int p = 0;
    for (; p + 4 <= HP; p += 4) {
        a0 = dp_bcast(a0, xb[p], kt + (size_t)p * BC);
        a1 = dp_bcast(a1, xb[p + 1], kt + (size_t)(p + 1) * BC);
        a2 = dp_bcast(a2, xb[p + 2], kt + (size_t)(p + 2) * BC);
        a3 = dp_bcast(a3, xb[p + 3], kt + (size_t)(p + 3) * BC);
    }
    for (; p < HP; p++) a0 = dp_bcast(a0, xb[p], kt + (size_t)p * BC);
    return _mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3));
}

/* y (HS) = y * c + s * sum_{jp < np} w[jp] . vt[jp] (w: 8 key pairs of weights, vt (8,HSP)) */
static inline void row_axpy_pairs(float *y, float c, float s, const uint32_t *w, const uint32_t *vt, int np,
                                  int HS, int HSP) {
    __m512 vc = _mm512_set1_ps(c), vs = _mm512_set1_ps(s);
    for (int c0 = 0; c0 < HS; c0 += 16) {
        __mmask16 m = chunk_mask(c0, HS);
        __m512 b0 = _mm512_setzero_ps(), b1 = _mm512_setzero_ps();
        int jp = 0;
        for (; jp + 2 <= np; jp += 2) {
            b0 = dp_bcast(b0, w[jp], vt + (size_t)jp * HSP + c0);
            b1 = dp_bcast(b1, w[jp + 1], vt + (size_t)(jp + 1) * HSP + c0);
        }
        if (jp < np) b0 = dp_bcast(b0, w[jp], vt + (size_t)jp * HSP + c0);
        __m512 a = _mm512_mul_ps(_mm512_maskz_loadu_ps(m, y + c0), vc);
        _mm512_mask_storeu_ps(y + c0, m, _mm512_fmadd_ps(_mm512_add_ps(b0, b1), vs, a));
    }
}

/* sum_d bf(a[d]) * b[d] in fp32 (D of the backward: a = dO, b = O) */
static inline float dot_round_a(const float *a, const float *b, int HS) {
    __m512 s = _mm512_setzero_ps();
    for (int c0 = 0; c0 < HS; c0 += 16) {
        __mmask16 m = chunk_mask(c0, HS);
        __m512 ar = _mm512_cvtpbh_ps(_mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(m, a + c0)));
        s = _mm512_fmadd_ps(ar, _mm512_maskz_loadu_ps(m, b + c0), s);
    }
    return _mm512_reduce_add_ps(s);
}

void gptc_flash_fwd_bf16_avx512(float *o, float *lse, const float *q, const float *k, const float *v, int B,
                                int NH, int T, int HS, float dropout, uint64_t seed) {
    GPTC_ASSERT(dropout >= 0.0f && dropout < 1.0f);
    const float scale = 1.0f / sqrtf((float)HS), inv_keep = 1.0f / (1.0f - dropout);
    const uint32_t thr = gptc_flash_threshold(dropout);
    const int ntiles = (T + BR - 1) / BR, HP = (HS + 1) / 2, HSP = (int)up16((size_t)HS);
    const long ntasks = (long)B * NH * ntiles;
    FWD_SIZES(HS);
#pragma omp parallel
    {
        gptc_prof_begin(GPTC_PROF_THREAD, "flash_fwd_bf16.thread", -1); /* this thread's share, without the wait */
        float *acc = gptc_workspace_get(&tl_fwd, n_acc + n_qb + n_kt + n_vt + n_tmp); /* (BR,HS) fp32 */
        uint32_t *qb = (uint32_t *)(acc + n_acc);                                      /* (BR,HP) */
        uint32_t *kt = qb + n_qb, *vt = kt + n_kt, *tmp = vt + n_vt;
        float m[BR], l[BR];
        uint32_t pw[BC / 2];
#pragma omp for schedule(dynamic, 1) nowait /* the region's end is the barrier */
        for (long task = 0; task < ntasks; task++) {
            size_t bh = (size_t)(task / ntiles);
            int i0 = (int)(task % ntiles) * BR, i1 = i0 + BR < T ? i0 + BR : T;
            const float *qh = q + bh * T * HS, *kh = k + bh * T * HS, *vh = v + bh * T * HS;
            for (int i = i0; i < i1; i++) row_pairs(qb + (size_t)(i - i0) * HP, qh + (size_t)i * HS, HS);
            for (int r = 0; r < i1 - i0; r++) m[r] = -INFINITY, l[r] = 0;
            memset(acc, 0, (size_t)BR * HS * sizeof *acc);
            for (int j0 = 0; j0 < i1; j0 += BC) {
                int nk = i1 - j0 < BC ? i1 - j0 : BC;
                pack_score_tile(kt, tmp, kh, j0, nk, HS);
                pack_key_pairs(vt, vh, j0, nk, HS, HSP);
                for (int i = i0 > j0 ? i0 : j0; i < i1; i++) {
                    int nv = i + 1 - j0 < nk ? i + 1 - j0 : nk, r = i - i0;
                    __m512 s = _mm512_mul_ps(row_dot_tile(qb + (size_t)r * HP, kt, HP), _mm512_set1_ps(scale));
                    float corr;
                    __m512 p = online_softmax16(s, nv, &m[r], &l[r], &corr);
                    if (dropout > 0)
                        p = _mm512_maskz_mul_ps(keep16(seed, bh * T + i, j0, thr), p, _mm512_set1_ps(inv_keep));
                    _mm256_storeu_si256((__m256i *)pw, (__m256i)_mm512_cvtneps_pbh(p)); /* bf(p~ z), key pairs */
                    row_axpy_pairs(acc + (size_t)r * HS, corr, 1.0f, pw, vt, (nv + 1) / 2, HS, HSP);
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

void gptc_flash_bwd_bf16_avx512(float *dq, float *dk, float *dv, const float *do_, const float *q,
                                const float *k, const float *v, const float *o, const float *lse, int B, int NH,
                                int T, int HS, float dropout, uint64_t seed) {
    GPTC_ASSERT(dropout >= 0.0f && dropout < 1.0f);
    const float scale = 1.0f / sqrtf((float)HS), inv_keep = 1.0f / (1.0f - dropout);
    const uint32_t thr = gptc_flash_threshold(dropout);
    const int HP = (HS + 1) / 2, HSP = (int)up16((size_t)HS), npairs = (T + 1) / 2;
    BWD_SIZES(T, HS);
#pragma omp parallel
    {
        gptc_prof_begin(GPTC_PROF_THREAD, "flash_bwd_bf16.thread", -1); /* this thread's share, without the wait */
        float *D = gptc_workspace_get(&tl_bwd, n_D + 2 * n_rows + 2 * n_pairs + 2 * n_kt + n_kv + n_tmp + 2 * n_grad);
        /* dkt, dvt (HS,16) fp32: the key tile's dK / sum_i bf(dS) bf(q_i) and dV, transposed */
        float *dkt = D + n_D, *dvt = dkt + n_grad;
        uint32_t *qb = (uint32_t *)(dvt + n_grad), *dob = qb + n_rows; /* (T,HP) row pairs of Q, dO */
        uint32_t *qp = dob + n_rows, *dop = qp + n_pairs;                /* (T/2,HSP) row pairs */
        uint32_t *kt = dop + n_pairs, *vt = kt + n_kt, *kv = vt + n_kt, *tmp = kv + n_kv;
        uint32_t sw[BC / 2];
#pragma omp for schedule(dynamic, 1) nowait /* the region's end is the barrier */
        for (long bhl = 0; bhl < (long)B * NH; bhl++) {
            size_t bh = (size_t)bhl, off = bh * T * HS;
            const float *qh = q + off, *kh = k + off, *vh = v + off, *doh = do_ + off, *L = lse + bh * T;
            float *dqh = dq + off, *dkh = dk + off, *dvh = dv + off;
            for (int i = 0; i < T; i++) {
                row_pairs(qb + (size_t)i * HP, qh + (size_t)i * HS, HS);
                row_pairs(dob + (size_t)i * HP, doh + (size_t)i * HS, HS);
                D[i] = dot_round_a(doh + (size_t)i * HS, o + off + (size_t)i * HS, HS);
            }
            for (int ip = 0; ip < npairs; ip++) {
                int odd = 2 * ip + 1 < T;
                rows_interleave(qp + (size_t)ip * HSP, qh + (size_t)2 * ip * HS,
                                odd ? qh + (size_t)(2 * ip + 1) * HS : NULL, HS);
                rows_interleave(dop + (size_t)ip * HSP, doh + (size_t)2 * ip * HS,
                                odd ? doh + (size_t)(2 * ip + 1) * HS : NULL, HS);
            }
            for (int j0 = 0; j0 < T; j0 += BC) {
                int nk = T - j0 < BC ? T - j0 : BC;
                pack_score_tile(kt, tmp, kh, j0, nk, HS);
                pack_score_tile(vt, tmp, vh, j0, nk, HS);
                pack_key_pairs(kv, kh, j0, nk, HS, HSP);
                memset(dkt, 0, 2 * n_grad * sizeof(float));
                for (int i = j0; i < T; i += 2) { /* rows i, i+1 (j0 and so i even) */
                    __m256bh pb[2], sb[2];        /* bf(P z), bf(dS) of each row, 16 keys */
                    for (int e = 0; e < 2; e++) {
                        int row = i + e;
                        if (row >= T) {
                            pb[e] = sb[e] = _mm512_cvtneps_pbh(_mm512_setzero_ps());
                            continue;
                        }
                        int nv = row + 1 - j0 < nk ? row + 1 - j0 : nk;
                        __mmask16 valid = (__mmask16)((1u << nv) - 1u);
                        __m512 s = row_dot_tile(qb + (size_t)row * HP, kt, HP);
                        __m512 dp = row_dot_tile(dob + (size_t)row * HP, vt, HP);
                        __m512 p = _mm512_maskz_mov_ps(
                            valid, exp16(_mm512_fmsub_ps(s, _mm512_set1_ps(scale), _mm512_set1_ps(L[row]))));
                        __m512 pz = p;
                        if (dropout > 0) {
                            __m512 z =
                                _mm512_maskz_mov_ps(keep16(seed, bh * T + row, j0, thr), _mm512_set1_ps(inv_keep));
                            pz = _mm512_mul_ps(p, z);
                            dp = _mm512_mul_ps(dp, z);
                        }
                        pb[e] = _mm512_cvtneps_pbh(pz);
                        sb[e] = _mm512_cvtneps_pbh(_mm512_mul_ps(p, _mm512_sub_ps(dp, _mm512_set1_ps(D[row]))));
                        /* dq_row += scale * sum_j bf(dS_row,j) bf(k_j) */
                        _mm256_storeu_si256((__m256i *)sw, (__m256i)sb[e]);
                        row_axpy_pairs(dqh + (size_t)row * HS, 1.0f, scale, sw, kv, (nv + 1) / 2, HS, HSP);
                    }
                    /* the tile's dV += P^T dO and dK += dS^T Q over the row pair, pairs along the rows */
                    __m512bh p2 = (__m512bh)pair_bh(pb[0], pb[1]), s2 = (__m512bh)pair_bh(sb[0], sb[1]);
                    const uint32_t *qpi = qp + (size_t)(i / 2) * HSP, *dopi = dop + (size_t)(i / 2) * HSP;
                    for (int d = 0; d < HS; d++) {
                        float *dk_d = dkt + (size_t)d * BC, *dv_d = dvt + (size_t)d * BC;
                        _mm512_store_ps(dv_d, _mm512_dpbf16_ps(_mm512_load_ps(dv_d),
                                                               (__m512bh)_mm512_set1_epi32((int)dopi[d]), p2));
                        _mm512_store_ps(dk_d, _mm512_dpbf16_ps(_mm512_load_ps(dk_d),
                                                               (__m512bh)_mm512_set1_epi32((int)qpi[d]), s2));
                    }
                }
                for (int jj = 0; jj < nk; jj++)
                    for (int d = 0; d < HS; d++) {
                        dkh[(size_t)(j0 + jj) * HS + d] += scale * dkt[(size_t)d * BC + jj];
                        dvh[(size_t)(j0 + jj) * HS + d] += dvt[(size_t)d * BC + jj];
                    }
            }
        }
        gptc_prof_end(0, 0);
    }
}
