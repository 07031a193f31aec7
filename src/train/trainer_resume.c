/* trainer_resume.c — a run and its checkpoints: the shape and tokenizer a resumed run must match,
 * the weights a run starts from (the checkpoint's, 'init''s or random), the position a checkpoint
 * restores (step, RNG, loader, the guard's state, the learning-rate factor, the callbacks'
 * overrides), and the rollback to the newest checkpoint after too many bad steps. */
#include "train/trainer_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

gptc_status trainer_check_resume(const trainer *t, const gptc_train_options *o, const char *resume,
                                 const gptc_data_meta *meta, bool has_meta) {
    gptc_model_config saved;
    char saved_tok[32];
    gptc_status st = gptc_ckpt_read_config(resume, &saved, saved_tok, sizeof saved_tok);
    if (st) return gptc_fail_prefix(st, "'ckpt_dir'");
    if (has_meta && saved_tok[0] && strcmp(saved_tok, meta->tokenizer) != 0)
        return gptc_fail(GPTC_ERR_STATE, "'ckpt_dir' %s: was trained on %s tokens but 'data' %s holds %s tokens; "
                         "prepare the data with the %s tokenizer or use another 'ckpt_dir' folder",
                         resume, saved_tok, o->data, meta->tokenizer, saved_tok);
    gptc_model_config shape = saved;
    shape.gelu = o->model.gelu; /* the shape first, then the form */
    if (memcmp(&shape, &o->model, sizeof shape) != 0)
        return gptc_fail(GPTC_ERR_STATE,
                         "'ckpt_dir' %s: holds a model with layers=%d heads=%d channels=%d context=%d vocab=%d, but "
                         "this run asks for layers=%d heads=%d channels=%d context=%d vocab=%d; use matching options "
                         "or another 'ckpt_dir' folder",
                         resume, saved.layers, saved.heads, saved.channels, saved.context, saved.vocab,
                         o->model.layers, o->model.heads, o->model.channels, o->model.context, o->model.vocab);
    /* what trains must be what the checkpoint's optimizer state holds: its adapters, or its frozen tensors */
    gptc_adapters_info ad;
    if ((st = gptc_adapters_probe(resume, &ad))) return gptc_fail_prefix(st, "'ckpt_dir'");
    if (ad.found && o->lora <= 0)
        return gptc_fail(GPTC_ERR_STATE, "'ckpt_dir' %s: a LoRA run's checkpoint (adapters of rank %d); resume it with "
                         "'lora' %d, or fine-tune its merged weights with 'init' %s and another 'ckpt_dir' folder", resume,
                         ad.rank, ad.rank, resume);
    if (!ad.found && o->lora > 0)
        return gptc_fail(GPTC_ERR_STATE, "'ckpt_dir' %s: holds no LoRA adapters; start the LoRA run from it with 'init' %s "
                         "and another 'ckpt_dir' folder", resume, resume);
    char optim[4200];
    snprintf(optim, sizeof optim, "%s/optim.safetensors", resume);
    gptc_st_file f = {0};
    if (gptc_is_file(optim) && gptc_st_open(&f, optim) == GPTC_OK) {
        const char *had = gptc_st_meta(&f, "gptc.freeze");
        const char *want = o->freeze ? o->freeze : "";
        bool differ = strcmp(had ? had : "", want) != 0;
        char was[256];
        snprintf(was, sizeof was, "%s", had ? had : "");
        gptc_st_close(&f);
        if (differ)
            return gptc_fail(GPTC_ERR_STATE, "'ckpt_dir' %s: was trained with 'freeze' \"%s\" but this run asks for \"%s\"; "
                             "use 'freeze' \"%s\", or start from it with 'init' %s and another 'ckpt_dir' folder", resume,
                             was, want, was, resume);
    }
    if (saved.gelu != o->model.gelu)
        return gptc_fail(GPTC_ERR_STATE,
                         "'ckpt_dir' %s: holds a model trained with 'model.gelu' %s, but this run asks for 'model.gelu' %s; use "
                         "'model.gelu' %s or another 'ckpt_dir' folder",
                         resume, gptc_gelu_name(saved.gelu), gptc_gelu_name(o->model.gelu), gptc_gelu_name(saved.gelu));
    return GPTC_OK;
}

/* Loads a checkpoint folder into the model, this rank's moments and the run's position (step, RNG,
 * loader, the guard's state, the learning-rate factor); the run keeps its own settings. *saved gets
 * the checkpoint's recorded state. */
