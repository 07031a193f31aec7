/* avx512.h — private to src/kernels/x86_avx512: the registration function of each operator group. */
#ifndef GPTC_KERNELS_AVX512_H
#define GPTC_KERNELS_AVX512_H

#include "kernels/kernels.h"

void gptc_avx512_overlay_gemm(gptc_kernels *k);        /* gemm_avx512.c */
/* gemm_avx512.c: its packer (the gptc_gemm_pack contract of gemm/gemm_driver.h), for tests */
void gptc_avx512_gemm_pack(int trans, const float *X, int ldx, int i0, int k0, int m, int kc, int r, void *out);
/* gemm_avx512.c: its bf16 packer (k pairs of bf16, the layout of gemm_driver.h with s = 2; needs
 * AVX512_BF16), for tests */
void gptc_avx512_gemm_pack_bf16(int trans, const float *X, int ldx, int i0, int k0, int m, int kc, int r, void *out);
/* gemm_avx512.c: gemm_bf16 with vdpbf16ps (needs AVX512_BF16; the table's gemm_bf16 where
 * gptc_avx512_bf16_native says it pays), and that rule. */
void gptc_avx512_gemm_bf16_dp(int transA, int transB, int M, int N, int K, const float *A, int lda, const float *B,
                              int ldb, float beta, const float *bias, float *C, int ldc);
bool gptc_avx512_bf16_native(void);
/* gemm_avx512.c: gemm_bf16 for AVX-512 CPUs without AVX512_BF16 (the fp32 kernel on bf16-rounded
 * panels); the table uses it only on such CPUs, tests call it directly. */
void gptc_avx512_gemm_bf16_emulated(int transA, int transB, int M, int N, int K, const float *A, int lda,
                                    const float *B, int ldb, float beta, const float *bias, float *C, int ldc);
/* gemm_avx512.c: the same two with operands that may be stored in bf16 (kernels.h gemm_bf16_in16),
 * and the packers from bf16 sources behind them (fp32 layout; k pairs), for tests */
void gptc_avx512_gemm_bf16_dp_in16(int transA, int transB, int M, int N, int K, const void *A, int lda,
                                   const void *B, int ldb, int in16, float beta, const float *bias, float *C, int ldc);
void gptc_avx512_gemm_bf16_emulated_in16(int transA, int transB, int M, int N, int K, const void *A, int lda,
                                         const void *B, int ldb, int in16, float beta, const float *bias, float *C,
                                         int ldc);
void gptc_avx512_gemm_pack16(int trans, const uint16_t *X, int ldx, int i0, int k0, int m, int kc, int r, void *out);
void gptc_avx512_gemm_pack16_bf16(int trans, const uint16_t *X, int ldx, int i0, int k0, int m, int kc, int r,
                                  void *out);
void gptc_avx512_overlay_elementwise(gptc_kernels *k); /* elementwise_avx512.c */
/* elementwise_avx512.c: whether its bf16 stores (the _bf16 entries, to_bf16, adamw16) round with
 * vcvtneps2bf16 (true needs AVX512_BF16; the overlay sets it from CPUID) or with integer operations, which
 * give the same bits; returns the setting before. Tests call it to run both. */
bool gptc_avx512_bf16_convert(bool on);
void gptc_avx512_overlay_attention(gptc_kernels *k);   /* attention_avx512.c */
void gptc_avx512_overlay_memops(gptc_kernels *k);      /* memops_avx512.c */
void gptc_avx512_overlay_matvec(gptc_kernels *k);      /* matvec_avx512.c */
/* memops_avx512.c: the zero entry's non-temporal path, which it takes for calls of one core's L2 cache
 * or more (any x, n), for tests */
void gptc_avx512_zero_stream(float *x, size_t n);

/* peak_avx512.c: runs iters x 12 FMAs of 16 lanes (iters*12*16*2 flops) in registers. */
float gptc_avx512_fma_probe(long iters);
/* peak_avx512.c: runs iters x 12 vdpbf16ps of 16 lanes x 2 multiply-adds (iters*12*32*2 flops) in
 * registers; needs AVX512_BF16. */
float gptc_avx512_bf16_probe(long iters);

#endif
