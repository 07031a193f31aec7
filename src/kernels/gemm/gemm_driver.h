/* gemm_driver.h — the portable BLIS-style GEMM driver; each ISA supplies a microkernel, packers and
 * blocking sizes. One driver serves the fp32 gemm and the bf16 gemm_bf16 of kernels.h: the ISA
 * description says how wide a packed element is and how many k values travel together. */
#ifndef GPTC_GEMM_DRIVER_H
#define GPTC_GEMM_DRIVER_H

#include <stddef.h>
#include <stdint.h>

/* Packed micro-panel layout, for r rows (mr of A or nr of B), kc depths, k granularity s (kstep)
 * and kcp = kc rounded up to a multiple of s: element (i, k) of micro-panel p sits at element
 *   out[p*r*kcp + (k/s)*r*s + i*s + k%s]
 * (elements of esize bytes). s = 1 (fp32): k-major, a[k*r + i]. s = 2 (bf16): per k pair, r 32-bit
 * words, word i holding (k, k+1) of row i — the operand layout of vdpbf16ps. s = 32 (bf16, AMX's A):
 * per block of 32 k, r rows of 64 bytes, row i holding its 32 consecutive k values — a row of
 * tdpbf16ps's first tile. (AMX's B, through pack_b below, is the s = 2 layout with kcp a multiple
 * of 32: 16 k pairs x 16 columns are one tile of tdpbf16ps's second source.) Rows past m and depths
 * past kc are zero. Panels are 64-byte aligned. */

/* Microkernel: c (m,n) = beta*c + a_panel (mr,kc) b_panel (kc,nr) [+ bias (n) on every row] for
 * m <= mr rows, n <= nr columns, a and b packed as above (zero padded to full mr/nr and to kcp);
 * c has row stride ldc; bias is NULL or the n bias values of these columns. beta 0 overwrites (c
 * may hold garbage). sumsq: NULL, or (where the ISA sets kernel_sumsq; others ignore it) *sumsq = the
 * sum of squares of the m x n values stored, in a fixed order (gptc_gemm_blocked_sumsq). */
typedef void (*gptc_gemm_ukernel)(int kc, const void *a, const void *b, float *c, int ldc, int m, int n,
                                  float beta, const float *bias, double *sumsq);

/* The microkernel that also packs (NULL: none): the tile above, and meanwhile packed rows r < rows of the
 * next B micro-panel written at dst (64-byte aligned; packed row r at dst + r*nr*esize*kstep bytes) from
 * the source at src, in the form below, as the ISA's packer writes it: op(B) = B (transB 0) in rows of lds
 * elements — packed row r from source rows r*s .. r*s+s-1 (s = kstep) — or, in the transposed form, op(B) =
 * B^T (transB 1), the micro-panel's columns the source's rows (lds elements apart) — packed row r from
 * elements r*s .. r*s+s-1 of each. Its loads and stores run in the shadow of the tile's multiply-adds,
 * which packing B before the tiles does not (gemm_driver.c). */
enum {
    GPTC_GEMM_COPY_F32,      /* floats, in order: the fp32 layout's one depth per packed row */
    GPTC_GEMM_COPY_BF16,     /* bf16 values, in order: the bf16 layout's depth pair */
    GPTC_GEMM_COPY_PANELS16, /* runs of matvec's bf16 panel form (kernels.h GPTC_MV_PANEL): the same pair */
    GPTC_GEMM_COPY_T32,      /* the transposed form, 32-bit words (fp32 values, or bf16 depth pairs of a bf16
                              * source): moved in blocks of 16 packed rows, so row and rows are multiples of
                              * 16 (the ISA's copy_t32) */
};
typedef void (*gptc_gemm_ukernel_copy)(int kc, const void *a, const void *b, float *c, int ldc, int m, int n,
                                       float beta, const float *bias, double *sumsq, const void *src, size_t lds,
                                       int form, void *dst, int rows);

/* Packer: rows i0..i0+m-1, columns k0..k0+kc-1 of op(X) (op(X)(i,k) = trans ? X[k*ldx+i] :
 * X[i*ldx+k]) as ceil(m/r) micro-panels in the layout above. Serves both operands: A with its
 * transA and r = mr; B through op(B)^T (columns of op(B) are rows of op(B)^T), i.e. with
 * trans = !transB and r = nr. NULL in the ISA: the portable C packer (fp32 layout, s = 1). */
