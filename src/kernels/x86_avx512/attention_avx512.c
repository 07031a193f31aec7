/* attention_avx512.c — AVX-512 fused causal flash attention, fp32 and bf16 mixed precision: tiles of
 * 64 query rows x 64 keys with the query rows in the vector lanes (each head's rows transposed once),
 * so the scores and their gradients are register-tiled products and the online softmax is lane-wise;
 * every product runs in FMA register tiles (8 keys x 32 rows, 4 rows x 64 columns), any HS through
 * masked tails. The bf16 entries are the same kernels with the bf16 contract's roundings
 * (kernels/attention.h) applied where their operands are made: fp32 FMAs on bf16-rounded values,
 * exact products, as gemm_bf16 does on cores where vdpbf16ps is not faster. Same contracts and
 * dropout mask as the reference in kernels/ref/flash_ref.c; the summation order differs, so results
 * agree to rounding (and, in bf16, to the rare rounding such a difference flips), not bits. */
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

/* the avx512 level's flash entries, fp32 and bf16 */
void gptc_avx512_overlay_attention(gptc_kernels *k) {
    k->flash_fwd = gptc_flash_fwd_avx512;
    k->flash_bwd = gptc_flash_bwd_avx512;
    k->flash_scratch = gptc_flash_scratch_avx512;
    k->flash_fwd_bf16 = gptc_flash_fwd_bf16_avx512;
    k->flash_bwd_bf16 = gptc_flash_bwd_bf16_avx512;
    k->flash_scratch_bf16 = gptc_flash_scratch_bf16_avx512;
}

/* per-thread scratch, grown on the first call and reused: nothing is allocated in a training step */
static _Thread_local gptc_workspace tl_tiles;

/* Tiles. The forward's task is BR (attention_avx512.h) query rows; keys come FK at a time. */
enum { FK = 64 };              /* keys per tile */
enum { SK = 8, SR = 32 };      /* S^T register tile: 8 keys x 32 rows (16 accumulators) */
enum { PR = 4, PC = 64 };      /* row-major register tile: 4 rows x 64 columns of HS (16 accumulators) */
enum { SUB = GPTC_FLASH_KEY_TILE }; /* the bf16 contract's softmax tile: keys per running-max update */
_Static_assert((int)FK % (int)SUB == 0 && (int)FK == (int)BR, "a key tile is whole softmax tiles; key and row tiles align");

#define INLINE static inline __attribute__((always_inline))

/* x rounded to the nearest bf16 (ties to even) and back: gptc_bf16_round lane-wise (NaN kept, quiet) */
INLINE __m512 round_bf16(__m512 x) {
    const __m512i u = _mm512_castps_si512(x), lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
    __m512i r = _mm512_and_si512(_mm512_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0x7fff)), lsb),
                                 _mm512_set1_epi32((int)0xffff0000u));
    r = _mm512_mask_mov_epi32(r, _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q),
                              _mm512_and_si512(_mm512_or_si512(u, _mm512_set1_epi32(0x00400000)),
                                               _mm512_set1_epi32((int)0xffff0000u)));
    return _mm512_castsi512_ps(r);
}
INLINE __m512 maybe_round(int bf16, __m512 x) { return bf16 ? round_bf16(x) : x; }

/* floats of the forward's per-thread scratch: Qt (HS,BR), S^T/P^T (FK,BR), padded (bf16: rounded)
 * key and value tiles (FK,HS each), O's accumulator (BR,HS), the rows' m, l and correction (3 x BR)
 * and the bf16 softmax tiles' factors (FK/SUB x BR) */
static size_t fwd_scratch_floats(int HS) {
    return (size_t)HS * BR + (size_t)FK * BR + 3 * (size_t)FK * HS + 3 * (size_t)BR + (size_t)(FK / SUB) * BR;
}

/* floats of the backward's per-thread scratch at (T, HS): Qt and dOt (HS,Tp), D and L (Tp), P^T and
 * dS^T (FK,BR), dK, dV, the padded K and V tiles (FK,HS each) and dQ's block (BR,HS); bf16 also the
 * head's rounded Q and dO rows (Tp,HS each); Tp = T rounded up to BR */
