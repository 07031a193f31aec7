/* test_gradcheck.c — every operator's backward against central finite differences, all in double
 * precision (the reference kernels instantiated over double), then the float reference table
 * against the double one, forward and backward, on the same inputs. */
#include "test.h"
#include "core/core.h"
#include "kernels/kernels.h"

#include <stdlib.h>
#include <string.h>

#define REAL double
#define FN(name) ref_f64_##name
#define R_EXP exp
#define R_LOG log
#define R_SQRT sqrt
#define R_TANH tanh
#include "kernels/ref/ref_ops.inc"

static gptc_rng g_rng;

static double *rnd(size_t n, double scale) {
    double *x = malloc(n * sizeof *x);
    for (size_t i = 0; i < n; i++) x[i] = scale * gptc_rng_normal(&g_rng);
    return x;
}
static double *zeros(size_t n) { return calloc(n, sizeof(double)); }
static float *to_f(const double *x, size_t n) {
    float *y = malloc(n * sizeof *y);
    for (size_t i = 0; i < n; i++) y[i] = (float)x[i];
    return y;
}
static double dotd(const double *a, const double *b, size_t n) {
    double s = 0;
    for (size_t i = 0; i < n; i++) s += a[i] * b[i];
    return s;
}
/* largest |analytic - numeric| / max(|numeric|) over the array */
static double fd_err(const double *analytic, const double *numeric, size_t n) {
    return test_rel_err_d(analytic, numeric, n);
}

/* The loss of every check is L = sum(out * proj) for a fixed random proj, so dout = proj. A
 * "forward" callback recomputes L from the current inputs. */
typedef double (*loss_fn)(void *ctx);
static void numeric_grad(loss_fn f, void *ctx, double *x, size_t n, double *g) {
    const double h = 1e-6;
    for (size_t i = 0; i < n; i++) {
        double keep = x[i];
        x[i] = keep + h;
        double lp = f(ctx);
        x[i] = keep - h;
        double lm = f(ctx);
        x[i] = keep;
        g[i] = (lp - lm) / (2 * h);
    }
}

#define FD_TOL 1e-6

/* ---------------------------------------------------------------- layernorm */
typedef struct { int N, C; double *inp, *w, *b, *out, *mean, *rstd, *proj; } ln_ctx;
static double ln_loss(void *p) {
    ln_ctx *c = p;
    ref_f64_layernorm_fwd(c->out, c->mean, c->rstd, c->inp, c->w, c->b, c->N, c->C);
    return dotd(c->out, c->proj, (size_t)c->N * c->C);
}
TEST(gradcheck_layernorm) {
    gptc_rng_seed(&g_rng, 1);
    ln_ctx c = {.N = 5, .C = 13};
    size_t NC = (size_t)c.N * c.C;
    c.inp = rnd(NC, 1.5); c.w = rnd(c.C, 1); c.b = rnd(c.C, 1); c.out = zeros(NC);
    c.mean = zeros(c.N); c.rstd = zeros(c.N); c.proj = rnd(NC, 1);
    ln_loss(&c);
    double *dinp = zeros(NC), *dw = zeros(c.C), *db = zeros(c.C), *num = zeros(NC);
    ref_f64_layernorm_bwd(dinp, dw, db, c.proj, c.inp, c.w, c.mean, c.rstd, c.N, c.C);
    numeric_grad(ln_loss, &c, c.inp, NC, num);
    CHECK_MSG(fd_err(dinp, num, NC) < FD_TOL, "dinp err %g", fd_err(dinp, num, NC));
    numeric_grad(ln_loss, &c, c.w, c.C, num);
    CHECK_MSG(fd_err(dw, num, c.C) < FD_TOL, "dw err %g", fd_err(dw, num, c.C));
    numeric_grad(ln_loss, &c, c.b, c.C, num);
    CHECK_MSG(fd_err(db, num, c.C) < FD_TOL, "db err %g", fd_err(db, num, c.C));
    free(c.inp); free(c.w); free(c.b); free(c.out); free(c.mean); free(c.rstd); free(c.proj);
    free(dinp); free(dw); free(db); free(num);
}

