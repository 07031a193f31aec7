/* cuda_internal.h — what the CUDA backend's files share (the .cu files of src/backend/cuda, nvcc only): the compute
 * stream, the error check, the device scratch buffers, the bf16 conversions (round to nearest even, the
 * arithmetic of core.h gptc_f32_to_bf16) and the matrix-product entries of cuda_gemm.cu. */
#ifndef GPTC_BACKEND_CUDA_INTERNAL_H
#define GPTC_BACKEND_CUDA_INTERNAL_H

#include "backend/cuda.h"

#include <cuda_runtime.h>
#include <stdint.h>

/* The compute stream of the selected device: every entry launches on it. */
cudaStream_t gptc_cuda_stream(void);
/* Prints "gptc: CUDA error in WHAT (file:line): message" and aborts when e is not cudaSuccess. */
void gptc_cuda_die(cudaError_t e, const char *what, const char *file, int line);
#define CUDA_CHECK(call)                                                                     \
    do {                                                                                     \
        cudaError_t e_ = (call);                                                             \
        if (e_ != cudaSuccess) gptc_cuda_die(e_, #call, __FILE__, __LINE__);                 \
    } while (0)
/* After a launch: the launch's own error (bad configuration), not waiting for the kernel. */
#define CUDA_LAUNCHED() CUDA_CHECK(cudaGetLastError())

/* Device scratch that grows and is then reused (stream-ordered: cudaMallocAsync / cudaFreeAsync on the
 * compute stream, so a buffer is never released under a kernel still reading it). One buffer per slot,
 * so the users of one call never share one. */
enum { GPTC_CUDA_SCRATCH_GEMM_A, GPTC_CUDA_SCRATCH_GEMM_B, GPTC_CUDA_SCRATCH_REDUCE, GPTC_CUDA_SCRATCH_FLASH,
       GPTC_CUDA_SCRATCH_SLOTS };
void *gptc_cuda_scratch(int slot, size_t bytes);

/* Blocks of `threads` covering n items, capped for grid-stride loops. */
static inline unsigned gptc_cuda_blocks(size_t n, unsigned threads) {
    size_t b = (n + threads - 1) / threads;
    if (b < 1) b = 1;
    return (unsigned)(b > 65535u * 16u ? 65535u * 16u : b);
}

#ifdef __CUDACC__
/* core.h gptc_f32_to_bf16, bit for bit: nearest, ties to even; NaN stays NaN (quiet) */
__device__ static inline uint16_t gptc_dev_f32_to_bf16(float x) {
    uint32_t u = __float_as_uint(x);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u);
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
__device__ static inline float gptc_dev_bf16_to_f32(uint16_t h) { return __uint_as_float((uint32_t)h << 16); }
__device__ static inline float gptc_dev_bf16_round(float x) { return gptc_dev_bf16_to_f32(gptc_dev_f32_to_bf16(x)); }
#endif

/* The matrix products (cuda_gemm.cu), the contracts of kernels.h gemm / gemm_bf16 / gemm_bf16_in16. */
extern "C" void gptc_cuda_gemm(int transA, int transB, int M, int N, int K, const float *A, int lda, const float *B,
                               int ldb, float beta, const float *bias, float *C, int ldc);
extern "C" void gptc_cuda_gemm_bf16(int transA, int transB, int M, int N, int K, const float *A, int lda,
                                    const float *B, int ldb, float beta, const float *bias, float *C, int ldc);
extern "C" void gptc_cuda_gemm_bf16_in16(int transA, int transB, int M, int N, int K, const void *A, int lda,
                                         const void *B, int ldb, int in16, float beta, const float *bias, float *C,
                                         int ldc);
/* The cuBLASLt handle's set-up and release (cuda_gemm.cu), from gptc_cuda_select. */
bool gptc_cuda_gemm_init(void);
/* The table (cuda_kernels.cu), filled once. */
const gptc_kernels *gptc_cuda_table(void);

#endif
