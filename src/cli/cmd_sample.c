/* cmd_sample.c — `gptc sample`: generate text from a checkpoint, streamed to stdout. */
#include "cli/commands.h"
#include "cli/options.h"

#include <stddef.h>
#include <stdio.h>

#define F(field) offsetof(gptc_sample_options, field)
static const gptc_option g_sample_opts[] = {
    {"ckpt", OPT_STRING, F(ckpt), "PATH", "checkpoint folder (its newest step), one step folder, a Hugging Face GPT-2 folder (config.json + model.safetensors) or an llm.c .bin", 0, 0},
    {"prompt", OPT_STRING, F(prompt), "TEXT", "text to continue (default: start a new document)", 0, 0},
    {"tokens", OPT_INT, F(tokens), "N", "new tokens to generate", 1, 1 << 20},
    {"temperature", OPT_FLOAT, F(temperature), "X", "softmax temperature (0: greedy)", 0, 100},
    {"top-k", OPT_INT, F(top_k), "K", "sample among the K most likely tokens (0: off)", 0, 1 << 20},
    {"top-p", OPT_FLOAT, F(top_p), "P", "sample among the most likely tokens whose probability adds up to P (1: off)", 1e-9, 1},
    {"seed", OPT_U64, F(seed), "N", "seed of the sampler", 0, 0},
    {"threads", OPT_INT, F(threads), "N", "OpenMP threads (0: all cores)", 0, 4096},
};
#undef F

const gptc_command_spec gptc_cmd_sample_spec = {
    "sample", "gptc sample --ckpt PATH [--prompt TEXT] [options]",
    "Generates text from a checkpoint with a KV cache (one incremental step per token).",
    g_sample_opts, sizeof g_sample_opts / sizeof g_sample_opts[0], NULL, sizeof(gptc_sample_options),
};

/* prints the prompt before the first generated piece, so a refused run prints only its error */
static void emit(void *user, const char *text, size_t len) {
    const char **prompt = user;
    if (*prompt) {
        fputs(*prompt, stdout);
        *prompt = NULL;
    }
    fwrite(text, 1, len, stdout);
    fflush(stdout);
}

int gptc_cmd_sample(int argc, char **argv) {
    gptc_sample_options o, d;
    gptc_sample_options_default(&o);
    gptc_sample_options_default(&d);
    bool help;
    int npos;
    if (gptc_options_parse(&gptc_cmd_sample_spec, &o, argc, argv, NULL, NULL, &npos, &help)) {
        gptc_cli_error();
        return 2;
    }
    if (help) {
        gptc_options_help(stdout, &gptc_cmd_sample_spec, &d);
        return 0;
    }
    const char *prompt = o.prompt;
    gptc_status st = gptc_sample(&o, emit, &prompt);
    if (prompt == NULL) fputc('\n', stdout);
    if (st) {
        gptc_cli_error();
        return st == GPTC_ERR_NOMEM || st == GPTC_ERR_NUMERIC ? 1 : 2;
    }
    return 0;
}
