/* optim.h — AdamW over the model's tensors (the pre-interface entry points; optimizer.h is the
 * interface), the learning-rate schedule, and the global gradient norm used for clipping. */
#ifndef GPTC_OPTIM_H
#define GPTC_OPTIM_H

#include "model/gpt2.h"

typedef struct gptc_lr_schedule {
    float lr;       /* peak */
    int warmup;     /* linear warm-up steps */
    int steps;      /* total steps; cosine decay runs from warmup to steps */
    float floor;    /* decay ends at lr * floor */
} gptc_lr_schedule;

/* Learning rate for the 0-based step: lr*(step+1)/warmup during warm-up, then cosine from lr down
 * to lr*floor at the last step. */
float gptc_lr_at(const gptc_lr_schedule *s, int step);

/* sqrt(sum g^2) over n floats: per-thread double partial sums combined in thread order, so the
 * result is the same for the same thread count. */
double gptc_grad_norm(const float *g, size_t n);
/* The sum of squares under gptc_grad_norm (same bits for any thread count); ZeRO-1 adds the ranks'
 * shard sums in rank order and takes the root of the total. */
double gptc_grad_sumsq(const float *g, size_t n);

/* The factor that clips a gradient of norm `norm` to `clip` (torch's clip_grad_norm_: clip/(norm+1e-6),
 * at most 1); 1 when clip <= 0. */
float gptc_clip_scale(double norm, float clip);

typedef struct gptc_adamw {
    float beta1, beta2, eps, weight_decay;
} gptc_adamw;

/* gptc_adamw_update / _range are the optimizer kind gptc_optimizer_adamw's loop (optim/adamw.c,
 * optimizer.h) with its hyper-parameters in a gptc_adamw instead of the run's options: the same
 * kernel calls in the same order, so the same bits.
 * One AdamW update of every tensor (weight decay on the 2-D ones), t = 1-based update count;
 * m, v (num_floats) share the parameter layout. */
void gptc_adamw_update(gptc_model *model, float *m, float *v, const gptc_adamw *h, float lr, float grad_scale, int t);
/* The same on floats [lo, hi) of the arena only (ZeRO-1: this rank's shard, which may cut tensors):
 * g, m, v hold that range (g[0] is the gradient of parameter lo); every tensor's piece inside it
 * gets that tensor's weight decay, and the padding between tensors is left alone. */
void gptc_adamw_update_range(gptc_model *model, const float *g, float *m, float *v, size_t lo, size_t hi,
                             const gptc_adamw *h, float lr, float grad_scale, int t);

#endif
