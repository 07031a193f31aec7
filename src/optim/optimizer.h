/* optimizer.h — the optimizer interface: what the trainer, the checkpoints and the planner know of an
 * optimizer. Each optimizer is one file (optim/adamw.c, optim/lion.c) that defines a
 * gptc_optimizer_kind, plus its line in the registry (optim/optimizer.c). Nothing outside optim/
 * names an optimizer's hyper-parameters: the kind reads its own from the run's options.
 *
 * State: `nstates` buffers, each shaped like the parameter arena (num_floats floats, or a ZeRO-1
 * shard [lo, hi) of it); checkpoints store buffer s as tensors "<state_names[s]>.<tensor name>" in
 * optim.safetensors, so a checkpoint written by one rank or by many holds the same tensors. */
#ifndef GPTC_OPTIM_OPTIMIZER_H
#define GPTC_OPTIM_OPTIMIZER_H

#include "gptc.h"
#include "model/gpt2.h"

#define GPTC_OPTIM_MAX_STATES 4

typedef struct gptc_optimizer_kind {
    const char *name;                               /* "adamw", "lion": what --optimizer takes */
    const char *help;                               /* one line for --help */
    int nstates;                                    /* state buffers, each one float per parameter */
    const char *state_names[GPTC_OPTIM_MAX_STATES]; /* their checkpoint prefixes: "exp_avg", "exp_avg_sq" */
    /* Checks the options this optimizer reads (GPTC_ERR_ARG naming the option, without a CLI flag). */
    gptc_status (*check)(const gptc_train_options *o);
    /* One update of arena floats [lo, hi): p = m->params (the whole arena), g holds the gradients of the
     * range (g[0] is parameter lo's), state[s] buffer s of the range. Every tensor's piece inside the
     * range is updated, with weight decay `wd` on the tensors marked decay (2-D weights); padding between
     * tensors is left alone. lr the step's learning rate, grad_scale multiplies g first (clipping), t the
     * 1-based update count. Reads its other hyper-parameters from o. */
    void (*update)(const gptc_model *m, const gptc_train_options *o, const float *g, float *const *state, size_t lo,
                   size_t hi, float lr, float wd, float grad_scale, int t);
} gptc_optimizer_kind;

/* The registry, in the order `--help` lists them; the first is the default. */
extern const gptc_optimizer_kind *const gptc_optimizers[];
extern const int gptc_noptimizers;
/* The kind named `name`, or NULL. */
const gptc_optimizer_kind *gptc_optimizer_find(const char *name);
/* "adamw, lion": the names, for help text and messages. */
const char *gptc_optimizer_names(void);
/* Bytes of optimizer state for `floats` parameters (a shard or the whole arena): nstates allocations of
 * floats floats each, as gptc_alloc counts them (gptc_alloc_block_bytes); 0 for no floats. */
size_t gptc_optimizer_state_bytes(const gptc_optimizer_kind *k, size_t floats);

#endif
