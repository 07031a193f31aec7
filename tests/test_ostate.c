/* test_ostate.c — compact optimizer state (--optim-state bf16|int8; kernels/ostate.h, optim/ostate.c):
 *   - the two dynamic-tree maps: 256 sorted distinct codes, 0 and +-1 (signed) / 0 and 1 (unsigned),
 *     nearest-code lookup equal to a search of all 256 codes on a million values and on every code's
 *     neighbours and midpoints;
 *   - bf16 stochastic rounding: one of the two neighbours, unbiased on average, a pure function of
 *     (key, index);
 *   - one AdamW step (and one Lion step) on a bf16 / int8 state against a float64 reference on the same
 *     inputs, within the bounds stated at the test;
 *   - the update on ranges (whole tensors, and ZeRO-1 shards snapped to int8 blocks) equal to the whole
 *     arena, and the same bits at 1 and 2 threads;
 *   - training through gptc_train: the 300-step loss curve of bf16 and int8 state against fp32 state;
 *     20 steps straight equal to 10 + resume + 10 bit for bit (weights and state); the same bits at 1 and
 *     2 threads; resuming with another --optim-state refused naming both;
 *   - the planner's bytes for the compact states, and --optim-state with an unknown value refused. */
/* The aarch64 cross gcc 12 dies vectorising this file's reductions (internal compiler error in
 * vect_transform_reduction); the tests do not need vector code. */
#if defined(__aarch64__)
#pragma GCC optimize("no-tree-vectorize")
#endif
#include "test.h"
#include "core/core.h"
#include "io/io.h"
#include "kernels/ostate.h"
#include "model/plan.h"
#include "optim/optimizer.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- the maps */

static unsigned brute_nearest(const float *code, float x) {
    unsigned best = 0;
    for (unsigned i = 1; i < 256; i++)
        if (fabsf(x - code[i]) < fabsf(x - code[best])) best = i; /* strict: ties keep the lower index */
    return best;
}

TEST(ostate_qmap_sorted_with_zero_and_one) {
    for (int sg = 0; sg < 2; sg++) {
        const gptc_qmap *q = gptc_qmap_get(sg);
        int ok = 1, zero = 0, one = 0, mone = 0;
        for (int i = 0; i < 256; i++) {
            if (i && !(q->code[i] > q->code[i - 1])) ok = 0;
            zero += q->code[i] == 0.0f;
            one += q->code[i] == 1.0f;
            mone += q->code[i] == -1.0f;
        }
        CHECK_MSG(ok, "%s map not strictly increasing", sg ? "signed" : "unsigned");
        CHECK(zero == 1 && one == 1 && mone == sg);
        CHECK(q->code[255] == 1.0f);
        CHECK(sg ? q->code[0] == -1.0f : q->code[0] == 0.0f);
        /* the dynamic tree's smallest magnitudes: 1e-7 (unsigned: E = 7), 1e-6 (signed: E = 6, plus the
         * spare pattern at 1e-7); the largest gap is at the top decade: 0.9 / 2^F */
        if (!sg) CHECK(q->code[1] == 1e-7f && q->code[2] > 1e-7f);
        CHECK_NEAR(q->code[255] - q->code[254], 0.9 / (sg ? 64 : 128), 1e-6);
    }
    const float *s = gptc_qmap_get(1)->code;
    int neg = 0, pos = 0;
    for (int i = 0; i < 256; i++) neg += s[i] < 0, pos += s[i] > 0;
    CHECK(neg == 127 && pos == 128);
}

