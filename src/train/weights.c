/* weights.c — reading GPT-2 weights from gptc checkpoints, Hugging Face folders and llm.c files,
 * and writing the latter two (see weights.h). */
#include "train/weights.h"
#include "train/checkpoint.h"
#include "data/data.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define MODEL_FILE "model.safetensors"
#define CONFIG_FILE "config.json"
#define HF_PREFIX "transformer."
#define LLMC_MAGIC 20240326
#define LLMC_V_FP32 3
#define LLMC_V_BF16 5
#define LLMC_HEADER_INTS 256
#define LLMC_VOCAB_MULTIPLE 128
#define GPT2_VOCAB 50257
#define WHAT "a gptc checkpoint, a Hugging Face GPT-2 folder (config.json + model.safetensors) or an llm.c .bin"

const char *gptc_weights_format_name(gptc_weights_format f) {
    switch (f) {
    case GPTC_WEIGHTS_GPTC: return "gptc";
    case GPTC_WEIGHTS_HF: return "hf";
    case GPTC_WEIGHTS_LLMC: return "llmc";
    }
    return "?";
}

/* ---- the GELU form under Hugging Face's names */

static const char *hf_activation(gptc_gelu_kind g) {
    switch (g) {
    case GPTC_GELU_KIND_TANH: return "gelu_new";
    case GPTC_GELU_KIND_ERF: return "gelu";
    case GPTC_GELU_KIND_SIGMOID: return "quick_gelu";
    }
    return "gelu_new";
}

/* Hugging Face's activation_function names for the three forms (gelu_new, gelu_pytorch_tanh and
 * gelu_fast are the same tanh formula); -1 for any other */
static int gelu_from_hf(const char *s) {
    if (!strcmp(s, "gelu_new") || !strcmp(s, "gelu_pytorch_tanh") || !strcmp(s, "gelu_fast")) return GPTC_GELU_KIND_TANH;
    if (!strcmp(s, "gelu")) return GPTC_GELU_KIND_ERF;
    if (!strcmp(s, "quick_gelu")) return GPTC_GELU_KIND_SIGMOID;
    return -1;
}

/* ---- element conversion (sources may be misaligned in foreign files: read through memcpy) */

static float f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ffu, u;
    if (exp == 0x1f) u = sign | 0x7f800000u | (man << 13); /* inf, NaN */
    else if (exp) u = sign | ((exp + 112) << 23) | (man << 13);
    else if (!man) u = sign;
    else { /* subnormal: normalise */
        int e = -1;
        do { man <<= 1; e++; } while (!(man & 0x400u));
        u = sign | ((uint32_t)(112 - e) << 23) | ((man & 0x3ffu) << 13);
    }
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* dst[i] = src element i (dtype F32, BF16 or F16), n elements */
static void to_f32(float *dst, const void *src, gptc_dtype dt, size_t n) {
    const unsigned char *s = src;
    if (dt == GPTC_F32) {
        memcpy(dst, s, n * 4);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        uint16_t h;
        memcpy(&h, s + 2 * i, 2);
        dst[i] = dt == GPTC_BF16 ? gptc_bf16_to_f32(h) : f16_to_f32(h);
    }
}

/* dst (cols,rows) = transpose of src (rows,cols) in dtype dt */
static void to_f32_transposed(float *dst, const void *src, gptc_dtype dt, size_t rows, size_t cols) {
    const unsigned char *s = src;
    size_t es = gptc_dtype_size(dt);
    for (size_t r = 0; r < rows; r++)
        for (size_t c = 0; c < cols; c++) {
            float v;
            to_f32(&v, s + (r * cols + c) * es, dt, 1);
            dst[c * rows + r] = v;
        }
}

/* ---- probing */

static gptc_status meta_int(const gptc_st_file *f, const char *key, int *out) {
    const char *v = gptc_st_meta(f, key);
    char *end;
    if (!v || !*v) return gptc_fail(GPTC_ERR_FORMAT, "%s: metadata %s missing; not a gptc checkpoint", f->path, key);
    errno = 0;
    long x = strtol(v, &end, 10);
    if (*end || errno || x < 0 || x > 1000000000L)
        return gptc_fail(GPTC_ERR_FORMAT, "%s: metadata %s=\"%s\" is not a size", f->path, key, v);
    *out = (int)x;
    return GPTC_OK;
}

/* an integer field of config.json into *out; absent: *out unchanged, *found false */
static gptc_status json_int(const cJSON *o, const char *path, const char *key, int *out, bool *found) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    *found = false;
    if (!v || cJSON_IsNull(v)) return GPTC_OK;
    if (!cJSON_IsNumber(v) || v->valuedouble != (double)(int)v->valuedouble || v->valuedouble < 1)
        return gptc_fail(GPTC_ERR_FORMAT, "%s: \"%s\" is not a positive integer", path, key);
    *out = (int)v->valuedouble;
    *found = true;
    return GPTC_OK;
}

