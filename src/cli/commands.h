/* The subcommands of the nobubble binary. Each takes argc/argv after the subcommand's name
 * (argv[0] is the subcommand) and returns the process exit status. */
#ifndef NB_CLI_COMMANDS_H
#define NB_CLI_COMMANDS_H
#include "nobubble/backend.h"
/* The backend that NB_GEMM names (the build's default without it), open while a command runs. */
const nb_backend *cli_backend(void);
/* NB_GEMM's value, or NULL when unset or empty: train's default for --gemm. */
const char *cli_backend_env(void);
int cmd_prepare(int argc, char **argv);
int cmd_tokenize(int argc, char **argv);
int cmd_train(int argc, char **argv);
int cmd_eval(int argc, char **argv);
int cmd_sample(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_schedule(int argc, char **argv);
int cmd_project(int argc, char **argv);
int cmd_export(int argc, char **argv);
int cmd_sweep(int argc, char **argv);
int cmd_report(int argc, char **argv);
int cmd_verify(int argc, char **argv);
#endif
