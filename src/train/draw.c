/* draw.c — drawing one token from a row of logits (greedy, or temperature with top-k / top-p), as sampler.h
 * gptc_draw_token describes: the tokens ranked by weight (ties by id), the kept ones the first top_k and
 * the shortest run whose share of the whole weight reaches top_p, and the token drawn by walking that run.
 *
 * Ranking all V tokens (a sort of 50257 for GPT-2) cost several milliseconds per sample and step, more than
 * the decode step itself. Only the head of the ranking is ever walked, so the tokens are first cut at a
 * weight threshold: those at or above it are exactly the head of the ranking, and when the kept run ends
 * inside them (almost always at the first threshold) the draw is the same as from the whole ranking, the
 * same sums in the same order. Otherwise the threshold is lowered and the cut made again, down to every
 * token (top_p 1 without top_k keeps them all). */
#include "train/sampler.h"

#include "core/core.h"

#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct gptc_draw_cand {
    float p;
    int id;
} gptc_draw_cand;

/* One thread's working arrays for V tokens */
typedef struct draw_arrays {
    float *w;              /* (V) each token's weight exp((logit - max) / temperature) */
    gptc_draw_cand *c;     /* (V) the tokens at or above the threshold, ranked */
    gptc_draw_cand *tmp;   /* (V) the ranking's other buffer */
} draw_arrays;

struct gptc_draw_scratch {
    int V;       /* the most tokens a row may have */
    int threads;
    draw_arrays *a; /* (threads) */
};

gptc_draw_scratch *gptc_draw_scratch_new(int V) {
    gptc_draw_scratch *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->V = V;
    s->threads = omp_get_max_threads();
    s->a = calloc((size_t)s->threads, sizeof *s->a);
    if (!s->a) {
        free(s);
        return NULL;
    }
    for (int t = 0; t < s->threads; t++) {
        draw_arrays *a = &s->a[t];
        a->w = malloc(sizeof *a->w * (size_t)V);
        a->c = malloc(sizeof *a->c * (size_t)V);
        a->tmp = malloc(sizeof *a->tmp * (size_t)V);
        if (!a->w || !a->c || !a->tmp) {
            gptc_draw_scratch_free(s);
            return NULL;
        }
    }
    return s;
}

void gptc_draw_scratch_free(gptc_draw_scratch *s) {
    if (!s) return;
    for (int t = 0; t < s->threads; t++) free(s->a[t].w), free(s->a[t].c), free(s->a[t].tmp);
    free(s->a);
    free(s);
}

/* Ranks c[0..n) (in increasing id) by weight, largest first, ties in id order: a stable LSD radix sort on the
 * weights' bits (a non-negative float's bits order as the float does), 11 bits per pass, into tmp and back.
 * The same order as a comparison sort on (weight descending, id ascending), at a few passes over the n. */
#define RADIX_BITS 11
static void rank_by_weight(gptc_draw_cand *c, gptc_draw_cand *tmp, int n) {
    static const int passes = (31 + RADIX_BITS - 1) / RADIX_BITS; /* bit 31 (the sign) is 0 */
    gptc_draw_cand *src = c, *dst = tmp;
    for (int pass = 0; pass < passes; pass++) {
        const int shift = pass * RADIX_BITS;
        int count[1 << RADIX_BITS] = {0};
        for (int i = 0; i < n; i++) {
            uint32_t b;
            memcpy(&b, &src[i].p, sizeof b);
            count[(~b >> shift) & ((1u << RADIX_BITS) - 1)]++; /* ~: larger weights first */
        }
        int at = 0;
        for (int d = 0; d < 1 << RADIX_BITS; d++) {
            int k = count[d];
            count[d] = at, at += k;
        }
        for (int i = 0; i < n; i++) {
            uint32_t b;
            memcpy(&b, &src[i].p, sizeof b);
            dst[count[(~b >> shift) & ((1u << RADIX_BITS) - 1)]++] = src[i];
        }
        gptc_draw_cand *t = src;
        src = dst, dst = t;
    }
    if (src != c) memcpy(c, src, sizeof *c * (size_t)n);
}

/* the first index of the largest logit (a NaN never is; 0 when none is a number). Blocks of 64 are reduced
 * in 8 independent lanes (a running compare-and-select carries one long chain through all V), and a block
 * is searched for the index only when its largest beats the best so far: rarely, after the first blocks. */
