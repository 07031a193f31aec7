/* cuda_kernels.cu — the CUDA backend's operator table (kernels.h gptc_kernels): every entry as CUDA
 * kernels launched on the compute stream, each following its kernels.h contract (accumulate vs
 * overwrite, padding columns, bf16 storage rounded to nearest even). Correctness first: plain kernels,
 * one thread per element, one block per row, one warp per attention row.
 *
 * Determinism: no atomics anywhere. The weight-gradient reductions sum in a fixed order: encoder_bwd
 * walks the rows in order per channel (the reference's order); bias_bwd and the LayerNorm's dw, db sum
 * fixed row chunks, then the chunks in order (colsum_*); grad_sumsq sums fixed chunks in double, then
 * the chunks in order; block reductions are fixed trees and warp sums xor butterflies (every lane gets
 * the same bits). So the same inputs give the same bits run to run.
 *
 * Shapes are kernels.h's; "row" below is one of N rows of C (or Vp) floats. */
#include "backend/cuda/cuda_internal.h"
#include "kernels/philox.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define STREAM gptc_cuda_stream()
#define GRID_STRIDE(e, total) \
    for (size_t e = blockIdx.x * (size_t)blockDim.x + threadIdx.x; e < (total); e += (size_t)gridDim.x * blockDim.x)
enum { TPB = 256 }; /* threads per block of the row kernels (a power of two: the reduction trees) */

/* ---- reductions */

/* The block's sum of v (every thread gets it); sh: TPB entries of shared memory. A fixed tree. */
template <typename T> __device__ static T block_sum(T v, T *sh) {
    unsigned tid = threadIdx.x;
    sh[tid] = v;
    __syncthreads();
    for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
        if (tid < s) sh[tid] += sh[tid + s];
        __syncthreads();
    }
    T r = sh[0];
    __syncthreads();
    return r;
}
__device__ static float block_max(float v, float *sh) {
    unsigned tid = threadIdx.x;
    sh[tid] = v;
    __syncthreads();
    for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
        if (tid < s) sh[tid] = fmaxf(sh[tid], sh[tid + s]);
        __syncthreads();
    }
    float r = sh[0];
    __syncthreads();
    return r;
}
/* The warp's sum of v: an xor butterfly, each pair added in either order (commutative), so every lane
 * holds the same bits. */
__device__ static inline float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

__device__ static inline void store(float *p, float v) { *p = v; }
__device__ static inline void store(uint16_t *p, float v) { *p = gptc_dev_f32_to_bf16(v); }

/* Column sums of a row-major (N, C) quantity in a fixed order: stage 1 sums chunk r of the rows into
 * part[k][r][c] (k: one of nout quantities), stage 2 adds the chunks in order to out_k[c]. */
enum { COLSUM_CHUNKS = 64 };
static int colsum_chunks(int N) { return N < COLSUM_CHUNKS ? (N > 0 ? N : 1) : COLSUM_CHUNKS; }

__global__ static void colsum_finish(float *out0, float *out1, const float *part, int R, int C) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C) return;
    float a = out0[c];
    for (int r = 0; r < R; r++) a += part[(size_t)r * C + c];
    out0[c] = a;
    if (out1) {
        const float *p1 = part + (size_t)R * C;
        float b = out1[c];
        for (int r = 0; r < R; r++) b += p1[(size_t)r * C + c];
        out1[c] = b;
    }
}

/* ---- encoder */

/* out (B,T,C) = wte[inp] (V,C) + wpe[t] (maxT,C) */
__global__ static void encoder_fwd_k(float *out, const int *inp, const float *wte, const float *wpe, int B, int T, int C) {
    GRID_STRIDE(e, (size_t)B * T * C) {
        size_t bt = e / C, c = e % C;
        out[e] = wte[(size_t)inp[bt] * C + c] + wpe[(bt % T) * C + c];
    }
}
static void c_encoder_fwd(float *out, const int *inp, const float *wte, const float *wpe, int B, int T, int C) {
    encoder_fwd_k<<<gptc_cuda_blocks((size_t)B * T * C, TPB), TPB, 0, STREAM>>>(out, inp, wte, wpe, B, T, C);
    CUDA_LAUNCHED();
}
/* dwte (V,C) +=: one thread per channel walks the (b,t) rows in order (repeated tokens add in row
 * order, as the reference does; no atomics) */
__global__ static void encoder_bwd_wte(float *dwte, const float *dout, const int *inp, int BT, int C) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C) return;
    for (int bt = 0; bt < BT; bt++) dwte[(size_t)inp[bt] * C + c] += dout[(size_t)bt * C + c];
}
/* dwpe (maxT,C) +=: one thread per (t, c) adds the batch rows in b order */
__global__ static void encoder_bwd_wpe(float *dwpe, const float *dout, int B, int T, int C) {
    GRID_STRIDE(e, (size_t)T * C) {
        size_t t = e / C, c = e % C;
        float a = dwpe[e];
        for (int b = 0; b < B; b++) a += dout[((size_t)b * T + t) * C + c];
        dwpe[e] = a;
    }
}
static void c_encoder_bwd(float *dwte, float *dwpe, const float *dout, const int *inp, int B, int T, int C) {
    if (dwte) { /* NULL: a frozen embedding */
        encoder_bwd_wte<<<(C + 127) / 128, 128, 0, STREAM>>>(dwte, dout, inp, B * T, C);
        CUDA_LAUNCHED();
    }
    if (dwpe) {
        encoder_bwd_wpe<<<gptc_cuda_blocks((size_t)T * C, TPB), TPB, 0, STREAM>>>(dwpe, dout, B, T, C);
        CUDA_LAUNCHED();
    }
}

/* ---- LayerNorm (eps 1e-5, biased variance) */

/* One block per row: res = a + b2 first when b2 (res may alias a or b2: each thread reads its own
 * elements before writing them), then out = (x - mean) * rstd * w + bias; mean, rstd (N). */
