/* lion.c — Lion (Chen et al. 2023, "Symbolic Discovery of Optimization Algorithms") as an optimizer
 * kind (optimizer.h): the update is the sign of an interpolation between the momentum and the
 * gradient, so every parameter moves by exactly lr (plus decoupled weight decay); one state buffer,
 * the momentum "exp_avg", half of AdamW's optimizer memory. Per parameter, g scaled first:
 *
 *     c = beta1*m + (1 - beta1)*g
 *     p = p - lr*(sign(c) + wd*p)           (sign(0) = 0)
 *     m = beta2*m + (1 - beta2)*g
 *
 * It reads beta1 and beta2 from the run's options, so --beta1/--beta2 apply to Lion as they do to
 * AdamW. The paper's defaults are beta1 0.9, beta2 0.99 (not AdamW's 0.9/0.95), and since sign()
 * makes every step as large as lr, Lion's lr is typically 3-10x smaller than AdamW's, with a weight
 * decay 3-10x larger so that lr*wd stays about the same. Elementwise and single-pass: each element is
 * computed by one thread from its own inputs, so the bits are the same for any thread count and any
 * cut of the arena into ranges (ZeRO-1).
 *
 * The elementwise kernel lives here, so that adding Lion is this file plus its registry line; it runs on
 * host memory, which is what the CPU backend's memory is. A device backend needs it as a table entry
 * (the way AdamW is the table's adamw entry) before --optimizer lion can run there. */
#include "optim/optimizer.h"
#include "core/core.h"
#include "backend/backend.h"

/* Below this many floats a tensor is updated on one thread (forking costs more than it saves). */
#define LION_PAR_MIN 8192

/* Lion on n contiguous floats: p, g, m are n floats each (p the parameters, g their gradients, m the
 * momentum), element i of each the same parameter's. NaN in c propagates into p (sign(NaN) = NaN),
 * as it would through AdamW, rather than being read as 0. */
static void lion_kernel(float *p, const float *g, float *m, size_t n, float lr, float b1, float b2, float wd,
                        float grad_scale) {
    const float omb1 = 1 - b1, omb2 = 1 - b2;
#pragma omp parallel for schedule(static) if (n >= LION_PAR_MIN)
    for (size_t i = 0; i < n; i++) {
        float gi = g[i] * grad_scale;
        float c = b1 * m[i] + omb1 * gi;
        float s = c > 0 ? 1.0f : c < 0 ? -1.0f : c; /* +-1, or c itself when 0 (or NaN) */
        p[i] = p[i] - lr * (s + wd * p[i]);
        m[i] = b2 * m[i] + omb2 * gi;
    }
}

/* beta1, beta2 in [0, 1) (NaN fails every comparison, so it is refused); Lion reads no eps. */
static gptc_status lion_check(const gptc_train_options *o) {
    if (!(o->beta1 >= 0 && o->beta1 < 1)) return gptc_fail(GPTC_ERR_ARG, "beta1 %g: must be in [0, 1)", o->beta1);
    if (!(o->beta2 >= 0 && o->beta2 < 1)) return gptc_fail(GPTC_ERR_ARG, "beta2 %g: must be in [0, 1)", o->beta2);
    return GPTC_OK;
}

/* the step's values for a compact state's blocks */
typedef struct {
    float lr, b1, b2, grad_scale;
} lion_ctx;

/* one block: the kernel on the widened momentum st[0] */
static void lion_block(void *ctx, float *p, const float *g, float *const *st, size_t n, float wd) {
    const lion_ctx *c = ctx;
    lion_kernel(p, g, st[0], n, c->lr, c->b1, c->b2, wd, c->grad_scale);
}

/* Arena floats [lo, hi): g holds that range (g[0] parameter lo's), state->buf[0] the momentum of
 * [state->lo, state->hi) ⊇ [lo, hi); m->params the whole arena. fp32: one kernel call per tensor piece
 * inside the range, wd on the tensors marked decay and 0 on the others; padding between tensors is
 * skipped. A compact state: the same kernel block by block (gptc_ostate_update). */
static void lion_update(gptc_model *m, const gptc_train_options *o, const float *g, const gptc_ostate *state,
                        size_t lo, size_t hi, float lr, float wd, float grad_scale, int t) {
    if (state->type != GPTC_OSTATE_FP32) {
        lion_ctx c = {lr, o->beta1, o->beta2, grad_scale};
        gptc_be_optim_begin(&m->be, "lion");
        size_t n = gptc_ostate_update(m, state, g, lo, hi, wd, o->seed, t, lion_block, &c);
        size_t el = gptc_ostate_elem(state->type);
        gptc_be_optim_end(&m->be, (state->type == GPTC_OSTATE_INT8 ? 17.0 : 13.0) * n, (12.0 + 2.0 * el) * n);
        return;
    }
    float *mom = (float *)state->buf[0] + (lo - state->lo);
    gptc_be_optim_begin(&m->be, "lion");
    size_t n = 0; /* parameters updated */
    const gptc_pset *ps = &m->ps; /* the trainable set (gpt2.h): the whole arena by default */
    for (int i = 0; i < ps->n; i++) {
        const gptc_tensor_desc *d = &ps->t[i];
        size_t a = d->offset > lo ? d->offset : lo, b = d->offset + d->numel < hi ? d->offset + d->numel : hi;
        if (a >= b) continue;
        lion_kernel(ps->values + d->src + (a - d->offset), g + (a - lo), mom + (a - lo), b - a, lr, o->beta1, o->beta2, d->decay ? wd : 0.0f,
                    grad_scale);
        n += b - a;
    }
    /* per parameter 11 FLOPs (scale g; c: 2 mul, 1 add; sign; wd*p, add, *lr, subtract; m: 2 mul,
     * 1 add); reads p, g, m and writes p, m (5 floats of 4 bytes) */
    gptc_be_optim_end(&m->be, 11.0 * n, 20.0 * n);
}

const gptc_optimizer_kind gptc_optimizer_lion = {
    .name = "lion",
    .help = "Lion: sign of interpolated momentum, one state float per parameter; paper betas 0.9/0.99, "
            "lr 3-10x smaller than AdamW's",
    .nstates = 1,
    .state_names = {"exp_avg"},
    .check = lion_check,
    .update = lion_update,
};
