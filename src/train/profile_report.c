/* profile_report.c — the --profile outputs: the streamed Chrome trace-event JSON and the per-operator
 * table (see profile_report.h). */
#include "train/profile_report.h"
#include "dist/dist.h"
#include "io/io.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

gptc_status gptc_prof_check_path(const char *path) {
    if (!path || !*path) return gptc_fail(GPTC_ERR_ARG, "'profile': empty path; give a file name such as run.json");
    struct stat sb;
    if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode))
        return gptc_fail(GPTC_ERR_ARG, "'profile' %s: is a folder; give a file name such as %s/profile.json", path, path);
    const char *slash = strrchr(path, '/');
    char dir[4096];
    if (!slash) snprintf(dir, sizeof dir, ".");
    else snprintf(dir, sizeof dir, "%.*s", slash == path ? 1 : (int)(slash - path), path);
    if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode))
        return gptc_fail(GPTC_ERR_ARG, "'profile' %s: folder %s does not exist; create it first", path, dir);
    if (access(dir, W_OK | X_OK) != 0)
        return gptc_fail(GPTC_ERR_ARG, "'profile' %s: cannot write in folder %s: %s", path, dir, strerror(errno));
    return GPTC_OK;
}

/* ---- the trace: each rank writes its events as JSON text into memory (every event preceded by
 * ",\n"), rank 0 gathers them in rank order and writes the one file atomically. */

/* Span names are literals of the code ([a-z0-9_.+]): they need no JSON escaping. */
static void write_span(FILE *o, const gptc_prof_span *s, double origin, int pid, int tid) {
    double dur = s->t1 - s->t0;
    fprintf(o, ",\n{\"name\":\"%s\",\"cat\":\"%s\",\"ph\":\"X\",\"ts\":%.3f,\"dur\":%.3f,\"pid\":%d,\"tid\":%d,\"args\":{",
            s->name, gptc_prof_cat_name((gptc_prof_cat)s->cat), (s->t0 - origin) * 1e6, dur * 1e6, pid, tid);
    if (s->layer >= 0) fprintf(o, "\"layer\":%d,", s->layer);
    fprintf(o, "\"step\":%d", s->step);
    if (s->flops > 0 || s->bytes > 0)
        fprintf(o, ",\"flop\":%.0f,\"bytes\":%.0f,\"gflops\":%.3f,\"gbps\":%.3f", s->flops, s->bytes,
                dur > 0 ? s->flops / dur * 1e-9 : 0.0, dur > 0 ? s->bytes / dur * 1e-9 : 0.0);
    fprintf(o, "}}");
}

/* This rank's metadata and span events (malloc'd text in *text, *len bytes). */
static gptc_status rank_events(char **text, size_t *len) {
    FILE *o = open_memstream(text, len);
    if (!o) return gptc_fail(GPTC_ERR_NOMEM, "out of memory writing the trace");
    int pid = gptc_prof_rank();
    double origin = gptc_prof_origin();
    fprintf(o, ",\n{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":0,\"args\":{\"name\":\"rank %d\"}}", pid, pid);
    fprintf(o, ",\n{\"name\":\"process_sort_index\",\"ph\":\"M\",\"pid\":%d,\"tid\":0,\"args\":{\"sort_index\":%d}}", pid, pid);
    for (int i = 0; i < gptc_prof_nthreads(); i++) {
        size_t n;
        int tid, omp;
        const gptc_prof_span *spans = gptc_prof_thread_spans(i, &n, &tid, &omp);
        if (omp < 0)
            fprintf(o, ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"args\":{\"name\":\"%s (tid %d)\"}}",
                    pid, tid, i == 0 ? "training" : "thread", tid);
        else
            fprintf(o, ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"args\":{\"name\":\"omp thread %d (tid %d)\"}}",
                    pid, tid, omp, tid);
        for (size_t j = 0; j < n; j++)
            if (spans[j].t1 >= spans[j].t0) write_span(o, &spans[j], origin, pid, tid);
    }
    bool bad = ferror(o);
    if (fclose(o) != 0 || bad) {
        free(*text);
        *text = NULL;
        return gptc_fail(GPTC_ERR_NOMEM, "out of memory writing the trace");
    }
    return GPTC_OK;
}