TEST(ostate_qmap_nearest_matches_search) {
    gptc_rng r;
    gptc_rng_seed(&r, 3);
    for (int sg = 0; sg < 2; sg++) {
        const gptc_qmap *q = gptc_qmap_get(sg);
        size_t bad = 0, tried = 0;
        float worst_x = 0;
        for (int i = 0; i < 1000000; i++) {
            /* uniform, and log-uniform over 9 decades (the small codes), both signs for the signed map */
            double u = gptc_rng_uniform(&r);
            float x = i & 1 ? (float)u : (float)pow(10.0, -9.0 * u);
            if (sg && (i & 2)) x = -x;
            tried++;
            if (gptc_qmap_nearest(q, x) != brute_nearest(q->code, x)) bad++, worst_x = x;
        }
        /* the codes, their float neighbours and the midpoints between codes (ties), and their neighbours */
        for (int i = 0; i < 256; i++) {
            float c = q->code[i], m = i < 255 ? (q->code[i] + q->code[i + 1]) / 2 : c;
            float xs[6] = {c, nextafterf(c, 2), nextafterf(c, -2), m, nextafterf(m, 2), nextafterf(m, -2)};
            for (int j = 0; j < 6; j++, tried++)
                if (gptc_qmap_nearest(q, xs[j]) != brute_nearest(q->code, xs[j])) bad++, worst_x = xs[j];
        }
        float sp[4] = {0.0f, -0.0f, 1.0f, sg ? -1.0f : 1e-30f};
        for (int j = 0; j < 4; j++, tried++)
            if (gptc_qmap_nearest(q, sp[j]) != brute_nearest(q->code, sp[j])) bad++, worst_x = sp[j];
        CHECK_MSG(bad == 0, "%s map: %zu of %zu lookups differ from the search (e.g. x = %.9g)", sg ? "signed" : "unsigned",
                  bad, tried, worst_x);
    }
}

TEST(ostate_bf16_stochastic_rounding) {
    /* x between two bf16 values a < x < b: the result is a or b, the mean over many indices is x */
    const float xs[3] = {1.0f + 0.3f / 128, -3.7e-5f, 1234.5678f};
    for (int k = 0; k < 3; k++) {
        float x = xs[k];
        uint32_t u;
        memcpy(&u, &x, 4);
        uint32_t lo_u = u & 0xffff0000u, hi_u = lo_u + 0x10000u;
        float a, b;
        memcpy(&a, &lo_u, 4);
        memcpy(&b, &hi_u, 4);
        double sum = 0;
        int other = 0, n = 200000;
        uint64_t key = gptc_ostate_sr_key(1337, 5, 0);
        for (int i = 0; i < n; i++) {
            uint16_t h = gptc_ostate_bf16_sr(x, gptc_ostate_sr_bits(key, (uint64_t)i));
            uint32_t w = (uint32_t)h << 16;
            float y;
            memcpy(&y, &w, 4);
            other += y != a && y != b;
            sum += y;
        }
        double mean = sum / n, ulp = fabs((double)b - a);
        CHECK_MSG(other == 0, "%g: %d results not a neighbour", x, other);
        /* the mean of n Bernoulli roundings: within 5 standard deviations (ulp / 2 / sqrt(n)) */
        CHECK_MSG(fabs(mean - x) <= 5 * ulp * 0.5 / sqrt(n), "%g: mean %.9g (ulp %g)", x, mean, ulp);
    }
    /* a bf16 value is kept exactly; the bits are a pure function of (key, index) */
    CHECK(gptc_ostate_bf16_sr(1.5f, 0xffff) == gptc_f32_to_bf16(1.5f));
    CHECK(gptc_ostate_sr_bits(7, 123) == gptc_ostate_sr_bits(7, 123));
    CHECK(gptc_ostate_sr_key(1, 2, 0) != gptc_ostate_sr_key(1, 2, 1) && gptc_ostate_sr_key(1, 2, 0) != gptc_ostate_sr_key(1, 3, 0));
    uint16_t nan = gptc_ostate_bf16_sr(NAN, 0xffff);
    CHECK((nan & 0x7f80) == 0x7f80 && (nan & 0x7f));
}

/* ---------------------------------------------------------------- one step against float64 */

/* several tensors with more than one block (wte 6400 = 3 blocks + 256, c_fc 16384 = 8 blocks), biases
 * of one partial block */
static void small_model(gptc_model *m) {
    gptc_model_config cfg = {.layers = 2, .heads = 2, .channels = 64, .context = 40, .vocab = 100};
    CHECK_OK(gptc_model_init(m, &cfg));
    gptc_model_init_weights(m, 7);
}

/* the state's element i of buffer s widened to float (absmax scales applied for int8) */
static double state_value(const gptc_model *m, const gptc_ostate *st, int s, size_t i) {
    size_t e = i - st->lo;
    if (st->type == GPTC_OSTATE_FP32) return ((const float *)st->buf[s])[e];
    if (st->type == GPTC_OSTATE_BF16) return gptc_bf16_to_f32(((const uint16_t *)st->buf[s])[e]);
    size_t b = gptc_ostate_block_of(m->tensors, m->ntensors, i) - st->blk_lo;
    return (double)gptc_qmap_get(s == 0)->code[((const uint8_t *)st->buf[s])[e]] * st->absmax[s][b];
}