template <typename OutT>
__global__ static void layernorm_k(float *res, OutT *out, float *mean, float *rstd, const float *a, const float *b2,
                                   const float *w, const float *bias, int C) {
    __shared__ float sh[TPB];
    size_t n = blockIdx.x;
    const float *x = a + n * C;
    if (b2) {
        const float *y = b2 + n * C;
        float *r = res + n * C;
        for (int c = threadIdx.x; c < C; c += blockDim.x) r[c] = x[c] + y[c];
        x = r; /* this thread reads back only what it wrote */
    }
    float s = 0;
    for (int c = threadIdx.x; c < C; c += blockDim.x) s += x[c];
    float m = block_sum(s, sh) / C;
    float v = 0;
    for (int c = threadIdx.x; c < C; c += blockDim.x) v += (x[c] - m) * (x[c] - m);
    float rs = 1.0f / sqrtf(block_sum(v, sh) / C + 1e-5f);
    OutT *o = out + n * C;
    for (int c = threadIdx.x; c < C; c += blockDim.x) store(&o[c], (x[c] - m) * rs * w[c] + bias[c]);
    if (threadIdx.x == 0) mean[n] = m, rstd[n] = rs;
}
static void c_layernorm_fwd(float *out, float *mean, float *rstd, const float *inp, const float *w, const float *b, int N,
                            int C) {
    if (N <= 0) return;
    layernorm_k<float><<<N, TPB, 0, STREAM>>>(NULL, out, mean, rstd, inp, NULL, w, b, C);
    CUDA_LAUNCHED();
}
static void c_layernorm_fwd_bf16(uint16_t *out, float *mean, float *rstd, const float *inp, const float *w,
                                 const float *b, int N, int C) {
    if (N <= 0) return;
    layernorm_k<uint16_t><<<N, TPB, 0, STREAM>>>(NULL, out, mean, rstd, inp, NULL, w, b, C);
    CUDA_LAUNCHED();
}
static void c_residual_layernorm_fwd(float *res, float *out, float *mean, float *rstd, const float *a, const float *b,
                                     const float *w, const float *bias, int N, int C) {
    if (N <= 0) return;
    layernorm_k<float><<<N, TPB, 0, STREAM>>>(res, out, mean, rstd, a, b, w, bias, C);
    CUDA_LAUNCHED();
}
static void c_residual_layernorm_fwd_bf16(float *res, uint16_t *out, float *mean, float *rstd, const float *a,
                                          const float *b, const float *w, const float *bias, int N, int C) {
    if (N <= 0) return;
    layernorm_k<uint16_t><<<N, TPB, 0, STREAM>>>(res, out, mean, rstd, a, b, w, bias, C);
    CUDA_LAUNCHED();
}

/* dinp (row) = base (NULL: 0; may alias dinp) + the LayerNorm backward of dout; one block per row */
__global__ static void layernorm_bwd_rows(float *dinp, const float *base, const float *dout, const float *inp,
                                          const float *w, const float *mean, const float *rstd, int C) {
    __shared__ float sh[TPB];
    size_t n = blockIdx.x;
    const float *x = inp + n * C, *d = dout + n * C;
    float m = mean[n], s = rstd[n], a = 0, b = 0;
    for (int c = threadIdx.x; c < C; c += blockDim.x) {
        float norm = (x[c] - m) * s, dn = w[c] * d[c];
        a += dn;
        b += dn * norm;
    }
    float dnorm_mean = block_sum(a, sh) / C, dnorm_norm_mean = block_sum(b, sh) / C;
    float *di = dinp + n * C;
    const float *bs = base ? base + n * C : NULL;
    for (int c = threadIdx.x; c < C; c += blockDim.x) {
        float norm = (x[c] - m) * s, dn = w[c] * d[c];
        di[c] = (bs ? bs[c] : 0.0f) + (dn - dnorm_mean - norm * dnorm_norm_mean) * s;
    }
}
/* stage 1 of dw, db: chunk r of the rows, column c -> part[0][r][c] (dw), part[1][r][c] (db) */
__global__ static void layernorm_bwd_cols(float *part, const float *dout, const float *inp, const float *mean,
                                          const float *rstd, int N, int C, int R) {
    int c = blockIdx.x * blockDim.x + threadIdx.x, r = blockIdx.y;
    if (c >= C) return;
    int per = (N + R - 1) / R, n0 = r * per, n1 = n0 + per < N ? n0 + per : N;
    float dw = 0, db = 0;
    for (int n = n0; n < n1; n++) {
        float d = dout[(size_t)n * C + c];
        dw += (inp[(size_t)n * C + c] - mean[n]) * rstd[n] * d;
        db += d;
    }
    part[(size_t)r * C + c] = dw;
    part[((size_t)R + r) * C + c] = db;
}
static void layernorm_bwd_any(float *dinp, const float *base, float *dw, float *db, const float *dout, const float *inp,
                              const float *w, const float *mean, const float *rstd, int N, int C) {
    if (N <= 0 || C <= 0) return;
    layernorm_bwd_rows<<<N, TPB, 0, STREAM>>>(dinp, base, dout, inp, w, mean, rstd, C);
    CUDA_LAUNCHED();
    int R = colsum_chunks(N);
    float *part = (float *)gptc_cuda_scratch(GPTC_CUDA_SCRATCH_REDUCE, sizeof(float) * 2 * (size_t)R * C);
    layernorm_bwd_cols<<<dim3((C + 127) / 128, R), 128, 0, STREAM>>>(part, dout, inp, mean, rstd, N, C, R);
    CUDA_LAUNCHED();
    colsum_finish<<<(C + 127) / 128, 128, 0, STREAM>>>(dw, db, part, R, C);
    CUDA_LAUNCHED();
}
static void c_layernorm_bwd(float *dinp, float *dw, float *db, const float *dout, const float *inp, const float *w,
                            const float *mean, const float *rstd, int N, int C) {
    layernorm_bwd_any(dinp, dinp, dw, db, dout, inp, w, mean, rstd, N, C);
}
static void c_layernorm_bwd_residual(float *dinp, float *dw, float *db, const float *dskip, const float *dout,
                                     const float *inp, const float *w, const float *mean, const float *rstd, int N,
                                     int C) {
    layernorm_bwd_any(dinp, dskip, dw, db, dout, inp, w, mean, rstd, N, C);
}

/* ---- bias, residual */

__global__ static void bias_fwd_k(float *out, const float *bias, int N, int OC) {
    GRID_STRIDE(e, (size_t)N * OC) out[e] += bias[e % OC];
}
static void c_bias_fwd(float *out, const float *bias, int N, int OC) {
    bias_fwd_k<<<gptc_cuda_blocks((size_t)N * OC, TPB), TPB, 0, STREAM>>>(out, bias, N, OC);
    CUDA_LAUNCHED();
}
__global__ static void bias_bwd_cols(float *part, const float *dout, int N, int OC, int R) {
    int c = blockIdx.x * blockDim.x + threadIdx.x, r = blockIdx.y;
    if (c >= OC) return;
    int per = (N + R - 1) / R, n0 = r * per, n1 = n0 + per < N ? n0 + per : N;
    float s = 0;
    for (int n = n0; n < n1; n++) s += dout[(size_t)n * OC + c];
    part[(size_t)r * OC + c] = s;
}
static void c_bias_bwd(float *dbias, const float *dout, int N, int OC) {
    if (N <= 0 || OC <= 0) return;
    int R = colsum_chunks(N);
    float *part = (float *)gptc_cuda_scratch(GPTC_CUDA_SCRATCH_REDUCE, sizeof(float) * (size_t)R * OC);
    bias_bwd_cols<<<dim3((OC + 127) / 128, R), 128, 0, STREAM>>>(part, dout, N, OC, R);
    CUDA_LAUNCHED();
    colsum_finish<<<(OC + 127) / 128, 128, 0, STREAM>>>(dbias, NULL, part, R, OC);
    CUDA_LAUNCHED();
}

