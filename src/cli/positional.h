/* One positional argument among table-driven options (nobubble sweep GRID_FILE, nobubble report DIR). */
#ifndef NB_CLI_POSITIONAL_H
#define NB_CLI_POSITIONAL_H
#include "cli/args.h"

/* Finds the one argument that is neither an option nor an option's value, removes it from argv
 * (so that cli_parse sees options only) and returns it in *pos (NULL when there is none).
 * Returns the new argc, or -1 after printing an error when there are several. */
int cli_take_positional(int argc, char **argv, const cli_option *opts, int n_opts, const char **pos);
#endif
