/* trainer_step.c — one optimizer step, the same on every rank: the step's hyper-parameters, the
 * micro-steps' gradients (exchanged while the last backward runs), the loss and global norm, the
 * step guard's verdict (agreed), and the optimizer's update of this rank's range (ZeRO-1: then the
 * parameters all-gathered). Also the faults the tests inject. */
#include "train/trainer_internal.h"
#include "core/profile.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Fault injection for the tests (docs/faults.md), read once at setup:
 *   GPTC_FAULT_NONFINITE=RANK:FROM[-TO][:always]  one gradient value of that rank is NaN in those
 *                                                 (1-based) steps, before the exchange, as a bad batch would make it
 *   GPTC_FAULT_SPIKE=RANK:FROM[-TO][:always]      that rank's loss gradient is scaled by 1000 there (a norm spike)
 * Each fires on the first pass over its steps only, unless ":always". */
static void read_fault(const char *var, int my_rank, fault *f) {
    const char *v = getenv(var);
    memset(f, 0, sizeof *f);
    if (!v) return;
    int rank, from, to, n;
    if (sscanf(v, "%d:%d-%d%n", &rank, &from, &to, &n) != 3) {
        if (sscanf(v, "%d:%d%n", &rank, &from, &n) != 2) return;
        to = from;
    }
    if (rank != my_rank || from < 1 || to < from) return;
    *f = (fault){.rank = rank, .from = from, .to = to, .always = strcmp(v + n, ":always") == 0};
}

/* whether the fault fires in the step about to run (1-based `step`) */
static bool fault_fires(fault *f, int step) {
    if (!f->from || step < f->from || step > f->to || (!f->always && step <= f->done)) return false;
    f->done = step;
    return true;
}

void trainer_read_faults(trainer *t) {
    read_fault("GPTC_FAULT_NONFINITE", t->rank, &t->nonfinite);
    read_fault("GPTC_FAULT_SPIKE", t->rank, &t->spike);
}

/* The hyper-parameters of the step about to run: a callback's override, else the schedule, else the
 * constant (the learning rate: its warm-up + cosine), the learning rate times a rollback's factor.
 * `done` is the steps completed; the schedules take the step's number as the log shows it, done + 1
 * (optim/hparam.h), and the warm-up + cosine its 0-based index (optim/optim.h). */
static float pick(float override, const gptc_hparam_schedule *s, int logged, float otherwise) {
    return !isnan(override) ? override : s->n ? gptc_hparam_at(s, logged) : otherwise;
}
static step_values values_at(const trainer *t, int done) {
    const gptc_train_options *o = t->o;
    int logged = done + 1;
    step_values v;
    v.lr = pick(t->ctl.lr, &t->lr_sched, logged, gptc_lr_at(&t->sched, done)) * t->state.lr_scale;
    v.dropout = pick(t->ctl.dropout, &t->drop_sched, logged, o->dropout);
    v.attn_dropout = pick(t->ctl.attn_dropout, &t->attn_drop_sched, logged, o->attn_dropout);
    v.weight_decay = pick(t->ctl.weight_decay, &t->wd_sched, logged, o->weight_decay);
    return v;
}

/* The dropout masks' seed of a micro-step: a function of the run's seed, the step, the micro-step and
 * the rank, so a resumed run draws the masks an uninterrupted one would. */
static uint64_t micro_seed(const trainer *t, int micro) {
    return gptc_hash64(t->o->seed + 0x9E3779B97F4A7C15ULL * ((uint64_t)t->state.step * 65536 + (uint64_t)micro * 1024 +
                                                           (uint64_t)t->rank + 1));
}

static void reducer_hook(void *user, size_t lo) { gptc_reducer_ready(user, lo); }

/* Tensor i's share of the norm where its product left one (m->wsumsq, gpt2.h), else a pass over its n floats at g
 * (gptc_be_grad_sumsq, in double) */
static bool has_share(const gptc_model *m, int i) { return m->wsumsq && m->wsumsq->set[i]; }
static double share_sumsq(const gptc_model *m, int i, const float *g, size_t n) {
    return has_share(m, i) ? m->wsumsq->sums[i] : gptc_be_grad_sumsq(&m->be, g, n);
}

