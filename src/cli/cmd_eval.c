/* cmd_eval.c — `gptc eval`: the mean loss, perplexity and bits per byte of a model over a whole data
 * split, with sliding windows (train/eval.h); one summary line, or one JSON line with --json. */
#include "cli/commands.h"
#include "cli/options.h"
#include "core/core.h"
#include "train/eval.h"

#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct eval_cli {
    gptc_eval_options e;
    const char *split;
    const char *hellaswag;
    int json;
} eval_cli;

#define F(field) offsetof(eval_cli, field)
static const gptc_option g_eval_opts[] = {
    {"ckpt", OPT_STRING, F(e.ckpt), "PATH", "the model: a checkpoint folder (its newest step), a step folder, a Hugging Face GPT-2 folder or an llm.c .bin (anything --init reads)", 0, 0},
    {"data", OPT_STRING, F(e.data), "SHARDS", "a folder made by `gptc prepare` (its --split), a shard file or a glob of shards; the shards are read as one stream", 0, 0},
    {"split", OPT_STRING, F(split), "NAME", "val or train: which split of a prepare folder", 0, 0},
    {"max-tokens", OPT_LONG, F(e.max_tokens), "N", "score at most N tokens, from the start of the split (0: all)", 0, 9.2e18},
    {"seq", OPT_INT, F(e.seq), "T", "window length (0: the model's context)", 0, 1 << 20},
    {"stride", OPT_INT, F(e.stride), "S", "tokens each window moves on, 1..T; a window's first T-S positions are context only, not scored (unset: T, windows that do not overlap)", 1, 1 << 20},
    {"batch", OPT_INT, F(e.batch), "B", "windows per forward", 1, 1 << 20},
    {"threads", OPT_INT, F(e.threads), "N", "OpenMP threads (0: all cores)", 0, 4096},
    {"hellaswag", OPT_STRING, F(hellaswag), "FILE", "instead of --data: multiple choice in HellaSwag's jsonl format (ctx, endings, label; the real file is hellaswag_val.jsonl of github.com/rowanz/hellaswag): acc (summed loss of each ending) and acc_norm (per token)", 0, 0},
    {"json", OPT_FLAG, F(json), "", "print one JSON object instead of the summary line", 0, 0},
};
#undef F

const gptc_command_spec gptc_cmd_eval_spec = {
    "eval", "gptc eval --ckpt PATH (--data SHARDS [--max-tokens N] [--stride S] | --hellaswag FILE) [options]",
    "Prints a model's mean loss, perplexity and bits per byte over a whole data split (sliding windows).",
    g_eval_opts, sizeof g_eval_opts / sizeof g_eval_opts[0], NULL, sizeof(eval_cli),
};

static void print_json(const eval_cli *c, const gptc_eval_result *r) {
    cJSON *o = cJSON_CreateObject();
    if (!o) return;
    cJSON_AddStringToObject(o, "ckpt", c->e.ckpt);
    cJSON_AddStringToObject(o, "data", c->e.data);
    cJSON_AddStringToObject(o, "split", r->split_desc);
    cJSON_AddStringToObject(o, "tokenizer", r->tokenizer);
    cJSON_AddNumberToObject(o, "tokens", (double)r->tokens);
    cJSON_AddNumberToObject(o, "split_tokens", (double)r->split_tokens);
    cJSON_AddNumberToObject(o, "windows", (double)r->windows);
    cJSON_AddNumberToObject(o, "seq", r->T);
    cJSON_AddNumberToObject(o, "stride", r->S);
    cJSON_AddNumberToObject(o, "batch", r->B);
    cJSON_AddNumberToObject(o, "loss", r->loss);
    cJSON_AddNumberToObject(o, "perplexity", r->perplexity);
    if (r->has_bpb) {
        cJSON_AddNumberToObject(o, "bytes", (double)r->bytes);
        cJSON_AddNumberToObject(o, "bpb", r->bpb);
    } else {
        cJSON_AddNullToObject(o, "bpb");
    }
    cJSON_AddNumberToObject(o, "threads", r->threads);
    cJSON_AddNumberToObject(o, "seconds", r->seconds);
    cJSON_AddNumberToObject(o, "tokens_per_s", r->tokens_per_s);
    char *s = cJSON_PrintUnformatted(o);
    if (s) printf("%s\n", s);
    free(s);
    cJSON_Delete(o);
}

