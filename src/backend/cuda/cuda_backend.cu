/* cuda_backend.cu — the CUDA backend's devices and memory (backend/cuda.h): device count and
 * properties, the selection of one device with its compute stream, the backend memory (managed memory
 * for this first slice, see cuda.h), the grown scratch buffers and the error check. */
#include "backend/cuda/cuda_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern "C" gptc_status gptc_fail(gptc_status st, const char *fmt, ...);

static int g_dev = -1;            /* the selected device */
static cudaStream_t g_stream;     /* its compute stream */
static void *g_scratch[GPTC_CUDA_SCRATCH_SLOTS];
static size_t g_scratch_bytes[GPTC_CUDA_SCRATCH_SLOTS];

void gptc_cuda_die(cudaError_t e, const char *what, const char *file, int line) {
    fprintf(stderr, "gptc: CUDA error in %s (%s:%d): %s\n", what, file, line, cudaGetErrorString(e));
    fflush(stderr);
    abort();
}

cudaStream_t gptc_cuda_stream(void) { return g_stream; }

extern "C" bool gptc_cuda_built(void) { return true; }

extern "C" int gptc_cuda_device_count(void) {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        cudaGetLastError(); /* no driver or no device: clear the sticky-free error */
        return 0;
    }
    return n;
}

extern "C" gptc_status gptc_cuda_device_info_get(int dev, gptc_cuda_device_info *out) {
    memset(out, 0, sizeof *out);
    int n = gptc_cuda_device_count();
    if (dev < 0 || dev >= n) return gptc_fail(GPTC_ERR_ARG, "cuda:%d: no such CUDA device (%d found)", dev, n);
    cudaDeviceProp p;
    cudaError_t e = cudaGetDeviceProperties(&p, dev);
    if (e != cudaSuccess) return gptc_fail(GPTC_ERR_ARG, "cuda:%d: %s", dev, cudaGetErrorString(e));
    snprintf(out->name, sizeof out->name, "%s", p.name);
    out->sms = p.multiProcessorCount;
    out->cc_major = p.major;
    out->cc_minor = p.minor;
    out->mem_total = p.totalGlobalMem;
    int cur = -1;
    cudaGetDevice(&cur);
    if (cudaSetDevice(dev) == cudaSuccess) {
        size_t fr = 0, tot = 0;
        if (cudaMemGetInfo(&fr, &tot) == cudaSuccess) out->mem_free = fr;
        else cudaGetLastError();
        if (cur >= 0) cudaSetDevice(cur);
    } else {
        cudaGetLastError();
    }
    return GPTC_OK;
}

extern "C" gptc_status gptc_cuda_select(int dev) {
    if (g_dev == dev) return GPTC_OK;
    if (g_dev >= 0) return gptc_fail(GPTC_ERR_ARG, "cuda:%d: this process already runs on cuda:%d", dev, g_dev);
    int n = gptc_cuda_device_count();
    if (dev < 0 || dev >= n) return gptc_fail(GPTC_ERR_ARG, "cuda:%d: no such CUDA device (%d found)", dev, n);
    cudaError_t e = cudaSetDevice(dev);
    if (e == cudaSuccess) e = cudaStreamCreateWithFlags(&g_stream, cudaStreamNonBlocking);
    if (e != cudaSuccess) return gptc_fail(GPTC_ERR_ARG, "cuda:%d: %s", dev, cudaGetErrorString(e));
    g_dev = dev;
    if (!gptc_cuda_gemm_init()) {
        g_dev = -1;
        cudaStreamDestroy(g_stream);
        return gptc_fail(GPTC_ERR_ARG, "cuda:%d: cuBLASLt could not be initialised", dev);
    }
    return GPTC_OK;
}

extern "C" int gptc_cuda_selected(void) { return g_dev; }

void *gptc_cuda_scratch(int slot, size_t bytes) {
    if (bytes <= g_scratch_bytes[slot]) return g_scratch[slot];
    size_t grow = bytes + bytes / 4;
    if (g_scratch[slot]) CUDA_CHECK(cudaFreeAsync(g_scratch[slot], g_stream));
    CUDA_CHECK(cudaMallocAsync(&g_scratch[slot], grow, g_stream));
    g_scratch_bytes[slot] = grow;
    return g_scratch[slot];
}

/* ---- the backend memory: managed, preferring the device (the host code that reads or writes the
 * arenas directly still works; see cuda.h) */

static size_t cuda_block_bytes(size_t bytes) { return (bytes + 255) & ~(size_t)255; }

static void *cuda_alloc(size_t bytes, const char *what) {
    void *p = NULL;
    size_t rounded = cuda_block_bytes(bytes ? bytes : 1);
    cudaError_t e = cudaMallocManaged(&p, rounded, cudaMemAttachGlobal);
    if (e != cudaSuccess) {
        cudaGetLastError();
        gptc_fail(GPTC_ERR_NOMEM, "cannot allocate %.1f MiB of CUDA managed memory for %s (%s); use a smaller model, "
                                  "batch or sequence", bytes / 1048576.0, what, cudaGetErrorString(e));
        return NULL;
    }
    cudaMemLocation dev;
    dev.type = cudaMemLocationTypeDevice;
    dev.id = g_dev;
    cudaMemAdvise(p, rounded, cudaMemAdviseSetPreferredLocation, dev); /* a hint: its failure is harmless */
    cudaGetLastError();
    /* zeroed on the device (gptc_alloc's blocks are not, but nothing may rely on garbage) */
    CUDA_CHECK(cudaMemsetAsync(p, 0, rounded, g_stream));
    CUDA_CHECK(cudaStreamSynchronize(g_stream));
    return p;
}

static void cuda_free(void *p) {
    if (!p) return;
    CUDA_CHECK(cudaStreamSynchronize(g_stream));
    CUDA_CHECK(cudaFree(p));
}

static void cuda_memset(void *p, int byte, size_t bytes) { CUDA_CHECK(cudaMemsetAsync(p, byte, bytes, g_stream)); }
static void cuda_copy(void *dst, const void *src, size_t bytes) {
    CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, g_stream));
}
/* the host buffer may be reused as soon as this returns: wait for the copy */
static void cuda_copy_h2d(void *dst, const void *src, size_t bytes) {
    CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, g_stream));
    CUDA_CHECK(cudaStreamSynchronize(g_stream));
}
static void cuda_copy_d2h(void *dst, const void *src, size_t bytes) {
    CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, g_stream));
    CUDA_CHECK(cudaStreamSynchronize(g_stream));
}
static void cuda_synchronize(void) { CUDA_CHECK(cudaStreamSynchronize(g_stream)); }

static const gptc_backend_memory g_cuda_mem = {
    "cuda", cuda_alloc, cuda_free, cuda_memset, cuda_copy, cuda_copy_h2d, cuda_copy_d2h, cuda_synchronize,
    cuda_block_bytes,
};

extern "C" const gptc_backend_memory *gptc_cuda_memory(void) { return g_dev >= 0 ? &g_cuda_mem : NULL; }
extern "C" const gptc_kernels *gptc_cuda_kernels(void) { return g_dev >= 0 ? gptc_cuda_table() : NULL; }
