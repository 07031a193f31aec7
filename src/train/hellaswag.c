/* hellaswag.c — HellaSwag-format multiple choice (hellaswag.h): the jsonl reader and tokenizer
 * (cJSON per line) and the scorer, one forward of all of an item's candidates. */
#include "train/hellaswag.h"
#include "core/core.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void gptc_mc_free(gptc_mc_set *s) {
    for (int i = 0; s->items && i < s->n; i++) {
        free(s->items[i].ctx);
        for (int e = 0; e < s->items[i].nend; e++) free(s->items[i].end[e]);
    }
    free(s->items);
    memset(s, 0, sizeof *s);
}

/* text's ids into a fresh array (*ids, *n) */
static gptc_status encode(const gptc_tokenizer *tz, const char *text, size_t len, int **ids, int *n) {
    size_t got = 0, cap = 0;
    *ids = NULL;
    gptc_status st = tz->encode(tz, NULL, text, len, false, ids, &got, &cap);
    if (st) {
        free(*ids);
        *ids = NULL;
        return st;
    }
    *n = (int)got;
    return GPTC_OK;
}

/* One line's object into *it. Returns NULL, or what is wrong with it (a static message). */
static const char *parse_item(const cJSON *o, const gptc_tokenizer *tz, gptc_mc_item *it, gptc_status *st) {
    *st = GPTC_OK;
    if (!cJSON_IsObject(o)) return "not a JSON object";
    const cJSON *ctx = cJSON_GetObjectItemCaseSensitive(o, "ctx");
    const cJSON *ends = cJSON_GetObjectItemCaseSensitive(o, "endings");
    const cJSON *label = cJSON_GetObjectItemCaseSensitive(o, "label");
    if (!cJSON_IsString(ctx)) return "no \"ctx\" string";
    if (!cJSON_IsArray(ends)) return "no \"endings\" array";
    /* the released files hold the label as a number; some conversions write it as a string */
    double lv = cJSON_IsNumber(label) ? label->valuedouble
                : cJSON_IsString(label) && *label->valuestring ? strtod(label->valuestring, NULL) : NAN;
    if (isnan(lv)) return "no \"label\" (a number)";
    int nend = cJSON_GetArraySize(ends);
    if (nend < 2 || nend > GPTC_MC_MAX_ENDINGS) return "\"endings\" must hold 2 to 16 strings";
    if (lv != floor(lv) || lv < 0 || lv >= nend) return "\"label\" is not the index of one of the endings";
    memset(it, 0, sizeof *it);
    it->nend = nend;
    it->label = (int)lv;
    if ((*st = encode(tz, ctx->valuestring, strlen(ctx->valuestring), &it->ctx, &it->nctx))) return "";
    if (it->nctx < 1) return "\"ctx\" is empty";
    for (int e = 0; e < nend; e++) {
        const cJSON *s = cJSON_GetArrayItem(ends, e);
        if (!cJSON_IsString(s)) return "an ending is not a string";
        if (!*s->valuestring) return "an ending is empty";
        size_t len = strlen(s->valuestring);
        char *text = malloc(len + 2);
        if (!text) {
            *st = gptc_fail(GPTC_ERR_NOMEM, "out of memory");
            return "";
        }
        text[0] = ' '; /* the ending continues the context's last word: " " + ending, as the harnesses do */
        memcpy(text + 1, s->valuestring, len + 1);
        *st = encode(tz, text, len + 1, &it->end[e], &it->nendtok[e]);
        free(text);
        if (*st) return "";
    }
    return NULL;
}