__global__ static void residual_fwd_k(float *out, const float *a, const float *b, size_t N) {
    GRID_STRIDE(e, N) out[e] = a[e] + b[e];
}
static void c_residual_fwd(float *out, const float *a, const float *b, size_t N) {
    if (!N) return;
    residual_fwd_k<<<gptc_cuda_blocks(N, TPB), TPB, 0, STREAM>>>(out, a, b, N);
    CUDA_LAUNCHED();
}
__global__ static void residual_bwd_k(float *da, float *db, const float *dout, size_t N) {
    GRID_STRIDE(e, N) {
        float d = dout[e];
        da[e] += d;
        db[e] += d;
    }
}
static void c_residual_bwd(float *da, float *db, const float *dout, size_t N) {
    if (!N) return;
    residual_bwd_k<<<gptc_cuda_blocks(N, TPB), TPB, 0, STREAM>>>(da, db, dout, N);
    CUDA_LAUNCHED();
}

/* ---- GELU: the three forms (kernels.h), forward into fp32 or bf16, backward accumulating */

enum { GELU_TANH, GELU_ERF, GELU_SIGMOID };
__device__ static inline float gelu_f(int form, float x) {
    if (form == GELU_TANH) return 0.5f * x * (1.0f + tanhf(0.7978845608028654f * (x + 0.044715f * x * x * x)));
    if (form == GELU_ERF) return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f));
    return x / (1.0f + expf(-1.702f * x));
}
__device__ static inline float gelu_grad(int form, float x) {
    if (form == GELU_TANH) {
        float th = tanhf(0.7978845608028654f * (x + 0.044715f * x * x * x)), sech2 = 1.0f - th * th;
        return 0.5f * (1.0f + th) + 0.5f * x * sech2 * 0.7978845608028654f * (1.0f + 3.0f * 0.044715f * x * x);
    }
    if (form == GELU_ERF) {
        float cdf = 0.5f * (1.0f + erff(x * 0.70710678118654752f)), pdf = expf(-0.5f * x * x) * 0.3989422804014327f;
        return cdf + x * pdf;
    }
    float s = 1.0f / (1.0f + expf(-1.702f * x));
    return s + 1.702f * x * s * (1.0f - s);
}
template <int FORM, typename OutT> __global__ static void gelu_fwd_k(OutT *out, const float *inp, size_t N) {
    GRID_STRIDE(e, N) store(&out[e], gelu_f(FORM, inp[e]));
}
template <int FORM> __global__ static void gelu_bwd_k(float *dinp, const float *inp, const float *dout, size_t N) {
    GRID_STRIDE(e, N) dinp[e] += gelu_grad(FORM, inp[e]) * dout[e];
}
#define GELU_ENTRIES(name, FORM)                                                                          \
    static void c_##name##_fwd(float *out, const float *inp, size_t N) {                                  \
        if (!N) return;                                                                                   \
        gelu_fwd_k<FORM, float><<<gptc_cuda_blocks(N, TPB), TPB, 0, STREAM>>>(out, inp, N);               \
        CUDA_LAUNCHED();                                                                                  \
    }                                                                                                     \
    static void c_##name##_fwd_bf16(uint16_t *out, const float *inp, size_t N) {                          \
        if (!N) return;                                                                                   \
        gelu_fwd_k<FORM, uint16_t><<<gptc_cuda_blocks(N, TPB), TPB, 0, STREAM>>>(out, inp, N);            \
        CUDA_LAUNCHED();                                                                                  \
    }                                                                                                     \
    static void c_##name##_bwd(float *dinp, const float *inp, const float *dout, size_t N) {              \
        if (!N) return;                                                                                   \
        gelu_bwd_k<FORM><<<gptc_cuda_blocks(N, TPB), TPB, 0, STREAM>>>(dinp, inp, dout, N);               \
        CUDA_LAUNCHED();                                                                                  \
    }
GELU_ENTRIES(gelu, GELU_TANH)
GELU_ENTRIES(gelu_erf, GELU_ERF)
GELU_ENTRIES(gelu_sigmoid, GELU_SIGMOID)

/* ---- cross-entropy: one block per row, softmax over the first V of Vp columns */

/* the row's max and sum of exp(z - max) over the first V columns */
__device__ static void softmax_stats(const float *z, int V, float *sh, float *maxv, float *sum) {
    float m = -INFINITY;
    for (int v = threadIdx.x; v < V; v += blockDim.x) m = fmaxf(m, z[v]);
    m = block_max(m, sh);
    float s = 0;
    for (int v = threadIdx.x; v < V; v += blockDim.x) s += expf(z[v] - m);
    *maxv = m;
    *sum = block_sum(s, sh);
}
/* losses (N) (when targets), probs (N,Vp) (may alias logits; padding 0) */
__global__ static void xent_fwd_k(float *losses, float *probs, const float *logits, const int *targets, int V, int Vp) {
    __shared__ float sh[TPB];
    size_t n = blockIdx.x;
    const float *z = logits + n * Vp;
    float zt = targets ? z[targets[n]] : 0.0f; /* read by every thread before the reductions' barriers */
    float m, s;
    softmax_stats(z, V, sh, &m, &s);
    float inv = 1.0f / s, *p = probs + n * Vp;
    for (int v = threadIdx.x; v < Vp; v += blockDim.x) p[v] = v < V ? expf(z[v] - m) * inv : 0.0f;
    if (targets && threadIdx.x == 0) losses[n] = m + logf(s) - zt;
}
static void c_crossentropy_fwd(float *losses, float *probs, const float *logits, const int *targets, int N, int V,
                               int Vp) {
    if (N <= 0) return;
    xent_fwd_k<<<N, TPB, 0, STREAM>>>(losses, probs, logits, targets, V, Vp);
    CUDA_LAUNCHED();
}
/* dlogits (N,Vp) += (probs - onehot) * dloss over the first V columns (the reference's order) */
__global__ static void xent_bwd_k(float *dlogits, const float *probs, const int *targets, float dloss, int V, int Vp) {
    size_t n = blockIdx.x;
    int t = targets[n];
    float *d = dlogits + n * Vp;
    const float *p = probs + n * Vp;
    for (int v = threadIdx.x; v < V; v += blockDim.x) {
        float x = d[v] + p[v] * dloss;
        d[v] = v == t ? x - dloss : x;
    }
}
static void c_crossentropy_bwd(float *dlogits, const float *probs, const int *targets, float dloss, int N, int V,
                               int Vp) {
    if (N <= 0) return;
    xent_bwd_k<<<N, TPB, 0, STREAM>>>(dlogits, probs, targets, dloss, V, Vp);
    CUDA_LAUNCHED();
}
/* in place: losses (N), logits (N,Vp) -> (softmax - onehot) * dloss, padding 0 */
__global__ static void xent_fused_k(float *losses, float *logits, const int *targets, float dloss, int V, int Vp) {
    __shared__ float sh[TPB];
    size_t n = blockIdx.x;
    float *z = logits + n * Vp;
    int t = targets[n];
    float zt = z[t];
    float m, s;
    softmax_stats(z, V, sh, &m, &s);
    float inv = 1.0f / s;
    for (int v = threadIdx.x; v < Vp; v += blockDim.x) {
        if (v >= V) {
            z[v] = 0.0f;
            continue;
        }
        float p = expf(z[v] - m) * inv;
        z[v] = (v == t ? p - 1.0f : p) * dloss;
    }
    if (threadIdx.x == 0) losses[n] = m + logf(s) - zt;
}
static void c_crossentropy_fused(float *losses, float *logits, const int *targets, float dloss, int N, int V, int Vp) {
    if (N <= 0) return;
    xent_fused_k<<<N, TPB, 0, STREAM>>>(losses, logits, targets, dloss, V, Vp);
    CUDA_LAUNCHED();
}

