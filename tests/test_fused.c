/* test_fused.c — `gptc train --fused-update` (each layer updated inside the backward, one layer slot of
 * gradients): the parameters after several steps are bit-identical to the ordinary step's (same seed
 * and data) with clipping active and off, at recompute none and block, fp32 and bf16, AdamW and Lion;
 * a non-finite step is skipped without touching a parameter; a checkpoint written with it resumes without
 * it and vice versa, to the same bits; what it refuses (accumulation). */
#include "test.h"
#include "optim/optimizer.h"
#include "train/checkpoint.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { STEPS = 4 };

/* what a run reported per step */
typedef struct { float loss[STEPS + 1], norm[STEPS + 1]; int skipped[STEPS + 1]; int n; } steps_seen;
static int record(void *user, const gptc_step_info *in) {
    steps_seen *s = user;
    if (in->event != GPTC_EVENT_STEP || s->n > STEPS) return 0;
    s->loss[s->n] = in->loss, s->norm[s->n] = in->grad_norm, s->skipped[s->n] = in->skipped;
    s->n++;
    return 0;
}

/* three layers (a middle one), every step's windows different, checkpoint only at the end */
static void options(gptc_train_options *o, const char *ckpt) {
    test_tiny_train_options(o, test_shakespeare_data());
    o->model.layers = 3;
    o->steps = STEPS;
    o->warmup = 1;
    o->ckpt_dir = ckpt;
    o->dropout = 0.1f; /* the masks must be drawn alike in both backward passes */
}

/* trains o into a fresh folder `name`; returns the final parameters (malloc'd, *n floats) */
static float *train_params(gptc_train_options *o, const char *name, steps_seen *seen, size_t *n) {
    char dir[512], step_dir[4096];
    snprintf(dir, sizeof dir, "%s/fused-%s", test_tmpdir(), name);
    o->ckpt_dir = dir;
    gptc_train_result r;
    memset(seen, 0, sizeof *seen);
    CHECK_OK(gptc_train(o, record, seen, &r));
    bool found = false;
    CHECK_OK(gptc_ckpt_find(dir, step_dir, sizeof step_dir, &found));
    CHECK(found);
    gptc_model m;
    float *p = NULL;
    if (!found || gptc_model_init(&m, &r.model) != GPTC_OK) return NULL;
    /* the parameters, then each optimizer state buffer */
    const gptc_optimizer_kind *opt = gptc_optimizer_find(o->optimizer);
    size_t nf = m.num_floats;
    p = calloc(nf * (1 + opt->nstates), sizeof(float));
    gptc_ostate state = {.type = GPTC_OSTATE_FP32, .nstates = opt->nstates, .lo = 0, .hi = nf}; /* fp32 state */
    for (int i = 0; i < opt->nstates; i++) state.buf[i] = p + (1 + i) * nf;
    gptc_trainer_state ts = {0}; /* no guard buffer: its state is not compared */
    CHECK_OK(gptc_ckpt_load(step_dir, &m, opt, &state, &ts));
    memcpy(p, m.params, sizeof(float) * nf);
    *n = nf * (1 + opt->nstates);
    gptc_model_free(&m);
    return p;
}

/* the ordinary step and --fused-update on the same options: equal parameters and optimizer state (bit
 * for bit), losses and norms */
static void compare(gptc_train_options *o, const char *what) {
    steps_seen a, b;
    size_t na = 0, nb = 0;
    char name[160];
    snprintf(name, sizeof name, "%s-ordinary", what);
    o->fused_update = 0;
    float *pa = train_params(o, name, &a, &na);
    snprintf(name, sizeof name, "%s-fused", what);
    o->fused_update = 1;
    float *pb = train_params(o, name, &b, &nb);
    CHECK_MSG(pa && pb && na == nb, "%s: no parameters", what);
    if (pa && pb && na == nb) {
        size_t diff = 0, first = 0;
        for (size_t i = 0; i < na; i++)
            if (memcmp(&pa[i], &pb[i], sizeof(float)) != 0 && !diff++) first = i;
        CHECK_MSG(diff == 0, "%s: %zu parameters or state floats differ, the first at %zu: %.9g vs %.9g", what, diff, first, pa[first],
                  pb[first]);
    }
    CHECK_EQ_INT(a.n, STEPS);
    CHECK_EQ_INT(b.n, STEPS);
    for (int i = 0; i < STEPS && i < a.n && i < b.n; i++) {
        CHECK_MSG(memcmp(&a.loss[i], &b.loss[i], 4) == 0, "%s step %d: loss %.9g vs %.9g", what, i + 1, a.loss[i], b.loss[i]);
        CHECK_MSG(memcmp(&a.norm[i], &b.norm[i], 4) == 0, "%s step %d: norm %.9g vs %.9g", what, i + 1, a.norm[i], b.norm[i]);
        /* the clip is active when asked: the norm exceeds it */
        if (o->clip > 0 && !a.skipped[i]) CHECK_MSG(a.norm[i] > o->clip, "%s step %d: norm %g under the clip %g", what, i + 1, a.norm[i], o->clip);
    }
    free(pa);
    free(pb);
}