static size_t bwd_scratch_floats(int T, int HS, int bf16) {
    const size_t Tp = (size_t)(T + BR - 1) / BR * BR;
    return (bf16 ? 4 : 2) * (size_t)HS * Tp + 2 * Tp + 2 * (size_t)FK * BR + 4 * (size_t)FK * HS + (size_t)BR * HS;
}

size_t gptc_flash_scratch_avx512(int T, int HS) {
    size_t fwd = fwd_scratch_floats(HS), bwd = bwd_scratch_floats(T, HS, 0);
    return gptc_alloc_block_bytes(sizeof(float) * (fwd > bwd ? fwd : bwd));
}

size_t gptc_flash_scratch_bf16_avx512(int T, int HS) {
    size_t fwd = fwd_scratch_floats(HS), bwd = bwd_scratch_floats(T, HS, 1);
    return gptc_alloc_block_bytes(sizeof(float) * (fwd > bwd ? fwd : bwd));
}

/* xt (HS,ld) = rows 0..n-1 of x (rows of HS) transposed (bf16: each value rounded first), times
 * scale; columns n..ld-1 (ld a multiple of 16) zero */
INLINE void pack_rows_t(int bf16, float *xt, int ld, const float *x, int n, int HS, float scale) {
    const __m512 vs = _mm512_set1_ps(scale);
    for (int r0 = 0; r0 < ld; r0 += 16)
        for (int d0 = 0; d0 < HS; d0 += 16) {
            const __mmask16 dm = chunk_mask(d0, HS);
            __m512 t[16];
            for (int i = 0; i < 16; i++)
                t[i] = r0 + i < n ? _mm512_mul_ps(maybe_round(bf16, _mm512_maskz_loadu_ps(dm, x + (size_t)(r0 + i) * HS + d0)), vs)
                                  : _mm512_setzero_ps();
            transpose16(t);
            for (int j = 0; j < 16 && d0 + j < HS; j++) _mm512_store_ps(xt + (size_t)(d0 + j) * ld + r0, t[j]);
        }
}

/* dst (rows,HS) = x's rows 0..n-1 rounded to bf16, rows n..rows-1 zero */
static void rows_rounded(float *dst, const float *x, int n, int rows, int HS) {
    for (int r = 0; r < rows; r++)
        for (int c0 = 0; c0 < HS; c0 += 16) {
            const __mmask16 cm = chunk_mask(c0, HS);
            _mm512_mask_storeu_ps(dst + (size_t)r * HS + c0, cm,
                                  r < n ? round_bf16(_mm512_maskz_loadu_ps(cm, x + (size_t)r * HS + c0)) : _mm512_setzero_ps());
        }
}

/* The key (or value) tile's rows as the products read them: x itself, or (bf16, or a ragged tile) a
 * copy in pad, rounded in bf16, zero past n up to whole register tiles */
INLINE const float *tile_rows(int bf16, float *pad, const float *x, int n, int HS) {
    const int n8 = (n + SK - 1) / SK * SK;
    if (!bf16 && n8 == n) return x;
    if (bf16) rows_rounded(pad, x, n, n8, HS);
    else {
        memcpy(pad, x, (size_t)n * HS * sizeof *pad);
        memset(pad + (size_t)n * HS, 0, (size_t)(n8 - n) * HS * sizeof *pad);
    }
    return pad;
}

