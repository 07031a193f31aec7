/* commands.h — the subcommands of the gptc CLI. Each returns the process exit status:
 * 0 success, 2 bad usage or input (nothing written), 1 a failure during the run. */
#ifndef GPTC_CLI_COMMANDS_H
#define GPTC_CLI_COMMANDS_H

#include "gptc.h"

int gptc_cmd_train(int argc, char **argv);
int gptc_cmd_sample(int argc, char **argv);
int gptc_cmd_export(int argc, char **argv);
int gptc_cmd_prepare(int argc, char **argv);
int gptc_cmd_info(int argc, char **argv);
int gptc_cmd_tokenize(int argc, char **argv);
int gptc_cmd_plan(int argc, char **argv);
int gptc_cmd_bench(int argc, char **argv);
int gptc_cmd_report(int argc, char **argv);
int gptc_cmd_eval(int argc, char **argv);

/* The option tables of the subcommands (cli/options.h), for tests and fuzz/fuzz_options.c. */
struct gptc_command_spec;
extern const struct gptc_command_spec gptc_cmd_train_spec, gptc_cmd_plan_spec, gptc_cmd_bench_spec,
    gptc_cmd_report_spec, gptc_cmd_sample_spec, gptc_cmd_prepare_spec, gptc_cmd_tokenize_spec;
extern const struct gptc_command_spec gptc_cmd_eval_spec;

/* Parses `gptc train`'s flags and runs every check that needs only the flags (preset and shape,
 * --gelu, --dtype, --recompute, --profile-steps), as gptc train does before it starts; opens no file,
 * changes no global state. Returns GPTC_OK, or GPTC_ERR_ARG with gptc_last_error() naming the flag. */
gptc_status gptc_cmd_train_parse_check(int argc, char **argv);

/* Prints "gptc: MESSAGE" for the last library error. */
void gptc_cli_error(void);

#endif