/* Asks the next backward for the weight gradients' shares of the norm from their products (t->ws), or not */
static void want_wsumsq(trainer *t, bool on) {
    gptc_model *m = &t->model;
    m->wsumsq = on && t->ws.sums ? &t->ws : NULL;
    if (m->wsumsq) memset(t->ws.set, 0, sizeof(bool) * (size_t)m->ntensors);
}

/* The sum of squares of gradients g (g[0] parameter lo's) over arena floats [lo, hi): each tensor's
 * piece inside the range summed on its own (a whole weight's from its product where the backward took it there,
 * else gptc_be_grad_sumsq, in double), the pieces added in tensor order. Both update paths sum the global norm
 * this way (the fused one gets its pieces layer by layer, out of order, and adds them in tensor order at the
 * end), so they agree to the bit. */
static double tensor_sumsq(const trainer *t, const float *g, size_t lo, size_t hi) {
    const gptc_model *m = &t->model;
    const int nt = m->ps.n; /* the trainable set's tensors, in its compact arena */
    int *from = t->norm_from; /* tensor i's share: -2 none, -1 its product's, else its piece of the pass */
    int count = 0;
    for (int i = 0; i < nt; i++) {
        const gptc_tensor_desc *d = &m->ps.t[i];
        size_t a = d->offset > lo ? d->offset : lo, b = d->offset + d->numel < hi ? d->offset + d->numel : hi;
        from[i] = a >= b ? -2 : a == d->offset && b - a == d->numel && has_share(m, i) ? -1 : count;
        if (from[i] >= 0) t->norm_piece[count] = g + (a - lo), t->norm_n[count++] = b - a;
    }
    gptc_be_grad_sumsq_pieces(&m->be, t->norm_piece, t->norm_n, count, t->norm_passed);
    double sum = 0;
    for (int i = 0; i < nt; i++)
        sum += from[i] == -2 ? 0.0 : from[i] == -1 ? m->wsumsq->sums[i] : t->norm_passed[from[i]];
    return sum;
}

/* One optimizer step's gradients, loss and norm, the same on every rank: the micro-steps (the last
 * one exchanging the gradients while its backward runs), then the loss summed over the ranks and
 * the global gradient norm (with ZeRO-1 from the shards' sums of squares, added in rank order).
 * *g gets the reduced gradients of this rank's range [lo, hi). */
static gptc_status step_gradients(trainer *t, float *loss, double *norm, const float **g) {
    const gptc_train_options *o = t->o;
    gptc_model *m = &t->model;
    gptc_status st;
    gptc_model_zero_grad(m);
    double loss_sum = 0;
    for (int micro = 0; micro < t->accum; micro++) {
        st = gptc_loader_next(&t->train, t->inputs, t->targets);
        if (st) st = gptc_fail_prefix(st, "'data'");
        if ((st = gptc_dist_agree(st))) return st;
        /* accumulation: only the last micro-step's backward exchanges the (summed) gradients */
        m->grads_ready = t->use_red && micro == t->accum - 1 ? reducer_hook : NULL;
        m->grads_ready_user = &t->red;
        float scale = 1.0f / ((float)t->accum * t->world);
        m->dropout_seed = micro_seed(t, micro);
        want_wsumsq(t, micro == t->accum - 1); /* the last micro-step's products finish the gradients */
        if (micro == t->accum - 1) {
            /* a value the backward adds onto, so it stays NaN: the arena's first (wte's), or wpe's first where
             * the products overwrite wte's gradient (gpt2.h grads_fresh) */
            if (fault_fires(&t->nonfinite, t->state.step + 1)) (m->zero_count ? m->g.wpe : m->grads)[0] = NAN;
            if (fault_fires(&t->spike, t->state.step + 1)) scale *= 1000;
        }
        loss_sum += gptc_model_forward_backward(m, t->inputs, t->targets, o->batch, o->seq, scale);
    }
    m->grads_ready = NULL;
    if (t->use_red) {
        gptc_prof_begin(GPTC_PROF_COMM, "comm.wait_grads", -1);
        st = gptc_reducer_finish(&t->red);
        gptc_prof_end(0, 0);
        if ((st = gptc_dist_agree(st))) return st;
    }
    gptc_prof_begin(GPTC_PROF_PHASE, "optimizer", -1); /* closed by the caller after the update */
    *g = t->gshard ? t->gshard : m->grads + t->lo;
    double sums[2] = {loss_sum / t->accum, o->zero ? tensor_sumsq(t, *g, t->lo, t->hi) : 0};
    if (t->world > 1) gptc_prof_begin(GPTC_PROF_COMM, "comm.sum_loss", -1);
    st = gptc_dist_sum_ordered(sums, 2);
    if (t->world > 1) gptc_prof_end(0, 16.0 * t->world);
    if ((st = gptc_dist_agree(st))) return st;
    *loss = (float)(sums[0] / t->world);
    *norm = sqrt(o->zero ? sums[1] : tensor_sumsq(t, m->grads, 0, m->ps.floats));
    want_wsumsq(t, false);
    return GPTC_OK;
}