/* Fills the state with random moments held exactly by its type: m ~ N(0, 1e-3), v ~ |N(0, 1e-5)| (int8:
 * random codes, scales ~ 1e-3 and 1e-5) */
static void random_state(const gptc_model *m, gptc_ostate *st, gptc_rng *r) {
    for (int s = 0; s < st->nstates; s++) {
        for (size_t i = 0; i < st->hi - st->lo; i++) {
            double x = gptc_rng_normal(r) * (s ? 1e-5 : 1e-3);
            if (s) x = fabs(x);
            if (st->type == GPTC_OSTATE_BF16) ((uint16_t *)st->buf[s])[i] = gptc_f32_to_bf16((float)x);
            else if (st->type == GPTC_OSTATE_INT8)
                ((uint8_t *)st->buf[s])[i] = (uint8_t)(s ? 128 + gptc_rng_next(r) % 128 : gptc_rng_next(r) % 256);
        }
        for (size_t b = 0; st->type == GPTC_OSTATE_INT8 && b < st->nblocks; b++)
            st->absmax[s][b] = (float)((s ? 1e-5 : 1e-3) * (0.5 + gptc_rng_uniform(r)));
    }
}

/* The codes of map sg around x: half the gap between the two codes bracketing x */
static double half_gap(int sg, double x) {
    const float *c = gptc_qmap_get(sg)->code;
    for (int i = 0; i < 255; i++)
        if (x <= c[i + 1]) return (c[i + 1] - c[i]) / 2.0;
    return 0;
}

/* One AdamW update of the small model's whole arena on a compact state vs the same formula in float64
 * from the same (widened) moments. Bounds:
 *   parameters: the fp32 update of the widened moments, so |p - p64| <= 4 ulp(p) + 1e-5 lr (fp32
 *     arithmetic; the moments are rounded only when stored, after the parameters moved);
 *   bf16 moments: stochastic rounding picks one of the two bf16 neighbours of the fp32 value, so
 *     |m - m64| <= 2^-7 |m64| (one bf16 ulp at most) + 2^-22 (|b1 m0| + |(1-b1) g|) (the fp32 arithmetic,
 *     relative to the terms, which may cancel);
 *   int8 moments: the nearest code of m64 / absmax, so |m - m64| <= absmax * (half the gap between the
 *     two codes bracketing m64 / absmax) * (1 + 1e-5) + absmax * 1e-6 (fp32 arithmetic of the scale and
 *     the division). */
