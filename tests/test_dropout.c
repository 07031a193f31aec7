/* test_dropout.c — dropout and hyper-parameter schedules: the counter-based mask (statistics, scale,
 * independence of threads, streams and seeds, the backward as the forward's exact adjoint), the
 * model's gradient with dropout against finite differences, recompute and resume drawing the same
 * masks, evaluation without dropout, and the schedule parser. */
#include "test.h"
#include "kernels/dropout.h"
#include "model/gpt2.h"
#include "optim/hparam.h"

#include <cjson/cJSON.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

TEST(dropout_mask_statistics_threads_and_adjoint) {
    const size_t n = 1 << 20;
    const float p = 0.1f;
    float *x = malloc(n * sizeof(float)), *y1 = malloc(n * sizeof(float)), *y2 = malloc(n * sizeof(float));
    gptc_rng r;
    gptc_rng_seed(&r, 5);
    for (size_t i = 0; i < n; i++) x[i] = (float)(gptc_rng_uniform(&r) * 2 - 1);
    int saved = gptc_threads();
    gptc_set_threads(1);
    gptc_dropout_apply(y1, x, n, p, 77, 3);
    gptc_set_threads(3);
    gptc_dropout_apply(y2, x, n, p, 77, 3);
    gptc_set_threads(saved);
    CHECK(memcmp(y1, y2, n * sizeof(float)) == 0);
    size_t kept = 0, bad = 0, other = 0, both = 0;
    float scale = 1.0f / (1.0f - p);
    for (size_t i = 0; i < n; i++) {
        int k = gptc_dropout_keep(77, 3, i, p);
        kept += k;
        if (y1[i] != (k ? x[i] * scale : 0.0f)) bad++;
        int k2 = gptc_dropout_keep(77, 4, i, p); /* another stream */
        other += k2;
        both += k && k2;
    }
    CHECK_EQ_INT(bad, 0);
    double q = 1 - p, sd = sqrt(n * p * q);
    CHECK_MSG(fabs(kept - n * q) < 5 * sd, "kept %zu of %zu (expected %.0f +- %.0f)", kept, n, n * q, sd);
    CHECK_MSG(fabs(both - n * q * q) < 5 * sqrt(n * q * q * (1 - q * q)), "streams correlated: %zu kept by both", both);
    (void)other;
    /* another seed draws another mask */
    gptc_dropout_apply(y2, x, n, p, 78, 3);
    CHECK(memcmp(y1, y2, n * sizeof(float)) != 0);
    /* the backward is the adjoint: <drop(g), v> == <g, drop(v)> (in double; the map is diagonal) */
    float *g = malloc(n * sizeof(float)), *dg = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) g[i] = (float)gptc_rng_uniform(&r);
    gptc_dropout_apply(dg, g, n, p, 77, 3);
    double a = 0, b = 0;
    for (size_t i = 0; i < n; i++) a += (double)dg[i] * x[i], b += (double)g[i] * y1[i];
    CHECK_NEAR(a, b, 1e-7 * fabs(b)); /* each product rounded once in float */
    /* p == 0 is the identity, in place too */
    gptc_dropout_apply(y2, x, n, 0, 77, 3);
    CHECK(memcmp(y2, x, n * sizeof(float)) == 0);
    free(x), free(y1), free(y2), free(g), free(dg);
}

static void tokens(int *x, int n, int vocab, uint64_t seed) {
    gptc_rng r;
    gptc_rng_seed(&r, seed);
    for (int i = 0; i < n; i++) x[i] = (int)(gptc_rng_next(&r) % vocab);
}

/* The gradient with dropout on (residual branches, embeddings and attention probabilities; the
 * masks fixed by the seed, so the loss is a smooth function of the weights) agrees with central
 * differences of the loss along the gradient (Richardson-extrapolated), and the gradient without
 * the masks in the backward would not. */