/* The step guard: every rank has the same loss and norm (summed in rank order) and so the same
 * window, and the verdict is agreed anyway, so every rank skips, rolls back or stops alike. */
static gptc_status judge(trainer *t, step_outcome *s) {
    const gptc_train_options *o = t->o;
    s->kind = gptc_guard_judge(&t->guard, s->loss, s->norm);
    double bad = s->kind != GPTC_BAD_NONE;
    gptc_status st = gptc_dist_agree(gptc_dist_sum_ordered(&bad, 1));
    if (st) return st;
    s->skip = bad > 0;
    if (s->skip && s->kind == GPTC_BAD_NONE) s->kind = GPTC_BAD_NONFINITE; /* another rank's verdict (cannot differ today) */
    t->state.bad_run = s->skip ? t->state.bad_run + 1 : 0;
    s->act = s->skip && t->state.bad_run > o->bad_steps;
    if (s->act && o->on_bad == GPTC_ON_BAD_STOP)
        st = gptc_fail(GPTC_ERR_NUMERIC, "step %d: loss %g, gradient norm %g: %s%s; lower 'lr' or check the data",
                       t->state.step + 1, s->loss, s->norm,
                       s->kind == GPTC_BAD_NONFINITE ? "not finite" : gptc_bad_kind_name(s->kind),
                       o->bad_steps ? " (more bad steps in a row than 'bad_steps')" : "");
    return gptc_dist_agree(st); /* agreeing names rank 0 as its source */
}

/* The optimizer's update of this rank's range with the gradients g of that range (a bad step's is
 * dropped: the data and the schedule move on); with ZeRO-1 the shards are then all-gathered. */
static gptc_status update(trainer *t, const float *g, const step_outcome *s) {
    const gptc_train_options *o = t->o;
    if (s->skip) return GPTC_OK;
    float scale = gptc_clip_scale(s->norm, o->clip);
    t->opt->update(&t->model, o, g, &t->ostate, t->lo, t->hi, s->hv.lr, s->hv.weight_decay, scale, t->state.step + 1);
    if (!o->zero) {
        gptc_model_pset_changed(&t->model, t->lo, t->hi);
        /* a device backend runs the update asynchronously; the checkpoint writer, the guard's rollback and
         * the evaluation read or write the arenas from the host after the step (a no-op on the CPU) */
        t->model.be.mem->synchronize();
        return GPTC_OK;
    }
    gptc_prof_begin(GPTC_PROF_COMM, "comm.allgather_params", -1);
    /* the trainable values are one arena in the compact layout (the whole model, or the adapters) */
    gptc_status st = gptc_dist_allgather_shards(t->model.ps.values, t->bounds);
    gptc_prof_end(0, sizeof(float) * (double)t->model.ps.floats);
    gptc_model_pset_changed(&t->model, 0, t->model.ps.floats);
    return gptc_dist_agree(st);
}

/* ---- --fused-update (docs/architecture.md, Training loop): no whole-model gradient. The first pass
 * (forward, classifier, backward) computes the embeddings' and ln_f's gradients in the compact arena
 * and each layer's in the one slot, whose per-tensor sums of squares the hook keeps as the layer
 * finishes; the global norm then judges the step and sets the clip factor, and a second backward over
 * the layers (gptc_model_backward_layers) rebuilds each layer's gradients in the slot and updates the
 * layer from the hook. The embeddings and ln_f are updated last (the classifier read wte in the first
 * pass; ln_f's weight is read by both passes). One micro-step per update (checked at open).
 *
 * On many ranks each layer's slot is all-reduced (blocking) in both passes before its sums or its
 * update, and the embeddings' and ln_f's gradients once after the first pass; every rank then holds the
 * same summed gradients (as after the ordinary path's exchange) and so the same norm. With ZeRO-1 each
 * rank updates only its shard's part of every range, and the parameters are all-gathered at the end. */

