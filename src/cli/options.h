/* options.h — one option table per subcommand drives parsing, validation of the value's form,
 * and the --help text, so they cannot drift apart. */
#ifndef GPTC_CLI_OPTIONS_H
#define GPTC_CLI_OPTIONS_H

#include "gptc.h"
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

/* OPT_LIST: a string option that may be given again; the values are joined with ',' (the joined
 * string lives until the next gptc_options_parse call). */
typedef enum { OPT_INT, OPT_LONG, OPT_U64, OPT_FLOAT, OPT_STRING, OPT_FLAG, OPT_LIST } gptc_opt_type;

typedef struct gptc_option {
    const char *name;  /* without the leading "--" */
    gptc_opt_type type;
    size_t offset;     /* where the value goes in the command's options struct */
    const char *meta;  /* value placeholder for help ("N", "PATH") */
    const char *help;
    double min;        /* numeric values must lie in [min, max] */
    double max;
} gptc_option;

typedef struct gptc_command_spec {
    const char *name;      /* "train" */
    const char *usage;     /* "gptc train [options]" */
    const char *summary;   /* one line */
    const gptc_option *options;
    int noptions;
    const char *positional; /* name of positional arguments ("FILE...") or NULL if none allowed */
    size_t size;            /* bytes of the options struct the offsets index (for the fuzzer) */
} gptc_command_spec;

/* Parses argv[0..argc) ("--name value", "--name=value", flags) into dst. given[i] (noptions, may be
 * NULL) says which options appeared. Positional arguments are collected into pos (argc entries)
 * when the command takes them. A bad flag or value is GPTC_ERR_ARG with one line naming it.
 * "--help" sets *help. */
gptc_status gptc_options_parse(const gptc_command_spec *cmd, void *dst, int argc, char **argv, bool *given,
                               const char **pos, int *npos, bool *help);

/* Writes the usage and every option with its default (read from defaults) to f. */
void gptc_options_help(FILE *f, const gptc_command_spec *cmd, const void *defaults);
/* on: gptc_options_help writes gptc_options_markdown's section instead (`gptc help --markdown`). */
void gptc_options_help_markdown(bool on);
/* The same as a Markdown section (docs/cli.md): a heading, the usage, a table of the options. */
void gptc_options_markdown(FILE *f, const gptc_command_spec *cmd, const void *defaults);

/* Library messages name an option by its gptc_train_options field in single quotes ('lr',
 * 'model.context'; train/hparams.h); the CLI shows the flag instead. Copies msg to out (cap bytes)
 * with each quoted field that has a flag of `gptc train` replaced by --flag. */
void gptc_cli_flag_names(const char *msg, char *out, size_t cap);

#endif
