/* cmd_export.c — `gptc export`: writes a model's weights as a Hugging Face GPT-2 folder or an llm.c
 * checkpoint (train/weights.h), from a gptc checkpoint or from either of those formats. */
#include "cli/commands.h"
#include "cli/options.h"
#include "train/weights.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>

typedef struct export_cli {
    const char *ckpt, *format, *out, *dtype;
    int merge_lora;
} export_cli;

#define F(field) offsetof(export_cli, field)
static const gptc_option g_export_opts[] = {
    {"ckpt", OPT_STRING, F(ckpt), "PATH", "the weights: a checkpoint folder (its newest step), a step folder, a Hugging Face GPT-2 folder or an llm.c .bin", 0, 0},
    {"format", OPT_STRING, F(format), "FMT", "hf (a folder: config.json + model.safetensors, tensors in name order) or llmc (one .bin file, llm.c's layout)", 0, 0},
    {"out", OPT_STRING, F(out), "PATH", "the folder (hf) or file (llmc) to write; replaced atomically", 0, 0},
    {"dtype", OPT_STRING, F(dtype), "D", "fp32, or bf16 (rounded to nearest even; llmc: version 5)", 0, 0},
    {"merge-lora", OPT_FLAG, F(merge_lora), "", "fold the checkpoint's LoRA adapters into the weights (W += alpha/r A^T B^T); without it an hf folder gets the base weights and the adapter files beside them (a PEFT folder)", 0, 0},
};
#undef F

static const gptc_command_spec g_export_cmd = {
    "export", "gptc export --ckpt PATH --format hf|llmc --out PATH [--dtype fp32|bf16] [--merge-lora]",
    "Writes a model's weights as a Hugging Face GPT-2 folder or an llm.c checkpoint.",
    g_export_opts, sizeof g_export_opts / sizeof g_export_opts[0], NULL, sizeof(export_cli),
};

int gptc_cmd_export(int argc, char **argv) {
    export_cli c = {.dtype = "fp32"}, d = c;
    bool help;
    int npos;
    if (gptc_options_parse(&g_export_cmd, &c, argc, argv, NULL, NULL, &npos, &help)) {
        gptc_cli_error();
        return 2;
    }
    if (help) {
        gptc_options_help(stdout, &g_export_cmd, &d);
        return 0;
    }
    gptc_dtype dt;
    if (!strcmp(c.dtype, "fp32")) dt = GPTC_F32;
    else if (!strcmp(c.dtype, "bf16")) dt = GPTC_BF16;
    else {
        fprintf(stderr, "gptc: --dtype %s: expected fp32 or bf16\n", c.dtype);
        return 2;
    }
    gptc_status st = gptc_weights_export(c.ckpt, c.format, dt, c.out, c.merge_lora);
    if (st) {
        gptc_cli_error();
        return st == GPTC_ERR_NOMEM || st == GPTC_ERR_IO ? 1 : 2;
    }
    printf("export: wrote %s (%s, %s) from %s\n", c.out, c.format, c.dtype, c.ckpt);
    return 0;
}
