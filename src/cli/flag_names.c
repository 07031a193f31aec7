/* flag_names.c — the one mechanism by which CLI output names flags: library messages name options
 * by their field in single quotes ('lr', 'model.context', 'top_p'; train/hparams.h), and this
 * rewrites each such name that has a flag as --flag, using the option table of train/hparams.def and
 * the few other fields (the model's shape, names parsed into enums, gptc sample's and gptc export's). */
#include "cli/commands.h"
#include "cli/options.h"
#include "core/core.h"
#include "train/hparams.h"

#include <stdio.h>
#include <string.h>

/* fields set through a CLI-only flag (the preset's shape, names parsed into enums) */
static const struct { const char *field, *flag; } g_extra[] = {
    {"model.layers", "layers"}, {"model.heads", "heads"}, {"model.channels", "channels"},
    {"model.context", "context"}, {"model.vocab", "vocab"}, {"model.gelu", "gelu"}, {"dtype", "dtype"},
    {"recompute", "recompute"}, {"on_bad", "on-bad"}, {"shuffle", "sequential"}, {"profile_from", "profile-steps"},
    {"profile_to", "profile-steps"},
    /* gptc_sample_options and gptc_weights_export's arguments (gptc sample, gptc export) */
    {"ckpt", "ckpt"}, {"tokens", "tokens"}, {"temperature", "temperature"}, {"top_k", "top-k"}, {"top_p", "top-p"},
    {"format", "format"}, {"out", "out"}, {"merge_lora", "merge-lora"},
    /* gptc_eval_options (gptc eval; ckpt, data, seq, batch and threads as above) */
    {"stride", "stride"}, {"max_tokens", "max-tokens"}, {"train_split", "split"}, {"hellaswag", "hellaswag"},
    /* gptc_prepare_options (gptc prepare), the planner's request (gptc plan), and the rest of gptc train's */
    {"val_fraction", "val-fraction"}, {"shard_tokens", "shard-tokens"}, {"tokenizer", "tokenizer"},
    {"doc_separator", "doc-separator"}, {"ranks", "ranks"}, {"model", "model"}, {"comm_timeout", "comm-timeout"},
    {"pin", "pin"}, {"numa", "numa"},
};

static const char *flag_of(const char *name, size_t len) {
    for (int k = 0; k < GPTC_HP_N; k++)
        if (strlen(gptc_hps[k].field) == len && strncmp(gptc_hps[k].field, name, len) == 0) return gptc_hps[k].flag;
    for (size_t k = 0; k < sizeof g_extra / sizeof g_extra[0]; k++)
        if (strlen(g_extra[k].field) == len && strncmp(g_extra[k].field, name, len) == 0) return g_extra[k].flag;
    return NULL;
}

void gptc_cli_flag_names(const char *msg, char *out, size_t cap) {
    size_t n = 0;
    if (!cap) return;
    while (*msg && n + 1 < cap) {
        const char *end = *msg == '\'' ? strchr(msg + 1, '\'') : NULL;
        const char *flag = end ? flag_of(msg + 1, (size_t)(end - msg - 1)) : NULL;
        if (flag) {
            n += (size_t)snprintf(out + n, cap - n, "--%s", flag);
            if (n >= cap) n = cap - 1;
            msg = end + 1;
        } else {
            out[n++] = *msg++;
        }
    }
    out[n] = '\0';
}

void gptc_cli_error(void) {
    char msg[2048];
    gptc_cli_flag_names(gptc_last_error(), msg, sizeof msg);
    gptc_log_rank_prefix(stderr);
    fprintf(stderr, "gptc: %s\n", msg);
}
