/* amx.h — private to src/kernels: the AMX-BF16 kernels of x86_amx/ (built with the AMX and AVX-512
 * flags; called only when gptc_cpu_amx_usable()). */
#ifndef GPTC_KERNELS_AMX_H
#define GPTC_KERNELS_AMX_H

#include "kernels/kernels.h"

/* gemm_amx.c: sets gemm_bf16 (and its blocking) to the AMX kernel; the "amx" level's overlay. */
void gptc_kernels_overlay_amx(gptc_kernels *k);
/* gemm_amx.c: its packers (the gptc_gemm_pack contract of gemm/gemm_driver.h; bf16, rounded to nearest
 * even): A in the layout with s = 32 (r a multiple of 16), B in the s = 2 layout with kc rounded up to
 * 32. They need AVX512_BF16, not AMX: for tests. */
void gptc_amx_gemm_pack_a(int trans, const float *X, int ldx, int i0, int k0, int m, int kc, int r, void *out);
void gptc_amx_gemm_pack_b(int trans, const float *X, int ldx, int i0, int k0, int m, int kc, int r, void *out);
/* gemm_amx.c: runs iters x 6 tdpbf16ps of 16 x 16 x 32 multiply-adds (iters*6*16384 flops) in tiles,
 * configuring and releasing this thread's tiles; needs AMX-BF16 and the permission. */
float gptc_amx_bf16_probe(long iters);
/* gemm_amx_soft.c: the gemm_bf16 of gemm_amx.c with its tile instructions carried out in C (needs
 * AVX512_BF16 only): for tests of its packing, tile plan and epilogue on CPUs without AMX. */
void gptc_amx_soft_gemm_bf16(int transA, int transB, int M, int N, int K, const float *A, int lda, const float *B,
                             int ldb, float beta, const float *bias, float *C, int ldc);
/* gemm_amx_soft.c: its gemm_bf16_in16 (bf16-source operands widened, then the packers above). */
void gptc_amx_soft_gemm_bf16_in16(int transA, int transB, int M, int N, int K, const void *A, int lda, const void *B,
                                  int ldb, int in16, float beta, const float *bias, float *C, int ldc);

#endif
