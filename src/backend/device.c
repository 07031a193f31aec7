/* device.c — the --device option (cuda.h gptc_device_parse): cpu, cuda or cuda:N, checked against the
 * build and the devices present. Compiled in every build (the CUDA functions it calls are
 * src/backend/cuda_absent.c's in a CPU build). */
#include "backend/cuda.h"
#include "core/core.h"

#include <stdlib.h>
#include <string.h>

double gptc_cuda_peak_gflops(int dev, bool bf16, const char **kind) {
    gptc_cuda_device_info d;
    *kind = "unknown GPU";
    if (gptc_cuda_device_info_get(dev, &d)) return 0;
    static const struct { const char *name, *kind; double bf16, tf32; } peaks[] = {
        {"H200", "H200 datasheet (dense)", 989.4e3, 494.7e3},
        {"H100", "H100 SXM datasheet (dense)", 989.4e3, 494.7e3},
        {"A100", "A100 datasheet (dense)", 312e3, 156e3},
    };
    for (size_t i = 0; i < sizeof peaks / sizeof peaks[0]; i++)
        if (strstr(d.name, peaks[i].name)) {
            *kind = peaks[i].kind;
            return bf16 ? peaks[i].bf16 : peaks[i].tf32;
        }
    return 0;
}

gptc_status gptc_device_parse(const char *spec, int *device) {
    *device = -1;
    if (!spec || !*spec || strcmp(spec, "cpu") == 0) return GPTC_OK;
    int n = 0;
    if (strcmp(spec, "cuda") == 0) {
        n = 0;
    } else if (strncmp(spec, "cuda:", 5) == 0 && spec[5] >= '0' && spec[5] <= '9') {
        char *end;
        long v = strtol(spec + 5, &end, 10);
        if (*end || v > 1 << 20) return gptc_fail(GPTC_ERR_ARG, "'device' %s: give cpu, cuda or cuda:N", spec);
        n = (int)v;
    } else {
        return gptc_fail(GPTC_ERR_ARG, "'device' %s: give cpu, cuda or cuda:N", spec);
    }
    if (!gptc_cuda_built()) return gptc_fail(GPTC_ERR_ARG, "'device' %s: built without CUDA (make CUDA=1)", spec);
    int count = gptc_cuda_device_count();
    if (count == 0) return gptc_fail(GPTC_ERR_ARG, "'device' %s: no CUDA device", spec);
    if (n >= count) return gptc_fail(GPTC_ERR_ARG, "'device' %s: only %d CUDA device%s", spec, count, count == 1 ? "" : "s");
    *device = n;
    return GPTC_OK;
}
