/* commands.h — the subcommands of the gptc CLI. Each returns the process exit status:
 * 0 success, 2 bad usage or input (nothing written), 1 a failure during the run. */
#ifndef GPTC_CLI_COMMANDS_H
#define GPTC_CLI_COMMANDS_H

int gptc_cmd_train(int argc, char **argv);
int gptc_cmd_sample(int argc, char **argv);
int gptc_cmd_export(int argc, char **argv);
int gptc_cmd_prepare(int argc, char **argv);
int gptc_cmd_info(int argc, char **argv);
int gptc_cmd_tokenize(int argc, char **argv);
int gptc_cmd_plan(int argc, char **argv);
int gptc_cmd_bench(int argc, char **argv);
int gptc_cmd_report(int argc, char **argv);

/* Prints "gptc: MESSAGE" for the last library error. */
void gptc_cli_error(void);

#endif
