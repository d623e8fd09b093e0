/* The subcommands of the nobubble binary. Each takes argc/argv after the subcommand's name
 * (argv[0] is the subcommand) and returns the process exit status. */
#ifndef NB_CLI_COMMANDS_H
#define NB_CLI_COMMANDS_H
int cmd_prepare(int argc, char **argv);
int cmd_train(int argc, char **argv);
int cmd_eval(int argc, char **argv);
int cmd_sample(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_schedule(int argc, char **argv);
int cmd_export(int argc, char **argv);
int cmd_sweep(int argc, char **argv);
int cmd_report(int argc, char **argv);
#endif