/* the model configuration from a Hugging Face config.json, and the tokenizer its "gptc_tokenizer"
 * names into tok (tokcap bytes; "" when it names none) */
static gptc_status read_hf_config(const char *path, gptc_model_config *cfg, char *tok, size_t tokcap) {
    char *text = NULL;
    size_t len;
    gptc_status st = gptc_file_read_all(path, &text, &len);
    if (st) return st;
    cJSON *o = cJSON_Parse(text);
    gptc_free(text);
    if (!o || !cJSON_IsObject(o)) {
        cJSON_Delete(o);
        return gptc_fail(GPTC_ERR_FORMAT, "%s: not a JSON object; expected Hugging Face's GPT2Config", path);
    }
    bool found;
    const char *need[] = {"n_layer", "n_head", "n_embd", "vocab_size"};
    int *dst[] = {&cfg->layers, &cfg->heads, &cfg->channels, &cfg->vocab};
    for (int i = 0; i < 4; i++) {
        if ((st = json_int(o, path, need[i], dst[i], &found))) goto done;
        if (!found) {
            st = gptc_fail(GPTC_ERR_FORMAT, "%s: \"%s\" missing; expected Hugging Face's GPT2Config", path, need[i]);
            goto done;
        }
    }
    if ((st = json_int(o, path, "n_positions", &cfg->context, &found))) goto done;
    if (!found && ((st = json_int(o, path, "n_ctx", &cfg->context, &found)) || !found)) {
        if (!st) st = gptc_fail(GPTC_ERR_FORMAT, "%s: \"n_positions\" missing; expected Hugging Face's GPT2Config", path);
        goto done;
    }
    const cJSON *mt = cJSON_GetObjectItemCaseSensitive(o, "model_type");
    if (mt && (!cJSON_IsString(mt) || strcmp(mt->valuestring, "gpt2") != 0)) {
        st = gptc_fail(GPTC_ERR_FORMAT, "%s: model_type is %s, gptc reads only gpt2", path,
                       cJSON_IsString(mt) ? mt->valuestring : "not a string");
        goto done;
    }
    int inner = 0;
    if ((st = json_int(o, path, "n_inner", &inner, &found))) goto done;
    if (found && inner != 4 * cfg->channels) {
        st = gptc_fail(GPTC_ERR_FORMAT, "%s: n_inner %d, but gptc's MLP is 4 x n_embd = %d wide", path, inner, 4 * cfg->channels);
        goto done;
    }
    const cJSON *eps = cJSON_GetObjectItemCaseSensitive(o, "layer_norm_epsilon");
    if (eps && (!cJSON_IsNumber(eps) || fabs(eps->valuedouble - 1e-5) > 1e-12)) {
        st = gptc_fail(GPTC_ERR_FORMAT, "%s: layer_norm_epsilon %g, but gptc's LayerNorm uses 1e-5", path,
                       cJSON_IsNumber(eps) ? eps->valuedouble : NAN);
        goto done;
    }
    tok[0] = '\0';
    const cJSON *tn = cJSON_GetObjectItemCaseSensitive(o, "gptc_tokenizer");
    if (tn && (!cJSON_IsString(tn) || !tn->valuestring[0] || strlen(tn->valuestring) >= tokcap)) {
        st = gptc_fail(GPTC_ERR_FORMAT, "%s: gptc_tokenizer is not a tokenizer name (byte or gpt2)", path);
        goto done;
    }
    if (tn) snprintf(tok, tokcap, "%s", tn->valuestring);
    cfg->gelu = GPTC_GELU_KIND_TANH; /* GPT2Config's default, gelu_new */
    const cJSON *act = cJSON_GetObjectItemCaseSensitive(o, "activation_function");
    if (act) {
        int g = cJSON_IsString(act) ? gelu_from_hf(act->valuestring) : -1;
        if (g < 0) {
            st = gptc_fail(GPTC_ERR_FORMAT, "%s: activation_function %s is not one gptc has (gelu_new, gelu, quick_gelu)",
                           path, cJSON_IsString(act) ? act->valuestring : "(not a string)");
            goto done;
        }
        cfg->gelu = (gptc_gelu_kind)g;
    }
done:
    cJSON_Delete(o);
    return st;
}

static const gptc_st_tensor *find_hf(const gptc_st_file *f, const char *name) {
    const gptc_st_tensor *t = gptc_st_find(f, name);
    if (!t) {
        char full[96];
        snprintf(full, sizeof full, HF_PREFIX "%s", name);
        t = gptc_st_find(f, full);
    }
    return t;
}

