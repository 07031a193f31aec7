/* fuzz_safetensors.c — the safetensors reader on arbitrary bytes: gptc_st_open must either refuse the
 * file with GPTC_ERR_FORMAT or hand back tensors whose every byte lies inside the mapping (read here
 * in full, so ASan sees an overrun) and whose sizes agree with their dtype and shape. */
#include "fuzz_util.h"
#include "io/io.h"

#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char path[64];
    int fd = fuzz_memfile(data, size, path, sizeof path);
    gptc_st_file f;
    gptc_status st = gptc_st_open(&f, path);
    if (st == GPTC_OK) {
        const unsigned char *lo = f.map, *hi = lo + f.map_size;
        for (int i = 0; i < f.ntensors; i++) {
            const gptc_st_tensor *t = &f.tensors[i];
            size_t numel = 1;
            for (int d = 0; d < t->ndim; d++) numel *= (size_t)t->shape[d];
            const unsigned char *p = t->data;
            if (t->ndim < 0 || t->ndim > GPTC_ST_MAX_DIMS || numel != t->numel ||
                t->nbytes != t->numel * gptc_dtype_size(t->dtype) || p < lo || (size_t)(hi - p) < t->nbytes)
                abort(); /* the reader accepted a tensor that does not fit its own description */
            (void)gptc_crc32c(0, t->data, t->nbytes);
            if (gptc_st_find(&f, t->name) == NULL) abort();
        }
        for (int i = 0; i < f.nmeta; i++)
            if (gptc_st_meta(&f, f.meta_keys[i]) == NULL) abort();
        gptc_st_close(&f);
    } else if (st != GPTC_ERR_FORMAT) {
        abort(); /* a well-formed path that names readable bytes: only their contents can be wrong */
    }
    close(fd);
    return 0;
}
