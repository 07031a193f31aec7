/* flash_ref.c — the reference fused causal flash attention (plain loops over query tiles x key tiles
 * with an online softmax) in fp32 and in bf16 mixed precision (one implementation, a `bf16` flag
 * adding the rounding points), the entries in use (read from the kernel table), and the reference
 * (B,T,3C) <-> (B,NH,T,HS) conversions.
 * See kernels/attention.h for the contracts. */
#include "kernels/attention.h"
#include "kernels/kernels.h"
#include "core/core.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { BR = 64, BC = GPTC_FLASH_KEY_TILE }; /* query rows per forward task, keys per tile */

/* per-thread scratch, grown on the first call and reused: nothing is allocated in a training step */
static _Thread_local gptc_workspace tl_rows, tl_tiles;
static _Thread_local gptc_workspace tl_acc, tl_bf16;

/* dst (rows,HS) = x (rows,HS) rounded to bf16: the bf16 operand copies of one head */
static void round_rows(float *dst, const float *x, int rows, int HS) {
    for (size_t e = 0; e < (size_t)rows * HS; e++) dst[e] = gptc_bf16_round(x[e]);
}

size_t gptc_flash_scratch_ref(int T, int HS) {
    /* tl_acc: the forward's (BR,HS) accumulator; tl_rows: the backward's D (T); tl_tiles: its dk, dv tiles */
    return gptc_alloc_block_bytes(sizeof(float) * (size_t)BR * HS) + gptc_alloc_block_bytes(sizeof(float) * (size_t)T) +
           gptc_alloc_block_bytes(sizeof(float) * 2 * (size_t)BC * HS);
}

size_t gptc_flash_scratch_bf16_ref(int T, int HS) {
    /* and tl_bf16: the rounded operands, (3,T,HS) in the forward, (4,T,HS) in the backward */
    return gptc_flash_scratch_ref(T, HS) + gptc_alloc_block_bytes(sizeof(float) * 4 * (size_t)T * HS);
}

static float dotf(const float *a, const float *b, int n) {
    float s = 0;
    for (int i = 0; i < n; i++) s += a[i] * b[i];
    return s;
}

/* The dropout factor of keys j0..j0+BC-1 of one row: 0 (dropped) or inv_keep, into z[0..BC). */
static void dropout_factors(float *z, uint64_t seed, uint64_t row, int j0, uint32_t thr, float inv_keep) {
    for (int g = 0; g < BC / 4; g++) {
        unsigned bits = gptc_flash_keep4(seed, row, (uint32_t)(j0 / 4 + g), thr);
        for (int n = 0; n < 4; n++) z[4 * g + n] = (bits >> n) & 1u ? inv_keep : 0.0f;
    }
}

/* The forward of both contracts; bf16: q, k, v rows 0..i1 of the head are read through rounded copies
 * (per-thread (3,i1,HS) scratch) and the P.V operand p~ * z is rounded. */