static gptc_status probe_safetensors(const char *file, gptc_weights_info *info) {
    gptc_st_file f = {0};
    gptc_status st = gptc_st_open_header(&f, file); /* gptc_weights_load verifies the data */
    if (st) return st;
    gptc_model_config *cfg = &info->cfg;
    const char *tok = gptc_st_meta(&f, "gptc.tokenizer");
    char cfg_tok[32] = "";
    if (gptc_st_meta(&f, "gptc.layers")) {
        info->format = GPTC_WEIGHTS_GPTC;
        if ((st = meta_int(&f, "gptc.layers", &cfg->layers)) || (st = meta_int(&f, "gptc.heads", &cfg->heads)) ||
            (st = meta_int(&f, "gptc.channels", &cfg->channels)) || (st = meta_int(&f, "gptc.context", &cfg->context)) ||
            (st = meta_int(&f, "gptc.vocab", &cfg->vocab)))
            goto done;
        /* checkpoints written before the form was recorded are GPT-2's tanh form */
        const char *gelu = gptc_st_meta(&f, "gptc.gelu");
        cfg->gelu = GPTC_GELU_KIND_TANH;
        if (gelu && gptc_gelu_from_name(gelu, &cfg->gelu) != GPTC_OK) {
            st = gptc_fail(GPTC_ERR_FORMAT, "%s: metadata gptc.gelu=\"%s\" is not a GELU form (tanh, erf or sigmoid)", file, gelu);
            goto done;
        }
    } else {
        info->format = GPTC_WEIGHTS_HF;
        char dir[4096], cpath[4200];
        snprintf(dir, sizeof dir, "%s", file);
        char *slash = strrchr(dir, '/');
        if (slash) *slash = 0;
        else snprintf(dir, sizeof dir, ".");
        snprintf(cpath, sizeof cpath, "%s/" CONFIG_FILE, dir);
        if (!gptc_is_file(cpath)) {
            st = gptc_fail(GPTC_ERR_IO, "%s: no gptc metadata and no " CONFIG_FILE " beside it; a Hugging Face GPT-2 "
                           "folder holds both", file);
            goto done;
        }
        if ((st = read_hf_config(cpath, cfg, cfg_tok, sizeof cfg_tok))) goto done;
        if (!tok && cfg_tok[0]) tok = cfg_tok; /* a folder exported by gptc names its tokenizer there too */
    }
    if ((st = gptc_model_config_check(cfg))) {
        st = gptc_fail_prefix(GPTC_ERR_FORMAT, "%s: bad model config", file);
        goto done;
    }
    const gptc_st_tensor *wte = find_hf(&f, "wte.weight");
    if (!wte) {
        st = gptc_fail(GPTC_ERR_FORMAT, "%s: no wte.weight tensor; not GPT-2 weights", file);
        goto done;
    }
    info->dtype = wte->dtype;
    snprintf(info->tokenizer, sizeof info->tokenizer, "%s", tok ? tok : cfg->vocab == GPT2_VOCAB ? "gpt2" : "");
done:
    gptc_st_close(&f);
    return st;
}

/* parameters of an llm.c file with this header (wte padded to Vp rows) */
static size_t llmc_numel(const gptc_model_config *c, size_t Vp) {
    size_t C = c->channels;
    return gptc_model_num_params(c) + (Vp - (size_t)c->vocab) * C;
}

static gptc_status probe_llmc(const char *file, const int32_t *h, size_t size, gptc_weights_info *info) {
    if (h[1] != LLMC_V_FP32 && h[1] != LLMC_V_BF16)
        return gptc_fail(GPTC_ERR_FORMAT, "%s: llm.c checkpoint version %d; gptc reads versions 3 (fp32) and 5 (bf16) "
                         "with a padded vocabulary, as llm.c's train_gpt2.py writes them", file, h[1]);
    gptc_model_config *c = &info->cfg;
    *c = (gptc_model_config){.layers = h[4], .heads = h[5], .channels = h[6], .context = h[2], .vocab = h[3],
                             .gelu = GPTC_GELU_KIND_TANH};
    int Vp = h[7];
    if (h[2] <= 0 || h[3] <= 0 || h[4] <= 0 || h[5] <= 0 || h[6] <= 0 || Vp < h[3] || gptc_model_config_check(c))
        return gptc_fail(GPTC_ERR_FORMAT, "%s: llm.c header maxT=%d V=%d L=%d NH=%d C=%d Vp=%d is not a GPT-2; the "
                         "file is corrupt", file, h[2], h[3], h[4], h[5], h[6], Vp);
    info->format = GPTC_WEIGHTS_LLMC;
    info->dtype = h[1] == LLMC_V_FP32 ? GPTC_F32 : GPTC_BF16;
    size_t want = LLMC_HEADER_INTS * 4 + llmc_numel(c, (size_t)Vp) * gptc_dtype_size(info->dtype);
    if (size != want)
        return gptc_fail(GPTC_ERR_FORMAT, "%s: %zu bytes, but its llm.c header (version %d, L=%d C=%d V=%d Vp=%d "
                         "maxT=%d) needs %zu; the file is truncated or damaged", file, size, h[1], h[4], h[6], h[3], Vp, h[2], want);
    snprintf(info->tokenizer, sizeof info->tokenizer, "%s", c->vocab == GPT2_VOCAB ? "gpt2" : "");
    return GPTC_OK;
}