/* st[jj*BR + r] = sum_d kt[jj*HS + d] * qt[d*ldq + r] for keys jj < SK, rows r0..r0+SR-1 */
INLINE void scores_tile(float *st, const float *kt, const float *qt, int ldq, int HS, int r0) {
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

/* S^T (FK,BR) of keys kt (nk8 rows, a multiple of SK) against the rows in qt (ldq) of the block at
 * i0, the register tiles wholly above the diagonal (key j0+jj > every row) skipped: never read */
INLINE void scores(float *st, const float *kt, const float *qt, int ldq, int HS, int i0, int j0, int nk8) {
    for (int jj = 0; jj < nk8; jj += SK)
        for (int r0 = 0; r0 < BR; r0 += SR)
            if (j0 + jj <= i0 + r0 + SR - 1) scores_tile(st + (size_t)jj * BR, kt + (size_t)jj * HS, qt, ldq, HS, r0);
}

/* acc rows r0..r0+PR-1, columns c0..c0+PC-1 (clipped to HS) = acc * corr[r] (corr NULL: 1) +
 * sum_{j < nj} pt[j*BR + r] x[j*HS ..]: the forward's O += P V, the backward's dQ += dS K */
INLINE void rows_tile(float *acc, const float *corr, const float *pt, const float *x, int nj, int HS, int r0, int c0) {
    __mmask16 cm[PC / 16];
    for (int z = 0; z < PC / 16; z++) cm[z] = c0 + 16 * z < HS ? chunk_mask(c0 + 16 * z, HS) : 0;
    __m512 o[PR][PC / 16];
    for (int r = 0; r < PR; r++) {
        const __m512 c = _mm512_set1_ps(corr ? corr[r0 + r] : 1.0f);
        for (int z = 0; z < PC / 16; z++)
            o[r][z] = _mm512_mul_ps(_mm512_maskz_loadu_ps(cm[z], acc + (size_t)(r0 + r) * HS + c0 + 16 * z), c);
    }
    for (int j = 0; j < nj; j++) {
        __m512 xz[PC / 16];
        for (int z = 0; z < PC / 16; z++) xz[z] = _mm512_maskz_loadu_ps(cm[z], x + (size_t)j * HS + c0 + 16 * z);
        for (int r = 0; r < PR; r++) {
            const __m512 pb = _mm512_set1_ps(pt[(size_t)j * BR + r0 + r]);
            for (int z = 0; z < PC / 16; z++) o[r][z] = _mm512_fmadd_ps(pb, xz[z], o[r][z]);
        }
    }
    for (int r = 0; r < PR; r++)
        for (int z = 0; z < PC / 16; z++) _mm512_mask_storeu_ps(acc + (size_t)(r0 + r) * HS + c0 + 16 * z, cm[z], o[r][z]);
}

/* acc rows j0..j0+PR-1 (keys; stride HS), columns c0..c0+PC-1 (clipped to HS) += sum_{r in [ra, nr)}
 * pt[j*BR + r] x[r*HS ..]: the backward's dV += P^T dO and dK += dS^T Q */
INLINE void keys_tile(float *acc, const float *pt, const float *x, int ra, int nr, int HS, int j0, int c0) {
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

/* y (rows x HS, stride HS) += x (same shape) */
static void add_rows(float *y, const float *x, int rows, int HS) {
    for (int r = 0; r < rows; r++)
        for (int c0 = 0; c0 < HS; c0 += 16) {
            const __mmask16 cm = chunk_mask(c0, HS);
            float *d = y + (size_t)r * HS + c0;
            _mm512_mask_storeu_ps(d, cm, _mm512_add_ps(_mm512_maskz_loadu_ps(cm, d), _mm512_maskz_loadu_ps(cm, x + (size_t)r * HS + c0)));
        }
}

static const int k_lane[16] __attribute__((aligned(64))) = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};

/* One key tile's online softmax over the task's rows, in place in st (FK,BR): keys j0..j0+nk-1 against
 * rows i0..i0+BR-1 (key j valid for row i when j <= i). Updates m and l, writes each row's rescaling
 * factor for the accumulator to corr and leaves the tile's probabilities in st (0 where invalid):
 * exp(s - m) for fp32; for bf16, the contract's running max m_t after each SUB keys gives
 * p~ = exp(s - m_t) and l's updates, and fac (FK/SUB, BR) gets exp(m_t - m) for softmax_finish. */
INLINE void softmax_tile(int bf16, float *st, float *m, float *l, float *corr, float *fac, int i0, int j0, int nk) {
    const __m512i lane = _mm512_load_si512(k_lane);
    const __m512 ninf = _mm512_set1_ps(-INFINITY);
    for (int r0 = 0; r0 < BR; r0 += 16) {
        const __m512i row = _mm512_add_epi32(lane, _mm512_set1_epi32(i0 + r0));
        const int kmax = i0 + r0 + 15 - j0 + 1 < nk ? i0 + r0 + 15 - j0 + 1 : nk; /* keys any of these rows sees */
        const __m512 mold = _mm512_load_ps(m + r0);
        __m512 mcur = mold, lcur = _mm512_load_ps(l + r0), mt[FK / SUB];
        /* fp32: one softmax tile of kmax keys; bf16: tiles of SUB keys */
        const int step = bf16 ? SUB : kmax > 0 ? kmax : 1;
        for (int t0 = 0, t = 0; t0 < kmax; t0 += step, t++) {
            const int t1 = t0 + step < kmax ? t0 + step : kmax;
            __m512 mx = ninf;
            for (int j = t0; j < t1; j++) {
                const __mmask16 valid = _mm512_cmpge_epi32_mask(row, _mm512_set1_epi32(j0 + j));
                mx = _mm512_mask_max_ps(mx, valid, mx, _mm512_load_ps(st + (size_t)j * BR + r0));
            }
            const __m512 mnew = _mm512_max_ps(mcur, mx);
            /* a row's first tile: mcur = -inf, the factor 0 (its acc and l are 0 anyway) */
            const __m512 c = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(mcur, ninf, _CMP_NEQ_OQ), exp16(_mm512_sub_ps(mcur, mnew)));
            __m512 sum = _mm512_setzero_ps();
            for (int j = t0; j < t1; j++) {
                const __mmask16 valid = _mm512_cmpge_epi32_mask(row, _mm512_set1_epi32(j0 + j));
                const __m512 p = _mm512_maskz_mov_ps(valid, exp16(_mm512_sub_ps(_mm512_load_ps(st + (size_t)j * BR + r0), mnew)));
                _mm512_store_ps(st + (size_t)j * BR + r0, p);
                sum = _mm512_add_ps(sum, p);
            }
            lcur = _mm512_fmadd_ps(lcur, c, sum);
            mcur = mnew;
            if (bf16) mt[t] = mnew;
        }
        for (int j = kmax; j < nk; j++) _mm512_store_ps(st + (size_t)j * BR + r0, _mm512_setzero_ps());
        if (bf16) /* softmax tiles past kmax hold zeros: factor 1 */
            for (int t = 0; t * SUB < nk; t++)
                _mm512_store_ps(fac + (size_t)t * BR + r0, t * SUB < kmax ? exp16(_mm512_sub_ps(mt[t], mcur)) : _mm512_set1_ps(1.0f));
        _mm512_store_ps(l + r0, lcur);
        _mm512_store_ps(m + r0, mcur);
        _mm512_store_ps(corr + r0, _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(mold, ninf, _CMP_NEQ_OQ), exp16(_mm512_sub_ps(mold, mcur))));
    }
}

