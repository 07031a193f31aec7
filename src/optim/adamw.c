/* adamw.c — AdamW over the parameter arena (or a range of it, for ZeRO-1's shards), tensor by
 * tensor so weight decay touches only the 2-D weights; the arithmetic is the kernel table's adamw
 * entry. */
#include "optim/optim.h"
#include "core/profile.h"

void gptc_adamw_update_range(gptc_model *model, const float *g, float *m, float *v, size_t lo, size_t hi,
                             const gptc_adamw *h, float lr, float grad_scale, int t) {
    const gptc_kernels *k = model->k;
    gptc_prof_begin(GPTC_PROF_OPT, "adamw", -1);
    size_t n = 0;
    for (int i = 0; i < model->ntensors; i++) {
        const gptc_tensor_desc *d = &model->tensors[i];
        size_t a = d->offset > lo ? d->offset : lo, b = d->offset + d->numel < hi ? d->offset + d->numel : hi;
        if (a >= b) continue;
        k->adamw(model->params + a, g + (a - lo), m + (a - lo), v + (a - lo), b - a, lr, h->beta1, h->beta2, h->eps,
                 d->decay ? h->weight_decay : 0.0f, grad_scale, t);
        n += d->numel;
    }
    /* per parameter ~12 FLOPs (moments, bias corrections, sqrt, divide, decay, step); reads p, g, m,
     * v and writes p, m, v */
    gptc_prof_end(12.0 * n, 28.0 * n);
}

void gptc_adamw_update(gptc_model *model, float *m, float *v, const gptc_adamw *h, float lr, float grad_scale, int t) {
    gptc_adamw_update_range(model, model->grads, m, v, 0, model->num_floats, h, lr, grad_scale, t);
}
