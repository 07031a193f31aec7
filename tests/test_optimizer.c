/* test_optimizer.c — the optimizer interface (optim/optimizer.h) and its two kinds: the registry
 * (find, names, state bytes); AdamW through the interface bit for bit equal to today's
 * gptc_adamw_update / _range and to the former tensor-by-tensor loop, on the whole arena and on ranges
 * that cut tensors; Lion against a float64 reference written here (with a deliberately wrong reference
 * shown to be caught), Lion on ranges equal to Lion on the whole arena (ZeRO-1), the same bits for any
 * thread count; check() refusing bad beta1/beta2/eps with a message naming the option; each update's
 * profiler span named after its kind, its FLOPs and bytes counting the range's parameters only. */
#include "test.h"
#include "optim/optim.h"
#include "optim/optimizer.h"
#include "core/profile.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

/* the tiny preset with a 256-token vocabulary, parameters initialised (as test_dist.c's) */
static void tiny_model(gptc_model *m) {
    gptc_model_config cfg;
    gptc_model_preset("tiny", &cfg);
    cfg.vocab = 256;
    CHECK_OK(gptc_model_init(m, &cfg));
    gptc_model_init_weights(m, 7);
}

static const gptc_optimizer_kind *kind(const char *name) {
    const gptc_optimizer_kind *k = gptc_optimizer_find(name);
    CHECK_MSG(k != NULL, "optimizer %s not registered", name);
    return k;
}

static int same_bits(const float *a, const float *b, size_t n) { return memcmp(a, b, n * sizeof(float)) == 0; }

/* ---------------------------------------------------------------- the registry */
TEST(optimizer_registry_find_names_state_bytes) {
    const gptc_optimizer_kind *adamw = kind("adamw"), *lion = kind("lion");
    if (!adamw || !lion) return;
    CHECK(gptc_noptimizers >= 2);
    CHECK(gptc_optimizers[0] == adamw); /* the default */
    CHECK(gptc_optimizer_find("adam") == NULL && gptc_optimizer_find("") == NULL && gptc_optimizer_find(NULL) == NULL);
    CHECK(gptc_optimizer_find("AdamW") == NULL && gptc_optimizer_find("lion ") == NULL);
    /* the state buffers the checkpoints store */
    CHECK_EQ_INT(adamw->nstates, 2);
    CHECK(strcmp(adamw->state_names[0], "exp_avg") == 0 && strcmp(adamw->state_names[1], "exp_avg_sq") == 0);
    CHECK_EQ_INT(lion->nstates, 1);
    CHECK(strcmp(lion->state_names[0], "exp_avg") == 0);
    /* every kind complete, found under its own name, its state names distinct; names = the registry joined */
    char joined[256] = "";
    for (int i = 0; i < gptc_noptimizers; i++) {
        const gptc_optimizer_kind *k = gptc_optimizers[i];
        CHECK(k->name && k->help && k->check && k->update);
        CHECK(gptc_optimizer_find(k->name) == k);
        CHECK(k->nstates >= 1 && k->nstates <= GPTC_OPTIM_MAX_STATES);
        for (int s = 0; s < k->nstates; s++) {
            CHECK(k->state_names[s] && k->state_names[s][0]);
            for (int r = 0; r < s; r++) CHECK(strcmp(k->state_names[r], k->state_names[s]) != 0);
        }
        if (i) strcat(joined, ", ");
        strcat(joined, k->name);
    }
    const char *names = gptc_optimizer_names();
    CHECK_MSG(strcmp(names, joined) == 0, "names \"%s\", registry \"%s\"", names, joined);
    CHECK_MSG(strncmp(names, "adamw, lion", strlen("adamw, lion")) == 0, "names \"%s\"", names);
    CHECK(gptc_optimizer_names() == names); /* built once */
    /* state bytes: nstates floats per parameter */
    gptc_model m;
    tiny_model(&m);
    size_t n = m.num_floats;
    for (int i = 0; i < gptc_noptimizers; i++) {
        const gptc_optimizer_kind *k = gptc_optimizers[i];
        CHECK(gptc_optimizer_state_bytes(k, n) == (size_t)k->nstates * gptc_alloc_block_bytes(n * sizeof(float)));
        CHECK(gptc_optimizer_state_bytes(k, 0) == 0);
    }
    CHECK(gptc_optimizer_state_bytes(adamw, n) == 2 * gptc_optimizer_state_bytes(lion, n));
    CHECK(gptc_optimizer_state_bytes(adamw, n / 3) == 2 * gptc_alloc_block_bytes(n / 3 * sizeof(float))); /* a shard */
    gptc_model_free(&m);
}