static void one_adamw_step(gptc_ostate_type type) {
    const gptc_optimizer_kind *adamw = gptc_optimizer_find("adamw");
    gptc_model m;
    small_model(&m);
    size_t n = m.num_floats;
    gptc_ostate st;
    CHECK_OK(gptc_ostate_alloc(&st, adamw, type, &m, 0, n));
    gptc_rng r;
    gptc_rng_seed(&r, 21);
    random_state(&m, &st, &r);
    float *g = test_randn_f(&r, n, 0.01), *p0 = test_copy_f(m.params, n);
    double *m0 = malloc(sizeof(double) * n), *v0 = malloc(sizeof(double) * n);
    for (size_t i = 0; i < n; i++) m0[i] = state_value(&m, &st, 0, i), v0[i] = state_value(&m, &st, 1, i);
    gptc_train_options o;
    gptc_train_options_default(&o);
    const float lr = 1e-3f, wd = 0.1f, scale = 0.8f;
    const int t = 3;
    adamw->update(&m, &o, g, &st, 0, n, lr, wd, scale, t);
    double bc1 = 1 - pow(o.beta1, t), bc2 = 1 - pow(o.beta2, t);
    double worst_p = 0, worst_m = 0, worst_v = 0;
    size_t bad = 0;
    /* the float64 moments per block, for the int8 scales */
    double *m64 = malloc(sizeof(double) * n), *v64 = malloc(sizeof(double) * n), *ar = malloc(sizeof(double) * n);
    for (int ti = 0; ti < m.ntensors; ti++) {
        const gptc_tensor_desc *d = &m.tensors[ti];
        for (size_t i = d->offset; i < d->offset + d->numel; i++) {
            double gi = (double)g[i] * scale, wdd = d->decay ? wd : 0;
            double mm = o.beta1 * m0[i] + (1 - o.beta1) * gi, vv = o.beta2 * v0[i] + (1 - o.beta2) * gi * gi;
            double p = p0[i] * (1 - (double)lr * wdd) - lr * (mm / bc1) / (sqrt(vv / bc2) + o.eps);
            m64[i] = mm, v64[i] = vv;
            ar[i] = 0x1p-22 * (fabs(o.beta1 * m0[i]) + fabs((1 - o.beta1) * gi));
            double ep = fabs(m.params[i] - p), tp = 4 * fabs(p) * 0x1p-23 + 1e-5 * lr;
            worst_p = fmax(worst_p, ep / tp);
            bad += !(ep <= tp);
        }
        for (size_t b0 = d->offset; b0 < d->offset + d->numel; b0 += GPTC_OSTATE_BLOCK) {
            size_t b1 = b0 + GPTC_OSTATE_BLOCK < d->offset + d->numel ? b0 + GPTC_OSTATE_BLOCK : d->offset + d->numel;
            double am = 0, av = 0;
            for (size_t i = b0; i < b1; i++) am = fmax(am, fabs(m64[i])), av = fmax(av, v64[i]);
            for (size_t i = b0; i < b1; i++) {
                double em = fabs(state_value(&m, &st, 0, i) - m64[i]), ev = fabs(state_value(&m, &st, 1, i) - v64[i]);
                double tm, tv;
                if (type == GPTC_OSTATE_BF16) {
                    tm = fabs(m64[i]) * 0x1p-7 + ar[i];
                    tv = fabs(v64[i]) * (0x1p-7 + 1e-6);
                } else {
                    tm = am * (half_gap(1, m64[i] / am) * (1 + 1e-5) + 1e-6);
                    tv = av * (half_gap(0, v64[i] / av) * (1 + 1e-5) + 1e-6);
                }
                worst_m = fmax(worst_m, tm > 0 ? em / tm : em > 0 ? INFINITY : 0);
                worst_v = fmax(worst_v, tv > 0 ? ev / tv : ev > 0 ? INFINITY : 0);
                bad += !(em <= tm) + !(ev <= tv);
            }
        }
    }
    printf("    %s: worst error / bound: parameters %.3f, exp_avg %.3f, exp_avg_sq %.3f\n", gptc_ostate_name(type),
           worst_p, worst_m, worst_v);
    CHECK_MSG(bad == 0, "%s: %zu values outside their bound", gptc_ostate_name(type), bad);
    /* and the state really is compact: something was rounded */
    size_t moved = 0;
    for (size_t i = 0; i < n; i++) moved += state_value(&m, &st, 0, i) != (double)(float)m64[i];
    CHECK(moved > 0);
    free(m0), free(v0), free(m64), free(v64), free(ar), free(g), free(p0);
    gptc_ostate_free(&st);
    gptc_model_free(&m);
}

TEST(ostate_adamw_bf16_step_matches_f64) { one_adamw_step(GPTC_OSTATE_BF16); }
TEST(ostate_adamw_int8_step_matches_f64) { one_adamw_step(GPTC_OSTATE_INT8); }

/* ---------------------------------------------------------------- ranges, shards, threads */

/* 3 updates of the small model from the same start, with the arena updated as `parts` ranges: the
 * whole (parts 1), whole tensors (parts 0: one call per tensor), or ZeRO-1 shards of `parts` ranks
 * snapped to the blocks, each with its own state buffers; the parameters and every state's bits
 * gathered into whole-arena copies (pbits, sbits: element i of buffer s at s * n + i, scales after). */
