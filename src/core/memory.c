/* memory.c — aligned, zeroed allocation and arena planning (sizes first, one block, views). */
#include "core.h"

#include <stdlib.h>
#include <string.h>

void *gptc_alloc(size_t bytes, const char *what) {
    size_t rounded = (bytes + 63) & ~(size_t)63;
    if (rounded == 0) rounded = 64;
    void *p = aligned_alloc(64, rounded);
    if (!p) {
        gptc_fail(GPTC_ERR_NOMEM, "cannot allocate %.1f MiB for %s; use a smaller model, batch or sequence",
                  bytes / 1048576.0, what);
        return NULL;
    }
    memset(p, 0, rounded);
    return p;
}

void gptc_free(void *p) { free(p); }

float *gptc_workspace_get(gptc_workspace *w, size_t nfloats) {
    if (nfloats > w->cap) {
        gptc_free(w->buf);
        w->buf = gptc_alloc(nfloats * sizeof(float), "kernel workspace");
        GPTC_ASSERT(w->buf != NULL);
        w->cap = nfloats;
    }
    return w->buf;
}

size_t gptc_plan_take(gptc_plan *p, size_t nfloats) {
    size_t off = p->used;
    p->used += (nfloats + 15) & ~(size_t)15;
    return off;
}