/* ---------------------------------------------------------------- check() */
/* o with one field changed must be refused naming `option`, with the value and without a CLI flag */
static void refused(const gptc_optimizer_kind *k, const gptc_train_options *o, const char *option, const char *what) {
    gptc_status st = k->check(o);
    const char *msg = gptc_last_error();
    CHECK_MSG(st == GPTC_ERR_ARG, "%s: %s accepted", k->name, what);
    CHECK_MSG(strstr(msg, option) == msg, "%s, %s: message \"%s\" does not start with %s", k->name, what, msg, option);
    CHECK_MSG(strstr(msg, "--") == NULL, "%s, %s: message \"%s\" names a CLI flag", k->name, what, msg);
}

TEST(optimizer_check_refuses_bad_hyperparameters) {
    const float bad_beta[] = {1.5f, 1.0f, -0.1f, NAN, INFINITY};
    for (int i = 0; i < gptc_noptimizers; i++) {
        const gptc_optimizer_kind *k = gptc_optimizers[i];
        gptc_train_options o;
        gptc_train_options_default(&o);
        CHECK_OK(k->check(&o));
        o.beta1 = 0;
        o.beta2 = 0.999f;
        CHECK_OK(k->check(&o)); /* the interval's ends that are in */
        for (size_t b = 0; b < sizeof bad_beta / sizeof bad_beta[0]; b++) {
            char what[64];
            gptc_train_options_default(&o);
            o.beta1 = bad_beta[b];
            snprintf(what, sizeof what, "beta1 %g", bad_beta[b]);
            refused(k, &o, "beta1", what);
            gptc_train_options_default(&o);
            o.beta2 = bad_beta[b];
            snprintf(what, sizeof what, "beta2 %g", bad_beta[b]);
            refused(k, &o, "beta2", what);
        }
        gptc_train_options_default(&o);
        o.beta1 = 1.5f;
        CHECK(k->check(&o) == GPTC_ERR_ARG && strstr(gptc_last_error(), "beta1 1.5: must be in [0, 1)"));
    }
    /* AdamW reads eps; Lion does not */
    const gptc_optimizer_kind *adamw = kind("adamw"), *lion = kind("lion");
    if (!adamw || !lion) return;
    const float bad_eps[] = {0.0f, -1e-8f, NAN, INFINITY};
    for (size_t e = 0; e < sizeof bad_eps / sizeof bad_eps[0]; e++) {
        gptc_train_options o;
        gptc_train_options_default(&o);
        o.eps = bad_eps[e];
        char what[64];
        snprintf(what, sizeof what, "eps %g", bad_eps[e]);
        refused(adamw, &o, "eps", what);
        CHECK_MSG(lion->check(&o) == GPTC_OK, "lion refuses %s, which it does not read", what);
    }
}

/* ---------------------------------------------------------------- AdamW */
/* The loop gptc_adamw_update_range ran before the interface (kept here as the yardstick): one kernel
 * call per tensor piece in [lo, hi), weight decay on the decay tensors. */
static void adamw_former(gptc_model *model, const float *g, float *m, float *v, size_t lo, size_t hi, const gptc_adamw *h,
                         float lr, float grad_scale, int t) {
    for (int i = 0; i < model->ntensors; i++) {
        const gptc_tensor_desc *d = &model->tensors[i];
        size_t a = d->offset > lo ? d->offset : lo, b = d->offset + d->numel < hi ? d->offset + d->numel : hi;
        if (a >= b) continue;
        model->k->adamw(model->params + a, g + (a - lo), m + (a - lo), v + (a - lo), b - a, lr, h->beta1, h->beta2,
                        h->eps, d->decay ? h->weight_decay : 0.0f, grad_scale, t);
    }
}