gptc_status gptc_mc_read(const char *path, const gptc_tokenizer *tz, gptc_mc_set *out) {
    memset(out, 0, sizeof *out);
    FILE *f = fopen(path, "rb");
    if (!f) return gptc_fail(GPTC_ERR_IO, "%s: cannot open (%s)", path, strerror(errno));
    char *line = NULL;
    size_t lcap = 0;
    ssize_t len;
    int cap = 0, lineno = 0;
    gptc_status st = GPTC_OK;
    while ((len = getline(&line, &lcap, f)) >= 0) {
        lineno++;
        size_t k = 0;
        while (k < (size_t)len && (line[k] == ' ' || line[k] == '\t' || line[k] == '\r' || line[k] == '\n')) k++;
        if (k == (size_t)len) continue; /* a blank line */
        if (out->n == cap) {
            cap = cap ? 2 * cap : 64;
            gptc_mc_item *grown = realloc(out->items, sizeof *grown * (size_t)cap);
            if (!grown) {
                st = gptc_fail(GPTC_ERR_NOMEM, "out of memory");
                break;
            }
            out->items = grown;
        }
        cJSON *o = cJSON_ParseWithLength(line, (size_t)len);
        gptc_mc_item *it = &out->items[out->n];
        memset(it, 0, sizeof *it);
        const char *why = o ? parse_item(o, tz, it, &st) : "not valid JSON";
        cJSON_Delete(o);
        if (why) {
            out->n++; /* freed with the set */
            if (!st)
                st = gptc_fail(GPTC_ERR_FORMAT, "%s line %d: %s; expected HellaSwag's format, one JSON object per line "
                               "with \"ctx\", \"endings\" and \"label\"", path, lineno, why);
            else
                st = gptc_fail_prefix(st, "%s line %d", path, lineno);
            break;
        }
        if (it->nend > out->max_endings) out->max_endings = it->nend;
        out->n++;
    }
    free(line);
    if (!st && ferror(f)) st = gptc_fail(GPTC_ERR_IO, "%s: read error", path);
    fclose(f);
    if (!st && out->n == 0) st = gptc_fail(GPTC_ERR_FORMAT, "%s: no items (expected HellaSwag's jsonl, one object per line)", path);
    if (st) gptc_mc_free(out);
    return st;
}

/* The context tokens candidate e of it keeps in a model of `context` positions (its row is those, then
 * the ending, and runs as row length - 1 inputs); -1 when the ending cannot fit. */
static int kept_ctx(const gptc_mc_item *it, int e, int context) {
    int room = context + 1 - it->nendtok[e];
    if (room < 1) return -1;
    return it->nctx < room ? it->nctx : room;
}

void gptc_mc_shape(const gptc_mc_set *s, int context, int *B, int *T) {
    *B = s->max_endings;
    *T = 1;
    for (int i = 0; i < s->n; i++)
        for (int e = 0; e < s->items[i].nend; e++) {
            int c = kept_ctx(&s->items[i], e, context);
            int t = c < 0 ? context : c + s->items[i].nendtok[e] - 1;
            if (t > *T) *T = t;
        }
}