/* ---------------------------------------------------------------- linear = gemm + bias */
/* out (N,OC) = inp (N,IC) @ w (IC,OC) + b; backward uses gemm NT for dinp and TN for dw, exactly
 * as the model does */
typedef struct { int N, IC, OC; double *inp, *w, *b, *out, *proj; } lin_ctx;
static double lin_loss(void *p) {
    lin_ctx *c = p;
    ref_f64_gemm(0, 0, c->N, c->OC, c->IC, c->inp, c->IC, c->w, c->OC, 0, NULL, c->out, c->OC);
    ref_f64_bias_fwd(c->out, c->b, c->N, c->OC);
    return dotd(c->out, c->proj, (size_t)c->N * c->OC);
}
TEST(gradcheck_linear) {
    gptc_rng_seed(&g_rng, 2);
    lin_ctx c = {.N = 6, .IC = 11, .OC = 9};
    c.inp = rnd(c.N * c.IC, 1); c.w = rnd(c.IC * c.OC, 1); c.b = rnd(c.OC, 1);
    c.out = zeros(c.N * c.OC); c.proj = rnd(c.N * c.OC, 1);
    double *dinp = zeros(c.N * c.IC), *dw = zeros(c.IC * c.OC), *db = zeros(c.OC), *num = zeros(c.IC * c.OC);
    ref_f64_gemm(0, 1, c.N, c.IC, c.OC, c.proj, c.OC, c.w, c.OC, 1, NULL, dinp, c.IC);
    ref_f64_gemm(1, 0, c.IC, c.OC, c.N, c.inp, c.IC, c.proj, c.OC, 1, NULL, dw, c.OC);
    ref_f64_bias_bwd(db, c.proj, c.N, c.OC);
    numeric_grad(lin_loss, &c, c.inp, c.N * c.IC, num);
    CHECK_MSG(fd_err(dinp, num, c.N * c.IC) < FD_TOL, "dinp err %g", fd_err(dinp, num, c.N * c.IC));
    numeric_grad(lin_loss, &c, c.w, c.IC * c.OC, num);
    CHECK_MSG(fd_err(dw, num, c.IC * c.OC) < FD_TOL, "dw err %g", fd_err(dw, num, c.IC * c.OC));
    numeric_grad(lin_loss, &c, c.b, c.OC, num);
    CHECK_MSG(fd_err(db, num, c.OC) < FD_TOL, "db err %g", fd_err(db, num, c.OC));
    free(c.inp); free(c.w); free(c.b); free(c.out); free(c.proj); free(dinp); free(dw); free(db); free(num);
}

/* the tied classifier: logits (N,V) = x (N,C) @ wte^T, wte (V,C); gemm NT forward, NN and TN back */
typedef struct { int N, C, V; double *x, *wte, *out, *proj; } cls_ctx;
static double cls_loss(void *p) {
    cls_ctx *c = p;
    ref_f64_gemm(0, 1, c->N, c->V, c->C, c->x, c->C, c->wte, c->C, 0, NULL, c->out, c->V);
    return dotd(c->out, c->proj, (size_t)c->N * c->V);
}
TEST(gradcheck_classifier_gemm) {
    gptc_rng_seed(&g_rng, 3);
    cls_ctx c = {.N = 7, .C = 10, .V = 19};
    c.x = rnd(c.N * c.C, 1); c.wte = rnd(c.V * c.C, 1); c.out = zeros(c.N * c.V); c.proj = rnd(c.N * c.V, 1);
    double *dx = zeros(c.N * c.C), *dwte = zeros(c.V * c.C), *num = zeros(c.V * c.C);
    ref_f64_gemm(0, 0, c.N, c.C, c.V, c.proj, c.V, c.wte, c.C, 1, NULL, dx, c.C);
    ref_f64_gemm(1, 0, c.V, c.C, c.N, c.proj, c.V, c.x, c.C, 1, NULL, dwte, c.C);
    numeric_grad(cls_loss, &c, c.x, c.N * c.C, num);
    CHECK_MSG(fd_err(dx, num, c.N * c.C) < FD_TOL, "dx err %g", fd_err(dx, num, c.N * c.C));
    numeric_grad(cls_loss, &c, c.wte, c.V * c.C, num);
    CHECK_MSG(fd_err(dwte, num, c.V * c.C) < FD_TOL, "dwte err %g", fd_err(dwte, num, c.V * c.C));
    free(c.x); free(c.wte); free(c.out); free(c.proj); free(dx); free(dwte); free(num);
}