gptc_status gptc_weights_probe(const char *path, gptc_weights_info *info) {
    memset(info, 0, sizeof *info);
    if (gptc_is_dir(path)) {
        snprintf(info->file, sizeof info->file, "%s/" MODEL_FILE, path);
        if (!gptc_is_file(info->file))
            return gptc_fail(GPTC_ERR_IO, "%s: no " MODEL_FILE " in the folder; expected " WHAT, path);
        gptc_status st = probe_safetensors(info->file, info);
        return st ? st : gptc_adapters_probe(path, &info->adapters);
    }
    snprintf(info->file, sizeof info->file, "%s", path);
    int fd = open(path, O_RDONLY);
    if (fd < 0) return gptc_fail(GPTC_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat sb;
    int32_t h[LLMC_HEADER_INTS] = {0};
    ssize_t got = fstat(fd, &sb) == 0 ? pread(fd, h, sizeof h, 0) : -1;
    close(fd);
    if (got < 0) return gptc_fail(GPTC_ERR_IO, "%s: cannot read: %s", path, strerror(errno));
    if (got >= 8 && h[0] == LLMC_MAGIC) {
        if (got < (ssize_t)sizeof h) return gptc_fail(GPTC_ERR_FORMAT, "%s: llm.c header cut short (%zd bytes)", path, got);
        return probe_llmc(path, h, (size_t)sb.st_size, info);
    }
    size_t n = strlen(path);
    if (n > 12 && strcmp(path + n - 12, ".safetensors") == 0) return probe_safetensors(path, info);
    return gptc_fail(GPTC_ERR_FORMAT, "%s: neither an llm.c checkpoint (magic %d) nor a .safetensors file; expected " WHAT,
                     path, LLMC_MAGIC);
}

gptc_status gptc_weights_find(const char *path, gptc_weights_info *info) {
    char dir[4096];
    bool found;
    gptc_status st = gptc_ckpt_find_weights(path, dir, sizeof dir, &found);
    if (st) return st;
    if (!found) return gptc_fail(GPTC_ERR_IO, "%s: no weights found; expected " WHAT, path);
    return gptc_weights_probe(dir, info);
}

/* ---- loading */

static gptc_status check_same_config(const char *path, const gptc_model_config *a, const gptc_model_config *b) {
    if (a->layers == b->layers && a->heads == b->heads && a->channels == b->channels && a->context == b->context &&
        a->vocab == b->vocab) {
        if (a->gelu == b->gelu) return GPTC_OK;
        return gptc_fail(GPTC_ERR_STATE, "%s: the weights are for 'model.gelu' %s but the model uses 'model.gelu' %s; use "
                         "'model.gelu' %s or other weights",
                         path, gptc_gelu_name(a->gelu), gptc_gelu_name(b->gelu), gptc_gelu_name(a->gelu));
    }
    return gptc_fail(GPTC_ERR_STATE,
                     "%s: the weights are layers=%d heads=%d channels=%d context=%d vocab=%d but the model is "
                     "layers=%d heads=%d channels=%d context=%d vocab=%d; use matching flags or other weights",
                     path, a->layers, a->heads, a->channels, a->context, a->vocab, b->layers, b->heads, b->channels,
                     b->context, b->vocab);
}

/* a tensor neither the model nor a known buffer */
static bool is_buffer(const char *name) {
    size_t n = strlen(name);
    return (n > 10 && !strcmp(name + n - 10, ".attn.bias")) || (n > 17 && !strcmp(name + n - 17, ".attn.masked_bias"));
}

static gptc_status load_safetensors(const gptc_weights_info *info, gptc_model *m) {
    gptc_st_file f = {0};
    gptc_status st = gptc_st_open(&f, info->file);
    if (st) return st;
    bool strict = info->format == GPTC_WEIGHTS_GPTC;
    for (int i = 0; i < m->ntensors; i++) {
        const gptc_tensor_desc *d = &m->tensors[i];
        const gptc_st_tensor *t = strict ? gptc_st_find(&f, d->name) : find_hf(&f, d->name);
        if (!t) {
            st = gptc_fail(GPTC_ERR_FORMAT, "%s: tensor %s missing; not weights of this model", f.path, d->name);
            goto done;
        }
        bool dt_ok = t->dtype == GPTC_F32 || t->dtype == GPTC_BF16 || t->dtype == GPTC_F16;
        bool same = dt_ok && t->ndim == d->ndim && t->shape[0] == d->shape[0] && (d->ndim == 1 || t->shape[1] == d->shape[1]);
        if (!same) {
            st = gptc_fail(GPTC_ERR_STATE, "%s: tensor %s is %s %dD [%" PRId64 ", %" PRId64 "], the model needs %s [%" PRId64 ", %" PRId64 "]",
                           f.path, t->name, gptc_dtype_name(t->dtype), t->ndim, t->shape[0], t->ndim > 1 ? t->shape[1] : 0,
                           "F32, BF16 or F16", d->shape[0], d->ndim > 1 ? d->shape[1] : 0);
            goto done;
        }
        to_f32(m->params + d->offset, t->data, t->dtype, d->numel);
        gptc_st_release(&f, t); /* copied: its pages need not stay resident */
    }
    /* GPT2LMHeadModel ties lm_head to wte; a file may still store it */
    const gptc_st_tensor *head = gptc_st_find(&f, "lm_head.weight"), *wte = find_hf(&f, "wte.weight");
    if (head) {
        if (head->dtype != wte->dtype || head->nbytes != wte->nbytes || memcmp(head->data, wte->data, wte->nbytes) != 0) {
            st = gptc_fail(GPTC_ERR_FORMAT, "%s: lm_head.weight differs from wte.weight (an untied output layer); "
                           "gptc's GPT-2 ties them", f.path);
            goto done;
        }
    }
    int unused = 0;
    const char *first = NULL;
    for (int i = 0; i < f.ntensors; i++) {
        const char *name = f.tensors[i].name;
        if (!strict && !strncmp(name, HF_PREFIX, strlen(HF_PREFIX))) name += strlen(HF_PREFIX);
        bool known = is_buffer(name) || !strcmp(name, "lm_head.weight");
        for (int j = 0; j < m->ntensors && !known; j++) known = !strcmp(name, m->tensors[j].name);
        if (!known && !unused++) first = f.tensors[i].name;
    }
    if (unused > 0)
        gptc_warn("%s: %d tensor%s that GPT-2 does not have left unused (%s%s)", f.path, unused, unused > 1 ? "s" : "",
                  first, unused > 1 ? ", ..." : "");
done:
    gptc_st_close(&f);
    return st;
}

/* the tensors of m in llm.c's order: wte, wpe, each layer tensor kind over all layers, ln_f */
static int llmc_order(const gptc_model *m, int k) {
    int L = m->cfg.layers, nl = L * GPTC_LAYER_TENSORS;
    if (k < 2) return k;
    if (k >= 2 + nl) return k;
    int j = (k - 2) / L, l = (k - 2) % L;
    return 2 + l * GPTC_LAYER_TENSORS + j;
}

static gptc_status load_llmc(const gptc_weights_info *info, gptc_model *m) {
    int fd = open(info->file, O_RDONLY);
    if (fd < 0) return gptc_fail(GPTC_ERR_IO, "%s: cannot open: %s", info->file, strerror(errno));
    struct stat sb;
    void *map = fstat(fd, &sb) == 0 ? mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_PRIVATE, fd, 0) : MAP_FAILED;
    close(fd);
    if (map == MAP_FAILED) return gptc_fail(GPTC_ERR_IO, "%s: cannot map: %s", info->file, strerror(errno));
    if ((size_t)sb.st_size < LLMC_HEADER_INTS * 4) { /* the file changed since it was probed */
        munmap(map, (size_t)sb.st_size);
        return gptc_fail(GPTC_ERR_FORMAT, "%s: llm.c header cut short (%zu bytes)", info->file, (size_t)sb.st_size);
    }
    gptc_weights_info again;
    gptc_status st = probe_llmc(info->file, map, (size_t)sb.st_size, &again); /* the file may have changed */
    if (!st) st = check_same_config(info->file, &again.cfg, &m->cfg);
    if (st) goto done;
    size_t es = gptc_dtype_size(again.dtype), C = (size_t)m->cfg.channels, Vp = (size_t)((const int32_t *)map)[7];
    const unsigned char *p = (const unsigned char *)map + LLMC_HEADER_INTS * 4;
    for (int k = 0; k < m->ntensors; k++) {
        const gptc_tensor_desc *d = &m->tensors[llmc_order(m, k)];
        if (d->ndim == 2 && k >= 2) /* llm.c stores nn.Linear's [out, in]; the model holds [in, out] */
            to_f32_transposed(m->params + d->offset, p, again.dtype, (size_t)d->shape[1], (size_t)d->shape[0]);
        else
            to_f32(m->params + d->offset, p, again.dtype, d->numel);
        size_t bytes = (k == 0 ? Vp * C : d->numel) * es; /* wte's padding rows are skipped */
        gptc_mapped_release(map, (size_t)sb.st_size, p, bytes); /* copied: its pages need not stay resident */
        p += bytes;
    }
done:
    munmap(map, (size_t)sb.st_size);
    return st;
}