/* ---- AdamW (torch.optim.AdamW's order of operations, as the reference) */

__global__ static void adamw_k(float *p, const float *g, float *m, float *v, size_t n, float b1, float b2, float eps,
                               float grad_scale, float step, float bc2_sqrt, float decay) {
    GRID_STRIDE(i, n) {
        float gi = g[i] * grad_scale, pi = p[i] * decay, mi = m[i], vi = v[i];
        mi += (1 - b1) * (gi - mi);
        vi = b2 * vi + (1 - b2) * gi * gi;
        float denom = sqrtf(vi) / bc2_sqrt + eps;
        p[i] = pi - step * (mi / denom);
        m[i] = mi;
        v[i] = vi;
    }
}
static void c_adamw(float *p, const float *g, float *m, float *v, size_t n, float lr, float b1, float b2, float eps,
                    float wd, float grad_scale, int t) {
    if (!n) return;
    float bc1 = 1 - (float)pow(b1, t), bc2 = 1 - (float)pow(b2, t);
    adamw_k<<<gptc_cuda_blocks(n, TPB), TPB, 0, STREAM>>>(p, g, m, v, n, b1, b2, eps, grad_scale, lr / bc1, sqrtf(bc2),
                                                          1 - lr * wd);
    CUDA_LAUNCHED();
}

/* ---- the gradient's sum of squares in double: GPTC_SUMSQ_CHUNKS-like fixed chunks (SUMSQ_BLOCKS of
 * them, one block each, a fixed tree inside), then the chunks in order on one thread */
enum { SUMSQ_BLOCKS = 1024 };
__global__ static void sumsq_part(double *part, const float *x, size_t n) {
    __shared__ double sh[TPB];
    size_t per = (n + SUMSQ_BLOCKS - 1) / SUMSQ_BLOCKS, lo = blockIdx.x * per, hi = lo + per < n ? lo + per : n;
    double s = 0;
    for (size_t i = lo + threadIdx.x; i < hi; i += blockDim.x) s += (double)x[i] * x[i];
    s = block_sum(s, sh);
    if (threadIdx.x == 0) part[blockIdx.x] = s;
}
__global__ static void sumsq_total(double *part) {
    double t = 0;
    for (int b = 0; b < SUMSQ_BLOCKS; b++) t += part[b];
    part[SUMSQ_BLOCKS] = t;
}
static double c_grad_sumsq(const float *x, size_t n) {
    if (!n) return 0;
    double *part = (double *)gptc_cuda_scratch(GPTC_CUDA_SCRATCH_REDUCE, sizeof(double) * (SUMSQ_BLOCKS + 1));
    sumsq_part<<<SUMSQ_BLOCKS, TPB, 0, STREAM>>>(part, x, n);
    CUDA_LAUNCHED();
    sumsq_total<<<1, 1, 0, STREAM>>>(part);
    CUDA_LAUNCHED();
    double total = 0;
    CUDA_CHECK(cudaMemcpyAsync(&total, part + SUMSQ_BLOCKS, sizeof total, cudaMemcpyDeviceToHost, STREAM));
    CUDA_CHECK(cudaStreamSynchronize(STREAM));
    return total;
}

/* ---- zero, dropout, to_bf16 */

static void c_zero(float *x, size_t n) {
    if (n) CUDA_CHECK(cudaMemsetAsync(x, 0, n * sizeof(float), STREAM));
}

/* out (n) = mask * in / (1 - p): one thread per group of four (one Philox call, kernels/philox.h) */
__global__ static void dropout_k(float *out, const float *in, size_t n, uint32_t threshold, float scale, uint64_t seed,
                                 uint64_t stream) {
    GRID_STRIDE(g, (n + 3) / 4) {
        uint32_t w[4];
        gptc_dropout_word4(w, seed, stream, (uint64_t)g);
        for (int j = 0; j < 4; j++) {
            size_t i = g * 4 + j;
            if (i < n) out[i] = (w[j] >> 8) >= threshold ? in[i] * scale : 0.0f;
        }
    }
}
static void c_dropout(float *out, const float *in, size_t n, float p, uint64_t seed, uint64_t stream) {
    if (!n) return;
    if (p <= 0) {
        if (out != in) CUDA_CHECK(cudaMemcpyAsync(out, in, n * sizeof(float), cudaMemcpyDeviceToDevice, STREAM));
        return;
    }
    dropout_k<<<gptc_cuda_blocks((n + 3) / 4, TPB), TPB, 0, STREAM>>>(out, in, n, gptc_flash_threshold(p),
                                                                      1.0f / (1.0f - p), seed, stream);
    CUDA_LAUNCHED();
}

__global__ static void to_bf16_k(uint16_t *out, const float *x, size_t n) {
    GRID_STRIDE(i, n) out[i] = gptc_dev_f32_to_bf16(x[i]);
}
__global__ static void scale_k(float *x, float s, size_t n) {
    GRID_STRIDE(i, n) x[i] *= s;
}
static void c_scale(float *x, float s, size_t n) {
    if (!n) return;
    scale_k<<<gptc_cuda_blocks(n, TPB), TPB, 0, STREAM>>>(x, s, n);
    CUDA_LAUNCHED();
}
static void c_to_bf16(uint16_t *out, const float *x, size_t n) {
    if (!n) return;
    to_bf16_k<<<gptc_cuda_blocks(n, TPB), TPB, 0, STREAM>>>(out, x, n);
    CUDA_LAUNCHED();
}
/* the update, then the copy (two launches on the stream: the device's bandwidth makes a fused kernel a
 * small gain, left for when it is measured) */
static void c_adamw16(float *p, uint16_t *p16, const float *g, float *m, float *v, size_t n, float lr, float b1,
                      float b2, float eps, float wd, float grad_scale, int t) {
    c_adamw(p, g, m, v, n, lr, b1, b2, eps, wd, grad_scale, t);
    c_to_bf16(p16, p, n);
}