/* Cuts [0, n) at lo and hi, both strictly inside tensors (not at their first float). */
static void cuts_inside_tensors(const gptc_model *m, size_t *lo, size_t *hi) {
    const gptc_tensor_desc *a = &m->tensors[3], *b = &m->tensors[m->ntensors - 3];
    *lo = a->offset + a->numel / 2 + 1;
    *hi = b->offset + b->numel / 3 + 5;
    CHECK(a->numel > 2 && b->numel > 6 && *lo < *hi);
}

TEST(optimizer_adamw_matches_gptc_adamw_update_bitwise) {
    const gptc_optimizer_kind *adamw = kind("adamw");
    if (!adamw) return;
    gptc_model m;
    tiny_model(&m);
    size_t n = m.num_floats;
    gptc_rng rng;
    gptc_rng_seed(&rng, 11);
    float *g = test_randn_f(&rng, n, 0.01), *p0 = test_copy_f(m.params, n);
    /* betas unequal and eps not the default, so a swapped or dropped option shows */
    gptc_train_options o;
    gptc_train_options_default(&o);
    o.beta1 = 0.8f;
    o.beta2 = 0.97f;
    o.eps = 1e-6f;
    const float wd = 0.1f, scale = 0.7f;
    gptc_adamw h = {.beta1 = o.beta1, .beta2 = o.beta2, .eps = o.eps, .weight_decay = wd};
    size_t lo, hi;
    cuts_inside_tensors(&m, &lo, &hi);
    const size_t cut[4] = {0, lo, hi, n};
    /* each run: params after 3 steps (p), its moments (st[0], st[1]) */
    float *p[4], *st[4][2];
    for (int run = 0; run < 4; run++) {
        memcpy(m.params, p0, n * sizeof(float));
        st[run][0] = test_zeros_f(n);
        st[run][1] = test_zeros_f(n);
        for (int t = 1; t <= 3; t++) {
            float lr = 1e-3f * (float)t;
            if (run == 0) { /* the wrapper on the whole arena */
                m.grads = g;
                gptc_adamw_update(&m, st[run][0], st[run][1], &h, lr, scale, t);
                m.grads = NULL;
            } else if (run == 1) { /* the interface on the whole arena */
                float *s[2] = {st[run][0], st[run][1]};
                adamw->update(&m, &o, g, (gptc_ostate[]){gptc_ostate_fp32(s, 2, 0, n)}, 0, n, lr, wd, scale, t);
            } else
                for (int r = 0; r < 3; r++) { /* ranges cutting tensors: the interface, then the wrapper */
                    float *s[2] = {st[run][0] + cut[r], st[run][1] + cut[r]};
                    if (run == 2)
                        adamw->update(&m, &o, g + cut[r], (gptc_ostate[]){gptc_ostate_fp32(s, 2, cut[r], cut[r + 1])}, cut[r],
                                      cut[r + 1], lr, wd, scale, t);
                    else gptc_adamw_update_range(&m, g + cut[r], s[0], s[1], cut[r], cut[r + 1], &h, lr, scale, t);
                }
        }
        p[run] = test_copy_f(m.params, n);
    }
    /* the former loop, on the same ranges */
    float *fm = test_zeros_f(n), *fv = test_zeros_f(n);
    memcpy(m.params, p0, n * sizeof(float));
    for (int t = 1; t <= 3; t++)
        for (int r = 0; r < 3; r++)
            adamw_former(&m, g + cut[r], fm + cut[r], fv + cut[r], cut[r], cut[r + 1], &h, 1e-3f * (float)t, scale, t);
    for (int run = 0; run < 4; run++) {
        CHECK_MSG(same_bits(p[run], m.params, n), "run %d: parameters differ from the former loop", run);
        CHECK_MSG(same_bits(st[run][0], fm, n), "run %d: exp_avg differs", run);
        CHECK_MSG(same_bits(st[run][1], fv, n), "run %d: exp_avg_sq differs", run);
    }
    CHECK(!same_bits(p[1], p0, n)); /* it moved */
    /* padding (floats of no tensor) untouched: inside-tensor flags from the layout */
    unsigned char *in = calloc(n, 1);
    for (int i = 0; i < m.ntensors; i++) memset(in + m.tensors[i].offset, 1, m.tensors[i].numel);
    for (size_t i = 0; i < n; i++)
        if (!in[i]) CHECK_MSG(p[1][i] == p0[i] && st[1][0][i] == 0 && st[1][1][i] == 0, "padding float %zu changed", i);
    free(in);
    for (int run = 0; run < 4; run++) free(p[run]), free(st[run][0]), free(st[run][1]);
    free(fm), free(fv), free(g), free(p0);
    gptc_model_free(&m);
}

