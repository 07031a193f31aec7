/* kernels.h — the operator table ("operator mapping"). The model calls k->op(...), never a variant
 * by name. Every entry has a plain reference implementation in kernels/ref/; optimised variants per
 * instruction set override entries at start-up (GPTC_KERNELS=ref|avx2|avx512|amx forces one).
 *
 * Conventions: row-major float arrays; shapes in the comments; backward kernels ACCUMULATE (+=)
 * into every gradient they write, so callers zero gradients once per step (this is what makes
 * gradient accumulation and shared uses of a tensor, e.g. the tied wte, work). */
#ifndef GPTC_KERNELS_H
#define GPTC_KERNELS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The signature of gemm and gemm_bf16 below (the contract is gemm's). */
typedef void (*gptc_gemm_fn)(int transA, int transB, int M, int N, int K, const float *A, int lda, const float *B,
                             int ldb, float beta, const float *bias, float *C, int ldc);

struct gptc_gemm_isa;

typedef struct gptc_kernels {
    const char *variant; /* "ref", ... */
    /* The blocking of gemm when the portable blocked driver runs it (kernels/gemm/gemm_driver.h), for
     * gptc_gemm_scratch; NULL when gemm keeps no scratch (the reference). Set with gemm. */
    const struct gptc_gemm_isa *gemm_isa;
    const struct gptc_gemm_isa *gemm_bf16_isa; /* the same for gemm_bf16 */
    /* NULL, or in a table with operators from a plugin (kernels/plugin.h) an array indexed by
     * GPTC_KERNEL_SLOT(op): the profiler's span name of each replaced operator ("gelu_fwd[plugin:NAME]"),
     * NULL for the others. forward.c names those operators' spans with it. */
    const char *const *labels;

    /* out (B,T,C) = wte[inp] (V,C) + wpe[t] (maxT,C); inp (B,T) */
    void (*encoder_fwd)(float *out, const int *inp, const float *wte, const float *wpe, int B, int T, int C);
    /* dwte (V,C) += , dwpe (maxT,C) += from dout (B,T,C); either may be NULL (a frozen embedding: not
     * accumulated) */
    void (*encoder_bwd)(float *dwte, float *dwpe, const float *dout, const int *inp, int B, int T, int C);

    /* out (N,C) = (inp - mean) * rstd * w + b; mean, rstd (N) saved for the backward */
    void (*layernorm_fwd)(float *out, float *mean, float *rstd, const float *inp, const float *w,
                          const float *b, int N, int C);
    /* dinp (N,C) +=, dw (C) +=, db (C) += */
    void (*layernorm_bwd)(float *dinp, float *dw, float *db, const float *dout, const float *inp,
                          const float *w, const float *mean, const float *rstd, int N, int C);

    /* C (M,N) = beta*C + op(A) op(B) [+ bias], op(X) = X or X^T; A is (M,K) or, when transA, stored
     * (K,M); B is (K,N) or, when transB, stored (N,K); lda/ldb/ldc are the row strides as stored.
     * beta is 0 (overwrite, C may hold garbage) or 1 (accumulate). bias (N), or NULL, is added to
     * every row in the epilogue (a linear layer's forward in one pass over C). */
    void (*gemm)(int transA, int transB, int M, int N, int K, const float *A, int lda, const float *B,
                 int ldb, float beta, const float *bias, float *C, int ldc);
    /* The same product in bfloat16 mixed precision (--dtype bf16): every element of op(A) and op(B) is
     * rounded to bf16 (nearest, ties to even), products are summed in fp32, C, beta and bias stay fp32.
     * A variant with AVX512_BF16 multiplies with vdpbf16ps (which flushes bf16 subnormals to zero), the
     * amx level's with AMX-BF16 tiles (tdpbf16ps, the same flushing); one without rounds while packing
     * and multiplies the rounded values with fp32 FMAs. */
    void (*gemm_bf16)(int transA, int transB, int M, int N, int K, const float *A, int lda, const float *B,
                      int ldb, float beta, const float *bias, float *C, int ldc);
    /* out (N,OC) += bias (OC) broadcast over rows */
    void (*bias_fwd)(float *out, const float *bias, int N, int OC);
    /* dbias (OC) += column sums of dout (N,OC) */
    void (*bias_bwd)(float *dbias, const float *dout, int N, int OC);

    /* Causal self-attention. qkv (B,T,3C) = [q | k | v], heads split as C = NH*HS; out (B,T,C);
     * preatt, att (B,NH,T,T) scores and probabilities (only the causal half is written). */
    void (*attention_fwd)(float *out, float *preatt, float *att, const float *qkv, int B, int T, int C, int NH);
    /* dqkv (B,T,3C) +=, dpreatt and datt (B,NH,T,T) are scratch (overwritten, causal half) */
    void (*attention_bwd)(float *dqkv, float *dpreatt, float *datt, const float *dout, const float *qkv,
                          const float *att, int B, int T, int C, int NH);

    /* One query against a cache (decoding): q (C), kcache, vcache (Tc,C) rows of keys and values
     * at positions 0..Tc-1 (all visible), out (C), att (NH,Tc) scratch. */
    void (*attention_decode)(float *out, float *att, const float *q, const float *kcache, const float *vcache,
                             int Tc, int C, int NH);

    /* GELU, tanh form: out (N) = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) */
    void (*gelu_fwd)(float *out, const float *inp, size_t N);
    void (*gelu_bwd)(float *dinp, const float *inp, const float *dout, size_t N); /* dinp += */

    /* out (N) = a + b */
    void (*residual_fwd)(float *out, const float *a, const float *b, size_t N);
    /* da += dout, db += dout */
    void (*residual_bwd)(float *da, float *db, const float *dout, size_t N);

    /* Softmax over the first V of Vp columns of logits (N,Vp) into probs (N,Vp) (padding columns set
     * to 0), losses (N) = -log probs[target]. targets (N). */
    void (*crossentropy_fwd)(float *losses, float *probs, const float *logits, const int *targets,
                             int N, int V, int Vp);
    /* dlogits (N,Vp) += (probs - onehot(target)) * dloss; padding columns untouched */
    void (*crossentropy_bwd)(float *dlogits, const float *probs, const int *targets, float dloss,
                             int N, int V, int Vp);
    /* res (N,C) = a + b, then out (N,C) = (res - mean) * rstd * w + bias; mean, rstd (N) saved for the
     * backward: the residual add fused with the LayerNorm that follows it. res may alias a or b. */
    void (*residual_layernorm_fwd)(float *res, float *out, float *mean, float *rstd, const float *a, const float *b,
                                   const float *w, const float *bias, int N, int C);
    /* dinp (N,C) = dskip + LayerNorm backward of dout (OVERWRITES dinp, unlike the other backward kernels;
     * dskip (N,C) is the gradient arriving through the residual skip, NULL meaning zero; it may alias dinp);
     * dw, db (C) +=. The LayerNorm backward fused with the residual add's backward. */
    void (*layernorm_bwd_residual)(float *dinp, float *dw, float *db, const float *dskip, const float *dout,
                                   const float *inp, const float *w, const float *mean, const float *rstd, int N, int C);
    /* Softmax + cross-entropy + its gradient in one pass, in place: on entry logits (N,Vp) (first V columns
     * valid); on return losses (N) = -log softmax[target] and logits holds dlogits = (softmax - onehot(target))
     * * dloss over the first V columns, padding columns set to 0. targets (N), not NULL. */
    void (*crossentropy_fused)(float *losses, float *logits, const int *targets, float dloss, int N, int V, int Vp);

    /* AdamW on n contiguous floats (torch.optim.AdamW's formula): p -= lr*wd*p;
     * m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2; p -= lr * (m/bc1) / (sqrt(v/bc2) + eps),
     * bc1 = 1 - b1^t, bc2 = 1 - b2^t; g is multiplied by grad_scale first (for clipping). */
    void (*adamw)(float *p, const float *g, float *m, float *v, size_t n, float lr, float b1, float b2,
                  float eps, float wd, float grad_scale, int t);

    /* Fused causal flash attention over head-major q, k, v (B,NH,T,HS): the contracts of
     * kernels/attention.h (gptc_flash_fwd_fn / gptc_flash_bwd_fn). o (B,NH,T,HS), lse (B,NH,T)
     * overwritten; dq, dk, dv (B,NH,T,HS) +=. The _bf16 entries are the bf16 mixed-precision contract
     * (AVX512_BF16 kernels where the CPU has them, else the bf16 reference). */
    void (*flash_fwd)(float *o, float *lse, const float *q, const float *k, const float *v, int B, int NH, int T,
                      int HS, float dropout, uint64_t seed);
    void (*flash_bwd)(float *dq, float *dk, float *dv, const float *do_, const float *q, const float *k,
                      const float *v, const float *o, const float *lse, int B, int NH, int T, int HS, float dropout,
                      uint64_t seed);
    void (*flash_fwd_bf16)(float *o, float *lse, const float *q, const float *k, const float *v, int B, int NH,
                           int T, int HS, float dropout, uint64_t seed);
    void (*flash_bwd_bf16)(float *dq, float *dk, float *dv, const float *do_, const float *q, const float *k,
                           const float *v, const float *o, const float *lse, int B, int NH, int T, int HS,
                           float dropout, uint64_t seed);

    /* The other two GELU forms (the tanh form is gelu_fwd / gelu_bwd above):
     * erf: out (N) = 0.5 x (1 + erf(x / sqrt2)); sigmoid: out (N) = x sigmoid(1.702 x); bwd: dinp (N) += */
    void (*gelu_erf_fwd)(float *out, const float *inp, size_t N);
    void (*gelu_erf_bwd)(float *dinp, const float *inp, const float *dout, size_t N);
    void (*gelu_sigmoid_fwd)(float *out, const float *inp, size_t N);
    void (*gelu_sigmoid_bwd)(float *dinp, const float *inp, const float *dout, size_t N);

    /* Head reshapes (C = NH*HS) between the model's rows and the flash attention's head-major layout:
     * q, k, v (B,NH,T,HS) = the thirds of qkv (B,T,3C) (overwrite); dqkv (B,T,3C) += dq, dk, dv;
     * out (B,T,C) = o (B,NH,T,HS) (overwrite); dheads (B,NH,T,HS) = drows (B,T,C) (overwrite). */
    void (*qkv_to_heads)(float *q, float *k, float *v, const float *qkv, int B, int T, int C, int NH);
    void (*heads_to_qkv_grad)(float *dqkv, const float *dq, const float *dk, const float *dv, int B, int T, int C,
                              int NH);
    void (*heads_to_rows)(float *out, const float *o, int B, int T, int C, int NH);
    void (*rows_to_heads)(float *dheads, const float *drows, int B, int T, int C, int NH);

    /* out (n) = mask(seed, stream) * in / (1 - p), the counter-based dropout of kernels/dropout.h; out
     * may be in; p == 0 copies. */
    void (*dropout)(float *out, const float *in, size_t n, float p, uint64_t seed, uint64_t stream);
    /* x (n) = 0 */
    void (*zero)(float *x, size_t n);
    /* sum of x[i]^2 over n floats in double, in a fixed order (the same bits for any thread count):
     * the global gradient norm's reduction (optim/optim.h gptc_grad_sumsq) */
    double (*grad_sumsq)(const float *x, size_t n);

    /* bf16 storage (--dtype bf16): the activations that only bf16 GEMMs read (the LayerNorm outputs,
     * the GELU output, the attention's merged output) are stored as bf16 values (uint16_t, the top
     * half of the fp32 pattern), halving their traffic. Each producer below writes out[i] =
     * gptc_f32_to_bf16(what its fp32 entry writes), bit for bit at every level (the same arithmetic,
     * then round to nearest even; NaN stays NaN), so a bf16 GEMM reading them sees the values it
     * would have rounded the fp32 array to. The other outputs (res, mean, rstd) are the fp32 entry's. */
    void (*layernorm_fwd_bf16)(uint16_t *out, float *mean, float *rstd, const float *inp, const float *w,
                               const float *b, int N, int C);
    void (*residual_layernorm_fwd_bf16)(float *res, uint16_t *out, float *mean, float *rstd, const float *a,
                                        const float *b, const float *w, const float *bias, int N, int C);
    void (*gelu_fwd_bf16)(uint16_t *out, const float *inp, size_t N);         /* tanh form */
    void (*gelu_erf_fwd_bf16)(uint16_t *out, const float *inp, size_t N);
    void (*gelu_sigmoid_fwd_bf16)(uint16_t *out, const float *inp, size_t N);
    void (*heads_to_rows_bf16)(uint16_t *out, const float *o, int B, int T, int C, int NH);
    /* out (n) = gptc_f32_to_bf16(x) (round to nearest even, NaN quiet): the O2 working copy of the
     * weights (model/gpt2.h params16), refreshed after each update */
    void (*to_bf16)(uint16_t *out, const float *x, size_t n);
    /* adamw, and p16 (n) = to_bf16 of the updated p in the same pass: the update of an O2 run, whose
     * working copy is then current without a second pass over p (backend/ops.h gptc_adamw_piece's p16) */
    void (*adamw16)(float *p, uint16_t *p16, const float *g, float *m, float *v, size_t n, float lr, float b1,
                    float b2, float eps, float wd, float grad_scale, int t);
    /* gemm_bf16 whose operands may be stored in bf16: bit in16 & GPTC_GEMM_A16 says A is a uint16_t
     * bf16 array (lda in elements), GPTC_GEMM_B16 the same for B; the other operands are fp32 arrays,
     * rounded as gemm_bf16 rounds them. The result is gemm_bf16's on the widened values, bit for bit
     * (same blocking and order). Shares gemm_bf16_isa. */
    void (*gemm_bf16_in16)(int transA, int transB, int M, int N, int K, const void *A, int lda, const void *B,
                           int ldb, int in16, float beta, const float *bias, float *C, int ldc);

    /* Compact optimizer state (--optim-state bf16|int8; the shared arithmetic and the maps: kernels/ostate.h).
     * bf16: out (n) = in (n) widened (exact); store: out (n) = in (n) rounded to bf16 stochastically, element
     * i with gptc_ostate_sr_bits(key, index + i) (index: element 0's absolute arena index), so the bits do
     * not depend on how the arena is cut. int8, one block of n <= GPTC_OSTATE_BLOCK values: load: out (n) =
     * code[in[i]] * absmax; store: *absmax = max |in|, out[i] = the index of the code nearest to in[i] /
     * absmax (ties to the lower). is_signed picks the signed map (first moments) or the unsigned one. */
    void (*ostate_bf16_load)(float *out, const uint16_t *in, size_t n);
    void (*ostate_bf16_store)(uint16_t *out, const float *in, size_t n, uint64_t key, uint64_t index);
    void (*ostate_q8_load)(float *out, const uint8_t *in, size_t n, float absmax, int is_signed);
    void (*ostate_q8_store)(uint8_t *out, float *absmax, const float *in, size_t n, int is_signed);
    /* The small-M product of decoding, streaming W exactly once without packing it (gemm packs B on every
     * call, a second pass over the weights): out (M,N) = x (M,K) @ op(W) [+ bias (N), or NULL]; x, out row
     * strides ldx, ldo. transW 0: W stored (K,N), row stride ldw (a linear layer's weight, HF layout);
     * transW 1: W stored (N,K) and op(W) = W^T (the tied classifier: logits (M,V) = x (M,C) @ wte^T, dot
     * products along W's rows). wfmt, the GPTC_MV_* bits below: GPTC_MV_BF16: W holds bf16 values
     * (uint16_t, ldw in elements), widened exactly, else floats; GPTC_MV_PANELS (transW and ldw then
     * unused): W is op(W) packed in panels (gptc_matvec_pack), so each thread streams one contiguous run
     * of memory. Each out element is a sum over k in a fixed order that depends on neither M, the other rows
     * nor the thread count (threads split N), so a row of a batched call equals the same row alone, bit
     * for bit; (K,N) rows and panels both sum in k's order from 0, then + bias, so packing a (K,N) W
     * keeps its results bit for bit. Meant for a decode step's few rows (M = the samples); any M is
     * correct. */
    void (*matvec)(int transW, int wfmt, int M, int N, int K, const float *x, int ldx, const void *W, int ldw,
                   const float *bias, float *out, int ldo);
    /* S queries against S caches that share their first P positions (the samples of one prompt, decoded
     * together): q (S rows, stride ldq; the first C of each: a qkv row), keys and values of positions
     * t < P at kp + t*C, vp + t*C (stored once, read once for all S), of positions P <= t < Tc of sample s
     * at k + s*lds + t*C, v + s*lds + t*C; out (S rows, stride ldo, C each); att (S,NH,Tc) scratch.
     * 0 <= P <= Tc. kv16 1: the keys and values are bf16 values (uint16_t; offsets and lds in elements),
     * widened exactly (a bf16 decoder's cache: half the bytes); 0: floats. Sample s's row is computed the
     * same way whatever S and P (its positions in order, wherever they are stored), so a sample of a batch
     * equals, bit for bit, the same sample alone; and it is attention_decode's result for that sample's
     * cache (widened), within float rounding. */
    void (*attention_decode_shared)(float *out, int ldo, float *att, const float *q, int ldq, const void *kp,
                                    const void *vp, int P, const void *k, const void *v, size_t lds, int Tc, int S,
                                    int C, int NH, int kv16);
    /* x (n) *= s, elementwise (each element one multiply: the same bits at every level): LoRA's alpha/r on
     * its (B*T, r) products */
    void (*scale)(float *x, float s, size_t n);

    /* Not operators of their own: share `part` (0 <= part < parts) of matvec and of attention_decode_shared,
     * same arguments, for a caller that runs the team itself (a decode step in one parallel region,
     * model/decode.c). A share opens no OpenMP region; the shares write disjoint parts of out (matvec:
     * columns; attention: heads, and their rows of att), and all parts of one call, run in any order or
     * at once, give the whole operation's result bit for bit. Set with their operators (dispatch.c). */
    void (*matvec_part)(int part, int parts, int transW, int wfmt, int M, int N, int K, const float *x, int ldx,
                        const void *W, int ldw, const float *bias, float *out, int ldo);
    void (*attention_decode_part)(int part, int parts, float *out, int ldo, float *att, const float *q, int ldq,
                                  const void *kp, const void *vp, int P, const void *k, const void *v, size_t lds,
                                  int Tc, int S, int C, int NH, int kv16);

    /* Not operators: the per-thread scratch (bytes as gptc_alloc counts them) the flash entries above
     * grow to over a forward and a backward at (T, HS), for the planner; set with them. */
    size_t (*flash_scratch)(int T, int HS);
    size_t (*flash_scratch_bf16)(int T, int HS);
} gptc_kernels;