/* ---- head reshapes (C = NH*HS): one thread per element of the (B,T,C) rows */

__global__ static void qkv_to_heads_k(float *q, float *k, float *v, const float *qkv, int T, int C, int NH,
                                      size_t total) {
    int HS = C / NH;
    GRID_STRIDE(e, total) {
        size_t bt = e / C, b = bt / T, t = bt % T;
        int c = (int)(e % C), h = c / HS, d = c % HS;
        size_t dst = ((b * NH + h) * T + t) * HS + d;
        const float *row = qkv + bt * 3 * C;
        q[dst] = row[c];
        k[dst] = row[C + c];
        v[dst] = row[2 * C + c];
    }
}
__global__ static void heads_to_qkv_grad_k(float *dqkv, const float *dq, const float *dk, const float *dv, int T, int C,
                                           int NH, size_t total) {
    int HS = C / NH;
    GRID_STRIDE(e, total) {
        size_t bt = e / C, b = bt / T, t = bt % T;
        int c = (int)(e % C), h = c / HS, d = c % HS;
        size_t src = ((b * NH + h) * T + t) * HS + d;
        float *row = dqkv + bt * 3 * C;
        row[c] += dq[src];
        row[C + c] += dk[src];
        row[2 * C + c] += dv[src];
    }
}
template <typename OutT>
__global__ static void heads_to_rows_k(OutT *out, const float *o, int T, int C, int NH, size_t total) {
    int HS = C / NH;
    GRID_STRIDE(e, total) {
        size_t bt = e / C, b = bt / T, t = bt % T;
        int c = (int)(e % C), h = c / HS, d = c % HS;
        store(&out[e], o[((b * NH + h) * T + t) * HS + d]);
    }
}
__global__ static void rows_to_heads_k(float *dheads, const float *drows, int T, int C, int NH, size_t total) {
    int HS = C / NH;
    GRID_STRIDE(e, total) {
        size_t bt = e / C, b = bt / T, t = bt % T;
        int c = (int)(e % C), h = c / HS, d = c % HS;
        dheads[((b * NH + h) * T + t) * HS + d] = drows[e];
    }
}
static void c_qkv_to_heads(float *q, float *k, float *v, const float *qkv, int B, int T, int C, int NH) {
    size_t total = (size_t)B * T * C;
    if (!total) return;
    qkv_to_heads_k<<<gptc_cuda_blocks(total, TPB), TPB, 0, STREAM>>>(q, k, v, qkv, T, C, NH, total);
    CUDA_LAUNCHED();
}
static void c_heads_to_qkv_grad(float *dqkv, const float *dq, const float *dk, const float *dv, int B, int T, int C,
                                int NH) {
    size_t total = (size_t)B * T * C;
    if (!total) return;
    heads_to_qkv_grad_k<<<gptc_cuda_blocks(total, TPB), TPB, 0, STREAM>>>(dqkv, dq, dk, dv, T, C, NH, total);
    CUDA_LAUNCHED();
}
static void c_heads_to_rows(float *out, const float *o, int B, int T, int C, int NH) {
    size_t total = (size_t)B * T * C;
    if (!total) return;
    heads_to_rows_k<float><<<gptc_cuda_blocks(total, TPB), TPB, 0, STREAM>>>(out, o, T, C, NH, total);
    CUDA_LAUNCHED();
}
static void c_heads_to_rows_bf16(uint16_t *out, const float *o, int B, int T, int C, int NH) {
    size_t total = (size_t)B * T * C;
    if (!total) return;
    heads_to_rows_k<uint16_t><<<gptc_cuda_blocks(total, TPB), TPB, 0, STREAM>>>(out, o, T, C, NH, total);
    CUDA_LAUNCHED();
}
static void c_rows_to_heads(float *dheads, const float *drows, int B, int T, int C, int NH) {
    size_t total = (size_t)B * T * C;
    if (!total) return;
    rows_to_heads_k<<<gptc_cuda_blocks(total, TPB), TPB, 0, STREAM>>>(dheads, drows, T, C, NH, total);
    CUDA_LAUNCHED();
}

/* ---- the naive attention (stores the (B,NH,T,T) scores): one thread per query row */

__device__ static float dotf(const float *a, const float *b, int n) {
    float s = 0;
    for (int i = 0; i < n; i++) s += a[i] * b[i];
    return s;
}
__global__ static void attention_fwd_k(float *out, float *preatt, float *att, const float *qkv, int B, int T, int C,
                                       int NH) {
    int HS = C / NH;
    float scale = 1.0f / sqrtf((float)HS);
    GRID_STRIDE(r, (size_t)B * NH * T) {
        size_t b = r / ((size_t)NH * T), h = (r / T) % NH, t = r % T;
        const float *q = qkv + (b * T + t) * 3 * C + h * HS;
        float *pre = preatt + r * T, *a = att + r * T;
        float maxv = -INFINITY;
        for (size_t t2 = 0; t2 <= t; t2++) {
            pre[t2] = dotf(q, qkv + (b * T + t2) * 3 * C + C + h * HS, HS) * scale;
            maxv = fmaxf(maxv, pre[t2]);
        }
        float sum = 0;
        for (size_t t2 = 0; t2 <= t; t2++) sum += (a[t2] = expf(pre[t2] - maxv));
        float inv = 1.0f / sum;
        for (size_t t2 = 0; t2 <= t; t2++) a[t2] *= inv;
        float *o = out + (b * T + t) * C + h * HS;
        for (int i = 0; i < HS; i++) {
            float s = 0;
            for (size_t t2 = 0; t2 <= t; t2++) s += a[t2] * qkv[(b * T + t2) * 3 * C + 2 * C + h * HS + i];
            o[i] = s;
        }
    }
}
static void c_attention_fwd(float *out, float *preatt, float *att, const float *qkv, int B, int T, int C, int NH) {
    size_t rows = (size_t)B * NH * T;
    if (!rows) return;
    attention_fwd_k<<<gptc_cuda_blocks(rows, 64), 64, 0, STREAM>>>(out, preatt, att, qkv, B, T, C, NH);
    CUDA_LAUNCHED();
}
/* datt, dpreatt (B,NH,T,T) rows: da = dout . v, dpre = a (da - sum a da) */
__global__ static void attention_bwd_rows(float *dpreatt, float *datt, const float *dout, const float *qkv,
                                          const float *att, int B, int T, int C, int NH) {
    int HS = C / NH;
    GRID_STRIDE(r, (size_t)B * NH * T) {
        size_t b = r / ((size_t)NH * T), h = (r / T) % NH, t = r % T;
        const float *a = att + r * T, *d = dout + (b * T + t) * C + h * HS;
        float *da = datt + r * T, *dpre = dpreatt + r * T, s = 0;
        for (size_t t2 = 0; t2 <= t; t2++) {
            da[t2] = dotf(d, qkv + (b * T + t2) * 3 * C + 2 * C + h * HS, HS);
            s += a[t2] * da[t2];
        }
        for (size_t t2 = 0; t2 <= t; t2++) dpre[t2] = a[t2] * (da[t2] - s);
    }
}
/* dq (b,t,h,i) += scale sum_{t2<=t} dpre[t][t2] k[t2][i]; dk (b,t2,h,i) += scale sum_{t>=t2} dpre[t][t2] q[t][i];
 * dv (b,t2,h,i) += sum_{t>=t2} att[t][t2] dout[t][i]: one thread per element of dqkv's q (or k, v) third */