static void flash_fwd(float *o, float *lse, const float *q, const float *k, const float *v, int B, int NH, int T,
                      int HS, float dropout, uint64_t seed, int bf16) {
    GPTC_ASSERT(dropout >= 0.0f && dropout < 1.0f);
    const float scale = 1.0f / sqrtf((float)HS), inv_keep = 1.0f / (1.0f - dropout);
    const uint32_t thr = gptc_flash_threshold(dropout);
    const int ntiles = (T + BR - 1) / BR;
    const long ntasks = (long)B * NH * ntiles;
#pragma omp parallel
    {
        float *acc = gptc_workspace_get(&tl_acc, (size_t)BR * HS);
        float *rq = bf16 ? gptc_workspace_get(&tl_bf16, 3 * (size_t)T * HS) : NULL;
        float m[BR], l[BR], s[BC], z[BC];
        /* each task writes its own rows of o and lse in a fixed order: thread-count independent */
#pragma omp for schedule(dynamic, 1)
        for (long task = 0; task < ntasks; task++) {
            size_t bh = (size_t)(task / ntiles);
            int i0 = (int)(task % ntiles) * BR, i1 = i0 + BR < T ? i0 + BR : T;
            const float *qh = q + bh * T * HS, *kh = k + bh * T * HS, *vh = v + bh * T * HS;
            if (bf16) {
                float *rk = rq + (size_t)T * HS, *rv = rk + (size_t)T * HS;
                round_rows(rq, qh, i1, HS), round_rows(rk, kh, i1, HS), round_rows(rv, vh, i1, HS);
                qh = rq, kh = rk, vh = rv;
            }
            for (int r = 0; r < i1 - i0; r++) m[r] = -INFINITY, l[r] = 0;
            memset(acc, 0, (size_t)BR * HS * sizeof *acc);
            for (int j0 = 0; j0 < i1; j0 += BC) {
                int j1 = j0 + BC < i1 ? j0 + BC : i1;
                for (int i = i0 > j0 ? i0 : j0; i < i1; i++) {
                    int jn = j1 < i + 1 ? j1 : i + 1, r = i - i0;
                    float mb = -INFINITY;
                    for (int j = j0; j < jn; j++) {
                        s[j - j0] = dotf(qh + (size_t)i * HS, kh + (size_t)j * HS, HS) * scale;
                        if (s[j - j0] > mb) mb = s[j - j0];
                    }
                    float mnew = m[r] > mb ? m[r] : mb, corr = expf(m[r] - mnew), sum = 0;
                    if (dropout > 0) dropout_factors(z, seed, bh * T + i, j0, thr, inv_keep);
                    float *a = acc + (size_t)r * HS;
                    for (int d = 0; d < HS; d++) a[d] *= corr;
                    for (int j = j0; j < jn; j++) {
                        float p = expf(s[j - j0] - mnew);
                        sum += p;
                        if (dropout > 0) p *= z[j - j0];
                        if (bf16) p = gptc_bf16_round(p);
                        const float *vj = vh + (size_t)j * HS;
                        for (int d = 0; d < HS; d++) a[d] += p * vj[d];
                    }
                    l[r] = l[r] * corr + sum;
                    m[r] = mnew;
                }
            }
            for (int i = i0; i < i1; i++) {
                int r = i - i0;
                float inv = 1.0f / l[r], *oi = o + (bh * T + i) * HS;
                for (int d = 0; d < HS; d++) oi[d] = acc[(size_t)r * HS + d] * inv;
                lse[bh * T + i] = m[r] + logf(l[r]);
            }
        }
    }
}

/* FlashAttention-2 backward: per (b,h), key tiles outer (their dk, dv accumulate in a tile buffer),
 * query rows inner; P is recomputed from lse, and D_i = rowsum(dO_i * O_i) replaces rowsum(P dP). */
