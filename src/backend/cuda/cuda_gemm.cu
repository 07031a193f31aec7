/* cuda_gemm.cu — the CUDA table's matrix products (kernels.h gemm, gemm_bf16, gemm_bf16_in16) through
 * cuBLASLt. The table's arrays are row-major, cuBLASLt's column-major: a row-major (R,S) array with row
 * stride ld is the column-major (S,R) array with leading dimension ld, so C (M,N) = op(A) op(B) is
 * computed as the column-major C^T (N,M) = op(B)^T op(A)^T: cuBLASLt's first operand is our B, its
 * second our A, the transposes kept, m = N, n = M, k = K. The bias (N) is the BIAS epilogue (a vector
 * over the column-major rows, i.e. added to every row of our C); beta 0 or 1 is cuBLASLt's beta.
 *
 * Precision: gemm runs fp32 operands as TF32 (CUBLAS_COMPUTE_32F_FAST_TF32: 10-bit mantissas in the
 * multiplier, fp32 sums), about 1e-3 relative of the fp32 reference — not bit-compatible with the CPU's
 * fp32 gemm, stated in docs/architecture.md. gemm_bf16 rounds each fp32 operand to bf16 (nearest even,
 * into device scratch) and multiplies bf16 x bf16 with fp32 sums (CUBLAS_COMPUTE_32F), C, bias and beta
 * in fp32: the kernels.h bf16 contract up to the order of the sums. gemm_bf16_in16 reads the operands
 * flagged bf16 as they are. Where cuBLASLt offers no algorithm (odd alignments, K = 0) a plain kernel
 * computes the same contract (one thread per element of C, fp32 sums in k order). */
#include "backend/cuda/cuda_internal.h"

#include <cublasLt.h>
#include <stdio.h>

static cublasLtHandle_t g_lt;
static void *g_ws;                        /* cuBLASLt's workspace */
static const size_t g_ws_bytes = 32u << 20;

bool gptc_cuda_gemm_init(void) {
    if (cublasLtCreate(&g_lt) != CUBLAS_STATUS_SUCCESS) return false;
    if (cudaMalloc(&g_ws, g_ws_bytes) != cudaSuccess) {
        cudaGetLastError();
        cublasLtDestroy(g_lt);
        return false;
    }
    return true;
}

/* the largest power of two (<= 256) dividing the address: cuBLASLt's alignment preference */
static uint32_t align_of(const void *p) {
    uintptr_t a = (uintptr_t)p;
    uint32_t al = 256;
    while (al > 1 && a % al) al >>= 1;
    return al;
}

#define LT_OK(call) (ok = ok && (call) == CUBLAS_STATUS_SUCCESS)

/* One cuBLASLt product in row-major terms (see the file's comment); false when cuBLASLt has no
 * algorithm for it (the caller then runs the plain kernel). A, B of type ta, tb; C fp32. */
static bool lt_matmul(int transA, int transB, int M, int N, int K, const void *A, int lda, cudaDataType_t ta,
                      const void *B, int ldb, cudaDataType_t tb, float beta, const float *bias, float *C, int ldc,
                      cublasComputeType_t ct) {
    if (K <= 0) return false;
    bool ok = true;
    cublasLtMatmulDesc_t op = NULL;
    cublasLtMatrixLayout_t la = NULL, lb = NULL, lc = NULL;
    cublasLtMatmulPreference_t pref = NULL;
    cublasOperation_t opa = transB ? CUBLAS_OP_T : CUBLAS_OP_N, opb = transA ? CUBLAS_OP_T : CUBLAS_OP_N;
    LT_OK(cublasLtMatmulDescCreate(&op, ct, CUDA_R_32F));
    LT_OK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &opa, sizeof opa));
    LT_OK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &opb, sizeof opb));
    if (bias) {
        cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_BIAS;
        cudaDataType_t bt = CUDA_R_32F;
        LT_OK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi));
        LT_OK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias));
        LT_OK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bt, sizeof bt));
    }
    /* cuBLASLt's A is our B: (N,K) column-major untransposed, i.e. stored (K,N) row-major */
    LT_OK(cublasLtMatrixLayoutCreate(&la, tb, opa == CUBLAS_OP_N ? N : K, opa == CUBLAS_OP_N ? K : N, ldb));
    LT_OK(cublasLtMatrixLayoutCreate(&lb, ta, opb == CUBLAS_OP_N ? K : M, opb == CUBLAS_OP_N ? M : K, lda));
    LT_OK(cublasLtMatrixLayoutCreate(&lc, CUDA_R_32F, N, M, ldc));
    LT_OK(cublasLtMatmulPreferenceCreate(&pref));
    uint64_t ws = g_ws_bytes;
    uint32_t aa = align_of(B), ab = align_of(A), ac = align_of(C);
    LT_OK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws));
    LT_OK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &aa, sizeof aa));
    LT_OK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &ab, sizeof ab));
    LT_OK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &ac, sizeof ac));
    LT_OK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &ac, sizeof ac));
    cublasLtMatmulHeuristicResult_t h;
    int found = 0;
    LT_OK(cublasLtMatmulAlgoGetHeuristic(g_lt, op, la, lb, lc, lc, pref, 1, &h, &found));
    ok = ok && found > 0;
    float alpha = 1.0f;
    LT_OK(cublasLtMatmul(g_lt, op, &alpha, B, la, A, lb, &beta, C, lc, C, lc, &h.algo, g_ws, g_ws_bytes,
                         gptc_cuda_stream()));
    if (pref) cublasLtMatmulPreferenceDestroy(pref);
    if (lc) cublasLtMatrixLayoutDestroy(lc);
    if (lb) cublasLtMatrixLayoutDestroy(lb);
    if (la) cublasLtMatrixLayoutDestroy(la);
    if (op) cublasLtMatmulDescDestroy(op);
    return ok;
}

