/* checkpoint.c — saving, finding and loading checkpoint folders (see checkpoint.h). */
#include "train/checkpoint.h"
#include "io/io.h"
#include "train/weights.h"
#include "kernels/ostate.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MODEL_FILE "model.safetensors"
#define OPTIM_FILE "optim.safetensors"
#define CONFIG_FILE "config.json"
#define GUARD_TENSOR "gptc.guard"

/* ---- metadata helpers */

#define META_MAX 48
typedef struct {
    const char *keys[META_MAX];
    char vals[META_MAX][1024]; /* a schedule's spec is the longest value */
    const char *vptr[META_MAX];
    int n;
} meta_list;

static void meta_add(meta_list *ml, const char *key, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void meta_add(meta_list *ml, const char *key, const char *fmt, ...) {
    GPTC_ASSERT(ml->n < META_MAX);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ml->vals[ml->n], sizeof ml->vals[0], fmt, ap);
    va_end(ap);
    ml->keys[ml->n] = key;
    ml->vptr[ml->n] = ml->vals[ml->n];
    ml->n++;
}

static void meta_config(meta_list *ml, const gptc_model_config *c, const char *tokenizer) {
    meta_add(ml, "format", "pt");
    meta_add(ml, "gptc.layers", "%d", c->layers);
    meta_add(ml, "gptc.heads", "%d", c->heads);
    meta_add(ml, "gptc.channels", "%d", c->channels);
    meta_add(ml, "gptc.context", "%d", c->context);
    meta_add(ml, "gptc.vocab", "%d", c->vocab);
    meta_add(ml, "gptc.gelu", "%s", gptc_gelu_name(c->gelu));
    meta_add(ml, "gptc.tokenizer", "%s", tokenizer);
}

static gptc_status meta_u64(const gptc_st_file *f, const char *key, uint64_t *out) {
    const char *v = gptc_st_meta(f, key);
    char *end;
    if (!v || !*v) return gptc_fail(GPTC_ERR_FORMAT, "%s: metadata %s missing; not a gptc checkpoint", f->path, key);
    errno = 0;
    unsigned long long x = strtoull(v, &end, 10);
    if (*end || errno) return gptc_fail(GPTC_ERR_FORMAT, "%s: metadata %s=\"%s\" is not a number", f->path, key, v);
    *out = x;
    return GPTC_OK;
}

static gptc_status meta_float(const gptc_st_file *f, const char *key, float *out) {
    const char *v = gptc_st_meta(f, key);
    char *end;
    if (!v || !*v) return gptc_fail(GPTC_ERR_FORMAT, "%s: metadata %s missing; not a gptc checkpoint", f->path, key);
    double x = strtod(v, &end);
    if (*end) return gptc_fail(GPTC_ERR_FORMAT, "%s: metadata %s=\"%s\" is not a number", f->path, key, v);
    *out = (float)x;
    return GPTC_OK;
}

static gptc_status meta_int(const gptc_st_file *f, const char *key, int *out) {
    uint64_t x = 0;
    gptc_status st = meta_u64(f, key, &x);
    if (st) return st;
    if (x > 1000000000ULL) return gptc_fail(GPTC_ERR_FORMAT, "%s: metadata %s=%" PRIu64 " is out of range", f->path, key, x);
    *out = (int)x;
    return GPTC_OK;
}

/* ---- saving */

/* tensors of the model (prefix "", F32) or of a state buffer (prefix "exp_avg." ..., dtype F32, BF16 or U8)
 * as entries: base is the buffer of the whole arena, elem bytes per element */
static void fill_entries(const gptc_model *m, const void *base, gptc_dtype dtype, size_t elem, const char *prefix,
                         char (*names)[64], gptc_st_entry *e) {
    for (int i = 0; i < m->ps.n; i++) { /* the trainable set's tensors (model/gpt2.h gptc_pset) */
        const gptc_tensor_desc *d = &m->ps.t[i];
        snprintf(names[i], 64, "%s%s", prefix, d->name);
        e[i] = (gptc_st_entry){.name = names[i], .dtype = dtype, .ndim = d->ndim,
                               .data = (const char *)base + d->offset * elem};
        e[i].shape[0] = d->shape[0];
        e[i].shape[1] = d->shape[1];
    }
}