/* ---------------------------------------------------------------- attention */
typedef struct { int B, T, C, NH; double *qkv, *out, *preatt, *att, *proj; } att_ctx;
static double att_loss(void *p) {
    att_ctx *c = p;
    ref_f64_attention_fwd(c->out, c->preatt, c->att, c->qkv, c->B, c->T, c->C, c->NH);
    return dotd(c->out, c->proj, (size_t)c->B * c->T * c->C);
}
TEST(gradcheck_attention) {
    gptc_rng_seed(&g_rng, 4);
    att_ctx c = {.B = 2, .T = 5, .C = 12, .NH = 3};
    size_t nqkv = (size_t)c.B * c.T * 3 * c.C, nout = (size_t)c.B * c.T * c.C, natt = (size_t)c.B * c.NH * c.T * c.T;
    c.qkv = rnd(nqkv, 1); c.out = zeros(nout); c.preatt = zeros(natt); c.att = zeros(natt); c.proj = rnd(nout, 1);
    att_loss(&c);
    double *dqkv = zeros(nqkv), *dpre = zeros(natt), *datt = zeros(natt), *num = zeros(nqkv);
    ref_f64_attention_bwd(dqkv, dpre, datt, c.proj, c.qkv, c.att, c.B, c.T, c.C, c.NH);
    numeric_grad(att_loss, &c, c.qkv, nqkv, num);
    CHECK_MSG(fd_err(dqkv, num, nqkv) < FD_TOL, "dqkv err %g", fd_err(dqkv, num, nqkv));
    /* causality: the output at t must not depend on inputs at t2 > t */
    double base = c.out[0];
    c.qkv[(size_t)(c.T - 1) * 3 * c.C + 5] += 1.0;
    att_loss(&c);
    CHECK(c.out[0] == base);
    free(c.qkv); free(c.out); free(c.preatt); free(c.att); free(c.proj); free(dqkv); free(dpre); free(datt); free(num);
}

TEST(attention_decode_matches_full) {
    gptc_rng_seed(&g_rng, 5);
    int T = 7, C = 12, NH = 3;
    double *qkv = rnd((size_t)T * 3 * C, 1), *out = zeros((size_t)T * C), *pre = zeros((size_t)NH * T * T),
           *att = zeros((size_t)NH * T * T);
    ref_f64_attention_fwd(out, pre, att, qkv, 1, T, C, NH);
    double *k = zeros((size_t)T * C), *v = zeros((size_t)T * C), *o = zeros(C), *scratch = zeros((size_t)NH * T);
    for (int t = 0; t < T; t++) {
        memcpy(k + (size_t)t * C, qkv + (size_t)t * 3 * C + C, C * sizeof(double));
        memcpy(v + (size_t)t * C, qkv + (size_t)t * 3 * C + 2 * C, C * sizeof(double));
        ref_f64_attention_decode(o, scratch, qkv + (size_t)t * 3 * C, k, v, t + 1, C, NH);
        CHECK_MSG(test_rel_err_d(o, out + (size_t)t * C, C) < 1e-12, "t=%d", t);
    }
    free(qkv); free(out); free(pre); free(att); free(k); free(v); free(o); free(scratch);
}

