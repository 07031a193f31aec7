/* train_log.h — what `gptc train` shows of a run: the terminal line (a progress bar on a terminal),
 * the JSON-lines log (--log), the per-step losses (--log-losses) and the summary. The options and
 * the peak and pinning (measured before the run starts) come from cli/cmd_train.c. */
#ifndef GPTC_CLI_TRAIN_LOG_H
#define GPTC_CLI_TRAIN_LOG_H

#include "gptc.h"
#include "core/core.h"

#include <stdbool.h>
#include <stdio.h>

/* `gptc train`'s options: the library's (train/hparams.def) and the CLI's own. */
typedef struct train_cli {
    gptc_train_options t;
    const char *model;
    const char *gelu;
    const char *dtype;
    const char *recompute;
    int sequential;
    int log_every;
    int quiet;
    const char *log; /* --log FILE.jsonl */
    int pin;
    int numa; /* --numa: first-touch placement of the arenas (implies pin) */
    const char *log_losses;
    float comm_timeout;
    const char *profile_steps; /* --profile-steps A:B */
    const char *on_bad;        /* --on-bad rollback|stop */
} train_cli;

typedef struct progress {
    const train_cli *c;
    FILE *losses;  /* --log-losses, or NULL */
    bool tty;
    bool started;
    double ms_sum; /* step times so far (evaluation and checkpoint time excluded) */
    int first_step;
    gptc_window window; /* the last GPTC_WINDOW step times, for the jitter */
    double *all_ms;     /* every step time of this run, for the summary */
    int nms, cap_ms;
    double peak;        /* GFLOP/s the MFU is measured against (0: unknown), probed before the run */
    const char *peak_kind;
    bool peak_cached;   /* the peak came from the cache */
    double bw;          /* GB/s, the STREAM triad on this rank's threads the profile's % bw divides by (0: unknown) */
    bool bw_cached;     /* bw came from the cache */
    char pinned[256];   /* " | pinned to CPUs 0,1" with --pin, else "" */
    double flops;       /* model FLOPs per token */
    int threads;
    const char *log_path; /* --log, or CKPT/log.jsonl; NULL: none */
    char log_buf[4096];
    FILE *log;
    bool failed; /* the callback stopped the run: --pin or the log failed */
    bool stopping; /* a stop signal arrived: the run ends after this step */
} progress;

/* The gptc_step_fn of the run: prints and logs each event; nonzero stops the run (a failed write, a
 * stop signal). */
int train_log_on_step(void *user, const gptc_step_info *in);
/* The summary after a run that succeeded (rank 0). */
void train_log_summary(progress *p, const gptc_train_result *r);

/* train_signal.c — graceful stop: the first SIGINT, SIGTERM or SIGUSR1 (what mpirun forwards to every
 * rank) finishes the step, writes a checkpoint and exits 0; a second ends the process at once. */
void train_catch_stop_signals(void);
int train_stop_signal(void);  /* the first signal caught, or 0 */
const char *train_signal_name(int sig);

#endif
