/* trainer_after.c — what follows each step: the step's report (loss, values, guard) with the val loss
 * and a sample on rank 0, the callbacks (whose stop and overrides every rank follows), a rollback
 * after too many bad steps, and the periodic or final checkpoint. */
#include "train/trainer_internal.h"
#include "core/profile.h"
#include "train/sampler.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static float evaluate(trainer *t) {
    const gptc_train_options *o = t->o;
    float drop = t->model.dropout, attn = t->model.attn_dropout;
    t->model.dropout = t->model.attn_dropout = 0; /* evaluation sees the whole model */
    gptc_loader_rewind(&t->val);
    double sum = 0;
    int n = 0;
    gptc_prof_begin(GPTC_PROF_PHASE, "eval", -1);
    for (int i = 0; i < o->eval_batches; i++) {
        if (gptc_loader_next(&t->val, t->inputs, t->targets) != GPTC_OK) { n = 0; break; }
        if (gptc_loader_tell(&t->val).epoch > 0) break; /* the val set is smaller than eval_batches */
        sum += gptc_model_forward(&t->model, t->inputs, t->targets, o->batch, o->seq);
        n++;
    }
    gptc_prof_end(0, 0);
    t->model.dropout = drop;
    t->model.attn_dropout = attn;
    return n ? (float)(sum / n) : NAN;
}

typedef struct { char *buf; size_t len; } sample_buf;

static void append_text(void *user, const char *text, size_t len) {
    sample_buf *b = user;
    if (b->len + len >= TRAINER_SAMPLE_CAP) len = TRAINER_SAMPLE_CAP - 1 - b->len;
    memcpy(b->buf + b->len, text, len);
    b->len += len;
    b->buf[b->len] = '\0';
}

/* A short sample from the model as it is now, decoded with the data's tokenizer. */
static const char *sample_now(trainer *t) {
    gptc_sample_options so;
    gptc_sample_options_default(&so);
    so.tokens = t->o->sample_tokens;
    so.seed = t->o->seed ^ (uint64_t)t->state.step;
    so.pack = 0; /* no copy of the weights beside the training's (the memory plan has no room for it) */
    sample_buf b = {t->sample, 0};
    t->sample[0] = '\0';
    if (gptc_generate(&t->model, t->tok, "", &so, append_text, &b) != GPTC_OK) return NULL;
    return t->sample;
}

/* Every rank calls it: rank 0 writes the checkpoint (with ZeRO-1 on many ranks, after gathering
 * every rank's state shards — elements in the state's type, and for int8 the blocks' scales — into whole
 * buffers, so the file is the one a single rank writes); returns the agreed status. */
static gptc_status save(trainer *t, char *written, size_t cap) {
    gptc_status st = GPTC_OK;
    gptc_prof_begin(GPTC_PROF_PHASE, "checkpoint", -1);
    gptc_ostate whole = {0}, state = t->ostate;
    size_t *bblk = NULL; /* [world+1] the shards' first blocks (int8) */
    if (t->bounds && t->world > 1) { /* ZeRO-1 on many ranks (with or without the fused update) */
        const gptc_model *m = &t->model;
        if (t->rank == 0) st = gptc_ostate_alloc(&whole, t->opt, t->ostate.type, m, 0, m->ps.floats);
        if (!st && !(bblk = malloc(sizeof(size_t) * (t->world + 1)))) st = gptc_fail(GPTC_ERR_NOMEM, "out of memory");
        if ((st = gptc_dist_agree(st))) goto done;
        for (int r = 0; r <= t->world; r++) bblk[r] = gptc_ostate_block_of(m->ps.t, m->ps.n, t->bounds[r]);
        size_t elem = gptc_ostate_elem(t->ostate.type);
        for (int b = 0; b < t->opt->nstates; b++) {
            if ((st = gptc_dist_gather_shards_elem(t->ostate.buf[b], whole.buf[b], t->bounds, elem, 0))) goto done;
            if (t->ostate.type == GPTC_OSTATE_INT8 &&
                (st = gptc_dist_gather_shards(t->ostate.absmax[b], whole.absmax[b], bblk, 0)))
                goto done;
        }
        state = whole;
    }
    if (t->rank == 0) {
        gptc_loader_pos pos = gptc_loader_tell(&t->train);
        t->state.loader_epoch = pos.epoch;
        t->state.loader_cursor = pos.cursor;
        t->state.ov_lr = t->ctl.lr;
        t->state.ov_dropout = t->ctl.dropout;
        t->state.ov_attn_dropout = t->ctl.attn_dropout;
        t->state.ov_weight_decay = t->ctl.weight_decay;
        t->state.guard = t->guard_buf;
        t->state.guard_len = gptc_guard_packed_len(&t->guard);
        gptc_guard_pack(&t->guard, t->guard_buf);
        st = gptc_ckpt_save(t->o->ckpt_dir, &t->model, t->opt, &state, &t->state, t->o->keep, written, cap);
    }
done:
    gptc_ostate_free(&whole);
    free(bblk);
    gptc_prof_end(0, 0);
    return gptc_dist_agree(st);
}

