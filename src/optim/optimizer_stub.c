/* TEMPORARY: replaced by optimizer.c + adamw.c at merge (the integrator deletes this file).
 *
 * optimizer_stub.c — a minimal registry of optim/optimizer.h with one kind, "adamw", that wraps
 * today's gptc_adamw_update_range, so the trainer, checkpoints and planner can use the interface
 * before the optimizer engineer's files land. Same arithmetic, same bits. */
#include "optim/optimizer.h"
#include "optim/optim.h"
#include "core/core.h"

#include <string.h>

static gptc_status adamw_check(const gptc_train_options *o) {
    (void)o; /* beta1, beta2, eps: their ranges are in train/hparams.def */
    return GPTC_OK;
}

static void adamw_update(const gptc_model *m, const gptc_train_options *o, const float *g, float *const *state, size_t lo,
                         size_t hi, float lr, float wd, float grad_scale, int t) {
    gptc_adamw h = {.beta1 = o->beta1, .beta2 = o->beta2, .eps = o->eps, .weight_decay = wd};
    gptc_adamw_update_range((gptc_model *)m, g, state[0], state[1], lo, hi, &h, lr, grad_scale, t);
}

static const gptc_optimizer_kind adamw_kind = {
    .name = "adamw",
    .help = "AdamW: decoupled weight decay, two moments per parameter",
    .nstates = 2,
    .state_names = {"exp_avg", "exp_avg_sq"},
    .check = adamw_check,
    .update = adamw_update,
};

const gptc_optimizer_kind *const gptc_optimizers[] = {&adamw_kind};
const int gptc_noptimizers = 1;

const gptc_optimizer_kind *gptc_optimizer_find(const char *name) {
    for (int i = 0; name && i < gptc_noptimizers; i++)
        if (strcmp(gptc_optimizers[i]->name, name) == 0) return gptc_optimizers[i];
    return NULL;
}

const char *gptc_optimizer_names(void) { return "adamw"; }

size_t gptc_optimizer_state_bytes(const gptc_optimizer_kind *k, size_t floats) {
    return (size_t)k->nstates * gptc_alloc_block_bytes(floats * sizeof(float));
}
