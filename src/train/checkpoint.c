/* checkpoint.c — saving, finding and loading checkpoint folders (see checkpoint.h). */
#include "train/checkpoint.h"
#include "io/io.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MODEL_FILE "model.safetensors"
#define OPTIM_FILE "optim.safetensors"
#define CONFIG_FILE "config.json"

/* ---- the GELU form: "gptc.gelu" in the metadata (the --gelu name), activation_function in config.json */

/* Hugging Face's activation_function for each gptc_gelu_kind */
static const char *hf_activation(gptc_gelu_kind g) {
    switch (g) {
    case GPTC_GELU_KIND_TANH: return "gelu_new";
    case GPTC_GELU_KIND_ERF: return "gelu";
    case GPTC_GELU_KIND_SIGMOID: return "quick_gelu";
    }
    return "gelu_new";
}

/* ---- metadata helpers */

#define META_MAX 40
typedef struct {
    const char *keys[META_MAX];
    char vals[META_MAX][32];
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

static gptc_status write_hf_config(const char *path, const gptc_model_config *c) {
    cJSON *o = cJSON_CreateObject();
    cJSON *arch = cJSON_AddArrayToObject(o, "architectures");
    cJSON_AddItemToArray(arch, cJSON_CreateString("GPT2LMHeadModel"));
    cJSON_AddStringToObject(o, "model_type", "gpt2");
    cJSON_AddNumberToObject(o, "n_layer", c->layers);
    cJSON_AddNumberToObject(o, "n_head", c->heads);
    cJSON_AddNumberToObject(o, "n_embd", c->channels);
    cJSON_AddNumberToObject(o, "n_positions", c->context);
    cJSON_AddNumberToObject(o, "n_ctx", c->context);
    cJSON_AddNumberToObject(o, "vocab_size", c->vocab);
    cJSON_AddNumberToObject(o, "layer_norm_epsilon", 1e-5);
    cJSON_AddStringToObject(o, "activation_function", hf_activation(c->gelu));
    cJSON_AddBoolToObject(o, "tie_word_embeddings", 1);
    char *text = cJSON_Print(o);
    cJSON_Delete(o);
    if (!text) return gptc_fail(GPTC_ERR_NOMEM, "%s: cannot format config", path);
    const void *parts[1] = {text};
    size_t lens[1] = {strlen(text)};
    gptc_status st = gptc_file_write_atomic(path, parts, lens, 1);
    free(text);
    return st;
}

/* tensors of the model (prefix "") or of a moment buffer (prefix "exp_avg." ...) as entries */
static void fill_entries(const gptc_model *m, const float *base, const char *prefix, char (*names)[64],
                         gptc_st_entry *e) {
    for (int i = 0; i < m->ntensors; i++) {
        const gptc_tensor_desc *d = &m->tensors[i];
        snprintf(names[i], 64, "%s%s", prefix, d->name);
        e[i] = (gptc_st_entry){.name = names[i], .dtype = GPTC_F32, .ndim = d->ndim, .data = base + d->offset};
        e[i].shape[0] = d->shape[0];
        e[i].shape[1] = d->shape[1];
    }
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

gptc_status gptc_ckpt_save(const char *dir, const gptc_model *m, const float *mom, const float *vel,
                           const gptc_trainer_state *s, int keep, char *written, size_t cap) {
    char tmp[4096], final[4096], path[4096];
    gptc_status st = gptc_mkdir_p(dir);
    if (st) return st;
    snprintf(tmp, sizeof tmp, "%s/.tmp-step-%08d-%d", dir, s->step, (int)getpid());
    snprintf(final, sizeof final, "%s/step-%08d", dir, s->step);
    gptc_remove_tree(tmp);
    if ((st = gptc_mkdir_p(tmp))) return st;

    int n = m->ntensors;
    char(*names)[64] = malloc(sizeof *names * n * 2);
    gptc_st_entry *e = malloc(sizeof *e * n * 2);
    if (!names || !e) {
        st = gptc_fail(GPTC_ERR_NOMEM, "%s: out of memory", final);
        goto done;
    }
    meta_list ml = {0};
    meta_config(&ml, &m->cfg, s->tokenizer);
    fill_entries(m, m->params, "", names, e);
    snprintf(path, sizeof path, "%s/" MODEL_FILE, tmp);
    if ((st = gptc_st_write(path, e, n, ml.keys, ml.vptr, ml.n))) goto done;
    snprintf(path, sizeof path, "%s/" CONFIG_FILE, tmp);
    if ((st = write_hf_config(path, &m->cfg))) goto done;
    if (mom && vel) {
        meta_list ol = {0};
        meta_config(&ol, &m->cfg, s->tokenizer);
        meta_add(&ol, "gptc.step", "%d", s->step);
        meta_add(&ol, "gptc.seed", "%" PRIu64, s->seed);
        meta_add(&ol, "gptc.rng", "%" PRIu64, s->rng);
        meta_add(&ol, "gptc.loader_epoch", "%" PRIu64, s->loader_epoch);
        meta_add(&ol, "gptc.loader_cursor", "%" PRIu64, s->loader_cursor);
        meta_add(&ol, "gptc.lr", "%.9g", s->lr);
        meta_add(&ol, "gptc.lr_floor", "%.9g", s->lr_floor);
        meta_add(&ol, "gptc.warmup", "%d", s->warmup);
        meta_add(&ol, "gptc.steps", "%d", s->steps);
        meta_add(&ol, "gptc.weight_decay", "%.9g", s->weight_decay);
        meta_add(&ol, "gptc.beta1", "%.9g", s->beta1);
        meta_add(&ol, "gptc.beta2", "%.9g", s->beta2);
        meta_add(&ol, "gptc.eps", "%.9g", s->eps);
        meta_add(&ol, "gptc.clip", "%.9g", s->clip);
        meta_add(&ol, "gptc.batch", "%d", s->batch);
        meta_add(&ol, "gptc.seq", "%d", s->seq);
        meta_add(&ol, "gptc.total_batch", "%ld", s->total_batch);
        fill_entries(m, mom, "exp_avg.", names, e);
        fill_entries(m, vel, "exp_avg_sq.", names + n, e + n);
        snprintf(path, sizeof path, "%s/" OPTIM_FILE, tmp);
        if ((st = gptc_st_write(path, e, 2 * n, ol.keys, ol.vptr, ol.n))) goto done;
    }
    if ((st = gptc_fsync_dir(tmp))) goto done;
    /* replace an existing folder of the same step (a re-save after a resume) */
    if (gptc_is_dir(final)) {
        char old[4200];
        snprintf(old, sizeof old, "%s.old-%d", final, (int)getpid());
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
    char *text = NULL;
    size_t len = 0;
    gptc_status st = gptc_file_read_all(path, &text, &len);
    if (st) return st;
    cJSON *o = len ? cJSON_ParseWithLength(text, len) : NULL;
    gptc_free(text);
    if (!cJSON_IsObject(o)) {
        cJSON_Delete(o);
        return gptc_fail(GPTC_ERR_FORMAT, "%s: %s; the checkpoint folder is damaged: use another checkpoint",
                         path, len ? "not a JSON object" : "file is empty");
    }
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
    char path[4096];
    snprintf(path, sizeof path, "%s/" MODEL_FILE, step_dir);
    gptc_st_file f = {0};
    gptc_status st = gptc_st_open(&f, path);
    if (st) return st;
    if ((st = meta_int(&f, "gptc.layers", &cfg->layers)) || (st = meta_int(&f, "gptc.heads", &cfg->heads)) ||
        (st = meta_int(&f, "gptc.channels", &cfg->channels)) || (st = meta_int(&f, "gptc.context", &cfg->context)) ||
        (st = meta_int(&f, "gptc.vocab", &cfg->vocab)))
        goto done;
    /* checkpoints written before the form was recorded are GPT-2's tanh form */
    const char *gelu = gptc_st_meta(&f, "gptc.gelu");
    cfg->gelu = GPTC_GELU_KIND_TANH;
    if (gelu && gptc_gelu_from_name(gelu, &cfg->gelu) != GPTC_OK) {
        st = gptc_fail(GPTC_ERR_FORMAT, "%s: metadata gptc.gelu=\"%s\" is not a GELU form (tanh, erf or sigmoid)", path, gelu);
        goto done;
    }
    if ((st = gptc_model_config_check(cfg))) {
        st = gptc_fail_prefix(GPTC_ERR_FORMAT, "%s: bad model config in metadata", path);
        goto done;
    }
    /* the metadata must describe the tensors the file holds: a lying shape would otherwise size the
     * model (and its allocation) before any tensor is compared */
    size_t floats = 0;
    for (int i = 0; i < f.ntensors; i++) floats += f.tensors[i].dtype == GPTC_F32 ? f.tensors[i].numel : 0;
    if (floats != gptc_model_num_params(cfg)) {
        st = gptc_fail(GPTC_ERR_FORMAT,
                       "%s: metadata describes layers=%d heads=%d channels=%d context=%d vocab=%d (%zu parameters) "
                       "but the file holds %zu F32 values; the file is corrupt or was edited: use another checkpoint",
                       path, cfg->layers, cfg->heads, cfg->channels, cfg->context, cfg->vocab,
                       gptc_model_num_params(cfg), floats);
        goto done;
    }
    if ((st = check_hf_config(step_dir, cfg))) goto done;
    if (tokenizer) {
        const char *t = gptc_st_meta(&f, "gptc.tokenizer");
        snprintf(tokenizer, cap, "%s", t ? t : "");
    }
done:
    gptc_st_close(&f);
    return st;
}

gptc_status gptc_ckpt_find(const char *dir, char *path, size_t cap, bool *found) {
    *found = false;
    char probe[4096];
    snprintf(probe, sizeof probe, "%s/" MODEL_FILE, dir);
    if (gptc_is_file(probe)) {
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
            snprintf(probe, sizeof probe, "%s/" OPTIM_FILE, cand);
            gptc_st_file f = {0};
            if (gptc_is_file(probe) && (st = gptc_st_open(&f, probe)) != GPTC_OK) {
                why[nwhy++] = strdup(gptc_last_error());
                continue;
            }
            gptc_st_close(&f);
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
                       "%s: %s: %s; move the damaged folder%s away to start afresh, or use another --ckpt folder", dir,
                       which, why[0] ? why[0] : "damaged", n > 1 ? "s" : "");
    }
    for (int i = 0; i < nwhy; i++) free(why[i]);
    free(why);
    free(steps);
    return st;
}

/* copies the part inside floats [lo, hi) of the arena of every tensor of m from f (names with
 * prefix) into base (base[0] is float lo), checking dtype and shape */
static gptc_status load_tensors(const gptc_st_file *f, const gptc_model *m, const char *prefix, float *base, size_t lo,
                                size_t hi) {
    for (int i = 0; i < m->ntensors; i++) {
        const gptc_tensor_desc *d = &m->tensors[i];
        char name[96];
        snprintf(name, sizeof name, "%s%s", prefix, d->name);
        const gptc_st_tensor *t = gptc_st_find(f, name);
        if (!t) return gptc_fail(GPTC_ERR_FORMAT, "%s: tensor %s missing; not a checkpoint of this model", f->path, name);
        bool same = t->dtype == GPTC_F32 && t->ndim == d->ndim && t->shape[0] == d->shape[0] &&
                    (d->ndim == 1 || t->shape[1] == d->shape[1]);
        if (!same) {
            char have[160], need[64];
            size_t k = (size_t)snprintf(have, sizeof have, "%s [", gptc_dtype_name(t->dtype));
            for (int j = 0; j < t->ndim && k < sizeof have; j++)
                k += (size_t)snprintf(have + k, sizeof have - k, "%s%" PRId64, j ? ", " : "", t->shape[j]);
            if (k < sizeof have) snprintf(have + k, sizeof have - k, "]");
            if (d->ndim > 1) snprintf(need, sizeof need, "F32 [%" PRId64 ", %" PRId64 "]", d->shape[0], d->shape[1]);
            else snprintf(need, sizeof need, "F32 [%" PRId64 "]", d->shape[0]);
            return gptc_fail(GPTC_ERR_STATE, "%s: tensor %s is %s, the model needs %s; not a checkpoint of this model",
                             f->path, name, have, need);
        }
        size_t a = d->offset > lo ? d->offset : lo, b = d->offset + d->numel < hi ? d->offset + d->numel : hi;
        if (a < b) memcpy(base + (a - lo), (const float *)t->data + (a - d->offset), (b - a) * sizeof(float));
    }
    return GPTC_OK;
}

static gptc_status check_same_config(const char *path, const gptc_model_config *a, const gptc_model_config *b) {
    if (a->layers == b->layers && a->heads == b->heads && a->channels == b->channels && a->context == b->context &&
        a->vocab == b->vocab) {
        if (a->gelu == b->gelu) return GPTC_OK;
        return gptc_fail(GPTC_ERR_STATE, "%s: checkpoint was trained with --gelu %s but the model uses --gelu %s; use "
                         "--gelu %s or another --ckpt folder",
                         path, gptc_gelu_name(a->gelu), gptc_gelu_name(b->gelu), gptc_gelu_name(a->gelu));
    }
    return gptc_fail(GPTC_ERR_STATE,
                     "%s: checkpoint is layers=%d heads=%d channels=%d context=%d vocab=%d but the run asks for "
                     "layers=%d heads=%d channels=%d context=%d vocab=%d; use matching flags or another --ckpt folder",
                     path, a->layers, a->heads, a->channels, a->context, a->vocab, b->layers, b->heads, b->channels,
                     b->context, b->vocab);
}

gptc_status gptc_ckpt_load(const char *step_dir, gptc_model *m, float *mom, float *vel, gptc_trainer_state *s) {
    return gptc_ckpt_load_range(step_dir, m, mom, vel, 0, m->num_floats, s);
}

gptc_status gptc_ckpt_load_range(const char *step_dir, gptc_model *m, float *mom, float *vel, size_t lo, size_t hi,
                                 gptc_trainer_state *s) {
    char path[4096];
    gptc_model_config cfg;
    char tok[32];
    gptc_status st = gptc_ckpt_read_config(step_dir, &cfg, tok, sizeof tok);
    if (st) return st;
    if ((st = check_same_config(step_dir, &cfg, &m->cfg))) return st;
    snprintf(path, sizeof path, "%s/" MODEL_FILE, step_dir);
    gptc_st_file f = {0};
    if ((st = gptc_st_open(&f, path))) return st;
    memset(m->params, 0, m->num_floats * sizeof(float));
    st = load_tensors(&f, m, "", m->params, 0, m->num_floats);
    gptc_st_close(&f);
    if (st || !mom) return st;
    snprintf(path, sizeof path, "%s/" OPTIM_FILE, step_dir);
    if ((st = gptc_st_open(&f, path))) return st;
    memset(mom, 0, (hi - lo) * sizeof(float));
    memset(vel, 0, (hi - lo) * sizeof(float));
    if ((st = load_tensors(&f, m, "exp_avg.", mom, lo, hi)) || (st = load_tensors(&f, m, "exp_avg_sq.", vel, lo, hi)))
        goto done;
    memset(s, 0, sizeof *s);
    if ((st = meta_int(&f, "gptc.step", &s->step)) || (st = meta_u64(&f, "gptc.seed", &s->seed)) ||
        (st = meta_u64(&f, "gptc.rng", &s->rng)) || (st = meta_u64(&f, "gptc.loader_epoch", &s->loader_epoch)) ||
        (st = meta_u64(&f, "gptc.loader_cursor", &s->loader_cursor)))
        goto done;
    uint64_t total = 0;
    if ((st = meta_float(&f, "gptc.lr", &s->lr)) || (st = meta_float(&f, "gptc.lr_floor", &s->lr_floor)) ||
        (st = meta_int(&f, "gptc.warmup", &s->warmup)) || (st = meta_int(&f, "gptc.steps", &s->steps)) ||
        (st = meta_float(&f, "gptc.weight_decay", &s->weight_decay)) || (st = meta_float(&f, "gptc.beta1", &s->beta1)) ||
        (st = meta_float(&f, "gptc.beta2", &s->beta2)) || (st = meta_float(&f, "gptc.eps", &s->eps)) ||
        (st = meta_float(&f, "gptc.clip", &s->clip)) || (st = meta_int(&f, "gptc.batch", &s->batch)) ||
        (st = meta_int(&f, "gptc.seq", &s->seq)) || (st = meta_u64(&f, "gptc.total_batch", &total)))
        goto done;
    s->total_batch = (long)total;
    snprintf(s->tokenizer, sizeof s->tokenizer, "%s", tok);
done:
    gptc_st_close(&f);
    return st;
}
