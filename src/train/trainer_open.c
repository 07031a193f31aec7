/* trainer_open.c — everything before a run's first step: the options checked (the ranges of
 * train/hparams.def, then what no single range says), the data's tokenizer against the model, the
 * memory plan against the machine, then the loaders, the model, the optimizer state (this rank's
 * shard with ZeRO-1) and the gradient reducer, and the weights (resumed, --init or random). */
#include "train/trainer_internal.h"
#include "io/io.h"
#include "model/plan.h"
#include "train/profile_report.h"
#include "backend/cuda.h"

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

/* The ranges of train/hparams.def, then what no single range says. Options are named by their field,
 * in single quotes (train/hparams.h). */
static gptc_status check_options(const gptc_train_options *o, int world) {
    int device;
    gptc_status dst = gptc_device_parse(o->device, &device); /* refused before the data is opened */
    if (dst) return dst;
    gptc_status st;
    if ((st = gptc_hp_check(o))) return st;
    const gptc_optimizer_kind *opt = gptc_optimizer_find(o->optimizer);
    if (!opt)
        return gptc_fail(GPTC_ERR_ARG, "'optimizer' %s: unknown (expected one of %s)", o->optimizer ? o->optimizer : "(null)",
                         gptc_optimizer_names());
    if ((st = opt->check(o))) return st;
    if (o->pack_weights && strcmp(o->pack_weights, "auto") != 0 && strcmp(o->pack_weights, "on") != 0 &&
        strcmp(o->pack_weights, "off") != 0)
        return gptc_fail(GPTC_ERR_ARG, "'pack_weights' %s: unknown (expected auto, on or off)", o->pack_weights);
    gptc_ostate_type ot;
    if (o->optim_state && !gptc_ostate_parse(o->optim_state, &ot))
        return gptc_fail(GPTC_ERR_ARG, "'optim_state' %s: unknown (expected one of " GPTC_OSTATE_NAMES ")", o->optim_state);
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
    if (o->fused_update && o->total_batch && o->total_batch != bt)
        return gptc_fail(GPTC_ERR_ARG, "'fused_update' needs one micro-step per update, but 'total_batch' %ld is %ld "
                         "micro-steps of 'batch' x 'seq' = %ld tokens; use 'total_batch' 0 (or %ld), or a larger 'batch' "
                         "or 'seq'", o->total_batch, o->total_batch / bt, bt, bt);
    bool part = (o->freeze && *o->freeze) || o->lora > 0; /* a trainable set other than the whole model */
    if (o->lora > 0 && o->freeze && *o->freeze)
        return gptc_fail(GPTC_ERR_ARG, "'freeze' %s: not with 'lora', which freezes the whole base model already; drop "
                         "one of them", o->freeze);
    if (part && o->fused_update)
        return gptc_fail(GPTC_ERR_ARG, "'fused_update': not with '%s' (its gradients and optimizer state are small "
                         "already); drop 'fused_update'", o->lora > 0 ? "lora" : "freeze");
    if (o->freeze && *o->freeze && o->zero)
        return gptc_fail(GPTC_ERR_ARG, "'zero' 1: not with 'freeze' yet (the trainable tensors are not one arena); "
                         "drop 'zero'");
    unsigned targets;
    if (o->lora > 0 && (st = gptc_lora_targets_parse(o->lora_targets, &targets))) return st;
    if (o->lora > 0 && o->lora > o->model.channels)
        return gptc_fail(GPTC_ERR_ARG, "'lora' %d: the rank must be at most the model's width %d", o->lora,
                         o->model.channels);
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

/* The checks that need the data's manifest and 'init''s header: the options, the model, the tokenizers. */
static gptc_status open_checks(trainer *t, gptc_train_options *op, gptc_data_meta *meta, bool *has_meta,
                               gptc_weights_info *init) {
    gptc_train_options *o = op;
    gptc_status st;
    if (o->data && (st = gptc_data_meta_read(o->data, meta, has_meta))) return gptc_fail_prefix(st, "'data'");
    if (o->model.vocab == 0) o->model.vocab = *has_meta ? meta->vocab : 50257;
    if ((st = gptc_model_config_check(&o->model)) || (st = check_options(o, t->world))) return st;
    t->opt = gptc_optimizer_find(o->optimizer);
    /* 'init': weights in any format gptc reads; their config is the model's (the CLI sets it from them) */
    if (o->init) {
        if ((st = gptc_weights_find(o->init, init))) return gptc_fail_prefix(st, "'init'");
        if (memcmp(&init->cfg, &o->model, sizeof init->cfg) != 0)
            return gptc_fail(GPTC_ERR_STATE,
                             "'init' %s: holds a model with layers=%d heads=%d channels=%d context=%d vocab=%d gelu=%s, "
                             "but this run asks for layers=%d heads=%d channels=%d context=%d vocab=%d gelu=%s; drop "
                             "the shape options (the weights set them)",
                             o->init, init->cfg.layers, init->cfg.heads, init->cfg.channels, init->cfg.context,
                             init->cfg.vocab, gptc_gelu_name(init->cfg.gelu), o->model.layers, o->model.heads,
                             o->model.channels, o->model.context, o->model.vocab, gptc_gelu_name(o->model.gelu));
        unsigned targets = 0; /* --init of adapters: go on training them only at their rank and targets */
        if (init->adapters.found && o->lora > 0 && !gptc_lora_targets_parse(o->lora_targets, &targets) &&
            (st = gptc_adapters_match(&init->adapters, o->lora, targets)))
            return gptc_fail_prefix(st, "'init'");
        if (*has_meta && init->tokenizer[0] && meta->tokenizer[0] && strcmp(init->tokenizer, meta->tokenizer) != 0)
            return gptc_fail(GPTC_ERR_STATE, "'init' %s: weights for %s tokens but 'data' %s holds %s tokens; prepare "
                             "the data with the %s tokenizer", o->init, init->tokenizer, o->data, meta->tokenizer,
                             init->tokenizer);
    }
    if ((st = check_data_tokenizer("'data'", o->data, &o->model)) ||
        (o->val_data && (st = check_data_tokenizer("'val_data'", o->val_data, &o->model))))
        return st;
    return GPTC_OK;
}

/* The run's own state: accumulation, what checkpoints record, the schedules, the guard, the RNG. */
static gptc_status open_state(trainer *t, const gptc_train_options *o, const gptc_data_meta *meta, bool has_meta) {
    gptc_status st;
    t->accum = o->total_batch ? (int)(o->total_batch / ((long)o->batch * o->seq * t->world)) : 1;
    snprintf(t->state.tokenizer, sizeof t->state.tokenizer, "%s", has_meta ? meta->tokenizer : "");
    state_from_options(&t->state, o, (long)t->accum * o->batch * o->seq * t->world);
    t->state.lr_scale = 1;
    t->ctl = (gptc_train_control){.lr = NAN, .dropout = NAN, .attn_dropout = NAN, .weight_decay = NAN};
    /* a schedule's values: from 0 to the largest its option takes */
    if ((st = gptc_hparam_parse(&t->lr_sched, o->lr_schedule, "'lr_schedule'", 0, gptc_hps[GPTC_HP_lr].max)) ||
        (st = gptc_hparam_parse(&t->drop_sched, o->dropout_schedule, "'dropout_schedule'", 0, gptc_hps[GPTC_HP_dropout].max)) ||
        (st = gptc_hparam_parse(&t->attn_drop_sched, o->attn_dropout_schedule, "'attn_dropout_schedule'", 0,
                                gptc_hps[GPTC_HP_attn_dropout].max)) ||
        (st = gptc_hparam_parse(&t->wd_sched, o->weight_decay_schedule, "'weight_decay_schedule'", 0,
                                gptc_hps[GPTC_HP_weight_decay].max)))
        return st;
    if ((st = gptc_guard_init(&t->guard, o->skip_spikes, o->spike_window, o->spike_z))) return st;
    if (!(t->guard_buf = malloc(sizeof(float) * gptc_guard_packed_len(&t->guard))))
        return gptc_fail(GPTC_ERR_NOMEM, "out of memory");
    gptc_rng rng;
    gptc_rng_seed(&rng, o->seed);
    t->state.rng = rng.state;
    return GPTC_OK;
}

/* Whether 'pack_weights' auto keeps the weights packed: where each packing serves at least this many
 * forwards (docs/performance.md, "Packed weights"). */
#define PACK_MIN_FORWARDS 4

/* The run's whole footprint per rank, planned from the settings, against what this machine allows (one line
 * naming what to change when it cannot fit), and 'pack_weights' resolved into t->pack_weights: auto keeps
 * them where each packing serves PACK_MIN_FORWARDS forwards (a frozen base is packed once; trained weights
 * after each update) and the run with them needs at most half of the machine (so a big model keeps its
 * memory: GPT-2 XL LoRA would take 17.7 GiB with them instead of 6.2). */
static gptc_status check_memory(trainer *t, const gptc_train_options *o) {
    gptc_mem_request req;
    gptc_mem_request_default(&req);
    req.model = o->model;
    req.batch = o->batch;
    req.seq = o->seq;
    req.dtype = o->dtype;
    req.recompute = o->recompute;
    req.naive_attention = o->naive_attention;
    req.no_fusion = o->no_fusion;
    req.threads = o->threads;
    req.ranks = t->world;
    req.zero = o->zero;
    req.optimizer = o->optimizer;
    req.fused_update = o->fused_update;
    req.optim_state = o->optim_state;
    req.freeze = o->freeze;
    req.lora = o->lora;
    req.lora_targets = o->lora_targets;
    const char *pw = o->pack_weights ? o->pack_weights : "auto";
    bool autopack = strcmp(pw, "auto") == 0;
    req.pack_weights = strcmp(pw, "on") == 0 || (autopack && (o->lora > 0 || t->accum >= PACK_MIN_FORWARDS));
    gptc_mem_plan plan;
    gptc_status st = gptc_mem_plan_make(&req, &plan);
    if (st) return st;
    size_t have = gptc_machine_memory();
    if (autopack && req.pack_weights && (!have || plan.total > have / 2)) {
        req.pack_weights = false;
        if ((st = gptc_mem_plan_make(&req, &plan))) return st;
    }
    t->pack_weights = req.pack_weights;
    if (have && plan.total > have)
        return gptc_fail(GPTC_ERR_ARG,
                         "'batch' %d 'seq' %d 'dtype' %s 'recompute' %s 'optim_state' %s%s: this run needs %.1f GiB but "
                         "the machine has %.1f GiB; use a smaller model, 'batch' or 'seq', more 'recompute', 'optim_state' "
                         "int8 or 'fused_update' (see gptc plan)",
                         o->batch, o->seq, gptc_precision_name(o->dtype), gptc_recompute_name(o->recompute),
                         o->optim_state ? o->optim_state : "fp32", o->fused_update ? " 'fused_update'" : "",
                         plan.total / 1073741824.0, have / 1073741824.0);
    return GPTC_OK;
}

/* Each rank its slice of the train batches; evaluation (rank 0) reads the val set whole. Every id is
 * checked before the first step (each rank its slice): a shard of another tokenizer is refused now,
 * not at the batch that first reads it, hours in. */
static gptc_status open_data(trainer *t, const gptc_train_options *o) {
    gptc_status st;
    int V = o->model.vocab;
    if ((st = open_loader(&t->train, o->data, false, "'data'", o, V, o->shuffle, t->rank, t->world))) return st;
    if ((st = gptc_loader_check_vocab(&t->train, t->rank, t->world))) return gptc_fail_prefix(st, "'data'");
    if (o->val_data) {
        if ((st = open_loader(&t->val, o->val_data, true, "'val_data'", o, V, false, 0, 1))) return st;
        if ((st = gptc_loader_check_vocab(&t->val, t->rank, t->world))) return gptc_fail_prefix(st, "'val_data'");
        t->has_val = true;
    } else if (gptc_is_dir(o->data)) {
        /* the folder's val split, if it has a usable one; without it the run trains unevaluated */
        if (open_loader(&t->val, o->data, true, "'data' (val split)", o, V, false, 0, 1) == GPTC_OK) {
            if ((st = gptc_loader_check_vocab(&t->val, t->rank, t->world))) return gptc_fail_prefix(st, "'data' (val split)");
            t->has_val = true;
        } else if (t->rank == 0) {
            gptc_warn("%s; training without evaluation", gptc_last_error());
        }
    }
    return GPTC_OK;
}

/* The model's buffers and kernels, with the custom operators validated at this run's shapes. */
static gptc_status open_model(trainer *t, const gptc_train_options *o) {
    gptc_status st;
    int device; /* --device: -1 the CPU, else the CUDA device (backend/cuda.h) */
    if ((st = gptc_device_parse(o->device, &device))) return st;
    if (device >= 0) { /* what the CUDA backend's first slice does not run yet */
        if (o->op_plugins && *o->op_plugins)
            return gptc_fail(GPTC_ERR_ARG, "'op_plugins': operator plugins are CPU code; not with 'device' %s", o->device);
        if (t->world > 1)
            return gptc_fail(GPTC_ERR_ARG, "'device' %s: data parallel (mpirun) on CUDA is not done yet", o->device);
        if (o->optimizer && strcmp(o->optimizer, "adamw") != 0)
            return gptc_fail(GPTC_ERR_ARG, "'optimizer' %s: only adamw runs on 'device' %s so far", o->optimizer, o->device);
    }
    if ((st = gptc_model_init_on(&t->model, &o->model, device))) return st;
    gptc_model *m = &t->model;
    m->naive_attention = o->naive_attention;
    m->fuse = !o->no_fusion;
    m->precision = o->dtype;
    m->recompute = o->recompute;
    m->fused_update = o->fused_update;
    int nfrozen = 0;
    if (o->freeze && *o->freeze && (st = gptc_model_freeze(m, o->freeze, &nfrozen))) return st;
    if (o->lora > 0) {
        unsigned targets;
        gptc_lora_targets_parse(o->lora_targets, &targets); /* checked by check_options */
        if ((st = gptc_model_lora_attach(m, o->lora, o->lora_alpha > 0 ? o->lora_alpha : (float)o->lora, targets,
                                         o->seed)))
            return st;
    }
    if ((st = gptc_model_alloc_train(m, o->batch, o->seq))) return st;
    if (t->pack_weights && (st = gptc_model_pack_weights(m))) return st;
    if (t->rank == 0 && m->packed)
        gptc_log("pack-weights: the weight matrices are kept packed for the products (%.1f MB)",
                 m->packed->bytes / 1e6);
    else if (t->rank == 0 && t->pack_weights && o->pack_weights && strcmp(o->pack_weights, "on") == 0)
        gptc_log("pack-weights: on, but these kernels (%s) pack inside every product; nothing kept", m->be.k->variant);
    if (t->rank == 0 && (m->lora || m->frozen)) { /* what trains */
        size_t trained = 0;
        for (int i = 0; i < m->ps.n; i++) trained += m->ps.t[i].numel;
        char what[128];
        if (m->lora) gptc_lora_targets_name(m->lora->targets, what, sizeof what);
        if (m->lora)
            gptc_log("lora: trains %.3fM parameters (rank %d, alpha %g, on %s); the base's %.1fM are frozen",
                     trained / 1e6, m->lora->rank, m->lora->alpha, what, gptc_model_num_params(&m->cfg) / 1e6);
        else
            gptc_log("freeze: trains %.3fM parameters; %d tensors (%.1fM parameters) frozen", trained / 1e6, nfrozen,
                     (gptc_model_num_params(&m->cfg) - trained) / 1e6);
    }
    if (o->op_plugins && *o->op_plugins) { /* kernels/plugin.h */
        gptc_op_run run = {.B = o->batch, .T = o->seq, .C = o->model.channels, .NH = o->model.heads, .gelu = o->model.gelu,
                           .fuse = m->fuse, .naive_attention = m->naive_attention, .decode = o->sample_every > 0,
                           .quiet = t->rank != 0, .bf16 = o->dtype == GPTC_PRECISION_BF16,
                           /* the residual dropout entry runs when a dropout, its schedule or a callback can set it */
                           .dropout = o->dropout > 0 || (o->dropout_schedule && *o->dropout_schedule) || o->callbacks};
        if ((st = gptc_op_plugins_load(o->op_plugins, m->k, &run, &t->plugins))) return st;
        m->k = gptc_op_plugins_table(t->plugins);
        gptc_model_bind_kernels(m);
    }
    return GPTC_OK;
}

/* The optimizer's state buffers for this rank's range of the arena (ZeRO-1: its shard; for an int8 state
 * the shard bounds are snapped so no block of 2048 is split between ranks), the batch buffers and, on
 * many ranks, the gradient reducer. */
static gptc_status open_optimizer(trainer *t, const gptc_train_options *o) {
    gptc_model *m = &t->model;
    size_t n = m->ps.floats, share = n; /* the trainable set's compact arena (model/gpt2.h gptc_pset) */
    gptc_ostate_type type = GPTC_OSTATE_FP32;
    if (o->optim_state) gptc_ostate_parse(o->optim_state, &type); /* checked by check_options */
    t->lo = 0;
    t->hi = n;
    if (o->zero) {
        if (!(t->bounds = malloc(sizeof(size_t) * (t->world + 1)))) return gptc_fail(GPTC_ERR_NOMEM, "out of memory");
        gptc_dist_shards(n, t->world, t->bounds);
        share = gptc_ostate_snap_bounds(m->ps.t, m->ps.n, type, t->world, t->bounds);
        t->lo = t->bounds[t->rank];
        t->hi = t->bounds[t->rank + 1];
        /* (--fused-update exchanges each layer's slot whole: no gradient shard) */
        if (t->world > 1 && !o->fused_update && !(t->gshard = gptc_alloc(share * sizeof(float), "ZeRO-1 gradient shard"))) return GPTC_ERR_NOMEM;
    }
    /* the weight gradients' shares of the norm from their products (trainer_step.c): where each product's gradient is
     * final, one process, and the norm sums the model's own tensors */
    const size_t nps = (size_t)m->ps.n, bt = (size_t)o->batch * (size_t)o->seq;
    t->norm_piece = calloc(nps, sizeof(float *));
    t->norm_n = calloc(nps, sizeof(size_t));
    t->norm_passed = calloc(nps, sizeof(double));
    t->norm_from = calloc(nps, sizeof(int));
    if (!t->norm_piece || !t->norm_n || !t->norm_passed || !t->norm_from)
        return gptc_fail(GPTC_ERR_NOMEM, "out of memory");
    if (t->world == 1 && !o->zero && m->ps.same_layout && !m->ps.adapters) {
        t->ws = (gptc_wsumsq){calloc((size_t)m->ntensors, sizeof(double)), calloc((size_t)m->ntensors, sizeof(bool)),
                              calloc(bt, sizeof(int)), calloc(bt, sizeof(double))};
        if (!t->ws.sums || !t->ws.set || !t->ws.rows || !t->ws.part) return gptc_fail(GPTC_ERR_NOMEM, "out of memory");
    }
    size_t live0, live1;
    gptc_alloc_stats(&live0, NULL);
    bool allocated = gptc_ostate_alloc(&t->ostate, t->opt, type, m, t->lo, t->hi) == GPTC_OK;
    gptc_alloc_stats(&live1, NULL);
    t->optim_bytes = live1 - live0; /* measured, to set beside the plan's figure */
    if (m->be.mem != gptc_backend_cpu_memory()) /* device memory: not gptc_alloc's to count */
        t->optim_bytes = (size_t)t->opt->nstates * m->be.mem->block_bytes(share * sizeof(float));
    t->inputs = allocated ? gptc_alloc(sizeof(int) * o->batch * o->seq, "batch") : NULL;
    t->targets = t->inputs ? gptc_alloc(sizeof(int) * o->batch * o->seq, "batch") : NULL;
    if (!t->targets) return GPTC_ERR_NOMEM;
    t->use_red = t->world > 1 && !o->fused_update; /* --fused-update exchanges layer by layer itself */
    if (!t->use_red) return GPTC_OK;
    if (!(t->starts = malloc(sizeof(size_t) * m->ps.n))) return gptc_fail(GPTC_ERR_NOMEM, "out of memory");
    for (int i = 0; i < m->ps.n; i++) t->starts[i] = m->ps.t[i].offset;
    return gptc_reducer_init(&t->red, m->grads, n, t->starts, m->ps.n, o->bucket_mb * 1e6, t->gshard, t->bounds);
}

gptc_status trainer_open(trainer *t, gptc_train_options *o) {
    trainer_read_faults(t);
    gptc_status st;
    gptc_data_meta meta = {0};
    bool has_meta = false;
    gptc_weights_info init;
    if ((st = open_checks(t, o, &meta, &has_meta, &init)) || (st = open_state(t, o, &meta, has_meta))) return st;
    char resume[4096] = "";
    bool resuming = false;
    if (o->ckpt_dir && (st = gptc_ckpt_find(o->ckpt_dir, resume, sizeof resume, &resuming)))
        return gptc_fail_prefix(st, "'ckpt_dir'");
    if (!resuming) resume[0] = '\0';
    if ((resuming && (st = trainer_check_resume(t, o, resume, &meta, has_meta))) || (st = check_memory(t, o))) return st;
    gptc_set_threads(o->threads);
    if ((st = open_data(t, o)) || (st = open_model(t, o)) || (st = open_optimizer(t, o))) return st;
    return trainer_start_weights(t, o, resume, o->init ? &init : NULL);
}
