/* options.c — the table-driven option parser and --help writer. */
#include "cli/options.h"
#include "core/core.h"
#include "optim/optimizer.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static const char *type_expect(gptc_opt_type t) {
    switch (t) {
    case OPT_INT: case OPT_LONG: return "an integer";
    case OPT_U64: return "a non-negative integer";
    case OPT_FLOAT: return "a number";
    case OPT_STRING: return "a value";
    case OPT_LIST: return "a value";
    case OPT_FLAG: return "no value";
    }
    return "a value";
}

/* %.15g: bounds print as written in the table (1048576, not 1.04858e+06) */
static gptc_status range_error(const gptc_option *o, const char *val, double x) {
    if (o->max >= 1e18 && x < o->min)
        return gptc_fail(GPTC_ERR_ARG, "--%s %s: must be at least %.15g", o->name, val, o->min);
    if (o->max >= 1e18)
        return gptc_fail(GPTC_ERR_ARG, "--%s %s: must be at most %.15g", o->name, val, o->max);
    return gptc_fail(GPTC_ERR_ARG, "--%s %s: must be between %.15g and %.15g", o->name, val, o->min, o->max);
}

/* The joined values of OPT_LIST options: held here (so they stay reachable) until the next parse. */
#define OWNED_MAX 64
static char *g_owned[OWNED_MAX];
static int g_nowned;

/* Records joined, which replaces was (freed if it was one of ours: a list given many times). */
static void own(char *joined, const char *was) {
    for (int i = 0; i < g_nowned; i++)
        if (g_owned[i] == was) {
            free(g_owned[i]);
            g_owned[i] = joined;
            return;
        }
    if (g_nowned < OWNED_MAX) g_owned[g_nowned++] = joined; /* (past 64 lists it is simply kept) */
}

static void release_owned(void) {
    for (int i = 0; i < g_nowned; i++) free(g_owned[i]);
    g_nowned = 0;
}

static gptc_status set_value(const gptc_option *o, void *dst, const char *val) {
    char *field = (char *)dst + o->offset, *end;
    errno = 0;
    /* strto* skip leading white space, and strtoull then takes a minus sign and wraps: a number
     * starts at its first character or is refused */
    if (o->type != OPT_STRING && o->type != OPT_LIST && o->type != OPT_FLAG && isspace((unsigned char)*val))
        return gptc_fail(GPTC_ERR_ARG, "--%s '%s': expected %s", o->name, val, type_expect(o->type));
    switch (o->type) {
    case OPT_INT:
    case OPT_LONG: {
        long long x = strtoll(val, &end, 10);
        if (!*val || *end || errno)
            return gptc_fail(GPTC_ERR_ARG, "--%s %s: expected %s", o->name, val, type_expect(o->type));
        if (x < o->min || x > o->max) return range_error(o, val, (double)x);
        if (o->type == OPT_INT) *(int *)field = (int)x; else *(long *)field = (long)x;
        return GPTC_OK;
    }
    case OPT_U64: {
        if (*val == '-') return gptc_fail(GPTC_ERR_ARG, "--%s %s: expected %s", o->name, val, type_expect(o->type));
        unsigned long long x = strtoull(val, &end, 10);
        if (!*val || *end || errno)
            return gptc_fail(GPTC_ERR_ARG, "--%s %s: expected %s", o->name, val, type_expect(o->type));
        *(uint64_t *)field = x;
        return GPTC_OK;
    }
    case OPT_FLOAT: {
        double x = strtod(val, &end);
        if (!*val || *end || errno || !isfinite(x))
            return gptc_fail(GPTC_ERR_ARG, "--%s %s: expected %s", o->name, val, type_expect(o->type));
        if (x < o->min || x > o->max) return range_error(o, val, x);
        *(float *)field = (float)x;
        return GPTC_OK;
    }
    case OPT_STRING:
        if (!*val) return gptc_fail(GPTC_ERR_ARG, "--%s: expected a non-empty value", o->name);
        *(const char **)field = val;
        return GPTC_OK;
    case OPT_FLAG:
        *(int *)field = 1;
        return GPTC_OK;
    case OPT_LIST: {
        if (!*val) return gptc_fail(GPTC_ERR_ARG, "--%s: expected a non-empty value", o->name);
        const char *was = *(const char **)field;
        if (!was) { /* the first value is argv's own */
            *(const char **)field = val;
            return GPTC_OK;
        }
        char *joined = malloc(strlen(was) + 1 + strlen(val) + 1);
        if (!joined) return gptc_fail(GPTC_ERR_NOMEM, "out of memory");
        sprintf(joined, "%s,%s", was, val);
        *(const char **)field = joined;
        own(joined, was);
        return GPTC_OK;
    }
    }
    return GPTC_ERR_ARG;
}