static void run_ranges(const char *name, gptc_ostate_type type, int parts, int threads, float **pout,
                       unsigned char **sout, size_t *slen) {
    const gptc_optimizer_kind *k = gptc_optimizer_find(name);
    gptc_model m;
    small_model(&m);
    size_t n = m.num_floats, el = gptc_ostate_elem(type);
    int nr = parts ? parts : m.ntensors;
    size_t *bounds = malloc(sizeof(size_t) * (nr + 1));
    if (parts) {
        size_t share = (n + parts - 1) / parts;
        share = (share + 15) / 16 * 16;
        for (int q = 0; q <= parts; q++) bounds[q] = (size_t)q * share < n ? (size_t)q * share : n;
        gptc_ostate_snap_bounds(m.tensors, m.ntensors, type, parts, bounds);
    } else {
        for (int q = 0; q < nr; q++) bounds[q] = q ? m.tensors[q].offset : 0;
        bounds[nr] = n;
    }
    gptc_ostate *st = calloc(nr, sizeof *st);
    for (int q = 0; q < nr; q++) CHECK_OK(gptc_ostate_alloc(&st[q], k, type, &m, bounds[q], bounds[q + 1]));
    gptc_rng r;
    gptc_rng_seed(&r, 5);
    float *g = test_randn_f(&r, n, 0.01);
    gptc_train_options o;
    gptc_train_options_default(&o);
    int saved = omp_get_max_threads();
    omp_set_num_threads(threads);
    for (int t = 1; t <= 3; t++)
        for (int q = 0; q < nr; q++) k->update(&m, &o, g + bounds[q], &st[q], bounds[q], bounds[q + 1], 1e-3f, 0.1f, 0.9f, t);
    omp_set_num_threads(saved);
    size_t blocks = gptc_ostate_block_of(m.tensors, m.ntensors, n);
    *slen = (size_t)k->nstates * (n * el + (type == GPTC_OSTATE_INT8 ? blocks * 4 : 0));
    unsigned char *s = calloc(1, *slen);
    for (int q = 0; q < nr; q++)
        for (int b = 0; b < k->nstates; b++) {
            /* padding between tensors is never touched: compare only what the tensors own */
            if (bounds[q + 1] > bounds[q]) memcpy(s + b * n * el + bounds[q] * el, st[q].buf[b], (bounds[q + 1] - bounds[q]) * el);
            if (type == GPTC_OSTATE_INT8 && st[q].nblocks)
                memcpy(s + k->nstates * n * el + (b * blocks + st[q].blk_lo) * 4, st[q].absmax[b], st[q].nblocks * 4);
        }
    *pout = test_copy_f(m.params, n);
    *sout = s;
    for (int q = 0; q < nr; q++) gptc_ostate_free(&st[q]);
    free(st), free(bounds), free(g);
    gptc_model_free(&m);
}

TEST(ostate_ranges_shards_threads_same_bits) {
    const char *names[2] = {"adamw", "lion"};
    for (int kk = 0; kk < 2; kk++)
        for (gptc_ostate_type type = GPTC_OSTATE_BF16; type <= GPTC_OSTATE_INT8; type++) {
            float *p_ref;
            unsigned char *s_ref;
            size_t len, len2;
            run_ranges(names[kk], type, 1, 2, &p_ref, &s_ref, &len);
            /* whole tensors one call each; ZeRO-1 shards of 2, 3 and 7 ranks; and the whole on 1 thread */
            const int parts[5] = {0, 2, 3, 7, 1}, threads[5] = {2, 2, 2, 2, 1};
            for (int c = 0; c < 5; c++) {
                float *p;
                unsigned char *s;
                run_ranges(names[kk], type, parts[c], threads[c], &p, &s, &len2);
                gptc_model m;
                small_model(&m);
                bool same_p = memcmp(p, p_ref, m.num_floats * 4) == 0, same_s = len == len2 && memcmp(s, s_ref, len) == 0;
                gptc_model_free(&m);
                CHECK_MSG(same_p && same_s, "%s %s, %d ranges, %d threads: %s differ from the whole arena on 2 threads",
                          names[kk], gptc_ostate_name(type), parts[c], threads[c], same_p ? "states" : "parameters");
                free(p), free(s);
            }
            free(p_ref), free(s_ref);
        }
}

TEST(ostate_snapped_bounds_split_no_block) {
    gptc_model m;
    small_model(&m);
    size_t n = m.num_floats, bounds[8];
    for (int world = 2; world <= 7; world++) {
        size_t share = (n + world - 1) / world;
        share = (share + 15) / 16 * 16;
        for (int q = 0; q <= world; q++) bounds[q] = (size_t)q * share < n ? (size_t)q * share : n;
        gptc_ostate_snap_bounds(m.tensors, m.ntensors, GPTC_OSTATE_INT8, world, bounds);
        for (int q = 1; q < world; q++) {
            CHECK(bounds[q] >= bounds[q - 1] && bounds[q] % 16 == 0);
            for (int i = 0; i < m.ntensors; i++) {
                const gptc_tensor_desc *d = &m.tensors[i];
                if (bounds[q] > d->offset && bounds[q] < d->offset + d->numel)
                    CHECK_MSG((bounds[q] - d->offset) % GPTC_OSTATE_BLOCK == 0, "world %d: bound %zu cuts a block of %s",
                              world, bounds[q], d->name);
            }
        }
    }
    gptc_model_free(&m);
}

