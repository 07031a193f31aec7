/* adapters.c — LoRA adapters on disk in PEFT's layout, next to the base weights:
 *   DIR/adapter_model.safetensors  base_model.model.transformer.h.N.<module>.lora_A.weight (r, in) and
 *                                  .lora_B.weight (out, r), F32
 *   DIR/adapter_config.json        peft_type LORA, r, lora_alpha, target_modules, fan_in_fan_out true (GPT-2's
 *                                  Conv1D), lora_dropout, bias "none", task_type CAUSAL_LM
 * so the folder is what PEFT's PeftModel.from_pretrained reads. Reading them: into a model's attached
 * adapters (training resumes or goes on), or folded into its weights (sample, eval, export --merge-lora,
 * and --init without --lora). The model side (the adapters' table, attaching, merging) is model/lora.c. */
#include "train/weights.h"
#include "io/io.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ADAPTER_FILE "adapter_model.safetensors"
#define ADAPTER_CONFIG "adapter_config.json"

/* a PEFT target module name as site bits: PEFT matches a module whose name ends with "." + target, so
 * "c_proj" adapts both projections */
static unsigned peft_target_bits(const char *t) {
    unsigned bits = 0;
    for (int s = 0; s < GPTC_LORA_SITES; s++) {
        const char *mod = gptc_lora_site_module(s), *leaf = strchr(mod, '.') + 1;
        size_t n = strlen(t), m = strlen(mod);
        bool ends = n <= m && !strcmp(mod + m - n, t) && (n == m || mod[m - n - 1] == '.');
        if (ends || !strcmp(t, leaf)) bits |= 1u << s;
    }
    return bits;
}

/* What is wrong with a parsed adapter_config.json, or NULL when nothing is (a's rank, alpha and targets set). */
static const char *read_config(const cJSON *o, gptc_adapters_info *a) {
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(o, "peft_type");
    const cJSON *r = cJSON_GetObjectItemCaseSensitive(o, "r");
    const cJSON *alpha = cJSON_GetObjectItemCaseSensitive(o, "lora_alpha");
    const cJSON *targets = cJSON_GetObjectItemCaseSensitive(o, "target_modules");
    if (!cJSON_IsString(type) || strcmp(type->valuestring, "LORA") != 0) return "peft_type is not \"LORA\"";
    if (!cJSON_IsNumber(r) || r->valuedouble < 1 || r->valuedouble > 65536 || r->valuedouble != (int)r->valuedouble)
        return "r is not a positive integer";
    if (!cJSON_IsNumber(alpha) || !(alpha->valuedouble > 0)) return "lora_alpha is not a positive number";
    if (cJSON_IsString(targets)) a->targets = peft_target_bits(targets->valuestring);
    else if (!cJSON_IsArray(targets)) return "target_modules is not a list of module names";
    const cJSON *e;
    cJSON_ArrayForEach(e, targets) { /* a string has no elements */
        unsigned bits = cJSON_IsString(e) ? peft_target_bits(e->valuestring) : 0;
        if (!bits)
            return "target_modules names a module GPT-2's blocks do not have (gptc adapts c_attn, attn.c_proj, c_fc, "
                   "mlp.c_proj)";
        a->targets |= bits;
    }
    if (!a->targets) return "target_modules is empty";
    a->rank = (int)r->valuedouble;
    a->alpha = (float)alpha->valuedouble;
    return NULL;
}

gptc_status gptc_adapters_probe(const char *dir, gptc_adapters_info *a) {
    memset(a, 0, sizeof *a);
    char path[4200];
    snprintf(path, sizeof path, "%s/" ADAPTER_CONFIG, dir);
    if (!gptc_is_file(path)) return GPTC_OK;
    snprintf(a->dir, sizeof a->dir, "%s", dir);
    cJSON *o;
    const char *why;
    gptc_status st = gptc_json_object_read(path, &o, &why);
    if (st) return st;
    if (!why) why = read_config(o, a);
    cJSON_Delete(o);
    if (why)
        return gptc_fail(GPTC_ERR_FORMAT, "%s: %s; the adapter folder is damaged or not PEFT's LoRA: use another, or "
                         "remove the adapter files to use the base weights alone", path, why);
    a->found = true;
    return GPTC_OK;
}