gptc_status gptc_weights_load(const gptc_weights_info *info, gptc_model *m) {
    gptc_status st = check_same_config(info->file, &info->cfg, &m->cfg);
    if (st) return st;
    memset(m->params, 0, m->num_floats * sizeof(float));
    st = info->format == GPTC_WEIGHTS_LLMC ? load_llmc(info, m) : load_safetensors(info, m);
    if (st || !info->adapters.found || info->base_only) return st;
    return m->lora ? gptc_adapters_load(&info->adapters, m) : gptc_adapters_merge(&info->adapters, m);
}

/* ---- writing */

/* End-of-text of the tokenizers gptc has (data/tokenizers.h: byte's is 256, after the 256 bytes;
 * GPT-2's the last of its 50257 ids); -1 for none. */
static int tokenizer_eot(const char *name) {
    if (!name) return -1;
    if (!strcmp(name, "byte")) return 256;
    if (!strcmp(name, "gpt2")) return GPT2_VOCAB - 1;
    return -1;
}

static gptc_status write_json(const char *path, cJSON *o) {
    char *text = o ? cJSON_Print(o) : NULL;
    cJSON_Delete(o);
    if (!text) return gptc_fail(GPTC_ERR_NOMEM, "%s: cannot format the JSON", path);
    const void *parts[2] = {text, "\n"};
    size_t lens[2] = {strlen(text), 1};
    gptc_status st = gptc_file_write_atomic(path, parts, lens, 2);
    free(text);
    return st;
}

