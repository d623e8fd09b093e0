/* Table-driven option parsing shared by the subcommands: each option names its flag, its
 * type, where the value goes and a help line; --help is generated from the same table, and
 * every error names the flag, the value and what was expected. */
#ifndef NB_CLI_ARGS_H
#define NB_CLI_ARGS_H
#include <stdio.h>

/* OPT_SETTING: a row of the run's settings table (nobubble/train.h) under its flag or off_flag;
 * target is the nb_settings_args that collects them, and the table parses and checks the value. */
typedef enum { OPT_INT, OPT_FLOAT, OPT_U64, OPT_STR, OPT_FLAG, OPT_LIST, OPT_SETTING } opt_type;

#define OPT_LIST_MAX 64
typedef struct {
    const char *items[OPT_LIST_MAX];
    int n;
} opt_list;

typedef struct {
    const char *flag;   /* "--steps" */
    opt_type type;
    void *target;       /* int*, float*, unsigned long long*, const char**, int* (flag), opt_list*,
                           nb_settings_args* */
    const char *help;   /* "N  optimizer steps (100) [1..100000000]" */
} cli_option;
/* A help line of an OPT_INT, OPT_FLOAT or OPT_U64 option may end in its range, "[MIN..MAX]": --help shows
 * it and cli_parse refuses a value outside it, naming the flag, the value and the range. Build it with
 * CLI_RANGE(MIN, MAX) from integer constants, e.g. "N      optimizer steps (100) " CLI_RANGE(1, 100000000). */
#define CLI_STR_(x) #x
#define CLI_RANGE(lo, hi) "[" CLI_STR_(lo) ".." CLI_STR_(hi) "]"

/* The ranges the subcommands share (docs/limits.md lists every flag's). */
#define CLI_MAX_THREADS 1024        /* --threads: and at most 4x the online cores, see cli_check_threads */

/* Parses argv[1..argc) (argv[0] is the subcommand). Positional arguments are refused.
 * Returns 0 to go on, 1 when --help was printed, -1 after printing an error. */
int cli_parse(const char *usage, int argc, char **argv, const cli_option *opts, int n_opts);
void cli_help(FILE *f, const char *usage, const cli_option *opts, int n_opts);
/* --threads N (0: leave OpenMP's default): 1 <= N <= min(CLI_MAX_THREADS, 4 x the online cores).
 * Prints the error and returns -1 otherwise. */
int cli_check_threads(const char *cmd, const char *flag, int n);
/* The memory check of a command that builds a model (eval, sample, export, bench; train's is nb_train's):
 * with check, refuses a model whose estimate exceeds the available memory, printing why, and returns -1.
 * CLI_MEMORY_OPTION is the flag that turns it off. */
struct nb_memory_estimate;
int cli_memory_check(const char *cmd, struct nb_memory_estimate *e, int check);
#define CLI_MEMORY_OPTION(var) \
    {"--no-memory-check", OPT_FLAG, &(var), "       build the model even where its estimated memory exceeds the available"}
#endif
