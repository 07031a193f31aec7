/* cmd_train.c — `gptc train`: its option table, the progress display and the run summary. */
#include "cli/commands.h"
#include "cli/options.h"
#include "core/core.h"
#include "kernels/kernels.h"
#include "train/profile_report.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
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
} train_cli;

#define F(field) offsetof(train_cli, field)
#define BIG 1e18
static const gptc_option g_train_opts[] = {
    {"model", OPT_STRING, F(model), "NAME", "model preset: gpt2, gpt2-medium, gpt2-large, gpt2-xl, tiny, small-cpu, medium-cpu", 0, 0},
    {"layers", OPT_INT, F(t.model.layers), "N", "transformer blocks (overrides the preset)", 1, 1000},
    {"heads", OPT_INT, F(t.model.heads), "N", "attention heads; must divide --channels", 1, 1000},
    {"channels", OPT_INT, F(t.model.channels), "N", "embedding width", 1, 65536},
    {"context", OPT_INT, F(t.model.context), "N", "positions the model can attend to", 1, 1 << 20},
    {"vocab", OPT_INT, F(t.model.vocab), "N", "vocabulary size (0: from the data's meta.json, else 50257)", 0, 65536},
    {"gelu", OPT_STRING, F(gelu), "FORM", "MLP activation: tanh (GPT-2's GELU), erf (exact GELU) or sigmoid (x sigmoid(1.702 x)); a resumed run must use its checkpoint's", 0, 0},
    {"data", OPT_STRING, F(t.data), "PATH", "train shards: a .bin file, a glob, or a folder made by `gptc prepare`", 0, 0},
    {"val-data", OPT_STRING, F(t.val_data), "PATH", "val shards (default: the val split of the --data folder)", 0, 0},
    {"batch", OPT_INT, F(t.batch), "B", "sequences per micro-step", 1, 1 << 20},
    {"total-batch", OPT_LONG, F(t.total_batch), "TOKENS", "tokens per update, a multiple of B*T (0: B*T, no accumulation)", 0, BIG},
    {"seq", OPT_INT, F(t.seq), "T", "tokens per sequence, at most --context (default: the context)", 1, 1 << 20},
    {"steps", OPT_INT, F(t.steps), "N", "optimizer updates in total (a resumed run continues up to N)", 1, 1e9},
    {"lr", OPT_FLOAT, F(t.lr), "X", "peak learning rate", 1e-12, 10},
    {"warmup", OPT_INT, F(t.warmup), "N", "linear warm-up steps", 0, 1e9},
    {"lr-floor", OPT_FLOAT, F(t.lr_floor), "X", "cosine decay ends at lr * X", 0, 1},
    {"weight-decay", OPT_FLOAT, F(t.weight_decay), "X", "AdamW decoupled weight decay (2-D weights only)", 0, 10},
    {"beta1", OPT_FLOAT, F(t.beta1), "X", "AdamW beta1", 0, 0.999999},
    {"beta2", OPT_FLOAT, F(t.beta2), "X", "AdamW beta2", 0, 0.999999},
    {"eps", OPT_FLOAT, F(t.eps), "X", "AdamW epsilon", 1e-30, 1},
    {"clip", OPT_FLOAT, F(t.clip), "X", "clip the global gradient norm to X (0: off)", 0, BIG},
    {"seed", OPT_U64, F(t.seed), "N", "seed for initialisation and data order", 0, 0},
    {"sequential", OPT_FLAG, F(sequential), "", "read windows in order instead of shuffling each epoch", 0, 0},
    {"ckpt", OPT_STRING, F(t.ckpt_dir), "DIR", "checkpoint folder; resumes from its newest checkpoint", 0, 0},
    {"ckpt-every", OPT_INT, F(t.ckpt_every), "N", "steps between checkpoints (0: only at the end)", 0, 1e9},
    {"keep", OPT_INT, F(t.keep), "K", "checkpoints kept", 1, 1e6},
    {"eval-every", OPT_INT, F(t.eval_every), "N", "steps between val-loss evaluations (0: first and last step only)", 0, 1e9},
    {"eval-batches", OPT_INT, F(t.eval_batches), "N", "micro-batches per evaluation", 1, 1e6},
    {"threads", OPT_INT, F(t.threads), "N", "OpenMP threads (0: all cores)", 0, 4096},
    {"naive-attention", OPT_FLAG, F(t.naive_attention), "", "use the reference attention that stores the T x T scores (instead of flash)", 0, 0},
    {"no-fusion", OPT_FLAG, F(t.no_fusion), "", "separate bias/residual/LayerNorm kernels and whole (B,T,V) logits (instead of fused, chunked)", 0, 0},
    {"dtype", OPT_STRING, F(dtype), "D", "precision of the matrix products: fp32, or bf16 (bf16 operands, fp32 sums, fp32 master weights and AdamW)", 0, 0},
    {"recompute", OPT_STRING, F(recompute), "LEVEL", "activations the backward recomputes instead of keeping: none; gelu (the MLP's GELU); attn (also the attention); block (all but each block's input). Same results, less memory (see gptc plan)", 0, 0},
    {"sample-every", OPT_INT, F(t.sample_every), "N", "print a sample, decoded with the data's tokenizer, every N steps (0: never)", 0, 1e9},
    {"sample-tokens", OPT_INT, F(t.sample_tokens), "N", "tokens per sample in the log", 1, 1 << 20},
    {"log-every", OPT_INT, F(log_every), "N", "print a line every N steps when not on a terminal", 1, 1e9},
    {"quiet", OPT_FLAG, F(quiet), "", "print only the summary", 0, 0},
    {"profile", OPT_STRING, F(t.profile), "FILE", "write a Chrome trace-event timeline of every operator (open it in Perfetto or chrome://tracing) to FILE.json and print a per-operator table at the end", 0, 0},
};
#undef F

