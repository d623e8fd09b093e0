/* Table-driven option parsing shared by the subcommands: each option names its flag, its
 * type, where the value goes and a help line; --help is generated from the same table, and
 * every error names the flag, the value and what was expected. */
#ifndef NB_CLI_ARGS_H
#define NB_CLI_ARGS_H
#include <stdio.h>

typedef enum { OPT_INT, OPT_FLOAT, OPT_U64, OPT_STR, OPT_FLAG, OPT_LIST } opt_type;

#define OPT_LIST_MAX 64
typedef struct {
    const char *items[OPT_LIST_MAX];
    int n;
} opt_list;

typedef struct {
    const char *flag;   /* "--steps" */
    opt_type type;
    void *target;       /* int*, float*, unsigned long long*, const char**, int* (flag), opt_list* */
    const char *help;   /* "N  optimizer steps" */
} cli_option;

/* Parses argv[1..argc) (argv[0] is the subcommand). Positional arguments are refused.
 * Returns 0 to go on, 1 when --help was printed, -1 after printing an error. */
int cli_parse(const char *usage, int argc, char **argv, const cli_option *opts, int n_opts);
void cli_help(FILE *f, const char *usage, const cli_option *opts, int n_opts);
#endif