/* an int8 state's scales (absmax of the whole arena's blocks) as one F32 entry per tensor, [its blocks] */
static void fill_scales(const gptc_model *m, const float *absmax, const char *prefix, char (*names)[64],
                        gptc_st_entry *e) {
    for (int i = 0; i < m->ps.n; i++) {
        const gptc_tensor_desc *d = &m->ps.t[i];
        snprintf(names[i], 64, "%s%s", prefix, d->name);
        size_t first = gptc_ostate_block_of(m->ps.t, m->ps.n, d->offset);
        e[i] = (gptc_st_entry){.name = names[i], .dtype = GPTC_F32, .ndim = 1,
                               .shape = {(int64_t)((d->numel + GPTC_OSTATE_BLOCK - 1) / GPTC_OSTATE_BLOCK)},
                               .data = absmax + first};
    }
}

/* the safetensors dtype of a state type */
static gptc_dtype state_dtype(gptc_ostate_type t) {
    return t == GPTC_OSTATE_FP32 ? GPTC_F32 : t == GPTC_OSTATE_BF16 ? GPTC_BF16 : GPTC_U8;
}

static int is_step_name(const char *name, long *step) {
    char *end;
    if (strncmp(name, "step-", 5) != 0) return 0;
    long s = strtol(name + 5, &end, 10);
    if (*end || end == name + 5 || s < 0) return 0;
    *step = s;
    return 1;
}

typedef struct { long step; char name[64]; } step_dir;
static int by_step(const void *a, const void *b) {
    long x = ((const step_dir *)a)->step, y = ((const step_dir *)b)->step;
    return (x > y) - (x < y);
}

/* Lists the step folders of dir, oldest first; *n = count (caller frees *out). */
static gptc_status list_steps(const char *dir, step_dir **out, int *n) {
    *out = NULL;
    *n = 0;
    DIR *d = opendir(dir);
    if (!d) return gptc_fail(GPTC_ERR_IO, "%s: cannot open folder: %s", dir, strerror(errno));
    int cap = 16;
    step_dir *v = malloc(sizeof *v * cap);
    struct dirent *de;
    while (v && (de = readdir(d))) {
        long s;
        if (!is_step_name(de->d_name, &s) || strlen(de->d_name) >= sizeof v[0].name) continue;
        char full[4096];
        snprintf(full, sizeof full, "%s/%s", dir, de->d_name);
        if (!gptc_is_dir(full)) continue;
        if (*n == cap) v = realloc(v, sizeof *v * (cap *= 2));
        if (!v) break;
        v[*n].step = s;
        snprintf(v[*n].name, sizeof v[0].name, "%s", de->d_name);
        (*n)++;
    }
    closedir(d);
    if (!v) return gptc_fail(GPTC_ERR_NOMEM, "%s: out of memory listing checkpoints", dir);
    qsort(v, *n, sizeof *v, by_step);
    *out = v;
    return GPTC_OK;
}

/* Removes what a killed writer left in dir: ".tmp-step-N-PID" (a checkpoint being written) and
 * ".old-step-N-PID" (a replaced one being removed) folders whose PID is no longer running. */
static void remove_stale(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *de;
    while ((de = readdir(d))) {
        int step, pid;
        char end;
        if ((sscanf(de->d_name, ".tmp-step-%d-%d%c", &step, &pid, &end) != 2 &&
             sscanf(de->d_name, ".old-step-%d-%d%c", &step, &pid, &end) != 2) ||
            pid <= 0 || pid == (int)getpid() || !(kill(pid, 0) != 0 && errno == ESRCH))
            continue;
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        if (gptc_remove_tree(path) == GPTC_OK) gptc_warn("removed %s, left by a run that was killed while saving", path);
    }
    closedir(d);
}

