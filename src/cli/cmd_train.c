/* cmd_train.c — `gptc train`: its option table (the library's options from train/hparams.def, then
 * the CLI's own), the checks of the flags, the threads, pinning and peak settled before the run, and
 * run_train. The log of the run is cli/train_log.c, the stop signals cli/train_signal.c. Under mpirun
 * every rank runs it; only rank 0 prints, and a failure is printed once, by rank 0, naming the rank
 * it came from (or, when only one rank knows of it, by that rank, which ends the job). */
#include "cli/commands.h"
#include "backend/cuda.h"
#include "cli/options.h"
#include "cli/train_log.h"
#include "core/core.h"
#include "dist/dist.h"
#include "io/io.h"
#include "kernels/kernels.h"
#include "kernels/plugin.h"
#include "optim/optimizer.h"
#include "train/hparams.h"
#include "train/profile_report.h"
#include "train/weights.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>


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
    {"numa", OPT_FLAG, F(numa), "", "place the weights, gradients, optimizer state and activations by first touch: thread i writes the i-th part of each large block first, so on a multi-socket machine each part sits on the node of the thread whose loops use it (implies --pin)", 0, 0},
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

/* What the flags alone do not settle: the shape from 'init's weights, the plugins of GPTC_OP_PLUGINS,
 * the exchange timeout, --pin's compatibility with mpirun. False (the error set) on a bad one. */
static bool settle(train_cli *c, const bool *given) {
    /* --init: the model's shape comes from the weights (and, without --seq, the sequence length) */
    if (c->t.init) {
        if (init_config(c, given)) return false;
        if (!given_flag(given, "seq")) c->t.seq = c->t.model.context;
    }
    const char *env_plugins = getenv("GPTC_OP_PLUGINS"); /* after the flag's, ':'-separated */
    if (env_plugins && *env_plugins) {
        char *all = malloc((c->t.op_plugins ? strlen(c->t.op_plugins) + 1 : 0) + strlen(env_plugins) + 1);
        if (!all) return gptc_fail(GPTC_ERR_NOMEM, "GPTC_OP_PLUGINS: out of memory"), false;
        sprintf(all, "%s%s%s", c->t.op_plugins ? c->t.op_plugins : "", c->t.op_plugins ? "," : "", env_plugins);
        static char *env_list; /* lives as long as the process (a static keeps it reachable) */
        free(env_list);
        c->t.op_plugins = env_list = all;
    }
    /* --device, or GPTC_DEVICE without the flag: refused here (exit 2) on a build or machine without it */
    const char *env_device = getenv("GPTC_DEVICE");
    if (!given_flag(given, "device") && env_device && *env_device) c->t.device = env_device;
    int device;
    if (gptc_device_parse(c->t.device, &device)) return false;
    /* a rank that stops without dying must not hang the others (see src/dist/watchdog.c) */
    if (gptc_dist_set_comm_timeout(c->comm_timeout)) return false;
    if (c->numa) c->pin = 1; /* first touch places pages by the thread that writes them: keep threads put */
    const char *bind = getenv("OMP_PROC_BIND"), *places = getenv("OMP_PLACES");
    if (c->pin && ((bind && *bind) || (places && *places)))
        return gptc_fail(GPTC_ERR_ARG, "--%s: OMP_PROC_BIND / OMP_PLACES are set, and libgomp has already bound the "
                                       "main thread to one core, so every thread would pin there; unset them or drop --%s",
                         c->numa ? "numa" : "pin", c->numa ? "numa" : "pin"), false;
    if (c->pin && gptc_dist_world() > 1)
        return gptc_fail(GPTC_ERR_ARG, "--pin: under mpirun the ranks of a host would pin to the same cores; let mpirun "
                                       "place them instead (mpirun --bind-to core --map-by slot:PE=THREADS ...)"), false;
    return true;
}

/* --log and --log-losses are checked now, opened (and so emptied) only when the run starts: a refused
 * run keeps the files. A run folder keeps its own history, CKPT/log.jsonl, by default. */
