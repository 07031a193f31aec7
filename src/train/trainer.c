/* trainer.c — the training loop: check everything, set up (or resume) model, optimizer and loaders,
 * then per step: micro-batches with gradient accumulation, global-norm clipping, the LR schedule,
 * AdamW, evaluation and checkpoints. Reports through the step callback; prints nothing.
 *
 * Data parallel (dist/dist.h): each rank reads its slice of every global batch; on the last
 * micro-step the reducer exchanges the gradients bucket by bucket while the backward runs (each
 * rank's loss gradient is pre-scaled by 1/ranks, so the sums are the average); loss and norm are
 * summed in rank order, so every rank takes the same decisions. With ZeRO-1 each rank holds the
 * moments of its shard of the arena, receives its shard of the reduced gradients, updates it, and
 * the parameters are all-gathered. Rank 0 alone evaluates, samples, reports and writes checkpoints;
 * every failure goes through gptc_dist_agree, so all ranks stop together with its message. */
#include "gptc.h"
#include "data/data.h"
#include "dist/dist.h"
#include "model/plan.h"
#include "io/io.h"
#include "optim/optim.h"
#include "optim/hparam.h"
#include "optim/optimizer.h"
#include "train/hparams.h"
#include "train/checkpoint.h"
#include "train/guard.h"
#include "train/weights.h"
#include "kernels/plugin.h"
#include "train/profile_report.h"
#include "train/sampler.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void gptc_train_options_default(gptc_train_options *o) {
    memset(o, 0, sizeof *o);
    gptc_model_preset("small-cpu", &o->model);
    gptc_hp_defaults(o); /* train/hparams.def */
    o->shuffle = 1;
    o->on_bad = GPTC_ON_BAD_ROLLBACK;
}

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
    float *ostate[GPTC_OPTIM_MAX_STATES]; /* its state buffers, each of arena floats [lo, hi) */
    int rank, world;
    size_t lo, hi;         /* the floats this rank updates: all, or with ZeRO-1 its shard */
    size_t *bounds;        /* [world+1] ZeRO-1 shard bounds (NULL without ZeRO-1) */
    float *gshard;         /* ZeRO-1 on many ranks: this rank's reduced gradient shard (hi-lo) */
    size_t *starts;        /* [ntensors] the tensors' offsets, for planning buckets */
    gptc_reducer red;      /* the gradient exchange (many ranks only) */
    size_t optim_bytes;    /* what allocating the state buffers added to gptc_alloc's live bytes */
    bool use_red;
    fault nonfinite;       /* GPTC_FAULT_NONFINITE: steps whose gradient this rank poisons */
    fault spike;           /* GPTC_FAULT_SPIKE: steps whose gradient this rank scales by 1000 */
    gptc_guard guard;      /* judges each step (train/guard.h) */
    float *guard_buf;      /* the guard's packed state, for checkpoints */
    gptc_loader train, val;
    bool has_val;
    int *inputs, *targets; /* (B,T) */
    int accum;
    gptc_tokenizer *tok;   /* the data's tokenizer, for samples in the log (NULL: none) */
    char *sample;          /* the last sample's text */
    gptc_trainer_state state;
    gptc_lr_schedule sched;
    /* --*-schedule (n 0: none) and the callbacks' overrides (NaN: none) */
    gptc_hparam_schedule lr_sched, drop_sched, attn_drop_sched, wd_sched;
    gptc_train_control ctl;
    gptc_op_plugins *plugins; /* --op-plugin: the table with their operators (NULL: none) */
} trainer;

/* The ranges of train/hparams.def, then what no single range says. Options are named by their field,
 * in single quotes (train/hparams.h). */
