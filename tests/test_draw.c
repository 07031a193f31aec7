/* test_draw.c — drawing a token (train/draw.c gptc_draw_token / gptc_draw_tokens) against its plain twin
 * here: the same weights and whole weight, every token ranked by a comparison sort (weight descending,
 * ties by id), the kept run and the walk over it as the header states. The draw cuts the ranking at a
 * threshold and ranks with a radix sort; it must pick the same token for the same generator state on
 * flat and peaked logits, ties, top-k and top-p alone and together, top-p 1 (every token kept), and
 * greedy (NaN logits skipped); gptc_draw_tokens must give each row what gptc_draw_token gives it alone. */
#include "test.h"

#include "train/sampler.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    float p;
    int id;
} ref_cand;

static int ref_by_weight(const void *a, const void *b) {
    const ref_cand *x = a, *y = b;
    if (x->p != y->p) return x->p < y->p ? 1 : -1;
    return x->id - y->id;
}

/* the plain twin: every token ranked, then the header's rule */
static int ref_draw(const float *logits, int V, const gptc_sample_options *o, gptc_rng *rng) {
    if (o->temperature <= 0) {
        int best = 0;
        for (int v = 1; v < V; v++)
            if (logits[v] > logits[best]) best = v;
        return best;
    }
    float maxv = -INFINITY;
    for (int v = 0; v < V; v++)
        if (logits[v] > maxv) maxv = logits[v];
    ref_cand *c = malloc(sizeof *c * (size_t)V);
    const float inv_t = 1.0f / o->temperature;
    double part[4] = {0, 0, 0, 0};
    for (int v = 0; v < V; v++) {
        c[v].p = expf((logits[v] - maxv) * inv_t);
        c[v].id = v;
        part[v < V / 4 * 4 ? v % 4 : 0] += c[v].p;
    }
    const double sum = (part[0] + part[1]) + (part[2] + part[3]);
    const double u = gptc_rng_uniform(rng);
    qsort(c, (size_t)V, sizeof *c, ref_by_weight);
    int n = V;
    if (o->top_k > 0 && o->top_k < n) n = o->top_k;
    if (o->top_p < 1) {
        double cum = 0;
        for (int i = 0; i < n; i++) {
            cum += c[i].p / sum;
            if (cum >= o->top_p) {
                n = i + 1;
                break;
            }
        }
    }
    double kept = 0;
    for (int i = 0; i < n; i++) kept += c[i].p;
    double at = u * kept, acc = 0;
    int id = c[n - 1].id;
    for (int i = 0; i < n; i++) {
        acc += c[i].p;
        if (at < acc) {
            id = c[i].id;
            break;
        }
    }
    free(c);
    return id;
}

/* V logits: normal with deviation sd; ties: only 8 distinct values (many equal weights) */
static void make_logits(float *l, int V, float sd, bool ties, uint64_t seed) {
    gptc_rng r;
    gptc_rng_seed(&r, seed);
    for (int v = 0; v < V; v++) l[v] = ties ? (float)(gptc_rng_next(&r) % 8) * sd : sd * (float)gptc_rng_normal(&r);
}

TEST(draw_matches_full_ranking) {
    static const int Vs[] = {1, 7, 300, 50257};
    static const float sds[] = {0.05f, 1.0f, 6.0f};
    static const struct {
        float t, p;
        int k;
    } opts[] = {{0, 0.95f, 0}, {0.8f, 0.95f, 0}, {1, 1, 0}, {1, 0.5f, 40}, {0.7f, 1, 3}, {2, 0.999f, 0}, {1, 0.9f, 1}};
    int draws = 0, mismatches = 0, distinct = 0;
    for (size_t vi = 0; vi < sizeof Vs / sizeof Vs[0]; vi++) {
        const int V = Vs[vi];
        float *l = malloc(sizeof *l * (size_t)V);
        gptc_draw_scratch *s = gptc_draw_scratch_new(V);
        CHECK(s != NULL);
        for (size_t si = 0; si < sizeof sds / sizeof sds[0]; si++)
            for (int ties = 0; ties < 2; ties++) {
                make_logits(l, V, sds[si], ties, 100 + vi * 10 + si * 2 + (uint64_t)ties);
                for (size_t oi = 0; oi < sizeof opts / sizeof opts[0]; oi++) {
                    gptc_sample_options o;
                    gptc_sample_options_default(&o);
                    o.temperature = opts[oi].t, o.top_p = opts[oi].p, o.top_k = opts[oi].k;
                    gptc_rng a, b;
                    gptc_rng_seed(&a, 7 + oi), gptc_rng_seed(&b, 7 + oi);
                    int first = -1;
                    bool varied = false;
                    for (int d = 0; d < (V > 1000 ? 3 : 20); d++) {
                        int want = ref_draw(l, V, &o, &a), got = gptc_draw_token(l, V, &o, s, &b);
                        draws++;
                        if (want != got && mismatches++ < 5)
                            CHECK_MSG(0, "V %d sd %g ties %d t %g p %g k %d draw %d: %d, the full ranking %d", V,
                                      sds[si], ties, o.temperature, o.top_p, o.top_k, d, got, want);
                        varied |= first >= 0 && got != first;
                        first = got;
                    }
                    distinct += varied;
                }
            }
        gptc_draw_scratch_free(s);
        free(l);
    }
    CHECK_EQ_INT(mismatches, 0);
    CHECK(draws > 500);
    CHECK(distinct > 20); /* the draws are random where they should be: the comparison can tell */
}

/* Greedy skips NaN logits wherever they fall in a block of the argmax (not at index 0, where the twin's
 * first guess would keep one) */
TEST(draw_greedy_skips_nans) {
    const int V = 300;
    float l[300];
    make_logits(l, V, 1.0f, false, 5);
    for (int v = 3; v < V; v += 37) l[v] = NAN;
    l[11] = 50.0f; /* the largest, in the lane a NaN entered first (3 and 11 share lane 3 of a block) */
    gptc_draw_scratch *s = gptc_draw_scratch_new(V);
    gptc_sample_options o;
    gptc_sample_options_default(&o);
    o.temperature = 0;
    gptc_rng a, b;
    gptc_rng_seed(&a, 1), gptc_rng_seed(&b, 1);
    CHECK_EQ_INT(gptc_draw_token(l, V, &o, s, &b), ref_draw(l, V, &o, &a));
    CHECK_EQ_INT(gptc_draw_token(l, V, &o, s, &b), 11);
    gptc_draw_scratch_free(s);
}

TEST(draw_tokens_rows_equal_single_draws) {
    const int V = 3000, S = 5;
    float *l = malloc(sizeof *l * (size_t)V * S);
    for (int i = 0; i < S; i++) make_logits(l + (size_t)i * V, V, 2.0f, false, 40 + (uint64_t)i);
    gptc_draw_scratch *s = gptc_draw_scratch_new(V);
    gptc_sample_options o;
    gptc_sample_options_default(&o);
    gptc_rng rows[5], one[5];
    for (int i = 0; i < S; i++) gptc_rng_seed(&rows[i], 9 + (uint64_t)i), gptc_rng_seed(&one[i], 9 + (uint64_t)i);
    for (int step = 0; step < 10; step++) {
        int out[5];
        gptc_draw_tokens(l, (size_t)V, S, V, &o, s, rows, out);
        for (int i = 0; i < S; i++)
            CHECK_EQ_INT(out[i], gptc_draw_token(l + (size_t)i * V, V, &o, s, &one[i]));
    }
    gptc_draw_scratch_free(s);
    free(l);
}
