/* cmd_train.c — `gptc train`: its option table, the per-step log (terminal line, progress bar, JSON
 * lines), thread pinning, the cached peak for MFU, and the run summary. Under mpirun every rank runs
 * it; only rank 0 prints, and a failure is printed once, by rank 0, naming the rank it came from (or,
 * when only one rank knows of it, by that rank, which ends the job). */
#include "cli/commands.h"
#include "cli/options.h"
#include "core/core.h"
#include "dist/dist.h"
#include "io/io.h"
#include "kernels/kernels.h"
#include "kernels/plugin.h"
#include "optim/optimizer.h"
#include "train/hparams.h"
#include "train/profile_report.h"
#include "train/weights.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

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
    const char *log_losses;
    float comm_timeout;
    const char *profile_steps; /* --profile-steps A:B */
    const char *on_bad;        /* --on-bad rollback|stop */
} train_cli;

#define F(field) offsetof(train_cli, field)
#define BIG 1e18
#define OPT_TEXT OPT_STRING /* train/hparams.def's kinds as the parser's */
/* The model's shape and the CLI-only options around the library's options (train/hparams.def). */
static const gptc_option g_train_opts[] = {
    {"model", OPT_STRING, F(model), "NAME", "model preset", 0, 0},
    {"layers", OPT_INT, F(t.model.layers), "N", "transformer blocks (overrides the preset)", 1, 1000},
    {"heads", OPT_INT, F(t.model.heads), "N", "attention heads; must divide --channels", 1, 1000},
    {"channels", OPT_INT, F(t.model.channels), "N", "embedding width", 1, 65536},
    {"context", OPT_INT, F(t.model.context), "N", "positions the model can attend to", 1, 1 << 20},
    {"vocab", OPT_INT, F(t.model.vocab), "N", "vocabulary size (0: from the data's meta.json, else 50257)", 0, 65536},
    {"gelu", OPT_STRING, F(gelu), "FORM", "MLP activation: tanh (GPT-2's GELU), erf (exact GELU) or sigmoid (x sigmoid(1.702 x)); a resumed run must use its checkpoint's", 0, 0},
#define HP(field, flag, kind, def, min, max, meta, key, ck, warn, help) \
    {flag, OPT_##kind, F(t.field), meta, help, min, max},
#include "train/hparams.def"
#undef HP
    {"sequential", OPT_FLAG, F(sequential), "", "read windows in order instead of shuffling each epoch", 0, 0},
    {"dtype", OPT_STRING, F(dtype), "D", "precision of the matrix products: fp32, or bf16 (bf16 operands, fp32 sums, fp32 master weights and optimizer)", 0, 0},
    {"recompute", OPT_STRING, F(recompute), "LEVEL", "activations the backward recomputes instead of keeping: none; gelu (the MLP's GELU); attn (also the attention); block (all but each block's input). Same results, less memory (see gptc plan)", 0, 0},
    {"on-bad", OPT_STRING, F(on_bad), "ACTION", "after more than --bad-steps bad steps in a row: rollback (to the newest checkpoint, the learning rate times --rollback-lr) or stop", 0, 0},
    {"profile-steps", OPT_STRING, F(profile_steps), "A:B", "with --profile: record only steps A to B (1-based, inclusive; B 0 or empty: to the end), so a long run keeps a window of spans in memory", 0, 0},
    {"log-every", OPT_INT, F(log_every), "N", "print a line every N steps when not on a terminal", 1, 1e9},
    {"comm-timeout", OPT_FLOAT, F(comm_timeout), "S", "under mpirun: a rank that waits more than S seconds for the others in one exchange ends the job, naming it (0: wait forever); must exceed rank 0's longest checkpoint write", 0, 1e9},
    {"log-losses", OPT_STRING, F(log_losses), "FILE", "write each step's \"step loss grad_norm lr\" to FILE (full precision, one line a step)", 0, 0},
    {"quiet", OPT_FLAG, F(quiet), "", "print only the summary", 0, 0},
    {"log", OPT_STRING, F(log), "FILE", "append the run as JSON lines to FILE: a start record, then one per step (default with --ckpt: DIR/log.jsonl)", 0, 0},
    {"pin", OPT_FLAG, F(pin), "", "bind each OpenMP thread to its own core (one per physical core first)", 0, 0},
};
#undef OPT_TEXT
#undef F

const gptc_command_spec gptc_cmd_train_spec = {
    "train", "gptc train --data PATH [options]",
    "Trains a GPT-2 model on token shards; with --ckpt it saves checkpoints and resumes from them.",
    g_train_opts, sizeof g_train_opts / sizeof g_train_opts[0], NULL, sizeof(train_cli),
};

static bool given_flag(const bool *given, const char *name) {
    for (size_t i = 0; i < sizeof g_train_opts / sizeof g_train_opts[0]; i++)
        if (strcmp(g_train_opts[i].name, name) == 0) return given[i];
    return false;
}

static void defaults(train_cli *c) {
    memset(c, 0, sizeof *c);
    gptc_train_options_default(&c->t);
    c->model = "small-cpu";
    c->gelu = "tanh";
    c->dtype = "fp32";
    c->recompute = "none";
    c->log_every = 1;
    c->comm_timeout = 600;
    c->on_bad = "rollback";
}

/* ---- graceful stop: the first SIGINT, SIGTERM or SIGUSR1 (what mpirun forwards to every rank)
 * finishes the step, writes a checkpoint and exits 0; a second ends the process at once. */
static volatile sig_atomic_t g_stop_signal;

static void on_stop_signal(int sig) {
    if (g_stop_signal) {
        signal(sig, SIG_DFL); /* the second: die of it now (a checkpoint being written stays a temp folder) */
        raise(sig);
        return;
    }
    g_stop_signal = sig;
}

static void catch_stop_signals(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGUSR1, &sa, NULL);
    /* a file-size limit makes write() fail with EFBIG, which the checkpoint writer reports, instead of
     * killing the process mid-save */
    signal(SIGXFSZ, SIG_IGN);
}