/* The STEP event: rank 0 evaluates and samples when due, then reports to on_step and the callbacks. */
static void report(run *x, const step_outcome *s, double ms, gptc_step_info *info) {
    trainer *t = &x->t;
    const gptc_train_options *o = &x->o;
    *info = x->base;
    info->event = GPTC_EVENT_STEP;
    info->step = t->state.step;
    info->loss = s->loss;
    info->lr = s->hv.lr;
    info->grad_norm = (float)s->norm;
    info->skipped = s->skip;
    info->bad = gptc_bad_kind_name(s->kind);
    info->z_loss = t->guard.z_loss;
    info->z_norm = t->guard.z_norm;
    info->bad_run = t->state.bad_run;
    info->lr_scale = t->state.lr_scale;
    info->rollbacks = t->state.rollbacks;
    info->dropout = s->hv.dropout;
    info->attn_dropout = s->hv.attn_dropout;
    info->weight_decay = s->hv.weight_decay;
    info->ms = ms;
    info->tokens_per_s = x->base.tokens_per_update / (ms * 1e-3);
    if (t->rank != 0) return;
    bool last = t->state.step == o->steps;
    if (t->has_val && ((o->eval_every && t->state.step % o->eval_every == 0) || last || x->r.steps_run == 1)) {
        info->val_loss = evaluate(t);
        if (isnan(x->r.first_val_loss)) x->r.first_val_loss = info->val_loss;
        x->r.last_val_loss = info->val_loss;
    }
    if (t->hs.n && ((o->eval_every && t->state.step % o->eval_every == 0) || last || x->r.steps_run == 1)) {
        gptc_mc_result hr;
        gptc_prof_begin(GPTC_PROF_PHASE, "eval.hellaswag", -1);
        gptc_status st = gptc_mc_score(&t->model, &t->hs, &hr, NULL, NULL);
        gptc_prof_end(0, 0);
        if (st == GPTC_OK) info->hellaswag_acc = (float)hr.acc, info->hellaswag_acc_norm = (float)hr.acc_norm;
        else gptc_warn("'eval_hellaswag': %s", gptc_last_error());
    }
    if (t->tok && t->state.step % o->sample_every == 0) info->sample = sample_now(t);
    if (x->on_step && x->on_step(x->user, info)) x->stop = 1;
    const gptc_callbacks *cb = o->callbacks;
    if (cb && cb->on_step_end) cb->on_step_end(cb->user, info, &t->ctl);
    if (cb && cb->on_eval && !isnan(info->val_loss)) cb->on_eval(cb->user, info->step, info->val_loss, &t->ctl);
    if (t->ctl.stop) x->stop = 1;
}

/* Too many bad steps in a row: back to the newest checkpoint, reported as a ROLLBACK event. */
static gptc_status roll_back(run *x, const gptc_step_info *info) {
    trainer *t = &x->t;
    char written[4096];
    gptc_status st = trainer_roll_back(t, info->bad, written, sizeof written);
    if (st) return st;
    x->r.rollbacks++;
    if (x->on_step && t->rank == 0) {
        gptc_step_info back = x->base;
        back.event = GPTC_EVENT_ROLLBACK;
        back.step = t->state.step;
        back.ckpt_path = written;
        back.lr_scale = t->state.lr_scale;
        back.rollbacks = t->state.rollbacks;
        back.bad = info->bad;
        if (x->on_step(x->user, &back)) x->stop = 1;
    }
    gptc_dist_bcast(&x->stop, sizeof x->stop, 0);
    return GPTC_OK;
}

/* A checkpoint, reported as a CHECKPOINT event and to the callbacks (which may still stop the run). */
static gptc_status checkpoint(run *x, const gptc_step_info *info) {
    trainer *t = &x->t;
    char written[4096];
    gptc_status st = save(t, written, sizeof written);
    if (st) return gptc_fail_prefix(st, "'ckpt_dir': saving step %d failed, the previous checkpoints are kept", t->state.step);
    if (x->on_step && t->rank == 0) {
        gptc_step_info saved = *info;
        saved.event = GPTC_EVENT_CHECKPOINT;
        saved.val_loss = NAN;
        saved.sample = NULL;
        saved.ckpt_path = written;
        x->on_step(x->user, &saved);
    }
    const gptc_callbacks *cb = x->o.callbacks;
    if (t->rank == 0 && cb && cb->on_checkpoint) cb->on_checkpoint(cb->user, t->state.step, written, &t->ctl);
    if (cb) gptc_dist_bcast(&t->ctl, sizeof t->ctl, 0);
    if (t->ctl.stop) x->stop = 1;
    return GPTC_OK;
}

gptc_status trainer_after_step(run *x, const step_outcome *s, double ms) {
    trainer *t = &x->t;
    const gptc_train_options *o = &x->o;
    if (s->skip) x->r.skipped_steps++;
    gptc_step_info info;
    report(x, s, ms, &info);
    /* rank 0's callbacks may stop the run or change the values of the next steps: all ranks follow */
    gptc_dist_bcast(&x->stop, sizeof x->stop, 0);
    if (o->callbacks) gptc_dist_bcast(&t->ctl, sizeof t->ctl, 0);
    if (s->act && !x->stop) return roll_back(x, &info);
    /* a periodic checkpoint is a known-good state to roll back to: none is written on a bad step */
    bool last = t->state.step == o->steps;
    if (o->ckpt_dir && ((o->ckpt_every && t->state.step % o->ckpt_every == 0 && !s->skip) || last || x->stop))
        return checkpoint(x, &info);
    return GPTC_OK;
}
