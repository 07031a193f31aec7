/* profile.c — the span recorder (profile.h): one growable span buffer and one stack of open spans
 * per recording thread, registered in a global list on the thread's first span. Nothing here runs
 * while recording is off. */
#include "core/profile.h"
#include "core/core.h"

#include <omp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

#define MAX_DEPTH 32          /* deeper nesting is recorded flat (not expected: step > phase > op) */
#define FIRST_CAP 4096        /* spans per thread before the first growth */

typedef struct prof_thread {
    gptc_prof_span *spans;
    size_t n, cap;
    int open[MAX_DEPTH];      /* indices of the open spans, innermost last */
    int depth;
    int tid, omp;
    bool failed;              /* an allocation failed: this thread records no more */
} prof_thread;

volatile int gptc_prof_on;

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static prof_thread **g_threads; /* registered threads, under g_lock */
static int g_nthreads, g_cap_threads;
static unsigned g_generation = 1; /* bumped by gptc_prof_free: threads re-register after it */
static double g_origin;
static int g_rank;
static atomic_int g_step = -1;  /* index of the open step span, -1 outside steps */
static int g_nsteps;            /* step spans begun since the start */

static _Thread_local prof_thread *tl_thread;
static _Thread_local unsigned tl_generation;

/* This thread's buffer, registered on first use (NULL when out of memory). */
static prof_thread *this_thread(void) {
    if (tl_thread && tl_generation == g_generation) return tl_thread;
    prof_thread *t = calloc(1, sizeof *t);
    if (!t) return NULL;
    t->tid = (int)syscall(SYS_gettid);
    t->omp = omp_in_parallel() ? omp_get_thread_num() : -1;
    pthread_mutex_lock(&g_lock);
    if (g_nthreads == g_cap_threads) {
        int cap = g_cap_threads ? 2 * g_cap_threads : 8;
        prof_thread **grown = realloc(g_threads, sizeof *grown * cap);
        if (!grown) {
            pthread_mutex_unlock(&g_lock);
            free(t);
            return NULL;
        }
        g_threads = grown;
        g_cap_threads = cap;
    }
    g_threads[g_nthreads++] = t;
    tl_generation = g_generation;
    pthread_mutex_unlock(&g_lock);
    return tl_thread = t;
}

void gptc_prof_begin_rec(gptc_prof_cat cat, const char *name, int layer) {
    prof_thread *t = this_thread();
    if (!t || t->failed) return;
    if (t->n == t->cap) {
        size_t cap = t->cap ? 2 * t->cap : FIRST_CAP;
        gptc_prof_span *grown = realloc(t->spans, sizeof *grown * cap);
        if (!grown) {
            t->failed = true; /* the trace ends early on this thread rather than failing the run */
            return;
        }
        t->spans = grown;
        t->cap = cap;
    }
    if (cat == GPTC_PROF_STEP) atomic_store_explicit(&g_step, g_nsteps++, memory_order_relaxed);
    gptc_prof_span *s = &t->spans[t->n];
    *s = (gptc_prof_span){.name = name, .t1 = -1, .layer = (int16_t)layer, .cat = (uint8_t)cat,
                          .depth = (uint8_t)t->depth,
                          .step = atomic_load_explicit(&g_step, memory_order_relaxed)};
    if (t->depth < MAX_DEPTH) t->open[t->depth++] = (int)t->n;
    t->n++;
    s->t0 = gptc_now(); /* last, so the bookkeeping above is not inside the span */
}

void gptc_prof_end_rec(double flops, double bytes) {
    double now = gptc_now();
    prof_thread *t = tl_generation == g_generation ? tl_thread : NULL;
    if (!t || t->depth == 0) return; /* begun before the start (or after a failed growth) */
    gptc_prof_span *s = &t->spans[t->open[--t->depth]];
    s->t1 = now;
    s->flops = flops;
    s->bytes = bytes;
    if (s->cat == GPTC_PROF_STEP) atomic_store_explicit(&g_step, -1, memory_order_relaxed);
}

/* Forgets every span; with release, also frees the buffers and makes every thread register anew. */
static void clear(bool release) {
    pthread_mutex_lock(&g_lock);
    for (int i = 0; i < g_nthreads; i++) {
        g_threads[i]->n = 0;
        g_threads[i]->depth = 0;
        g_threads[i]->failed = false;
        if (release) {
            free(g_threads[i]->spans);
            free(g_threads[i]);
        }
    }
    if (release) {
        free(g_threads);
        g_threads = NULL;
        g_nthreads = g_cap_threads = 0;
        g_generation++;
    }
    g_nsteps = 0;
    atomic_store(&g_step, -1);
    pthread_mutex_unlock(&g_lock);
}

void gptc_prof_start(void) {
    gptc_prof_on = 0;
    clear(false);
    g_origin = gptc_now();
    gptc_prof_on = 1;
}

void gptc_prof_stop(void) { gptc_prof_on = 0; }

void gptc_prof_free(void) {
    gptc_prof_on = 0;
    clear(true);
}

bool gptc_prof_active(void) { return gptc_prof_on != 0; }

void gptc_prof_set_rank(int rank) { g_rank = rank; }
int gptc_prof_rank(void) { return g_rank; }

double gptc_prof_origin(void) { return g_origin; }
int gptc_prof_nthreads(void) { return g_nthreads; }

const gptc_prof_span *gptc_prof_thread_spans(int i, size_t *n, int *tid, int *omp) {
    const prof_thread *t = g_threads[i];
    *n = t->n;
    if (tid) *tid = t->tid;
    if (omp) *omp = t->omp;
    return t->spans;
}

void gptc_prof_stats(size_t *spans, size_t *bytes) {
    size_t s = 0, b = 0;
    pthread_mutex_lock(&g_lock);
    for (int i = 0; i < g_nthreads; i++) {
        s += g_threads[i]->n;
        b += sizeof(prof_thread) + g_threads[i]->cap * sizeof(gptc_prof_span);
    }
    b += (size_t)g_cap_threads * sizeof(prof_thread *);
    pthread_mutex_unlock(&g_lock);
    if (spans) *spans = s;
    if (bytes) *bytes = b;
}

const char *gptc_prof_cat_name(gptc_prof_cat cat) {
    static const char *names[GPTC_PROF_NCATS] = {"step", "phase", "forward", "backward", "optimizer", "communication", "thread"};
    return (unsigned)cat < GPTC_PROF_NCATS ? names[cat] : "?";
}
