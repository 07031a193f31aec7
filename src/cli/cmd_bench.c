/* cmd_bench.c — `gptc bench --ablation`: short training sessions that switch gptc's optimisations on
 * one stage at a time, each in a child process (`gptc train` with its flags and a GPTC_KERNELS that
 * picks the kernel of every operator), and a Markdown table of what each stage bought: ms/step,
 * tokens/s, MFU, peak memory (the child's peak RSS), speed-up over the previous row and over the
 * baseline. Everything in the table is measured by the run; nothing is typed in. */
#include "cli/commands.h"
#include "cli/options.h"
#include "core/core.h"
#include "dist/dist.h"
#include "io/io.h"
#include "kernels/kernels.h"

#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

typedef struct bench_cli {
    int ablation;
    const char *model, *data, *out;
    int batch, seq, steps, threads;
} bench_cli;

#define F(field) offsetof(bench_cli, field)
static const gptc_option g_bench_opts[] = {
    {"ablation", OPT_FLAG, F(ablation), "", "run the ablation: optimisations switched on one stage at a time", 0, 0},
    {"model", OPT_STRING, F(model), "NAME", "model preset (as gptc train --model)", 0, 0},
    {"data", OPT_STRING, F(data), "PATH", "token shards to train on (as gptc train --data)", 0, 0},
    {"batch", OPT_INT, F(batch), "B", "sequences per step", 1, 1 << 20},
    {"seq", OPT_INT, F(seq), "T", "tokens per sequence", 1, 1 << 20},
    {"steps", OPT_INT, F(steps), "N", "training steps per stage (the median step is reported)", 1, 1e6},
    {"threads", OPT_INT, F(threads), "N", "OpenMP threads (0: all cores)", 0, 4096},
    {"out", OPT_STRING, F(out), "FILE", "also write the table to FILE (Markdown)", 0, 0},
};
#undef F

const gptc_command_spec gptc_cmd_bench_spec = {
    "bench", "gptc bench --ablation [--model M --batch B --seq T --steps N --data PATH]",
    "Measures what each of gptc's optimisations buys, one stage at a time, on this machine.",
    g_bench_opts, sizeof g_bench_opts / sizeof g_bench_opts[0], NULL, sizeof(bench_cli),
};

/* One row of the ablation: what it adds, the kernels (GPTC_KERNELS, with %s for this CPU's best
 * level) and the extra `gptc train` flags. */
typedef struct stage {
    const char *name;
    const char *kernels;
    const char *flags[6];
    int ranks; /* > 1: run under mpirun -np ranks, the batch and threads split over the ranks */
} stage;

static const stage k_stages[] = {
    {"baseline: reference kernels, naive attention, erf GELU, unfused", "ref",
     {"--naive-attention", "--gelu", "erf", "--no-fusion"}, 1},
    {"+ fused flash attention, fast tanh GELU", "ref,flash=%s,gelu_fwd=%s,gelu_bwd=%s", {"--no-fusion"}, 1},
    {"+ fused residual+LayerNorm, chunked classifier+cross-entropy",
     "ref,flash=%s,gelu_fwd=%s,gelu_bwd=%s,residual_layernorm_fwd=%s,layernorm_bwd_residual=%s,crossentropy_fused=%s",
     {NULL}, 1},
    {"+ SIMD GEMM (and the other SIMD kernels: AdamW, encoder, bias)", "%s", {NULL}, 1},
    {"+ bf16 mixed precision", "%s", {"--dtype", "bf16"}, 1},
    {"+ recompute block (memory)", "%s", {"--dtype", "bf16", "--recompute", "block"}, 1},
    {"+ 2 ranks over MPI (same global batch and cores, split)", "%s", {"--dtype", "bf16", "--recompute", "block"}, 2},
};
enum { NSTAGES = sizeof k_stages / sizeof k_stages[0] };

typedef struct result {
    double ms, tok_s, mfu, rss_mib;
    bool bf16_peak;
} result;

/* The stage's GPTC_KERNELS value: every %s replaced by level. */
static void kernels_env(const stage *s, const char *level, char *buf, size_t cap) {
    size_t n = 0;
    for (const char *p = s->kernels; *p && n + 1 < cap; p++) {
        if (p[0] == '%' && p[1] == 's') {
            n += (size_t)snprintf(buf + n, cap - n, "%s", level);
            p++;
        } else {
            buf[n++] = *p;
        }
        if (n >= cap) n = cap - 1;
    }
    buf[n] = '\0';
}