static gptc_status write_hf_config(const char *path, const gptc_model_config *c, const char *tokenizer) {
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
    int eot = tokenizer_eot(tokenizer);
    if (eot >= 0 && eot < c->vocab) {
        cJSON_AddNumberToObject(o, "bos_token_id", eot);
        cJSON_AddNumberToObject(o, "eos_token_id", eot);
    }
    /* the tokenizer, for readers that do not see the safetensors metadata (a byte-level model has
     * no Hugging Face tokenizer files: this is the one place that says what its ids are) */
    if (tokenizer && *tokenizer) cJSON_AddStringToObject(o, "gptc_tokenizer", tokenizer);
    return write_json(path, o);
}

static int by_entry_name(const void *a, const void *b) {
    return strcmp(((const gptc_st_entry *)a)->name, ((const gptc_st_entry *)b)->name);
}

gptc_status gptc_weights_write_hf(const char *dir, const gptc_model *m, const char *tokenizer, gptc_dtype dtype,
                                  bool by_name) {
    if (dtype != GPTC_F32 && dtype != GPTC_BF16)
        return gptc_fail(GPTC_ERR_ARG, "%s: weights are written as F32 or BF16, not %s", dir, gptc_dtype_name(dtype));
    const gptc_model_config *c = &m->cfg;
    enum { NMETA = 8 };
    char vals[NMETA][32];
    const char *keys[NMETA] = {"format", "gptc.layers", "gptc.heads", "gptc.channels", "gptc.context", "gptc.vocab",
                               "gptc.gelu", "gptc.tokenizer"};
    snprintf(vals[0], 32, "pt");
    snprintf(vals[1], 32, "%d", c->layers);
    snprintf(vals[2], 32, "%d", c->heads);
    snprintf(vals[3], 32, "%d", c->channels);
    snprintf(vals[4], 32, "%d", c->context);
    snprintf(vals[5], 32, "%d", c->vocab);
    snprintf(vals[6], 32, "%s", gptc_gelu_name(c->gelu));
    snprintf(vals[7], 32, "%s", tokenizer ? tokenizer : "");
    const char *vptr[NMETA];
    for (int i = 0; i < NMETA; i++) vptr[i] = vals[i];

    gptc_st_entry *e = malloc(sizeof *e * m->ntensors);
    uint16_t *half = dtype == GPTC_BF16 ? gptc_alloc(m->num_floats * sizeof(uint16_t), "bf16 export") : NULL;
    gptc_status st = GPTC_OK;
    if (!e || (dtype == GPTC_BF16 && !half)) {
        st = gptc_fail(GPTC_ERR_NOMEM, "%s: out of memory", dir);
        goto done;
    }
    for (int i = 0; i < m->ntensors; i++) {
        const gptc_tensor_desc *d = &m->tensors[i];
        const void *data = m->params + d->offset;
        if (half) {
            for (size_t j = 0; j < d->numel; j++) half[d->offset + j] = gptc_f32_to_bf16(m->params[d->offset + j]);
            data = half + d->offset;
        }
        e[i] = (gptc_st_entry){.name = d->name, .dtype = dtype, .ndim = d->ndim, .data = data};
        e[i].shape[0] = d->shape[0];
        e[i].shape[1] = d->shape[1];
    }
    if (by_name) qsort(e, m->ntensors, sizeof *e, by_entry_name);
    char path[4200];
    snprintf(path, sizeof path, "%s/" MODEL_FILE, dir);
    if ((st = gptc_st_write(path, e, m->ntensors, keys, vptr, NMETA))) goto done;
    snprintf(path, sizeof path, "%s/" CONFIG_FILE, dir);
    st = write_hf_config(path, c, tokenizer);
done:
    free(e);
    gptc_free(half);
    return st;
}