/* ---------------------------------------------------------------- gelu, residual, encoder */
typedef struct { size_t N; double *inp, *out, *proj; } gelu_ctx;
static double gelu_loss(void *p) {
    gelu_ctx *c = p;
    ref_f64_gelu_fwd(c->out, c->inp, c->N);
    return dotd(c->out, c->proj, c->N);
}
TEST(gradcheck_gelu) {
    gptc_rng_seed(&g_rng, 6);
    gelu_ctx c = {.N = 64};
    c.inp = rnd(c.N, 2.5); c.out = zeros(c.N); c.proj = rnd(c.N, 1);
    double *d = zeros(c.N), *num = zeros(c.N);
    ref_f64_gelu_bwd(d, c.inp, c.proj, c.N);
    numeric_grad(gelu_loss, &c, c.inp, c.N, num);
    CHECK_MSG(fd_err(d, num, c.N) < FD_TOL, "err %g", fd_err(d, num, c.N));
    /* the tanh form agrees with the exact erf form to GPT-2's known ~1e-3 */
    for (double x = -6; x <= 6; x += 0.01) {
        double y;
        ref_f64_gelu_fwd(&y, &x, 1);
        CHECK(fabs(y - 0.5 * x * (1 + erf(x / sqrt(2)))) < 1e-3);
    }
    free(c.inp); free(c.out); free(c.proj); free(d); free(num);
}

typedef struct { size_t N; double *a, *b, *out, *proj; } res_ctx;
static double res_loss(void *p) {
    res_ctx *c = p;
    ref_f64_residual_fwd(c->out, c->a, c->b, c->N);
    return dotd(c->out, c->proj, c->N);
}
TEST(gradcheck_residual) {
    gptc_rng_seed(&g_rng, 7);
    res_ctx c = {.N = 20};
    c.a = rnd(c.N, 1); c.b = rnd(c.N, 1); c.out = zeros(c.N); c.proj = rnd(c.N, 1);
    double *da = zeros(c.N), *db = zeros(c.N), *num = zeros(c.N);
    ref_f64_residual_bwd(da, db, c.proj, c.N);
    numeric_grad(res_loss, &c, c.a, c.N, num);
    CHECK(fd_err(da, num, c.N) < FD_TOL);
    numeric_grad(res_loss, &c, c.b, c.N, num);
    CHECK(fd_err(db, num, c.N) < FD_TOL);
    free(c.a); free(c.b); free(c.out); free(c.proj); free(da); free(db); free(num);
}

typedef struct { int B, T, C; int *inp; double *wte, *wpe, *out, *proj; } enc_ctx;
static double enc_loss(void *p) {
    enc_ctx *c = p;
    ref_f64_encoder_fwd(c->out, c->inp, c->wte, c->wpe, c->B, c->T, c->C);
    return dotd(c->out, c->proj, (size_t)c->B * c->T * c->C);
}
TEST(gradcheck_encoder) {
    gptc_rng_seed(&g_rng, 8);
    int V = 6, maxT = 5;
    enc_ctx c = {.B = 3, .T = 4, .C = 7};
    int inp[12] = {1, 2, 1, 5, 0, 0, 3, 1, 5, 5, 2, 1}; /* repeated ids: accumulation must not race */
    c.inp = inp;
    c.wte = rnd(V * c.C, 1); c.wpe = rnd(maxT * c.C, 1);
    size_t n = (size_t)c.B * c.T * c.C;
    c.out = zeros(n); c.proj = rnd(n, 1);
    double *dwte = zeros(V * c.C), *dwpe = zeros(maxT * c.C), *num = zeros(V * c.C);
    ref_f64_encoder_bwd(dwte, dwpe, c.proj, c.inp, c.B, c.T, c.C);
    numeric_grad(enc_loss, &c, c.wte, V * c.C, num);
    CHECK(fd_err(dwte, num, V * c.C) < FD_TOL);
    numeric_grad(enc_loss, &c, c.wpe, maxT * c.C, num);
    CHECK(fd_err(dwpe, num, maxT * c.C) < FD_TOL);
    free(c.wte); free(c.wpe); free(c.out); free(c.proj); free(dwte); free(dwpe); free(num);
}

