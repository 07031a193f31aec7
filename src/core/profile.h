/* profile.h — the span recorder behind `gptc train --profile`: named, timed spans (a category, an
 * optional layer, the FLOPs and bytes the span's work moves) kept per thread in growable buffers.
 *
 * Cost when off: gptc_prof_begin / gptc_prof_end are inline and test one global flag each; with the
 * flag clear they neither read the clock nor allocate, and the FLOP/byte arguments (plain integer
 * arithmetic on the call's shapes) are not evaluated once the call is inlined behind the branch.
 *
 * Spans nest on a thread as calls do (a step holds phases, a phase holds operators); begin pushes and
 * end pops the thread's innermost open span. Operators are recorded on the thread that calls them
 * (the kernels parallelise inside a call); any thread may record (an MPI progress thread, say), and
 * each gets its own buffer, registered on its first span. The reports are in train/profile_report.h. */
#ifndef GPTC_CORE_PROFILE_H
#define GPTC_CORE_PROFILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum gptc_prof_cat {
    GPTC_PROF_STEP,     /* one optimizer step (the trainer's step time) */
    GPTC_PROF_PHASE,    /* forward, classifier, backward, recompute, optimizer, eval, checkpoint */
    GPTC_PROF_FWD,      /* an operator of the forward (also when the backward recomputes it) */
    GPTC_PROF_BWD,      /* an operator of the backward */
    GPTC_PROF_OPT,      /* zero_grad, grad_norm, adamw */
    GPTC_PROF_COMM,     /* communication between ranks */
    GPTC_PROF_THREAD,   /* one OpenMP thread's share of a parallel kernel (GEMM, flash attention), without
                         * the wait at its end: the timeline shows each thread's load; not in the table's rows */
    GPTC_PROF_NCATS
} gptc_prof_cat;

typedef struct gptc_prof_span {
    const char *name;   /* a string literal (not copied) */
    double t0, t1;      /* gptc_now() at begin and end; t1 < t0 while still open */
    double flops, bytes; /* the work attributed by the caller at end */
    int32_t step;       /* 0-based index of the step span open when it began; -1 outside steps */
    int16_t layer;      /* transformer block, or -1 */
    uint8_t cat;        /* gptc_prof_cat */
    uint8_t depth;      /* spans open around it on its thread when it began */
} gptc_prof_span;

/* The global switch (read by the inline pair below; set only by gptc_prof_start / gptc_prof_stop). */
extern volatile int gptc_prof_on;

void gptc_prof_begin_rec(gptc_prof_cat cat, const char *name, int layer);
void gptc_prof_end_rec(double flops, double bytes);

#ifndef GPTC_PROFILE_COMPILED_OUT
/* Opens a span on this thread; name must outlive the profile (a literal). */
static inline void gptc_prof_begin(gptc_prof_cat cat, const char *name, int layer) {
    if (__builtin_expect(gptc_prof_on, 0)) gptc_prof_begin_rec(cat, name, layer);
}
/* Closes this thread's innermost open span, attributing flops and bytes moved to it. */
static inline void gptc_prof_end(double flops, double bytes) {
    if (__builtin_expect(gptc_prof_on, 0)) gptc_prof_end_rec(flops, bytes);
}
#else
/* Built with -DGPTC_PROFILE_COMPILED_OUT (bench/profile_cost.sh): no instrumentation at all, the
 * yardstick for what the flag test above costs; --profile then records nothing. */
static inline void gptc_prof_begin(gptc_prof_cat cat, const char *name, int layer) {}
static inline void gptc_prof_end(double flops, double bytes) {}
#endif

/* Drops any earlier spans, sets the time origin and turns recording on. */
void gptc_prof_start(void);
/* Turns recording off; the spans stay for the reports until gptc_prof_start or gptc_prof_free. */
void gptc_prof_stop(void);
/* Releases every buffer (recording off). */
void gptc_prof_free(void);
bool gptc_prof_active(void);

/* The rank written as the trace's process id (0 unless the MPI layer sets it). */
void gptc_prof_set_rank(int rank);
int gptc_prof_rank(void);

/* ---- reading what was recorded (after gptc_prof_stop) */
double gptc_prof_origin(void); /* gptc_now() at gptc_prof_start */
int gptc_prof_nthreads(void);
/* Thread i's spans in the order they began; *tid its OS thread id, *omp its OpenMP thread number
 * when it registered (-1 outside a parallel region's team, i.e. the thread that runs the loop). */
const gptc_prof_span *gptc_prof_thread_spans(int i, size_t *n, int *tid, int *omp);
/* Spans recorded and bytes the recorder holds (0 and 0 when it has never been on since a free). */
void gptc_prof_stats(size_t *spans, size_t *bytes);
const char *gptc_prof_cat_name(gptc_prof_cat cat); /* "step", "phase", "forward", ... */

#endif