/* ---------------------------------------------------------------- Lion */
/* The float64 reference: p, mom (num_floats doubles, the arena's layout), mag (a bound on the size of
 * the terms summed into mom, for its tolerance), tie (1 where some step's c was within 1e-5 of the
 * size of its terms from 0: float rounding may take the other sign there, so p is not compared). */
typedef struct lion_ref {
    double *p, *mom, *mag;
    unsigned char *tie;
} lion_ref;

static void lion_ref_init(lion_ref *r, const float *p0, size_t n) {
    r->p = malloc(n * sizeof(double));
    r->mom = calloc(n, sizeof(double));
    r->mag = calloc(n, sizeof(double));
    r->tie = calloc(n, 1);
    for (size_t i = 0; i < n; i++) r->p[i] = p0[i];
}

static void lion_ref_free(lion_ref *r) { free(r->p), free(r->mom), free(r->mag), free(r->tie); }

/* One Lion step by the paper's pseudo-code on every tensor of the arena (padding left alone): weight
 * decay on the 2-D tensors, or on all of them when decay_all (the deliberately wrong variant). The
 * hyper-parameters are the float values the optimizer is given, widened. */
static void lion_ref_step(const gptc_model *m, lion_ref *r, const float *g, double lr, double b1, double b2, double wd,
                          double scale, int decay_all) {
    for (int i = 0; i < m->ntensors; i++) {
        const gptc_tensor_desc *d = &m->tensors[i];
        double dw = d->ndim == 2 || decay_all ? wd : 0;
        for (size_t j = d->offset; j < d->offset + d->numel; j++) {
            double gj = (double)g[j] * scale;
            double c = b1 * r->mom[j] + (1 - b1) * gj;
            if (fabs(c) < 1e-5 * (fabs(b1 * r->mom[j]) + fabs((1 - b1) * gj))) r->tie[j] = 1; /* 0 from 0 terms is exact */
            double update = c > 0 ? 1 : c < 0 ? -1 : 0;
            r->p[j] = r->p[j] - lr * (update + dw * r->p[j]);
            r->mom[j] = b2 * r->mom[j] + (1 - b2) * gj;
            r->mag[j] = b2 * r->mag[j] + (1 - b2) * fabs(gj);
        }
    }
}

/* Floats out of tolerance: p within tol*(|p_ref| + lr_max) (not where tie), mom within tol*mag; the
 * worst ratio of error to tolerance goes to *worst. */
static size_t lion_mismatches(const float *p, const float *mom, const lion_ref *r, size_t n, double lr_max, double tol,
                              double *worst) {
    size_t bad = 0;
    *worst = 0;
    for (size_t i = 0; i < n; i++) {
        double ep = fabs(p[i] - r->p[i]) / (tol * (fabs(r->p[i]) + lr_max));
        double em = fabs(mom[i] - r->mom[i]), tm = tol * r->mag[i];
        em = em == 0 ? 0 : tm > 0 ? em / tm : INFINITY;
        if (r->tie[i]) ep = 0;
        if (!(ep <= 1 && em <= 1)) bad++;
        if (!(ep <= *worst)) *worst = ep;
        if (!(em <= *worst)) *worst = em;
    }
    return bad;
}