__global__ static void attention_bwd_grads(float *dqkv, const float *dpreatt, const float *dout, const float *qkv,
                                           const float *att, int B, int T, int C, int NH) {
    int HS = C / NH;
    float scale = 1.0f / sqrtf((float)HS);
    GRID_STRIDE(e, (size_t)B * T * C) {
        size_t bt = e / C, b = bt / T, t = bt % T;
        int c = (int)(e % C), h = c / HS;
        const float *pre = dpreatt + ((b * NH + h) * T) * T, *a = att + ((b * NH + h) * T) * T;
        float sq = 0, sk = 0, sv = 0;
        for (size_t t2 = 0; t2 <= t; t2++) sq += pre[t * T + t2] * qkv[(b * T + t2) * 3 * C + C + c];
        for (size_t t1 = t; t1 < (size_t)T; t1++) {
            sk += pre[t1 * T + t] * qkv[(b * T + t1) * 3 * C + c];
            sv += a[t1 * T + t] * dout[(b * T + t1) * C + c];
        }
        float *row = dqkv + bt * 3 * C;
        row[c] += sq * scale;
        row[C + c] += sk * scale;
        row[2 * C + c] += sv;
    }
}
static void c_attention_bwd(float *dqkv, float *dpreatt, float *datt, const float *dout, const float *qkv,
                            const float *att, int B, int T, int C, int NH) {
    size_t rows = (size_t)B * NH * T;
    if (!rows) return;
    attention_bwd_rows<<<gptc_cuda_blocks(rows, 64), 64, 0, STREAM>>>(dpreatt, datt, dout, qkv, att, B, T, C, NH);
    CUDA_LAUNCHED();
    attention_bwd_grads<<<gptc_cuda_blocks((size_t)B * T * C, TPB), TPB, 0, STREAM>>>(dqkv, dpreatt, dout, qkv, att, B,
                                                                                      T, C, NH);
    CUDA_LAUNCHED();
}
/* one block per head: out (C), att (NH,Tc) scratch, q (C), kcache/vcache (Tc,C) */
__global__ static void attention_decode_k(float *out, float *att, const float *q, const float *kc, const float *vc,
                                          int Tc, int C, int NH) {
    __shared__ float sh[TPB];
    int h = blockIdx.x, HS = C / NH;
    float scale = 1.0f / sqrtf((float)HS), *a = att + (size_t)h * Tc, m = -INFINITY;
    for (int t = threadIdx.x; t < Tc; t += blockDim.x) {
        a[t] = dotf(q + h * HS, kc + (size_t)t * C + h * HS, HS) * scale;
        m = fmaxf(m, a[t]);
    }
    m = block_max(m, sh);
    float s = 0;
    for (int t = threadIdx.x; t < Tc; t += blockDim.x) s += (a[t] = expf(a[t] - m));
    s = block_sum(s, sh); /* its barriers also publish a[] to the block */
    for (int i = threadIdx.x; i < HS; i += blockDim.x) {
        float o = 0;
        for (int t = 0; t < Tc; t++) o += a[t] / s * vc[(size_t)t * C + h * HS + i];
        out[h * HS + i] = o;
    }
}
static void c_attention_decode(float *out, float *att, const float *q, const float *kcache, const float *vcache, int Tc,
                               int C, int NH) {
    attention_decode_k<<<NH, TPB, 0, STREAM>>>(out, att, q, kcache, vcache, Tc, C, NH);
    CUDA_LAUNCHED();
}

/* ---- flash attention (attention.h's contracts, fp32 and bf16): one warp per query row (forward, dq)
 * or key row (dk, dv); lane l holds elements l, l+32, ... of the row's HS (HS <= 32*FLASH_NR). The
 * forward walks key tiles of GPTC_FLASH_KEY_TILE keys with the online softmax of the reference; the
 * attention dropout draws gptc_flash_keep's bits (kernels/philox.h). */
enum { FLASH_NR = 8, FLASH_WARPS = 4 };

__device__ static inline float ld(const float *p, bool bf) { return bf ? gptc_dev_bf16_round(*p) : *p; }

template <bool BF>
__global__ static void flash_fwd_k(float *o, float *lse, const float *q, const float *k, const float *v, int T, int HS,
                                   size_t rows, float dropout, uint64_t seed) {
    size_t row = blockIdx.x * (size_t)FLASH_WARPS + threadIdx.x / 32;
    int lane = threadIdx.x % 32;
    if (row >= rows) return;
    size_t bh = row / T;
    int i = (int)(row % T);
    const float scale = 1.0f / sqrtf((float)HS), inv_keep = 1.0f / (1.0f - dropout);
    const uint32_t thr = gptc_flash_threshold(dropout);
    const float *qi = q + row * HS, *kh = k + bh * T * HS, *vh = v + bh * T * HS;
    float qr[FLASH_NR], acc[FLASH_NR];
#pragma unroll
    for (int r = 0; r < FLASH_NR; r++) {
        int d = lane + 32 * r;
        qr[r] = d < HS ? ld(qi + d, BF) : 0.0f;
        acc[r] = 0;
    }
    float m = -INFINITY, l = 0;
    for (int j0 = 0; j0 <= i; j0 += GPTC_FLASH_KEY_TILE) {
        int jn = j0 + GPTC_FLASH_KEY_TILE < i + 1 ? j0 + GPTC_FLASH_KEY_TILE : i + 1;
        float s[GPTC_FLASH_KEY_TILE], mb = -INFINITY;
#pragma unroll
        for (int jj = 0; jj < GPTC_FLASH_KEY_TILE; jj++) {
            s[jj] = -INFINITY;
            if (j0 + jj < jn) {
                const float *kj = kh + (size_t)(j0 + jj) * HS;
                float part = 0;
#pragma unroll
                for (int r = 0; r < FLASH_NR; r++) {
                    int d = lane + 32 * r;
                    if (d < HS) part += qr[r] * ld(kj + d, BF);
                }
                s[jj] = warp_sum(part) * scale;
                mb = fmaxf(mb, s[jj]);
            }
        }
        float mnew = fmaxf(m, mb), corr = expf(m - mnew), sum = 0;
#pragma unroll
        for (int r = 0; r < FLASH_NR; r++) acc[r] *= corr;
#pragma unroll
        for (int jj = 0; jj < GPTC_FLASH_KEY_TILE; jj++) {
            if (j0 + jj >= jn) continue;
            float p = expf(s[jj] - mnew);
            sum += p;
            if (dropout > 0) p *= gptc_flash_keep(seed, row, (uint32_t)(j0 + jj), thr) ? inv_keep : 0.0f;
            if (BF) p = gptc_dev_bf16_round(p);
            const float *vj = vh + (size_t)(j0 + jj) * HS;
#pragma unroll
            for (int r = 0; r < FLASH_NR; r++) {
                int d = lane + 32 * r;
                if (d < HS) acc[r] += p * ld(vj + d, BF);
            }
        }
        l = l * corr + sum;
        m = mnew;
    }
    float inv = 1.0f / l;
#pragma unroll
    for (int r = 0; r < FLASH_NR; r++) {
        int d = lane + 32 * r;
        if (d < HS) o[row * HS + d] = acc[r] * inv;
    }
    if (lane == 0) lse[row] = m + logf(l);
}