/* The first of n units in share `part` of `parts`: every level's matvec_part and attention_decode_part split
 * their units (panels or pairs of them, W's rows, column tiles, heads) evenly, share p holding units
 * gptc_share_at(n, p, parts) .. gptc_share_at(n, p + 1, parts) - 1. */
static inline int gptc_share_at(int n, int part, int parts) { return (int)((long)n * part / parts); }

/* gemm_bf16_in16's in16 bits. GPTC_GEMM_B_PANELS (with transB 0; ldb unused): B is the (K,N) matrix in
 * matvec's panel form (GPTC_MV_PANEL below, gptc_matvec_pack; bf16 values with GPTC_GEMM_B16, else
 * floats), which the packers read panel by panel: the same bits as B in rows (a decoder's prefill reads
 * the copy its steps stream). */
enum { GPTC_GEMM_A16 = 1, GPTC_GEMM_B16 = 2, GPTC_GEMM_B_PANELS = 4, GPTC_GEMM_B_PACKED = 8 };

/* matvec's wfmt bits, and its panel form: W (K,N) cut into ceil(N/GPTC_MV_PANEL) panels of GPTC_MV_PANEL
 * columns, stored one after the other; panel p holds rows k = 0..K-1 of its columns, row after row, each
 * row GPTC_MV_PANEL elements, columns past N zero. In floats a row is its columns in order:
 * W[k][p*GPTC_MV_PANEL + j] at p*K*GPTC_MV_PANEL + k*GPTC_MV_PANEL + j. In bf16 each run of 32 columns
 * (64 bytes) is 16 pairs: 32-bit word i holds column i in its low half and column 16 + i in its high
 * half, so one vector load widens to two vectors of consecutive columns with a shift and a mask, half
 * the instructions of widening 16-bit lanes one by one (one 200 MB matvec on a Xeon, 2 threads: bf16
 * panels streamed at 0.88 of fp32's bytes per second in order, 0.95 in pairs). A decode step's thread
 * then reads its panels as one stream, where the (K,N) form gives it a few hundred bytes of every row
 * (measured on the 124M model's matrices: ~15 % more bandwidth, fp32 and bf16). */