#define LION_STEPS 4
/* relative: 4 steps of a few float roundings (2^-24 each) each stay well inside (the worst float
 * measured at about a quarter of it); a sign taken wrongly moves p by 2 lr, 1e3 tolerances at least */
#define LION_TOL 1e-6

/* Lion's options for these tests: the paper's betas, lr per 1-based step t, a decay large enough that
 * decaying the wrong tensors is far outside the tolerance, a clipping scale that is not 1. */
static void lion_setup(gptc_train_options *o, float *wd, float *scale) {
    gptc_train_options_default(o);
    o->beta1 = 0.9f;
    o->beta2 = 0.99f;
    *wd = 0.5f;
    *scale = 0.37f;
}
static float lion_lr(int t) { return 2e-4f * (float)(LION_STEPS + 1 - t); } /* decaying, as a schedule would */

/* LION_STEPS fresh gradients (each num_floats, padding included) drawn from seed */
static float **lion_grads(size_t n, uint64_t seed) {
    gptc_rng rng;
    gptc_rng_seed(&rng, seed);
    float **g = malloc(LION_STEPS * sizeof(float *));
    for (int t = 0; t < LION_STEPS; t++) g[t] = test_randn_f(&rng, n, 0.01);
    return g;
}
static void free_grads(float **g) {
    for (int t = 0; t < LION_STEPS; t++) free(g[t]);
    free(g);
}

/* floats i of [lo, hi) whose bf16 copy is not the fp32 value rounded (gptc_f32_to_bf16) */
static size_t stale16(const gptc_model *m, size_t lo, size_t hi) {
    size_t bad = 0;
    for (size_t i = lo; i < hi; i++) bad += m->params16[i] != gptc_f32_to_bf16(m->params[i]);
    return bad;
}

/* Under bf16 working weights (m->params16) AdamW writes their copy of the range with the update and says
 * so (the model's p16 range), and gptc_model_params_changed converts the rest of its range only: after an
 * update of [lo, hi) the copy is current there before the call; the floats outside, poisoned, are
 * converted by it; floats inside, poisoned after the update, are left (the call skips them); the range is
 * cleared. Without params16 nothing is marked. */
TEST(optimizer_adamw_writes_the_bf16_copy_with_the_update) {
    const gptc_optimizer_kind *adamw = kind("adamw");
    if (!adamw) return;
    gptc_model m;
    tiny_model(&m);
    const size_t n = m.num_floats;
    size_t lo, hi;
    cuts_inside_tensors(&m, &lo, &hi);
    gptc_rng rng;
    gptc_rng_seed(&rng, 13);
    float *g = test_randn_f(&rng, n, 0.01), *st[2] = {test_zeros_f(n), test_zeros_f(n)};
    gptc_train_options o;
    gptc_train_options_default(&o);
    /* no copy: nothing marked */
    adamw->update(&m, &o, g, (gptc_ostate[]){gptc_ostate_fp32(st, 2, 0, n)}, 0, n, 1e-3f, 0.1f, 1.0f, 1);
    CHECK(m.p16_lo == 0 && m.p16_hi == 0);
    m.params16 = m.be.mem->alloc(n * sizeof(uint16_t), "test bf16 copy");
    CHECK(m.params16 != NULL);
    gptc_model_params_changed(&m, 0, n);
    CHECK_EQ_INT((int)stale16(&m, 0, n), 0);
    /* the whole arena */
    adamw->update(&m, &o, g, (gptc_ostate[]){gptc_ostate_fp32(st, 2, 0, n)}, 0, n, 1e-3f, 0.1f, 1.0f, 2);
    CHECK(m.p16_lo == 0 && m.p16_hi == n);
    CHECK_MSG(stale16(&m, 0, n) == 0, "%zu bf16 values not written with the update", stale16(&m, 0, n));
    gptc_model_params_changed(&m, 0, n);
    CHECK(m.p16_lo == 0 && m.p16_hi == 0);
    /* a range cutting tensors (ZeRO-1's shard, a fused update's layer) */
    float *st_r[2] = {st[0] + lo, st[1] + lo};
    adamw->update(&m, &o, g + lo, (gptc_ostate[]){gptc_ostate_fp32(st_r, 2, lo, hi)}, lo, hi, 1e-3f, 0.1f, 1.0f, 3);
    CHECK(m.p16_lo == lo && m.p16_hi == hi);
    CHECK_EQ_INT((int)stale16(&m, lo, hi), 0);
    for (size_t i = 0; i < lo; i++) m.params16[i] ^= 0x5555;
    for (size_t i = hi; i < n; i++) m.params16[i] ^= 0x5555;
    m.params16[lo] ^= 0x5555, m.params16[hi - 1] ^= 0x5555; /* inside: not converted again */
    gptc_model_params_changed(&m, 0, n);
    CHECK(m.p16_lo == 0 && m.p16_hi == 0);
    CHECK_MSG(stale16(&m, 0, lo) == 0 && stale16(&m, hi, n) == 0, "outside the update's range: not converted");
    CHECK_MSG(stale16(&m, lo, hi) == 2, "inside the update's range: %zu stale, want the 2 poisoned (skipped)",
              stale16(&m, lo, hi));
    m.be.mem->free(m.params16);
    m.params16 = NULL;
    free(g), free(st[0]), free(st[1]);
    gptc_model_free(&m);
}