/* The trainer state and the keyed options of train/hparams.def as metadata. */
static void meta_state(meta_list *ol, const gptc_model *m, const gptc_optimizer_kind *opt, gptc_ostate_type type,
                       const gptc_trainer_state *s) {
    meta_config(ol, &m->cfg, s->tokenizer);
    meta_add(ol, "gptc.step", "%d", s->step);
    meta_add(ol, "gptc.rng", "%" PRIu64, s->rng);
    meta_add(ol, "gptc.loader_epoch", "%" PRIu64, s->loader_epoch);
    meta_add(ol, "gptc.loader_cursor", "%" PRIu64, s->loader_cursor);
    for (int k = 0; k < GPTC_HP_N; k++) {
        if (!gptc_hps[k].ckpt_key) continue;
        char v[GPTC_HPARAM_SPEC_MAX];
        gptc_hp_format(&s->hp, k, v, sizeof v);
        if (k == GPTC_HP_optimizer) snprintf(v, sizeof v, "%s", opt->name); /* the state's, whatever the options say */
        if (k == GPTC_HP_optim_state) snprintf(v, sizeof v, "%s", gptc_ostate_name(type));
        meta_add(ol, gptc_hps[k].ckpt_key, "%s", v);
    }
    meta_add(ol, "gptc.lr_scale", "%.9g", s->lr_scale > 0 ? s->lr_scale : 1); /* 0: never set */
    meta_add(ol, "gptc.rollbacks", "%d", s->rollbacks);
    meta_add(ol, "gptc.bad_run", "%d", s->bad_run);
    meta_add(ol, "gptc.override.lr", "%.9g", s->ov_lr);
    meta_add(ol, "gptc.override.dropout", "%.9g", s->ov_dropout);
    meta_add(ol, "gptc.override.attn_dropout", "%.9g", s->ov_attn_dropout);
    meta_add(ol, "gptc.override.weight_decay", "%.9g", s->ov_weight_decay);
}