/* The optimizer on arena floats [lo, hi) clipped to this rank's range, gradients g (g[0] parameter lo's);
 * the state (optim/optimizer.h gptc_ostate) covers the rank's range and takes any sub-range of whole
 * tensors, or of ZeRO-1 shard pieces (whose bounds are snapped to int8 blocks). */
static void update_range(trainer *t, const float *g, size_t lo, size_t hi, const step_values *hv, float scale) {
    size_t a = lo > t->lo ? lo : t->lo, b = hi < t->hi ? hi : t->hi;
    if (a >= b) return;
    t->opt->update(&t->model, t->o, g + (a - lo), &t->ostate, a, b, hv->lr, hv->weight_decay, scale, t->state.step + 1);
    gptc_model_params_changed(&t->model, a, b);
}

/* x (n) summed over the ranks (blocking), counted as the reducer counts its exchanges (the run's comm
 * summary); nothing on one rank. */
static gptc_status fused_allreduce(trainer *t, float *x, size_t n) {
    if (t->world == 1) return GPTC_OK;
    gptc_prof_begin(GPTC_PROF_COMM, "comm.allreduce_fused", -1);
    double t0 = gptc_now();
    gptc_status st = gptc_dist_allreduce_f(x, n);
    t->red.wait_s += gptc_now() - t0;
    t->red.calls++;
    gptc_prof_end(0, sizeof(float) * (double)n);
    return st;
}

/* What the fused hook needs while the backward runs. */
typedef struct fused_pass {
    trainer *t;
    bool update;           /* false: the norm pass (sums into per_tensor); true: the update pass */
    double *per_tensor;    /* [ntensors] the sums of squares of the tensors' gradients */
    const step_values *hv;
    float scale;           /* the clip factor */
    gptc_status st;        /* the first exchange that failed (the rest of the pass is skipped) */
} fused_pass;

/* m->grads_ready under --fused-update: after layer l's backward (lo = its first float) the slot holds its
 * gradients; the other watermarks (ln_f, the embeddings) need nothing here. */
static void fused_hook(void *user, size_t lo) {
    fused_pass *p = user;
    gptc_model *m = &p->t->model;
    if (lo < m->layer_lo || lo >= m->lnf_lo || p->st) return;
    size_t hi = lo + m->layer_stride;
    float *slot = m->cgrads + m->layer_lo;
    if ((p->st = fused_allreduce(p->t, slot, m->layer_stride))) return;
    if (p->update) {
        update_range(p->t, slot, lo, hi, p->hv, p->scale);
        return;
    }
    int first = 2 + (int)((lo - m->layer_lo) / m->layer_stride) * GPTC_LAYER_TENSORS;
    for (int i = first; i < first + GPTC_LAYER_TENSORS; i++) {
        const gptc_tensor_desc *d = &m->tensors[i];
        p->per_tensor[i] = share_sumsq(m, i, slot + (d->offset - lo), d->numel);
    }
}

static gptc_status judge(trainer *t, step_outcome *s);

