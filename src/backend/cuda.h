/* cuda.h — the CUDA backend (issue 21, first slice): the devices, the backend memory and the operator
 * table on one compute stream. Built by `make CUDA=1` (the .cu files of src/backend/cuda, nvcc, -DGPTC_CUDA); a
 * default build compiles src/backend/cuda_absent.c instead, the same functions reporting "built without
 * CUDA (make CUDA=1)", so nothing else in the library needs an #ifdef.
 *
 * Memory, for this first slice, is CUDA managed memory (cudaMallocManaged): the host code that still
 * touches the arenas directly (the weight initialisation, the checkpoint and weight readers and writers,
 * the loss mean, the sampler's logits) keeps working, the pages migrating on demand; every such host read
 * comes after `synchronize` (cudaStreamSynchronize of the compute stream). Moving those to copy_h2d /
 * copy_d2h and plain cudaMalloc is the next slice (docs/architecture.md, "The CUDA backend").
 *
 * The table's entries launch kernels on the compute stream and return at once (grad_sumsq waits: it
 * returns a number); the matrix products run through cuBLASLt (fp32 as TF32 with fp32 sums, bf16
 * operands with fp32 sums). A CUDA error inside an entry (which returns nothing) prints the call and
 * aborts: it leaves the device in an unknown state. */
#ifndef GPTC_BACKEND_CUDA_H
#define GPTC_BACKEND_CUDA_H

#include "gptc.h"
#include "backend/backend.h"

#include <stdbool.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct gptc_cuda_device_info {
    char name[256];
    int sms;                      /* streaming multiprocessors */
    int cc_major, cc_minor;       /* compute capability (9.0: H100/H200) */
    size_t mem_total, mem_free;   /* bytes of device memory */
} gptc_cuda_device_info;

/* Whether this build has the CUDA backend (make CUDA=1). */
bool gptc_cuda_built(void);
/* Devices visible (0 without a driver, without a device, or built without CUDA). */
int gptc_cuda_device_count(void);
/* Device dev's properties; GPTC_ERR_ARG when there is no such device (the message says why). */
gptc_status gptc_cuda_device_info_get(int dev, gptc_cuda_device_info *out);
/* Makes dev the process's device: sets it, creates the compute stream and the cuBLASLt handle (once;
 * a second call with another device is refused). */
gptc_status gptc_cuda_select(int dev);
/* The device selected (-1: none). */
int gptc_cuda_selected(void);
/* The backend memory and the operator table of the selected device (NULL before gptc_cuda_select or
 * when built without CUDA). Entries the table cannot run yet are NULL (none in this slice). */
const gptc_backend_memory *gptc_cuda_memory(void);
const gptc_kernels *gptc_cuda_kernels(void);

/* The datasheet's dense peak of device dev in GFLOP/s for the training step's products (bf16, or TF32
 * for fp32), for the MFU of a run on it: H100/H200 SXM 989.4 / 494.7 TFLOP/s, A100 312 / 156; 0 for a
 * device not in the list (the run then shows no MFU). *kind gets a label for the log. */
double gptc_cuda_peak_gflops(int dev, bool bf16, const char **kind);

/* --device SPEC: "cpu" -> -1, "cuda" -> 0, "cuda:N" -> N. GPTC_ERR_ARG (one line naming 'device') for
 * anything else, for cuda on a build without CUDA ("built without CUDA (make CUDA=1)"), and for a device
 * that does not exist ("no CUDA device" / "cuda:N: only K CUDA devices"). NULL or "" is the CPU. */
gptc_status gptc_device_parse(const char *spec, int *device);

#ifdef __cplusplus
}
#endif

#endif