gptc_status gptc_ckpt_save(const char *dir, const gptc_model *m, const gptc_optimizer_kind *opt, const gptc_ostate *state,
                           const gptc_trainer_state *s, int keep, char *written, size_t cap) {
    char tmp[4096], final[4096], path[4096];
    gptc_status st = gptc_mkdir_p(dir);
    if (st) return st;
    remove_stale(dir);
    snprintf(tmp, sizeof tmp, "%s/.tmp-step-%08d-%d", dir, s->step, (int)getpid());
    snprintf(final, sizeof final, "%s/step-%08d", dir, s->step);
    gptc_remove_tree(tmp);
    if ((st = gptc_mkdir_p(tmp))) return st;

    int n = m->ps.n, nb = opt ? opt->nstates : 0; /* state tensors: the trainable set's */
    bool q8 = state && state->type == GPTC_OSTATE_INT8;
    int nbuf = nb * (q8 ? 2 : 1); /* tensors per state buffer: the values, and for int8 the scales */
    char(*names)[64] = malloc(sizeof *names * n * (nbuf ? nbuf : 1));
    gptc_st_entry *e = malloc(sizeof *e * (n * (nbuf ? nbuf : 1) + 1));
    meta_list *ol = calloc(1, sizeof *ol);
    if (!names || !e || !ol) {
        st = gptc_fail(GPTC_ERR_NOMEM, "%s: out of memory", final);
        goto done;
    }
    if ((st = gptc_weights_write_hf(tmp, m, s->tokenizer, GPTC_F32, false))) goto done;
    /* LoRA: the base weights above stay the base; the adapters beside them in PEFT's layout */
    if (m->lora && (st = gptc_adapters_write(tmp, m, ""))) goto done;
    if (opt && state) {
        GPTC_ASSERT(state->lo == 0 && state->hi == m->ps.floats);
        meta_state(ol, m, opt, state->type, s);
        char prefix[64];
        for (int b = 0; b < nb; b++) {
            snprintf(prefix, sizeof prefix, "%s.", opt->state_names[b]);
            fill_entries(m, state->buf[b], state_dtype(state->type), gptc_ostate_elem(state->type), prefix, names + b * n,
                         e + b * n);
            if (q8) {
                snprintf(prefix, sizeof prefix, "%s.absmax.", opt->state_names[b]);
                fill_scales(m, state->absmax[b], prefix, names + (nb + b) * n, e + (nb + b) * n);
            }
        }
        int ne = nbuf * n;
        if (s->guard && s->guard_len) /* the step guard's window: one more tensor */
            e[ne++] = (gptc_st_entry){.name = GUARD_TENSOR, .dtype = GPTC_F32, .ndim = 1, .shape = {(int64_t)s->guard_len},
                                      .data = s->guard};
        snprintf(path, sizeof path, "%s/" OPTIM_FILE, tmp);
        if ((st = gptc_st_write(path, e, ne, ol->keys, ol->vptr, ol->n))) goto done;
    }
    if ((st = gptc_fsync_dir(tmp))) goto done;
    /* replace an existing folder of the same step (a re-save after a resume or a rollback): swapped
     * in one step where the file system can, so a crash never leaves neither */
    if (gptc_is_dir(final)) {
        if (renameat2(AT_FDCWD, tmp, AT_FDCWD, final, RENAME_EXCHANGE) == 0) {
            gptc_remove_tree(tmp); /* now the old folder */
            goto placed;
        }
        char old[4200];
        snprintf(old, sizeof old, "%s/.old-step-%08d-%d", dir, s->step, (int)getpid());
        if (rename(final, old) != 0) {
            st = gptc_fail(GPTC_ERR_IO, "%s: cannot replace: %s", final, strerror(errno));
            goto done;
        }
        gptc_remove_tree(old);
    }
    if (rename(tmp, final) != 0) {
        st = gptc_fail(GPTC_ERR_IO, "%s: cannot rename into place: %s", final, strerror(errno));
        goto done;
    }
placed:
    if ((st = gptc_fsync_dir(dir))) goto done;
    if (written) snprintf(written, cap, "%s", final);
    /* keep the newest `keep` */
    step_dir *steps;
    int ns;
    if (keep > 0 && list_steps(dir, &steps, &ns) == GPTC_OK) {
        for (int i = 0; i + keep < ns; i++) {
            snprintf(path, sizeof path, "%s/%s", dir, steps[i].name);
            gptc_remove_tree(path);
        }
        free(steps);
    }
done:
    if (st) gptc_remove_tree(tmp);
    free(names);
    free(e);
    free(ol);
    return st;
}

/* ---- finding and loading */

/* config.json (written for Hugging Face; gptc reads the shape from model.safetensors) must, when
 * present, describe the same shape: a folder that disagrees with itself was edited or mixed up.
 * (activation_function is not compared: a checkpoint older than gptc.gelu is tanh whatever it says.) */
static gptc_status check_hf_config(const char *step_dir, const gptc_model_config *c) {
    char path[4096];
    snprintf(path, sizeof path, "%s/" CONFIG_FILE, step_dir);
    if (access(path, F_OK) != 0) return GPTC_OK; /* optional */
    cJSON *o;
    const char *why;
    gptc_status st = gptc_json_object_read(path, &o, &why);
    if (st) return st;
    if (!o) return gptc_fail(GPTC_ERR_FORMAT, "%s: %s; the checkpoint folder is damaged: use another checkpoint", path, why);
    struct { const char *key; int want; } f[] = {{"n_layer", c->layers}, {"n_head", c->heads}, {"n_embd", c->channels},
                                                 {"n_positions", c->context}, {"vocab_size", c->vocab}};
    st = GPTC_OK;
    for (size_t i = 0; i < sizeof f / sizeof f[0] && !st; i++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, f[i].key);
        if (v && !cJSON_IsNumber(v))
            st = gptc_fail(GPTC_ERR_FORMAT, "%s: %s is not a number; the checkpoint folder is damaged: use another "
                           "checkpoint", path, f[i].key);
        else if (v && v->valuedouble != f[i].want)
            st = gptc_fail(GPTC_ERR_FORMAT,
                           "%s: %s is %g but model.safetensors holds %d; the checkpoint folder was edited or mixed "
                           "up: use another checkpoint",
                           path, f[i].key, v->valuedouble, f[i].want);
    }
    cJSON_Delete(o);
    return st;
}