/* element (r, c) of an operand stored row-major with stride ld, fp32 or bf16 (x16), rounded to bf16 when rnd */
__device__ static inline float operand(const void *X, int x16, int rnd, size_t r, size_t c, int ld) {
    if (x16) return gptc_dev_bf16_to_f32(((const uint16_t *)X)[r * ld + c]);
    float v = ((const float *)X)[r * ld + c];
    return rnd ? gptc_dev_bf16_round(v) : v;
}

/* The plain product: C (M,N) = beta*C + op(A) op(B) + bias, one thread per element, fp32 sums in k order. */
__global__ static void gemm_plain(int transA, int transB, int M, int N, int K, const void *A, int lda, int a16,
                                  const void *B, int ldb, int b16, int rnd, float beta, const float *bias, float *C,
                                  int ldc) {
    size_t total = (size_t)M * N;
    for (size_t e = blockIdx.x * (size_t)blockDim.x + threadIdx.x; e < total; e += (size_t)gridDim.x * blockDim.x) {
        size_t i = e / N, j = e % N;
        float s = 0;
        for (int k = 0; k < K; k++) {
            float a = transA ? operand(A, a16, rnd, k, i, lda) : operand(A, a16, rnd, i, k, lda);
            float b = transB ? operand(B, b16, rnd, j, k, ldb) : operand(B, b16, rnd, k, j, ldb);
            s += a * b;
        }
        float *c = C + i * ldc + j;
        float v = (beta == 0.0f ? 0.0f : *c * beta) + s;
        *c = bias ? v + bias[j] : v;
    }
}

static void plain(int transA, int transB, int M, int N, int K, const void *A, int lda, int a16, const void *B,
                  int ldb, int b16, int rnd, float beta, const float *bias, float *C, int ldc) {
    gemm_plain<<<gptc_cuda_blocks((size_t)M * N, 256), 256, 0, gptc_cuda_stream()>>>(
        transA, transB, M, N, K, A, lda, a16, B, ldb, b16, rnd, beta, bias, C, ldc);
    CUDA_LAUNCHED();
}

/* dst (rows, cols) packed = x (rows, cols; row stride ld) rounded to bf16 */
__global__ static void pack_bf16(uint16_t *dst, const float *x, int rows, int cols, int ld) {
    size_t total = (size_t)rows * cols;
    for (size_t e = blockIdx.x * (size_t)blockDim.x + threadIdx.x; e < total; e += (size_t)gridDim.x * blockDim.x)
        dst[e] = gptc_dev_f32_to_bf16(x[(e / cols) * ld + e % cols]);
}

/* A bf16 copy of an fp32 operand stored (rows, cols) with stride ld, into scratch slot `slot`; the
 * copy's stride is cols. */
static const uint16_t *to_bf16_operand(int slot, const float *x, int rows, int cols, int ld) {
    uint16_t *d = (uint16_t *)gptc_cuda_scratch(slot, sizeof(uint16_t) * (size_t)rows * cols + 16);
    pack_bf16<<<gptc_cuda_blocks((size_t)rows * cols, 256), 256, 0, gptc_cuda_stream()>>>(d, x, rows, cols, ld);
    CUDA_LAUNCHED();
    return d;
}

extern "C" void gptc_cuda_gemm(int transA, int transB, int M, int N, int K, const float *A, int lda, const float *B,
                               int ldb, float beta, const float *bias, float *C, int ldc) {
    if (M <= 0 || N <= 0) return;
    if (!lt_matmul(transA, transB, M, N, K, A, lda, CUDA_R_32F, B, ldb, CUDA_R_32F, beta, bias, C, ldc,
                   CUBLAS_COMPUTE_32F_FAST_TF32))
        plain(transA, transB, M, N, K, A, lda, 0, B, ldb, 0, 0, beta, bias, C, ldc);
}

extern "C" void gptc_cuda_gemm_bf16_in16(int transA, int transB, int M, int N, int K, const void *A, int lda,
                                         const void *B, int ldb, int in16, float beta, const float *bias, float *C,
                                         int ldc) {
    if (M <= 0 || N <= 0) return;
    int a16 = (in16 & GPTC_GEMM_A16) != 0, b16 = (in16 & GPTC_GEMM_B16) != 0;
    if (K > 0) {
        const void *a = A, *b = B;
        int la = lda, lb = ldb;
        int ar = transA ? K : M, ac = transA ? M : K, br = transB ? N : K, bc = transB ? K : N; /* as stored */
        if (!a16) a = to_bf16_operand(GPTC_CUDA_SCRATCH_GEMM_A, (const float *)A, ar, ac, lda), la = ac;
        if (!b16) b = to_bf16_operand(GPTC_CUDA_SCRATCH_GEMM_B, (const float *)B, br, bc, ldb), lb = bc;
        if (lt_matmul(transA, transB, M, N, K, a, la, CUDA_R_16BF, b, lb, CUDA_R_16BF, beta, bias, C, ldc,
                      CUBLAS_COMPUTE_32F))
            return;
    }
    plain(transA, transB, M, N, K, A, lda, a16, B, ldb, b16, 1, beta, bias, C, ldc);
}

extern "C" void gptc_cuda_gemm_bf16(int transA, int transB, int M, int N, int K, const float *A, int lda,
                                    const float *B, int ldb, float beta, const float *bias, float *C, int ldc) {
    gptc_cuda_gemm_bf16_in16(transA, transB, M, N, K, A, lda, B, ldb, 0, beta, bias, C, ldc);
}
