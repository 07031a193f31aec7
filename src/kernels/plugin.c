/* plugin.c — custom operators from shared libraries: dlopen, the ABI and name checks, the shape
 * contract against the run, validation against the reference (plugin_probe.c), and the overlaid table.
 * Any entry of the kernel table can be replaced (gptc_op_infos lists them). */
#include "kernels/plugin_ops.h"
#include "core/core.h"

#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NOPS GPTC_OP_COUNT

static int op_index(const char *name) {
    for (int i = 0; name && i < NOPS; i++)
        if (strcmp(name, gptc_op_infos[i].name) == 0) return i;
    return -1;
}

/* ---------------------------------------------------------------- the shape contract */

/* One call's shape against the contract; where says which call ("the training step", "sampling"). */
static gptc_status check_shape(const char *lib, const char *op, const gptc_op_impl *im, int64_t n, const char *nwhat,
                               int C, int T, int HS, const char *where) {
    const gptc_op_contract *c = &im->contract;
    const char *fmt = "'op_plugins' %s: %s (%s) %s, but %s calls it with %s: the plugin's shape contract does not fit "
                      "this run; change the run's shapes or leave the plugin out";
    char need[96], have[96];
    need[0] = 0;
    if (c->n_multiple > 1 && n % c->n_multiple) {
        snprintf(need, sizeof need, "needs N a multiple of %lld", (long long)c->n_multiple);
        snprintf(have, sizeof have, "N = %s = %lld", nwhat, (long long)n);
    } else if (c->n_max > 0 && n > c->n_max) {
        snprintf(need, sizeof need, "takes N at most %lld", (long long)c->n_max);
        snprintf(have, sizeof have, "N = %s = %lld", nwhat, (long long)n);
    } else if (C > 0 && c->c_multiple > 1 && C % c->c_multiple) {
        snprintf(need, sizeof need, "needs C a multiple of %d", c->c_multiple);
        snprintf(have, sizeof have, "C = %d", C);
    } else if (C > 0 && c->c_max > 0 && C > c->c_max) {
        snprintf(need, sizeof need, "takes C at most %d", c->c_max);
        snprintf(have, sizeof have, "C = %d", C);
    } else if (T > 0 && c->t_max > 0 && T > c->t_max) {
        snprintf(need, sizeof need, "takes T at most %d", c->t_max);
        snprintf(have, sizeof have, "T = %d", T);
    } else if (HS > 0 && c->hs_multiple > 1 && HS % c->hs_multiple) {
        snprintf(need, sizeof need, "needs the head size a multiple of %d", c->hs_multiple);
        snprintf(have, sizeof have, "C/NH = %d", HS);
    }
    if (!need[0]) return GPTC_OK;
    return gptc_fail(GPTC_ERR_ARG, fmt, lib, op, im->name, need, where, have);
}

/* Every call the run makes of the implementation's operator. */
static gptc_status check_contract(const char *lib, int op, const gptc_op_impl *im, const gptc_op_run *r) {
    const char *name = gptc_op_infos[op].name, *step = "the training step";
    int64_t BT = (int64_t)r->B * r->T;
    gptc_status st = GPTC_OK;
    for (int i = 0; i < 4; i++)
        if (im->contract.reserved[i])
            return gptc_fail(GPTC_ERR_ARG, "%s: %s (%s): the contract's reserved fields are not zero; rebuild the plugin "
                             "against this gptc's include/gptc_op_plugin.h", lib, name, im->name);
    const gptc_op_contract *c = &im->contract, any = {0};
    switch (op) {
    case OP_GELU_FWD: case OP_GELU_BWD: case OP_GELU_ERF_FWD: case OP_GELU_ERF_BWD: case OP_GELU_SIG_FWD:
    case OP_GELU_SIG_BWD: {
        bool fwd = op == OP_GELU_FWD || op == OP_GELU_ERF_FWD || op == OP_GELU_SIG_FWD;
        st = check_shape(lib, name, im, BT * 4 * r->C, "B*T*4C", 0, 0, 0, step);
        if (!st && fwd && r->decode) st = check_shape(lib, name, im, 4 * (int64_t)r->C, "4C", 0, 0, 0, "sampling");
        break;
    }
    case OP_ATT_FWD: case OP_ATT_BWD: case OP_FLASH_FWD: case OP_FLASH_BWD: case OP_FLASH_FWD_BF16: case OP_FLASH_BWD_BF16:
        st = check_shape(lib, name, im, r->B, "B", r->C, r->T, r->C / r->NH, step);
        break;
    case OP_LN_FWD: case OP_LN_BWD: case OP_RES_LN_FWD: case OP_LN_BWD_RES:
        st = check_shape(lib, name, im, BT, "B*T", r->C, 0, 0, step);
        if (!st && op == OP_LN_FWD && r->decode) st = check_shape(lib, name, im, 1, "1 row", r->C, 0, 0, "sampling");
        break;
    default: /* called at many shapes: only "any" */
        if (memcmp(c, &any, sizeof any))
            st = gptc_fail(GPTC_ERR_ARG, "'op_plugins' %s: %s (%s) declares a shape contract, but gptc calls %s at many "
                           "shapes and takes only the all-zero contract (any shape) for it", lib, name, im->name, name);
    }
    return st;
}

