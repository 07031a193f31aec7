/* trainer.c — gptc_train: open the run (trainer_open.c), then step (trainer_step.c) and act on each
 * step (trainer_after.c) until the last, and summarise the run. Reports through the step callback;
 * prints nothing. How the pieces share the run: train/trainer_internal.h. */
#include "train/trainer_internal.h"
#include "core/profile.h"
#include "train/profile_report.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Every rank's weights must be the same bits after the last step (the same averaged gradients and
 * the same update everywhere); a difference means the ranks diverged, and the checkpoint, written
 * from rank 0 alone, would not be what the others trained. */
static gptc_status check_ranks_agree(trainer *t) {
    if (t->world == 1) return GPTC_OK;
    uint32_t mine = gptc_crc32c(0, t->model.params, sizeof(float) * t->model.num_floats);
    if (t->model.lora) mine = gptc_crc32c(mine, t->model.lora->params, sizeof(float) * t->model.lora->floats);
    uint32_t *all = malloc(sizeof *all * t->world);
    gptc_status st = all ? GPTC_OK : gptc_fail(GPTC_ERR_NOMEM, "out of memory");
    if ((st = gptc_dist_agree(st))) return st;
    st = gptc_comm_allgather(&mine, all, sizeof mine);
    for (int r = 1; r < t->world && !st; r++)
        if (all[r] != all[0])
            st = gptc_fail(GPTC_ERR_STATE, "the weights of rank %d differ from rank 0's after step %d (CRC32C %08x vs "
                           "%08x): the ranks diverged; please report it", r, t->state.step, all[r], all[0]);
    free(all);
    return st;
}

void trainer_free(trainer *t) {
    gptc_reducer_free(&t->red);
    free(t->bounds);
    free(t->ws.sums);
    free(t->ws.set);
    free(t->ws.rows);
    free(t->ws.part);
    free(t->norm_piece);
    free(t->norm_n);
    free(t->norm_passed);
    free(t->norm_from);
    free(t->starts);
    gptc_free(t->gshard);
    gptc_tokenizer_free(t->tok);
    gptc_mc_free(&t->hs);
    free(t->sample);
    gptc_guard_free(&t->guard);
    free(t->guard_buf);
    gptc_ostate_free(&t->ostate); /* from the model's backend memory (gptc_ostate_alloc) */
    gptc_model_free(&t->model);
    gptc_op_plugins_free(t->plugins);
    gptc_loader_close(&t->train);
    gptc_loader_close(&t->val);
    gptc_free(t->inputs);
    gptc_free(t->targets);
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The step's wall time, kept for the median (the buffer grows as steps run: 'steps' is a bound, not a
 * size to allocate up front; out of memory, the median omits the rest). */
static void record_time(run *x, double ms, float loss) {
    gptc_train_result *r = &x->r;
    if (r->steps_run == x->cap_ms) {
        double *grown = realloc(x->step_ms, sizeof(double) * 2 * (size_t)x->cap_ms);
        if (grown) x->step_ms = grown, x->cap_ms *= 2;
    }
    if (r->steps_run < x->cap_ms) x->step_ms[r->steps_run] = ms;
    if (r->steps_run == 0) r->first_loss = loss;
    r->last_loss = loss;
    r->steps_run++;
}

/* The medians of the step times and the exchanges' share of them. */
static void summarise(run *x) {
    gptc_train_result *r = &x->r;
    trainer *t = &x->t;
    r->lr_scale = t->state.lr_scale;
    int nms = r->steps_run < x->cap_ms ? r->steps_run : x->cap_ms; /* the step times recorded */
    if (t->red.rounds) {
        double sum = 0;
        for (int i = 0; i < nms; i++) sum += x->step_ms[i];
        r->comm_calls_per_step = (double)t->red.calls / t->red.rounds;
        r->comm_wait_ms_per_step = t->red.wait_s * 1e3 / t->red.rounds;
        r->comm_wait_share = sum > 0 ? t->red.wait_s * 1e3 / sum : 0;
    }
    if (nms) {
        qsort(x->step_ms, nms, sizeof *x->step_ms, cmp_double);
        double med = nms % 2 ? x->step_ms[nms / 2] : 0.5 * (x->step_ms[nms / 2 - 1] + x->step_ms[nms / 2]);
        r->ms_per_step = med;
        r->tokens_per_s = x->base.tokens_per_update / (med * 1e-3);
    }
}

