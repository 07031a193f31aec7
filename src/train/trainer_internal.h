/* trainer_internal.h — the training run's state, shared by the pieces of gptc_train:
 *   trainer_open.c    checks the options and opens everything before the first step
 *   trainer_resume.c  a checkpoint's position (resume, rollback) and the shape it must match
 *   trainer_step.c    one optimizer step: the step's values, gradients, the guard's verdict, the update
 *   trainer_after.c   after a step: evaluation, samples, the callbacks, rollback, checkpoints
 *   trainer.c         gptc_train: the loop and the run's summary
 *
 * Data parallel (dist/dist.h): each rank reads its slice of every global batch; on the last
 * micro-step the reducer exchanges the gradients bucket by bucket while the backward runs (each
 * rank's loss gradient is pre-scaled by 1/ranks, so the sums are the average); loss and norm are
 * summed in rank order, so every rank takes the same decisions. With ZeRO-1 each rank holds the
 * optimizer state of its shard of the arena, receives its shard of the reduced gradients, updates
 * it, and the parameters are all-gathered. Rank 0 alone evaluates, samples, reports and writes
 * checkpoints; every failure goes through gptc_dist_agree, so all ranks stop together with its
 * message. With --fused-update there is no whole-model gradient: trainer_step.c's fused_step updates
 * each layer inside a second backward pass (docs/architecture.md, Training loop). */
#ifndef GPTC_TRAIN_TRAINER_INTERNAL_H
#define GPTC_TRAIN_TRAINER_INTERNAL_H

#include "gptc.h"
#include "data/data.h"
#include "dist/dist.h"
#include "kernels/plugin.h"
#include "optim/hparam.h"
#include "optim/optim.h"
#include "optim/optimizer.h"
#include "train/checkpoint.h"
#include "train/guard.h"
#include "train/hellaswag.h"
#include "train/hparams.h"
#include "train/weights.h"

/* A fault the tests inject (docs/faults.md): on rank `rank`, steps from..to (1-based), on the first
 * pass only (a rollback that replays them finds them healthy) unless `always`. */
typedef struct fault {
    int rank, from, to;
    bool always;
    int done;              /* the highest step it fired at */
} fault;

typedef struct trainer {
    const gptc_train_options *o;
    gptc_model model;
    const gptc_optimizer_kind *opt; /* optim/optimizer.h */
    gptc_ostate ostate;    /* its state buffers, of arena elements [lo, hi), in the type of 'optim_state' */
    int rank, world;
    size_t lo, hi;         /* the floats this rank updates: all, or with ZeRO-1 its shard */
    size_t *bounds;        /* [world+1] ZeRO-1 shard bounds (NULL without ZeRO-1) */
    float *gshard;         /* ZeRO-1 on many ranks: this rank's reduced gradient shard (hi-lo) */
    size_t *starts;        /* [ntensors] the tensors' offsets, for planning buckets */
    gptc_reducer red;      /* the gradient exchange (many ranks only) */
    size_t optim_bytes;    /* what allocating the state buffers added to gptc_alloc's live bytes */
    bool use_red;
    /* what the model's wsumsq points at (gpt2.h gptc_wsumsq) when the weight gradients' sums of squares come from
     * their products: one process without ZeRO-1, the whole model trained (ws.sums NULL: every share is a pass) */
    gptc_wsumsq ws;
    /* tensor_sumsq's scratch (trainer_step.c), [ps.n] each: the pieces of one pass, their sums, and where each
     * tensor's share comes from */
    const float **norm_piece;
    size_t *norm_n;
    double *norm_passed;
    int *norm_from;
    bool pack_weights;     /* 'pack_weights' resolved (check_memory): the model keeps its matrices packed */
    fault nonfinite;       /* GPTC_FAULT_NONFINITE: steps whose gradient this rank poisons */
    fault spike;           /* GPTC_FAULT_SPIKE: steps whose gradient this rank scales by 1000 */
    gptc_guard guard;      /* judges each step (train/guard.h) */
    float *guard_buf;      /* the guard's packed state, for checkpoints */
    gptc_loader train, val;
    bool has_val;
    int *inputs, *targets; /* (B,T) */
    int accum;
    gptc_tokenizer *tok;   /* the data's tokenizer, for samples in the log (NULL: none) */
    gptc_mc_set hs;        /* 'eval_hellaswag': the multiple-choice items, tokenized (hs.n 0: none) */
    char *sample;          /* the last sample's text */
    gptc_trainer_state state;
    gptc_lr_schedule sched;
    /* the options' schedules (n 0: none) and the callbacks' overrides (NaN: none) */
    gptc_hparam_schedule lr_sched, drop_sched, attn_drop_sched, wd_sched;
    gptc_train_control ctl;
    gptc_op_plugins *plugins; /* 'op_plugins': the table with their operators (NULL: none) */
} trainer;

/* The hyper-parameters a step used. */
typedef struct { float lr, dropout, attn_dropout, weight_decay; } step_values;

/* What one step did (trainer_step), for what comes after it. */
typedef struct step_outcome {
    float loss;
    double norm;           /* global gradient norm before clipping */
    step_values hv;
    gptc_bad_kind kind;    /* the guard's verdict */
    bool skip;             /* a bad step: its update was dropped */
    bool act;              /* more bad steps in a row than allowed: roll back */
} step_outcome;

/* The run as gptc_train drives it. */
typedef struct run {
    trainer t;
    gptc_train_options o;  /* the caller's options, vocab resolved */
    gptc_step_fn on_step;
    void *user;
    gptc_train_result r;
    gptc_step_info base;   /* what every event reports */
    int stop;              /* the run ends after this step */
    double *step_ms;       /* [cap_ms] the step times (grown as steps run) */
    int cap_ms;
} run;

/* trainer_open.c: everything before the first step (on failure the caller frees t) */
gptc_status trainer_open(trainer *t, gptc_train_options *o);
/* trainer_resume.c */
gptc_status trainer_check_resume(const trainer *t, const gptc_train_options *o, const char *resume,
                                 const gptc_data_meta *meta, bool has_meta);
gptc_status trainer_start_weights(trainer *t, const gptc_train_options *o, const char *resume,
                                  const gptc_weights_info *init);
gptc_status trainer_roll_back(trainer *t, const char *why, char *where, size_t cap);
/* trainer_step.c */
void trainer_read_faults(trainer *t);
gptc_status trainer_step(trainer *t, step_outcome *out);
/* trainer_after.c */
gptc_status trainer_after_step(run *x, const step_outcome *s, double ms);
/* trainer.c */
void trainer_free(trainer *t);

#define TRAINER_SAMPLE_CAP 8192 /* bytes of a sample in the log */

#endif
