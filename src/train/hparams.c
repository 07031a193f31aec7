/* hparams.c — the table of train/hparams.def as data, the defaults and range check generated from
 * it, and the run's values as checkpoints save, load and compare them. */
#include "train/hparams.h"
#include "core/core.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const gptc_hp_info gptc_hps[GPTC_HP_N] = {
#define HP(field, flag, kind, def, min, max, meta, key, ck, warn, help) \
    {#field, flag, GPTC_HP_##kind, offsetof(gptc_train_options, field), min, max, meta, help, key, GPTC_HP_CK_##ck, warn},
#include "train/hparams.def"
#undef HP
};

void gptc_hp_defaults(gptc_train_options *o) {
#define HP(field, flag, kind, def, ...) o->field = def;
#include "train/hparams.def"
#undef HP
}

static const void *field_of(const gptc_train_options *o, int k) { return (const char *)o + gptc_hps[k].offset; }

/* integer options as int64 (seed is the only U64 one and has no range) */
static int64_t int_of(const gptc_train_options *o, int k) {
    const void *p = field_of(o, k);
    switch (gptc_hps[k].kind) {
    case GPTC_HP_INT: case GPTC_HP_FLAG: return *(const int *)p;
    case GPTC_HP_LONG: return *(const long *)p;
    default: return 0;
    }
}

gptc_status gptc_hp_check(const gptc_train_options *o) {
    for (int k = 0; k < GPTC_HP_N; k++) {
        const gptc_hp_info *h = &gptc_hps[k];
        char val[64];
        double x, lo = h->min, hi = h->max;
        if (h->kind == GPTC_HP_FLOAT) { /* as floats: the CLI's 1e-12 arrives as 9.99999996e-13 */
            x = *(const float *)field_of(o, k);
            lo = (float)lo;
            hi = hi >= 1e18 ? hi : (float)hi;
            snprintf(val, sizeof val, "%g", x);
        } else if (h->kind == GPTC_HP_INT || h->kind == GPTC_HP_LONG || h->kind == GPTC_HP_FLAG) {
            int64_t i = int_of(o, k);
            x = (double)i;
            snprintf(val, sizeof val, "%" PRId64, i);
        } else {
            continue;
        }
        if (x >= lo && x <= hi) continue; /* NaN fails both */
        /* %.15g: bounds print as written in the table (1048576, not 1.04858e+06) */
        if (h->max >= 1e18)
            return gptc_fail(GPTC_ERR_ARG, "'%s' %s: must be at least %.15g", h->field, val, h->min);
        return gptc_fail(GPTC_ERR_ARG, "'%s' %s: must be between %.15g and %.15g", h->field, val, h->min, h->max);
    }
    return GPTC_OK;
}

static void capture_one(gptc_hp_values *v, const gptc_train_options *o, int k) {
    const void *p = field_of(o, k);
    switch (gptc_hps[k].kind) {
    case GPTC_HP_FLOAT: v->f[k] = *(const float *)p; break;
    case GPTC_HP_U64: v->u[k] = *(const uint64_t *)p; break;
    case GPTC_HP_TEXT: case GPTC_HP_LIST: {
        const char *s = *(const char *const *)p;
        snprintf(v->text[k], sizeof v->text[k], "%s", s ? s : "");
        break;
    }
    default: v->i[k] = int_of(o, k); break;
    }
}

void gptc_hp_capture(gptc_hp_values *v, const gptc_train_options *o) {
    for (int k = 0; k < GPTC_HP_N; k++)
        if (gptc_hps[k].ckpt_key) capture_one(v, o, k);
}

void gptc_hp_default_value(gptc_hp_values *v, int k) {
    gptc_train_options d;
    memset(&d, 0, sizeof d);
    gptc_hp_defaults(&d);
    capture_one(v, &d, k);
}

void gptc_hp_format(const gptc_hp_values *v, int k, char *buf, size_t cap) {
    switch (gptc_hps[k].kind) {
    case GPTC_HP_FLOAT: snprintf(buf, cap, "%.9g", v->f[k]); break;
    case GPTC_HP_U64: snprintf(buf, cap, "%" PRIu64, v->u[k]); break;
    case GPTC_HP_TEXT: case GPTC_HP_LIST: snprintf(buf, cap, "%s", v->text[k]); break;
    default: snprintf(buf, cap, "%" PRId64, v->i[k]); break;
    }
}

bool gptc_hp_differs(const gptc_hp_values *a, const gptc_hp_values *b, int k) {
    switch (gptc_hps[k].kind) {
    case GPTC_HP_FLOAT: return (float)a->f[k] != (float)b->f[k];
    case GPTC_HP_U64: return a->u[k] != b->u[k];
    case GPTC_HP_TEXT: case GPTC_HP_LIST: return strcmp(a->text[k], b->text[k]) != 0;
    default: return a->i[k] != b->i[k];
    }
}

bool gptc_hp_parse_value(gptc_hp_values *v, int k, const char *s) {
    char *end;
    errno = 0;
    switch (gptc_hps[k].kind) {
    case GPTC_HP_FLOAT: v->f[k] = (float)strtod(s, &end); break; /* "nan" too: the overrides use it */
    case GPTC_HP_U64: v->u[k] = strtoull(s, &end, 10); break;
    case GPTC_HP_TEXT: case GPTC_HP_LIST: snprintf(v->text[k], sizeof v->text[k], "%s", s); return true;
    default: {
        long long x = strtoll(s, &end, 10);
        if (gptc_hps[k].kind != GPTC_HP_LONG && (x < INT32_MIN || x > INT32_MAX)) return false;
        v->i[k] = x;
        break;
    }
    }
    return *s && !*end && !errno;
}

void gptc_hp_warn_changes(const char *ckpt, const gptc_hp_values *was, const gptc_hp_values *now) {
    for (int k = 0; k < GPTC_HP_N; k++) {
        if (!gptc_hps[k].warn || !gptc_hp_differs(was, now, k)) continue;
        char a[GPTC_HPARAM_SPEC_MAX], b[GPTC_HPARAM_SPEC_MAX];
        gptc_hp_format(was, k, a, sizeof a);
        gptc_hp_format(now, k, b, sizeof b);
        bool text = gptc_hps[k].kind == GPTC_HP_TEXT || gptc_hps[k].kind == GPTC_HP_LIST;
        if (gptc_hps[k].kind == GPTC_HP_FLOAT) { /* as the run would print them */
            snprintf(a, sizeof a, "%g", was->f[k]);
            snprintf(b, sizeof b, "%g", now->f[k]);
        }
        if (text) gptc_warn("resuming %s with '%s' \"%s\" (it was trained with \"%s\")", ckpt, gptc_hps[k].field, b, a);
        else gptc_warn("resuming %s with '%s' %s (it was trained with %s)", ckpt, gptc_hps[k].field, b, a);
    }
}