gptc_status gptc_ckpt_read_config(const char *step_dir, gptc_model_config *cfg, char *tokenizer, size_t cap) {
    gptc_weights_info info;
    gptc_status st = gptc_weights_probe(step_dir, &info);
    if (st) return st;
    *cfg = info.cfg;
    /* the config must describe the tensors the file holds: a lying shape would otherwise size the
     * model (and its allocation) before any tensor is compared; a file cannot hold more values than
     * its bytes (an llm.c file's size is checked against its header by the probe) */
    if (info.format != GPTC_WEIGHTS_LLMC) {
        gptc_st_file f = {0};
        if ((st = gptc_st_open_header(&f, info.file))) return st;
        size_t values = 0;
        for (int i = 0; i < f.ntensors; i++) values += f.tensors[i].numel;
        gptc_st_close(&f);
        if (values < gptc_model_num_params(cfg))
            return gptc_fail(GPTC_ERR_FORMAT,
                             "%s: its config describes layers=%d heads=%d channels=%d context=%d vocab=%d (%zu "
                             "parameters) but the file holds %zu values; the file is corrupt or was edited: use another "
                             "checkpoint", info.file, cfg->layers, cfg->heads, cfg->channels, cfg->context, cfg->vocab,
                             gptc_model_num_params(cfg), values);
        if (info.format == GPTC_WEIGHTS_GPTC && (st = check_hf_config(step_dir, cfg))) return st;
    }
    if (tokenizer) snprintf(tokenizer, cap, "%s", info.tokenizer);
    return GPTC_OK;
}

/* gptc_ckpt_find and gptc_ckpt_find_weights: with_state also verifies the optimizer state */
static gptc_status find_step(const char *dir, char *path, size_t cap, bool *found, bool with_state) {
    *found = false;
    char probe[4096];
    snprintf(probe, sizeof probe, "%s/" MODEL_FILE, dir);
    if (gptc_is_file(probe) || gptc_is_file(dir)) { /* one step folder, weights folder or weights file */
        snprintf(path, cap, "%s", dir);
        *found = true;
        return GPTC_OK;
    }
    if (!gptc_is_dir(dir)) return GPTC_OK;
    step_dir *steps;
    int n;
    gptc_status st = list_steps(dir, &steps, &n);
    if (st) return st;
    /* the reasons the newer folders were skipped: warned about once an older one loads; when none
     * does, the folder is refused (starting afresh would prune the damaged ones away) */
    char **why = calloc(n ? (size_t)n : 1, sizeof *why);
    int nwhy = 0;
    if (!why) {
        free(steps);
        return gptc_fail(GPTC_ERR_NOMEM, "%s: out of memory listing checkpoints", dir);
    }
    for (int i = n - 1; i >= 0; i--) {
        char cand[4096];
        snprintf(cand, sizeof cand, "%s/%s", dir, steps[i].name);
        gptc_model_config cfg;
        st = gptc_ckpt_read_config(cand, &cfg, NULL, 0);
        if (st == GPTC_OK) {
            /* the newest whole checkpoint: its weights' (and optimizer state's) checksums verified
             * (the config read above trusts the headers only) */
            const char *files[2] = {MODEL_FILE, OPTIM_FILE};
            for (int k = 0; k < (with_state ? 2 : 1) && st == GPTC_OK; k++) {
                snprintf(probe, sizeof probe, "%s/%s", cand, files[k]);
                gptc_st_file f = {0};
                if (gptc_is_file(probe) && (st = gptc_st_open(&f, probe)) == GPTC_OK) gptc_st_close(&f);
            }
            if (st != GPTC_OK) {
                why[nwhy++] = strdup(gptc_last_error());
                continue;
            }
            snprintf(path, cap, "%s", cand);
            *found = true;
            break;
        }
        why[nwhy++] = strdup(gptc_last_error());
    }
    st = GPTC_OK;
    if (*found) {
        for (int i = 0; i < nwhy; i++)
            gptc_warn("skipping checkpoint %s/%s: %s", dir, steps[n - 1 - i].name, why[i] ? why[i] : "damaged");
    } else if (n > 0) {
        char which[96];
        if (n == 1) snprintf(which, sizeof which, "its only checkpoint, %s, does not load", steps[0].name);
        else snprintf(which, sizeof which, "none of its %d checkpoints loads (the newest, %s)", n, steps[n - 1].name);
        st = gptc_fail(GPTC_ERR_FORMAT,
                       "%s: %s: %s; move the damaged folder%s away to start afresh, or use another checkpoint folder", dir,
                       which, why[0] ? why[0] : "damaged", n > 1 ? "s" : "");
    }
    for (int i = 0; i < nwhy; i++) free(why[i]);
    free(why);
    free(steps);
    return st;
}