/* appends n floats to f, as F32 or BF16, through a bounce buffer of cap floats */
static gptc_status put(gptc_atomic_file *f, const float *x, size_t n, gptc_dtype dt, void *buf, size_t cap) {
    if (dt == GPTC_F32) return gptc_atomic_write(f, x, n * 4);
    for (size_t i = 0; i < n; i += cap) {
        size_t k = n - i < cap ? n - i : cap;
        uint16_t *h = buf;
        for (size_t j = 0; j < k; j++) h[j] = gptc_f32_to_bf16(x[i + j]);
        gptc_status st = gptc_atomic_write(f, h, k * 2);
        if (st) return st;
    }
    return GPTC_OK;
}

gptc_status gptc_weights_write_llmc(const char *path, const gptc_model *m, gptc_dtype dtype) {
    if (dtype != GPTC_F32 && dtype != GPTC_BF16)
        return gptc_fail(GPTC_ERR_ARG, "%s: llm.c checkpoints are F32 or BF16, not %s", path, gptc_dtype_name(dtype));
    const gptc_model_config *c = &m->cfg;
    size_t C = (size_t)c->channels, V = (size_t)c->vocab;
    size_t Vp = (V + LLMC_VOCAB_MULTIPLE - 1) / LLMC_VOCAB_MULTIPLE * LLMC_VOCAB_MULTIPLE;
    int32_t h[LLMC_HEADER_INTS] = {LLMC_MAGIC, dtype == GPTC_F32 ? LLMC_V_FP32 : LLMC_V_BF16, c->context, c->vocab,
                                   c->layers, c->heads, c->channels, (int32_t)Vp};
    size_t cap = 4 * C * C > (Vp - V) * C ? 4 * C * C : (Vp - V) * C; /* the largest transpose, wte's padding */
    float *tr = gptc_alloc(cap * sizeof(float), "llm.c export"), *zero = gptc_alloc(cap * sizeof(float), "llm.c export");
    void *bounce = gptc_alloc(cap * sizeof(float), "llm.c export");
    gptc_atomic_file f;
    gptc_status st;
    if (!tr || !zero || !bounce) {
        st = gptc_fail(GPTC_ERR_NOMEM, "%s: out of memory", path);
        goto done;
    }
    memset(zero, 0, cap * sizeof(float));
    if ((st = gptc_atomic_open(&f, path))) goto done;
    if ((st = gptc_atomic_write(&f, h, sizeof h))) goto done;
    for (int k = 0; k < m->ntensors; k++) {
        const gptc_tensor_desc *d = &m->tensors[llmc_order(m, k)];
        const float *x = m->params + d->offset;
        if (d->ndim == 2 && k >= 2) { /* [in, out] -> [out, in] */
            size_t in = (size_t)d->shape[0], out = (size_t)d->shape[1];
            for (size_t i = 0; i < in; i++)
                for (size_t o = 0; o < out; o++) tr[o * in + i] = x[i * out + o];
            x = tr;
        }
        if ((st = put(&f, x, d->numel, dtype, bounce, cap))) goto done; /* a failed write released f */
        if (k == 0 && (st = put(&f, zero, (Vp - V) * C, dtype, bounce, cap))) goto done;
    }
    st = gptc_atomic_commit(&f);
done:
    gptc_free(tr);
    gptc_free(zero);
    gptc_free(bounce);
    return st;
}

/* The GPT-2 vocabulary files to put in an exported folder, for the weights in file: the source
 * folder's own vocab.json and merges.txt when it holds both, else encoder.json and vocab.bpe where
 * gptc_tokenizer_open("gpt2") finds them. Checked by opening them as the readers will. */
static gptc_status gpt2_vocab_files(const char *file, char *enc, char *bpe, size_t cap) {
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", file);
    char *slash = strrchr(dir, '/');
    if (slash) *slash = '\0';
    else snprintf(dir, sizeof dir, ".");
    snprintf(enc, cap, "%s/vocab.json", dir);
    snprintf(bpe, cap, "%s/merges.txt", dir);
    if (!gptc_is_file(enc) || !gptc_is_file(bpe)) {
        char vdir[4096];
        gptc_status st = gptc_tokenizer_gpt2_dir(vdir, sizeof vdir);
        if (st) return st;
        snprintf(enc, cap, "%s/encoder.json", vdir);
        snprintf(bpe, cap, "%s/vocab.bpe", vdir);
    }
    gptc_tokenizer *t = NULL;
    gptc_status st = gptc_tokenizer_open_for_model("gpt2", file, &t);
    gptc_tokenizer_free(t);
    return st;
}