/* Whether this build and machine can run a stage of many ranks; says why not when not. */
static bool can_run_ranks(void) {
    if (!gptc_dist_has_mpi()) {
        printf("(the 2-rank stage is left out: this gptc was built without MPI)\n");
        return false;
    }
    if (system("command -v mpirun >/dev/null 2>&1") != 0) {
        printf("(the 2-rank stage is left out: mpirun not found; tools/setup.sh installs openmpi-bin)\n");
        return false;
    }
    return true;
}

/* Runs `gptc train` for one stage with its output in log; fills r from its summary lines and its
 * peak RSS. Returns false (with the reason printed) when the child fails. */
static bool run_stage(const bench_cli *c, const stage *s, const char *level, const char *log, result *r) {
    char env[512], batch[16], seq[16], steps[16], threads[16], np[16], self[4096];
    kernels_env(s, level, env, sizeof env);
    int nt = c->threads ? c->threads : gptc_threads(), ranks = s->ranks > 1 ? s->ranks : 1;
    /* many ranks share the global batch and the cores: B/ranks sequences and threads/ranks each */
    snprintf(batch, sizeof batch, "%d", c->batch % ranks == 0 ? c->batch / ranks : c->batch);
    snprintf(seq, sizeof seq, "%d", c->seq);
    snprintf(steps, sizeof steps, "%d", c->steps);
    snprintf(threads, sizeof threads, "%d", nt / ranks > 0 ? nt / ranks : 1);
    snprintf(np, sizeof np, "%d", ranks);
    ssize_t k = readlink("/proc/self/exe", self, sizeof self - 1);
    self[k > 0 ? k : 0] = '\0';
    const char *argv[60];
    int argc = 0;
    if (ranks > 1) {
        /* one host: shared memory between the ranks (without the cross-process copy a container may
         * forbid), no binding (the threads split the cores), no probing for UCX */
        const char *mpi[] = {"mpirun", "-np", np, "--oversubscribe", "--bind-to", "none", "--mca", "btl", "self,vader",
                             "--mca", "btl_vader_single_copy_mechanism", "none", "--mca", "pml", "ob1", self};
        for (size_t i = 0; i < sizeof mpi / sizeof mpi[0]; i++) argv[argc++] = mpi[i];
    } else {
        argv[argc++] = "gptc";
    }
    const char *train[] = {"train", "--model", c->model, "--data", c->data, "--batch", batch, "--seq", seq,
                           "--steps", steps, "--threads", threads, "--eval-every", "0", "--eval-batches", "1",
                           "--lr", "1e-4", "--quiet"};
    for (size_t i = 0; i < sizeof train / sizeof train[0]; i++) argv[argc++] = train[i];
    for (int i = 0; i < 6 && s->flags[i]; i++) argv[argc++] = s->flags[i];
    argv[argc] = NULL;
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0) {
        perror("gptc bench: fork");
        return false;
    }
    if (pid == 0) {
        int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd < 0) _exit(127);
        dup2(fd, 1);
        dup2(fd, 2);
        setenv("GPTC_KERNELS", env, 1);
        if (ranks > 1) {
            if (geteuid() == 0) { /* Open MPI refuses root unless told */
                setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
                setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
            }
            execvp("mpirun", (char *const *)argv);
        }
        execv(self, (char *const *)argv);
        _exit(127);
    }
    int status;
    struct rusage ru;
    if (wait4(pid, &status, 0, &ru) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "gptc bench: stage \"%s\" failed (GPTC_KERNELS=%s); its output (%s):\n", s->name, env, log);
        char *text = NULL;
        size_t len = 0;
        if (gptc_file_read_all(log, &text, &len) == GPTC_OK) {
            fwrite(text, 1, len, stderr);
            gptc_free(text);
        }
        return false;
    }
    memset(r, 0, sizeof *r);
    r->rss_mib = ru.ru_maxrss / 1024.0; /* under mpirun: its largest process, i.e. one rank */
    FILE *f = fopen(log, "r");
    char line[1024];
    while (f && fgets(line, sizeof line, f)) {
        if (strncmp(line, "train: median ", 14) == 0) sscanf(line + 14, "%lf ms/step, %lf tokens/s", &r->ms, &r->tok_s);
        const char *m = strstr(line, "MFU ");
        if (strncmp(line, "train: ", 7) == 0 && m) {
            sscanf(m + 4, "%lf", &r->mfu);
            r->bf16_peak = strstr(line, "measured bf16 peak") != NULL;
        }
    }
    if (f) fclose(f);
    if (r->ms <= 0 || r->tok_s <= 0) {
        fprintf(stderr, "gptc bench: stage \"%s\": no summary line in its output (%s)\n", s->name, log);
        return false;
    }
    return true;
}