gptc_status gptc_mc_score(gptc_model *m, const gptc_mc_set *s, gptc_mc_result *r, double *sums, int *ntok) {
    memset(r, 0, sizeof *r);
    /* a model with activations already (the trainer's) is run within them: rows of at most m->T inputs,
     * at most m->B rows per forward */
    int context = m->act_arena ? m->T : m->cfg.context, V = m->cfg.vocab;
    for (int i = 0; i < s->n; i++)
        for (int e = 0; e < s->items[i].nend; e++) {
            const gptc_mc_item *it = &s->items[i];
            if (kept_ctx(it, e, context) < 0)
                return gptc_fail(GPTC_ERR_FORMAT, "item %d: ending %d is %d tokens, too long for the model's context of %d",
                                 i + 1, e, it->nendtok[e], context);
            for (int j = 0; j < it->nctx; j++)
                if (it->ctx[j] >= V) goto vocab;
            for (int j = 0; j < it->nendtok[e]; j++)
                if (it->end[e][j] >= V) goto vocab;
            continue;
        vocab:
            return gptc_fail(GPTC_ERR_FORMAT, "item %d: a token id is outside the model's vocabulary of %d; the model "
                             "reads another tokenizer", i + 1, V);
        }
    int Bm, Tm;
    gptc_mc_shape(s, context, &Bm, &Tm);
    if (!m->act_arena) {
        gptc_status st = gptc_model_alloc_train(m, Bm, Tm);
        if (st) return st;
    }
    int rows = m->B < Bm ? m->B : Bm; /* candidates per forward */
    float save_drop = m->dropout, save_attn = m->attn_dropout;
    m->dropout = m->attn_dropout = 0;
    size_t cells = (size_t)Bm * Tm; /* one item's candidates, whatever the rows per forward */
    int *in = malloc(sizeof(int) * cells), *tg = malloc(sizeof(int) * cells);
    float *losses = malloc(sizeof(float) * cells); /* (B,T) host copy of the per-position losses */
    if (!in || !tg || !losses) {
        free(in), free(tg), free(losses);
        return gptc_fail(GPTC_ERR_NOMEM, "out of memory");
    }
    double t0 = gptc_now();
    for (int i = 0; i < s->n; i++) {
        const gptc_mc_item *it = &s->items[i];
        int B = it->nend, T = 1, keep[GPTC_MC_MAX_ENDINGS];
        for (int e = 0; e < B; e++) {
            keep[e] = kept_ctx(it, e, context);
            if (keep[e] + it->nendtok[e] - 1 > T) T = keep[e] + it->nendtok[e] - 1;
        }
        /* row e: the last keep[e] context tokens, then the ending; inputs are its first n-1 tokens,
         * targets its last n-1; the rest of the row is padding (end-of-text in, 0 as target, not scored) */
        for (int e = 0; e < B; e++) {
            int n = keep[e] + it->nendtok[e];
            const int *c = it->ctx + (it->nctx - keep[e]);
            for (int t = 0; t < T + 1; t++) {
                int tok = t < keep[e] ? c[t] : t < n ? it->end[e][t - keep[e]] : 0;
                if (t < T) in[(size_t)e * T + t] = t < n - 1 ? tok : V - 1;
                if (t > 0) tg[(size_t)e * T + t - 1] = t < n ? tok : 0;
            }
        }
        for (int e0 = 0; e0 < B; e0 += rows) { /* the candidates, `rows` at a time */
            int nb = B - e0 < rows ? B - e0 : rows;
            gptc_model_forward(m, in + (size_t)e0 * T, tg + (size_t)e0 * T, nb, T);
            m->be.mem->copy_d2h(losses + (size_t)e0 * T, m->a.losses, sizeof(float) * (size_t)nb * T);
        }
        int best = 0, best_norm = 0;
        double bsum = INFINITY, bnorm = INFINITY;
        for (int e = 0; e < B; e++) {
            double sum = 0;
            /* ending token j sits at row position keep + j and is predicted at input position keep + j - 1 */
            for (int j = 0; j < it->nendtok[e]; j++) sum += losses[(size_t)e * T + keep[e] + j - 1];
            double norm = sum / it->nendtok[e];
            if (sum < bsum) bsum = sum, best = e;
            if (norm < bnorm) bnorm = norm, best_norm = e;
            if (sums) sums[(size_t)i * s->max_endings + e] = sum;
            if (ntok) ntok[(size_t)i * s->max_endings + e] = it->nendtok[e];
            r->tokens += (uint64_t)it->nendtok[e];
        }
        for (int e = B; sums && e < s->max_endings; e++) sums[(size_t)i * s->max_endings + e] = NAN;
        for (int e = B; ntok && e < s->max_endings; e++) ntok[(size_t)i * s->max_endings + e] = 0;
        r->correct += best == it->label;
        r->correct_norm += best_norm == it->label;
    }
    r->seconds = gptc_now() - t0;
    m->dropout = save_drop;
    m->attn_dropout = save_attn;
    free(in), free(tg), free(losses);
    r->items = s->n;
    r->acc = s->n ? (double)r->correct / s->n : 0;
    r->acc_norm = s->n ? (double)r->correct_norm / s->n : 0;
    return GPTC_OK;
}