static gptc_status check_options(const gptc_train_options *o, int world) {
    gptc_status st;
    if ((st = gptc_hp_check(o))) return st;
    const gptc_optimizer_kind *opt = gptc_optimizer_find(o->optimizer);
    if (!opt)
        return gptc_fail(GPTC_ERR_ARG, "'optimizer' %s: unknown (expected one of %s)", o->optimizer ? o->optimizer : "(null)",
                         gptc_optimizer_names());
    if ((st = opt->check(o))) return st;
    if (o->seq > o->model.context)
        return gptc_fail(GPTC_ERR_ARG, "'seq' %d: longer than the model's context %d; use 'seq' <= %d or a larger 'model.context'",
                         o->seq, o->model.context, o->model.context);
    if ((double)o->batch * o->seq * world > 1e15)
        return gptc_fail(GPTC_ERR_ARG, "'batch' %d 'seq' %d: %.3g tokens per micro-step over %d ranks is beyond any "
                         "machine; use a smaller 'batch' or 'seq'", o->batch, o->seq, (double)o->batch * o->seq * world, world);
    long bt = (long)o->batch * o->seq * world;
    if (o->total_batch % bt)
        return gptc_fail(GPTC_ERR_ARG, "'total_batch' %ld: must be a positive multiple of 'batch' x 'seq' x ranks = %ld",
                         o->total_batch, bt);
    if (o->total_batch / bt > INT_MAX)
        return gptc_fail(GPTC_ERR_ARG, "'total_batch' %ld: would take %ld micro-steps of 'batch' x 'seq' x ranks = %ld "
                         "tokens per update, more than %d; use a smaller 'total_batch'", o->total_batch,
                         o->total_batch / bt, bt, INT_MAX);
    if (o->on_bad != GPTC_ON_BAD_ROLLBACK && o->on_bad != GPTC_ON_BAD_STOP)
        return gptc_fail(GPTC_ERR_ARG, "'on_bad' %d: must be rollback or stop", (int)o->on_bad);
    if (o->naive_attention && (o->attn_dropout > 0 || (o->attn_dropout_schedule && *o->attn_dropout_schedule)))
        return gptc_fail(GPTC_ERR_ARG, "'attn_dropout': only the flash attention drops attention probabilities; drop "
                         "'naive_attention'");
    if (!o->data || !*o->data) return gptc_fail(GPTC_ERR_ARG, "'data': missing; give a shard, a glob or a folder made by `gptc prepare`");
    if (o->ckpt_dir && strlen(o->ckpt_dir) > 3000) return gptc_fail(GPTC_ERR_ARG, "'ckpt_dir': path too long");
    if (o->ckpt_dir && gptc_is_file(o->ckpt_dir))
        return gptc_fail(GPTC_ERR_ARG, "'ckpt_dir' %s: is a file; give a folder (it is created if missing)", o->ckpt_dir);
    if (o->profile_from < 0 || o->profile_to < 0 || (o->profile_to && o->profile_to < o->profile_from))
        return gptc_fail(GPTC_ERR_ARG, "'profile_from' %d 'profile_to' %d: give 1 <= from <= to (0: open end)",
                         o->profile_from, o->profile_to);
    if (o->profile && gptc_dist_rank() == 0) return gptc_prof_check_path(o->profile); /* rank 0 writes it */
    return GPTC_OK;
}

/* Data prepared by `gptc prepare` names its tokenizer and vocabulary size; a model whose
 * vocabulary differs would train on ids it cannot represent, or waste rows it never sees. */
static gptc_status check_data_tokenizer(const char *flag, const char *spec, const gptc_model_config *m) {
    gptc_data_meta meta = {0};
    bool found = false;
    gptc_status st = gptc_data_meta_read(spec, &meta, &found);
    if (st) return gptc_fail_prefix(st, "%s", flag);
    if (found && meta.vocab != m->vocab)
        return gptc_fail(GPTC_ERR_ARG,
                         "%s %s: tokenized with %s (vocab %d) but the model's vocab is %d; use 'model.vocab' %d, or "
                         "prepare the data with the model's tokenizer",
                         flag, spec, meta.tokenizer, meta.vocab, m->vocab, meta.vocab);
    return GPTC_OK;
}

static gptc_status open_loader(gptc_loader *l, const char *spec, bool want_val, const char *flag,
                               const gptc_train_options *o, int vocab, bool shuffle, int rank, int world) {
    char **paths;
    int n;
    gptc_status st = gptc_data_resolve(spec, want_val, &paths, &n);
    if (st) return gptc_fail_prefix(st, "%s", flag);
    st = gptc_loader_open(l, paths, n, o->batch, o->seq, vocab, shuffle, o->seed, rank, world);
    gptc_paths_free(paths, n);
    if (st) return gptc_fail_prefix(st, "%s", flag);
    return GPTC_OK;
}

/* The settings a checkpoint records about the run that wrote it. */
static void state_from_options(gptc_trainer_state *s, const gptc_train_options *o, long tokens_per_update) {
    gptc_hp_capture(&s->hp, o);
    s->hp.i[GPTC_HP_total_batch] = tokens_per_update;
    s->ov_lr = s->ov_dropout = s->ov_attn_dropout = s->ov_weight_decay = NAN;
}

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

/* Every rank calls it: rank 0 writes the checkpoint (with ZeRO-1 on many ranks, after gathering
 * every rank's moment shards into whole buffers, so the file is the one a single rank writes);
 * returns the agreed status. */