static const char *signal_name(int sig) {
    return sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM" : sig == SIGUSR1 ? "SIGUSR1" : "a signal";
}

void gptc_cli_error(void) {
    char msg[2048];
    gptc_cli_flag_names(gptc_last_error(), msg, sizeof msg);
    gptc_log_rank_prefix(stderr);
    fprintf(stderr, "gptc: %s\n", msg);
}

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
    double peak;        /* GFLOP/s the MFU is measured against (0: unknown) */
    const char *peak_kind;
    double flops;       /* model FLOPs per token */
    int threads;
    const char *log_path; /* --log, or CKPT/log.jsonl; NULL: none */
    char log_buf[4096];
    FILE *log;
    bool failed; /* the callback stopped the run: --pin or the log failed */
    bool stopping; /* a stop signal arrived: the run ends after this step */
} progress;

static void fmt_eta(char *buf, size_t cap, double s) {
    if (!(s >= 0) || s > 1e7) snprintf(buf, cap, "?");
    else if (s >= 3600) snprintf(buf, cap, "%dh%02dm", (int)(s / 3600), (int)fmod(s / 60, 60));
    else if (s >= 60) snprintf(buf, cap, "%dm%02ds", (int)(s / 60), (int)fmod(s, 60));
    else snprintf(buf, cap, "%ds", (int)s);
}