TEST(dropout_model_gradient_matches_finite_difference) {
    gptc_model_config cfg = {2, 2, 16, 8, 30, GPTC_GELU_KIND_TANH};
    int B = 4, T = 8, in[32], tg[32];
    tokens(in, B * T, cfg.vocab, 11);
    tokens(tg, B * T, cfg.vocab, 12);
    gptc_model m;
    CHECK_OK(gptc_model_init(&m, &cfg));
    gptc_model_init_weights(&m, 13);
    m.fuse = true;
    CHECK_OK(gptc_model_alloc_train(&m, B, T));
    m.dropout = 0.2f;
    m.attn_dropout = 0.2f;
    m.dropout_seed = 99;
    size_t n = m.num_floats;
    float *w0 = malloc(n * sizeof(float)), *dir = malloc(n * sizeof(float));
    memcpy(w0, m.params, n * sizeof(float));
    gptc_model_zero_grad(&m);
    gptc_model_forward_backward(&m, in, tg, B, T, 1.0f);
    double norm2 = 0;
    for (size_t j = 0; j < n; j++) dir[j] = m.grads[j], norm2 += (double)m.grads[j] * m.grads[j];
    /* the gradient of the same loss with the masks left out of the backward, for contrast */
    double wrong = 0;
    {
        float drop = m.dropout, attn = m.attn_dropout;
        gptc_model_forward(&m, in, tg, B, T); /* masks in the forward */
        m.dropout = m.attn_dropout = 0;       /* none in the backward (the attention's, too) */
        gptc_model_zero_grad(&m);
        gptc_model_backward(&m, 1.0f);
        for (size_t j = 0; j < n; j++) wrong += (double)m.grads[j] * dir[j];
        m.dropout = drop, m.attn_dropout = attn;
    }
    double slope[2];
    for (int k = 0; k < 2; k++) {
        double h = (k ? 0.005 : 0.01) / sqrt(norm2);
        for (size_t j = 0; j < n; j++) m.params[j] = w0[j] + (float)(h * dir[j]);
        double lp = gptc_model_forward(&m, in, tg, B, T);
        for (size_t j = 0; j < n; j++) m.params[j] = w0[j] - (float)(h * dir[j]);
        double lm = gptc_model_forward(&m, in, tg, B, T);
        slope[k] = (lp - lm) / (2 * h);
    }
    double fd = (4 * slope[1] - slope[0]) / 3, err = fabs(fd - norm2) / fabs(fd), werr = fabs(fd - wrong) / fabs(fd);
    printf("    slope along the gradient: %.6g by differences, %.6g by the backward (rel %.2e); without the masks "
           "in the backward %.6g (rel %.2e)\n", fd, norm2, err, wrong, werr);
    CHECK_MSG(err < 2e-3, "dropout gradient off by %.3g", err);
    CHECK_MSG(werr > 10 * err, "the check cannot tell a backward without masks (%.3g vs %.3g)", werr, err);
    free(w0);
    free(dir);
    gptc_model_free(&m);
}

/* Recomputing a block (or its attention) draws the forward's masks: gradients bit-identical. */
TEST(dropout_recompute_bit_identical) {
    gptc_model_config cfg = {3, 2, 32, 16, 40, GPTC_GELU_KIND_TANH};
    int B = 2, T = 16, in[32], tg[32];
    tokens(in, B * T, cfg.vocab, 21);
    tokens(tg, B * T, cfg.vocab, 22);
    float *ref = NULL;
    size_t n = 0;
    const gptc_recompute levels[] = {GPTC_RECOMPUTE_NONE, GPTC_RECOMPUTE_GELU, GPTC_RECOMPUTE_ATTN, GPTC_RECOMPUTE_BLOCK};
    for (int li = 0; li < 4; li++) {
        gptc_model m;
        CHECK_OK(gptc_model_init(&m, &cfg));
        gptc_model_init_weights(&m, 23);
        m.fuse = true;
        m.recompute = levels[li];
        CHECK_OK(gptc_model_alloc_train(&m, B, T));
        m.dropout = 0.3f;
        m.attn_dropout = 0.3f;
        m.dropout_seed = 1234;
        gptc_model_zero_grad(&m);
        float loss = gptc_model_forward_backward(&m, in, tg, B, T, 1.0f);
        if (li == 0) {
            n = m.num_floats;
            ref = malloc(n * sizeof(float) + sizeof loss);
            memcpy(ref, m.grads, n * sizeof(float));
            memcpy(ref + n, &loss, sizeof loss);
        } else {
            CHECK_MSG(memcmp(ref, m.grads, n * sizeof(float)) == 0 && memcmp(ref + n, &loss, sizeof loss) == 0,
                      "recompute level %d differs with dropout", li);
        }
        gptc_model_free(&m);
    }
    free(ref);
}