static gptc_status save(trainer *t, char *written, size_t cap) {
    gptc_status st = GPTC_OK;
    gptc_prof_begin(GPTC_PROF_PHASE, "checkpoint", -1);
    const float *state[GPTC_OPTIM_MAX_STATES];
    float *whole = NULL;
    size_t n = t->model.num_floats;
    int ns = t->opt->nstates;
    for (int b = 0; b < ns; b++) state[b] = t->ostate[b];
    if (t->gshard) {
        if (t->rank == 0 && !(whole = gptc_alloc(ns * n * sizeof(float), "checkpoint optimizer state"))) st = GPTC_ERR_NOMEM;
        if ((st = gptc_dist_agree(st))) goto done;
        for (int b = 0; b < ns; b++) {
            if ((st = gptc_dist_gather_shards(t->ostate[b], whole ? whole + b * n : NULL, t->bounds, 0))) goto done;
            state[b] = whole ? whole + b * n : NULL;
        }
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
        st = gptc_ckpt_save(t->o->ckpt_dir, &t->model, t->opt, state, &t->state, t->o->keep, written, cap);
    }
done:
    gptc_free(whole);
    gptc_prof_end(0, 0);
    return gptc_dist_agree(st);
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

#define SAMPLE_CAP 8192

typedef struct { char *buf; size_t len; } sample_buf;

static void append_text(void *user, const char *text, size_t len) {
    sample_buf *b = user;
    if (b->len + len >= SAMPLE_CAP) len = SAMPLE_CAP - 1 - b->len;
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
    sample_buf b = {t->sample, 0};
    t->sample[0] = '\0';
    if (gptc_generate(&t->model, t->tok, "", &so, append_text, &b) != GPTC_OK) return NULL;
    return t->sample;
}

static void reducer_hook(void *user, size_t lo) { gptc_reducer_ready(user, lo); }

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

/* Every rank's weights must be the same bits after the last step (the same averaged gradients and
 * the same update everywhere); a difference means the ranks diverged, and the checkpoint, written
 * from rank 0 alone, would not be what the others trained. */
static gptc_status check_ranks_agree(trainer *t) {
    if (t->world == 1) return GPTC_OK;
    uint32_t mine = gptc_crc32c(0, t->model.params, sizeof(float) * t->model.num_floats);
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

static void trainer_free(trainer *t) {
    gptc_reducer_free(&t->red);
    free(t->bounds);
    free(t->starts);
    gptc_free(t->gshard);
    gptc_tokenizer_free(t->tok);
    free(t->sample);
    gptc_guard_free(&t->guard);
    free(t->guard_buf);
    gptc_model_free(&t->model);
    gptc_op_plugins_free(t->plugins);
    for (int b = 0; b < GPTC_OPTIM_MAX_STATES; b++) gptc_free(t->ostate[b]);
    gptc_loader_close(&t->train);
    gptc_loader_close(&t->val);
    gptc_free(t->inputs);
    gptc_free(t->targets);
}

/* Loads a checkpoint folder into the model, this rank's moments and the run's position (step, RNG,
 * loader, the guard's state, the learning-rate factor); the run keeps its own settings. *saved gets
 * the checkpoint's recorded state. */
static gptc_status load_position(trainer *t, const char *dir, gptc_trainer_state *saved) {
    *saved = (gptc_trainer_state){.guard = t->guard_buf, .guard_len = gptc_guard_packed_len(&t->guard)};
    gptc_status st = gptc_ckpt_load_range(dir, &t->model, t->opt, t->ostate, t->lo, t->hi, saved);
    if (st) return st;
    t->state.step = saved->step;
    t->state.rng = saved->rng;
    t->state.loader_epoch = saved->loader_epoch;
    t->state.loader_cursor = saved->loader_cursor;
    t->state.lr_scale = saved->lr_scale;
    t->state.rollbacks = saved->rollbacks;
    t->state.bad_run = saved->bad_run;
    t->ctl.lr = saved->ov_lr;
    t->ctl.dropout = saved->ov_dropout;
    t->ctl.attn_dropout = saved->ov_attn_dropout;
    t->ctl.weight_decay = saved->ov_weight_decay;
    gptc_guard fresh;
    if (saved->guard_len && gptc_guard_unpack(&t->guard, t->guard_buf, saved->guard_len) != GPTC_OK) {
        /* another --spike-window, or no spike detection before: the window starts empty */
        if (t->rank == 0 && t->o->skip_spikes) gptc_warn("%s: %s; the spike window starts empty", dir, gptc_last_error());
        if (gptc_guard_init(&fresh, t->guard.spikes, t->guard.window, t->guard.z) == GPTC_OK) {
            gptc_guard_free(&t->guard);
            t->guard = fresh;
        }
    } else if (!saved->guard_len) {
        t->guard.count = t->guard.head = 0;
    }
    gptc_loader_pos pos = {t->state.loader_epoch, t->state.loader_cursor};
    if ((st = gptc_loader_seek(&t->train, pos))) return gptc_fail_prefix(st, "'ckpt_dir' %s", dir);
    return GPTC_OK;
}

/* After too many bad steps in a row: back to the newest valid checkpoint (every rank reads it), the
 * learning rate lowered for the rest of the run. *where gets the folder. */
static gptc_status roll_back(trainer *t, const char *why, char *where, size_t cap) {
    const gptc_train_options *o = t->o;
    gptc_status st = GPTC_OK;
    bool found = false;
    int at = t->state.step;
    if (t->state.rollbacks >= o->max_rollbacks)
        st = gptc_fail(GPTC_ERR_NUMERIC, "step %d: %d bad steps in a row (last: %s) after %d rollback%s ('max_rollbacks' %d); "
                       "lower 'lr', check the data, or raise 'bad_steps'", at, t->state.bad_run, why, t->state.rollbacks,
                       t->state.rollbacks == 1 ? "" : "s", o->max_rollbacks);
    else if (o->ckpt_dir && (st = gptc_ckpt_find(o->ckpt_dir, where, cap, &found)) == GPTC_OK && !found)
        st = gptc_fail(GPTC_ERR_NUMERIC, "step %d: %d bad steps in a row (last: %s) and no checkpoint in 'ckpt_dir' %s to roll "
                       "back to yet; lower 'lr' or check the data", at, t->state.bad_run, why, o->ckpt_dir);
    else if (!o->ckpt_dir)
        st = gptc_fail(GPTC_ERR_NUMERIC, "step %d: %d bad steps in a row (last: %s) and no 'ckpt_dir' folder to roll back to; "
                       "lower 'lr', check the data, or give 'ckpt_dir'", at, t->state.bad_run, why);
    if ((st = gptc_dist_agree(st))) return st;
    int rollbacks = t->state.rollbacks;
    float scale = t->state.lr_scale;
    gptc_trainer_state saved;
    st = load_position(t, where, &saved);
    if (st) st = gptc_fail_prefix(st, "rolling back");
    if ((st = gptc_dist_agree(st))) return st;
    t->state.rollbacks = rollbacks + 1;
    t->state.lr_scale = scale * o->rollback_lr;
    t->state.bad_run = 0;
    return GPTC_OK;
}

/* Everything before the first step: the checks, the data, the model (fresh or resumed), the
 * optimizer state and, on many ranks, the gradient reducer. On failure the caller frees t. */
static gptc_status setup(trainer *t, gptc_train_options *op) {
    read_fault("GPTC_FAULT_NONFINITE", t->rank, &t->nonfinite);
    read_fault("GPTC_FAULT_SPIKE", t->rank, &t->spike);
    gptc_train_options o = *op; /* a copy for reading; what setup resolves goes back through op */
    gptc_status st;
    gptc_data_meta meta = {0};
    bool has_meta = false;
    if (o.data && (st = gptc_data_meta_read(o.data, &meta, &has_meta))) return gptc_fail_prefix(st, "'data'");
    if (o.model.vocab == 0) o.model.vocab = op->model.vocab = has_meta ? meta.vocab : 50257;
    if ((st = gptc_model_config_check(&o.model)) || (st = check_options(&o, t->world))) return st;
    t->opt = gptc_optimizer_find(o.optimizer);
    /* --init: weights in any format gptc reads; their config is the model's (the CLI sets it from them) */
    gptc_weights_info init;
    if (o.init) {
        if ((st = gptc_weights_find(o.init, &init))) return gptc_fail_prefix(st, "'init'");
        if (memcmp(&init.cfg, &o.model, sizeof init.cfg) != 0)
            return gptc_fail(GPTC_ERR_STATE,
                             "'init' %s: holds a model with layers=%d heads=%d channels=%d context=%d vocab=%d gelu=%s, "
                             "but this run asks for layers=%d heads=%d channels=%d context=%d vocab=%d gelu=%s; drop "
                             "the shape options (the weights set them)",
                             o.init, init.cfg.layers, init.cfg.heads, init.cfg.channels, init.cfg.context, init.cfg.vocab,
                             gptc_gelu_name(init.cfg.gelu), o.model.layers, o.model.heads, o.model.channels,
                             o.model.context, o.model.vocab, gptc_gelu_name(o.model.gelu));
        if (has_meta && init.tokenizer[0] && meta.tokenizer[0] && strcmp(init.tokenizer, meta.tokenizer) != 0)
            return gptc_fail(GPTC_ERR_STATE, "'init' %s: weights for %s tokens but 'data' %s holds %s tokens; prepare "
                             "the data with the %s tokenizer", o.init, init.tokenizer, o.data, meta.tokenizer, init.tokenizer);
    }
    if ((st = check_data_tokenizer("'data'", o.data, &o.model)) ||
        (o.val_data && (st = check_data_tokenizer("'val_data'", o.val_data, &o.model))))
        return st;
    t->accum = o.total_batch ? (int)(o.total_batch / ((long)o.batch * o.seq * t->world)) : 1;
    snprintf(t->state.tokenizer, sizeof t->state.tokenizer, "%s", has_meta ? meta.tokenizer : "");
    state_from_options(&t->state, &o, (long)t->accum * o.batch * o.seq * t->world);
    t->state.lr_scale = 1;
    t->ctl = (gptc_train_control){.lr = NAN, .dropout = NAN, .attn_dropout = NAN, .weight_decay = NAN};
    if ((st = gptc_hparam_parse(&t->lr_sched, o.lr_schedule, "'lr_schedule'", 0, 10)) ||
        (st = gptc_hparam_parse(&t->drop_sched, o.dropout_schedule, "'dropout_schedule'", 0, 0.999)) ||
        (st = gptc_hparam_parse(&t->attn_drop_sched, o.attn_dropout_schedule, "'attn_dropout_schedule'", 0, 0.999)) ||
        (st = gptc_hparam_parse(&t->wd_sched, o.weight_decay_schedule, "'weight_decay_schedule'", 0, 10)))
        return st;
    if ((st = gptc_guard_init(&t->guard, o.skip_spikes, o.spike_window, o.spike_z))) return st;
    if (!(t->guard_buf = malloc(sizeof(float) * gptc_guard_packed_len(&t->guard))))
        return gptc_fail(GPTC_ERR_NOMEM, "out of memory");
    gptc_rng rng;
    gptc_rng_seed(&rng, o.seed);
    t->state.rng = rng.state;

    char resume[4096];
    bool resuming = false;
    if (o.ckpt_dir && (st = gptc_ckpt_find(o.ckpt_dir, resume, sizeof resume, &resuming))) return gptc_fail_prefix(st, "'ckpt_dir'");
    if (resuming) {
        gptc_model_config saved;
        char saved_tok[32];
        if ((st = gptc_ckpt_read_config(resume, &saved, saved_tok, sizeof saved_tok))) return gptc_fail_prefix(st, "'ckpt_dir'");
        if (has_meta && saved_tok[0] && strcmp(saved_tok, meta.tokenizer) != 0)
            return gptc_fail(GPTC_ERR_STATE, "'ckpt_dir' %s: was trained on %s tokens but 'data' %s holds %s tokens; "
                             "prepare the data with the %s tokenizer or use another 'ckpt_dir' folder",
                             resume, saved_tok, o.data, meta.tokenizer, saved_tok);
        gptc_model_config shape = saved;
        shape.gelu = o.model.gelu; /* the shape first, then the form */
        if (memcmp(&shape, &o.model, sizeof shape) != 0)
            return gptc_fail(GPTC_ERR_STATE,
                             "'ckpt_dir' %s: holds a model with layers=%d heads=%d channels=%d context=%d vocab=%d, but "
                             "this run asks for layers=%d heads=%d channels=%d context=%d vocab=%d; use matching flags "
                             "or another 'ckpt_dir' folder",
                             resume, saved.layers, saved.heads, saved.channels, saved.context, saved.vocab,
                             o.model.layers, o.model.heads, o.model.channels, o.model.context, o.model.vocab);
        if (saved.gelu != o.model.gelu)
            return gptc_fail(GPTC_ERR_STATE,
                             "'ckpt_dir' %s: holds a model trained with 'model.gelu' %s, but this run asks for 'model.gelu' %s; use "
                             "'model.gelu' %s or another 'ckpt_dir' folder",
                             resume, gptc_gelu_name(saved.gelu), gptc_gelu_name(o.model.gelu), gptc_gelu_name(saved.gelu));
    }
    /* the run's whole footprint per rank, planned from the settings, against what this machine allows */
    gptc_mem_request req;
    gptc_mem_request_default(&req);
    req.model = o.model;
    req.batch = o.batch;
    req.seq = o.seq;
    req.dtype = o.dtype;
    req.recompute = o.recompute;
    req.naive_attention = o.naive_attention;
    req.no_fusion = o.no_fusion;
    req.threads = o.threads;
    req.ranks = t->world;
    req.zero = o.zero;
    gptc_mem_plan plan;
    if ((st = gptc_mem_plan_make(&req, &plan))) return st;
    size_t have = gptc_machine_memory();
    if (have && plan.total > have)
        return gptc_fail(GPTC_ERR_ARG,
                         "'batch' %d 'seq' %d 'dtype' %s 'recompute' %s: this run needs %.1f GiB but the machine has "
                         "%.1f GiB; use a smaller model, 'batch' or 'seq', or more 'recompute' (see gptc plan)",
                         o.batch, o.seq, gptc_precision_name(o.dtype), gptc_recompute_name(o.recompute),
                         plan.total / 1073741824.0, have / 1073741824.0);
    gptc_set_threads(o.threads);

    /* data: each rank its slice of the train batches; evaluation (rank 0) reads the val set whole */
    if ((st = open_loader(&t->train, o.data, false, "'data'", &o, o.model.vocab, o.shuffle, t->rank, t->world))) return st;
    /* every id is checked before the first step (each rank its slice): a shard of another tokenizer
     * is refused now, not at the batch that first reads it, hours in */
    if ((st = gptc_loader_check_vocab(&t->train, t->rank, t->world))) return gptc_fail_prefix(st, "'data'");
    if (o.val_data) {
        if ((st = open_loader(&t->val, o.val_data, true, "'val_data'", &o, o.model.vocab, false, 0, 1))) return st;
        if ((st = gptc_loader_check_vocab(&t->val, t->rank, t->world))) return gptc_fail_prefix(st, "'val_data'");
        t->has_val = true;
    } else if (gptc_is_dir(o.data)) {
        /* the folder's val split, if it has a usable one; without it the run trains unevaluated */
        if (open_loader(&t->val, o.data, true, "'data' (val split)", &o, o.model.vocab, false, 0, 1) == GPTC_OK) {
            if ((st = gptc_loader_check_vocab(&t->val, t->rank, t->world))) return gptc_fail_prefix(st, "'data' (val split)");
            t->has_val = true;
        } else if (t->rank == 0) {
            gptc_warn("%s; training without evaluation", gptc_last_error());
        }
    }

    /* model and optimizer: the moments of this rank's range of the arena */
    if ((st = gptc_model_init(&t->model, &o.model))) return st;
    gptc_model *m = &t->model;
    m->naive_attention = o.naive_attention;
    m->fuse = !o.no_fusion;
    m->precision = o.dtype;
    m->recompute = o.recompute;
    if ((st = gptc_model_alloc_train(m, o.batch, o.seq))) return st;
    if (o.op_plugins && *o.op_plugins) { /* custom operators, validated at this run's shapes (kernels/plugin.h) */
        gptc_op_run run = {.B = o.batch, .T = o.seq, .C = o.model.channels, .NH = o.model.heads, .gelu = o.model.gelu,
                           .fuse = m->fuse, .naive_attention = m->naive_attention, .decode = o.sample_every > 0,
                           .quiet = t->rank != 0};
        if ((st = gptc_op_plugins_load(o.op_plugins, m->k, &run, &t->plugins))) return st;
        m->k = gptc_op_plugins_table(t->plugins);
        gptc_model_bind_kernels(m);
    }
    size_t n = m->num_floats, share = n;
    t->lo = 0;
    t->hi = n;
    if (o.zero) {
        if (!(t->bounds = malloc(sizeof(size_t) * (t->world + 1)))) return gptc_fail(GPTC_ERR_NOMEM, "out of memory");
        share = gptc_dist_shards(n, t->world, t->bounds);
        t->lo = t->bounds[t->rank];
        t->hi = t->bounds[t->rank + 1];
        if (t->world > 1 && !(t->gshard = gptc_alloc(share * sizeof(float), "ZeRO-1 gradient shard"))) return GPTC_ERR_NOMEM;
    }
    size_t live0, live1;
    gptc_alloc_stats(&live0, NULL);
    bool allocated = true;
    for (int b = 0; b < t->opt->nstates && allocated; b++)
        allocated = (t->ostate[b] = gptc_alloc(share * sizeof(float), "optimizer state")) != NULL;
    gptc_alloc_stats(&live1, NULL);
    t->optim_bytes = live1 - live0; /* measured, to set beside the plan's figure */
    t->inputs = allocated ? gptc_alloc(sizeof(int) * o.batch * o.seq, "batch") : NULL;
    t->targets = t->inputs ? gptc_alloc(sizeof(int) * o.batch * o.seq, "batch") : NULL;
    if (!t->targets) return GPTC_ERR_NOMEM;
    t->use_red = t->world > 1;
    if (t->use_red) {
        if (!(t->starts = malloc(sizeof(size_t) * m->ntensors))) return gptc_fail(GPTC_ERR_NOMEM, "out of memory");
        for (int i = 0; i < m->ntensors; i++) t->starts[i] = m->tensors[i].offset;
        if ((st = gptc_reducer_init(&t->red, m->grads, n, t->starts, m->ntensors, o.bucket_mb * 1e6, t->gshard,
                                    t->bounds)))
            return st;
    }
    if (resuming && o.init && t->rank == 0) gptc_log("'init' %s: not used, the run resumes from %s", o.init, resume);
    if (resuming) {
        gptc_trainer_state saved;
        if ((st = load_position(t, resume, &saved))) return st;
        if (t->rank == 0) gptc_hp_warn_changes(resume, &saved.hp, &t->state.hp);
        if (!t->state.tokenizer[0]) snprintf(t->state.tokenizer, sizeof t->state.tokenizer, "%s", saved.tokenizer);
    } else if (o.init) {
        if ((st = gptc_weights_load(&init, m))) return gptc_fail_prefix(st, "'init'");
        if (!t->state.tokenizer[0]) snprintf(t->state.tokenizer, sizeof t->state.tokenizer, "%s", init.tokenizer);
    } else {
        gptc_model_init_weights(m, o.seed);
    }
    t->sched = (gptc_lr_schedule){.lr = o.lr, .warmup = o.warmup, .steps = o.steps, .floor = o.lr_floor};
    if (o.sample_every) {
        if (!t->state.tokenizer[0]) {
            if (t->rank == 0) gptc_warn("'sample_every': the data does not name its tokenizer (no meta.json); no samples");
        } else if ((st = gptc_tokenizer_open(t->state.tokenizer, &t->tok)) || !(t->sample = malloc(SAMPLE_CAP))) {
            return st ? gptc_fail_prefix(st, "'sample_every'") : gptc_fail(GPTC_ERR_NOMEM, "out of memory");
        }
    }
    return GPTC_OK;
}

/* The hyper-parameters of the step about to run: a callback's override, else the schedule, else the
 * constant (the learning rate: its warm-up + cosine), the learning rate times a rollback's factor.
 * `done` is the steps completed; the schedules take the step's number as the log shows it, done + 1
 * (optim/hparam.h), and the warm-up + cosine its 0-based index (optim/optim.h). */
typedef struct { float lr, dropout, attn_dropout, weight_decay; } step_values;
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
        if (micro == t->accum - 1) {
            if (fault_fires(&t->nonfinite, t->state.step + 1))
                m->grads[0] = NAN; /* wte's first value: the backward adds onto it, so it stays NaN */
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
    double sums[2] = {loss_sum / t->accum, o->zero ? gptc_grad_sumsq(*g, t->hi - t->lo) : 0};
    if (t->world > 1) gptc_prof_begin(GPTC_PROF_COMM, "comm.sum_loss", -1);
    st = gptc_dist_sum_ordered(sums, 2);
    if (t->world > 1) gptc_prof_end(0, 16.0 * t->world);
    if ((st = gptc_dist_agree(st))) return st;
    *loss = (float)(sums[0] / t->world);
    *norm = sqrt(o->zero ? sums[1] : gptc_grad_sumsq(m->grads, m->num_floats));
    return GPTC_OK;
}

gptc_status gptc_train(const gptc_train_options *opts, gptc_step_fn on_step, void *user, gptc_train_result *res) {
    trainer t = {0};
    gptc_train_options o = *opts;
    gptc_status st;
    gptc_train_result r = {.first_val_loss = NAN, .last_val_loss = NAN};
    double *step_ms = NULL;
    t.o = &o;
    t.rank = gptc_dist_rank();
    t.world = gptc_dist_world();
    r.world = t.world;
    /* a failure on any rank stops every rank here, before the first exchange of gradients */
    if ((st = gptc_dist_agree(setup(&t, &o)))) goto fail;
    r.first_step = t.state.step;
    r.optim_bytes = t.optim_bytes;
    r.model = o.model;
    r.num_params = gptc_model_num_params(&o.model);
    /* grown as steps run: --steps is a bound, not a size to allocate up front */
    int cap_ms = o.steps - r.first_step < 1 ? 1 : o.steps - r.first_step < 1024 ? o.steps - r.first_step : 1024;
    step_ms = malloc(sizeof(double) * cap_ms);
    if ((st = gptc_dist_agree(step_ms ? GPTC_OK : gptc_fail(GPTC_ERR_NOMEM, "out of memory")))) goto fail;

    /* the loop */
    long tokens_per_step = (long)t.state.hp.i[GPTC_HP_total_batch];
    gptc_step_info base = {.event = GPTC_EVENT_START, .model = &o.model, .first_step = r.first_step,
                           .tokens_per_update = tokens_per_step, .step = r.first_step, .steps = o.steps, .val_loss = NAN};
    int stop = t.rank == 0 && on_step && on_step(user, &base);
    gptc_dist_bcast(&stop, sizeof stop, 0);
    if (o.profile) gptc_prof_set_rank(t.rank);
    bool profiled = false; /* recording began (at the window's first step) */
    while (t.state.step < o.steps && !stop) {
        if (o.profile && !profiled && t.state.step + 1 >= o.profile_from) {
            gptc_prof_start();
            profiled = true;
        }
        double t0 = gptc_now();
        gptc_prof_begin(GPTC_PROF_STEP, "step", -1);
        float loss;
        double norm;
        const float *g;
        step_values hv = values_at(&t, t.state.step);
        t.model.dropout = hv.dropout;
        t.model.attn_dropout = hv.attn_dropout;
        if ((st = step_gradients(&t, &loss, &norm, &g))) goto fail;
        float lr = hv.lr;
        /* the step guard: every rank has the same loss and norm (summed in rank order) and so the same
         * window, and the verdict is agreed anyway, so every rank skips, rolls back or stops alike */
        gptc_bad_kind kind = gptc_guard_judge(&t.guard, loss, norm);
        double bad = kind != GPTC_BAD_NONE;
        if ((st = gptc_dist_agree(gptc_dist_sum_ordered(&bad, 1)))) goto fail;
        bool skip = bad > 0;
        if (skip && kind == GPTC_BAD_NONE) kind = GPTC_BAD_NONFINITE; /* another rank's verdict (cannot differ today) */
        t.state.bad_run = skip ? t.state.bad_run + 1 : 0;
        bool act = skip && t.state.bad_run > o.bad_steps;
        if (act && o.on_bad == GPTC_ON_BAD_STOP)
            st = gptc_fail(GPTC_ERR_NUMERIC, "step %d: loss %g, gradient norm %g: %s%s; lower 'lr' or check the data",
                           t.state.step + 1, loss, norm, kind == GPTC_BAD_NONFINITE ? "not finite" : gptc_bad_kind_name(kind),
                           o.bad_steps ? " (more bad steps in a row than 'bad_steps')" : "");
        /* agreeing names rank 0 as its source */
        if ((st = gptc_dist_agree(st))) goto fail;
        float scale = gptc_clip_scale(norm, o.clip);
        if (skip) {
            r.skipped_steps++; /* the update is dropped; the data and the schedule move on */
        } else if (o.zero) {
            t.opt->update(&t.model, &o, g, t.ostate, t.lo, t.hi, lr, hv.weight_decay, scale, t.state.step + 1);
            gptc_prof_begin(GPTC_PROF_COMM, "comm.allgather_params", -1);
            st = gptc_dist_allgather_shards(t.model.params, t.bounds);
            gptc_prof_end(0, sizeof(float) * (double)t.model.num_floats);
            if ((st = gptc_dist_agree(st))) goto fail;
        } else {
            t.opt->update(&t.model, &o, t.model.grads, t.ostate, 0, t.model.num_floats, lr, hv.weight_decay, scale,
                          t.state.step + 1);
        }
        t.state.step++;
        gptc_prof_end(0, 0); /* optimizer */
        gptc_prof_end(0, 0); /* step */
        if (o.profile_to && t.state.step >= o.profile_to) gptc_prof_stop(); /* the window ends: keep what it holds */
        double ms = (gptc_now() - t0) * 1e3;
        if (r.steps_run == cap_ms) {
            double *grown = realloc(step_ms, sizeof(double) * 2 * (size_t)cap_ms);
            if (grown) step_ms = grown, cap_ms *= 2;
        }
        if (r.steps_run < cap_ms) step_ms[r.steps_run] = ms; /* else (out of memory) the median omits it */
        if (r.steps_run == 0) r.first_loss = loss;
        r.last_loss = loss;
        r.steps_run++;

        gptc_step_info info = base;
        info.event = GPTC_EVENT_STEP;
        info.step = t.state.step;
        info.loss = loss;
        info.lr = lr;
        info.grad_norm = (float)norm;
        info.skipped = skip;
        info.bad = gptc_bad_kind_name(kind);
        info.z_loss = t.guard.z_loss;
        info.z_norm = t.guard.z_norm;
        info.bad_run = t.state.bad_run;
        info.lr_scale = t.state.lr_scale;
        info.rollbacks = t.state.rollbacks;
        info.dropout = hv.dropout;
        info.attn_dropout = hv.attn_dropout;
        info.weight_decay = hv.weight_decay;
        info.ms = ms;
        info.tokens_per_s = tokens_per_step / (ms * 1e-3);
        bool last = t.state.step == o.steps;
        if (t.rank == 0) {
            if (t.has_val && ((o.eval_every && t.state.step % o.eval_every == 0) || last || r.steps_run == 1)) {
                info.val_loss = evaluate(&t);
                if (isnan(r.first_val_loss)) r.first_val_loss = info.val_loss;
                r.last_val_loss = info.val_loss;
            }
            if (t.tok && t.state.step % o.sample_every == 0) info.sample = sample_now(&t);
            if (on_step && on_step(user, &info)) stop = 1;
            const gptc_callbacks *cb = o.callbacks;
            if (cb && cb->on_step_end) cb->on_step_end(cb->user, &info, &t.ctl);
            if (cb && cb->on_eval && !isnan(info.val_loss)) cb->on_eval(cb->user, info.step, info.val_loss, &t.ctl);
            if (t.ctl.stop) stop = 1;
        }
        /* rank 0's callbacks may stop the run or change the values of the next steps: all ranks follow */
        gptc_dist_bcast(&stop, sizeof stop, 0);
        if (o.callbacks) gptc_dist_bcast(&t.ctl, sizeof t.ctl, 0);
        char written[4096];
        if (act && !stop) { /* too many bad steps in a row: back to the newest checkpoint */
            if ((st = roll_back(&t, gptc_bad_kind_name(kind), written, sizeof written))) goto fail;
            r.rollbacks++;
            if (on_step && t.rank == 0) {
                gptc_step_info back = base;
                back.event = GPTC_EVENT_ROLLBACK;
                back.step = t.state.step;
                back.ckpt_path = written;
                back.lr_scale = t.state.lr_scale;
                back.rollbacks = t.state.rollbacks;
                back.bad = info.bad;
                if (on_step(user, &back)) stop = 1;
            }
            gptc_dist_bcast(&stop, sizeof stop, 0);
            continue;
        }
        /* a periodic checkpoint is a known-good state to roll back to: none is written on a bad step */
        if (o.ckpt_dir && ((o.ckpt_every && t.state.step % o.ckpt_every == 0 && !skip) || last || stop)) {
            if ((st = save(&t, written, sizeof written))) {
                st = gptc_fail_prefix(st, "'ckpt_dir': saving step %d failed, the previous checkpoints are kept", t.state.step);
                goto fail;
            }
            if (on_step && t.rank == 0) {
                gptc_step_info saved = info;
                saved.event = GPTC_EVENT_CHECKPOINT;
                saved.val_loss = NAN;
                saved.sample = NULL;
                saved.ckpt_path = written;
                on_step(user, &saved);
            }
            const gptc_callbacks *cb = o.callbacks;
            if (t.rank == 0 && cb && cb->on_checkpoint) cb->on_checkpoint(cb->user, t.state.step, written, &t.ctl);
            if (o.callbacks) gptc_dist_bcast(&t.ctl, sizeof t.ctl, 0);
            if (t.ctl.stop) stop = 1;
        }
    }
    r.lr_scale = t.state.lr_scale;
    if ((st = check_ranks_agree(&t))) goto fail;
    int nms = r.steps_run < cap_ms ? r.steps_run : cap_ms; /* the step times recorded */
    if (t.red.rounds) {
        double sum = 0;
        for (int i = 0; i < nms; i++) sum += step_ms[i];
        r.comm_calls_per_step = (double)t.red.calls / t.red.rounds;
        r.comm_wait_ms_per_step = t.red.wait_s * 1e3 / t.red.rounds;
        r.comm_wait_share = sum > 0 ? t.red.wait_s * 1e3 / sum : 0;
    }
    if (nms) {
        qsort(step_ms, nms, sizeof *step_ms, cmp_double);
        double med = nms % 2 ? step_ms[nms / 2] : 0.5 * (step_ms[nms / 2 - 1] + step_ms[nms / 2]);
        r.ms_per_step = med;
        r.tokens_per_s = tokens_per_step / (med * 1e-3);
    }
    st = o.profile ? (gptc_prof_stop(), gptc_prof_write_trace(o.profile)) : GPTC_OK;
fail:
    if (o.profile) gptc_prof_stop();
    free(step_ms);
    trainer_free(&t);
    if (res) *res = r;
    return st;
}
