/* attention.h — fused causal flash attention (forward and backward) over head-major Q/K/V, its
 * counter-based dropout mask, the variant dispatch, and the layout conversions to and from the
 * model's (B,T,3C) / (B,T,C) rows.
 *
 * Shapes: q, k, v, o, and their gradients are (B,NH,T,HS) row-major ("head-major"); lse is
 * (B,NH,T): the natural log of each query row's softmax denominator, over the scaled scores
 * s_ij = q_i.k_j / sqrt(HS), j <= i. Nothing of size T x T is ever stored: the forward keeps O and
 * L (B*NH*T*(HS+1) floats) and the backward recomputes the probabilities tile by tile.
 *
 * Dropout (probability `dropout` in [0, 1)) is applied to the normalised probabilities, kept ones
 * scaled by 1/(1-dropout). Whether element (b,h,i,j) is kept is a pure function of (seed, its
 * offset), gptc_flash_keep() below, so the backward regenerates the mask instead of storing it
 * and every variant, thread count and tile size draws the same mask. dropout == 0 never touches
 * the generator and is exactly attention without dropout. */
#ifndef GPTC_KERNELS_ATTENTION_H
#define GPTC_KERNELS_ATTENTION_H

#include <stddef.h>
#include <stdint.h>

/* o (B,NH,T,HS) and lse (B,NH,T) are overwritten; q, k, v (B,NH,T,HS). */
typedef void (*gptc_flash_fwd_fn)(float *o, float *lse, const float *q, const float *k, const float *v, int B,
                                  int NH, int T, int HS, float dropout, uint64_t seed);
/* dq, dk, dv (B,NH,T,HS) ACCUMULATE (+=); do_ (B,NH,T,HS) is dL/do; o and lse are what the forward
 * returned for the same q, k, v, dropout and seed. */
typedef void (*gptc_flash_bwd_fn)(float *dq, float *dk, float *dv, const float *do_, const float *q,
                                  const float *k, const float *v, const float *o, const float *lse, int B,
                                  int NH, int T, int HS, float dropout, uint64_t seed);

/* The entries of the table in use (gptc_kernels_get()->flash_fwd, ...; GPTC_KERNELS=...,flash=LEVEL
 * sets them): kept for tests and tools, the model calls them through its backend. */
gptc_flash_fwd_fn gptc_flash_fwd(void);
gptc_flash_bwd_fn gptc_flash_bwd(void);
const char *gptc_flash_variant(void); /* "ref", "avx2" or "avx512" */
/* Bytes (as gptc_alloc counts them) of the per-thread scratch each variant grows to over a forward
 * and a backward at (T, HS); every thread of the call's team holds this much afterwards (the table's
 * flash_scratch entry is the one in use). */
size_t gptc_flash_scratch_ref(int T, int HS);
size_t gptc_flash_scratch_avx2(int T, int HS);
size_t gptc_flash_scratch_avx512(int T, int HS);
/* the same for the bf16 variants (the table's flash_scratch_bf16) */
size_t gptc_flash_scratch_bf16_ref(int T, int HS);
size_t gptc_flash_scratch_bf16_avx512(int T, int HS);

/* Each variant by name, for tests and benchmarks. The avx2/avx512 ones may only be called when
 * gptc_kernels_level("avx2"/"avx512") is non-NULL (they are compiled for that ISA). */
void gptc_flash_fwd_ref(float *o, float *lse, const float *q, const float *k, const float *v, int B, int NH, int T,
                        int HS, float dropout, uint64_t seed);
void gptc_flash_bwd_ref(float *dq, float *dk, float *dv, const float *do_, const float *q, const float *k,
                        const float *v, const float *o, const float *lse, int B, int NH, int T, int HS,
                        float dropout, uint64_t seed);
void gptc_flash_fwd_avx2(float *o, float *lse, const float *q, const float *k, const float *v, int B, int NH,
                         int T, int HS, float dropout, uint64_t seed);
void gptc_flash_bwd_avx2(float *dq, float *dk, float *dv, const float *do_, const float *q, const float *k,
                         const float *v, const float *o, const float *lse, int B, int NH, int T, int HS,
                         float dropout, uint64_t seed);
void gptc_flash_fwd_avx512(float *o, float *lse, const float *q, const float *k, const float *v, int B, int NH,
                           int T, int HS, float dropout, uint64_t seed);
void gptc_flash_bwd_avx512(float *dq, float *dk, float *dv, const float *do_, const float *q, const float *k,
                           const float *v, const float *o, const float *lse, int B, int NH, int T, int HS,
                           float dropout, uint64_t seed);