gptc_status gptc_options_parse(const gptc_command_spec *cmd, void *dst, int argc, char **argv, bool *given,
                               const char **pos, int *npos, bool *help) {
    release_owned(); /* the lists of the previous parse */
    *npos = 0;
    *help = false;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            *help = true;
            return GPTC_OK;
        }
        if (strncmp(a, "--", 2) != 0 || a[2] == '\0') {
            if (!cmd->positional)
                return gptc_fail(GPTC_ERR_ARG, "%s: unexpected argument (gptc %s takes only --options; see gptc %s --help)",
                                 a, cmd->name, cmd->name);
            pos[(*npos)++] = a;
            continue;
        }
        const char *name = a + 2, *eq = strchr(name, '=');
        size_t len = eq ? (size_t)(eq - name) : strlen(name);
        int k = -1;
        for (int j = 0; j < cmd->noptions; j++)
            if (strlen(cmd->options[j].name) == len && strncmp(cmd->options[j].name, name, len) == 0) k = j;
        if (k < 0)
            return gptc_fail(GPTC_ERR_ARG, "--%.*s: unknown option for gptc %s (see gptc %s --help)", (int)len, name,
                             cmd->name, cmd->name);
        const gptc_option *o = &cmd->options[k];
        const char *val;
        if (o->type == OPT_FLAG) {
            if (eq) return gptc_fail(GPTC_ERR_ARG, "--%s: is a flag and takes no value", o->name);
            val = "";
        } else if (eq) {
            val = eq + 1;
        } else {
            if (i + 1 >= argc) return gptc_fail(GPTC_ERR_ARG, "--%s: missing value (expected %s)", o->name, type_expect(o->type));
            val = argv[++i];
        }
        gptc_status st = set_value(o, dst, val);
        if (st) return st;
        if (given) given[k] = true;
    }
    return GPTC_OK;
}

/* The values --model and --optimizer take, from the one list each (src/model/config.c, the
 * optimizer registry), so help text never copies them; NULL for other options. */
static const char *choices_of(const gptc_option *o) {
    if (o->type != OPT_STRING) return NULL;
    if (strcmp(o->name, "model") == 0) return gptc_model_preset_names();
    if (strcmp(o->name, "optimizer") == 0) return gptc_optimizer_names();
    return NULL;
}

/* " (default X)" for option o read from defaults, or "" */
static void default_text(const gptc_option *o, const void *defaults, char *def, size_t cap) {
    const char *field = (const char *)defaults + o->offset;
    def[0] = '\0';
    switch (o->type) {
    case OPT_INT: snprintf(def, cap, "%d", *(const int *)field); break;
    case OPT_LONG: snprintf(def, cap, "%ld", *(const long *)field); break;
    case OPT_U64: snprintf(def, cap, "%llu", (unsigned long long)*(const uint64_t *)field); break;
    case OPT_FLOAT: snprintf(def, cap, "%g", *(const float *)field); break;
    case OPT_LIST:
    case OPT_STRING: {
        const char *s = *(const char *const *)field;
        if (s && *s) snprintf(def, cap, "%s", s);
        break;
    }
    case OPT_FLAG: break;
    }
}

static bool g_markdown; /* gptc_options_help writes Markdown (gptc help --markdown) */

void gptc_options_help_markdown(bool on) { g_markdown = on; }

void gptc_options_help(FILE *f, const gptc_command_spec *cmd, const void *defaults) {
    if (g_markdown) {
        gptc_options_markdown(f, cmd, defaults);
        return;
    }
    fprintf(f, "usage: %s\n%s\n\noptions:\n", cmd->usage, cmd->summary);
    for (int j = 0; j < cmd->noptions; j++) {
        const gptc_option *o = &cmd->options[j];
        char head[64], def[96], choices[256] = "";
        snprintf(head, sizeof head, "--%s%s%s", o->name, o->type == OPT_FLAG ? "" : " ", o->type == OPT_FLAG ? "" : o->meta);
        default_text(o, defaults, def, sizeof def);
        if (choices_of(o)) snprintf(choices, sizeof choices, " (one of: %s)", choices_of(o));
        fprintf(f, "  %-24s %s%s%s%s%s\n", head, o->help, choices, *def ? " (default " : "", def, *def ? ")" : "");
    }
    fprintf(f, "  %-24s %s\n", "--help", "show this help");
}

/* text with '|' escaped, for a Markdown table cell */
static void md_cell(FILE *f, const char *s) {
    for (; *s; s++) {
        if (*s == '|') fputc('\\', f);
        fputc(*s, f);
    }
}

void gptc_options_markdown(FILE *f, const gptc_command_spec *cmd, const void *defaults) {
    fprintf(f, "## gptc %s\n\n%s\n\n```\n%s\n```\n\n| option | default | description |\n|---|---|---|\n", cmd->name,
            cmd->summary, cmd->usage);
    for (int j = 0; j < cmd->noptions; j++) {
        const gptc_option *o = &cmd->options[j];
        char def[96];
        default_text(o, defaults, def, sizeof def);
        fprintf(f, "| `--%s%s", o->name, o->type == OPT_FLAG ? "" : " ");
        if (o->type != OPT_FLAG) md_cell(f, o->meta);
        fputs("` | ", f);
        if (*def) fprintf(f, "`%s`", def);
        fputs(" | ", f);
        md_cell(f, o->help);
        if (choices_of(o)) {
            fputs(" (one of: ", f);
            md_cell(f, choices_of(o));
            fputs(")", f);
        }
        fputs(" |\n", f);
    }
    fputs("\n", f);
}