static void flash_bwd(float *dq, float *dk, float *dv, const float *do_, const float *q, const float *k,
                      const float *v, const float *o, const float *lse, int B, int NH, int T, int HS, float dropout,
                      uint64_t seed, int bf16) {
    GPTC_ASSERT(dropout >= 0.0f && dropout < 1.0f);
    const float scale = 1.0f / sqrtf((float)HS), inv_keep = 1.0f / (1.0f - dropout);
    const uint32_t thr = gptc_flash_threshold(dropout);
#pragma omp parallel
    {
        float *D = gptc_workspace_get(&tl_rows, (size_t)T);
        float *dkt = gptc_workspace_get(&tl_tiles, 2 * (size_t)BC * HS), *dvt = dkt + (size_t)BC * HS;
        float *rq = bf16 ? gptc_workspace_get(&tl_bf16, 4 * (size_t)T * HS) : NULL; /* (4,T,HS) */
        float z[BC];
#pragma omp for schedule(dynamic, 1)
        for (long bhl = 0; bhl < (long)B * NH; bhl++) {
            size_t bh = (size_t)bhl, off = bh * T * HS;
            const float *qh = q + off, *kh = k + off, *vh = v + off, *doh = do_ + off, *L = lse + bh * T;
            float *dqh = dq + off, *dkh = dk + off, *dvh = dv + off;
            if (bf16) {
                float *rk = rq + (size_t)T * HS, *rv = rk + (size_t)T * HS, *rdo = rv + (size_t)T * HS;
                round_rows(rq, qh, T, HS), round_rows(rk, kh, T, HS), round_rows(rv, vh, T, HS);
                round_rows(rdo, doh, T, HS);
                qh = rq, kh = rk, vh = rv, doh = rdo;
            }
            for (int i = 0; i < T; i++) D[i] = dotf(doh + (size_t)i * HS, o + off + (size_t)i * HS, HS);
            for (int j0 = 0; j0 < T; j0 += BC) {
                int j1 = j0 + BC < T ? j0 + BC : T;
                memset(dkt, 0, (size_t)BC * HS * sizeof *dkt);
                memset(dvt, 0, (size_t)BC * HS * sizeof *dvt);
                for (int i = j0; i < T; i++) {
                    int jn = j1 < i + 1 ? j1 : i + 1;
                    const float *qi = qh + (size_t)i * HS, *doi = doh + (size_t)i * HS;
                    float *dqi = dqh + (size_t)i * HS;
                    if (dropout > 0) dropout_factors(z, seed, bh * T + i, j0, thr, inv_keep);
                    for (int j = j0; j < jn; j++) {
                        const float *kj = kh + (size_t)j * HS, *vj = vh + (size_t)j * HS;
                        float p = expf(dotf(qi, kj, HS) * scale - L[i]);
                        float zj = dropout > 0 ? z[j - j0] : 1.0f;
                        float dp = dotf(doi, vj, HS) * zj; /* dL/dP_ij */
                        float pz = p * zj, ds = p * (dp - D[i]);
                        if (bf16) pz = gptc_bf16_round(pz), ds = gptc_bf16_round(ds);
                        ds *= scale;
                        float *dkj = dkt + (size_t)(j - j0) * HS, *dvj = dvt + (size_t)(j - j0) * HS;
                        for (int d = 0; d < HS; d++) {
                            dvj[d] += pz * doi[d];
                            dkj[d] += ds * qi[d];
                            dqi[d] += ds * kj[d];
                        }
                    }
                }
                for (int j = j0; j < j1; j++)
                    for (int d = 0; d < HS; d++) {
                        dkh[(size_t)j * HS + d] += dkt[(size_t)(j - j0) * HS + d];
                        dvh[(size_t)j * HS + d] += dvt[(size_t)(j - j0) * HS + d];
                    }
            }
        }
    }
}

void gptc_flash_fwd_ref(float *o, float *lse, const float *q, const float *k, const float *v, int B, int NH, int T,
                        int HS, float dropout, uint64_t seed) {
    flash_fwd(o, lse, q, k, v, B, NH, T, HS, dropout, seed, 0);
}
void gptc_flash_bwd_ref(float *dq, float *dk, float *dv, const float *do_, const float *q, const float *k,
                        const float *v, const float *o, const float *lse, int B, int NH, int T, int HS,
                        float dropout, uint64_t seed) {
    flash_bwd(dq, dk, dv, do_, q, k, v, o, lse, B, NH, T, HS, dropout, seed, 0);
}
void gptc_flash_fwd_bf16_ref(float *o, float *lse, const float *q, const float *k, const float *v, int B, int NH,
                             int T, int HS, float dropout, uint64_t seed) {
    flash_fwd(o, lse, q, k, v, B, NH, T, HS, dropout, seed, 1);
}
void gptc_flash_bwd_bf16_ref(float *dq, float *dk, float *dv, const float *do_, const float *q, const float *k,
                             const float *v, const float *o, const float *lse, int B, int NH, int T, int HS,
                             float dropout, uint64_t seed) {
    flash_bwd(dq, dk, dv, do_, q, k, v, o, lse, B, NH, T, HS, dropout, seed, 1);
}