typedef void (*gptc_gemm_pack)(int trans, const float *X, int ldx, int i0, int k0, int m, int kc, int r,
                               void *out);

/* The same packer for an operand stored in bf16 (uint16_t, ldx in elements): the micro-panels it
 * writes are the ones gptc_gemm_pack would write from the widened fp32 values, rounded as the ISA
 * rounds (no-op: they are bf16 already). NULL in the ISA: the portable one (fp32 layout, s = 1). */
typedef void (*gptc_gemm_pack16)(int trans, const uint16_t *X, int ldx, int i0, int k0, int m, int kc, int r,
                                 void *out);

/* Which micro-panel the two innermost loops keep in L1 while the other streams from L2:
 *   GPTC_GEMM_B_IN_L1: for each B micro-panel (kc x nr), every A micro-panel of the block in turn — the
 *     A block (mc x kc) lives in L2 and the B panel (kc x nc) in L3 (double-pumped FMAs, e.g. Zen 4);
 *   GPTC_GEMM_A_IN_L1: for each A micro-panel (mr x kc), every B micro-panel of the panel in turn — the
 *     B panel lives in L2 and only the small broadcast operand sits in L1 (full-width FMAs, where the
 *     kernel consumes operands twice as fast and L2 holds a 1 MiB panel: Intel server cores). */
enum { GPTC_GEMM_B_IN_L1 = 0, GPTC_GEMM_A_IN_L1 = 1 };

typedef struct gptc_gemm_isa {
    int mr, nr;             /* microkernel tile */
    int mc, kc, nc;         /* cache blocking: A block mc x kc, B panel kc x nc (where each lives: order) */
    int order;              /* GPTC_GEMM_B_IN_L1 or GPTC_GEMM_A_IN_L1 */
    int esize;              /* bytes per packed element: 4 (fp32) or 2 (bf16) */
    int kstep;              /* k granularity s of the packed layout: 1, 2 (bf16 k pairs) or 32 (AMX A
                             * rows of 32 k values); kcp = kc rounded up to it for both operands */
    int round_bf16;         /* 1: every packed value is rounded to bf16 (RNE) after packing, so an fp32
                             * kernel computes gemm_bf16 exactly (products of bf16 values are exact) */
    void (*round)(float *p, size_t n); /* that rounding: gptc_gemm_round_bf16's bits (NULL: it) */
    gptc_gemm_ukernel kernel;
    gptc_gemm_ukernel_copy kernel_copy; /* NULL, or the kernel packing B's next micro-panel (kstep 1 or 2,
                                         * no rounding, pack_b NULL) */
    int copy_t32;           /* 1: kernel_copy also takes GPTC_GEMM_COPY_T32 */
    gptc_gemm_pack pack;    /* may be NULL (fp32 layout only) */
    /* NULL: B is packed by pack too. Else B's packer, whose micro-panels keep the size above (nr x kcp
     * elements) but may order them their own way (AMX: B in k pairs while A is in runs of 32 k). */
    gptc_gemm_pack pack_b;
    /* NULL, or called by every thread of a call before its first microkernel and after its last (AMX:
     * load the tile configuration, release the tiles), for per-thread state the kernel relies on. */
    void (*thread_begin)(void);
    void (*thread_end)(void);
    gptc_gemm_pack16 pack16; /* bf16 sources (gemm_bf16_in16); may be NULL (fp32 layout only) */
    gptc_gemm_pack16 pack16_b; /* NULL: B from bf16 sources by pack16 too, else by this (AMX) */
    int kernel_sumsq;        /* 1: kernel and kernel_copy fill sumsq from their registers; 0: they ignore it, and
                              * gptc_gemm_blocked_sumsq reads the thread's tiles back after its block */
} gptc_gemm_isa;