gptc_status gptc_ckpt_find(const char *dir, char *path, size_t cap, bool *found) {
    return find_step(dir, path, cap, found, true);
}

gptc_status gptc_ckpt_find_weights(const char *dir, char *path, size_t cap, bool *found) {
    return find_step(dir, path, cap, found, false);
}

/* copies the part inside elements [lo, hi) of the arena of every tensor of m from f (names with prefix,
 * dtype dt of elem bytes) into base (element 0 is element lo), checking dtype and shape. scales: the int8
 * scales instead (F32, one per block of each tensor) into base (element 0 the scale of block blk_lo). */
static gptc_status load_tensors(const gptc_st_file *f, const gptc_model *m, const char *prefix, gptc_dtype dt,
                                size_t elem, bool scales, void *base, size_t lo, size_t hi, size_t blk_lo) {
    for (int i = 0; i < m->ps.n; i++) { /* the trainable set's tensors, in its compact arena */
        const gptc_tensor_desc *d = &m->ps.t[i];
        char name[96];
        snprintf(name, sizeof name, "%s%s", prefix, d->name);
        const gptc_st_tensor *t = gptc_st_find(f, name);
        if (!t) return gptc_fail(GPTC_ERR_FORMAT, "%s: tensor %s missing; not a checkpoint of this model", f->path, name);
        int64_t nblk = (int64_t)((d->numel + GPTC_OSTATE_BLOCK - 1) / GPTC_OSTATE_BLOCK);
        bool same = scales ? t->dtype == GPTC_F32 && t->ndim == 1 && t->shape[0] == nblk
                           : t->dtype == dt && t->ndim == d->ndim && t->shape[0] == d->shape[0] &&
                                 (d->ndim == 1 || t->shape[1] == d->shape[1]);
        if (!same) {
            char have[160], need[64];
            size_t k = (size_t)snprintf(have, sizeof have, "%s [", gptc_dtype_name(t->dtype));
            for (int j = 0; j < t->ndim && k < sizeof have; j++)
                k += (size_t)snprintf(have + k, sizeof have - k, "%s%" PRId64, j ? ", " : "", t->shape[j]);
            if (k < sizeof have) snprintf(have + k, sizeof have - k, "]");
            if (scales) snprintf(need, sizeof need, "F32 [%" PRId64 "]", nblk);
            else if (d->ndim > 1)
                snprintf(need, sizeof need, "%s [%" PRId64 ", %" PRId64 "]", gptc_dtype_name(dt), d->shape[0], d->shape[1]);
            else snprintf(need, sizeof need, "%s [%" PRId64 "]", gptc_dtype_name(dt), d->shape[0]);
            return gptc_fail(GPTC_ERR_STATE, "%s: tensor %s is %s, the model needs %s; not a checkpoint of this model",
                             f->path, name, have, need);
        }
        size_t a = d->offset > lo ? d->offset : lo, b = d->offset + d->numel < hi ? d->offset + d->numel : hi;
        if (a < b && scales) { /* the blocks of the piece [a, b): whole ones (the range does not cut a block) */
            size_t j0 = (a - d->offset) / GPTC_OSTATE_BLOCK, j1 = (b - d->offset + GPTC_OSTATE_BLOCK - 1) / GPTC_OSTATE_BLOCK;
            size_t first = gptc_ostate_block_of(m->ps.t, m->ps.n, d->offset);
            memcpy((float *)base + (first + j0 - blk_lo), (const float *)t->data + j0, (j1 - j0) * sizeof(float));
        } else if (a < b) {
            memcpy((char *)base + (a - lo) * elem, (const char *)t->data + (a - d->offset) * elem, (b - a) * elem);
        }
        gptc_st_release(f, t); /* copied: its pages need not stay resident */
    }
    return GPTC_OK;
}