/* ---------------------------------------------------------------- training */

static void tiny(gptc_train_options *o) { test_tiny_train_options(o, test_shakespeare_data()); }

typedef struct { float *loss; int n; } curve;
static int record_curve(void *user, const gptc_step_info *in) {
    curve *c = user;
    if (in->event == GPTC_EVENT_STEP) c->loss[c->n++] = in->loss;
    return 0;
}

/* The same 300-step run of the tiny model (B=4, T=32, lr 3e-3) with fp32, bf16 and int8 optimizer state,
 * and with fp32 state and another seed (for scale: the run-to-run noise). Bounds: every 25-step window's
 * mean loss of a compact state within 0.05 + 4 % of fp32's (the band of train_bf16_loss_curve_tracks_fp32)
 * or, where the curve leaves its unigram plateau (a step any perturbation moves), within 1.25 x the gap
 * the other seed shows in that window; the last 100 steps' mean within 0.05 + 4 %; the curves differ (the
 * state really is compact), and all fall by more than 1. */
TEST(ostate_loss_curves_track_fp32_state) {
    enum { STEPS = 300, WIN = 25, RUNS = 4 };
    static float loss[RUNS][STEPS];
    gptc_train_options o;
    tiny(&o);
    o.steps = STEPS;
    o.warmup = 20;
    o.shuffle = 0;
    const char *types[RUNS] = {"fp32", "bf16", "int8", "fp32"};
    gptc_train_result r;
    for (int k = 0; k < RUNS; k++) {
        curve c = {loss[k], 0};
        o.optim_state = types[k];
        o.seed = k == 3 ? 7 : 1337;
        CHECK_OK(gptc_train(&o, record_curve, &c, &r));
        CHECK(c.n == STEPS);
        if (c.n != STEPS) return;
    }
    const float *lf = loss[0], *ls = loss[3];
    for (int k = 1; k <= 2; k++) {
        const float *lc = loss[k];
        int differ = 0;
        double worst_gap = 0, worst_seed = 0, tail_f = 0, tail_c = 0;
        for (int s = 0; s < STEPS; s++) differ += lf[s] != lc[s];
        for (int s = STEPS - 100; s < STEPS; s++) tail_f += lf[s] / 100, tail_c += lc[s] / 100;
        for (int w = 0; w < STEPS / WIN; w++) {
            double mf = 0, mc = 0, ms = 0;
            for (int s = w * WIN; s < (w + 1) * WIN; s++) mf += lf[s] / WIN, mc += lc[s] / WIN, ms += ls[s] / WIN;
            double gap = fabs(mc - mf), band = fmax(0.05 + 0.04 * mf, 1.25 * fabs(ms - mf));
            worst_gap = fmax(worst_gap, gap);
            worst_seed = fmax(worst_seed, fabs(ms - mf));
            CHECK_MSG(gap <= band, "%s state, steps %d-%d: mean loss %.4f vs fp32 state %.4f (band %.4f)", types[k],
                      w * WIN + 1, (w + 1) * WIN, mc, mf, band);
        }
        printf("    %s state: loss %.4f -> %.4f (fp32 state %.4f -> %.4f); %d of %d steps differ; worst window gap "
               "%.4f (another seed: %.4f); last 100 steps %.4f vs %.4f\n",
               types[k], lc[0], lc[STEPS - 1], lf[0], lf[STEPS - 1], differ, STEPS, worst_gap, worst_seed, tail_c, tail_f);
        CHECK_MSG(fabs(tail_c - tail_f) <= 0.05 + 0.04 * tail_f, "%s state: last 100 steps %.4f vs fp32 state %.4f", types[k],
                  tail_c, tail_f);
        CHECK_MSG(differ > STEPS / 2, "%s state agrees with fp32 on %d of %d steps: is it running?", types[k],
                  STEPS - differ, STEPS);
        CHECK(lc[STEPS - 1] < lc[0] - 1.0);
    }
}