static void flash_check(int HS) {
    if (HS > 32 * FLASH_NR) {
        fprintf(stderr, "gptc: the CUDA flash attention takes head sizes up to %d (got %d)\n", 32 * FLASH_NR, HS);
        abort();
    }
}

static void flash_fwd_any(float *o, float *lse, const float *q, const float *k, const float *v, int B, int NH, int T,
                          int HS, float dropout, uint64_t seed, bool bf) {
    size_t rows = (size_t)B * NH * T;
    if (!rows || HS <= 0) return;
    flash_check(HS);
    unsigned blocks = (unsigned)((rows + FLASH_WARPS - 1) / FLASH_WARPS);
    if (bf) flash_fwd_k<true><<<blocks, 32 * FLASH_WARPS, 0, STREAM>>>(o, lse, q, k, v, T, HS, rows, dropout, seed);
    else flash_fwd_k<false><<<blocks, 32 * FLASH_WARPS, 0, STREAM>>>(o, lse, q, k, v, T, HS, rows, dropout, seed);
    CUDA_LAUNCHED();
}

/* dq of query row i, and D_i = bf(dO_i) . O_i into D (B*NH*T) for the dk/dv kernel */
template <bool BF>
__global__ static void flash_bwd_dq_k(float *dq, float *D, const float *do_, const float *q, const float *k,
                                      const float *v, const float *o, const float *lse, int T, int HS, size_t rows,
                                      float dropout, uint64_t seed) {
    size_t row = blockIdx.x * (size_t)FLASH_WARPS + threadIdx.x / 32;
    int lane = threadIdx.x % 32;
    if (row >= rows) return;
    size_t bh = row / T;
    int i = (int)(row % T);
    const float scale = 1.0f / sqrtf((float)HS), inv_keep = 1.0f / (1.0f - dropout);
    const uint32_t thr = gptc_flash_threshold(dropout);
    const float *kh = k + bh * T * HS, *vh = v + bh * T * HS;
    float qr[FLASH_NR], dor[FLASH_NR], acc[FLASH_NR], dpart = 0;
#pragma unroll
    for (int r = 0; r < FLASH_NR; r++) {
        int d = lane + 32 * r;
        qr[r] = d < HS ? ld(q + row * HS + d, BF) : 0.0f;
        dor[r] = d < HS ? ld(do_ + row * HS + d, BF) : 0.0f;
        if (d < HS) dpart += dor[r] * o[row * HS + d];
        acc[r] = 0;
    }
    float Di = warp_sum(dpart), L = lse[row];
    if (lane == 0) D[row] = Di;
    for (int j = 0; j <= i; j++) {
        const float *kj = kh + (size_t)j * HS, *vj = vh + (size_t)j * HS;
        float kr[FLASH_NR], sp = 0, dpp = 0;
#pragma unroll
        for (int r = 0; r < FLASH_NR; r++) {
            int d = lane + 32 * r;
            kr[r] = d < HS ? ld(kj + d, BF) : 0.0f;
            if (d < HS) sp += qr[r] * kr[r], dpp += dor[r] * ld(vj + d, BF);
        }
        float p = expf(warp_sum(sp) * scale - L);
        float z = dropout > 0 ? (gptc_flash_keep(seed, row, (uint32_t)j, thr) ? inv_keep : 0.0f) : 1.0f;
        float ds = p * (warp_sum(dpp) * z - Di);
        if (BF) ds = gptc_dev_bf16_round(ds);
        ds *= scale;
#pragma unroll
        for (int r = 0; r < FLASH_NR; r++) acc[r] += ds * kr[r];
    }
#pragma unroll
    for (int r = 0; r < FLASH_NR; r++) {
        int d = lane + 32 * r;
        if (d < HS) dq[row * HS + d] += acc[r];
    }
}

/* dk, dv of key row j: the query rows i >= j, P and dS recomputed from lse and D */
template <bool BF>
__global__ static void flash_bwd_dkv_k(float *dk, float *dv, const float *D, const float *do_, const float *q,
                                       const float *k, const float *v, const float *lse, int T, int HS, size_t rows,
                                       float dropout, uint64_t seed) {
    size_t krow = blockIdx.x * (size_t)FLASH_WARPS + threadIdx.x / 32;
    int lane = threadIdx.x % 32;
    if (krow >= rows) return;
    size_t bh = krow / T;
    int j = (int)(krow % T);
    const float scale = 1.0f / sqrtf((float)HS), inv_keep = 1.0f / (1.0f - dropout);
    const uint32_t thr = gptc_flash_threshold(dropout);
    float kr[FLASH_NR], vr[FLASH_NR], dka[FLASH_NR], dva[FLASH_NR];
#pragma unroll
    for (int r = 0; r < FLASH_NR; r++) {
        int d = lane + 32 * r;
        kr[r] = d < HS ? ld(k + krow * HS + d, BF) : 0.0f;
        vr[r] = d < HS ? ld(v + krow * HS + d, BF) : 0.0f;
        dka[r] = dva[r] = 0;
    }
    for (int i = j; i < T; i++) {
        size_t row = bh * T + i;
        const float *qi = q + row * HS, *doi = do_ + row * HS;
        float qr[FLASH_NR], dor[FLASH_NR], sp = 0, dpp = 0;
#pragma unroll
        for (int r = 0; r < FLASH_NR; r++) {
            int d = lane + 32 * r;
            qr[r] = d < HS ? ld(qi + d, BF) : 0.0f;
            dor[r] = d < HS ? ld(doi + d, BF) : 0.0f;
            sp += qr[r] * kr[r];
            dpp += dor[r] * vr[r];
        }
        float p = expf(warp_sum(sp) * scale - lse[row]);
        float z = dropout > 0 ? (gptc_flash_keep(seed, row, (uint32_t)j, thr) ? inv_keep : 0.0f) : 1.0f;
        float dp = warp_sum(dpp) * z, pz = p * z, ds = p * (dp - D[row]);
        if (BF) pz = gptc_dev_bf16_round(pz), ds = gptc_dev_bf16_round(ds);
        ds *= scale;
#pragma unroll
        for (int r = 0; r < FLASH_NR; r++) {
            dva[r] += pz * dor[r];
            dka[r] += ds * qr[r];
        }
    }
#pragma unroll
    for (int r = 0; r < FLASH_NR; r++) {
        int d = lane + 32 * r;
        if (d < HS) dk[krow * HS + d] += dka[r], dv[krow * HS + d] += dva[r];
    }
}