enum { GPTC_MV_BF16 = 1, GPTC_MV_PANELS = 2 };
#define GPTC_MV_PANEL 64
/* Elements of the panel form of a (K,N) matrix, and where its element (k, n) sits in it (bf16: the
 * bf16 form's pairs). */
size_t gptc_matvec_panel_elems(int K, int N);
static inline size_t gptc_matvec_panel_at(int K, int k, int n, int bf16) {
    const int j = n % GPTC_MV_PANEL, in_row = bf16 ? (j & ~31) + 2 * (j & 15) + ((j >> 4) & 1) : j;
    return ((size_t)(n / GPTC_MV_PANEL) * K + k) * GPTC_MV_PANEL + in_row;
}
/* dst (gptc_matvec_panel_elems(K, N) floats, or bf16 values when bf16: gptc_f32_to_bf16 of each) = the
 * panel form of op(W) (K,N): W stored (K,N) (transW 0), or (N,K) with op(W) = W^T (transW 1: the tied
 * classifier's wte), row stride ldw; threads split the panels. */
void gptc_matvec_pack(void *dst, int bf16, const float *W, int ldw, int transW, int K, int N);

/* The index of operator `op` (a field name of gptc_kernels) in a table's labels, and the labels' length. */
#define GPTC_KERNEL_SLOT(op) (offsetof(gptc_kernels, op) / sizeof(void *))
#define GPTC_KERNEL_SLOTS (sizeof(gptc_kernels) / sizeof(void *))
/* The span name of a call of operator `op` in table k: the plugin's label where one replaced it, else site. */
#define GPTC_KERNEL_SPAN(k, op, site)                                                            \
    ((k)->labels && (k)->labels[GPTC_KERNEL_SLOT(op)] ? (k)->labels[GPTC_KERNEL_SLOT(op)] : (site))

