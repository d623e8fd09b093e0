#include "cli/positional.h"
#include <string.h>

/* Whether argv[i] is an option that takes its value from the next argument. */
static int takes_next(const char *a, const cli_option *opts, int n_opts) {
    if (strchr(a, '=')) return 0;
    for (int k = 0; k < n_opts; k++)
        if (!strcmp(opts[k].flag, a)) return opts[k].type != OPT_FLAG;
    return 0;
}

int cli_take_positional(int argc, char **argv, const cli_option *opts, int n_opts, const char **pos) {
    *pos = NULL;
    int out = 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (a[0] == '-' && a[1]) {
            argv[out++] = argv[i];
            if (takes_next(a, opts, n_opts) && i + 1 < argc) argv[out++] = argv[++i];
            continue;
        }
        if (*pos) {
            fprintf(stderr, "nobubble %s: unexpected argument '%s' (already given '%s'; see --help)\n", argv[0], a, *pos);
            return -1;
        }
        *pos = a;
    }
    argv[out] = NULL;
    return out;
}