/* What `gptc export --format hf` writes beside the weights so the folder is what Hugging Face's
 * from_pretrained expects: generation_config.json (end-of-text as bos and eos when the tokenizer is
 * known) and, for GPT-2's vocabulary (enc and bpe non-NULL), GPT2Tokenizer's files: vocab.json
 * (encoder.json's content), merges.txt (vocab.bpe's), tokenizer_config.json and
 * special_tokens_map.json. A byte-level model has no Hugging Face tokenizer: its config.json's
 * gptc_tokenizer says "byte". */
static gptc_status write_hf_extras(const char *dir, const gptc_model_config *c, const char *tokenizer, const char *enc,
                                   const char *bpe) {
    char path[4200];
    int eot = tokenizer_eot(tokenizer);
    cJSON *g = cJSON_CreateObject();
    if (g && eot >= 0 && eot < c->vocab) {
        cJSON_AddNumberToObject(g, "bos_token_id", eot);
        cJSON_AddNumberToObject(g, "eos_token_id", eot);
    }
    snprintf(path, sizeof path, "%s/generation_config.json", dir);
    gptc_status st = write_json(path, g);
    if (st || !enc) return st;
    snprintf(path, sizeof path, "%s/vocab.json", dir);
    if ((st = gptc_file_copy(enc, path))) return st;
    snprintf(path, sizeof path, "%s/merges.txt", dir);
    if ((st = gptc_file_copy(bpe, path))) return st;
    const char *special[] = {"bos_token", "eos_token", "unk_token"};
    cJSON *map = cJSON_CreateObject(), *tc = cJSON_CreateObject();
    for (int i = 0; i < 3; i++) {
        if (map) cJSON_AddStringToObject(map, special[i], "<|endoftext|>");
        if (tc) cJSON_AddStringToObject(tc, special[i], "<|endoftext|>");
    }
    if (tc) {
        cJSON_AddBoolToObject(tc, "add_prefix_space", 0);
        cJSON_AddNumberToObject(tc, "model_max_length", c->context);
        cJSON_AddStringToObject(tc, "tokenizer_class", "GPT2Tokenizer");
    }
    snprintf(path, sizeof path, "%s/special_tokens_map.json", dir);
    if ((st = write_json(path, map))) {
        cJSON_Delete(tc);
        return st;
    }
    snprintf(path, sizeof path, "%s/tokenizer_config.json", dir);
    return write_json(path, tc);
}

gptc_status gptc_weights_export(const char *src, const char *format, gptc_dtype dtype, const char *out, bool merge_lora) {
    bool hf = format && !strcmp(format, "hf"), llmc = format && !strcmp(format, "llmc");
    if (!hf && !llmc) return gptc_fail(GPTC_ERR_ARG, "'format' %s: expected hf or llmc", format ? format : "(missing)");
    if (!out || !*out) return gptc_fail(GPTC_ERR_ARG, "'out': missing; give the folder (hf) or file (llmc) to write");
    if (!src || !*src) return gptc_fail(GPTC_ERR_ARG, "'ckpt': missing; give a checkpoint, a Hugging Face folder or an llm.c .bin");
    gptc_weights_info info;
    gptc_status st = gptc_weights_find(src, &info);
    if (st) return gptc_fail_prefix(st, "'ckpt'");
    if (merge_lora && !info.adapters.found)
        return gptc_fail(GPTC_ERR_ARG, "'merge_lora': %s holds no LoRA adapters (no adapter_config.json); drop "
                         "'merge_lora'", src);
    if (info.adapters.found && !merge_lora && llmc)
        return gptc_fail(GPTC_ERR_ARG, "'format' llmc: %s holds LoRA adapters, which an llm.c file cannot; add "
                         "'merge_lora' to fold them in", src);
    info.base_only = info.adapters.found && !merge_lora; /* hf: the adapters are copied beside the base */
    gptc_model m = {0};
    if ((st = gptc_model_init(&m, &info.cfg)) || (st = gptc_weights_load(&info, &m))) goto done;
    if (hf) {
        char enc[4200], bpe[4200];
        bool gpt2 = !strcmp(info.tokenizer, "gpt2");
        if (gpt2 && (st = gpt2_vocab_files(info.file, enc, bpe, sizeof enc))) { /* before anything is written */
            st = gptc_fail_prefix(st, "'format' hf: the folder gets GPT-2's tokenizer files");
            goto done;
        }
        if ((st = gptc_mkdir_p(out)) || (st = gptc_weights_write_hf(out, &m, info.tokenizer, dtype, true))) goto done;
        st = write_hf_extras(out, &m.cfg, info.tokenizer, gpt2 ? enc : NULL, gpt2 ? bpe : NULL);
        if (!st && info.base_only) st = gptc_adapters_copy(&info.adapters, out);
    } else {
        st = gptc_weights_write_llmc(out, &m, dtype);
    }
done:
    gptc_model_free(&m);
    return st;
}
