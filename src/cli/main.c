/* main.c — `gptc <subcommand>`: dispatch to the subcommands. Only the CLI exits the process. */
#include "cli/commands.h"

#include <stdio.h>
#include <string.h>

static void usage(FILE *f) {
    fprintf(f, "usage: gptc <command> [options]\n\n"
               "commands:\n"
               "  train     train a GPT-2 model on token shards (resumes from --ckpt)\n"
               "  plan      show the memory a training run would take and whether it fits\n"
               "  bench     measure what each optimisation buys (--ablation)\n"
               "  report    write a run folder's training curves as one HTML page\n"
               "  sample    generate text from a checkpoint\n"
               "  eval      mean loss, perplexity and bits per byte of a model over a data split\n"
               "  export    write weights as a Hugging Face GPT-2 folder or an llm.c checkpoint\n"
               "  prepare   turn text files into token shards\n"
               "  tokenize  show the token ids of a text\n"
               "  info      show the CPU, the kernels in use and the model presets\n\n"
               "`gptc <command> --help` lists a command's options.\n");
}

int main(int argc, char **argv) {
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "train") == 0) return gptc_cmd_train(argc - 2, argv + 2);
    if (strcmp(cmd, "plan") == 0) return gptc_cmd_plan(argc - 2, argv + 2);
    if (strcmp(cmd, "bench") == 0) return gptc_cmd_bench(argc - 2, argv + 2);
    if (strcmp(cmd, "report") == 0) return gptc_cmd_report(argc - 2, argv + 2);
    if (strcmp(cmd, "sample") == 0) return gptc_cmd_sample(argc - 2, argv + 2);
    if (strcmp(cmd, "eval") == 0) return gptc_cmd_eval(argc - 2, argv + 2);
    if (strcmp(cmd, "export") == 0) return gptc_cmd_export(argc - 2, argv + 2);
    if (strcmp(cmd, "prepare") == 0) return gptc_cmd_prepare(argc - 2, argv + 2);
    if (strcmp(cmd, "info") == 0) return gptc_cmd_info(argc - 2, argv + 2);
    if (strcmp(cmd, "tokenize") == 0) return gptc_cmd_tokenize(argc - 2, argv + 2);
    if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0 || strcmp(cmd, "help") == 0) {
        usage(stdout);
        return 0;
    }
    fprintf(stderr, "gptc: %s: unknown command (expected train, plan, bench, report, sample, eval, export, prepare, tokenize or info; see gptc --help)\n", cmd);
    return 2;
}