/* Calls fn for every adapter tensor i of a's file (gptc_lora_table's order) as the model of cfg needs it, with the file's data
 * (checked: F32, the shape of the table); GPTC_ERR_FORMAT naming a missing or misshapen one. */
typedef gptc_status (*adapter_fn)(void *user, int i, const gptc_tensor_desc *d, const float *data);
static gptc_status each_adapter(const gptc_adapters_info *a, const gptc_model_config *cfg, adapter_fn fn, void *user) {
    size_t floats;
    int n = gptc_lora_table(cfg, a->rank, a->targets, NULL, &floats);
    gptc_tensor_desc *t = malloc(sizeof *t * (size_t)(n ? n : 1));
    if (!t) return gptc_fail(GPTC_ERR_NOMEM, "out of memory");
    gptc_lora_table(cfg, a->rank, a->targets, t, NULL);
    char path[4200];
    snprintf(path, sizeof path, "%s/" ADAPTER_FILE, a->dir);
    gptc_st_file f = {0};
    gptc_status st = gptc_st_open(&f, path);
    for (int i = 0; i < n && !st; i++) {
        char name[160];
        gptc_lora_peft_name(t[i].name, name, sizeof name);
        const gptc_st_tensor *x = gptc_st_find(&f, name);
        if (!x) {
            st = gptc_fail(GPTC_ERR_FORMAT, "%s: tensor %s missing (adapter_config.json says r=%d on these modules); the "
                           "adapter folder is incomplete: use another", path, name, a->rank);
        } else if (x->dtype != GPTC_F32 || x->ndim != 2 || x->shape[0] != t[i].shape[0] || x->shape[1] != t[i].shape[1]) {
            st = gptc_fail(GPTC_ERR_FORMAT, "%s: tensor %s is %s [%lld, %lld], expected F32 [%lld, %lld] for r=%d; the "
                           "adapter files disagree: use another folder", path, name, gptc_dtype_name(x->dtype),
                           (long long)x->shape[0], (long long)(x->ndim > 1 ? x->shape[1] : 0),
                           (long long)t[i].shape[0], (long long)t[i].shape[1], a->rank);
        } else {
            st = fn(user, i, &t[i], x->data);
            gptc_st_release(&f, x);
        }
    }
    gptc_st_close(&f);
    free(t);
    return st;
}

static gptc_status copy_into(void *user, int i, const gptc_tensor_desc *d, const float *data) {
    gptc_model *m = user;
    memcpy(m->lora->params + d->offset, data, d->numel * sizeof(float));
    return GPTC_OK;
}

gptc_status gptc_adapters_match(const gptc_adapters_info *a, int rank, unsigned targets) {
    if (a->rank == rank && a->targets == targets) return GPTC_OK;
    char have[96], want[96];
    gptc_lora_targets_name(a->targets, have, sizeof have);
    gptc_lora_targets_name(targets, want, sizeof want);
    return gptc_fail(GPTC_ERR_STATE, "%s: holds LoRA adapters of rank %d on %s, but this run asks for 'lora' %d on %s; use "
                     "'lora' %d 'lora_targets' %s to go on training them, or merge them first (gptc export --merge-lora) "
                     "and start new ones from the merged weights", a->dir, a->rank, have, rank, rank ? want : "nothing",
                     a->rank, have);
}

gptc_status gptc_adapters_load(const gptc_adapters_info *a, gptc_model *m) {
    const gptc_lora *lr = m->lora;
    gptc_status st = gptc_adapters_match(a, lr ? lr->rank : 0, lr ? lr->targets : 0);
    if (st) return st;
    m->lora->alpha = a->alpha;
    m->lora->scale = a->alpha / (float)a->rank;
    return each_adapter(a, &m->cfg, copy_into, m);
}

/* folding one pair: a site's A (even i) is kept until its B (odd i) arrives */
typedef struct merge_ctx {
    gptc_model *m;
    const gptc_adapters_info *a;
    float *A;
} merge_ctx;

