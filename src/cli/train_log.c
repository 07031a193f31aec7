/* train_log.c — the per-step log of `gptc train` (cli/train_log.h): the terminal line with a progress
 * bar and ETA, the JSON records of --log, the --log-losses lines, and the run's summary. */
#include "cli/train_log.h"
#include "cli/commands.h"
#include "dist/dist.h"
#include "io/io.h"
#include "kernels/kernels.h"
#include "kernels/plugin.h"
#include "train/profile_report.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

/* Whether the run trains on a CUDA device (--device cuda[:N]): its MFU is against the GPU's datasheet peak. */
static bool on_gpu(const progress *p) { return p->c->t.device && strncmp(p->c->t.device, "cuda", 4) == 0; }

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

/* START: opens the log files, prints the run's head and writes the start record. */
/* The start record of the JSON log: the model, the batch, the settings and the machine. */
static int start_record(progress *p, const gptc_step_info *in) {
    const gptc_model_config *m = in->model;
    const gptc_train_options *t = &p->c->t;
    int world = gptc_dist_world();
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
    cJSON_AddBoolToObject(rec, "numa", p->c->numa);
    cJSON_AddNumberToObject(rec, "peak_gflops", p->peak);
    cJSON_AddStringToObject(rec, "peak_kind", p->peak_kind);
    if (p->bw > 0) cJSON_AddNumberToObject(rec, "triad_gbps", p->bw);
    cJSON_AddNumberToObject(rec, "flops_per_token", p->flops);
    cJSON_AddStringToObject(rec, "cpu", gptc_cpu()->brand);
    return log_record(p, rec);
}

static int on_start(progress *p, const gptc_step_info *in) {
    const gptc_model_config *m = in->model;
    const gptc_train_options *t = &p->c->t;
    p->started = true;
    p->first_step = in->first_step;
    int world = gptc_dist_world();
    p->flops = in->flops_per_token > 0 ? in->flops_per_token : gptc_model_flops_per_token(m, t->seq);
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
               gptc_precision_name(t->dtype), gptc_recompute_name(t->recompute),
               t->device && strncmp(t->device, "cuda", 4) == 0 ? t->device : gptc_kernels_get()->variant,
               p->threads, p->pinned);
        if (*gptc_op_plugins_active()) printf("op plugins: %s\n", gptc_op_plugins_active());
        if (p->peak > 0 && on_gpu(p))
            printf("MFU against the %s peak %.1f GFLOP/s of %s, %.3g model FLOPs/token\n", p->peak_kind, p->peak,
                   t->device, p->flops);
        else if (p->peak > 0)
            printf("MFU against the %s peak %.1f GFLOP/s on %d threads%s (%s), %.3g model FLOPs/token\n", p->peak_kind,
                   p->peak, p->threads, world > 1 ? " x ranks" : "", p->peak_cached ? "cached" : "measured now", p->flops);
        if (p->bw > 0)
            printf("memory bandwidth (STREAM triad, 12 bytes/element) %.1f GB/s on %d threads%s (%s)\n", p->bw,
                   p->threads, world > 1 ? " per rank" : "", p->bw_cached ? "cached" : "measured now");
        if (p->log) printf("log: %s\n", p->log_path);
        if (in->first_step) printf("resuming from step %d\n", in->first_step);
        fflush(stdout);
    }
    return start_record(p, in);
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