/* ---------------------------------------------------------------- cross-entropy with padding */
typedef struct { int N, V, Vp; double *logits, *probs, *losses; int *targets; } ce_ctx;
static double ce_loss(void *p) {
    ce_ctx *c = p;
    ref_f64_crossentropy_fwd(c->losses, c->probs, c->logits, c->targets, c->N, c->V, c->Vp);
    double s = 0;
    for (int n = 0; n < c->N; n++) s += c->losses[n];
    return s / c->N;
}
TEST(gradcheck_crossentropy_padded) {
    gptc_rng_seed(&g_rng, 9);
    ce_ctx c = {.N = 4, .V = 9, .Vp = 16};
    int targets[4] = {0, 8, 3, 3};
    c.targets = targets;
    c.logits = rnd(c.N * c.Vp, 2); c.probs = zeros(c.N * c.Vp); c.losses = zeros(c.N);
    double l0 = ce_loss(&c);
    /* padding columns never change the loss */
    for (int n = 0; n < c.N; n++)
        for (int v = c.V; v < c.Vp; v++) c.logits[n * c.Vp + v] = 1e3;
    CHECK(ce_loss(&c) == l0);
    double *d = zeros(c.N * c.Vp), *num = zeros(c.N * c.Vp);
    ref_f64_crossentropy_bwd(d, c.probs, c.targets, 1.0 / c.N, c.N, c.V, c.Vp);
    numeric_grad(ce_loss, &c, c.logits, c.N * c.Vp, num);
    CHECK_MSG(fd_err(d, num, c.N * c.Vp) < FD_TOL, "err %g", fd_err(d, num, c.N * c.Vp));
    for (int n = 0; n < c.N; n++)
        for (int v = c.V; v < c.Vp; v++) CHECK(d[n * c.Vp + v] == 0);
    free(c.logits); free(c.probs); free(c.losses); free(d); free(num);
}

/* ---------------------------------------------------------------- fused residual + layernorm */
/* res = a + b, out = LayerNorm(res) in one call. L = <out, proj> + <res, pskip>: res goes on along the
 * residual stream, so its gradient arrives there as dskip = pskip; with_skip = 0 drops that term
 * (dskip NULL). dL/da = dL/db = dinp. */
typedef struct { int N, C, with_skip; double *a, *b, *w, *bias, *res, *out, *mean, *rstd, *proj, *pskip; } rln_ctx;
static double rln_loss(void *p) {
    rln_ctx *c = p;
    ref_f64_residual_layernorm_fwd(c->res, c->out, c->mean, c->rstd, c->a, c->b, c->w, c->bias, c->N, c->C);
    size_t n = (size_t)c->N * c->C;
    return dotd(c->out, c->proj, n) + (c->with_skip ? dotd(c->res, c->pskip, n) : 0);
}
TEST(gradcheck_residual_layernorm) {
    gptc_rng_seed(&g_rng, 11);
    static const char *const mode_name[] = {"dskip", "dskip NULL", "dskip aliasing dinp"};
    for (int mode = 0; mode < 3; mode++) {
        rln_ctx c = {.N = 5, .C = 13, .with_skip = mode != 1};
        size_t NC = (size_t)c.N * c.C;
        c.a = rnd(NC, 1.5); c.b = rnd(NC, 1); c.w = rnd(c.C, 1); c.bias = rnd(c.C, 1);
        c.res = zeros(NC); c.out = zeros(NC); c.mean = zeros(c.N); c.rstd = zeros(c.N);
        c.proj = rnd(NC, 1); c.pskip = rnd(NC, 1);
        rln_loss(&c);
        /* the forward is residual_fwd then layernorm_fwd */
        double *r2 = zeros(NC), *o2 = zeros(NC), *m2 = zeros(c.N), *s2 = zeros(c.N);
        ref_f64_residual_fwd(r2, c.a, c.b, NC);
        ref_f64_layernorm_fwd(o2, m2, s2, r2, c.w, c.bias, c.N, c.C);
        CHECK(memcmp(r2, c.res, NC * sizeof(double)) == 0 && memcmp(o2, c.out, NC * sizeof(double)) == 0);
        /* dinp is overwritten: garbage on entry, or dskip itself when aliased */
        double *dinp = mode == 2 ? zeros(NC) : rnd(NC, 100), *dw = zeros(c.C), *db = zeros(c.C), *num = zeros(NC);
        if (mode == 2) memcpy(dinp, c.pskip, NC * sizeof(double));
        const double *dskip = mode == 0 ? c.pskip : mode == 1 ? NULL : dinp;
        ref_f64_layernorm_bwd_residual(dinp, dw, db, dskip, c.proj, c.res, c.w, c.mean, c.rstd, c.N, c.C);
        numeric_grad(rln_loss, &c, c.a, NC, num);
        CHECK_MSG(fd_err(dinp, num, NC) < FD_TOL, "%s: da err %g", mode_name[mode], fd_err(dinp, num, NC));
        numeric_grad(rln_loss, &c, c.b, NC, num);
        CHECK_MSG(fd_err(dinp, num, NC) < FD_TOL, "%s: db err %g", mode_name[mode], fd_err(dinp, num, NC));
        numeric_grad(rln_loss, &c, c.w, c.C, num);
        CHECK_MSG(fd_err(dw, num, c.C) < FD_TOL, "%s: dw err %g", mode_name[mode], fd_err(dw, num, c.C));
        numeric_grad(rln_loss, &c, c.bias, c.C, num);
        CHECK_MSG(fd_err(db, num, c.C) < FD_TOL, "%s: dbias err %g", mode_name[mode], fd_err(db, num, c.C));
        free(c.a); free(c.b); free(c.w); free(c.bias); free(c.res); free(c.out); free(c.mean); free(c.rstd);
        free(c.proj); free(c.pskip); free(r2); free(o2); free(m2); free(s2); free(dinp); free(dw); free(db); free(num);
    }
}