/* bf16: the P.V operand bf(p~ z) (st holds p~ z), times its softmax tile's exp(m_t - m) so the whole
 * key tile accumulates at the final max (the contract's rescale per SUB keys, reassociated) */
static void softmax_finish(float *st, const float *fac, int nk) {
    for (int j = 0; j < nk; j++)
        for (int r0 = 0; r0 < BR; r0 += 16) {
            float *p = st + (size_t)j * BR + r0;
            _mm512_store_ps(p, _mm512_mul_ps(round_bf16(_mm512_load_ps(p)), _mm512_load_ps(fac + (size_t)(j / SUB) * BR + r0)));
        }
}

INLINE void flash_fwd_any(int bf16, float *o, float *lse, const float *q, const float *k, const float *v, int B, int NH,
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
        float *st = qt + (size_t)HS * BR, *kpad = st + (size_t)FK * BR, *vpad = kpad + (size_t)FK * HS;
        float *acc = vpad + (size_t)FK * HS, *m = acc + (size_t)BR * HS, *l = m + BR, *corr = l + BR, *fac = corr + BR;
#pragma omp for schedule(dynamic, 1) nowait /* the region's end is the barrier */
        for (long task = 0; task < ntasks; task++) {
            const size_t bh = (size_t)(task / ntiles);
            const int i0 = (int)(task % ntiles) * BR, i1 = i0 + BR < T ? i0 + BR : T, nr = i1 - i0;
            const float *kh = k + bh * T * HS, *vh = v + bh * T * HS;
            pack_rows_t(bf16, qt, BR, q + (bh * T + i0) * HS, nr, HS, scale);
            for (int r = 0; r < BR; r++) m[r] = -INFINITY, l[r] = 0;
            memset(acc, 0, (size_t)BR * HS * sizeof *acc);
            for (int j0 = 0; j0 < i1; j0 += FK) {
                const int nk = i1 - j0 < FK ? i1 - j0 : FK, nk8 = (nk + SK - 1) / SK * SK;
                const float *kt = tile_rows(bf16, kpad, kh + (size_t)j0 * HS, nk, HS);
                const float *vt = bf16 ? tile_rows(bf16, vpad, vh + (size_t)j0 * HS, nk, HS) : vh + (size_t)j0 * HS;
                scores(st, kt, qt, BR, HS, i0, j0, nk8);
                softmax_tile(bf16, st, m, l, corr, fac, i0, j0, nk);
                if (dropout > 0) /* P.V uses the kept probabilities, scaled; l keeps the undropped sum */
                    for (int r = 0; r < nr; r++)
                        for (int g = 0; g < (nk + 3) / 4; g++) {
                            unsigned bits = gptc_flash_keep4(seed, bh * T + i0 + r, (uint32_t)(j0 / 4 + g), thr);
                            for (int n = 0; n < 4 && 4 * g + n < nk; n++)
                                st[(size_t)(4 * g + n) * BR + r] *= (bits >> n) & 1u ? inv_keep : 0.0f;
                        }
                if (bf16) softmax_finish(st, fac, nk);
                for (int r0 = 0; r0 < nr; r0 += PR) {
                    const int last = i0 + r0 + PR - 1, nj = last - j0 + 1 < nk ? last - j0 + 1 : nk;
                    for (int c0 = 0; c0 < HS; c0 += PC) rows_tile(acc, corr, st, vt, nj, HS, r0, c0);
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
 * register tiles over rows of HS. bf16: Q, K, V and dO rounded where they are packed, P z and dS
 * rounded where they are stored for the products (the scale applied after dS's rounding). */
INLINE void flash_bwd_any(int bf16, float *dq, float *dk, float *dv, const float *do_, const float *q, const float *k,
                          const float *v, const float *o, const float *lse, int B, int NH, int T, int HS, float dropout,
                          uint64_t seed) {
    GPTC_ASSERT(dropout >= 0.0f && dropout < 1.0f);
    const float scale = 1.0f / sqrtf((float)HS), inv_keep = 1.0f / (1.0f - dropout);
    const uint32_t thr = gptc_flash_threshold(dropout);
    const int Tp = (T + BR - 1) / BR * BR;
#pragma omp parallel
    {
        gptc_prof_begin(GPTC_PROF_THREAD, "flash_bwd.thread", -1); /* this thread's share, without the wait */
        const __m512i lane = _mm512_load_si512(k_lane);
        /* every part a multiple of 16 floats from a 64-byte aligned start: vector aligned */
        float *qt = gptc_workspace_get(&tl_tiles, bwd_scratch_floats(T, HS, bf16));
        float *dot = qt + (size_t)HS * Tp, *D = dot + (size_t)HS * Tp, *L = D + Tp;
        float *pt = L + Tp, *dst = pt + (size_t)FK * BR, *dka = dst + (size_t)FK * BR, *dva = dka + (size_t)FK * HS;
        float *kpad = dva + (size_t)FK * HS, *vpad = kpad + (size_t)FK * HS, *dqa = vpad + (size_t)FK * HS;
        float *qr = dqa + (size_t)BR * HS, *dor = qr + (size_t)Tp * HS; /* bf16 only */
        GPTC_ASSERT(qt);
#pragma omp for schedule(dynamic, 1) nowait /* the region's end is the barrier */
        for (long bhl = 0; bhl < (long)B * NH; bhl++) {
            const size_t bh = (size_t)bhl, off = bh * T * HS;
            const float *qh = q + off, *kh = k + off, *vh = v + off, *doh = do_ + off;
            float *dqh = dq + off, *dkh = dk + off, *dvh = dv + off;
            pack_rows_t(bf16, qt, Tp, qh, T, HS, scale);
            pack_rows_t(bf16, dot, Tp, doh, T, HS, 1.0f);
            if (bf16) { /* the rows the dK and dV products read, rounded */
                rows_rounded(qr, qh, T, T, HS);
                rows_rounded(dor, doh, T, T, HS);
                qh = qr, doh = dor;
            }
            for (int i = 0; i < Tp; i++) { /* D_i = dO_i . O_i (bf16: the rounded dO) */
                D[i] = i < T ? dot16(doh + (size_t)i * HS, o + off + (size_t)i * HS, HS) : 0.0f;
                L[i] = i < T ? lse[bh * T + i] : 0.0f;
            }
            for (int j0 = 0; j0 < T; j0 += FK) {
                const int nk = T - j0 < FK ? T - j0 : FK, nk8 = (nk + SK - 1) / SK * SK;
                const float *kt = tile_rows(bf16, kpad, kh + (size_t)j0 * HS, nk, HS);
                const float *vt = tile_rows(bf16, vpad, vh + (size_t)j0 * HS, nk, HS);
                memset(dka, 0, 2 * (size_t)FK * HS * sizeof *dka); /* dK and dV of the tile */
                for (int i0 = j0; i0 < T; i0 += BR) {
                    const int nr = T - i0 < BR ? T - i0 : BR;
                    scores(pt, kt, qt + i0, Tp, HS, i0, j0, nk8);  /* S^T, scaled as Qt is */
                    scores(dst, vt, dot + i0, Tp, HS, i0, j0, nk8); /* dP^T */
                    /* P^T z (bf16: rounded) and dS^T = P (z dP - D) (bf16: rounded, then) times scale; 0 where
                     * key > row or row >= T */
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
                            _mm512_store_ps(pj, maybe_round(bf16, pz));
                            _mm512_store_ps(dj, _mm512_mul_ps(maybe_round(bf16, _mm512_mul_ps(p, _mm512_sub_ps(dp, Dr))),
                                                              _mm512_set1_ps(scale)));
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
        gptc_prof_end(0, 0);
    }
}

void gptc_flash_fwd_avx512(float *o, float *lse, const float *q, const float *k, const float *v, int B, int NH,
                           int T, int HS, float dropout, uint64_t seed) {
    flash_fwd_any(0, o, lse, q, k, v, B, NH, T, HS, dropout, seed);
}

void gptc_flash_fwd_bf16_avx512(float *o, float *lse, const float *q, const float *k, const float *v, int B, int NH,
                                int T, int HS, float dropout, uint64_t seed) {
    flash_fwd_any(1, o, lse, q, k, v, B, NH, T, HS, dropout, seed);
}

void gptc_flash_bwd_avx512(float *dq, float *dk, float *dv, const float *do_, const float *q, const float *k,
                           const float *v, const float *o, const float *lse, int B, int NH, int T, int HS,
                           float dropout, uint64_t seed) {
    flash_bwd_any(0, dq, dk, dv, do_, q, k, v, o, lse, B, NH, T, HS, dropout, seed);
}

void gptc_flash_bwd_bf16_avx512(float *dq, float *dk, float *dv, const float *do_, const float *q, const float *k,
                                const float *v, const float *o, const float *lse, int B, int NH, int T, int HS,
                                float dropout, uint64_t seed) {
    flash_bwd_any(1, dq, dk, dv, do_, q, k, v, o, lse, B, NH, T, HS, dropout, seed);
}