/* The table as Markdown into f. */
static void print_table(FILE *f, const bench_cli *c, const char *level, const result *r, const int *stage_of, int n) {
    fprintf(f, "| stage | ms/step | tokens/s | MFU | peak memory | vs previous | vs baseline |\n");
    fprintf(f, "| --- | ---: | ---: | ---: | ---: | ---: | ---: |\n");
    for (int i = 0; i < n; i++)
        fprintf(f, "| %s | %.1f | %.1f | %.1f %%%s | %.0f MiB | %.2f× | %.2f× |\n", k_stages[stage_of[i]].name, r[i].ms,
                r[i].tok_s, r[i].mfu, r[i].bf16_peak ? " (bf16 peak)" : "", r[i].rss_mib,
                i ? r[i].tok_s / r[i - 1].tok_s : 1.0, r[i].tok_s / r[0].tok_s);
    bool ranks = false;
    for (int i = 0; i < n; i++) ranks |= k_stages[stage_of[i]].ranks > 1;
    fprintf(f, "\n%s, B=%d, T=%d, %d threads, median of %d steps per stage; kernels: ref and %s (GPTC_KERNELS per "
               "stage); MFU against the fp32 FMA peak (bf16 rows: the vdpbf16ps peak) as gptc train "
               "measures and caches it (for the 2-rank row, against both ranks' peak); peak memory = the stage's peak RSS%s.\n",
            c->model, c->batch, c->seq, c->threads ? c->threads : gptc_threads(), c->steps, level,
            ranks ? " (2-rank row: the larger rank's)" : "");
}

int gptc_cmd_bench(int argc, char **argv) {
    bench_cli c = {.model = "gpt2", .data = "build/data/shakespeare-gpt2", .batch = 4, .seq = 64, .steps = 3}, d = c;
    bool help;
    int npos;
    if (gptc_options_parse(&gptc_cmd_bench_spec, &c, argc, argv, NULL, NULL, &npos, &help)) {
        gptc_cli_error();
        return 2;
    }
    if (help) {
        gptc_options_help(stdout, &gptc_cmd_bench_spec, &d);
        return 0;
    }
    if (!c.ablation) {
        fprintf(stderr, "gptc bench: nothing to run; use --ablation (see gptc bench --help)\n");
        return 2;
    }
    if (!gptc_is_dir(c.data) && !gptc_is_file(c.data)) {
        fprintf(stderr, "gptc bench: --data %s: not found; make it with `gptc prepare --tokenizer gpt2 "
                        "data/tinyshakespeare.txt --out %s` or pass --data\n", c.data, c.data);
        return 2;
    }
    const char *level = gptc_kernels_get()->variant;
    char dir[] = "/tmp/gptc-bench.XXXXXX";
    if (!mkdtemp(dir)) {
        perror("gptc bench: mkdtemp");
        return 1;
    }
    printf("ablation: %s, B=%d, T=%d, %d steps per stage, best kernels %s\n", c.model, c.batch, c.seq, c.steps, level);
    result r[NSTAGES];
    int stage_of[NSTAGES], nrun = 0, n = 0, rc = 0;
    bool mpi_ok = can_run_ranks();
    for (int i = 0; i < NSTAGES; i++)
        if (k_stages[i].ranks <= 1 || mpi_ok) stage_of[nrun++] = i;
    for (; n < nrun; n++) {
        const stage *s = &k_stages[stage_of[n]];
        char log[600];
        snprintf(log, sizeof log, "%s/stage%d.log", dir, n);
        printf("stage %d/%d: %s ...\n", n + 1, nrun, s->name);
        fflush(stdout);
        if (!run_stage(&c, s, level, log, &r[n])) {
            rc = 1;
            break;
        }
        remove(log);
    }
    rmdir(dir);
    if (n == 0) return rc;
    printf("\n");
    print_table(stdout, &c, level, r, stage_of, n);
    if (c.out) {
        char *text = NULL;
        size_t len = 0;
        FILE *m = open_memstream(&text, &len);
        if (!m) return 1;
        print_table(m, &c, level, r, stage_of, n);
        fclose(m);
        const void *parts[] = {text};
        gptc_status st = gptc_file_write_atomic(c.out, parts, &len, 1);
        free(text);
        if (st) {
            gptc_cli_error();
            return 1;
        }
    }
    return rc;
}