/* The table in use: built once from the reference table, then overlaid with the AVX2+FMA entries
 * when the CPU and OS support them, then with the AVX-512 entries, then (level amx: AVX512_BF16,
 * AMX-TILE, AMX-BF16 and Linux's permission for the tiles, gptc_cpu_amx_usable) with the AMX gemm_bf16,
 * its only entry. GPTC_KERNELS=ref|avx2|avx512|amx caps the level (asking for one the CPU lacks is reported with gptc_warn and the best available
 * level is used); GPTC_KERNELS=LEVEL,OP=LEVEL,... then sets single operators (and `flash`, the
 * four flash entries and their scratch sizes together) to another level, e.g. "avx512,gemm=ref" (what
 * `gptc bench --ablation` uses). Every level's overlay sets its own entries; nothing else dispatches. */
const gptc_kernels *gptc_kernels_get(void);
/* The reference table, always available. */
const gptc_kernels *gptc_kernels_ref(void);
/* A table for one level ("ref", "avx2", "avx512", "amx"): the reference overlaid up to that level, or
 * NULL when this CPU cannot run it. For tests and benchmarks that compare variants. */
const gptc_kernels *gptc_kernels_level(const char *level);
/* Whether k's gemm_bf16 is the AMX kernel (the amx level's; false where this CPU cannot run it). */
bool gptc_kernels_gemm_bf16_is_amx(const gptc_kernels *k);