static const gptc_command_spec g_train_cmd = {
    "train", "gptc train --data PATH [options]",
    "Trains a GPT-2 model on token shards; with --ckpt it saves checkpoints and resumes from them.",
    g_train_opts, sizeof g_train_opts / sizeof g_train_opts[0], NULL,
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
}

void gptc_cli_error(void) { fprintf(stderr, "gptc: %s\n", gptc_last_error()); }

typedef struct progress {
    const train_cli *c;
    bool tty;
    bool started;
    double ms_sum; /* step times so far (evaluation and checkpoint time excluded) */
    int first_step;
} progress;

static void fmt_eta(char *buf, size_t cap, double s) {
    if (!(s >= 0) || s > 1e7) snprintf(buf, cap, "?");
    else if (s >= 3600) snprintf(buf, cap, "%dh%02dm", (int)(s / 3600), (int)fmod(s / 60, 60));
    else if (s >= 60) snprintf(buf, cap, "%dm%02ds", (int)(s / 60), (int)fmod(s, 60));
    else snprintf(buf, cap, "%ds", (int)s);
}

static int on_step(void *user, const gptc_step_info *in) {
    progress *p = user;
    if (in->event == GPTC_EVENT_START) {
        p->started = true;
        p->first_step = in->first_step;
        const gptc_model_config *m = in->model;
        const gptc_train_options *t = &p->c->t;
        if (!p->c->quiet) {
            printf("model: %d layers, %d heads, %d channels, context %d, vocab %d (padded %d), gelu %s, %.2fM "
                   "parameters | batch %d x %d, %ld tokens/update | dtype %s, recompute %s | kernels %s | threads %d\n",
                   m->layers, m->heads, m->channels, m->context, m->vocab, gptc_padded_vocab(m->vocab),
                   gptc_gelu_name(m->gelu), gptc_model_num_params(m) / 1e6, t->batch, t->seq, in->tokens_per_update,
                   gptc_precision_name(t->dtype), gptc_recompute_name(t->recompute), gptc_kernels_get()->variant,
                   gptc_threads());
            if (in->first_step) printf("resuming from step %d\n", in->first_step);
            fflush(stdout);
        }
        return 0;
    }
    if (p->c->quiet) return 0;
    if (in->event == GPTC_EVENT_CHECKPOINT) {
        printf("%scheckpoint %s\n", p->tty ? "\r\033[K" : "", in->ckpt_path);
        fflush(stdout);
        return 0;
    }
    int done = in->step - p->first_step;
    p->ms_sum += in->ms;
    double eta = p->ms_sum * 1e-3 / done * (in->steps - in->step);
    char etab[32];
    fmt_eta(etab, sizeof etab, eta);
    bool show = p->tty || in->step % p->c->log_every == 0 || in->step == in->steps || !isnan(in->val_loss) || in->sample;
    if (show) {
        printf("%sstep %d/%d | loss %.4f | lr %.2e | norm %.3f | %.0f ms | %.0f tok/s | ETA %s", p->tty ? "\r\033[K" : "",
               in->step, in->steps, in->loss, in->lr, in->grad_norm, in->ms, in->tokens_per_s, etab);
        if (!isnan(in->val_loss)) printf(" | val loss %.4f", in->val_loss);
        if (!p->tty || !isnan(in->val_loss) || in->step == in->steps || in->sample) printf("\n");
        if (in->sample) printf("sample at step %d:\n%s\n", in->step, in->sample);
        fflush(stdout);
    }
    return 0;
}