static gptc_status load_position(trainer *t, const char *dir, gptc_trainer_state *saved) {
    *saved = (gptc_trainer_state){.guard = t->guard_buf, .guard_len = gptc_guard_packed_len(&t->guard)};
    gptc_status st = gptc_ckpt_load_range(dir, &t->model, t->opt, &t->ostate, saved);
    if (st) return st;
    gptc_model_params_changed(&t->model, 0, t->model.num_floats);
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

/* The weights the run starts from: the checkpoint's (resume non-empty: with its position and
 * optimizer state), init's, or a random init; then the warm-up + cosine and the samples' tokenizer. */
/* 'eval_hellaswag': the items, tokenized with the data's tokenizer */
static gptc_status open_hellaswag(trainer *t, const char *file) {
    if (!t->state.tokenizer[0])
        return gptc_fail(GPTC_ERR_ARG, "'eval_hellaswag' %s: the data does not name its tokenizer (no meta.json), so the "
                         "text cannot be tokenized; train on a folder made by `gptc prepare`", file);
    gptc_tokenizer *tz;
    gptc_status st = gptc_tokenizer_open(t->state.tokenizer, &tz);
    if (st) return gptc_fail_prefix(st, "'eval_hellaswag'");
    st = gptc_mc_read(file, tz, &t->hs);
    gptc_tokenizer_free(tz);
    if (st) return gptc_fail_prefix(st, "'eval_hellaswag'");
    /* the items run in the training arenas: every ending must fit 'seq' with a token of context */
    for (int i = 0; i < t->hs.n; i++)
        for (int e = 0; e < t->hs.items[i].nend; e++)
            if (t->hs.items[i].nendtok[e] > t->o->seq)
                return gptc_fail(GPTC_ERR_ARG, "'eval_hellaswag' %s: item %d's ending %d is %d tokens, more than 'seq' %d "
                                 "holds with its context; train with a longer 'seq' or score it with gptc eval "
                                 "--hellaswag", file, i + 1, e, t->hs.items[i].nendtok[e], t->o->seq);
    return GPTC_OK;
}

gptc_status trainer_start_weights(trainer *t, const gptc_train_options *o, const char *resume,
                                  const gptc_weights_info *init) {
    gptc_status st;
    if (*resume && o->init && t->rank == 0) gptc_log("'init' %s: not used, the run resumes from %s", o->init, resume);
    if (*resume) {
        gptc_trainer_state saved;
        if ((st = load_position(t, resume, &saved))) return st;
        if (t->rank == 0) gptc_hp_warn_changes(resume, &saved.hp, &t->state.hp);
        if (!t->state.tokenizer[0]) snprintf(t->state.tokenizer, sizeof t->state.tokenizer, "%s", saved.tokenizer);
    } else if (init) {
        if ((st = gptc_weights_load(init, &t->model))) return gptc_fail_prefix(st, "'init'");
        gptc_model_params_changed(&t->model, 0, t->model.num_floats);
        if (!t->state.tokenizer[0]) snprintf(t->state.tokenizer, sizeof t->state.tokenizer, "%s", init->tokenizer);
    } else {
        gptc_model_init_weights(&t->model, o->seed);
    }
    t->sched = (gptc_lr_schedule){.lr = o->lr, .warmup = o->warmup, .steps = o->steps, .floor = o->lr_floor};
    if (o->eval_hellaswag && (st = open_hellaswag(t, o->eval_hellaswag))) return st;
    if (!o->sample_every) return GPTC_OK;
    if (!t->state.tokenizer[0]) {
        if (t->rank == 0) gptc_warn("'sample_every': the data does not name its tokenizer (no meta.json); no samples");
        return GPTC_OK;
    }
    if ((st = gptc_tokenizer_open(t->state.tokenizer, &t->tok))) return gptc_fail_prefix(st, "'sample_every'");
    if (!(t->sample = malloc(TRAINER_SAMPLE_CAP))) return gptc_fail(GPTC_ERR_NOMEM, "out of memory");
    return GPTC_OK;
}

/* After too many bad steps in a row: back to the newest valid checkpoint (every rank reads it), the
 * learning rate lowered for the rest of the run. *where gets the folder. */
gptc_status trainer_roll_back(trainer *t, const char *why, char *where, size_t cap) {
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