/* The operators, by name, for listing (gptc info) and for tests that walk every entry. */
typedef struct gptc_kernel_op {
    const char *name;
    size_t offset; /* of its function pointer in gptc_kernels */
} gptc_kernel_op;
extern const gptc_kernel_op gptc_kernel_ops[];
extern const int gptc_kernel_nops;
/* The variant ("ref", "avx2", "avx512", "amx") that provides operator i in table k. */
const char *gptc_kernels_op_variant(const gptc_kernels *k, int i);

/* The reference grad_sumsq (kernels/ref/sumsq.c): GPTC_SUMSQ_CHUNKS fixed chunks of ceil(n / chunks)
 * floats rounded up to a multiple of 8, each summed in 8 double lanes, added in chunk order. The SIMD
 * variants keep this layout, so every level gives the same bits. */
#define GPTC_SUMSQ_CHUNKS 64
double gptc_grad_sumsq_ref(const float *x, size_t n);

/* Per-ISA overlays: each sets the entries its folder implements and leaves the others. */
void gptc_kernels_overlay_avx2(gptc_kernels *k);
void gptc_kernels_overlay_avx512(gptc_kernels *k);

/* Scratch one call of k's gemm (bf16: gemm_bf16) on (M,N,K) with `threads` OpenMP threads takes,
 * in bytes as gptc_alloc counts them: apack[t] and bpack[t] (arrays of `threads`), the packing
 * buffers team thread t grows to (per-thread workspaces, kept and reused by later calls: a thread's
 * buffer ends at the largest of its calls), and *transient, what the call allocates and frees before
 * it returns (the reference bf16 product's rounded operand copies). */