gptc_status gptc_ckpt_load(const char *step_dir, gptc_model *m, const gptc_optimizer_kind *opt, gptc_ostate *state,
                           gptc_trainer_state *s) {
    return gptc_ckpt_load_range(step_dir, m, opt, state, s);
}

/* The keyed options of train/hparams.def from the metadata: REQ keys must be there, OPT keys take
 * the option's default when missing (checkpoints from before them). */
static gptc_status load_hparams(const gptc_st_file *f, gptc_hp_values *hp) {
    for (int k = 0; k < GPTC_HP_N; k++) {
        const gptc_hp_info *h = &gptc_hps[k];
        if (!h->ckpt_key) continue;
        const char *v = gptc_st_meta(f, h->ckpt_key);
        if (!v && h->ckpt == GPTC_HP_CK_OPT) {
            gptc_hp_default_value(hp, k);
            continue;
        }
        if (!v || (!*v && h->kind != GPTC_HP_TEXT))
            return gptc_fail(GPTC_ERR_FORMAT, "%s: metadata %s missing; not a gptc checkpoint", f->path, h->ckpt_key);
        if (!gptc_hp_parse_value(hp, k, v))
            return gptc_fail(GPTC_ERR_FORMAT, "%s: metadata %s=\"%s\" is not a number", f->path, h->ckpt_key, v);
    }
    return GPTC_OK;
}

/* The position, the step guard's counters and the callbacks' overrides (checkpoints from before the
 * guard had none: scale 1; from before the overrides: none). */
static gptc_status load_position(const gptc_st_file *f, gptc_trainer_state *s) {
    gptc_status st;
    if ((st = meta_int(f, "gptc.step", &s->step)) || (st = meta_u64(f, "gptc.rng", &s->rng)) ||
        (st = meta_u64(f, "gptc.loader_epoch", &s->loader_epoch)) ||
        (st = meta_u64(f, "gptc.loader_cursor", &s->loader_cursor)))
        return st;
    s->lr_scale = 1;
    if (gptc_st_meta(f, "gptc.lr_scale") &&
        ((st = meta_float(f, "gptc.lr_scale", &s->lr_scale)) || (st = meta_int(f, "gptc.rollbacks", &s->rollbacks)) ||
         (st = meta_int(f, "gptc.bad_run", &s->bad_run))))
        return st;
    if (!(s->lr_scale > 0 && s->lr_scale <= 1))
        return gptc_fail(GPTC_ERR_FORMAT, "%s: metadata gptc.lr_scale=%g is out of (0, 1]", f->path, s->lr_scale);
    s->ov_lr = s->ov_dropout = s->ov_attn_dropout = s->ov_weight_decay = NAN;
    if (gptc_st_meta(f, "gptc.override.lr") &&
        ((st = meta_float(f, "gptc.override.lr", &s->ov_lr)) || (st = meta_float(f, "gptc.override.dropout", &s->ov_dropout)) ||
         (st = meta_float(f, "gptc.override.attn_dropout", &s->ov_attn_dropout)) ||
         (st = meta_float(f, "gptc.override.weight_decay", &s->ov_weight_decay))))
        return st;
    return GPTC_OK;
}

