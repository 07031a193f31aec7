/* cmd_prepare.c — `gptc prepare`: text files to token shards plus meta.json, with a live progress
 * line on a terminal. */
#include "cli/commands.h"
#include "cli/options.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define F(field) offsetof(gptc_prepare_options, field)
static const gptc_option g_prepare_opts[] = {
    {"tokenizer", OPT_STRING, F(tokenizer), "NAME",
     "gpt2 (GPT-2 BPE, 50257 ids) or byte (alias bytes: 256 byte ids + end-of-text)", 0, 0},
    {"out", OPT_STRING, F(out), "DIR", "output folder for train_*.bin, val_*.bin and meta.json", 0, 0},
    {"val-fraction", OPT_FLOAT, F(val_fraction), "X",
     "share of the input bytes, from the end, kept for validation (cut at a token boundary)", 0, 0.9},
    {"shard-tokens", OPT_LONG, F(shard_tokens), "N", "tokens per shard file", 1, 2147483647.0},
    {"threads", OPT_INT, F(threads), "N", "encoding threads (0: all cores); the output is the same for any N", 0, 1024},
    {"doc-separator", OPT_STRING, F(doc_separator), "TEXT",
     "split each file into documents at TEXT (dropped; \\n \\t \\r \\\\ understood), e.g. '\\n\\n'; "
     "default: one document per file", 0, 0},
};
#undef F

const gptc_command_spec gptc_cmd_prepare_spec = {
    "prepare", "gptc prepare [--tokenizer gpt2|byte] FILE... --out DIR",
    "Tokenizes text files into llm.c-layout token shards (end-of-text before each document) with a val split,\n"
    "streaming the files (memory does not grow with their size) and encoding in parallel.",
    g_prepare_opts, sizeof g_prepare_opts / sizeof g_prepare_opts[0], "FILE...", sizeof(gptc_prepare_options),
};

/* Turns the escapes \n \t \r \\ into their bytes, in place; other backslashes stay. */
static void unescape(char *s) {
    char *out = s;
    for (const char *p = s; *p; p++) {
        if (p[0] == '\\' && p[1]) {
            char c = p[1] == 'n' ? '\n' : p[1] == 't' ? '\t' : p[1] == 'r' ? '\r' : p[1] == '\\' ? '\\' : 0;
            if (c) {
                *out++ = c;
                p++;
                continue;
            }
        }
        *out++ = *p;
    }
    *out = '\0';
}

/* ---------------------------------------------------------------- progress */

typedef struct progress {
    bool tty;
    bool drawn;
    double t0, last;
} progress;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void fmt_eta(char *buf, size_t cap, double s) {
    if (!(s >= 0) || s > 1e7) snprintf(buf, cap, "?");
    else if (s >= 3600) snprintf(buf, cap, "%dh%02dm", (int)(s / 3600), (int)(s / 60) % 60);
    else if (s >= 60) snprintf(buf, cap, "%dm%02ds", (int)(s / 60), (int)s % 60);
    else snprintf(buf, cap, "%ds", (int)s);
}

/* "prepare: 12.3/45.6 MB | 8.9 MB/s | ETA 4s | 1234567 tokens", redrawn at most 10 times a second. */
static void on_progress(void *user, uint64_t done, uint64_t total, uint64_t tokens) {
    progress *p = user;
    if (!p->tty) return;
    double t = now_s();
    if (done < total && t - p->last < 0.1) return;
    p->last = t;
    double el = t - p->t0, rate = el > 0 ? (double)done / el : 0;
    char eta[32];
    fmt_eta(eta, sizeof eta, rate > 0 ? (double)(total - done) / rate : -1);
    fprintf(stderr, "\r\033[Kprepare: %.1f/%.1f MB | %.1f MB/s | ETA %s | %llu tokens", (double)done / 1e6,
            (double)total / 1e6, rate / 1e6, eta, (unsigned long long)tokens);
    fflush(stderr);
    p->drawn = true;
}

int gptc_cmd_prepare(int argc, char **argv) {
    gptc_prepare_options o, d;
    gptc_prepare_options_default(&o);
    gptc_prepare_options_default(&d);
    const char **files = malloc(sizeof(char *) * (argc + 1));
    bool help;
    int npos;
    if (!files) return 1;
    if (gptc_options_parse(&gptc_cmd_prepare_spec, &o, argc, argv, NULL, files, &npos, &help)) {
        gptc_cli_error();
        free(files);
        return 2;
    }
    if (help) {
        gptc_options_help(stdout, &gptc_cmd_prepare_spec, &d);
        free(files);
        return 0;
    }
    if (npos == 0) {
        fprintf(stderr, "gptc: prepare: no input files (usage: %s)\n", gptc_cmd_prepare_spec.usage);
        free(files);
        return 2;
    }
    char *sep = o.doc_separator ? strdup(o.doc_separator) : NULL;
    if (sep) unescape(sep);
    o.doc_separator = sep;
    o.inputs = files;
    o.ninputs = npos;
    progress p = {.tty = isatty(STDERR_FILENO) == 1, .t0 = now_s()};
    o.progress = on_progress;
    o.progress_user = &p;
    gptc_prepare_result r;
    gptc_status st = gptc_prepare_run(&o, &r);
    free(files);
    free(sep);
    if (p.drawn) fprintf(stderr, "\r\033[K");
    if (st) {
        gptc_cli_error();
        /* refused input (nothing written) or bad data: 2; a failure while writing: 1 */
        bool bad_input = !r.output_started || st == GPTC_ERR_ARG || st == GPTC_ERR_FORMAT;
        return st != GPTC_ERR_NOMEM && bad_input ? 2 : 1;
    }
    printf("prepare: %llu train tokens, %llu val tokens (%s tokenizer) in %s\n", (unsigned long long)r.train_tokens,
           (unsigned long long)r.val_tokens, o.tokenizer, o.out);
    printf("prepare: %llu documents, %.1f MB in %.2f s (%.1f MB/s, %d threads); %d train + %d val shards\n",
           (unsigned long long)r.documents, (double)r.input_bytes / 1e6, r.seconds,
           r.seconds > 0 ? (double)r.input_bytes / 1e6 / r.seconds : 0.0, r.threads, r.train_shards, r.val_shards);
    if (o.val_fraction > 0 && r.val_tokens == 0)
        printf("prepare: no val split: no token boundary after byte %.0f of %llu; lower --val-fraction or add text\n",
               (double)r.input_bytes * (1.0 - o.val_fraction), (unsigned long long)r.input_bytes);
    return 0;
}