/* ---------------------------------------------------------------- fused cross-entropy */
/* losses and dlogits in one in-place call. L = sum of the losses, evaluated by the fused op itself on
 * a copy of the logits; its dlogits must be dloss * dL/dlogits. */
typedef struct { int N, V, Vp; double dloss; double *logits, *work, *losses; int *targets; } cef_ctx;
static double cef_loss(void *p) {
    cef_ctx *c = p;
    memcpy(c->work, c->logits, (size_t)c->N * c->Vp * sizeof(double));
    ref_f64_crossentropy_fused(c->losses, c->work, c->targets, c->dloss, c->N, c->V, c->Vp);
    double s = 0;
    for (int n = 0; n < c->N; n++) s += c->losses[n];
    return s;
}
TEST(gradcheck_crossentropy_fused) {
    gptc_rng_seed(&g_rng, 12);
    cef_ctx c = {.N = 4, .V = 9, .Vp = 16, .dloss = 0.37};
    int targets[4] = {0, 8, 3, 3};
    c.targets = targets;
    size_t nv = (size_t)c.N * c.Vp;
    c.logits = rnd(nv, 2); c.work = zeros(nv); c.losses = zeros(c.N);
    for (int n = 0; n < c.N; n++) /* padding columns are never read */
        for (int v = c.V; v < c.Vp; v++) c.logits[n * c.Vp + v] = 1e3;
    cef_loss(&c);
    double *d = zeros(nv), *num = zeros(nv), *probs = zeros(nv), *losses = zeros(c.N);
    memcpy(d, c.work, nv * sizeof(double));
    /* the losses are crossentropy_fwd's */
    ref_f64_crossentropy_fwd(losses, probs, c.logits, c.targets, c.N, c.V, c.Vp);
    for (int n = 0; n < c.N; n++) CHECK(c.losses[n] == losses[n]);
    numeric_grad(cef_loss, &c, c.logits, nv, num);
    for (size_t i = 0; i < nv; i++) num[i] *= c.dloss;
    CHECK_MSG(fd_err(d, num, nv) < FD_TOL, "err %g", fd_err(d, num, nv));
    for (int n = 0; n < c.N; n++)
        for (int v = c.V; v < c.Vp; v++) CHECK(d[n * c.Vp + v] == 0);
    free(c.logits); free(c.work); free(c.losses); free(d); free(num); free(probs); free(losses);
}