/* The gemm contract of kernels.h (C (M,N) = beta*C + op(A) op(B) [+ bias], row-major) on top of isa.
 * Threads split C into a grid of blocks of whole micro-tiles, each thread packing what it reads,
 * so a call has no barrier but its end; every C element is summed in the same order whatever the
 * thread count and whatever thread sums it, so results are bit-identical for any thread count, and
 * the blocks can follow the threads' measured speeds (gptc_gemm_block_of). Per thread it packs into one A
 * block of round_up(min(kc,K), kstep) x round_up(min(mc, rows), mr) elements and one B panel of
 * round_up(min(kc,K), kstep) x round_up(min(nc, cols), nr) elements, esize bytes each, its buffers
 * sized for the tallest and widest block any speeds could give it. */
void gptc_gemm_blocked(const gptc_gemm_isa *isa, int transA, int transB, int M, int N, int K, const float *A,
                       int lda, const float *B, int ldb, float beta, const float *bias, float *C, int ldc);

/* The block of C that thread t of a team of `threads` gets in such a call of M x N x K: rows [r0, r1), columns
 * [c0, c1) (all 0 when the call runs on fewer threads). The split follows the calling thread's team weights
 * as they are now (core/team.h: each thread's share in proportion to its measured speed; the bits do not
 * depend on it). */
void gptc_gemm_block_of(const gptc_gemm_isa *g, int M, int N, int K, int threads, int t, int *r0, int *r1, int *c0,
                        int *c1);

/* The same with operands that may be stored in bf16 (kernels.h gemm_bf16_in16: in16 bits
 * GPTC_GEMM_A16, GPTC_GEMM_B16): a bf16 operand is packed by isa->pack16 and not rounded again. The
 * blocking, split and order are gptc_gemm_blocked's, so the bits are those of the widened operands. */
void gptc_gemm_blocked_in16(const gptc_gemm_isa *isa, int transA, int transB, int M, int N, int K, const void *A,
                            int lda, const void *B, int ldb, int in16, float beta, const float *bias, float *C,
                            int ldc);

/* gptc_gemm_blocked_in16's product (the same bits in C), returning the sum of squares of C after it: each micro-tile's
 * summed where the thread that finishes it has it in L1 (isa->tile_sumsq), the tiles added in row-major order on the
 * calling thread, so the sum is the same for any thread count (and saves a pass over C from memory, as a weight
 * gradient's share of the global norm would read it). */
double gptc_gemm_blocked_sumsq(const gptc_gemm_isa *g, int transA, int transB, int M, int N, int K, const void *A,
                               int lda, const void *B, int ldb, int in16, float beta, const float *bias, float *C,
                               int ldc);

/* op(B) (K,N) packed whole, as every call on g would pack its B panels (kernels.h GPTC_GEMM_B_PACKED): for
 * each depth block of g->kc (the last one shorter) in turn, ceil(N/nr) micro-panels of that depth in the
 * layout above. A product given it (in16 GPTC_GEMM_B_PACKED, ldb unused) reads its panels in place
 * instead of packing them: the same bits, without the pass over B. whole_b_bytes: its size in bytes;
 * pack_whole_b writes it (b16: B is bf16, as GPTC_GEMM_B16) on the OpenMP threads. */
size_t gptc_gemm_whole_b_bytes(const gptc_gemm_isa *g, int N, int K);
void gptc_gemm_pack_whole_b(const gptc_gemm_isa *g, int transB, int N, int K, const void *B, int ldb, int b16,
                            void *out);

/* Sets g's mc, kc, nc and order from the cache sizes of c (gptc_cpu: CPUID leaf 4 / 0x8000001D, else
 * sysfs, else AMD's leaves 0x80000005/6) for a kernel of g's mr, nr, esize and kstep; leaves the fields
 * as they are when the sizes are unknown. The rules and the measurements behind them are in
 * gemm_driver.c. */
struct gptc_cpu_info;
void gptc_gemm_block_for_caches(gptc_gemm_isa *g, const struct gptc_cpu_info *c);

/* The portable packer (what pack = NULL means), exposed for the packer tests. */
void gptc_gemm_pack_portable(int trans, const float *X, int ldx, int i0, int k0, int m, int kc, int r, void *out);

void gptc_gemm_pack16_portable(int trans, const uint16_t *X, int ldx, int i0, int k0, int m, int kc, int r,
                               void *out);

/* p[0..n) rounded in place to the nearest bf16 (ties to even), as gptc_bf16_round does. */
void gptc_gemm_round_bf16(float *p, size_t n);

#endif
