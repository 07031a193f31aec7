/* gemm_driver.h — the portable BLIS-style GEMM driver; each ISA supplies a microkernel, packers and
 * blocking sizes. */
#ifndef GPTC_GEMM_DRIVER_H
#define GPTC_GEMM_DRIVER_H

/* Microkernel: c (m,n) = beta*c + a_panel (mr,kc) b_panel (kc,nr) [+ bias (n) on every row] for
 * m <= mr rows, n <= nr columns. a is packed k-major (a[k*mr + i]), b is packed k-major
 * (b[k*nr + j]), both 64-byte aligned and zero padded to full mr/nr; c has row stride ldc; bias is
 * NULL or the n bias values of these columns. beta 0 overwrites (c may hold garbage). */
typedef void (*gptc_gemm_ukernel)(int kc, const float *a, const float *b, float *c, int ldc, int m, int n,
                                  float beta, const float *bias);

/* Packer: rows i0..i0+m-1, columns k0..k0+kc-1 of op(X) (op(X)(i,k) = trans ? X[k*ldx+i] :
 * X[i*ldx+k]) as ceil(m/r) micro-panels of r*kc floats, out[p*r*kc + k*r + i], zero padded to full
 * r. Serves both operands: A with its transA and r = mr; B through op(B)^T (columns of op(B) are
 * rows of op(B)^T), i.e. with trans = !transB and r = nr. NULL in the ISA: the portable C packer. */
typedef void (*gptc_gemm_pack)(int trans, const float *X, int ldx, int i0, int k0, int m, int kc, int r,
                               float *out);

typedef struct gptc_gemm_isa {
    int mr, nr;             /* microkernel tile */
    int mc, kc, nc;         /* cache blocking: A block mc x kc (L2), B panel kc x nc (L3) */
    gptc_gemm_ukernel kernel;
    gptc_gemm_pack pack;    /* may be NULL */
} gptc_gemm_isa;

/* The gemm contract of kernels.h (C (M,N) = beta*C + op(A) op(B) [+ bias], row-major) on top of isa.
 * Threads split C into a grid of blocks of whole micro-tiles, each thread packing what it reads,
 * so a call has no barrier but its end; every C element is summed in the same order whatever the
 * thread count, so results are bit-identical for any thread count. */
void gptc_gemm_blocked(const gptc_gemm_isa *isa, int transA, int transB, int M, int N, int K, const float *A,
                       int lda, const float *B, int ldb, float beta, const float *bias, float *C, int ldc);

/* The portable packer (what pack = NULL means), exposed for the packer tests. */
void gptc_gemm_pack_portable(int trans, const float *X, int ldx, int i0, int k0, int m, int kc, int r, float *out);

#endif
