/* train_with_callback.c — embeds libgptc (include/gptc.h only) and trains with callbacks that
 *   - ramp dropout: held at 0 until the train loss falls below RAMP_LOSS, then raised linearly to
 *     MAX_DROPOUT over RAMP_STEPS steps (what keeps early training of large models steady);
 *   - stop early on a validation plateau: when the val loss has not improved by MIN_DELTA for
 *     PATIENCE evaluations in a row, the run stops (a checkpoint is written);
 *   - report each checkpoint.
 * Build: make build/examples/train_with_callback (links build/libgptc.a).
 * Run:   build/examples/train_with_callback DATA CKPT [MAX_STEPS [MIN_DELTA [PATIENCE [RAMP_LOSS]]]]
 *        (defaults 400, 0.01, 3, 3.0)
 *        DATA: a folder made by `gptc prepare` (with a val split), CKPT: the checkpoint folder. */
#include "gptc.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#define RAMP_STEPS 40
#define MAX_DROPOUT 0.1f

typedef struct {
    int ramp_from;      /* step the ramp began (0: not yet) */
    float best;         /* best val loss so far */
    int best_step, since; /* its step; evaluations since it improved */
    float min_delta;
    int patience;
    float ramp_loss;
} watcher;

static void on_step_end(void *user, const gptc_step_info *in, gptc_train_control *ctl) {
    watcher *w = user;
    if (!w->ramp_from && in->loss < w->ramp_loss) {
        w->ramp_from = in->step;
        printf("step %d: train loss %.4f < %.1f, ramping dropout to %.2f over %d steps\n", in->step, in->loss, w->ramp_loss,
               MAX_DROPOUT, RAMP_STEPS);
    }
    if (w->ramp_from) {
        float f = (float)(in->step - w->ramp_from + 1) / RAMP_STEPS;
        ctl->dropout = MAX_DROPOUT * (f < 1 ? f : 1); /* used from the next step on */
    } else {
        ctl->dropout = 0;
    }
    if (in->step % 10 == 0) printf("step %d: loss %.4f, dropout used %.4f\n", in->step, in->loss, in->dropout);
}

static void on_eval(void *user, int step, float val_loss, gptc_train_control *ctl) {
    watcher *w = user;
    printf("step %d: val loss %.4f\n", step, val_loss);
    if (val_loss < w->best - w->min_delta) {
        w->best = val_loss;
        w->best_step = step;
        w->since = 0;
    } else if (++w->since >= w->patience) {
        printf("plateau: val loss has not improved by %g for %d evaluations (best %.4f at step %d); stopping at step %d\n",
               w->min_delta, w->patience, w->best, w->best_step, step);
        ctl->stop = 1;
    }
}

static void on_checkpoint(void *user, int step, const char *path, gptc_train_control *ctl) {
    (void)user, (void)ctl;
    printf("step %d: checkpoint %s\n", step, path);
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s DATA CKPT [MAX_STEPS [MIN_DELTA [PATIENCE [RAMP_LOSS]]]]\n", argv[0]);
        return 2;
    }
    gptc_train_options o;
    gptc_train_options_default(&o);
    if (gptc_model_preset("tiny", &o.model) != GPTC_OK) return 2;
    o.data = argv[1];
    o.ckpt_dir = argv[2];
    o.steps = argc > 3 ? atoi(argv[3]) : 400;
    o.batch = 4;
    o.seq = 64;
    o.lr = 3e-3f;
    o.warmup = 20;
    o.eval_every = 10;
    o.eval_batches = 4;
    o.ckpt_every = 100;
    o.threads = 2;
    watcher w = {.best = INFINITY, .min_delta = argc > 4 ? (float)atof(argv[4]) : 0.01f, .patience = argc > 5 ? atoi(argv[5]) : 3,
                 .ramp_loss = argc > 6 ? (float)atof(argv[6]) : 3.0f};
    gptc_callbacks cb = {.user = &w, .on_step_end = on_step_end, .on_eval = on_eval, .on_checkpoint = on_checkpoint};
    o.callbacks = &cb;
    gptc_train_result r;
    gptc_status st = gptc_train(&o, NULL, NULL, &r);
    if (st != GPTC_OK) {
        fprintf(stderr, "train_with_callback: %s\n", gptc_last_error());
        return 1;
    }
    printf("done: %d steps from step %d, loss %.4f -> %.4f, val loss %.4f -> %.4f\n", r.steps_run, r.first_step,
           r.first_loss, r.last_loss, r.first_val_loss, r.last_val_loss);
    return 0;
}