static void log_paths(progress *p, const train_cli *c, int rank) {
    if (c->log_losses && rank == 0 && !log_path_ok("--log-losses", c->log_losses)) gptc_dist_abort(2);
    if (c->log && rank == 0) {
        if (!log_path_ok("--log", c->log)) gptc_dist_abort(2);
        p->log_path = c->log;
    } else if (c->t.ckpt_dir) {
        snprintf(p->log_buf, sizeof p->log_buf, "%s/log.jsonl", c->t.ckpt_dir);
        p->log_path = p->log_buf;
    }
}

/* Before the run: the threads, --pin's binding, and on rank 0 the peak the MFU is measured against
 * (cached per machine, measured the first time; tokens/s counts every rank's tokens, so it is set
 * against every rank's peak as rank 0 measures it) and the memory bandwidth (the triad on one rank's
 * threads; measured when --profile needs it and none is cached, else only read from the cache).
 * False when pinning fails. */
static bool probe(progress *p, const train_cli *c, int rank) {
    gptc_set_threads(c->t.threads);
    p->threads = gptc_threads();
    if (c->pin) {
        int cpus[64], n = gptc_pin_threads(cpus, 64);
        if (n < 0) return false;
        size_t k = (size_t)snprintf(p->pinned, sizeof p->pinned, " | pinned to CPUs");
        for (int i = 0; i < n && i < 64 && k < sizeof p->pinned - 64; i++)
            k += (size_t)snprintf(p->pinned + k, sizeof p->pinned - k, "%s%d", i ? "," : " ", cpus[i]);
        if (c->numa)
            snprintf(p->pinned + k, sizeof p->pinned - k, " | numa first touch, %d node%s", gptc_numa_nodes(),
                     gptc_numa_nodes() > 1 ? "s" : "");
    }
    gptc_alloc_set_first_touch(c->numa);
    if (rank == 0) {
        int device;
        if (gptc_device_parse(c->t.device, &device) == GPTC_OK && device >= 0) { /* the GPU's peak, not the CPU's */
            p->peak = gptc_cuda_peak_gflops(device, c->t.dtype == GPTC_PRECISION_BF16, &p->peak_kind);
            p->peak_cached = true;
        } else {
            p->peak = gptc_peak_cached(NULL, c->t.dtype == GPTC_PRECISION_BF16, p->threads, &p->peak_kind, &p->peak_cached);
        }
        p->peak *= gptc_dist_world();
        p->bw = gptc_triad_cached(NULL, p->threads, c->t.profile != NULL, &p->bw_cached);
    }
    return true;
}

/* After gptc_train: the exit status, with the failure printed once (train_failed) or the summary. */
static int finish(progress *p, gptc_status st, const gptc_train_result *r, int rank) {
    if (p->log) fclose(p->log);
    if (p->losses) fclose(p->losses);
    if (st) gptc_prof_free();
    if (st && gptc_dist_world() > 1 && gptc_dist_failed_rank() < 0) {
        /* a failure the other ranks do not know of: they may be waiting for this one */
        gptc_cli_error();
        gptc_dist_abort(1);
    }
    /* only rank 0 saw the START event; a failure before it is a setup failure on every rank */
    gptc_dist_bcast(&p->started, sizeof p->started, 0);
    if (st || p->failed) {
        free(p->all_ms);
        gptc_prof_free();
        if (st) return train_failed(p, p->started ? 1 : 2);
        if (p->tty && p->started) printf("\n");
        return p->started ? 1 : 2; /* the callback stopped the run and said why */
    }
    if (rank == 0) train_log_summary(p, r);
    else gptc_prof_free();
    return 0;
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
    if (!settle(&c, given)) return usage_error();
    int rank = gptc_dist_rank();
    progress p = {.c = &c, .tty = isatty(STDOUT_FILENO)};
    log_paths(&p, &c, rank);
    if (!probe(&p, &c, rank)) {
        gptc_cli_error();
        return 1;
    }
    gptc_train_result r;
    train_catch_stop_signals();
    gptc_status st = gptc_train(&c.t, train_log_on_step, &p, &r);
    return finish(&p, st, &r, rank);
}
