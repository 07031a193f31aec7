/* profile_report.h — what `--profile` produces from the spans of core/profile.h: the Chrome
 * trace-event timeline (JSON, opens in Perfetto or chrome://tracing) and the end-of-run table of
 * operators aggregated over layers and steps. */
#ifndef GPTC_TRAIN_PROFILE_REPORT_H
#define GPTC_TRAIN_PROFILE_REPORT_H

#include "core/core.h"
#include "core/profile.h"

#include <stdio.h>

/* Refuses a --profile path that cannot be written (empty, a folder, or in a folder that is missing or
 * not writable), before a run starts; one line naming the flag. */
gptc_status gptc_prof_check_path(const char *path);

/* Writes the recorded spans to path as a trace-event JSON object, streamed, atomically (temp +
 * rename): {"traceEvents": [...], "displayTimeUnit": "ms"} with one complete ("ph": "X") event per
 * closed span, pid = rank, tid = OS thread id, ts/dur in microseconds from gptc_prof_start, args
 * {layer (when a block's), step (0-based, -1 outside steps), flop, bytes, gflops, gbps}, and
 * process_name / thread_name metadata events. */
gptc_status gptc_prof_write_trace(const char *path);

/* One operator of the table: the spans of one name inside the counted steps. */
typedef struct gptc_prof_row {
    const char *name;
    gptc_prof_cat cat;
    long calls;
    double seconds, flops, bytes;
    double bound; /* seconds: its spans' rooflines summed (gptc_prof_bound; 0 without a peak and a bandwidth) */
} gptc_prof_row;

typedef struct gptc_prof_summary {
    int steps;              /* step spans closed */
    int counted;            /* steps aggregated: all but the first when there are more than one */
    double step_seconds;    /* total time of the counted steps */
    double op_seconds;      /* total time of their operators (forward, backward, optimizer, communication) */
    double phase_seconds[8]; /* forward, classifier, backward, recompute, optimizer, eval, checkpoint, other */
    double op_flops;        /* their operators' FLOPs */
    int nrows;
    gptc_prof_row rows[128]; /* sorted by time, longest first */
    int team;                /* threads with GPTC_PROF_THREAD spans: 1 + the highest OpenMP thread number */
    double team_seconds[64]; /* each OpenMP thread's time in its blocks of the parallel kernels (the training
                              * thread is thread 0) over the counted steps */
} gptc_prof_summary;

/* The roofline of one span: the least time its work takes on this machine, max(flops / peak, bytes /
 * bandwidth) in seconds (peak in GFLOP/s, bandwidth in GB/s; a term whose rate is 0 counts 0). */
double gptc_prof_bound(double flops, double bytes, double peak_gflops, double bw_gbps);

/* Aggregates the recorded spans into s; each row's bound from peak_gflops and bw_gbps (0, 0: none). */
void gptc_prof_summarise(gptc_prof_summary *s, double peak_gflops, double bw_gbps);

/* Prints the per-operator table: calls, total ms, ms/step, % of the step, GFLOP/s, GB/s, % of
 * peak_gflops (the run's measured peak for its dtype, named by peak_kind; 0: "-"), % of bw_gbps
 * (the measured STREAM triad bandwidth on the run's threads, kernels.h gptc_triad_gbps: the bytes of
 * the cost model in backend/ops.c over the operator's time; 0: "-") and % of its roofline (its bound
 * over its time), then the operators' coverage of the step time and the phases per step; with both
 * rates, the step's roofline (its operators' bounds, each at most the operator's time, added up; what
 * the FLOPs would run at there) and the operators whose time exceeds their bound the most; with more
 * than one thread, each thread's time in its blocks of the parallel kernels (GEMM, flash attention). */
void gptc_prof_print_table(FILE *f, double peak_gflops, const char *peak_kind, double bw_gbps);

#endif