TEST(optimizer_lion_matches_f64_reference) {
    const gptc_optimizer_kind *lion = kind("lion");
    if (!lion) return;
    gptc_model m;
    tiny_model(&m);
    size_t n = m.num_floats;
    gptc_train_options o;
    float wd, scale;
    lion_setup(&o, &wd, &scale);
    float **g = lion_grads(n, 5), *mom = test_zeros_f(n), *p0 = test_copy_f(m.params, n);
    /* a 1-D and a 2-D tensor get zero gradients at every step: c = 0 there, so sign(c) = 0 and the 1-D
     * one must not move at all, the 2-D one only decay */
    const gptc_tensor_desc *flat = NULL, *mat = NULL;
    for (int i = 0; i < m.ntensors; i++) {
        if (!flat && m.tensors[i].ndim == 1) flat = &m.tensors[i];
        if (!mat && m.tensors[i].ndim == 2) mat = &m.tensors[i];
    }
    CHECK(flat && mat);
    if (!flat || !mat) return;
    for (int t = 0; t < LION_STEPS; t++) {
        memset(g[t] + flat->offset, 0, flat->numel * sizeof(float));
        memset(g[t] + mat->offset, 0, mat->numel * sizeof(float));
    }
    lion_ref ok, wrong_decay, wrong_betas;
    lion_ref_init(&ok, m.params, n);
    lion_ref_init(&wrong_decay, m.params, n);
    lion_ref_init(&wrong_betas, m.params, n);
    float *state[1] = {mom};
    for (int t = 1; t <= LION_STEPS; t++) {
        float lr = lion_lr(t);
        lion->update(&m, &o, g[t - 1], (gptc_ostate[]){gptc_ostate_fp32(state, 1, 0, n)}, 0, n, lr, wd, scale, t);
        lion_ref_step(&m, &ok, g[t - 1], lr, o.beta1, o.beta2, wd, scale, 0);
        lion_ref_step(&m, &wrong_decay, g[t - 1], lr, o.beta1, o.beta2, wd, scale, 1);
        lion_ref_step(&m, &wrong_betas, g[t - 1], lr, o.beta2, o.beta1, wd, scale, 0);
    }
    double lr_max = lion_lr(1), worst;
    size_t bad = lion_mismatches(m.params, mom, &ok, n, lr_max, LION_TOL, &worst), ties = 0;
    for (size_t i = 0; i < n; i++) ties += ok.tie[i];
    CHECK_MSG(bad == 0, "%zu of %zu floats outside tolerance %g (worst %.3g tolerances)", bad, n, LION_TOL, worst);
    CHECK_MSG(same_bits(m.params + flat->offset, p0 + flat->offset, flat->numel), "%s moved on zero gradients", flat->name);
    CHECK_MSG(!same_bits(m.params + mat->offset, p0 + mat->offset, mat->numel), "%s did not decay", mat->name);
    CHECK_MSG(ties <= n / 1000, "%zu near-ties of %zu floats: the comparison skips too much", ties, n);
    /* the comparison can fail: the wrong references are told apart */
    size_t bad_decay = lion_mismatches(m.params, mom, &wrong_decay, n, lr_max, LION_TOL, &worst);
    CHECK_MSG(bad_decay > 0, "weight decay on every tensor not detected");
    size_t bad_betas = lion_mismatches(m.params, mom, &wrong_betas, n, lr_max, LION_TOL, &worst);
    CHECK_MSG(bad_betas > 0, "beta1/beta2 swapped not detected");
    lion_ref_free(&ok), lion_ref_free(&wrong_decay), lion_ref_free(&wrong_betas);
    free_grads(g);
    free(mom), free(p0);
    gptc_model_free(&m);
}