static void train_opts(gptc_train_options *o) {
    test_tiny_train_options(o, test_shakespeare_data());
    o->steps = 12;
    o->warmup = 3;
}

typedef struct { float loss[64], val[64], drop[64]; int n, stop_at; } rec;
static int record(void *user, const gptc_step_info *in) {
    rec *r = user;
    if (in->event != GPTC_EVENT_STEP || r->n >= 64) return 0;
    r->loss[r->n] = in->loss;
    r->val[r->n] = in->val_loss;
    r->drop[r->n] = in->dropout;
    r->n++;
    return r->stop_at && in->step == r->stop_at;
}

/* With dropout and a dropout schedule, a run stopped at step 6 and resumed gives the losses of the
 * run that went straight through: the masks are a function of (seed, step, micro-step, rank). */
TEST(dropout_resume_is_bit_exact) {
    gptc_train_options o;
    train_opts(&o);
    o.dropout = 0.1f;
    o.attn_dropout = 0.1f;
    o.dropout_schedule = "0:0.0,4:0.0,10:0.2";
    rec whole = {0}, first = {0}, second = {0}, plain = {0};
    gptc_train_result r;
    CHECK_OK(gptc_train(&o, record, &whole, &r));
    char dir[600];
    o.ckpt_dir = test_dir("", "dropout-resume", dir, sizeof dir);
    first.stop_at = 6;
    CHECK_OK(gptc_train(&o, record, &first, &r));
    CHECK_OK(gptc_train(&o, record, &second, &r));
    CHECK_EQ_INT(first.n + second.n, 12);
    for (int i = 0; i < 12; i++) {
        float got = i < 6 ? first.loss[i] : second.loss[i - 6];
        CHECK_MSG(got == whole.loss[i], "step %d: %.9g vs %.9g", i + 1, got, whole.loss[i]);
    }
    /* the schedule: 0 up to the step logged 4 (drop[3]), then linear to 0.2 at the step logged 10 */
    CHECK(whole.drop[0] == 0 && whole.drop[3] == 0 && whole.drop[4] > 0);
    CHECK_NEAR(whole.drop[6], 0.1, 1e-6);
    CHECK_NEAR(whole.drop[9], 0.2, 1e-6);
    CHECK_NEAR(whole.drop[11], 0.2, 1e-6);
    /* dropout changes the training losses once it is on (and not before) */
    o.ckpt_dir = NULL;
    o.dropout = 0;
    o.attn_dropout = 0;
    o.dropout_schedule = NULL;
    CHECK_OK(gptc_train(&o, record, &plain, &r));
    CHECK(plain.loss[3] != whole.loss[3] /* attention dropout is on from the start */ && plain.loss[8] != whole.loss[8]);
}

/* Evaluation never drops: with a zero learning rate the weights stay the initial ones, so the val
 * loss with dropout 0.5 is the val loss without dropout, while the train losses differ. */
TEST(dropout_off_for_evaluation) {
    gptc_train_options o;
    train_opts(&o);
    o.steps = 2;
    o.eval_every = 1;
    o.lr_schedule = "0:0";
    rec with = {0}, without = {0};
    gptc_train_result r;
    CHECK_OK(gptc_train(&o, record, &without, &r));
    o.dropout = 0.5f;
    o.attn_dropout = 0.5f;
    CHECK_OK(gptc_train(&o, record, &with, &r));
    CHECK(!isnan(with.val[0]) && with.val[0] == without.val[0] && with.val[1] == without.val[1]);
    CHECK(with.loss[0] != without.loss[0]);
}