/* Collective: every rank calls it; rank 0 writes one trace with every rank's events (pid = rank). */
gptc_status gptc_prof_write_trace(const char *path) {
    char *mine = NULL, *all = NULL;
    size_t mylen = 0, total = 0;
    gptc_status st = gptc_dist_agree(rank_events(&mine, &mylen));
    if (!st) st = gptc_dist_gather_bytes(mine, mylen, &all, &total, 0);
    free(mine);
    if (!st && gptc_dist_rank() == 0) {
        static const char head[] = "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[", tail[] = "\n]}\n";
        /* every event starts with ",\n": the first one's comma is dropped */
        const void *parts[3] = {head, all + 1, tail};
        size_t lens[3] = {sizeof head - 1, total - 1, sizeof tail - 1};
        st = gptc_file_write_atomic(path, parts, lens, 3);
    }
    free(all);
    return st ? gptc_fail_prefix(st, "'profile'") : GPTC_OK;
}

/* ---- the table */

static const char *const k_phases[] = {"forward", "classifier", "backward", "recompute", "optimizer", "eval", "checkpoint"};
#define NPHASES (int)(sizeof k_phases / sizeof k_phases[0])

static int phase_index(const char *name) {
    for (int i = 0; i < NPHASES; i++)
        if (strcmp(name, k_phases[i]) == 0) return i;
    return NPHASES; /* "other" */
}

static bool is_operator(gptc_prof_cat c) {
    return c == GPTC_PROF_FWD || c == GPTC_PROF_BWD || c == GPTC_PROF_OPT || c == GPTC_PROF_COMM;
}

static int by_time(const void *a, const void *b) {
    double x = ((const gptc_prof_row *)a)->seconds, y = ((const gptc_prof_row *)b)->seconds;
    return (x < y) - (x > y);
}

double gptc_prof_bound(double flops, double bytes, double peak_gflops, double bw_gbps) {
    double compute = peak_gflops > 0 ? flops / (peak_gflops * 1e9) : 0;
    double memory = bw_gbps > 0 ? bytes / (bw_gbps * 1e9) : 0;
    return compute > memory ? compute : memory;
}

void gptc_prof_summarise(gptc_prof_summary *s, double peak_gflops, double bw_gbps) {
    memset(s, 0, sizeof *s);
    int nt = gptc_prof_nthreads();
    for (int i = 0; i < nt; i++) { /* the steps first: how many there are decides which count */
        size_t n;
        const gptc_prof_span *sp = gptc_prof_thread_spans(i, &n, NULL, NULL);
        for (size_t j = 0; j < n; j++)
            if (sp[j].cat == GPTC_PROF_STEP && sp[j].t1 >= sp[j].t0) s->steps++;
    }
    int skip = s->steps > 1 ? 1 : 0; /* the first step warms caches and grows the kernels' workspaces */
    s->counted = s->steps - skip;
    for (int i = 0; i < nt; i++) {
        size_t n;
        int omp;
        const gptc_prof_span *sp = gptc_prof_thread_spans(i, &n, NULL, &omp);
        const int member = omp < 0 ? 0 : omp; /* the training thread, outside the regions, is their thread 0 */
        for (size_t j = 0; j < n; j++) {
            const gptc_prof_span *x = &sp[j];
            if (x->t1 < x->t0) continue;
            double dt = x->t1 - x->t0;
            bool counted = x->step >= skip;
            if (x->cat == GPTC_PROF_THREAD) {
                if (counted && member < (int)(sizeof s->team_seconds / sizeof s->team_seconds[0])) {
                    s->team_seconds[member] += dt;
                    if (member >= s->team) s->team = member + 1;
                }
            } else if (x->cat == GPTC_PROF_STEP) {
                if (counted) s->step_seconds += dt;
            } else if (x->cat == GPTC_PROF_PHASE) {
                int p = phase_index(x->name);
                /* eval and checkpoints run between steps: their whole-run totals */
                if (counted || p == 5 || p == 6) s->phase_seconds[p] += dt;
            } else if (is_operator((gptc_prof_cat)x->cat) && counted) {
                s->op_seconds += dt;
                s->op_flops += x->flops;
                int r = 0;
                while (r < s->nrows && s->rows[r].name != x->name && strcmp(s->rows[r].name, x->name) != 0) r++;
                if (r == s->nrows) {
                    if (s->nrows == (int)(sizeof s->rows / sizeof s->rows[0])) continue;
                    s->rows[s->nrows++] = (gptc_prof_row){.name = x->name, .cat = (gptc_prof_cat)x->cat};
                }
                s->rows[r].calls++;
                s->rows[r].seconds += dt;
                s->rows[r].flops += x->flops;
                s->rows[r].bytes += x->bytes;
                s->rows[r].bound += gptc_prof_bound(x->flops, x->bytes, peak_gflops, bw_gbps);
            }
        }
    }
    qsort(s->rows, s->nrows, sizeof s->rows[0], by_time);
}