/* LION_STEPS Lion updates of m's params from p0 over the arena cut into `parts` ranges at n*r/parts
 * (not aligned: they fall inside tensors); the momentum is returned (num_floats). */
static float *lion_run(gptc_model *m, const float *p0, float **g, int parts) {
    const gptc_optimizer_kind *lion = gptc_optimizer_find("lion");
    size_t n = m->num_floats;
    gptc_train_options o;
    float wd, scale;
    lion_setup(&o, &wd, &scale);
    float *mom = test_zeros_f(n);
    memcpy(m->params, p0, n * sizeof(float));
    for (int t = 1; t <= LION_STEPS; t++)
        for (int r = 0; r < parts; r++) {
            size_t lo = n * r / parts, hi = n * (r + 1) / parts;
            float *state[1] = {mom + lo};
            lion->update(m, &o, g[t - 1] + lo, (gptc_ostate[]){gptc_ostate_fp32(state, 1, lo, hi)}, lo, hi, lion_lr(t), wd, scale,
                         t);
        }
    return mom;
}

TEST(optimizer_lion_ranges_equal_whole) {
    if (!kind("lion")) return;
    gptc_model m;
    tiny_model(&m);
    size_t n = m.num_floats;
    float **g = lion_grads(n, 6), *p0 = test_copy_f(m.params, n);
    float *mom_whole = lion_run(&m, p0, g, 1), *whole = test_copy_f(m.params, n);
    CHECK(!same_bits(whole, p0, n));
    const int parts[] = {2, 3, 7};
    for (int k = 0; k < 3; k++) {
        /* the cuts fall inside tensors (else this would not test cutting them) */
        int inside = 0;
        for (int r = 1; r < parts[k]; r++) {
            size_t c = n * r / parts[k];
            for (int i = 0; i < m.ntensors; i++) inside |= c > m.tensors[i].offset && c < m.tensors[i].offset + m.tensors[i].numel;
        }
        CHECK(inside);
        float *mom = lion_run(&m, p0, g, parts[k]);
        CHECK_MSG(same_bits(m.params, whole, n), "%d ranges: parameters differ from the whole arena's", parts[k]);
        CHECK_MSG(same_bits(mom, mom_whole, n), "%d ranges: momentum differs from the whole arena's", parts[k]);
        free(mom);
    }
    free(mom_whole), free(whole), free(p0);
    free_grads(g);
    gptc_model_free(&m);
}

/* The tiny model's largest tensors (wte, the MLP's weights: 16384 floats) are split between threads
 * (lion.c keeps tensors under LION_PAR_MIN = 8192 floats on one). */