/* CHECKPOINT: one line, one record. */
static int on_checkpoint(progress *p, const gptc_step_info *in) {
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

/* A step's figures beside its loss: the window's p50/p95 and jitter, the peak RSS, the MFU. */
typedef struct { double p50, p95, jitter, rss_mib, mfu; } step_stats;

/* Records the step's time (for the ETA, the window and the summary) and returns its figures. */
static step_stats add_step(progress *p, const gptc_step_info *in) {
    step_stats s;
    p->ms_sum += in->ms;
    gptc_window_add(&p->window, in->ms);
    if (p->nms == p->cap_ms) {
        double *grown = realloc(p->all_ms, sizeof(double) * (p->cap_ms = p->cap_ms ? 2 * p->cap_ms : 256));
        if (grown) p->all_ms = grown; else p->cap_ms = p->nms;
    }
    if (p->nms < p->cap_ms) p->all_ms[p->nms++] = in->ms;
    s.rss_mib = gptc_peak_rss() / 1048576.0;
    gptc_window_stats(&p->window, &s.p50, &s.p95, &s.jitter);
    s.mfu = p->peak > 0 ? in->tokens_per_s * p->flops / 1e9 / p->peak : 0;
    return s;
}

/* The step's JSON record (--log). */
static int step_record(progress *p, const gptc_step_info *in, const step_stats *s) {
    cJSON *rec = cJSON_CreateObject();
    cJSON_AddStringToObject(rec, "type", "step");
    cJSON_AddNumberToObject(rec, "step", in->step);
    cJSON_AddNumberToObject(rec, "loss", in->loss);
    cJSON_AddNumberToObject(rec, "lr", in->lr);
    cJSON_AddNumberToObject(rec, "grad_norm", in->grad_norm);
    cJSON_AddNumberToObject(rec, "ms", in->ms);
    cJSON_AddNumberToObject(rec, "tokens_per_s", in->tokens_per_s);
    cJSON_AddNumberToObject(rec, "mfu", s->mfu);
    cJSON_AddNumberToObject(rec, "p50_ms", s->p50);
    cJSON_AddNumberToObject(rec, "p95_ms", s->p95);
    cJSON_AddNumberToObject(rec, "jitter_pct", s->jitter);
    cJSON_AddNumberToObject(rec, "rss_mib", s->rss_mib);
    if (!isnan(in->val_loss)) cJSON_AddNumberToObject(rec, "val_loss", in->val_loss);
    if (!isnan(in->hellaswag_acc)) cJSON_AddNumberToObject(rec, "hellaswag_acc", in->hellaswag_acc);
    if (!isnan(in->hellaswag_acc_norm)) cJSON_AddNumberToObject(rec, "hellaswag_acc_norm", in->hellaswag_acc_norm);
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
    return log_record(p, rec);
}

/* The terminal line: on a terminal a live progress bar with the ETA (cut to the width), else a line
 * every --log-every steps and at each evaluation, sample, bad step and the last step. */
static void step_line(progress *p, const gptc_step_info *in, const step_stats *s) {
    int done = in->step - p->first_step;
    double p50 = s->p50, p95 = s->p95, jitter = s->jitter, rss_mib = s->rss_mib, mfu = s->mfu;
    double eta = p->ms_sum * 1e-3 / done * (in->steps - in->step);
    char etab[32], line[512], bar[64] = "";
    fmt_eta(etab, sizeof etab, eta);
    bool show = in->skipped || p->tty || in->step % p->c->log_every == 0 || in->step == in->steps || !isnan(in->val_loss) || in->sample;
    if (!show) return;
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
    if (!isnan(in->hellaswag_acc) && n < sizeof line)
        n += (size_t)snprintf(line + n, sizeof line - n, " | hellaswag acc %.4f acc_norm %.4f", in->hellaswag_acc,
                              in->hellaswag_acc_norm);
    if (live) {
        int cols = term_columns() - 1, chars = 0;
        for (size_t i = 0; i < n && line[i]; i++) /* count UTF-8 characters, not bytes (±) */
            if ((line[i] & 0xC0) != 0x80 && ++chars > cols) { line[i] = '\0'; break; }
    }
    printf("%s%s%s", p->tty ? "\r\033[K" : "", line, live ? "" : "\n");
    if (in->sample) printf("sample at step %d:\n%s\n", in->step, in->sample);
    fflush(stdout);
}

int train_log_on_step(void *user, const gptc_step_info *in) {
    progress *p = user;
    if (in->event == GPTC_EVENT_START) return on_start(p, in);
    if (in->event == GPTC_EVENT_ROLLBACK) return on_rollback(p, in) || train_stop_signal();
    if (in->event == GPTC_EVENT_CHECKPOINT) return on_checkpoint(p, in);
    if (train_stop_signal() && !p->stopping) {
        p->stopping = true;
        if (!p->c->quiet) {
            printf("%s%s: stopping after step %d%s\n", p->tty ? "\r\033[K" : "", train_signal_name(train_stop_signal()), in->step,
                   p->c->t.ckpt_dir ? " and writing a checkpoint (a second signal exits at once)" : " (no --ckpt: nothing is saved)");
            fflush(stdout);
        }
    }
    if (p->losses) {
        fprintf(p->losses, "%d %.9g %.9g %.9g\n", in->step, in->loss, in->grad_norm, in->lr);
        fflush(p->losses);
    }
    step_stats s = add_step(p, in);
    int stop = step_record(p, in, &s) || p->stopping;
    if (!p->c->quiet) step_line(p, in, &s);
    return stop;
}

void train_log_summary(progress *p, const gptc_train_result *r) {
    if (r->steps_run == 0) {
        printf("train: nothing to do: the checkpoint is already at step %d of --steps %d\n", r->first_step, p->c->t.steps);
        return;
    }
    printf("train: median %.1f ms/step, %.1f tokens/s (%d steps from step %d; loss %.4f -> %.4f",
           r->ms_per_step, r->tokens_per_s, r->steps_run, r->first_step, r->first_loss, r->last_loss);
    if (!isnan(r->last_val_loss)) printf("; val loss %.4f -> %.4f", r->first_val_loss, r->last_val_loss);
    printf(")\n");
    if (r->skipped_steps)
        printf("train: %d bad step%s skipped (non-finite%s)\n", r->skipped_steps, r->skipped_steps > 1 ? "s" : "",
               p->c->t.skip_spikes ? " or spikes" : "");
    if (r->rollbacks)
        printf("train: %d rollback%s; learning rate x%g\n", r->rollbacks, r->rollbacks > 1 ? "s" : "", r->lr_scale);
    if (p->stopping)
        printf("train: stopped by %s after step %d%s\n", train_signal_name(train_stop_signal()), r->first_step + r->steps_run,
               p->c->t.ckpt_dir ? "; the same command resumes it" : "");
    if (r->world > 1) {
        printf("comm: %d ranks, %.1f allreduce calls/step, %.2f ms/step waiting (%.1f%% of the step)\n", r->world,
               r->comm_calls_per_step, r->comm_wait_ms_per_step, 100 * r->comm_wait_share);
    }
    const char *ost = p->c->t.optim_state ? p->c->t.optim_state : "fp32";
    if (r->world > 1 || strcmp(ost, "fp32") != 0)
        printf("memory: optimizer state %.3f MiB per rank (%s moments in %s%s; %s)\n", r->optim_bytes / 1048576.0,
               p->c->t.optimizer ? p->c->t.optimizer : "adamw", ost,
               strcmp(ost, "int8") == 0 ? " with an fp32 scale per block of 2048" : "",
               p->c->t.zero && r->world > 1 ? "ZeRO-1: this rank's shard" : "whole, on every rank");
    double p50, p95, jitter;
    gptc_spread(p->all_ms, p->nms, &p50, &p95, &jitter);
    free(p->all_ms);
    printf("train: step time p50 %.1f ms, p95 %.1f ms, stdev %.1f%% of the mean over %d steps; peak RSS %.0f MiB\n",
           p50, p95, jitter, p->nms, gptc_peak_rss() / 1048576.0);
    /* MFU against the peak measured (or read from the cache) at the start, on the threads the run used:
     * for bf16 the vdpbf16ps peak where the CPU has AVX512_BF16 (else bf16 runs on fp32 FMAs: the fp32 peak) */
    double achieved = r->tokens_per_s * p->flops / 1e9;
    if (p->peak > 0 && on_gpu(p)) {
        printf("train: %.3g model FLOPs/token, %.1f GFLOP/s achieved, %s peak %.1f GFLOP/s, MFU %.1f%%\n", p->flops,
               achieved, p->peak_kind, p->peak, 100.0 * achieved / p->peak);
    }
    if (p->peak > 0 && !on_gpu(p) && achieved > p->peak) {
        /* a cached peak below what the run achieved was probed on a busy machine: probe again, keep the larger */
        double was = p->peak;
        p->peak = gptc_peak_remeasure(NULL, p->c->t.dtype == GPTC_PRECISION_BF16, p->threads) * r->world;
        printf("train: the cached %s peak %.1f GFLOP/s is below the %.1f achieved (it was probed on a busy machine); "
               "measured again: %.1f GFLOP/s, cached\n", p->peak_kind, was, achieved, p->peak);
    }
    if (p->peak > 0 && !on_gpu(p))
        printf("train: %.3g model FLOPs/token, %.1f GFLOP/s achieved, measured %s peak %.1f GFLOP/s on %d threads%s, "
               "MFU %.1f%%\n",
               p->flops, achieved, p->peak_kind, p->peak, p->threads, r->world > 1 ? " x ranks" : "", 100.0 * achieved / p->peak);
    if (p->c->t.profile) {
        printf("profile: trace written to %s (rank 0's operators below)\n", p->c->t.profile);
        gptc_prof_print_table(stdout, p->peak / r->world, p->peak_kind, p->bw);
        gptc_prof_free();
    }
}
