/* team.h — the measured speeds of a team's threads, and the split of a loop's items by them.
 *
 * On a shared machine one core can run slower than the others for minutes (another guest's work on its
 * host core, interrupts, a hybrid CPU's efficient cores). A split of equal parts then makes every
 * parallel operator wait for the slowest thread: on the 2-vCPU Zen 5 VM, a training step whose first
 * core ran its GEMM blocks 26 % slower than the second left the second idle a fifth of the products'
 * time (docs/performance.md, fourteenth session).
 *
 * Operators whose results do not depend on which thread computes which item (each GEMM tile is summed in
 * the same order on any thread) can split in proportion to the threads' speeds instead: the split moves,
 * the bits do not. The speeds are learned from those operators' own timings: each call reports every
 * thread's work and time, and each thread's speed moves an eighth of the way towards its rate over the
 * team's mean (that figure held within 1.25x of the speed so far, so one preempted call barely counts). State is per calling thread (_Thread_local): a program that runs two models on two
 * threads has two teams. */
#ifndef GPTC_TEAM_H
#define GPTC_TEAM_H

enum {
    GPTC_TEAM_MAX = 64,           /* threads 0..GPTC_TEAM_MAX-1 have speeds; larger teams split evenly */
    GPTC_TEAM_ONE = 1024,         /* the weight of a thread of average speed */
    GPTC_TEAM_WMIN = 1024 / 4,    /* the weights' bounds: a thread gets a quarter to four times the */
    GPTC_TEAM_WMAX = 1024 * 4,    /* share of an average one */
};

/* The integer weights of threads 0..n-1 of the calling thread's team (w[n]): GPTC_TEAM_ONE each when the
 * split is even (gptc_team_set_even, GPTC_TEAM_SPLIT=even in the environment, n > GPTC_TEAM_MAX). */
void gptc_team_weights(int n, int *w);

/* The first item of part i (0 <= i <= n) of P items split into n parts by weights w (NULL: equal): with
 * P >= n every part gets one item and the other P - n go in proportion to the weights; with equal weights
 * exactly floor(P * i / n), the even split. Part i is [gptc_team_part(P, n, i, w), ...(i + 1, w)). */
int gptc_team_part(int P, int n, int i, const int *w);

/* The most items any part of such a split can get, whatever the weights (within their bounds): what
 * a thread's scratch for its part must hold. */
int gptc_team_part_max(int P, int n);

/* Reports one call: threads 0..n-1 did work[t] (any unit, e.g. FLOPs) in secs[t] seconds. Calls where a
 * thread had no work or took under 50 us teach nothing and are ignored. */
void gptc_team_learn(int n, const double *work, const double *secs);

/* A parallel region's items split by the team's weights, and its timings reported. Before the region,
 * gptc_team_run_begin(&r, P, n) takes the calling thread's weights for the region's n threads (w; more than
 * GPTC_TEAM_MAX: an even split, nothing learned); in the region, each thread gets its items [lo, hi) from
 * gptc_team_run_items (a region of another size splits evenly), which starts its clock — a region that
 * splits its own way by w starts it with gptc_team_run_start —, and reports its work with
 * gptc_team_run_done; after it, gptc_team_run_end learns from the timings. For regions whose results do
 * not depend on which thread computes an item. */
typedef struct gptc_team_run {
    int P, n;
    int w[GPTC_TEAM_MAX];
    double t0[GPTC_TEAM_MAX], work[GPTC_TEAM_MAX], secs[GPTC_TEAM_MAX];
} gptc_team_run;
void gptc_team_run_begin(gptc_team_run *r, int P, int n);
void gptc_team_run_start(gptc_team_run *r);
void gptc_team_run_items(gptc_team_run *r, int *lo, int *hi);
void gptc_team_run_done(gptc_team_run *r, double work);
void gptc_team_run_end(gptc_team_run *r);

/* The calling thread's team's speeds (mean 1 at the start): s[0..n-1]; returns how many were learned from
 * calls (0: none yet). set puts them (tests; n <= GPTC_TEAM_MAX), reset makes them equal again. */
long gptc_team_speeds(int n, double *s);
void gptc_team_set_speeds(int n, const double *s);
void gptc_team_reset(void);

/* 1: split evenly whatever the speeds (the default when the environment has GPTC_TEAM_SPLIT=even); 0: by speed. */
void gptc_team_set_even(int even);
int gptc_team_even(void);

#endif