/* by the time over the roofline, most first */
static int by_excess(const void *a, const void *b) {
    const gptc_prof_row *x = a, *y = b;
    double ex = x->seconds - x->bound, ey = y->seconds - y->bound;
    return (ex < ey) - (ex > ey);
}

/* The step against its roofline: the operators' bounds (an operator faster than its bound, a memory
 * stream the triad undercounts, at its own time) beside their times, split by which term bounds them;
 * the FLOPs' rate there; then the operators furthest over their bounds, and the time outside operators. */
static void print_roofline(FILE *f, gptc_prof_summary *s, double peak_gflops, double bw_gbps) {
    double per = s->step_seconds / s->counted, roof = 0, cb = 0, ct = 0, mb = 0, mt = 0;
    for (int r = 0; r < s->nrows; r++) {
        const gptc_prof_row *x = &s->rows[r];
        double b = x->bound < x->seconds ? x->bound : x->seconds;
        roof += b;
        if (gptc_prof_bound(x->flops, 0, peak_gflops, 0) >= gptc_prof_bound(0, x->bytes, 0, bw_gbps))
            cb += b, ct += x->seconds;
        else mb += b, mt += x->seconds;
    }
    if (roof <= 0) return;
    const double ms = 1e3 / s->counted;
    fprintf(f,
            "profile: roofline (each operator at max(FLOPs / %.1f GFLOP/s, bytes / %.1f GB/s), at most its own "
            "time): %.2f ms/step (compute-bound operators %.2f ms, run in %.2f; memory-bound %.2f ms, run in %.2f), "
            "%.1f%% of the step's %.2f ms; there its operators' FLOPs would run at %.1f%% of the peak (now %.1f%%)\n",
            peak_gflops, bw_gbps, roof * ms, cb * ms, ct * ms, mb * ms, mt * ms, 100 * roof / s->step_seconds,
            per * 1e3, 100 * s->op_flops / roof / (peak_gflops * 1e9),
            100 * s->op_flops / s->step_seconds / (peak_gflops * 1e9));
    qsort(s->rows, s->nrows, sizeof s->rows[0], by_excess);
    fprintf(f, "profile: over the roofline, ms/step:");
    for (int r = 0; r < s->nrows && r < 8; r++) {
        const gptc_prof_row *x = &s->rows[r];
        if (x->seconds <= x->bound) break;
        fprintf(f, "%s %s %.2f", r ? "," : "", x->name, (x->seconds - x->bound) * ms);
    }
    fprintf(f, "; outside operators %.2f\n", (s->step_seconds - s->op_seconds) * ms);
}

/* Each thread's time in its blocks of the parallel kernels: a kernel ends when its last thread does, so a
 * thread far over the others' mean (a core slowed by other work on its host) holds the team back; the GEMM
 * gives such a thread smaller blocks (core/team.h). */
static void print_team(FILE *f, const gptc_prof_summary *s) {
    double mean = 0, most = 0;
    for (int i = 0; i < s->team; i++) {
        mean += s->team_seconds[i] / s->team;
        if (s->team_seconds[i] > most) most = s->team_seconds[i];
    }
    if (mean <= 0) return;
    fprintf(f, "profile: each thread's time in its blocks of the parallel kernels (GEMM, flash attention), ms/step:");
    for (int i = 0; i < s->team; i++) fprintf(f, "%s %d: %.2f", i ? "," : "", i, s->team_seconds[i] * 1e3 / s->counted);
    fprintf(f, "; the busiest %.1f%% over the mean\n", 100 * (most / mean - 1));
}