static gptc_status fused_step(trainer *t, step_outcome *s) {
    const gptc_train_options *o = t->o;
    gptc_model *m = &t->model;
    gptc_status st;
    double *per_tensor = malloc(sizeof(double) * m->ntensors);
    if (!per_tensor) return gptc_dist_agree(gptc_fail(GPTC_ERR_NOMEM, "out of memory"));
    fused_pass pass = {.t = t, .per_tensor = per_tensor, .hv = &s->hv};
    gptc_model_zero_grad(m);
    st = gptc_loader_next(&t->train, t->inputs, t->targets);
    if (st) st = gptc_fail_prefix(st, "'data'");
    if ((st = gptc_dist_agree(st))) goto done;
    m->grads_ready = fused_hook;
    m->grads_ready_user = &pass;
    m->dropout_seed = micro_seed(t, 0);
    want_wsumsq(t, true); /* the first pass's products (the second takes none) */
    float scale = 1.0f / ((float)t->accum * t->world); /* as step_gradients: the exchanged sum is the average */
    if (fault_fires(&t->nonfinite, t->state.step + 1)) m->g.wte[0] = NAN; /* as step_gradients does */
    if (fault_fires(&t->spike, t->state.step + 1)) scale *= 1000;
    double loss = gptc_model_forward_backward(m, t->inputs, t->targets, o->batch, o->seq, scale);
    /* the embeddings' and ln_f's gradients, exchanged once */
    int nt = m->ntensors;
    size_t cut = m->lnf_lo - (m->layer_lo + m->layer_stride); /* layers 1..L-1, absent from the compact arena */
    float *gl = m->cgrads + m->lnf_lo - cut;
    if ((st = gptc_dist_agree(pass.st)) || (st = gptc_dist_agree(fused_allreduce(t, m->cgrads, m->layer_lo))) ||
        (st = gptc_dist_agree(fused_allreduce(t, gl, m->num_floats - m->lnf_lo))))
        goto done;
    t->red.rounds++;
    gptc_prof_begin(GPTC_PROF_PHASE, "optimizer", -1);
    /* their sums (the layers' came from the hook), then all added in tensor order */
    for (int i = 0; i < nt; i++) {
        const gptc_tensor_desc *d = &m->tensors[i];
        if (i < 2) per_tensor[i] = share_sumsq(m, i, m->cgrads + d->offset, d->numel);
        if (i >= nt - 2) per_tensor[i] = gptc_be_grad_sumsq(&m->be, gl + (d->offset - m->lnf_lo), d->numel);
    }
    want_wsumsq(t, false);
    double sum = 0;
    for (int i = 0; i < nt; i++) sum += per_tensor[i];
    s->norm = sqrt(sum);
    /* the loss summed in rank order, as step_gradients does */
    if (t->world > 1) gptc_prof_begin(GPTC_PROF_COMM, "comm.sum_loss", -1);
    st = gptc_dist_sum_ordered(&loss, 1);
    if (t->world > 1) gptc_prof_end(0, 8.0 * t->world);
    s->loss = (float)(loss / t->world);
    gptc_prof_end(0, 0); /* optimizer */
    if ((st = gptc_dist_agree(st)) || (st = judge(t, s))) goto done;
    if (!s->skip) {
        pass.update = true;
        pass.scale = gptc_clip_scale(s->norm, o->clip);
        gptc_model_backward_layers(m);
        if ((st = gptc_dist_agree(pass.st))) goto done;
        gptc_prof_begin(GPTC_PROF_PHASE, "optimizer", -1);
        update_range(t, m->cgrads, 0, m->layer_lo, &s->hv, pass.scale);     /* wte, wpe */
        update_range(t, gl, m->lnf_lo, m->num_floats, &s->hv, pass.scale); /* ln_f */
        if (o->zero) {
            gptc_prof_begin(GPTC_PROF_COMM, "comm.allgather_params", -1);
            st = gptc_dist_allgather_shards(m->params, t->bounds);
            gptc_prof_end(0, sizeof(float) * (double)m->num_floats);
            gptc_model_params_changed(m, 0, m->num_floats);
        }
        gptc_prof_end(0, 0);
        if ((st = gptc_dist_agree(st))) goto done;
    }
    t->state.step++;
done:
    m->grads_ready = NULL;
    want_wsumsq(t, false);
    free(per_tensor);
    return st;
}

gptc_status trainer_step(trainer *t, step_outcome *s) {
    const float *g;
    gptc_status st;
    s->hv = values_at(t, t->state.step);
    t->model.dropout = s->hv.dropout;
    t->model.attn_dropout = s->hv.attn_dropout;
    if (t->o->fused_update) return fused_step(t, s);
    if ((st = step_gradients(t, &s->loss, &s->norm, &g)) || (st = judge(t, s)) || (st = update(t, g, s))) return st;
    t->state.step++;
    gptc_prof_end(0, 0); /* optimizer, begun by step_gradients */
    return GPTC_OK;
}
