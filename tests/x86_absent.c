/* x86_absent.c — off x86 (make test-aarch64) the x86 kernels (src/kernels/x86_*) are not built, but
 * the kernel tests name their entry points, calling them only when gptc_kernels_level("avx2" or
 * "avx512") is non-NULL, which it never is there. These definitions let the tests link; one that is
 * called anyway (a test that forgot that check) stops the run with the function's name. */
#if !(defined(__x86_64__) || defined(__i386__))
#include "kernels/attention.h"
#include "kernels/gelu.h"
#include "kernels/x86_amx/amx.h"
#include "kernels/x86_avx2/avx2.h"
#include "kernels/x86_avx512/avx512.h"

#include <stdio.h>
#include <stdlib.h>

static void absent(const char *fn) {
    fprintf(stderr, "%s: an x86 kernel, not built for this target, was called without checking "
                    "gptc_kernels_level first\n", fn);
    abort();
}

#define FLASH_FWD_ARGS                                                                                            \
    float *o, float *lse, const float *q, const float *k, const float *v, int B, int NH, int T, int HS,          \
        float dropout, uint64_t seed
#define FLASH_BWD_ARGS                                                                                            \
    float *dq, float *dk, float *dv, const float *do_, const float *q, const float *k, const float *v,          \
        const float *o, const float *lse, int B, int NH, int T, int HS, float dropout, uint64_t seed
void gptc_flash_fwd_avx2(FLASH_FWD_ARGS) { absent(__func__); }
void gptc_flash_bwd_avx2(FLASH_BWD_ARGS) { absent(__func__); }
void gptc_flash_fwd_avx512(FLASH_FWD_ARGS) { absent(__func__); }
void gptc_flash_bwd_avx512(FLASH_BWD_ARGS) { absent(__func__); }
void gptc_flash_fwd_bf16_avx512(FLASH_FWD_ARGS) { absent(__func__); }
void gptc_flash_bwd_bf16_avx512(FLASH_BWD_ARGS) { absent(__func__); }
void gptc_flash_fwd_bf16_dp(FLASH_FWD_ARGS) { absent(__func__); }
void gptc_flash_bwd_bf16_dp(FLASH_BWD_ARGS) { absent(__func__); }

void gptc_avx2_gelu_fwd(gptc_gelu_kind f, float *out, const float *inp, size_t n) { absent(__func__); }
void gptc_avx2_gelu_bwd(gptc_gelu_kind f, float *dinp, const float *inp, const float *dout, size_t n) { absent(__func__); }
void gptc_avx2_tanh(float *out, const float *inp, size_t n) { absent(__func__); }
void gptc_avx512_gelu_fwd(gptc_gelu_kind f, float *out, const float *inp, size_t n) { absent(__func__); }
void gptc_avx512_gelu_bwd(gptc_gelu_kind f, float *dinp, const float *inp, const float *dout, size_t n) { absent(__func__); }
void gptc_avx512_tanh(float *out, const float *inp, size_t n) { absent(__func__); }

void gptc_avx512_gemm_pack(int trans, const float *X, int ldx, int i0, int k0, int m, int kc, int r, void *out) {
    absent(__func__);
}
void gptc_avx512_gemm_pack_bf16(int trans, const float *X, int ldx, int i0, int k0, int m, int kc, int r, void *out) {
    absent(__func__);
}
void gptc_avx512_gemm_bf16_dp(int transA, int transB, int M, int N, int K, const float *A, int lda, const float *B,
                              int ldb, float beta, const float *bias, float *C, int ldc) {
    absent(__func__);
}
bool gptc_avx512_bf16_native(void) { return false; }
void gptc_avx512_gemm_bf16_emulated(int transA, int transB, int M, int N, int K, const float *A, int lda,
                                    const float *B, int ldb, float beta, const float *bias, float *C, int ldc) {
    absent(__func__);
}
void gptc_amx_gemm_pack_a(int trans, const float *X, int ldx, int i0, int k0, int m, int kc, int r, void *out) {
    absent(__func__);
}
void gptc_amx_gemm_pack_b(int trans, const float *X, int ldx, int i0, int k0, int m, int kc, int r, void *out) {
    absent(__func__);
}
void gptc_amx_soft_gemm_bf16(int transA, int transB, int M, int N, int K, const float *A, int lda, const float *B,
                             int ldb, float beta, const float *bias, float *C, int ldc) {
    absent(__func__);
}
void gptc_avx512_gemm_bf16_dp_in16(int transA, int transB, int M, int N, int K, const void *A, int lda,
                                   const void *B, int ldb, int in16, float beta, const float *bias, float *C, int ldc) {
    absent(__func__);
}
void gptc_avx512_gemm_bf16_emulated_in16(int transA, int transB, int M, int N, int K, const void *A, int lda,
                                         const void *B, int ldb, int in16, float beta, const float *bias, float *C,
                                         int ldc) {
    absent(__func__);
}
void gptc_avx512_gemm_pack16(int trans, const uint16_t *X, int ldx, int i0, int k0, int m, int kc, int r, void *out) {
    absent(__func__);
}
void gptc_avx512_gemm_pack16_bf16(int trans, const uint16_t *X, int ldx, int i0, int k0, int m, int kc, int r,
                                  void *out) {
    absent(__func__);
}
float gptc_amx_bf16_probe(long iters) {
    absent(__func__);
    return 0;
}
void gptc_amx_soft_gemm_bf16_in16(int transA, int transB, int M, int N, int K, const void *A, int lda, const void *B,
                                  int ldb, int in16, float beta, const float *bias, float *C, int ldc) {
    absent(__func__);
}
void gptc_avx512_zero_stream(float *x, size_t n) { absent(__func__); }
bool gptc_avx512_bf16_convert(bool on) {
    absent(__func__);
    return on;
}
void gptc_avx2_zero_stream(float *x, size_t n) { absent(__func__); }
#else
typedef int gptc_x86_absent_unused; /* x86: the real kernels are linked; ISO C wants a declaration */
#endif