/* ---- bf16 mixed precision (--dtype bf16): the same signatures, fp32 in and out, but the products
 * read bf16 copies of their operands and sum in fp32 (like FlashAttention under autocast). Every
 * rounding is to the nearest bf16, ties to even (gptc_bf16_round); bf() below denotes it.
 *
 * Forward, per (b,h): Q, K, V -> bf(Q), bf(K), bf(V). Scores s_ij = (bf(q_i) . bf(k_j)) summed in
 * fp32, times 1/sqrt(HS). Online softmax in fp32 over key tiles of GPTC_FLASH_KEY_TILE keys
 * (tile t = keys 16t .. 16t+15): m_i = the running max after tile t, p~_ij = exp(s_ij - m_i) and
 * l_i (the fp32 sum of the unrounded p~) as in the fp32 flash; the P.V operand is
 * bf(p~_ij * z_ij) (z_ij = 0 or 1/(1-dropout), the fp32 Philox mask, 1 without dropout); O is
 * accumulated in fp32 (rescaled by exp(m_old - m_new) per tile), o_i = acc_i / l_i and
 * lse_i = m_i + log(l_i) in fp32. The tile width is therefore part of the contract.
 *
 * Backward (FlashAttention-2): dO -> bf(dO). P_ij = exp(s_ij - lse_i) recomputed in fp32 from the
 * same bf16 scores; D_i = sum_d bf(dO_id) * O_id in fp32 (the rounded dO, so that D_i equals
 * rowsum(P o dP) for the dP actually used); dP_ij = (bf(dO_i) . bf(v_j)) * z_ij in fp32;
 * dS_ij = P_ij (dP_ij - D_i) in fp32. Then, with fp32 sums:
 *   dV_j += sum_i bf(P_ij z_ij) bf(dO_i)
 *   dQ_i += scale * sum_j bf(dS_ij) bf(k_j),   dK_j += scale * sum_i bf(dS_ij) bf(q_i).
 * Any HS >= 1. The summation order is free, and so is the treatment of subnormals (AVX512_BF16's
 * conversions and vdpbf16ps flush them to zero), so variants agree to the fp32 rounding of the
 * sums, plus the rare bf16 rounding that such a difference flips. */
enum { GPTC_FLASH_KEY_TILE = 16 };
gptc_flash_fwd_fn gptc_flash_fwd_bf16(void); /* the table's flash_fwd_bf16: the avx512 level's, else the
                                                bf16 reference */
gptc_flash_bwd_fn gptc_flash_bwd_bf16(void);
const char *gptc_flash_bf16_variant(void); /* "ref", "avx512" or "avx512bf16" (vdpbf16ps) */
void gptc_flash_fwd_bf16_ref(float *o, float *lse, const float *q, const float *k, const float *v, int B, int NH,
                             int T, int HS, float dropout, uint64_t seed);
void gptc_flash_bwd_bf16_ref(float *dq, float *dk, float *dv, const float *do_, const float *q, const float *k,
                             const float *v, const float *o, const float *lse, int B, int NH, int T, int HS,
                             float dropout, uint64_t seed);
/* Only when gptc_kernels_level("avx512") is non-NULL (fp32 FMAs on bf16-rounded operands: no AVX512_BF16 needed). */
void gptc_flash_fwd_bf16_avx512(float *o, float *lse, const float *q, const float *k, const float *v, int B,
                                int NH, int T, int HS, float dropout, uint64_t seed);
void gptc_flash_bwd_bf16_avx512(float *dq, float *dk, float *dv, const float *do_, const float *q,
                                const float *k, const float *v, const float *o, const float *lse, int B, int NH,
                                int T, int HS, float dropout, uint64_t seed);

/* Only when gptc_kernels_level("avx512") is non-NULL and the CPU has AVX512_BF16 (gptc_cpu()->avx512bf16):
 * the products on vdpbf16ps (kernels/x86_avx512/flash_bf16dp.inc), the avx512 level's entries where
 * gemm_bf16 runs vdpbf16ps too. */
void gptc_flash_fwd_bf16_dp(float *o, float *lse, const float *q, const float *k, const float *v, int B, int NH,
                            int T, int HS, float dropout, uint64_t seed);
void gptc_flash_bwd_bf16_dp(float *dq, float *dk, float *dv, const float *do_, const float *q, const float *k,
                            const float *v, const float *o, const float *lse, int B, int NH, int T, int HS,
                            float dropout, uint64_t seed);
size_t gptc_flash_scratch_bf16_dp(int T, int HS);

/* ---- layout conversions (C = NH*HS): the reference table's qkv_to_heads, heads_to_qkv_grad,
 * heads_to_rows, rows_to_heads. Parallel over (b,t); each output element written once. */
/* q, k, v (B,NH,T,HS) = the three thirds of qkv (B,T,3C), split into heads */
void gptc_qkv_to_heads(float *q, float *k, float *v, const float *qkv, int B, int T, int C, int NH);
/* dqkv (B,T,3C) += dq, dk, dv (B,NH,T,HS) (the backward of gptc_qkv_to_heads) */
void gptc_heads_to_qkv_grad(float *dqkv, const float *dq, const float *dk, const float *dv, int B, int T, int C,
                            int NH);
/* out (B,T,C) = o (B,NH,T,HS), heads side by side (overwrites) */
void gptc_heads_to_rows(float *out, const float *o, int B, int T, int C, int NH);
/* the same, each value rounded to bf16 (kernels.h heads_to_rows_bf16) */
void gptc_heads_to_rows_bf16(uint16_t *out, const float *o, int B, int T, int C, int NH);
/* dheads (B,NH,T,HS) = drows (B,T,C): the backward of gptc_heads_to_rows. It OVERWRITES: its output
 * is the do_ input of the flash backward, a fresh buffer, not a gradient that others add to. */
void gptc_rows_to_heads(float *dheads, const float *drows, int B, int T, int C, int NH);

/* ---- the dropout mask: Philox4x32-10 (kernels/philox.h, shared with the CUDA kernels so that the
 * GPU draws the same bits): gptc_philox4x32, gptc_flash_threshold, gptc_flash_keep4, gptc_flash_keep. */
#include "kernels/philox.h"

#endif