void gptc_gemm_scratch(const gptc_kernels *k, int bf16, int M, int N, int K, int threads, size_t *apack,
                       size_t *bpack, size_t *transient);

/* Grows every OpenMP thread's packing buffers to what any call of k's gemm (bf16: gemm_bf16_in16 with
 * these in16 bits) of at most M x N x K asks for, so that the first such call allocates nothing: a buffer
 * grown inside a call pays its page faults there (on a VM, zeroing a huge page took milliseconds; a
 * decoder's prefill of 559 tokens spent 15 of its ~200 ms so). No-op where k's product is not the blocked
 * driver's. */
void gptc_gemm_reserve(const gptc_kernels *k, int bf16, int M, int N, int K, int in16);

/* k's gemm (bf16: gemm_bf16_in16 with in16; fp32: in16 0) on these operands, the same bits in C, and *sumsq = the sum
 * of squares of C afterwards, summed tile by tile as the product finishes them (gemm_driver.h
 * gptc_gemm_blocked_sumsq: the same value for any thread count). Returns false, doing nothing, where k's product is
 * not the blocked driver's (the reference, a plugin's, a device's) or B is packed or in panels. */
bool gptc_gemm_sumsq(const gptc_kernels *k, int bf16, int transA, int transB, int M, int N, int K, const void *A,
                     int lda, const void *B, int ldb, int in16, float beta, const float *bias, float *C, int ldc,
                     double *sumsq);