/* ---------------------------------------------------------------- loading */

/* Span names, kept until the process ends (the profiler keeps pointers to them). */
typedef struct interned {
    struct interned *next;
    char s[];
} interned;
static interned *g_names;

static const char *intern(const char *s) {
    for (interned *n = g_names; n; n = n->next)
        if (strcmp(n->s, s) == 0) return n->s;
    interned *n = malloc(sizeof *n + strlen(s) + 1);
    if (!n) return NULL;
    strcpy(n->s, s);
    n->next = g_names;
    g_names = n;
    return n->s;
}

struct gptc_op_plugins {
    gptc_kernels table;
    const char *labels[GPTC_KERNEL_SLOTS];
    char summary[2048];
};

static const gptc_op_plugins *g_active;

/* the file name of a path, for messages that stay short */
static const char *base_name(const char *path) {
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

/* One plugin's description (from a library at `path`, or linked in): version, names; then each operator
 * the run calls: contract, probe, overlay. who[op] records which plugin gave an operator (duplicates are
 * refused); *used counts the operators installed. */
static gptc_status add_plugin(gptc_op_plugins *s, const char *path, const gptc_op_plugin *pl, const gptc_op_run *r,
                              char who[][256], int *used) {
    if (pl->abi_version < GPTC_OP_ABI_MIN_VERSION || pl->abi_version > GPTC_OP_ABI_VERSION)
        return gptc_fail(GPTC_ERR_ARG, "'op_plugins' %s: built for operator ABI version %u, but this gptc speaks versions %u "
                         "to %u; rebuild it against this gptc's include/gptc_op_plugin.h", path, pl->abi_version,
                         GPTC_OP_ABI_MIN_VERSION, GPTC_OP_ABI_VERSION);
    const char *pname = pl->name && *pl->name ? pl->name : base_name(path);
    if (pl->nimpls < 1 || !pl->impls)
        return gptc_fail(GPTC_ERR_ARG, "'op_plugins' %s: registers no operator", path);
    for (int i = 0; i < pl->nimpls; i++) {
        const gptc_op_impl *im = &pl->impls[i];
        int op = op_index(im->op);
        if (op < 0) {
            char names[1024] = "";
            for (int j = 0; j < NOPS; j++)
                snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", j ? ", " : "", gptc_op_infos[j].name);
            return gptc_fail(GPTC_ERR_ARG, "'op_plugins' %s: registers operator '%s', which a plugin cannot replace (these "
                             "can: %s)", path, im->op ? im->op : "(null)", names);
        }
        const char *name = gptc_op_infos[op].name;
        if (gptc_op_infos[op].since > pl->abi_version)
            return gptc_fail(GPTC_ERR_ARG, "'op_plugins' %s: registers operator '%s', replaceable since operator ABI version "
                             "%u, but declares version %u; rebuild it against this gptc's include/gptc_op_plugin.h", path,
                             name, gptc_op_infos[op].since, pl->abi_version);
        if (!im->fn.any || !im->name || !*im->name || strlen(im->name) > 64)
            return gptc_fail(GPTC_ERR_ARG, "'op_plugins' %s: %s has no %s", path, name,
                             !im->fn.any ? "function" : "implementation name (1 to 64 characters)");
        if (who[op][0])
            return gptc_fail(GPTC_ERR_ARG, "'op_plugins' %s: %s is already replaced by %s; give one plugin per operator", path,
                             name, who[op]);
        if (!gptc_op_runs(op, r)) {
            if (!r->quiet)
                gptc_warn("'op_plugins' %s: %s (%s) is not called by this run (it runs %s); skipped", path, name, im->name,
                          gptc_op_infos[op].runs_when);
            continue;
        }
        gptc_status st = check_contract(path, op, im, r);
        if (st) return st;
        double err, tol = gptc_op_infos[op].tol;
        const char *what;
        if ((st = gptc_op_probe_index(op, im->fn, r, &im->contract, &err, &what)))
            return gptc_fail_prefix(st, "'op_plugins' %s: %s (%s)", path, name, im->name);
        if (!(err <= tol))
            return gptc_fail(GPTC_ERR_ARG, "'op_plugins' %s: %s (%s) disagrees with the reference: max error %.3g in %s, "
                             "tolerance %.3g (probe at the run's shapes); fix the plugin or leave it out", path, name,
                             im->name, err, what, tol);
        char label[160];
        snprintf(label, sizeof label, "%s[plugin:%s]", name, im->name);
        const char *l = intern(label);
        if (!l)
            return gptc_fail(GPTC_ERR_NOMEM, "out of memory");
        memcpy((char *)&s->table + gptc_op_infos[op].slot * sizeof(void *), &im->fn.any, sizeof(void *));
        s->labels[gptc_op_infos[op].slot] = l;
        snprintf(who[op], 256, "%s", path);
        size_t k = strlen(s->summary);
        snprintf(s->summary + k, sizeof s->summary - k, "%s%s = %s:%s (error %.2g, tolerance %.2g)", k ? ", " : "", name,
                 pname, im->name, err, tol);
        (*used)++;
    }
    return GPTC_OK;
}

/* One library: open it, find its entry and description, add its operators (add_plugin). */
static gptc_status load_one(gptc_op_plugins *s, const char *path, const gptc_op_run *r, char who[][256]) {
    char local[4200];
    snprintf(local, sizeof local, "%s%s", strchr(path, '/') ? "" : "./", path); /* a bare name is a file here */
    void *h = dlopen(local, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *e = dlerror();
        return gptc_fail(GPTC_ERR_ARG, "'op_plugins' %s: cannot load it: %s", path, e ? e : "dlopen failed");
    }
    gptc_status st = GPTC_OK;
    void *sym = dlsym(h, GPTC_OP_PLUGIN_ENTRY);
    gptc_op_plugin_entry_fn entry;
    memcpy(&entry, &sym, sizeof entry);
    const gptc_op_plugin *pl = entry ? entry(GPTC_OP_ABI_VERSION) : NULL;
    if (!entry) {
        st = gptc_fail(GPTC_ERR_ARG, "'op_plugins' %s: not a gptc operator plugin (no %s symbol); build it against "
                       "include/gptc_op_plugin.h (see docs/extending.md)", path, GPTC_OP_PLUGIN_ENTRY);
        goto fail;
    }
    if (!pl) {
        st = gptc_fail(GPTC_ERR_ARG, "'op_plugins' %s: declined this gptc's operator ABI version %u; rebuild it against "
                       "this gptc's include/gptc_op_plugin.h", path, GPTC_OP_ABI_VERSION);
        goto fail;
    }
    int used = 0;
    if ((st = add_plugin(s, path, pl, r, who, &used))) goto fail;
    if (!used) dlclose(h); /* nothing of it in the table */
    return GPTC_OK;          /* otherwise kept open: the table points into it until the process ends */
fail:
    dlclose(h);
    return st;
}

/* An empty set over a copy of base, its labels the set's own (NULL when out of memory). */
static gptc_op_plugins *set_new(const gptc_kernels *base) {
    gptc_op_plugins *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->table = *base;
    s->table.labels = s->labels;
    return s;
}

/* After loading: on success the set is *out and the active one; on failure it is freed. */
static gptc_status set_done(gptc_op_plugins *s, gptc_status st, gptc_op_plugins **out) {
    if (st) {
        free(s);
        return st;
    }
    *out = s;
    g_active = s;
    return GPTC_OK;
}

gptc_status gptc_op_plugins_load(const char *paths, const gptc_kernels *base, const gptc_op_run *run,
                                 gptc_op_plugins **out) {
    *out = NULL;
    gptc_op_plugins *s = set_new(base);
    if (!s) return gptc_fail(GPTC_ERR_NOMEM, "out of memory");
    char who[NOPS][256];
    memset(who, 0, sizeof who);
    gptc_status st = GPTC_OK;
    for (const char *p = paths ? paths : ""; *p;) {
        size_t len = strcspn(p, ",:");
        if (len) {
            char path[4096];
            if (len >= sizeof path) {
                st = gptc_fail(GPTC_ERR_ARG, "'op_plugins' %.64s...: path too long", p);
                break;
            }
            memcpy(path, p, len);
            path[len] = 0;
            if ((st = load_one(s, path, run, who))) break;
        }
        p += len + (p[len] != 0);
    }
    return set_done(s, st, out);
}

gptc_status gptc_op_plugins_link(const gptc_op_plugin *const *plugins, int n, const gptc_kernels *base,
                                 const gptc_op_run *run, gptc_op_plugins **out) {
    *out = NULL;
    gptc_op_plugins *s = set_new(base);
    if (!s) return gptc_fail(GPTC_ERR_NOMEM, "out of memory");
    char who[NOPS][256];
    memset(who, 0, sizeof who);
    gptc_status st = GPTC_OK;
    for (int i = 0; i < n && !st; i++) {
        char origin[96];
        snprintf(origin, sizeof origin, "%s (linked in)", plugins[i] && plugins[i]->name ? plugins[i]->name : "(unnamed)");
        int used = 0;
        st = plugins[i] ? add_plugin(s, origin, plugins[i], run, who, &used)
                        : gptc_fail(GPTC_ERR_ARG, "'op_plugins' %s: no description", origin);
    }
    return set_done(s, st, out);
}

const gptc_kernels *gptc_op_plugins_table(const gptc_op_plugins *s) { return &s->table; }
const char *gptc_op_plugins_summary(const gptc_op_plugins *s) { return s ? s->summary : ""; }
const char *gptc_op_plugins_active(void) { return g_active ? g_active->summary : ""; }

void gptc_op_plugins_free(gptc_op_plugins *s) {
    if (!s) return;
    if (g_active == s) g_active = NULL;
    free(s);
}