static double wall_time(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Writes one record as a line of p->log and deletes it; a failed write stops the run. */
static int log_record(progress *p, cJSON *rec) {
    if (!p->log) {
        cJSON_Delete(rec);
        return 0;
    }
    cJSON_AddNumberToObject(rec, "time", wall_time());
    char *line = cJSON_PrintUnformatted(rec);
    cJSON_Delete(rec);
    bool ok = line && fprintf(p->log, "%s\n", line) > 0 && fflush(p->log) == 0;
    free(line);
    if (!ok) {
        fprintf(stderr, "%sgptc: --log %s: cannot write\n", p->tty ? "\n" : "", p->log_path);
        p->failed = true;
        return 1;
    }
    return 0;
}

/* START: pins the threads, reads (or measures) the peak, opens the log and writes its start record. */
static int on_start(progress *p, const gptc_step_info *in) {
    const gptc_model_config *m = in->model;
    const gptc_train_options *t = &p->c->t;
    p->started = true;
    p->first_step = in->first_step;
    p->threads = gptc_threads();
    int world = gptc_dist_world();
    char pinned[256] = "";
    if (p->c->pin) {
        int cpus[64], n = gptc_pin_threads(cpus, 64);
        if (n < 0) {
            gptc_cli_error();
            p->failed = true;
            return 1;
        }
        size_t k = (size_t)snprintf(pinned, sizeof pinned, " | pinned to CPUs");
        for (int i = 0; i < n && i < 64 && k < sizeof pinned - 16; i++)
            k += (size_t)snprintf(pinned + k, sizeof pinned - k, "%s%d", i ? "," : " ", cpus[i]);
    }
    bool cached = false;
    p->peak = gptc_peak_cached(NULL, t->dtype == GPTC_PRECISION_BF16, p->threads, &p->peak_kind, &cached);
    p->peak *= world; /* tokens/s counts every rank's tokens: against every rank's peak (as rank 0 measures it) */
    p->flops = gptc_model_flops_per_token(m, t->seq);
    if (p->c->log_losses && !(p->losses = fopen(p->c->log_losses, "w"))) {
        fprintf(stderr, "gptc: --log-losses %s: cannot open for writing\n", p->c->log_losses);
        p->failed = true;
        return 1;
    }
    if (p->log_path) {
        if (p->log_path == p->log_buf && gptc_mkdir_p(p->c->t.ckpt_dir)) { /* the default, CKPT/log.jsonl */
            gptc_cli_error();
            p->failed = true;
            return 1;
        }
        if (!(p->log = fopen(p->log_path, "a"))) {
            fprintf(stderr, "gptc: --log %s: cannot open for appending\n", p->log_path);
            p->failed = true;
            return 1;
        }
    }
    if (!p->c->quiet) {
        printf("model: %d layers, %d heads, %d channels, context %d, vocab %d (padded %d), gelu %s, %.2fM "
               "parameters | batch %d x %d%s, %ld tokens/update | dtype %s, recompute %s | kernels %s | threads %d%s\n",
               m->layers, m->heads, m->channels, m->context, m->vocab, gptc_padded_vocab(m->vocab),
               gptc_gelu_name(m->gelu), gptc_model_num_params(m) / 1e6, t->batch, t->seq,
               world > 1 ? " per rank x ranks" : "", in->tokens_per_update,
               gptc_precision_name(t->dtype), gptc_recompute_name(t->recompute), gptc_kernels_get()->variant,
               p->threads, pinned);
        if (*gptc_op_plugins_active()) printf("op plugins: %s\n", gptc_op_plugins_active());
        if (p->peak > 0)
            printf("MFU against the %s peak %.1f GFLOP/s on %d threads%s (%s), %.3g model FLOPs/token\n", p->peak_kind,
                   p->peak, p->threads, world > 1 ? " x ranks" : "", cached ? "cached" : "measured now", p->flops);
        if (p->log) printf("log: %s\n", p->log_path);
        if (in->first_step) printf("resuming from step %d\n", in->first_step);
        fflush(stdout);
    }
    cJSON *rec = cJSON_CreateObject(), *mo = cJSON_CreateObject();
    cJSON_AddStringToObject(rec, "type", "start");
    cJSON_AddNumberToObject(mo, "layers", m->layers);
    cJSON_AddNumberToObject(mo, "heads", m->heads);
    cJSON_AddNumberToObject(mo, "channels", m->channels);
    cJSON_AddNumberToObject(mo, "context", m->context);
    cJSON_AddNumberToObject(mo, "vocab", m->vocab);
    cJSON_AddStringToObject(mo, "gelu", gptc_gelu_name(m->gelu));
    cJSON_AddNumberToObject(mo, "params", (double)gptc_model_num_params(m));
    cJSON_AddStringToObject(rec, "model_preset", p->c->model);
    cJSON_AddItemToObject(rec, "model", mo);
    cJSON_AddNumberToObject(rec, "batch", t->batch);
    cJSON_AddNumberToObject(rec, "seq", t->seq);
    cJSON_AddNumberToObject(rec, "tokens_per_update", (double)in->tokens_per_update);
    cJSON_AddNumberToObject(rec, "first_step", in->first_step);
    cJSON_AddNumberToObject(rec, "steps", in->steps);
    cJSON_AddStringToObject(rec, "dtype", gptc_precision_name(t->dtype));
    cJSON_AddStringToObject(rec, "recompute", gptc_recompute_name(t->recompute));
    cJSON_AddStringToObject(rec, "kernels", gptc_kernels_get()->variant);
    cJSON_AddNumberToObject(rec, "threads", p->threads);
    cJSON_AddNumberToObject(rec, "ranks", world);
    cJSON_AddBoolToObject(rec, "pin", p->c->pin);
    cJSON_AddNumberToObject(rec, "peak_gflops", p->peak);
    cJSON_AddStringToObject(rec, "peak_kind", p->peak_kind);
    cJSON_AddNumberToObject(rec, "flops_per_token", p->flops);
    cJSON_AddStringToObject(rec, "cpu", gptc_cpu()->brand);
    return log_record(p, rec);
}

/* The terminal's width (80 when unknown). */
static int term_columns(void) {
    struct winsize ws;
    return ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 20 ? ws.ws_col : 80;
}

/* A rollback: one line, one record. */
static int on_rollback(progress *p, const gptc_step_info *in) {
    cJSON *rec = cJSON_CreateObject();
    cJSON_AddStringToObject(rec, "type", "rollback");
    cJSON_AddNumberToObject(rec, "step", in->step);
    cJSON_AddStringToObject(rec, "path", in->ckpt_path);
    cJSON_AddStringToObject(rec, "bad", in->bad);
    cJSON_AddNumberToObject(rec, "lr_scale", in->lr_scale);
    cJSON_AddNumberToObject(rec, "rollbacks", in->rollbacks);
    if (!p->c->quiet) {
        printf("%srolled back to %s (step %d) after more than %d bad steps in a row (last: %s); learning rate now x%g "
               "(rollback %d of at most %d)\n", p->tty ? "\r\033[K" : "", in->ckpt_path, in->step, p->c->t.bad_steps,
               in->bad, in->lr_scale, in->rollbacks, p->c->t.max_rollbacks);
        fflush(stdout);
    }
    return log_record(p, rec);
}

static int on_step(void *user, const gptc_step_info *in) {
    progress *p = user;
    if (in->event == GPTC_EVENT_START) return on_start(p, in);
    if (in->event == GPTC_EVENT_ROLLBACK) return on_rollback(p, in) || g_stop_signal;
    if (in->event == GPTC_EVENT_CHECKPOINT) {
        cJSON *rec = cJSON_CreateObject();
        cJSON_AddStringToObject(rec, "type", "checkpoint");
        cJSON_AddNumberToObject(rec, "step", in->step);
        cJSON_AddStringToObject(rec, "path", in->ckpt_path);
        if (!p->c->quiet) {
            printf("%scheckpoint %s\n", p->tty ? "\r\033[K" : "", in->ckpt_path);
            fflush(stdout);
        }
        return log_record(p, rec);
    }
    if (g_stop_signal && !p->stopping) {
        p->stopping = true;
        if (!p->c->quiet) {
            printf("%s%s: stopping after step %d%s\n", p->tty ? "\r\033[K" : "", signal_name(g_stop_signal), in->step,
                   p->c->t.ckpt_dir ? " and writing a checkpoint (a second signal exits at once)" : " (no --ckpt: nothing is saved)");
            fflush(stdout);
        }
    }
    if (p->losses) {
        fprintf(p->losses, "%d %.9g %.9g %.9g\n", in->step, in->loss, in->grad_norm, in->lr);
        fflush(p->losses);
    }
    int done = in->step - p->first_step;
    p->ms_sum += in->ms;
    gptc_window_add(&p->window, in->ms);
    if (p->nms == p->cap_ms) {
        double *grown = realloc(p->all_ms, sizeof(double) * (p->cap_ms = p->cap_ms ? 2 * p->cap_ms : 256));
        if (grown) p->all_ms = grown; else p->cap_ms = p->nms;
    }
    if (p->nms < p->cap_ms) p->all_ms[p->nms++] = in->ms;
    double p50, p95, jitter, rss_mib = gptc_peak_rss() / 1048576.0;
    gptc_window_stats(&p->window, &p50, &p95, &jitter);
    double mfu = p->peak > 0 ? in->tokens_per_s * p->flops / 1e9 / p->peak : 0;

    cJSON *rec = cJSON_CreateObject();
    cJSON_AddStringToObject(rec, "type", "step");
    cJSON_AddNumberToObject(rec, "step", in->step);
    cJSON_AddNumberToObject(rec, "loss", in->loss);
    cJSON_AddNumberToObject(rec, "lr", in->lr);
    cJSON_AddNumberToObject(rec, "grad_norm", in->grad_norm);
    cJSON_AddNumberToObject(rec, "ms", in->ms);
    cJSON_AddNumberToObject(rec, "tokens_per_s", in->tokens_per_s);
    cJSON_AddNumberToObject(rec, "mfu", mfu);
    cJSON_AddNumberToObject(rec, "p50_ms", p50);
    cJSON_AddNumberToObject(rec, "p95_ms", p95);
    cJSON_AddNumberToObject(rec, "jitter_pct", jitter);
    cJSON_AddNumberToObject(rec, "rss_mib", rss_mib);
    if (!isnan(in->val_loss)) cJSON_AddNumberToObject(rec, "val_loss", in->val_loss);
    if (in->skipped) {
        cJSON_AddBoolToObject(rec, "skipped", 1);
        cJSON_AddStringToObject(rec, "bad", in->bad);
        cJSON_AddNumberToObject(rec, "bad_run", in->bad_run);
    }
    if (!isnan(in->z_loss)) cJSON_AddNumberToObject(rec, "z_loss", in->z_loss);
    if (!isnan(in->z_norm)) cJSON_AddNumberToObject(rec, "z_norm", in->z_norm);
    if (in->lr_scale != 1) cJSON_AddNumberToObject(rec, "lr_scale", in->lr_scale);
    cJSON_AddNumberToObject(rec, "dropout", in->dropout);
    cJSON_AddNumberToObject(rec, "attn_dropout", in->attn_dropout);
    cJSON_AddNumberToObject(rec, "weight_decay", in->weight_decay);
    int stop = log_record(p, rec) || p->stopping;
    if (p->c->quiet) return stop;

    double eta = p->ms_sum * 1e-3 / done * (in->steps - in->step);
    char etab[32], line[512], bar[64] = "";
    fmt_eta(etab, sizeof etab, eta);
    bool show = in->skipped || p->tty || in->step % p->c->log_every == 0 || in->step == in->steps || !isnan(in->val_loss) || in->sample;
    if (!show) return stop;
    size_t n = 0;
    bool live = p->tty && !in->skipped && isnan(in->val_loss) && in->step != in->steps && !in->sample;
    if (live) {
        /* the live line: a progress bar and the ETA in front, the rest cut to the terminal's width */
        int filled = (int)(20.0 * in->step / in->steps);
        for (int i = 0; i < 20; i++) bar[i] = i < filled ? '#' : '.';
        bar[20] = '\0';
        n += (size_t)snprintf(line + n, sizeof line - n, "[%s] %3.0f%% step %d/%d | ETA %s | ", bar,
                              100.0 * in->step / in->steps, in->step, in->steps, etab);
    } else {
        n += (size_t)snprintf(line + n, sizeof line - n, "step %d/%d | ", in->step, in->steps);
    }
    n += (size_t)snprintf(line + n, sizeof line - n,
                          "loss %.4f | lr %.2e | norm %.3f | %.0f ms | %.0f tok/s | MFU %.1f%% | "
                          "p50 %.0f p95 %.0f ms ±%.1f%% | RSS %.0f MiB",
                          in->loss, in->lr, in->grad_norm, in->ms, in->tokens_per_s, 100 * mfu, p50, p95, jitter,
                          rss_mib);
    if (!live && n < sizeof line) n += (size_t)snprintf(line + n, sizeof line - n, " | ETA %s", etab);
    if ((in->dropout > 0 || in->attn_dropout > 0) && n < sizeof line)
        n += (size_t)snprintf(line + n, sizeof line - n, " | dropout %.3g/%.3g", in->dropout, in->attn_dropout);
    if (in->skipped && n < sizeof line) {
        if (strcmp(in->bad, "nonfinite") == 0)
            n += (size_t)snprintf(line + n, sizeof line - n, " | not finite: update skipped");
        else
            n += (size_t)snprintf(line + n, sizeof line - n, " | %s (z loss %.1f, z norm %.1f): update skipped", in->bad,
                                  in->z_loss, in->z_norm);
        if (n < sizeof line) n += (size_t)snprintf(line + n, sizeof line - n, " (%d in a row)", in->bad_run);
    }
    if (!isnan(in->val_loss) && n < sizeof line)
        n += (size_t)snprintf(line + n, sizeof line - n, " | val loss %.4f", in->val_loss);
    if (live) {
        int cols = term_columns() - 1, chars = 0;
        for (size_t i = 0; i < n && line[i]; i++) /* count UTF-8 characters, not bytes (±) */
            if ((line[i] & 0xC0) != 0x80 && ++chars > cols) { line[i] = '\0'; break; }
    }
    printf("%s%s%s", p->tty ? "\r\033[K" : "", line, live ? "" : "\n");
    if (in->sample) printf("sample at step %d:\n%s\n", in->step, in->sample);
    fflush(stdout);
    return stop;
}

/* --log FILE must be creatable before anything runs: its folder exists and is writable, and FILE,
 * if it exists, is a writable regular file. */
static bool log_path_ok(const char *flag, const char *path) {
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (!slash) snprintf(dir, sizeof dir, ".");
    else if (slash == dir) dir[1] = '\0';
    else *slash = '\0';
    if (!gptc_is_dir(dir)) {
        fprintf(stderr, "gptc: %s %s: folder %s does not exist\n", flag, path, dir);
        return false;
    }
    if (gptc_is_dir(path)) {
        fprintf(stderr, "gptc: %s %s: is a folder; give a file (e.g. %s/log.jsonl)\n", flag, path, path);
        return false;
    }
    if (access(path, F_OK) == 0 ? !gptc_is_file(path) || access(path, W_OK) != 0 : access(dir, W_OK | X_OK) != 0) {
        fprintf(stderr, "gptc: %s %s: cannot be written\n", flag, path);
        return false;
    }
    return true;
}

/* Prints the failure of gptc_train: in a job of many ranks, an agreed failure once, by rank 0,
 * prefixed with the rank it came from; one only this rank knows of ends the whole job. */
static int train_failed(const progress *p, int code) {
    if (p->tty && p->started) printf("\n");
    fflush(stdout);
    if (gptc_dist_world() == 1) gptc_cli_error();
    else if (gptc_dist_rank() == 0) {
        char msg[2048];
        gptc_cli_flag_names(gptc_last_error(), msg, sizeof msg);
        fprintf(stderr, "[rank %d] gptc: %s\n", gptc_dist_failed_rank(), msg);
    }
    return code;
}

static int run_train(int argc, char **argv);

int gptc_cmd_train(int argc, char **argv) {
    if (gptc_dist_init()) {
        gptc_cli_error();
        return 2;
    }
    int code = run_train(argc, argv);
    gptc_dist_finalize();
    return code;
}

/* Every rank parses the same flags, so a bad one fails on all: rank 0 alone says so. */
static int usage_error(void) {
    if (gptc_dist_rank() == 0) gptc_cli_error();
    return 2;
}

/* --init: the model's config comes from the weights; a shape or --gelu flag given with it must agree */
static gptc_status init_config(train_cli *c, const bool *given) {
    gptc_weights_info info;
    gptc_status st = gptc_weights_find(c->t.init, &info);
    if (st) return gptc_fail_prefix(st, "--init");
    const gptc_model_config *w = &info.cfg, *a = &c->t.model;
    const char *flags[] = {"layers", "heads", "channels", "context", "vocab"};
    const int have[] = {w->layers, w->heads, w->channels, w->context, w->vocab};
    const int asked[] = {a->layers, a->heads, a->channels, a->context, a->vocab};
    bool preset = given_flag(given, "model");
    for (int j = 0; j < 5; j++) {
        bool flag = given_flag(given, flags[j]);
        if ((flag || (preset && asked[j] != 0)) && have[j] != asked[j])
            return gptc_fail(GPTC_ERR_ARG, "--init %s: the weights have %s=%d but %s%s asks for %s=%d; drop the flag "
                             "(the weights set the model's shape)",
                             c->t.init, flags[j], have[j], flag ? "--" : "--model ", flag ? flags[j] : c->model,
                             flags[j], asked[j]);
    }
    if (given_flag(given, "gelu") && w->gelu != a->gelu)
        return gptc_fail(GPTC_ERR_ARG, "--init %s: the weights use --gelu %s but --gelu %s was given; drop --gelu",
                         c->t.init, gptc_gelu_name(w->gelu), gptc_gelu_name(a->gelu));
    c->t.model = *w;
    return GPTC_OK;
}

/* --profile-steps "A:B" (or "A:", B = 0: to the end) into *from, *to: decimal digits only, 1 <= A,
 * B 0 or A <= B, both within int. (sscanf's %d had undefined behaviour on overflow: glibc wrapped
 * 4294967297:5 to 1:5 and accepted it.) */
static bool parse_step_window(const char *s, int *from, int *to) {
    char *end;
    if (!isdigit((unsigned char)s[0])) return false;
    errno = 0;
    long a = strtol(s, &end, 10);
    if (errno || a < 1 || a > INT_MAX || *end != ':') return false;
    const char *b = end + 1;
    long z = 0;
    if (*b) {
        if (!isdigit((unsigned char)b[0])) return false;
        z = strtol(b, &end, 10);
        if (errno || z > INT_MAX || *end || (z && z < a)) return false;
    }
    *from = (int)a;
    *to = (int)z;
    return true;
}

/* Parses the flags into *c (defaults first) and runs every check that needs nothing but the flags:
 * the preset and shape overrides, the names of --gelu, --dtype and --recompute, --profile-steps.
 * Touches no file and no global state, so the fuzzer (fuzz/fuzz_options.c) can call it. */
static gptc_status train_parse(train_cli *c, int argc, char **argv, bool *help, bool *given) {
    defaults(c);
    memset(given, 0, sizeof(bool) * (sizeof g_train_opts / sizeof g_train_opts[0]));
    int npos;
    gptc_status st = gptc_options_parse(&gptc_cmd_train_spec, c, argc, argv, given, NULL, &npos, help);
    if (st || *help) return st;
    /* the preset first, then any shape flags on top of it */
    gptc_model_config shape = c->t.model;
    if ((st = gptc_model_preset(c->model, &c->t.model))) return st;
    const char *shape_flags[] = {"layers", "heads", "channels", "context", "vocab"};
    int *shape_fields[] = {&shape.layers, &shape.heads, &shape.channels, &shape.context, &shape.vocab};
    int *model_fields[] = {&c->t.model.layers, &c->t.model.heads, &c->t.model.channels, &c->t.model.context, &c->t.model.vocab};
    for (int j = 0; j < 5; j++)
        if (given_flag(given, shape_flags[j])) *model_fields[j] = *shape_fields[j];
    if ((st = gptc_gelu_from_name(c->gelu, &c->t.model.gelu)) || (st = gptc_precision_from_name(c->dtype, &c->t.dtype)) ||
        (st = gptc_recompute_from_name(c->recompute, &c->t.recompute)))
        return st;
    c->t.shuffle = !c->sequential;
    if (strcmp(c->on_bad, "rollback") == 0) c->t.on_bad = GPTC_ON_BAD_ROLLBACK;
    else if (strcmp(c->on_bad, "stop") == 0) c->t.on_bad = GPTC_ON_BAD_STOP;
    else return gptc_fail(GPTC_ERR_ARG, "--on-bad %s: must be rollback or stop", c->on_bad);

    /* without --seq, train on the model's whole context (positions never trained sample badly) */
    if (!given_flag(given, "seq")) c->t.seq = c->t.model.context;
    if (c->profile_steps) {
        if (!parse_step_window(c->profile_steps, &c->t.profile_from, &c->t.profile_to))
            return gptc_fail(GPTC_ERR_ARG, "--profile-steps %s: give A:B, steps A to B (1 <= A <= B; B empty: to the end)",
                             c->profile_steps);
        if (!c->t.profile) return gptc_fail(GPTC_ERR_ARG, "--profile-steps %s: needs --profile FILE.json", c->profile_steps);
    }
    return GPTC_OK;
}

gptc_status gptc_cmd_train_parse_check(int argc, char **argv) {
    train_cli c;
    bool help, given[sizeof g_train_opts / sizeof g_train_opts[0]];
    return train_parse(&c, argc, argv, &help, given);
}

static int run_train(int argc, char **argv) {
    train_cli c, d;
    defaults(&d);
    bool help, given[sizeof g_train_opts / sizeof g_train_opts[0]];
    if (train_parse(&c, argc, argv, &help, given)) return usage_error();
    if (help) {
        if (gptc_dist_rank() != 0) return 0;
        gptc_options_help(stdout, &gptc_cmd_train_spec, &d);
        return 0;
    }
    /* --init: the model's shape comes from the weights (and, without --seq, the sequence length) */
    if (c.t.init) {
        if (init_config(&c, given)) return usage_error();
        if (!given_flag(given, "seq")) c.t.seq = c.t.model.context;
    }
    const char *env_plugins = getenv("GPTC_OP_PLUGINS"); /* after the flag's, ':'-separated */
    if (env_plugins && *env_plugins) {
        char *all = malloc((c.t.op_plugins ? strlen(c.t.op_plugins) + 1 : 0) + strlen(env_plugins) + 1);
        if (!all) {
            gptc_fail(GPTC_ERR_NOMEM, "GPTC_OP_PLUGINS: out of memory");
            return usage_error();
        }
        sprintf(all, "%s%s%s", c.t.op_plugins ? c.t.op_plugins : "", c.t.op_plugins ? "," : "", env_plugins);
        static char *env_list; /* lives as long as the process (a static keeps it reachable) */
        free(env_list);
        c.t.op_plugins = env_list = all;
    }
    /* a rank that stops without dying must not hang the others (see src/dist/watchdog.c) */
    if (gptc_dist_set_comm_timeout(c.comm_timeout)) return usage_error();
    int rank = gptc_dist_rank();
    if (c.pin && gptc_dist_world() > 1) {
        gptc_fail(GPTC_ERR_ARG, "--pin: under mpirun the ranks of a host would pin to the same cores; let mpirun "
                                "place them instead (mpirun --bind-to core --map-by slot:PE=THREADS ...)");
        return usage_error();
    }
    progress p = {.c = &c, .tty = isatty(STDOUT_FILENO)};
    /* checked now, opened (and so emptied) only when the run starts: a refused run keeps the file */
    if (c.log_losses && rank == 0 && !log_path_ok("--log-losses", c.log_losses)) gptc_dist_abort(2);
    if (c.log && rank == 0) {
        if (!log_path_ok("--log", c.log)) gptc_dist_abort(2);
        p.log_path = c.log;
    } else if (c.t.ckpt_dir) {
        /* a run folder keeps its own history; made here only if the run starts (it is checked first) */
        snprintf(p.log_buf, sizeof p.log_buf, "%s/log.jsonl", c.t.ckpt_dir);
        p.log_path = p.log_buf;
    }
    gptc_train_result r;
    catch_stop_signals();
    gptc_status st = gptc_train(&c.t, on_step, &p, &r);
    if (p.log) fclose(p.log);
    if (p.losses) fclose(p.losses);
    if (st) gptc_prof_free();
    if (st && gptc_dist_world() > 1 && gptc_dist_failed_rank() < 0) {
        /* a failure the other ranks do not know of: they may be waiting for this one */
        gptc_cli_error();
        gptc_dist_abort(1);
    }
    /* only rank 0 saw the START event; a failure before it is a setup failure on every rank */
    gptc_dist_bcast(&p.started, sizeof p.started, 0);
    if (st || p.failed) {
        free(p.all_ms);
        gptc_prof_free();
        if (st) return train_failed(&p, p.started ? 1 : 2);
        if (p.tty && p.started) printf("\n");
        return p.started ? 1 : 2; /* the callback stopped the run and said why */
    }
    if (rank != 0) {
        gptc_prof_free();
        return 0;
    }
    if (r.steps_run == 0) {
        printf("train: nothing to do: the checkpoint is already at step %d of --steps %d\n", r.first_step, c.t.steps);
        return 0;
    }
    printf("train: median %.1f ms/step, %.1f tokens/s (%d steps from step %d; loss %.4f -> %.4f",
           r.ms_per_step, r.tokens_per_s, r.steps_run, r.first_step, r.first_loss, r.last_loss);
    if (!isnan(r.last_val_loss)) printf("; val loss %.4f -> %.4f", r.first_val_loss, r.last_val_loss);
    printf(")\n");
    if (r.skipped_steps)
        printf("train: %d bad step%s skipped (non-finite%s)\n", r.skipped_steps, r.skipped_steps > 1 ? "s" : "",
               c.t.skip_spikes ? " or spikes" : "");
    if (r.rollbacks)
        printf("train: %d rollback%s; learning rate x%g\n", r.rollbacks, r.rollbacks > 1 ? "s" : "", r.lr_scale);
    if (p.stopping)
        printf("train: stopped by %s after step %d%s\n", signal_name(g_stop_signal), r.first_step + r.steps_run,
               c.t.ckpt_dir ? "; the same command resumes it" : "");
    if (r.world > 1) {
        printf("comm: %d ranks, %.1f allreduce calls/step, %.2f ms/step waiting (%.1f%% of the step)\n", r.world,
               r.comm_calls_per_step, r.comm_wait_ms_per_step, 100 * r.comm_wait_share);
        printf("memory: AdamW moments %.3f MiB per rank (%s)\n", r.optim_bytes / 1048576.0,
               c.t.zero ? "ZeRO-1: this rank's shard" : "whole, on every rank");
    }
    double p50, p95, jitter;
    gptc_spread(p.all_ms, p.nms, &p50, &p95, &jitter);
    free(p.all_ms);
    printf("train: step time p50 %.1f ms, p95 %.1f ms, stdev %.1f%% of the mean over %d steps; peak RSS %.0f MiB\n",
           p50, p95, jitter, p.nms, gptc_peak_rss() / 1048576.0);
    /* MFU against the peak measured (or read from the cache) at the start, on the threads the run used:
     * for bf16 the vdpbf16ps peak where the CPU has AVX512_BF16 (else bf16 runs on fp32 FMAs: the fp32 peak) */
    double achieved = r.tokens_per_s * p.flops / 1e9;
    if (p.peak > 0 && achieved > p.peak) {
        /* a cached peak below what the run achieved was probed on a busy machine: probe again, keep the larger */
        double was = p.peak;
        p.peak = gptc_peak_remeasure(NULL, c.t.dtype == GPTC_PRECISION_BF16, p.threads) * r.world;
        printf("train: the cached %s peak %.1f GFLOP/s is below the %.1f achieved (it was probed on a busy machine); "
               "measured again: %.1f GFLOP/s, cached\n", p.peak_kind, was, achieved, p.peak);
    }
    if (p.peak > 0)
        printf("train: %.3g model FLOPs/token, %.1f GFLOP/s achieved, measured %s peak %.1f GFLOP/s on %d threads%s, "
               "MFU %.1f%%\n",
               p.flops, achieved, p.peak_kind, p.peak, p.threads, r.world > 1 ? " x ranks" : "", 100.0 * achieved / p.peak);
    if (c.t.profile) {
        printf("profile: trace written to %s (rank 0's operators below)\n", c.t.profile);
        gptc_prof_print_table(stdout, p.peak / r.world, p.peak_kind);
        gptc_prof_free();
    }
    return 0;
}