static void flash_bwd_any(float *dq, float *dk, float *dv, const float *do_, const float *q, const float *k,
                          const float *v, const float *o, const float *lse, int B, int NH, int T, int HS, float dropout,
                          uint64_t seed, bool bf) {
    size_t rows = (size_t)B * NH * T;
    if (!rows || HS <= 0) return;
    flash_check(HS);
    float *D = (float *)gptc_cuda_scratch(GPTC_CUDA_SCRATCH_FLASH, sizeof(float) * rows);
    unsigned blocks = (unsigned)((rows + FLASH_WARPS - 1) / FLASH_WARPS), th = 32 * FLASH_WARPS;
    if (bf) {
        flash_bwd_dq_k<true><<<blocks, th, 0, STREAM>>>(dq, D, do_, q, k, v, o, lse, T, HS, rows, dropout, seed);
        CUDA_LAUNCHED();
        flash_bwd_dkv_k<true><<<blocks, th, 0, STREAM>>>(dk, dv, D, do_, q, k, v, lse, T, HS, rows, dropout, seed);
    } else {
        flash_bwd_dq_k<false><<<blocks, th, 0, STREAM>>>(dq, D, do_, q, k, v, o, lse, T, HS, rows, dropout, seed);
        CUDA_LAUNCHED();
        flash_bwd_dkv_k<false><<<blocks, th, 0, STREAM>>>(dk, dv, D, do_, q, k, v, lse, T, HS, rows, dropout, seed);
    }
    CUDA_LAUNCHED();
}

static void c_flash_fwd(float *o, float *lse, const float *q, const float *k, const float *v, int B, int NH, int T,
                        int HS, float dropout, uint64_t seed) {
    flash_fwd_any(o, lse, q, k, v, B, NH, T, HS, dropout, seed, false);
}
static void c_flash_fwd_bf16(float *o, float *lse, const float *q, const float *k, const float *v, int B, int NH, int T,
                             int HS, float dropout, uint64_t seed) {
    flash_fwd_any(o, lse, q, k, v, B, NH, T, HS, dropout, seed, true);
}
static void c_flash_bwd(float *dq, float *dk, float *dv, const float *do_, const float *q, const float *k,
                        const float *v, const float *o, const float *lse, int B, int NH, int T, int HS, float dropout,
                        uint64_t seed) {
    flash_bwd_any(dq, dk, dv, do_, q, k, v, o, lse, B, NH, T, HS, dropout, seed, false);
}
static void c_flash_bwd_bf16(float *dq, float *dk, float *dv, const float *do_, const float *q, const float *k,
                             const float *v, const float *o, const float *lse, int B, int NH, int T, int HS,
                             float dropout, uint64_t seed) {
    flash_bwd_any(dq, dk, dv, do_, q, k, v, o, lse, B, NH, T, HS, dropout, seed, true);
}
/* no host scratch: the backward's D (B*NH*T floats) is device scratch */
static size_t c_flash_scratch(int T, int HS) {
    (void)T, (void)HS;
    return 0;
}

/* ---- the table */

const gptc_kernels *gptc_cuda_table(void) {
    static gptc_kernels t;
    static bool ready;
    if (ready) return &t;
    memset(&t, 0, sizeof t);
    t.variant = "cuda";
    t.encoder_fwd = c_encoder_fwd;
    t.encoder_bwd = c_encoder_bwd;
    t.layernorm_fwd = c_layernorm_fwd;
    t.layernorm_bwd = c_layernorm_bwd;
    t.gemm = gptc_cuda_gemm;
    t.gemm_bf16 = gptc_cuda_gemm_bf16;
    t.bias_fwd = c_bias_fwd;
    t.bias_bwd = c_bias_bwd;
    t.attention_fwd = c_attention_fwd;
    t.attention_bwd = c_attention_bwd;
    t.attention_decode = c_attention_decode;
    t.gelu_fwd = c_gelu_fwd;
    t.gelu_bwd = c_gelu_bwd;
    t.residual_fwd = c_residual_fwd;
    t.residual_bwd = c_residual_bwd;
    t.crossentropy_fwd = c_crossentropy_fwd;
    t.crossentropy_bwd = c_crossentropy_bwd;
    t.residual_layernorm_fwd = c_residual_layernorm_fwd;
    t.layernorm_bwd_residual = c_layernorm_bwd_residual;
    t.crossentropy_fused = c_crossentropy_fused;
    t.adamw = c_adamw;
    t.flash_fwd = c_flash_fwd;
    t.flash_bwd = c_flash_bwd;
    t.flash_fwd_bf16 = c_flash_fwd_bf16;
    t.flash_bwd_bf16 = c_flash_bwd_bf16;
    t.gelu_erf_fwd = c_gelu_erf_fwd;
    t.gelu_erf_bwd = c_gelu_erf_bwd;
    t.gelu_sigmoid_fwd = c_gelu_sigmoid_fwd;
    t.gelu_sigmoid_bwd = c_gelu_sigmoid_bwd;
    t.qkv_to_heads = c_qkv_to_heads;
    t.heads_to_qkv_grad = c_heads_to_qkv_grad;
    t.heads_to_rows = c_heads_to_rows;
    t.rows_to_heads = c_rows_to_heads;
    t.dropout = c_dropout;
    t.zero = c_zero;
    t.grad_sumsq = c_grad_sumsq;
    t.layernorm_fwd_bf16 = c_layernorm_fwd_bf16;
    t.residual_layernorm_fwd_bf16 = c_residual_layernorm_fwd_bf16;
    t.gelu_fwd_bf16 = c_gelu_fwd_bf16;
    t.gelu_erf_fwd_bf16 = c_gelu_erf_fwd_bf16;
    t.gelu_sigmoid_fwd_bf16 = c_gelu_sigmoid_fwd_bf16;
    t.heads_to_rows_bf16 = c_heads_to_rows_bf16;
    t.to_bf16 = c_to_bf16;
    t.adamw16 = c_adamw16;
    t.scale = c_scale;
    t.gemm_bf16_in16 = gptc_cuda_gemm_bf16_in16;
    t.flash_scratch = c_flash_scratch;
    t.flash_scratch_bf16 = c_flash_scratch;
    ready = true;
    return &t;
}