void gptc_prof_print_table(FILE *f, double peak_gflops, const char *peak_kind, double bw_gbps) {
    gptc_prof_summary *s = malloc(sizeof *s);
    if (!s) return;
    gptc_prof_summarise(s, peak_gflops, bw_gbps);
    if (s->counted < 1 || s->step_seconds <= 0) {
        fprintf(f, "profile: no complete step recorded\n");
        free(s);
        return;
    }
    const bool roofline = peak_gflops > 0 && bw_gbps > 0;
    double per = s->step_seconds / s->counted;
    fprintf(f, "profile: %d step%s (the first of %d left out as warm-up), %.2f ms/step", s->counted,
            s->counted == 1 ? "" : "s", s->steps, per * 1e3);
    if (s->steps == s->counted) fprintf(f, " (a single step: no warm-up left out)");
    if (peak_gflops > 0) fprintf(f, "; %% of peak against the measured %s peak %.1f GFLOP/s", peak_kind, peak_gflops);
    if (bw_gbps > 0) fprintf(f, "; %% bw against the measured memory bandwidth %.1f GB/s (STREAM triad)", bw_gbps);
    if (roofline) fprintf(f, "; %% roof: the operator's roofline, max(FLOPs / peak, bytes / bandwidth), over its time");
    fprintf(f, "\n%-22s %-9s %7s %10s %9s %7s %9s %8s %7s %6s%s\n", "operator", "category", "calls", "total ms",
            "ms/step", "% step", "GFLOP/s", "GB/s", "% peak", "% bw", roofline ? " % roof" : "");
    for (int r = 0; r < s->nrows; r++) {
        const gptc_prof_row *x = &s->rows[r];
        double gf = x->seconds > 0 ? x->flops / x->seconds * 1e-9 : 0, gb = x->seconds > 0 ? x->bytes / x->seconds * 1e-9 : 0;
        fprintf(f, "%-22s %-9s %7ld %10.3f %9.3f %7.2f %9.2f %8.2f", x->name, gptc_prof_cat_name(x->cat), x->calls,
                x->seconds * 1e3, x->seconds * 1e3 / s->counted, 100 * x->seconds / s->step_seconds, gf, gb);
        if (peak_gflops > 0 && x->flops > 0) fprintf(f, " %7.2f", 100 * gf / peak_gflops);
        else fprintf(f, " %7s", "-");
        if (bw_gbps > 0 && x->bytes > 0) fprintf(f, " %6.1f", 100 * gb / bw_gbps);
        else fprintf(f, " %6s", "-");
        if (roofline && x->seconds > 0 && x->bound > 0) fprintf(f, " %6.1f", 100 * x->bound / x->seconds);
        else if (roofline) fprintf(f, " %6s", "-");
        fprintf(f, "\n");
    }
    fprintf(f, "profile: operators take %.2f of %.2f ms/step (coverage %.1f%%); per step:", s->op_seconds * 1e3 / s->counted,
            per * 1e3, 100 * s->op_seconds / s->step_seconds);
    for (int p = 0; p < 5; p++)
        if (s->phase_seconds[p] > 0) fprintf(f, " %s %.2f ms", k_phases[p], s->phase_seconds[p] * 1e3 / s->counted);
    fprintf(f, "\n");
    if (s->phase_seconds[5] > 0 || s->phase_seconds[6] > 0) {
        fprintf(f, "profile: between steps, whole run:");
        for (int p = 5; p < 7; p++)
            if (s->phase_seconds[p] > 0) fprintf(f, " %s %.1f ms", k_phases[p], s->phase_seconds[p] * 1e3);
        fprintf(f, "\n");
    }
    if (s->team > 1) print_team(f, s);
    if (roofline) print_roofline(f, s, peak_gflops, bw_gbps);
    free(s);
}