static gptc_status fold(void *user, int i, const gptc_tensor_desc *d, const float *data) {
    merge_ctx *c = user;
    if (i % 2 == 0) {
        free(c->A);
        if (!(c->A = malloc(d->numel * sizeof(float)))) return gptc_fail(GPTC_ERR_NOMEM, "out of memory");
        memcpy(c->A, data, d->numel * sizeof(float));
        return GPTC_OK;
    }
    int l, s;
    gptc_lora_pair_site(c->a->targets, i / 2, &l, &s);
    gptc_lora_fold_site(c->m, l, s, c->A, data, c->a->rank, (double)c->a->alpha / c->a->rank);
    return GPTC_OK;
}

gptc_status gptc_adapters_merge(const gptc_adapters_info *a, gptc_model *m) {
    merge_ctx c = {m, a, NULL};
    gptc_status st = each_adapter(a, &m->cfg, fold, &c);
    free(c.A);
    if (!st) gptc_model_params_changed(m, 0, m->num_floats);
    return st;
}

gptc_status gptc_adapters_write(const char *dir, const gptc_model *m, const char *base) {
    const gptc_lora *lr = m->lora;
    int n = lr->ntensors;
    gptc_st_entry *e = malloc(sizeof *e * (size_t)n);
    char(*names)[160] = malloc(sizeof *names * (size_t)n);
    gptc_status st = GPTC_OK;
    if (!e || !names) {
        st = gptc_fail(GPTC_ERR_NOMEM, "out of memory");
        goto done;
    }
    m->be.mem->synchronize();
    for (int i = 0; i < n; i++) {
        const gptc_tensor_desc *d = &lr->tensors[i];
        gptc_lora_peft_name(d->name, names[i], sizeof names[i]);
        e[i] = (gptc_st_entry){.name = names[i], .dtype = GPTC_F32, .ndim = 2, .shape = {d->shape[0], d->shape[1]},
                               .data = lr->params + d->offset};
    }
    char path[4200];
    snprintf(path, sizeof path, "%s/" ADAPTER_FILE, dir);
    const char *keys[] = {"format"}, *vals[] = {"pt"};
    if ((st = gptc_st_write(path, e, n, keys, vals, 1))) goto done;
    cJSON *o = cJSON_CreateObject(), *targets = cJSON_AddArrayToObject(o, "target_modules");
    for (int s = 0; s < GPTC_LORA_SITES; s++)
        if (lr->targets & 1u << s) {
            const char *mod = gptc_lora_site_module(s);
            /* PEFT matches by suffix: c_proj alone would take both projections */
            cJSON_AddItemToArray(targets, cJSON_CreateString(s == GPTC_LORA_QKV ? "c_attn" : s == GPTC_LORA_FC ? "c_fc" : mod));
        }
    cJSON_AddStringToObject(o, "peft_type", "LORA");
    cJSON_AddStringToObject(o, "task_type", "CAUSAL_LM");
    cJSON_AddNumberToObject(o, "r", lr->rank);
    cJSON_AddNumberToObject(o, "lora_alpha", lr->alpha);
    cJSON_AddNumberToObject(o, "lora_dropout", 0.0);
    cJSON_AddBoolToObject(o, "fan_in_fan_out", 1);
    cJSON_AddStringToObject(o, "bias", "none");
    cJSON_AddBoolToObject(o, "inference_mode", 1);
    cJSON_AddBoolToObject(o, "use_rslora", 0);
    cJSON_AddStringToObject(o, "base_model_name_or_path", base ? base : "");
    char *text = cJSON_Print(o);
    cJSON_Delete(o);
    if (!text) {
        st = gptc_fail(GPTC_ERR_NOMEM, "out of memory");
        goto done;
    }
    snprintf(path, sizeof path, "%s/" ADAPTER_CONFIG, dir);
    const void *parts[2] = {text, "\n"};
    size_t lens[2] = {strlen(text), 1};
    st = gptc_file_write_atomic(path, parts, lens, 2);
    free(text);
done:
    free(e);
    free(names);
    return st;
}

gptc_status gptc_adapters_copy(const gptc_adapters_info *a, const char *dir) {
    const char *files[] = {ADAPTER_FILE, ADAPTER_CONFIG};
    for (int i = 0; i < 2; i++) {
        char from[4300], to[4300];
        snprintf(from, sizeof from, "%s/%s", a->dir, files[i]);
        snprintf(to, sizeof to, "%s/%s", dir, files[i]);
        gptc_status st = gptc_file_copy(from, to);
        if (st) return st;
    }
    return GPTC_OK;
}