/* ---- the table's entries in use (kernels.h: each level's overlay sets them; nothing is chosen here) */
gptc_flash_fwd_fn gptc_flash_fwd(void) { return gptc_kernels_get()->flash_fwd; }
gptc_flash_bwd_fn gptc_flash_bwd(void) { return gptc_kernels_get()->flash_bwd; }
const char *gptc_flash_variant(void) {
    const gptc_kernels *k = gptc_kernels_get();
    for (int i = 0; i < gptc_kernel_nops; i++)
        if (gptc_kernel_ops[i].offset == offsetof(gptc_kernels, flash_fwd)) return gptc_kernels_op_variant(k, i);
    return "ref";
}
gptc_flash_fwd_fn gptc_flash_fwd_bf16(void) { return gptc_kernels_get()->flash_fwd_bf16; }
gptc_flash_bwd_fn gptc_flash_bwd_bf16(void) { return gptc_kernels_get()->flash_bwd_bf16; }
const char *gptc_flash_bf16_variant(void) {
#if defined(__x86_64__) || defined(__i386__) /* the AVX512_BF16 kernel is built for an x86 target only (Makefile) */
    if (gptc_kernels_get()->flash_fwd_bf16 == gptc_flash_fwd_bf16_avx512) return "avx512";
    if (gptc_kernels_get()->flash_fwd_bf16 == gptc_flash_fwd_bf16_dp) return "avx512bf16";
#endif
    return "ref";
}

/* ---- layout conversions */
void gptc_qkv_to_heads(float *q, float *k, float *v, const float *qkv, int B, int T, int C, int NH) {
    int HS = C / NH;
#pragma omp parallel for collapse(2) schedule(static)
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            const float *row = qkv + ((size_t)b * T + t) * 3 * C;
            for (int h = 0; h < NH; h++) {
                size_t dst = (((size_t)b * NH + h) * T + t) * HS;
                memcpy(q + dst, row + h * HS, (size_t)HS * sizeof *q);
                memcpy(k + dst, row + C + h * HS, (size_t)HS * sizeof *k);
                memcpy(v + dst, row + 2 * C + h * HS, (size_t)HS * sizeof *v);
            }
        }
}

void gptc_heads_to_qkv_grad(float *dqkv, const float *dq, const float *dk, const float *dv, int B, int T, int C,
                            int NH) {
    int HS = C / NH;
#pragma omp parallel for collapse(2) schedule(static)
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            float *row = dqkv + ((size_t)b * T + t) * 3 * C;
            for (int h = 0; h < NH; h++) {
                size_t src = (((size_t)b * NH + h) * T + t) * HS;
                for (int d = 0; d < HS; d++) {
                    row[h * HS + d] += dq[src + d];
                    row[C + h * HS + d] += dk[src + d];
                    row[2 * C + h * HS + d] += dv[src + d];
                }
            }
        }
}

void gptc_heads_to_rows(float *out, const float *o, int B, int T, int C, int NH) {
    int HS = C / NH;
#pragma omp parallel for collapse(2) schedule(static)
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            for (int h = 0; h < NH; h++)
                memcpy(out + ((size_t)b * T + t) * C + h * HS, o + (((size_t)b * NH + h) * T + t) * HS,
                       (size_t)HS * sizeof *out);
}

void gptc_heads_to_rows_bf16(uint16_t *out, const float *o, int B, int T, int C, int NH) {
    int HS = C / NH;
#pragma omp parallel for collapse(2) schedule(static)
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            for (int h = 0; h < NH; h++) {
                uint16_t *dst = out + ((size_t)b * T + t) * C + h * HS;
                const float *src = o + (((size_t)b * NH + h) * T + t) * HS;
                for (int d = 0; d < HS; d++) dst[d] = gptc_f32_to_bf16(src[d]);
            }
}

void gptc_rows_to_heads(float *dheads, const float *drows, int B, int T, int C, int NH) {
    int HS = C / NH;
#pragma omp parallel for collapse(2) schedule(static)
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            for (int h = 0; h < NH; h++)
                memcpy(dheads + (((size_t)b * NH + h) * T + t) * HS, drows + ((size_t)b * T + t) * C + h * HS,
                       (size_t)HS * sizeof *dheads);
}