/* After trainer_open: the result's first fields, the step-time buffer, the START event. */
static gptc_status start(run *x) {
    trainer *t = &x->t;
    gptc_train_result *r = &x->r;
    r->first_step = t->state.step;
    r->optim_bytes = t->optim_bytes;
    r->model = x->o.model;
    r->num_params = gptc_model_num_params(&x->o.model);
    int left = x->o.steps - r->first_step;
    x->cap_ms = left < 1 ? 1 : left < 1024 ? left : 1024;
    x->step_ms = malloc(sizeof(double) * x->cap_ms);
    gptc_status st = gptc_dist_agree(x->step_ms ? GPTC_OK : gptc_fail(GPTC_ERR_NOMEM, "out of memory"));
    if (st) return st;
    x->base = (gptc_step_info){.event = GPTC_EVENT_START, .model = &x->o.model, .first_step = r->first_step,
                               .tokens_per_update = (long)t->state.hp.i[GPTC_HP_total_batch], .step = r->first_step,
                               .flops_per_token = gptc_model_step_flops_per_token(&t->model, x->o.seq),
                               .steps = x->o.steps, .val_loss = NAN, .hellaswag_acc = NAN,
                               .hellaswag_acc_norm = NAN};
    x->stop = t->rank == 0 && x->on_step && x->on_step(x->user, &x->base);
    gptc_dist_bcast(&x->stop, sizeof x->stop, 0);
    return GPTC_OK;
}

/* Steps until the last one or a stop; profiling records the window of steps asked for. */
static gptc_status loop(run *x) {
    trainer *t = &x->t;
    const gptc_train_options *o = &x->o;
    gptc_status st;
    if (o->profile) gptc_prof_set_rank(t->rank);
    bool profiled = false; /* recording began (at the window's first step) */
    while (t->state.step < o->steps && !x->stop) {
        if (o->profile && !profiled && t->state.step + 1 >= o->profile_from) {
            gptc_prof_start();
            profiled = true;
        }
        double t0 = gptc_now();
        gptc_prof_begin(GPTC_PROF_STEP, "step", -1);
        step_outcome s;
        if ((st = trainer_step(t, &s))) return st;
        gptc_prof_end(0, 0); /* step */
        if (o->profile_to && t->state.step >= o->profile_to) gptc_prof_stop(); /* the window ends: keep what it holds */
        double ms = (gptc_now() - t0) * 1e3;
        record_time(x, ms, s.loss);
        if ((st = trainer_after_step(x, &s, ms))) return st;
    }
    return GPTC_OK;
}

gptc_status gptc_train(const gptc_train_options *opts, gptc_step_fn on_step, void *user, gptc_train_result *res) {
    run *x = calloc(1, sizeof *x);
    if (!x) return gptc_fail(GPTC_ERR_NOMEM, "out of memory");
    x->o = *opts;
    x->on_step = on_step;
    x->user = user;
    x->t.o = &x->o;
    x->t.rank = gptc_dist_rank();
    x->t.world = gptc_dist_world();
    x->r = (gptc_train_result){.first_val_loss = NAN, .last_val_loss = NAN, .world = x->t.world};
    /* a failure on any rank stops every rank here, before the first exchange of gradients */
    gptc_status st = gptc_dist_agree(trainer_open(&x->t, &x->o));
    if (!st) st = start(x);
    if (!st) st = loop(x);
    if (!st) st = check_ranks_agree(&x->t);
    if (!st) {
        summarise(x);
        if (x->o.profile) {
            gptc_prof_stop();
            st = gptc_prof_write_trace(x->o.profile);
        }
    }
    if (x->o.profile) gptc_prof_stop();
    free(x->step_ms);
    trainer_free(&x->t);
    if (res) *res = x->r;
    free(x);
    return st;
}