/* Whether two checkpoint files hold the same tensors with the same bytes (names, dtypes, data). */
static bool same_tensors(const char *pa, const char *pb, char *why, size_t cap) {
    gptc_st_file a = {0}, b = {0};
    if (gptc_st_open(&a, pa) || gptc_st_open(&b, pb)) {
        snprintf(why, cap, "%s", gptc_last_error());
        gptc_st_close(&a);
        return false;
    }
    bool same = a.ntensors == b.ntensors;
    for (int i = 0; same && i < a.ntensors; i++) {
        const gptc_st_tensor *x = &a.tensors[i], *y = gptc_st_find(&b, x->name);
        same = y && y->dtype == x->dtype && y->nbytes == x->nbytes && memcmp(x->data, y->data, x->nbytes) == 0;
        if (!same) snprintf(why, cap, "%s differs", x->name);
    }
    gptc_st_close(&a);
    gptc_st_close(&b);
    return same;
}

/* the step-N checkpoint's file of dir */
static const char *ck_file(char *buf, size_t cap, const char *dir, int step, const char *file) {
    return test_path(buf, cap, "%s/step-%08d/%s", dir, step, file);
}

static int stop_at_10(void *user, const gptc_step_info *in) { return in->event == GPTC_EVENT_STEP && in->step == 10; }

/* 20 steps in one run equal 10 steps, a checkpoint, a resume and 10 more, bit for bit (the weights and
 * every state tensor: values, and for int8 the scales); the same 20 steps on 1 thread equal them; the
 * checkpoint holds the state in its dtype; resuming it with another 'optim_state' is refused naming both. */
static void resume_exact(const char *type) {
    gptc_train_options o;
    tiny(&o);
    o.optim_state = type;
    o.dropout = 0.1f;
    gptc_train_result r;
    char straight[600], split[600], one[600], a[700], b[700], why[200] = "";
    test_dir("ostate-straight-", type, straight, sizeof straight);
    test_dir("ostate-split-", type, split, sizeof split);
    test_dir("ostate-1thread-", type, one, sizeof one);
    o.ckpt_dir = straight;
    CHECK_OK(gptc_train(&o, NULL, NULL, &r));
    o.ckpt_dir = split;
    CHECK_OK(gptc_train(&o, stop_at_10, NULL, &r));
    CHECK_OK(gptc_train(&o, NULL, NULL, &r));
    CHECK_EQ_INT(r.first_step, 10);
    o.ckpt_dir = one;
    o.threads = 1;
    CHECK_OK(gptc_train(&o, NULL, NULL, &r));
    const char *files[2] = {"model.safetensors", "optim.safetensors"};
    for (int f = 0; f < 2; f++) {
        CHECK_MSG(same_tensors(ck_file(a, sizeof a, straight, 20, files[f]), ck_file(b, sizeof b, split, 20, files[f]), why,
                               sizeof why),
                  "%s: resumed %s differs from the straight run's: %s", type, files[f], why);
        CHECK_MSG(same_tensors(ck_file(a, sizeof a, straight, 20, files[f]), ck_file(b, sizeof b, one, 20, files[f]), why,
                               sizeof why),
                  "%s: %s on 1 thread differs from 2 threads': %s", type, files[f], why);
    }
    /* the state's tensors, in its dtype */
    gptc_st_file f = {0};
    CHECK_OK(gptc_st_open(&f, ck_file(a, sizeof a, straight, 20, "optim.safetensors")));
    const gptc_st_tensor *m = gptc_st_find(&f, "exp_avg.wte.weight"), *s = gptc_st_find(&f, "exp_avg_sq.absmax.wte.weight");
    bool int8 = strcmp(type, "int8") == 0;
    CHECK(m && m->dtype == (int8 ? GPTC_U8 : GPTC_BF16));
    CHECK(int8 ? s && s->dtype == GPTC_F32 : !s);
    CHECK(gptc_st_meta(&f, "gptc.optim_state") && strcmp(gptc_st_meta(&f, "gptc.optim_state"), type) == 0);
    gptc_st_close(&f);
    /* another state type on resume: refused, one line naming both */
    o.optim_state = int8 ? "bf16" : "int8";
    o.steps = 25;
    o.ckpt_dir = straight;
    CHECK(gptc_train(&o, NULL, NULL, &r) == GPTC_ERR_STATE);
    char want[128];
    snprintf(want, sizeof want, "holds optimizer state in %s, but this run asks for 'optim_state' %s", type, o.optim_state);
    CHECK_MSG(strstr(gptc_last_error(), want) && !strchr(gptc_last_error(), '\n'), "got: %s", gptc_last_error());
}

