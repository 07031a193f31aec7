/* cuda_absent.c — the CUDA backend's functions (cuda.h) in a build without CUDA (the default; make
 * CUDA=1 compiles the .cu files of src/backend/cuda instead): no devices, and selecting one says how to get them. */
#include "backend/cuda.h"
#include "core/core.h"

bool gptc_cuda_built(void) { return false; }
int gptc_cuda_device_count(void) { return 0; }
gptc_status gptc_cuda_device_info_get(int dev, gptc_cuda_device_info *out) {
    (void)out;
    return gptc_fail(GPTC_ERR_ARG, "cuda:%d: built without CUDA (make CUDA=1)", dev);
}
gptc_status gptc_cuda_select(int dev) { return gptc_fail(GPTC_ERR_ARG, "cuda:%d: built without CUDA (make CUDA=1)", dev); }
int gptc_cuda_selected(void) { return -1; }
const gptc_backend_memory *gptc_cuda_memory(void) { return NULL; }
const gptc_kernels *gptc_cuda_kernels(void) { return NULL; }
