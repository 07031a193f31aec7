/* gemm_driver.h — the portable BLIS-style GEMM driver; each ISA supplies a microkernel and blocking sizes. */
#ifndef GPTC_GEMM_DRIVER_H
#define GPTC_GEMM_DRIVER_H

/* Microkernel: c (m,n) = beta*c + a_panel (mr,kc) b_panel (kc,nr) for m <= mr rows, n <= nr columns.
 * a is packed k-major (a[k*mr + i]), b is packed k-major (b[k*nr + j]), both 64-byte aligned and
 * zero padded to full mr/nr; c has row stride ldc. beta 0 overwrites (c may hold garbage). */
typedef void (*gptc_gemm_ukernel)(int kc, const float *a, const float *b, float *c, int ldc, int m, int n,
                                  float beta);

/* Optional packing overrides (NULL: the portable C packers). pack_a writes rows i0..i0+m-1,
 * k0..k0+kc-1 of op(A) as ceil(m/mr) micro-panels of mr*kc floats; pack_b writes columns
 * j0..j0+n-1, rows k0..k0+kc-1 of op(B) as ceil(n/nr) micro-panels of kc*nr floats. */
typedef void (*gptc_gemm_pack)(int trans, const float *X, int ldx, int i0, int k0, int m, int kc, int r,
                               float *out);

typedef struct gptc_gemm_isa {
    int mr, nr;             /* microkernel tile */
    int mc, kc, nc;         /* cache blocking: A block mc x kc (L2), B panel kc x nc (L3) */
    gptc_gemm_ukernel kernel;
    gptc_gemm_pack pack_a;  /* may be NULL */
    gptc_gemm_pack pack_b;  /* may be NULL */
} gptc_gemm_isa;

/* The gemm contract of kernels.h (C (M,N) = beta*C + op(A) op(B), row-major) on top of isa.
 * Multithreaded with OpenMP; results are bit-identical for any thread count. */
void gptc_gemm_blocked(const gptc_gemm_isa *isa, int transA, int transB, int M, int N, int K, const float *A,
                       int lda, const float *B, int ldb, float beta, float *C, int ldc);

#endif
