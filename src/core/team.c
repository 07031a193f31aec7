/* team.c — the team's measured speeds and the split of items by them (team.h). */
#include "core/team.h"
#include "core/core.h"

#include <omp.h>

#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* Speeds of the calling thread's team, each thread's rate relative to the others' (any common scale: the
 * weights divide by the participants' mean). */
typedef struct team_state {
    bool init;
    long learned; /* calls learned from */
    double s[GPTC_TEAM_MAX];
} team_state;
static _Thread_local team_state tl_team;

enum { LEARN_MIN_US = 50 };
#define LEARN_RATE 0.125   /* a call moves each speed this far towards its measured value */
#define OBSERVED_SPAN 1.25 /* ... taken within this factor of the speed so far */
#define SPEED_LO (1.0 / 64)
#define SPEED_HI 64.0 /* speeds are kept within these, so no run of calls drives one to 0 or infinity */

static _Atomic int g_even = -1; /* -1: not read from the environment yet */

int gptc_team_even(void) {
    int e = atomic_load_explicit(&g_even, memory_order_relaxed);
    if (e < 0) {
        const char *env = getenv("GPTC_TEAM_SPLIT");
        e = env && strcmp(env, "even") == 0;
        atomic_store_explicit(&g_even, e, memory_order_relaxed);
    }
    return e;
}

void gptc_team_set_even(int even) { atomic_store_explicit(&g_even, even != 0, memory_order_relaxed); }

static team_state *state(void) {
    team_state *t = &tl_team;
    if (!t->init) gptc_team_reset();
    return t;
}

void gptc_team_reset(void) {
    team_state *t = &tl_team;
    t->init = true;
    t->learned = 0;
    for (int i = 0; i < GPTC_TEAM_MAX; i++) t->s[i] = 1.0;
}

void gptc_team_weights(int n, int *w) {
    if (n > GPTC_TEAM_MAX || gptc_team_even()) {
        for (int i = 0; i < n; i++) w[i] = GPTC_TEAM_ONE;
        return;
    }
    const team_state *t = state();
    double mean = 0;
    for (int i = 0; i < n; i++) mean += t->s[i];
    mean /= n;
    for (int i = 0; i < n; i++) {
        const double x = GPTC_TEAM_ONE * t->s[i] / mean + 0.5;
        w[i] = x < GPTC_TEAM_WMIN ? GPTC_TEAM_WMIN : x > GPTC_TEAM_WMAX ? GPTC_TEAM_WMAX : (int)x;
    }
}

int gptc_team_part(int P, int n, int i, const int *w) {
    long cum = 0, tot = 0;
    bool equal = true;
    for (int j = 0; w && j < n; j++) {
        tot += w[j];
        if (j < i) cum += w[j];
        equal = equal && w[j] == w[0];
    }
    if (!w || equal) return (int)((long)P * i / n);
    /* the boundaries at the nearest item to their share of the weights */
    if (P < n) return (int)(((long)P * cum * 2 + tot) / (2 * tot));
    return i + (int)(((long)(P - n) * cum * 2 + tot) / (2 * tot));
}

int gptc_team_part_max(int P, int n) {
    if (n <= 1) return P;
    /* a part's share of the weights is at most WMAX / (WMAX + (n-1) WMIN); rounding its two ends adds one at most */
    const long tot = GPTC_TEAM_WMAX + (long)(n - 1) * GPTC_TEAM_WMIN;
    const long extra = P >= n ? P - n : P;
    long most = (extra * GPTC_TEAM_WMAX + tot - 1) / tot + 1 + (P >= n);
    return (int)(most < P ? most : P);
}

void gptc_team_learn(int n, const double *work, const double *secs) {
    if (n < 2 || n > GPTC_TEAM_MAX) return;
    double rate[GPTC_TEAM_MAX], mean_rate = 0, mean_s = 0;
    team_state *t = state();
    for (int i = 0; i < n; i++) {
        if (!(work[i] > 0) || !(secs[i] >= LEARN_MIN_US * 1e-6)) return;
        rate[i] = work[i] / secs[i];
        mean_rate += rate[i];
        mean_s += t->s[i];
    }
    mean_rate /= n, mean_s /= n;
    double next[GPTC_TEAM_MAX], mean_next = 0;
    for (int i = 0; i < n; i++) {
        /* the call's own figure, within OBSERVED_SPAN of the speed so far: one call that a preempted thread or a
         * page fault stretched moves a speed by LEARN_RATE * (OBSERVED_SPAN - 1) at most */
        const double seen = mean_s * rate[i] / mean_rate, lo = t->s[i] / OBSERVED_SPAN, hi = t->s[i] * OBSERVED_SPAN;
        next[i] = t->s[i] + LEARN_RATE * ((seen < lo ? lo : seen > hi ? hi : seen) - t->s[i]);
        mean_next += next[i] / n;
    }
    for (int i = 0; i < n; i++) { /* the threads' mean kept, so the speeds do not drift together */
        const double s = next[i] * mean_s / mean_next;
        t->s[i] = s < SPEED_LO ? SPEED_LO : s > SPEED_HI ? SPEED_HI : s;
    }
    t->learned++;
}

long gptc_team_speeds(int n, double *s) {
    const team_state *t = state();
    for (int i = 0; i < n && i < GPTC_TEAM_MAX; i++) s[i] = t->s[i];
    return t->learned;
}

void gptc_team_set_speeds(int n, const double *s) {
    team_state *t = state();
    for (int i = 0; i < n && i < GPTC_TEAM_MAX; i++) t->s[i] = s[i];
}

void gptc_team_run_begin(gptc_team_run *r, int P, int n) {
    r->P = P;
    r->n = n > GPTC_TEAM_MAX ? 0 : n; /* 0: an even split, nothing learned */
    gptc_team_weights(r->n, r->w);
    for (int i = 0; i < r->n; i++) r->work[i] = r->secs[i] = 0;
}

void gptc_team_run_start(gptc_team_run *r) {
    if (omp_get_num_threads() == r->n) r->t0[omp_get_thread_num()] = gptc_now();
}

void gptc_team_run_items(gptc_team_run *r, int *lo, int *hi) {
    const int n = omp_get_num_threads(), t = omp_get_thread_num();
    const int *w = n == r->n ? r->w : NULL;
    *lo = gptc_team_part(r->P, n, t, w), *hi = gptc_team_part(r->P, n, t + 1, w);
    gptc_team_run_start(r);
}

void gptc_team_run_done(gptc_team_run *r, double work) {
    const int n = omp_get_num_threads(), t = omp_get_thread_num();
    if (n == r->n) r->work[t] = work, r->secs[t] = gptc_now() - r->t0[t];
}

void gptc_team_run_end(gptc_team_run *r) {
    if (r->n > 1) gptc_team_learn(r->n, r->work, r->secs);
}