/* every combination of clip (active, off), recompute (none, block), dtype (fp32, bf16) and optimizer */
TEST(fused_update_bit_identical_to_ordinary_step) {
    const char *opts[] = {"adamw", "lion"};
    for (int k = 0; k < 16; k++) {
        gptc_train_options o;
        options(&o, NULL);
        o.clip = k & 1 ? 0.0f : 0.05f;
        o.recompute = k & 2 ? GPTC_RECOMPUTE_BLOCK : GPTC_RECOMPUTE_NONE;
        o.dtype = k & 4 ? GPTC_PRECISION_BF16 : GPTC_PRECISION_FP32;
        o.optimizer = opts[k >> 3];
        char what[128];
        snprintf(what, sizeof what, "%s-%s-%s-clip%g", o.optimizer, gptc_precision_name(o.dtype),
                 gptc_recompute_name(o.recompute), o.clip);
        compare(&o, what);
    }
}

/* the other recompute levels and the unfused model path, once each */
TEST(fused_update_bit_identical_other_paths) {
    gptc_train_options o;
    options(&o, NULL);
    o.recompute = GPTC_RECOMPUTE_ATTN;
    compare(&o, "attn");
    options(&o, NULL);
    o.recompute = GPTC_RECOMPUTE_GELU;
    o.no_fusion = 1;
    compare(&o, "gelu-unfused");
}

/* A non-finite gradient at step 2 drops that step's update under --fused-update: the parameters after
 * two steps are those after one, and the run then goes on as the ordinary one does. */
TEST(fused_update_skips_nonfinite_step) {
    gptc_train_options o;
    options(&o, NULL);
    o.fused_update = 1;
    o.steps = 1;
    steps_seen one, two;
    size_t n1 = 0, n2 = 0;
    float *p1 = train_params(&o, "one-step", &one, &n1);
    setenv("GPTC_FAULT_NONFINITE", "0:2", 1);
    o.steps = 2;
    float *p2 = train_params(&o, "skipped-step", &two, &n2);
    CHECK(two.n == 2 && two.skipped[1] == 1 && !isfinite(two.norm[1]));
    CHECK(p1 && p2 && n1 == n2 && memcmp(p1, p2, sizeof(float) * n1) == 0);
    free(p1);
    free(p2);
    /* over the whole run, with the fault: the same as the ordinary path with it */
    options(&o, NULL);
    compare(&o, "nonfinite");
    unsetenv("GPTC_FAULT_NONFINITE");
}

/* Gradient accumulation needs a whole-model gradient: refused with one line naming the options. */
TEST(fused_update_refuses_accumulation) {
    gptc_train_options o;
    options(&o, NULL);
    o.fused_update = 1;
    o.total_batch = 2L * o.batch * o.seq;
    gptc_train_result r;
    CHECK(gptc_train(&o, NULL, NULL, &r) == GPTC_ERR_ARG);
    const char *e = gptc_last_error();
    CHECK_MSG(strstr(e, "'fused_update'") && strstr(e, "'total_batch'") && strstr(e, "'batch'") && strstr(e, "'seq'"),
              "%s", e);
    /* the CLI names the flags */
    test_cli_result c = test_cli(NULL, "train --data %s --model tiny --batch 2 --seq 16 --total-batch 64 --fused-update",
                                 test_shakespeare_data());
    CHECK_EQ_INT(c.rc, 2);
    CHECK_MSG(strstr(c.err, "--fused-update") && strstr(c.err, "--total-batch"), "%s", c.err);
    test_cli_free(&c);
}

static int stop_at_2(void *user, const gptc_step_info *in) { return in->event == GPTC_EVENT_STEP && in->step == 2; }

/* The flag is not a checkpoint setting: 2 steps with it then 2 without (resumed), and 2 without then 2
 * with, both end on the bits of 4 ordinary steps. */
TEST(fused_update_checkpoints_resume_either_way) {
    gptc_train_options o;
    options(&o, NULL);
    o.clip = 0.05f;
    steps_seen seen;
    size_t n0 = 0;
    float *whole = train_params(&o, "resume-whole", &seen, &n0);
    for (int first = 0; first < 2; first++) {
        char dir[512], step_dir[4096];
        snprintf(dir, sizeof dir, "%s/fused-resume-%d", test_tmpdir(), first);
        options(&o, dir);
        o.clip = 0.05f;
        o.fused_update = first == 0;
        gptc_train_result r;
        CHECK_OK(gptc_train(&o, stop_at_2, NULL, &r)); /* the stop writes a checkpoint */
        o.fused_update = first != 0;
        CHECK_OK(gptc_train(&o, NULL, NULL, &r));
        CHECK_EQ_INT(r.first_step, 2);
        bool found = false;
        gptc_model m;
        CHECK_OK(gptc_ckpt_find(dir, step_dir, sizeof step_dir, &found));
        CHECK(found && gptc_model_init(&m, &r.model) == GPTC_OK);
        if (!found) continue;
        CHECK_OK(gptc_ckpt_load(step_dir, &m, NULL, NULL, NULL));
        CHECK_MSG(whole && memcmp(m.params, whole, sizeof(float) * m.num_floats) == 0,
                  "%s first, resumed %s: parameters differ from 4 ordinary steps", first ? "ordinary" : "fused",
                  first ? "fused" : "ordinary");
        gptc_model_free(&m);
    }
    free(whole);
}