TEST(optimizer_lion_same_bits_any_thread_count) {
    if (!kind("lion")) return;
    gptc_model m;
    tiny_model(&m);
    size_t n = m.num_floats;
    float **g = lion_grads(n, 8), *p0 = test_copy_f(m.params, n);
    int saved = omp_get_max_threads();
    const int threads[] = {1, 2, 3};
    float *p[3], *mom[3];
    for (int k = 0; k < 3; k++) {
        omp_set_num_threads(threads[k]);
        mom[k] = lion_run(&m, p0, g, 1);
        p[k] = test_copy_f(m.params, n);
    }
    omp_set_num_threads(saved);
    for (int k = 1; k < 3; k++) {
        CHECK_MSG(same_bits(p[k], p[0], n), "%d threads: parameters differ from 1 thread's", threads[k]);
        CHECK_MSG(same_bits(mom[k], mom[0], n), "%d threads: momentum differs from 1 thread's", threads[k]);
    }
    for (int k = 0; k < 3; k++) free(p[k]), free(mom[k]);
    free(p0);
    free_grads(g);
    gptc_model_free(&m);
}

/* ---------------------------------------------------------------- profiler spans */
/* The span named `name` recorded since gptc_prof_start (exactly one expected): its FLOPs and bytes. */
static void one_span(const char *name, double *flops, double *bytes) {
    int found = 0;
    *flops = *bytes = 0;
    for (int i = 0; i < gptc_prof_nthreads(); i++) {
        size_t n;
        int tid, omp;
        const gptc_prof_span *s = gptc_prof_thread_spans(i, &n, &tid, &omp);
        for (size_t j = 0; j < n; j++)
            if (strcmp(s[j].name, name) == 0) {
                found++;
                *flops = s[j].flops, *bytes = s[j].bytes;
                CHECK(s[j].cat == GPTC_PROF_OPT);
            }
    }
    CHECK_MSG(found == 1, "%d spans named %s", found, name);
}

/* Each kind's update is one span named after it, whose FLOPs and bytes are proportional to the
 * parameters it updated: a range cutting tensors (padding excluded) against the whole arena. */
TEST(optimizer_profile_span_counts_the_range) {
    gptc_model m;
    tiny_model(&m);
    size_t n = m.num_floats, lo, hi;
    cuts_inside_tensors(&m, &lo, &hi);
    size_t in_all = 0, in_range = 0; /* tensor floats in the arena, in [lo, hi) */
    for (int i = 0; i < m.ntensors; i++) {
        size_t a = m.tensors[i].offset, b = a + m.tensors[i].numel;
        in_all += b - a;
        if (a < lo) a = lo;
        if (b > hi) b = hi;
        if (a < b) in_range += b - a;
    }
    gptc_rng rng;
    gptc_rng_seed(&rng, 12);
    float *g = test_randn_f(&rng, n, 0.01);
    gptc_train_options o;
    gptc_train_options_default(&o);
    for (int k = 0; k < gptc_noptimizers; k++) {
        const gptc_optimizer_kind *kd = gptc_optimizers[k];
        float *st[GPTC_OPTIM_MAX_STATES];
        for (int s = 0; s < kd->nstates; s++) st[s] = test_zeros_f(n);
        double f_all, b_all, f_range, b_range;
        gptc_prof_start();
        kd->update(&m, &o, g, (gptc_ostate[]){gptc_ostate_fp32(st, kd->nstates, 0, n)}, 0, n, 1e-3f, 0.1f, 1.0f, 1);
        gptc_prof_stop();
        one_span(kd->name, &f_all, &b_all);
        for (int s = 0; s < kd->nstates; s++) st[s] += lo;
        gptc_prof_start();
        kd->update(&m, &o, g + lo, (gptc_ostate[]){gptc_ostate_fp32(st, kd->nstates, lo, hi)}, lo, hi, 1e-3f, 0.1f, 1.0f, 2);
        gptc_prof_stop();
        one_span(kd->name, &f_range, &b_range);
        CHECK_MSG(f_all > 0 && b_all > 0, "%s: span without work", kd->name);
        double want = (double)in_range / (double)in_all;
        CHECK_MSG(fabs(f_range / f_all - want) <= 1e-12 && fabs(b_range / b_all - want) <= 1e-12,
                  "%s: range span %.17g of the whole's FLOPs, %.17g of its bytes; its share of the parameters is %.17g",
                  kd->name, f_range / f_all, b_range / b_all, want);
        for (int s = 0; s < kd->nstates; s++) free(st[s] - lo);
    }
    gptc_prof_free();
    free(g);
    gptc_model_free(&m);
}