TEST(ostate_bf16_resume_and_threads_bit_exact) { resume_exact("bf16"); }
TEST(ostate_int8_resume_and_threads_bit_exact) { resume_exact("int8"); }

/* Lion's one moment on an int8 state trains and resumes bit for bit too. */
TEST(ostate_lion_int8_resume_bit_exact) {
    gptc_train_options o;
    tiny(&o);
    o.optimizer = "lion";
    o.lr = 3e-4f;
    o.optim_state = "int8";
    gptc_train_result r;
    char straight[600], split[600], a[700], b[700], why[200] = "";
    o.ckpt_dir = test_dir("ostate-lion-", "straight", straight, sizeof straight);
    CHECK_OK(gptc_train(&o, NULL, NULL, &r));
    o.ckpt_dir = test_dir("ostate-lion-", "split", split, sizeof split);
    CHECK_OK(gptc_train(&o, stop_at_10, NULL, &r));
    CHECK_OK(gptc_train(&o, NULL, NULL, &r));
    CHECK_MSG(same_tensors(ck_file(a, sizeof a, straight, 20, "optim.safetensors"),
                           ck_file(b, sizeof b, split, 20, "optim.safetensors"), why, sizeof why),
              "lion int8: %s", why);
    CHECK(r.last_loss < 5);
}

/* ---------------------------------------------------------------- planner and CLI */

/* The planner's optimizer bytes for each type: 4, 2, 1 bytes per element and state, int8 plus a scale per
 * block; ZeRO-1 on 4 ranks plans the largest snapped shard. */
TEST(ostate_plan_bytes) {
    gptc_mem_request r;
    gptc_mem_request_default(&r);
    CHECK_OK(gptc_model_preset("gpt2-1.3b", &r.model));
    r.batch = 1;
    r.seq = 1024;
    gptc_mem_plan p[3];
    const char *types[3] = {"fp32", "bf16", "int8"};
    size_t n = gptc_model_arena_floats(&r.model);
    for (int i = 0; i < 3; i++) {
        r.optim_state = types[i];
        CHECK_OK(gptc_mem_plan_make(&r, &p[i]));
    }
    CHECK_EQ_INT(p[0].optim, 2 * gptc_alloc_block_bytes(n * 4));
    CHECK_EQ_INT(p[1].optim, 2 * gptc_alloc_block_bytes(n * 2));
    int nt = gptc_model_tensor_table(&r.model, NULL);
    gptc_tensor_desc *td = malloc(sizeof *td * nt);
    gptc_model_tensor_table(&r.model, td);
    size_t blocks = gptc_ostate_block_of(td, nt, n);
    CHECK_EQ_INT(p[2].optim, 2 * (gptc_alloc_block_bytes(n) + gptc_alloc_block_bytes(blocks * 4)));
    printf("    gpt2-1.3b optimizer state: fp32 %.2f GiB, bf16 %.2f GiB, int8 %.2f GiB (%zu blocks)\n", p[0].optim / 1073741824.0,
           p[1].optim / 1073741824.0, p[2].optim / 1073741824.0, blocks);
    CHECK(p[2].total < p[1].total && p[1].total < p[0].total);
    r.zero = 1;
    r.ranks = 4;
    CHECK_OK(gptc_mem_plan_make(&r, &p[2]));
    CHECK(p[2].optim > 2 * gptc_alloc_block_bytes(n / 4) && p[2].optim < 2 * gptc_alloc_block_bytes(n / 4 + 4096 + blocks));
    r.optim_state = "fp16";
    CHECK(gptc_mem_plan_make(&r, &p[0]) == GPTC_ERR_ARG && strstr(gptc_last_error(), "'optim_state' fp16"));
    free(td);
}

TEST(ostate_cli_refuses_unknown_type) {
    test_cli_result c = test_cli(NULL, "train --data %s --optim-state fp8 --steps 1", test_shakespeare_data());
    CHECK_EQ_INT(c.rc, 2);
    CHECK_MSG(strstr(c.err, "--optim-state fp8") && strstr(c.err, "fp32, bf16, int8") && test_count_lines(c.err) == 1,
              "got: %s", c.err);
    test_cli_free(&c);
    c = test_cli(NULL, "plan --model gpt2-1.3b --optim-state int8 --memory 24");
    CHECK_EQ_INT(c.rc, 0);
    CHECK_MSG(strstr(c.out, "optimizer state") && strstr(c.out, "int8"), "got: %s", c.out);
    test_cli_free(&c);
}