/* The step convention (optim/hparam.h): a point "N:V" is reached at the step the log numbers N, for
 * every schedule; before it the value is still on its way. */
typedef struct { float lr[16], drop[16], wd[16]; int step[16], n; } sched_rec;
static int record_sched(void *user, const gptc_step_info *in) {
    sched_rec *r = user;
    if (in->event != GPTC_EVENT_STEP || r->n >= 16) return 0;
    r->step[r->n] = in->step;
    r->lr[r->n] = in->lr;
    r->drop[r->n] = in->dropout;
    r->wd[r->n] = in->weight_decay;
    r->n++;
    return 0;
}

TEST(schedule_point_reached_at_the_logged_step) {
    gptc_train_options o;
    train_opts(&o);
    o.steps = 8;
    o.dropout_schedule = "6:0.1";             /* held at 0.1 from the first step: a single point */
    o.attn_dropout_schedule = NULL;
    o.lr_schedule = "1:0.001,5:0.005";        /* 0.001 at logged step 1, 0.005 at logged step 5 */
    o.weight_decay_schedule = "0:0,6:0.3";    /* 0.05 a step: 0.3 at logged step 6 */
    sched_rec r = {0};
    gptc_train_result res;
    CHECK_OK(gptc_train(&o, record_sched, &r, &res));
    CHECK_EQ_INT(r.n, 8);
    for (int i = 0; i < r.n; i++) CHECK_EQ_INT(r.step[i], i + 1);
    CHECK_NEAR(r.lr[0], 0.001, 1e-9);         /* logged step 1 */
    CHECK_NEAR(r.lr[3], 0.004, 1e-9);         /* logged step 4 */
    CHECK_NEAR(r.lr[4], 0.005, 1e-9);         /* logged step 5: the point */
    CHECK_NEAR(r.wd[4], 0.25, 1e-7);          /* logged step 5: not yet */
    CHECK_NEAR(r.wd[5], 0.3, 1e-7);           /* logged step 6: the point */
    CHECK_NEAR(r.drop[0], 0.1, 1e-7);
    CHECK_NEAR(r.drop[5], 0.1, 1e-7);
}

TEST(hparam_schedule_parse_and_values) {
    gptc_hparam_schedule s;
    CHECK_OK(gptc_hparam_parse(&s, "0:0.0,10000:0.0,50000:0.1", "--dropout-schedule", 0, 1));
    CHECK_EQ_INT(s.n, 3);
    CHECK(gptc_hparam_at(&s, 0) == 0 && gptc_hparam_at(&s, 10000) == 0);
    CHECK_NEAR(gptc_hparam_at(&s, 30000), 0.05, 1e-7);
    CHECK_NEAR(gptc_hparam_at(&s, 90000), 0.1, 1e-7);
    CHECK_OK(gptc_hparam_parse(&s, "cos:100:1,200:0", "--lr-schedule", 0, 10));
    CHECK(gptc_hparam_at(&s, 0) == 1 && gptc_hparam_at(&s, 250) == 0);
    CHECK_NEAR(gptc_hparam_at(&s, 150), 0.5, 1e-6);
    CHECK_NEAR(gptc_hparam_at(&s, 125), 0.5 * (1 + cos(M_PI * 0.25)), 1e-6);
    CHECK_OK(gptc_hparam_parse(&s, NULL, "x", 0, 1));
    CHECK_EQ_INT(s.n, 0);
    const char *bad[] = {"0:0.1,", "10:0.1,5:0.2", "0:x", "a:1", "0:2", "0:0.1;5:1", "-1:0", "0:nan", ":1"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        gptc_status st = gptc_hparam_parse(&s, bad[i], "'dropout_schedule'", 0, 1);
        CHECK_MSG(st == GPTC_ERR_ARG && strstr(gptc_last_error(), "'dropout_schedule'"), "\"%s\" accepted", bad[i]);
    }
}