/* Weights packed once for many products (the training step's, between two updates): op(B) (K,N) packed
 * whole, as k's gemm (bf16: gemm_bf16 and gemm_bf16_in16) packs the B panels of every call, so that
 * gptc_gemm_packed reads them in place instead of packing B again. gptc_gemm_packed gives the bits of
 * k->gemm (bf16: gemm_bf16_in16 with in16 a16 | GPTC_GEMM_B16 where B16 was packed from bf16) on the same
 * operands, for any M; Bp must come from gptc_gemm_pack_b with the same k, bf16, N and K.
 *   gptc_gemm_packed_bytes: the packed size in bytes; 0 where k's product cannot read it (not the
 *     blocked driver: the reference, a CUDA table, a plugin's gemm), and then nothing else here applies;
 *   gptc_gemm_pack_b: writes it from B (row stride ldb, op(B) = transB ? B^T : B; b16: B holds bf16
 *     values as with GPTC_GEMM_B16, bf16 only) on the OpenMP threads;
 *   gptc_gemm_packed: C (M,N) = beta*C + op(A) op(B) [+ bias], A fp32 (a16: bf16 values, bf16 only). */
size_t gptc_gemm_packed_bytes(const gptc_kernels *k, int bf16, int N, int K);
void gptc_gemm_pack_b(const gptc_kernels *k, int bf16, int transB, int N, int K, const void *B, int ldb, int b16,
                      void *out);
void gptc_gemm_packed(const gptc_kernels *k, int bf16, int transA, int M, int N, int K, const void *A, int lda,
                      int a16, const void *Bp, float beta, const float *bias, float *C, int ldc);

/* Peak fp32 FMA throughput of this machine in GFLOP/s with `threads` threads (0: all), measured by
 * a register-only FMA loop in the widest ISA available (about 0.2 s). */