/* ---------------------------------------------------------------- AdamW */
TEST(adamw_matches_closed_form) {
    /* two steps by hand, torch.optim.AdamW's formula */
    double p = 0.5, m = 0, v = 0, g1 = 0.3, g2 = -0.2, lr = 0.01, b1 = 0.9, b2 = 0.95, eps = 1e-8, wd = 0.1;
    double ep = p, em = 0, ev = 0;
    double gs[2] = {g1, g2};
    for (int t = 1; t <= 2; t++) {
        ref_f64_adamw(&p, &gs[t - 1], &m, &v, 1, lr, b1, b2, eps, wd, 1.0, t);
        ep *= 1 - lr * wd;
        em = b1 * em + (1 - b1) * gs[t - 1];
        ev = b2 * ev + (1 - b2) * gs[t - 1] * gs[t - 1];
        double mhat = em / (1 - pow(b1, t)), vhat = ev / (1 - pow(b2, t));
        ep -= lr * mhat / (sqrt(vhat) + eps);
    }
    CHECK_NEAR(p, ep, 1e-15);
    CHECK_NEAR(m, em, 1e-15);
    CHECK_NEAR(v, ev, 1e-15);
}

/* ---------------------------------------------------------------- float table vs double reference */
static double cmp_fd(const float *a, const double *b, size_t n) {
    double *t = malloc(n * sizeof *t);
    for (size_t i = 0; i < n; i++) t[i] = a[i];
    double e = test_rel_err_d(t, b, n);
    free(t);
    return e;
}
#define F32_TOL 2e-5