int gptc_cmd_train(int argc, char **argv) {
    train_cli c, d;
    defaults(&c);
    defaults(&d);
    bool given[sizeof g_train_opts / sizeof g_train_opts[0]] = {0}, help;
    int npos;
    if (gptc_options_parse(&g_train_cmd, &c, argc, argv, given, NULL, &npos, &help)) {
        gptc_cli_error();
        return 2;
    }
    if (help) {
        gptc_options_help(stdout, &g_train_cmd, &d);
        return 0;
    }
    /* the preset first, then any shape flags on top of it */
    gptc_model_config shape = c.t.model;
    if (gptc_model_preset(c.model, &c.t.model)) {
        gptc_cli_error();
        return 2;
    }
    const char *shape_flags[] = {"layers", "heads", "channels", "context", "vocab"};
    int *shape_fields[] = {&shape.layers, &shape.heads, &shape.channels, &shape.context, &shape.vocab};
    int *model_fields[] = {&c.t.model.layers, &c.t.model.heads, &c.t.model.channels, &c.t.model.context, &c.t.model.vocab};
    for (int j = 0; j < 5; j++)
        if (given_flag(given, shape_flags[j])) *model_fields[j] = *shape_fields[j];
    if (gptc_gelu_from_name(c.gelu, &c.t.model.gelu) || gptc_precision_from_name(c.dtype, &c.t.dtype) ||
        gptc_recompute_from_name(c.recompute, &c.t.recompute)) {
        gptc_cli_error();
        return 2;
    }
    c.t.shuffle = !c.sequential;

    /* without --seq, train on the model's whole context (positions never trained sample badly) */
    if (!given_flag(given, "seq")) c.t.seq = c.t.model.context;
    progress p = {.c = &c, .tty = isatty(STDOUT_FILENO)};
    gptc_train_result r;
    gptc_status st = gptc_train(&c.t, on_step, &p, &r);
    if (st) {
        gptc_prof_free();
        if (p.tty && p.started) printf("\n");
        gptc_cli_error();
        return p.started ? 1 : 2;
    }
    if (r.steps_run == 0) {
        printf("train: nothing to do: the checkpoint is already at step %d of --steps %d\n", r.first_step, c.t.steps);
        return 0;
    }
    printf("train: median %.1f ms/step, %.1f tokens/s (%d steps from step %d; loss %.4f -> %.4f",
           r.ms_per_step, r.tokens_per_s, r.steps_run, r.first_step, r.first_loss, r.last_loss);
    if (!isnan(r.last_val_loss)) printf("; val loss %.4f -> %.4f", r.first_val_loss, r.last_val_loss);
    printf(")\n");
    /* MFU against the peak this machine measures now, on the threads the run used: for bf16 the
     * vdpbf16ps peak where the CPU has AVX512_BF16 (else bf16 runs on fp32 FMAs: the fp32 peak) */
    double peak = 0, flops = gptc_model_flops_per_token(&r.model, c.t.seq);
    const char *kind = "fp32";
    if (c.t.dtype == GPTC_PRECISION_BF16 && (peak = gptc_peak_bf16_gflops(c.t.threads)) > 0) kind = "bf16";
    if (peak <= 0) peak = gptc_peak_gflops(c.t.threads);
    if (peak > 0)
        printf("train: %.3g model FLOPs/token, %.1f GFLOP/s achieved, measured %s peak %.1f GFLOP/s on %d threads, "
               "MFU %.1f%%\n",
               flops, r.tokens_per_s * flops / 1e9, kind, peak, c.t.threads ? c.t.threads : gptc_threads(),
               100.0 * r.tokens_per_s * flops / 1e9 / peak);
    if (c.t.profile) {
        printf("profile: trace written to %s\n", c.t.profile);
        gptc_prof_print_table(stdout, peak, kind);
        gptc_prof_free();
    }
    return 0;
}