static int argmax(const float *logits, int V) {
    int best = 0, v = 0;
    float bv = -INFINITY;
    for (; v + 64 <= V; v += 64) {
        float m[8];
        for (int j = 0; j < 8; j++) m[j] = -INFINITY;
        for (int i = 0; i < 64; i += 8)
            for (int j = 0; j < 8; j++) m[j] = logits[v + i + j] > m[j] ? logits[v + i + j] : m[j];
        float bm = m[0];
        for (int j = 1; j < 8; j++) bm = m[j] > bm ? m[j] : bm;
        if (bm > bv)
            for (int i = 0; i < 64; i++)
                if (logits[v + i] == bm) {
                    best = v + i, bv = bm;
                    break;
                }
    }
    for (; v < V; v++)
        if (logits[v] > bv) bv = logits[v], best = v;
    return best;
}

/* How many of the ranked tokens c (nc of the V, the head of the ranking) are kept: the first top_k, then the
 * shortest run whose weight reaches top_p of sum. Returns -1 when that cannot be told from the nc. */
static int kept_count(const gptc_draw_cand *c, int nc, int V, const gptc_sample_options *o, double sum) {
    int n = V;
    if (o->top_k > 0 && o->top_k < n) n = o->top_k;
    if (o->top_p < 1) {
        double cum = 0;
        for (int i = 0; i < n && i < nc; i++) {
            cum += c[i].p / sum;
            if (cum >= o->top_p) return i + 1;
        }
    }
    return n <= nc ? n : -1;
}

/* Weight thresholds, the top token's weight being 1: the last takes every token. */
static const float k_thresholds[] = {0x1p-10f, 0x1p-24f, 0x1p-60f, 0.0f};

/* gptc_draw_token with one thread's arrays */
static int draw_one(const float *logits, int V, const gptc_sample_options *o, draw_arrays *s, gptc_rng *rng) {
    if (o->temperature <= 0) return argmax(logits, V);
    const float maxv = logits[argmax(logits, V)];
    const float inv_t = 1.0f / o->temperature;
    for (int v = 0; v < V; v++) s->w[v] = expf((logits[v] - maxv) * inv_t);
    double part[4] = {0, 0, 0, 0}; /* the whole weight: 4 running sums (v mod 4), then added in order */
    int v = 0;
    for (; v + 4 <= V; v += 4)
        for (int j = 0; j < 4; j++) part[j] += s->w[v + j];
    for (; v < V; v++) part[0] += s->w[v];
    const double sum = (part[0] + part[1]) + (part[2] + part[3]);
    const double u = gptc_rng_uniform(rng);
    for (size_t t = 0; t < sizeof k_thresholds / sizeof k_thresholds[0]; t++) {
        const float tau = k_thresholds[t];
        int nc = 0;
        for (int id = 0; id < V; id++) { /* branch-free: a token in or out is not predictable */
            s->c[nc] = (gptc_draw_cand){s->w[id], id};
            nc += s->w[id] >= tau;
        }
        rank_by_weight(s->c, s->tmp, nc);
        const int n = kept_count(s->c, nc, V, o, sum);
        if (n < 0) continue; /* the kept run goes past the cut: a lower threshold */
        double kept = 0;
        for (int i = 0; i < n; i++) kept += s->c[i].p;
        double at = u * kept, acc = 0;
        for (int i = 0; i < n; i++) {
            acc += s->c[i].p;
            if (at < acc) return s->c[i].id;
        }
        return s->c[n - 1].id;
    }
    return argmax(logits, V); /* not reached: the last threshold takes every token */
}

int gptc_draw_token(const float *logits, int V, const gptc_sample_options *o, gptc_draw_scratch *s, gptc_rng *rng) {
    GPTC_ASSERT(V >= 1 && V <= s->V); /* the arrays hold the scratch's V tokens */
    return draw_one(logits, V, o, &s->a[0], rng);
}

void gptc_draw_tokens(const float *logits, size_t ld, int S, int V, const gptc_sample_options *o, gptc_draw_scratch *s,
                      gptc_rng *rng, int *out) {
    GPTC_ASSERT(V >= 1 && V <= s->V);
    const int nt = S < s->threads ? S : s->threads;
#pragma omp parallel for schedule(static) num_threads(nt) if (nt > 1 && o->temperature > 0)
    for (int i = 0; i < S; i++) out[i] = draw_one(logits + (size_t)i * ld, V, o, &s->a[omp_get_thread_num()], &rng[i]);
}
