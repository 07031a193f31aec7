/* cmd_prepare.c — `gptc prepare`: text files to token shards plus meta.json. */
#include "cli/commands.h"
#include "cli/options.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

#define F(field) offsetof(gptc_prepare_options, field)
static const gptc_option g_prepare_opts[] = {
    {"tokenizer", OPT_STRING, F(tokenizer), "NAME", "tokenizer: byte (256 byte ids + end-of-text)", 0, 0},
    {"out", OPT_STRING, F(out), "DIR", "output folder for train_*.bin, val_*.bin and meta.json", 0, 0},
    {"val-fraction", OPT_FLOAT, F(val_fraction), "X", "fraction of the tokens (from the end) kept for validation", 0, 0.9},
    {"shard-tokens", OPT_LONG, F(shard_tokens), "N", "tokens per shard file", 1, 2147483647.0},
};
#undef F

static const gptc_command_spec g_prepare_cmd = {
    "prepare", "gptc prepare [--tokenizer byte] FILE... --out DIR",
    "Tokenizes text files into llm.c-layout token shards (end-of-text before each file) with a val split.",
    g_prepare_opts, sizeof g_prepare_opts / sizeof g_prepare_opts[0], "FILE...",
};

int gptc_cmd_prepare(int argc, char **argv) {
    gptc_prepare_options o, d;
    gptc_prepare_options_default(&o);
    gptc_prepare_options_default(&d);
    const char **files = malloc(sizeof(char *) * (argc + 1));
    bool help;
    int npos;
    if (!files) return 1;
    if (gptc_options_parse(&g_prepare_cmd, &o, argc, argv, NULL, files, &npos, &help)) {
        gptc_cli_error();
        free(files);
        return 2;
    }
    if (help) {
        gptc_options_help(stdout, &g_prepare_cmd, &d);
        free(files);
        return 0;
    }
    if (npos == 0) {
        fprintf(stderr, "gptc: prepare: no input files (usage: %s)\n", g_prepare_cmd.usage);
        free(files);
        return 2;
    }
    o.inputs = files;
    o.ninputs = npos;
    size_t ntrain = 0, nval = 0;
    gptc_status st = gptc_prepare(&o, &ntrain, &nval);
    free(files);
    if (st) {
        gptc_cli_error();
        return st == GPTC_ERR_NOMEM ? 1 : 2;
    }
    printf("prepare: %zu train tokens, %zu val tokens (%s tokenizer) in %s\n", ntrain, nval, o.tokenizer, o.out);
    return 0;
}