double gptc_peak_gflops(int threads);
/* Peak bf16 throughput in GFLOP/s with `threads` threads (0: all), of the instruction the table in
 * use multiplies bf16 with: where its gemm_bf16 is the AMX kernel (gptc_kernels_gemm_bf16_is_amx), a
 * tdpbf16ps loop into six accumulator tiles (16 x 16 x 32 multiply-adds per instruction); else a
 * register-only vdpbf16ps loop (16 lanes x 2 multiply-adds per instruction); 2 FLOPs per
 * multiply-add, about 0.2 s; 0 when the CPU lacks AVX512_BF16 (or the avx512 level). */
double gptc_peak_bf16_gflops(int threads);
/* "amx_bf16" (tdpbf16ps) or "bf16" (vdpbf16ps): the probe gptc_peak_bf16_gflops runs now, when it runs one. */
const char *gptc_peak_bf16_kind(void);
/* Whether the best table's gemm_bf16 multiplies bf16 pairs (vdpbf16ps or AMX's tdpbf16ps, 2-byte packed
 * operands); otherwise it runs fp32 FMAs on bf16-rounded operands (no AVX512_BF16, or an Intel core
 * without AMX, where vdpbf16ps is the slower). */
bool gptc_gemm_bf16_uses_dpbf16(void);
/* The peak a training run's MFU is measured against, probed once per machine and cached: for bf16
 * the gptc_peak_bf16_gflops peak where gemm_bf16 uses that instruction (gptc_gemm_bf16_uses_dpbf16),
 * else (and for fp32) the fp32 FMA peak — the instruction the products run on.
 * The cache is the JSON file cache_dir/peak.json (cache_dir NULL: $XDG_CACHE_HOME/gptc, else
 * $HOME/.cache/gptc), one entry per CPU brand, ISA level, probe and thread count; a missing,
 * unreadable or corrupt file is measured afresh and rewritten atomically (a cache that cannot be
 * written is only skipped). threads 0: all. *kind (may be NULL) gets "fp32", "bf16" or "amx_bf16", the
 * probe used; *cached (may be NULL) whether the figure came from the file. 0 when the CPU has no FMA. */
double gptc_peak_cached(const char *cache_dir, int bf16, int threads, const char **kind, bool *cached);
/* Measures that peak again now and caches the larger of the new and the cached figure, which it
 * returns: for a run whose achieved GFLOP/s exceeded a cached peak taken on a busy machine. */
double gptc_peak_remeasure(const char *cache_dir, int bf16, int threads);
/* Caches gflops, a probe just taken elsewhere (gptc info), if it is larger than the cached figure;
 * returns the figure now cached. A bf16 figure is refused (0) where gemm_bf16 runs on fp32 FMAs: that
 * run's bf16 peak is the fp32 one, which a vdpbf16ps probe's figure would overstate twofold. */
double gptc_peak_cache_offer(const char *cache_dir, int bf16, int threads, double gflops);
/* The path of that cache file, into buf. */
void gptc_peak_cache_file(const char *cache_dir, char *buf, size_t cap);

/* Memory bandwidth in GB/s with `threads` threads (0: all), STREAM's triad a[i] = b[i] + s*c[i] over
 * three float arrays of 4x the last-level cache each (64 MiB to 256 MiB, 256 MiB when sysfs does not
 * say), each thread first-touching the part it streams, best of 5 rounds; counted with STREAM's
 * convention, 12 bytes per element (the write-allocate read of a is not counted). About 1 s, most of
 * it faulting the arrays in; 0 when they cannot be mapped. (kernels/peak_bw.c) */
double gptc_triad_gbps(int threads);
/* The size in bytes of cpu0's data (or unified) cache at `level` (1, 2, 3), or with level 0 the
 * largest (the last-level cache), from sysfs; 0 when unknown. */
size_t gptc_cache_bytes(int level);
/* The triad bandwidth from the peak cache above (key "CPU brand|memory|triad|threads"); when none is
 * cached, measured now and cached if measure_if_missing, else 0. *cached (may be NULL): whether the
 * figure came from the file. */
double gptc_triad_cached(const char *cache_dir, int threads, bool measure_if_missing, bool *cached);
/* Caches gbps, a triad just measured elsewhere (gptc info), if it is larger than the cached figure;
 * returns the figure now cached. */
double gptc_triad_cache_offer(const char *cache_dir, int threads, double gbps);

#endif