TEST(ref_f32_matches_f64) {
    const gptc_kernels *k = gptc_kernels_ref();
    gptc_rng_seed(&g_rng, 10);
    int B = 2, T = 9, C = 16, NH = 4, V = 37, Vp = 64;
    size_t BT = (size_t)B * T;
    /* attention */
    double *qkv = rnd(BT * 3 * C, 1), *out = zeros(BT * C), *pre = zeros(B * NH * T * T), *att = zeros(B * NH * T * T);
    double *dout = rnd(BT * C, 1), *dqkv = zeros(BT * 3 * C), *s1 = zeros(B * NH * T * T), *s2 = zeros(B * NH * T * T);
    ref_f64_attention_fwd(out, pre, att, qkv, B, T, C, NH);
    ref_f64_attention_bwd(dqkv, s1, s2, dout, qkv, att, B, T, C, NH);
    float *fqkv = to_f(qkv, BT * 3 * C), *fout = calloc(BT * C, 4), *fpre = calloc(B * NH * T * T, 4),
          *fatt = calloc(B * NH * T * T, 4), *fdout = to_f(dout, BT * C), *fdqkv = calloc(BT * 3 * C, 4),
          *fs1 = calloc(B * NH * T * T, 4), *fs2 = calloc(B * NH * T * T, 4);
    k->attention_fwd(fout, fpre, fatt, fqkv, B, T, C, NH);
    k->attention_bwd(fdqkv, fs1, fs2, fdout, fqkv, fatt, B, T, C, NH);
    CHECK(cmp_fd(fout, out, BT * C) < F32_TOL);
    CHECK(cmp_fd(fdqkv, dqkv, BT * 3 * C) < F32_TOL);
    /* gemm, all four transposition cases, beta 0 and 1 */
    int M = 13, N = 300, K = 21; /* N > 256 crosses a column tile */
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++)
            for (int beta = 0; beta < 2; beta++) {
                double *A = rnd((size_t)M * K, 1), *Bm = rnd((size_t)K * N, 1), *Cd = rnd((size_t)M * N, 1);
                float *fA = to_f(A, (size_t)M * K), *fB = to_f(Bm, (size_t)K * N), *fC = to_f(Cd, (size_t)M * N);
                int lda = ta ? M : K, ldb = tb ? K : N;
                ref_f64_gemm(ta, tb, M, N, K, A, lda, Bm, ldb, beta, NULL, Cd, N);
                k->gemm(ta, tb, M, N, K, fA, lda, fB, ldb, beta, NULL, fC, N);
                /* check one entry against a plain triple sum as well */
                double s = beta ? (double)fC[0] * 0 : 0;
                for (int kk = 0; kk < K; kk++) s += (ta ? A[kk * lda] : A[kk]) * (tb ? Bm[kk] : Bm[(size_t)kk * ldb]);
                if (!beta) CHECK_NEAR(Cd[0], s, 1e-12);
                CHECK_MSG(cmp_fd(fC, Cd, (size_t)M * N) < F32_TOL, "gemm ta=%d tb=%d beta=%d", ta, tb, beta);
                free(A); free(Bm); free(Cd); free(fA); free(fB); free(fC);
            }
    /* layernorm, gelu, crossentropy */
    double *x = rnd(BT * C, 1), *w = rnd(C, 1), *bb = rnd(C, 1), *y = zeros(BT * C), *mu = zeros(BT), *rs = zeros(BT);
    double *dx = zeros(BT * C), *dw = zeros(C), *db = zeros(C);
    ref_f64_layernorm_fwd(y, mu, rs, x, w, bb, (int)BT, C);
    ref_f64_layernorm_bwd(dx, dw, db, dout, x, w, mu, rs, (int)BT, C);
    float *fx = to_f(x, BT * C), *fw = to_f(w, C), *fb = to_f(bb, C), *fy = calloc(BT * C, 4), *fmu = calloc(BT, 4),
          *frs = calloc(BT, 4), *fdx = calloc(BT * C, 4), *fdw = calloc(C, 4), *fdb = calloc(C, 4);
    k->layernorm_fwd(fy, fmu, frs, fx, fw, fb, (int)BT, C);
    k->layernorm_bwd(fdx, fdw, fdb, fdout, fx, fw, fmu, frs, (int)BT, C);
    CHECK(cmp_fd(fy, y, BT * C) < F32_TOL);
    CHECK(cmp_fd(fdx, dx, BT * C) < F32_TOL);
    CHECK(cmp_fd(fdw, dw, C) < F32_TOL);
    CHECK(cmp_fd(fdb, db, C) < F32_TOL);
    double *g = zeros(BT * C), *dg = zeros(BT * C);
    ref_f64_gelu_fwd(g, x, BT * C);
    ref_f64_gelu_bwd(dg, x, dout, BT * C);
    float *fg = calloc(BT * C, 4), *fdg = calloc(BT * C, 4);
    k->gelu_fwd(fg, fx, BT * C);
    k->gelu_bwd(fdg, fx, fdout, BT * C);
    CHECK(cmp_fd(fg, g, BT * C) < F32_TOL);
    CHECK(cmp_fd(fdg, dg, BT * C) < F32_TOL);
    double *logits = rnd(BT * Vp, 3), *probs = zeros(BT * Vp), *losses = zeros(BT), *dl = zeros(BT * Vp);
    int *tg = malloc(BT * sizeof *tg);
    for (size_t i = 0; i < BT; i++) tg[i] = (int)(gptc_rng_next(&g_rng) % V);
    ref_f64_crossentropy_fwd(losses, probs, logits, tg, (int)BT, V, Vp);
    ref_f64_crossentropy_bwd(dl, probs, tg, 0.25, (int)BT, V, Vp);
    float *flog = to_f(logits, BT * Vp), *fl = calloc(BT, 4), *fdl = calloc(BT * Vp, 4);
    k->crossentropy_fwd(fl, flog, flog, tg, (int)BT, V, Vp); /* in place: probs over logits */
    k->crossentropy_bwd(fdl, flog, tg, 0.25f, (int)BT, V, Vp);
    CHECK(cmp_fd(fl, losses, BT) < F32_TOL);
    CHECK(cmp_fd(flog, probs, BT * Vp) < F32_TOL);
    CHECK(cmp_fd(fdl, dl, BT * Vp) < F32_TOL);
    free(qkv); free(out); free(pre); free(att); free(dout); free(dqkv); free(s1); free(s2);
    free(fqkv); free(fout); free(fpre); free(fatt); free(fdout); free(fdqkv); free(fs1); free(fs2);
    free(x); free(w); free(bb); free(y); free(mu); free(rs); free(dx); free(dw); free(db);
    free(fx); free(fw); free(fb); free(fy); free(fmu); free(frs); free(fdx); free(fdw); free(fdb);
    free(g); free(dg); free(fg); free(fdg); free(logits); free(probs); free(losses); free(dl); free(tg);
    free(flog); free(fl); free(fdl);
}