/* gptc eval --hellaswag FILE: the multiple-choice accuracies */
static int run_hellaswag(const eval_cli *c) {
    if (c->e.data) {
        fprintf(stderr, "gptc: --hellaswag and --data: give one (multiple choice, or the loss over a split)\n");
        return 2;
    }
    gptc_mc_result r;
    gptc_status st = gptc_eval_hellaswag(c->e.ckpt, c->hellaswag, c->e.threads, &r);
    if (st) {
        gptc_cli_error();
        return st == GPTC_ERR_NOMEM ? 1 : 2;
    }
    int threads = gptc_threads();
    if (c->json) {
        cJSON *o = cJSON_CreateObject();
        if (!o) return 1;
        cJSON_AddStringToObject(o, "ckpt", c->e.ckpt);
        cJSON_AddStringToObject(o, "hellaswag", c->hellaswag);
        cJSON_AddNumberToObject(o, "items", r.items);
        cJSON_AddNumberToObject(o, "acc", r.acc);
        cJSON_AddNumberToObject(o, "acc_norm", r.acc_norm);
        cJSON_AddNumberToObject(o, "correct", r.correct);
        cJSON_AddNumberToObject(o, "correct_norm", r.correct_norm);
        cJSON_AddNumberToObject(o, "tokens", (double)r.tokens);
        cJSON_AddNumberToObject(o, "threads", threads);
        cJSON_AddNumberToObject(o, "seconds", r.seconds);
        char *s = cJSON_PrintUnformatted(o);
        if (s) printf("%s\n", s);
        free(s);
        cJSON_Delete(o);
        return 0;
    }
    printf("hellaswag: %s: %d items, acc %.4f (%d/%d), acc_norm %.4f (%d/%d), %llu ending tokens, %d threads, %.1f s\n",
           c->hellaswag, r.items, r.acc, r.correct, r.items, r.acc_norm, r.correct_norm, r.items,
           (unsigned long long)r.tokens, threads, r.seconds);
    return 0;
}

int gptc_cmd_eval(int argc, char **argv) {
    eval_cli c = {.split = "val"};
    gptc_eval_options_default(&c.e);
    eval_cli d = c;
    bool help;
    int npos;
    if (gptc_options_parse(&gptc_cmd_eval_spec, &c, argc, argv, NULL, NULL, &npos, &help)) {
        gptc_cli_error();
        return 2;
    }
    if (help) {
        gptc_options_help(stdout, &gptc_cmd_eval_spec, &d);
        return 0;
    }
    if (strcmp(c.split, "val") != 0 && strcmp(c.split, "train") != 0) {
        fprintf(stderr, "gptc: --split %s: expected val or train\n", c.split);
        return 2;
    }
    c.e.train_split = strcmp(c.split, "train") == 0;
    if (c.hellaswag) return run_hellaswag(&c);
    gptc_eval_result r;
    gptc_status st = gptc_eval(&c.e, &r);
    if (st) {
        gptc_cli_error();
        return st == GPTC_ERR_NOMEM || st == GPTC_ERR_NUMERIC ? 1 : 2;
    }
    if (c.json) {
        print_json(&c, &r);
        return 0;
    }
    char bpb[64] = "bpb n/a (the model names no tokenizer gptc can open)";
    if (r.has_bpb) snprintf(bpb, sizeof bpb, "bpb %.4f (%llu bytes)", r.bpb, (unsigned long long)r.bytes);
    printf("eval: %s of %s: %llu tokens scored (of %llu) in %llu windows of %d, stride %d: loss %.4f, perplexity %.3f, "
           "%s, %d threads, %.0f tokens/s\n",
           r.split_desc, c.e.data, (unsigned long long)r.tokens, (unsigned long long)r.split_tokens,
           (unsigned long long)r.windows, r.T, r.S, r.loss, r.perplexity, bpb, r.threads, r.tokens_per_s);
    return 0;
}
