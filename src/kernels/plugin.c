/* plugin.c — custom operators from shared libraries: dlopen, the ABI and name checks, the shape
 * contract against the run, validation against the reference on probe inputs, and the overlaid table.
 *
 * Probes: random inputs from a fixed seed, at the run's shapes but bounded in cost. A size above
 * PROBE_CAP elements (rows for the LayerNorms: PROBE_CAP / C) is cut to at most the cap while keeping
 * its remainder modulo 64 x the contract's multiple, so the plugin's tail handling is exercised as in
 * the run; the attention runs one sequence (or the contract's batch multiple) of the run's T, C, NH.
 * Gradient buffers start from random values, not zeros, so an implementation that overwrites where it
 * must accumulate (or the reverse) is caught; every output carries a guard zone after its end. */
#include "kernels/plugin.h"
#include "core/core.h"

#include <dlfcn.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Every signature of the ABI is the kernel table's. */
#define SAME_TYPE(op)                                                                                               \
    _Static_assert(__builtin_types_compatible_p(gptc_op_##op##_fn, __typeof__(((gptc_kernels *)0)->op)),           \
                   "gptc_op_plugin.h: " #op " differs from kernels.h")
SAME_TYPE(gelu_fwd);
SAME_TYPE(gelu_bwd);
SAME_TYPE(layernorm_fwd);
SAME_TYPE(layernorm_bwd);
SAME_TYPE(residual_layernorm_fwd);
SAME_TYPE(layernorm_bwd_residual);
SAME_TYPE(attention_fwd);
SAME_TYPE(attention_bwd);

enum { OP_GELU_FWD, OP_GELU_BWD, OP_LN_FWD, OP_LN_BWD, OP_RES_LN_FWD, OP_LN_BWD_RES, OP_ATT_FWD, OP_ATT_BWD, NOPS };

const gptc_op_info gptc_op_infos[NOPS] = {
    [OP_GELU_FWD] = {"gelu_fwd", 1e-5, "only with --gelu tanh, the default"},
    [OP_GELU_BWD] = {"gelu_bwd", 1e-5, "only with --gelu tanh, the default"},
    [OP_LN_FWD] = {"layernorm_fwd", 2e-5, "in every run (fused: block 0's ln_1 and the block recompute; --no-fusion: every LayerNorm)"},
    [OP_LN_BWD] = {"layernorm_bwd", 1e-4, "only with --no-fusion"},
    [OP_RES_LN_FWD] = {"residual_layernorm_fwd", 2e-5, "only without --no-fusion"},
    [OP_LN_BWD_RES] = {"layernorm_bwd_residual", 1e-4, "only without --no-fusion"},
    [OP_ATT_FWD] = {"attention_fwd", 1e-4, "only with --naive-attention"},
    [OP_ATT_BWD] = {"attention_bwd", 1e-4, "only with --naive-attention"},
};
const int gptc_op_ninfos = NOPS;

static const size_t k_slot[NOPS] = {
    [OP_GELU_FWD] = GPTC_KERNEL_SLOT(gelu_fwd),
    [OP_GELU_BWD] = GPTC_KERNEL_SLOT(gelu_bwd),
    [OP_LN_FWD] = GPTC_KERNEL_SLOT(layernorm_fwd),
    [OP_LN_BWD] = GPTC_KERNEL_SLOT(layernorm_bwd),
    [OP_RES_LN_FWD] = GPTC_KERNEL_SLOT(residual_layernorm_fwd),
    [OP_LN_BWD_RES] = GPTC_KERNEL_SLOT(layernorm_bwd_residual),
    [OP_ATT_FWD] = GPTC_KERNEL_SLOT(attention_fwd),
    [OP_ATT_BWD] = GPTC_KERNEL_SLOT(attention_bwd),
};

static int op_index(const char *name) {
    for (int i = 0; name && i < NOPS; i++)
        if (strcmp(name, gptc_op_infos[i].name) == 0) return i;
    return -1;
}

/* Whether the run's training step calls op. */
static bool op_runs(int op, const gptc_op_run *r) {
    switch (op) {
    case OP_GELU_FWD: case OP_GELU_BWD: return r->gelu == GPTC_GELU_KIND_TANH;
    case OP_LN_FWD: return true;
    case OP_LN_BWD: return !r->fuse;
    case OP_RES_LN_FWD: case OP_LN_BWD_RES: return r->fuse;
    default: return r->naive_attention;
    }
}

/* ---------------------------------------------------------------- the shape contract */

/* One call's shape against the contract; where says which call ("the training step", "sampling"). */
static gptc_status check_shape(const char *lib, const char *op, const gptc_op_impl *im, int64_t n, const char *nwhat,
                               int C, int T, int HS, const char *where) {
    const gptc_op_contract *c = &im->contract;
    const char *fmt = "--op-plugin %s: %s (%s) %s, but %s calls it with %s: the plugin's shape contract does not fit "
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
    switch (op) {
    case OP_GELU_FWD: case OP_GELU_BWD:
        st = check_shape(lib, name, im, BT * 4 * r->C, "B*T*4C", 0, 0, 0, step);
        if (!st && op == OP_GELU_FWD && r->decode) st = check_shape(lib, name, im, 4 * (int64_t)r->C, "4C", 0, 0, 0, "sampling");
        break;
    case OP_ATT_FWD: case OP_ATT_BWD:
        st = check_shape(lib, name, im, r->B, "B", r->C, r->T, r->C / r->NH, step);
        break;
    default:
        st = check_shape(lib, name, im, BT, "B*T", r->C, 0, 0, step);
        if (!st && op == OP_LN_FWD && r->decode) st = check_shape(lib, name, im, 1, "1 row", r->C, 0, 0, "sampling");
    }
    return st;
}

/* ---------------------------------------------------------------- probes */

#define PROBE_CAP ((int64_t)1 << 20) /* elements of the largest probe operand (rows x C for the LayerNorms) */
#define GUARD 16                      /* floats after every buffer, checked after each call */
/* The guard's words: quiet NaNs whose payload differs per buffer and word, so that even a kernel that
 * runs past its input's end (reading the guard) into its output's is caught. */
#define SENTINEL(b, i) (0x7fc00000u | (uint32_t)(((b) * GUARD + (i) + 1) & 0x3fffff))
#define MAXBUF 32

typedef struct probe {
    gptc_rng rng;
    float *bufs[MAXBUF];
    int nbufs;
    bool nomem;
    double err;           /* the largest error so far */
    const char *worst;    /* its output */
    const char *overrun;  /* an output written past its end, or NULL */
} probe;

static float *buf(probe *p, size_t n) {
    float *b = p->nbufs < MAXBUF ? malloc(sizeof(float) * (n + GUARD)) : NULL;
    if (!b) {
        p->nomem = true;
        return NULL;
    }
    for (size_t i = 0; i < GUARD; i++) {
        uint32_t s = SENTINEL(p->nbufs, i);
        memcpy(b + n + i, &s, sizeof s);
    }
    p->bufs[p->nbufs++] = b;
    return b;
}

/* uniform in [lo, hi) */
static float *rnd(probe *p, size_t n, double lo, double hi) {
    float *b = buf(p, n);
    for (size_t i = 0; b && i < n; i++) b[i] = (float)(lo + (hi - lo) * gptc_rng_uniform(&p->rng));
    return b;
}

static float *copy(probe *p, const float *x, size_t n) {
    float *b = x ? buf(p, n) : NULL;
    if (b) memcpy(b, x, sizeof(float) * n);
    return b;
}

static bool guard_intact(const probe *p, const float *b, size_t n) {
    int k = 0;
    while (k < p->nbufs && p->bufs[k] != b) k++;
    for (size_t i = 0; i < GUARD; i++) {
        uint32_t s;
        memcpy(&s, b + n + i, sizeof s);
        if (s != SENTINEL(k, i)) return false;
    }
    return true;
}

/* The error of output `what` (got against want, n floats; with T > 0 only the causal half of
 * (rows of T) x T blocks, key <= query). */
static void compare(probe *p, const char *what, const float *got, const float *want, size_t n, int T) {
    if (!guard_intact(p, got, n) && !p->overrun) p->overrun = what;
    double diff = 0, scale = 1;
    for (size_t i = 0; i < n; i++) {
        if (T > 0 && (int)(i % T) > (int)((i / T) % T)) continue;
        double d = fabs((double)got[i] - want[i]);
        if (!(d <= diff)) diff = isnan(d) || isinf(d) ? INFINITY : d; /* NaN or inf: infinite */
        if (fabs(want[i]) > scale) scale = fabs(want[i]);
    }
    double e = diff / scale;
    if (e > p->err || !p->worst) {
        p->err = e;
        p->worst = what;
    }
}

/* A probe size for a run's size n: n itself up to cap, else at most cap with n's remainder modulo
 * 64 x mult kept. */
static int64_t probe_size(int64_t n, int64_t cap, int64_t mult) {
    if (n <= cap) return n;
    int64_t step = 64 * (mult > 1 ? mult : 1), r = n % step;
    int64_t k = cap > r ? (cap - r) / step : 0, s = r + k * step;
    return s > 0 ? s : step;
}

static void run_probe(probe *p, int op, gptc_op_fn fn, const gptc_op_run *r, const gptc_op_contract *c) {
    const gptc_kernels *ref = gptc_kernels_ref();
    int C = r->C;
    if (op == OP_GELU_FWD || op == OP_GELU_BWD) {
        size_t n = (size_t)probe_size((int64_t)r->B * r->T * 4 * C, PROBE_CAP, c->n_multiple);
        float *inp = rnd(p, n, -6, 6), *dout = rnd(p, n, -1, 1), *a = rnd(p, n, -1, 1), *b = copy(p, a, n);
        if (p->nomem) return;
        if (op == OP_GELU_FWD) {
            fn.gelu_fwd(a, inp, n);
            ref->gelu_fwd(b, inp, n);
            compare(p, "out", a, b, n, 0);
        } else {
            fn.gelu_bwd(a, inp, dout, n);
            ref->gelu_bwd(b, inp, dout, n);
            compare(p, "dinp", a, b, n, 0);
        }
        return;
    }
    if (op == OP_ATT_FWD || op == OP_ATT_BWD) {
        int B = c->n_multiple > 1 ? (int)c->n_multiple : 1, T = r->T, NH = r->NH; /* the contract held: B divides */
        size_t btc = (size_t)B * T * C, att = (size_t)B * NH * T * T;
        float *qkv = rnd(p, 3 * btc, -1, 1), *dout = rnd(p, btc, -1, 1);
        float *out_r = buf(p, btc), *pre_r = buf(p, att), *att_r = buf(p, att);
        if (p->nomem) return;
        memset(pre_r, 0, sizeof(float) * att);
        memset(att_r, 0, sizeof(float) * att);
        ref->attention_fwd(out_r, pre_r, att_r, qkv, B, T, C, NH);
        if (op == OP_ATT_FWD) {
            float *out = rnd(p, btc, -1, 1), *pre = rnd(p, att, -1, 1), *at = rnd(p, att, -1, 1);
            if (p->nomem) return;
            fn.attention_fwd(out, pre, at, qkv, B, T, C, NH);
            compare(p, "out", out, out_r, btc, 0);
            compare(p, "preatt", pre, pre_r, att, T);
            compare(p, "att", at, att_r, att, T);
        } else {
            float *dq = rnd(p, 3 * btc, -1, 1), *dq_r = copy(p, dq, 3 * btc);
            float *s1 = buf(p, att), *s2 = buf(p, att), *s3 = buf(p, att), *s4 = buf(p, att);
            if (p->nomem) return;
            fn.attention_bwd(dq, s1, s2, dout, qkv, att_r, B, T, C, NH);
            ref->attention_bwd(dq_r, s3, s4, dout, qkv, att_r, B, T, C, NH);
            compare(p, "dqkv", dq, dq_r, 3 * btc, 0);
        }
        return;
    }
    /* the LayerNorms: N rows of C */
    int64_t mult = c->n_multiple;
    int N = (int)probe_size((int64_t)r->B * r->T, PROBE_CAP / C > 0 ? PROBE_CAP / C : 1, mult);
    size_t nc = (size_t)N * C;
    float *x = rnd(p, nc, -2, 2), *w = rnd(p, C, 0.5, 1.5), *bias = rnd(p, C, -0.5, 0.5);
    float *skip = rnd(p, nc, -1, 1), *dout = rnd(p, nc, -1, 1);
    float *res_r = buf(p, nc), *out_r = buf(p, nc), *mean_r = buf(p, N), *rstd_r = buf(p, N);
    if (p->nomem) return;
    for (int i = 0; i < N; i++) { /* rows with their own offset and spread */
        float off = (float)(4 * gptc_rng_uniform(&p->rng) - 2), sc = (float)(0.2 + 2 * gptc_rng_uniform(&p->rng));
        for (int j = 0; j < C; j++) x[(size_t)i * C + j] = off + sc * x[(size_t)i * C + j];
    }
    ref->residual_layernorm_fwd(res_r, out_r, mean_r, rstd_r, x, skip, w, bias, N, C);
    if (op == OP_LN_FWD || op == OP_RES_LN_FWD) {
        float *res = rnd(p, nc, -1, 1), *out = rnd(p, nc, -1, 1), *mean = rnd(p, N, -1, 1), *rstd = rnd(p, N, -1, 1);
        float *out2 = buf(p, nc), *mean2 = buf(p, N), *rstd2 = buf(p, N);
        if (p->nomem) return;
        if (op == OP_LN_FWD) {
            fn.layernorm_fwd(out, mean, rstd, res_r, w, bias, N, C);
            ref->layernorm_fwd(out2, mean2, rstd2, res_r, w, bias, N, C);
        } else {
            fn.residual_layernorm_fwd(res, out, mean, rstd, x, skip, w, bias, N, C);
            ref->residual_layernorm_fwd(res_r, out2, mean2, rstd2, x, skip, w, bias, N, C);
            compare(p, "res", res, res_r, nc, 0);
        }
        compare(p, "out", out, out2, nc, 0);
        compare(p, "mean", mean, mean2, N, 0);
        compare(p, "rstd", rstd, rstd2, N, 0);
        return;
    }
    /* backward: dinp, dw, db start from the same random values on both sides */
    float *dinp = rnd(p, nc, -1, 1), *dw = rnd(p, C, -1, 1), *db = rnd(p, C, -1, 1);
    float *dinp_r = copy(p, dinp, nc), *dw_r = copy(p, dw, C), *db_r = copy(p, db, C);
    if (p->nomem) return;
    if (op == OP_LN_BWD) {
        fn.layernorm_bwd(dinp, dw, db, dout, res_r, w, mean_r, rstd_r, N, C);
        ref->layernorm_bwd(dinp_r, dw_r, db_r, dout, res_r, w, mean_r, rstd_r, N, C);
    } else {
        fn.layernorm_bwd_residual(dinp, dw, db, skip, dout, res_r, w, mean_r, rstd_r, N, C);
        ref->layernorm_bwd_residual(dinp_r, dw_r, db_r, skip, dout, res_r, w, mean_r, rstd_r, N, C);
    }
    compare(p, "dinp", dinp, dinp_r, nc, 0);
    compare(p, "dw", dw, dw_r, C, 0);
    compare(p, "db", db, db_r, C, 0);
    if (op == OP_LN_BWD_RES) { /* and without a skip gradient (dskip NULL: ln_f's backward) */
        float *d2 = rnd(p, nc, -1, 1), *d2_r = copy(p, d2, nc);
        if (p->nomem) return;
        fn.layernorm_bwd_residual(d2, dw, db, NULL, dout, res_r, w, mean_r, rstd_r, N, C);
        ref->layernorm_bwd_residual(d2_r, dw_r, db_r, NULL, dout, res_r, w, mean_r, rstd_r, N, C);
        compare(p, "dinp (dskip NULL)", d2, d2_r, nc, 0);
    }
}

static gptc_status probe_op(int op, gptc_op_fn fn, const gptc_op_run *r, const gptc_op_contract *c, double *err,
                            const char **what) {
    probe p = {.err = 0};
    gptc_rng_seed(&p.rng, 0x9e3779b97f4a7c15ull + (uint64_t)op);
    run_probe(&p, op, fn, r, c);
    for (int i = 0; i < p.nbufs; i++) free(p.bufs[i]);
    *err = p.err;
    *what = p.worst ? p.worst : "";
    if (p.nomem) return gptc_fail(GPTC_ERR_NOMEM, "%s: out of memory for the probe inputs", gptc_op_infos[op].name);
    if (p.overrun) {
        *what = p.overrun;
        return gptc_fail(GPTC_ERR_STATE, "%s wrote past the end of its output %s", gptc_op_infos[op].name, p.overrun);
    }
    return GPTC_OK;
}

gptc_status gptc_op_probe(const char *op, gptc_op_fn fn, const gptc_op_run *run, const gptc_op_contract *contract,
                          double *err, double *tol, const char **what) {
    int i = op_index(op);
    if (i < 0) return gptc_fail(GPTC_ERR_ARG, "%s: not an operator a plugin can replace", op ? op : "(null)");
    gptc_op_contract none = {0};
    *tol = gptc_op_infos[i].tol;
    return probe_op(i, fn, run, contract ? contract : &none, err, what);
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

/* One library: open, entry, version, names; then each operator the run calls: contract, probe, overlay.
 * who[op] records which library gave an operator (duplicates are refused). */
static gptc_status load_one(gptc_op_plugins *s, const char *path, const gptc_op_run *r, char who[][256]) {
    char local[4200];
    snprintf(local, sizeof local, "%s%s", strchr(path, '/') ? "" : "./", path); /* a bare name is a file here */
    void *h = dlopen(local, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *e = dlerror();
        return gptc_fail(GPTC_ERR_ARG, "--op-plugin %s: cannot load it: %s", path, e ? e : "dlopen failed");
    }
    gptc_status st = GPTC_OK;
    void *sym = dlsym(h, GPTC_OP_PLUGIN_ENTRY);
    gptc_op_plugin_entry_fn entry;
    memcpy(&entry, &sym, sizeof entry);
    const gptc_op_plugin *pl = entry ? entry(GPTC_OP_ABI_VERSION) : NULL;
    if (!entry) {
        st = gptc_fail(GPTC_ERR_ARG, "--op-plugin %s: not a gptc operator plugin (no %s symbol); build it against "
                       "include/gptc_op_plugin.h (see docs/extending.md)", path, GPTC_OP_PLUGIN_ENTRY);
        goto fail;
    }
    if (!pl) {
        st = gptc_fail(GPTC_ERR_ARG, "--op-plugin %s: declined this gptc's operator ABI version %u; rebuild it against "
                       "this gptc's include/gptc_op_plugin.h", path, GPTC_OP_ABI_VERSION);
        goto fail;
    }
    if (pl->abi_version != GPTC_OP_ABI_VERSION) {
        st = gptc_fail(GPTC_ERR_ARG, "--op-plugin %s: built for operator ABI version %u, but this gptc speaks version %u; "
                       "rebuild it against this gptc's include/gptc_op_plugin.h", path, pl->abi_version, GPTC_OP_ABI_VERSION);
        goto fail;
    }
    const char *pname = pl->name && *pl->name ? pl->name : base_name(path);
    if (pl->nimpls < 1 || !pl->impls) {
        st = gptc_fail(GPTC_ERR_ARG, "--op-plugin %s: registers no operator", path);
        goto fail;
    }
    int used = 0;
    for (int i = 0; i < pl->nimpls; i++) {
        const gptc_op_impl *im = &pl->impls[i];
        int op = op_index(im->op);
        if (op < 0) {
            char names[256] = "";
            for (int j = 0; j < NOPS; j++)
                snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", j ? ", " : "", gptc_op_infos[j].name);
            st = gptc_fail(GPTC_ERR_ARG, "--op-plugin %s: registers operator '%s', which a plugin cannot replace (these "
                           "can: %s)", path, im->op ? im->op : "(null)", names);
            goto fail;
        }
        const char *name = gptc_op_infos[op].name;
        if (!im->fn.any || !im->name || !*im->name || strlen(im->name) > 64) {
            st = gptc_fail(GPTC_ERR_ARG, "--op-plugin %s: %s has no %s", path, name,
                           !im->fn.any ? "function" : "implementation name (1 to 64 characters)");
            goto fail;
        }
        if (who[op][0]) {
            st = gptc_fail(GPTC_ERR_ARG, "--op-plugin %s: %s is already replaced by %s; give one plugin per operator", path,
                           name, who[op]);
            goto fail;
        }
        if (!op_runs(op, r)) {
            if (!r->quiet)
                gptc_warn("--op-plugin %s: %s (%s) is not called by this run (it runs %s); skipped", path, name, im->name,
                          gptc_op_infos[op].runs_when);
            continue;
        }
        if ((st = check_contract(path, op, im, r))) goto fail;
        double err, tol = gptc_op_infos[op].tol;
        const char *what;
        if ((st = probe_op(op, im->fn, r, &im->contract, &err, &what))) {
            st = gptc_fail_prefix(st, "--op-plugin %s: %s (%s)", path, name, im->name);
            goto fail;
        }
        if (!(err <= tol)) {
            st = gptc_fail(GPTC_ERR_ARG, "--op-plugin %s: %s (%s) disagrees with the reference: max error %.3g in %s, "
                           "tolerance %.3g (probe at the run's shapes); fix the plugin or leave it out", path, name,
                           im->name, err, what, tol);
            goto fail;
        }
        char label[160];
        snprintf(label, sizeof label, "%s[plugin:%s]", name, im->name);
        const char *l = intern(label);
        if (!l) {
            st = gptc_fail(GPTC_ERR_NOMEM, "out of memory");
            goto fail;
        }
        memcpy((char *)&s->table + k_slot[op] * sizeof(void *), &im->fn.any, sizeof(void *));
        s->labels[k_slot[op]] = l;
        snprintf(who[op], 256, "%s", path);
        size_t k = strlen(s->summary);
        snprintf(s->summary + k, sizeof s->summary - k, "%s%s = %s:%s (error %.2g, tolerance %.2g)", k ? ", " : "", name,
                 pname, im->name, err, tol);
        used++;
    }
    if (!used) dlclose(h); /* nothing of it in the table */
    return GPTC_OK;          /* otherwise kept open: the table points into it until the process ends */
fail:
    dlclose(h);
    return st;
}

gptc_status gptc_op_plugins_load(const char *paths, const gptc_kernels *base, const gptc_op_run *run,
                                 gptc_op_plugins **out) {
    *out = NULL;
    gptc_op_plugins *s = calloc(1, sizeof *s);
    if (!s) return gptc_fail(GPTC_ERR_NOMEM, "out of memory");
    s->table = *base;
    s->table.labels = s->labels;
    char who[NOPS][256];
    memset(who, 0, sizeof who);
    gptc_status st = GPTC_OK;
    for (const char *p = paths ? paths : ""; *p;) {
        size_t len = strcspn(p, ",:");
        if (len) {
            char path[4096];
            if (len >= sizeof path) {
                st = gptc_fail(GPTC_ERR_ARG, "--op-plugin %.64s...: path too long", p);
                break;
            }
            memcpy(path, p, len);
            path[len] = 0;
            if ((st = load_one(s, path, run, who))) break;
        }
        p += len + (p[len] != 0);
    }
    if (st) {
        free(s);
        return st;
    }
    *out = s;
    g_active = s;
    return GPTC_OK;
}

const gptc_kernels *gptc_op_plugins_table(const gptc_op_plugins *s) { return &s->table; }
const char *gptc_op_plugins_summary(const gptc_op_plugins *s) { return s ? s->summary : ""; }
const char *gptc_op_plugins_active(void) { return g_active ? g_active->summary : ""; }

void gptc_op_plugins_free(gptc_op_plugins *s) {
    if (!s) return;
    if (g_active == s) g_active = NULL;
    free(s);
}