gptc_status gptc_ckpt_load_range(const char *step_dir, gptc_model *m, const gptc_optimizer_kind *opt,
                                 gptc_ostate *state, gptc_trainer_state *s) {
    char path[4096];
    gptc_weights_info info;
    gptc_status st = gptc_weights_probe(step_dir, &info);
    if (st) return st;
    if (state && info.format != GPTC_WEIGHTS_GPTC)
        return gptc_fail(GPTC_ERR_STATE, "%s: %s weights without a training state, not a checkpoint to resume; start "
                         "from them with 'init' %s and a new 'ckpt_dir' folder",
                         step_dir, gptc_weights_format_name(info.format), step_dir);
    st = gptc_weights_load(&info, m);
    if (st || !state) return st;
    gptc_st_file f = {0};
    snprintf(path, sizeof path, "%s/" OPTIM_FILE, step_dir);
    if ((st = gptc_st_open(&f, path))) return st;
    float *guard = s->guard;
    size_t cap = s->guard_len;
    memset(s, 0, sizeof *s);
    if ((st = load_hparams(&f, &s->hp)) || (st = load_position(&f, s))) goto done;
    snprintf(s->tokenizer, sizeof s->tokenizer, "%s", info.tokenizer);
    const char *was = s->hp.text[GPTC_HP_optimizer];
    if (strcmp(was, opt->name) != 0) {
        st = gptc_fail(GPTC_ERR_STATE, "%s: was trained with the optimizer %s, but this run asks for 'optimizer' %s; "
                       "use 'optimizer' %s or another 'ckpt_dir' folder", step_dir, was, opt->name, was);
        goto done;
    }
    const char *had = s->hp.text[GPTC_HP_optim_state], *want = gptc_ostate_name(state->type);
    if (strcmp(had, want) != 0) {
        st = gptc_fail(GPTC_ERR_STATE, "%s: holds optimizer state in %s, but this run asks for 'optim_state' %s; use "
                       "'optim_state' %s or another 'ckpt_dir' folder", step_dir, had, want, had);
        goto done;
    }
    char prefix[64];
    size_t lo = state->lo, hi = state->hi, elem = gptc_ostate_elem(state->type);
    for (int b = 0; b < opt->nstates; b++) {
        memset(state->buf[b], 0, (hi - lo) * elem);
        snprintf(prefix, sizeof prefix, "%s.", opt->state_names[b]);
        if ((st = load_tensors(&f, m, prefix, state_dtype(state->type), elem, false, state->buf[b], lo, hi, 0))) goto done;
        if (state->type == GPTC_OSTATE_INT8) {
            snprintf(prefix, sizeof prefix, "%s.absmax.", opt->state_names[b]);
            if ((st = load_tensors(&f, m, prefix, GPTC_F32, 4, true, state->absmax[b], lo, hi, state->blk_lo))) goto done;
        }
    }
    s->guard = guard;
    const gptc_st_tensor *gt = gptc_st_find(&f, GUARD_TENSOR);
    if (gt) {
        if (gt->dtype != GPTC_F32 || gt->ndim != 1) {
            st = gptc_fail(GPTC_ERR_FORMAT, "%s: tensor " GUARD_TENSOR " is not a 1-D F32 tensor", f.path);
            goto done;
        }
        s->guard_len = (size_t)gt->shape[0];
        if (guard && s->guard_len <= cap) memcpy(guard, gt->data, sizeof(float) * s->guard_len);
    }
done:
    gptc_st_close(&f);
    return st;
}
