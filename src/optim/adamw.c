/* adamw.c — AdamW (Loshchilov & Hutter, "Decoupled Weight Decay Regularization") as an optimizer
 * kind (optimizer.h): two state buffers, the first moment "exp_avg" and the second "exp_avg_sq", over
 * the parameter arena or a range of it (ZeRO-1's shards). The update goes tensor by tensor so weight
 * decay touches only the tensors marked decay (2-D weights); the arithmetic is the backend's
 * adamw entry. gptc_adamw_update / gptc_adamw_update_range (optim.h) are the same loop with the
 * hyper-parameters in a gptc_adamw. */
#include "optim/optim.h"
#include "optim/optimizer.h"
#include "core/core.h"
#include "backend/backend.h"

#include <math.h>

/* Tensor pieces handed to the backend per call: GPT-2 124M's 148 tensors go in one call (one parallel
 * region), gpt2-xl's 580 in three. */
#define ADAMW_BATCH 256

/* AdamW on floats [lo, hi) of the trainable set's compact arena (model->ps, gpt2.h; the whole parameter
 * arena by default): g, m, v hold that range (g[0], m[0], v[0] are element lo's). Each tensor's piece inside the range is updated with that tensor's
 * weight decay (wd on decay tensors, 0 on the others); padding between tensors is skipped. The pieces
 * go to the backend in batches, which runs a batch in one parallel region. Under bf16 working weights
 * (model->params16) over the whole arena, their copy of the range is written in the same pass
 * (gptc_adamw_piece's p16) and the model told so (gptc_model_params16_written). */
static void adamw_range(gptc_model *model, const float *g, float *m, float *v, size_t lo, size_t hi, float b1,
                        float b2, float eps, float wd, float lr, float grad_scale, int t) {
    const gptc_backend *be = &model->be;
    gptc_be_optim_begin(be, "adamw");
    size_t n = 0; /* parameters updated */
    gptc_adamw_piece batch[ADAMW_BATCH];
    int k = 0;
    const gptc_pset *ps = &model->ps; /* what training updates: the whole arena, or a trainable set (gpt2.h) */
    uint16_t *p16 = ps->same_layout && !ps->adapters ? model->params16 : NULL; /* the arena's bf16 copy */
    for (int i = 0; i < ps->n; i++) {
        const gptc_tensor_desc *d = &ps->t[i];
        size_t a = d->offset > lo ? d->offset : lo, b = d->offset + d->numel < hi ? d->offset + d->numel : hi;
        if (a >= b) continue;
        batch[k++] = (gptc_adamw_piece){ps->values + d->src + (a - d->offset), g + (a - lo), m + (a - lo), v + (a - lo),
                                        b - a, d->decay ? wd : 0.0f, p16 ? p16 + d->src + (a - d->offset) : NULL};
        n += b - a;
        if (k == ADAMW_BATCH) {
            gptc_be_adamw_pieces(be, batch, k, lr, b1, b2, eps, grad_scale, t);
            k = 0;
        }
    }
    if (k) gptc_be_adamw_pieces(be, batch, k, lr, b1, b2, eps, grad_scale, t);
    if (p16) gptc_model_params16_written(model, lo, hi);
    /* per parameter ~12 FLOPs (moments, bias corrections, sqrt, divide, decay, step); reads p, g, m,
     * v and writes p, m, v (7 floats of 4 bytes), and p's bf16 copy */
    gptc_be_optim_end(be, 12.0 * n, (p16 ? 30.0 : 28.0) * n);
}

void gptc_adamw_update_range(gptc_model *model, const float *g, float *m, float *v, size_t lo, size_t hi,
                             const gptc_adamw *h, float lr, float grad_scale, int t) {
    adamw_range(model, g, m, v, lo, hi, h->beta1, h->beta2, h->eps, h->weight_decay, lr, grad_scale, t);
}

void gptc_adamw_update(gptc_model *model, float *m, float *v, const gptc_adamw *h, float lr, float grad_scale, int t) {
    adamw_range(model, model->grads, m, v, 0, model->ps.floats, h->beta1, h->beta2, h->eps, h->weight_decay, lr,
                grad_scale, t);
}

/* beta1, beta2 in [0, 1), eps positive and finite (NaN fails every comparison, so it is refused). */
static gptc_status adamw_check(const gptc_train_options *o) {
    if (!(o->beta1 >= 0 && o->beta1 < 1)) return gptc_fail(GPTC_ERR_ARG, "beta1 %g: must be in [0, 1)", o->beta1);
    if (!(o->beta2 >= 0 && o->beta2 < 1)) return gptc_fail(GPTC_ERR_ARG, "beta2 %g: must be in [0, 1)", o->beta2);
    if (!(o->eps > 0 && isfinite(o->eps))) return gptc_fail(GPTC_ERR_ARG, "eps %g: must be positive and finite", o->eps);
    return GPTC_OK;
}

/* the step's values for a compact state's blocks */
typedef struct {
    const gptc_kernels *k;
    float lr, b1, b2, eps, grad_scale;
    int t;
} adamw_ctx;

/* one block: the table's adamw entry on the widened moments st[0] (exp_avg), st[1] (exp_avg_sq) */
static void adamw_block(void *ctx, float *p, const float *g, float *const *st, size_t n, float wd) {
    const adamw_ctx *c = ctx;
    c->k->adamw(p, g, st[0], st[1], n, c->lr, c->b1, c->b2, c->eps, wd, c->grad_scale, c->t);
}

/* state->buf[0] exp_avg, state->buf[1] exp_avg_sq, of elements [state->lo, state->hi) (element j belonging
 * to parameter state->lo + j); fp32 runs the pieces path, a compact state the block driver. */
static void adamw_update(gptc_model *m, const gptc_train_options *o, const float *g, const gptc_ostate *state,
                         size_t lo, size_t hi, float lr, float wd, float grad_scale, int t) {
    if (state->type == GPTC_OSTATE_FP32) {
        size_t e = lo - state->lo;
        adamw_range(m, g, (float *)state->buf[0] + e, (float *)state->buf[1] + e, lo, hi, o->beta1, o->beta2, o->eps, wd,
                    lr, grad_scale, t);
        return;
    }
    adamw_ctx c = {m->be.k, lr, o->beta1, o->beta2, o->eps, grad_scale, t};
    gptc_be_optim_begin(&m->be, "adamw");
    size_t n = gptc_ostate_update(m, state, g, lo, hi, wd, o->seed, t, adamw_block, &c);
    /* per parameter the fp32 update's ~12 FLOPs plus the widening and the store (~6 for int8's nearest
     * code, ~2 for bf16's rounding); reads p, g and the moments, writes p and the moments */
    size_t el = gptc_ostate_elem(state->type);
    gptc_be_optim_end(&m->be, (state->type == GPTC_OSTATE_INT8 ? 18.0 : 14.0) * n, (12.0 + 4.0 * el) * n);
}

const gptc_optimizer_kind gptc_optimizer_adamw = {
    .name = "adamw",
    .help = "AdamW: Adam with decoupled weight decay (beta1, beta2, eps); two state floats per parameter",
    .nstates = 2,
    .state_names = {"exp_avg", "exp_avg_sq"},
    .check = adamw_check,
    .update = adamw_update,
};
