#include "cli/args.h"
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

void cli_help(FILE *f, const char *usage, const cli_option *opts, int n_opts) {
    fprintf(f, "%s\n\noptions:\n", usage);
    for (int i = 0; i < n_opts; i++) fprintf(f, "  %-16s %s\n", opts[i].flag, opts[i].help);
    fprintf(f, "  %-16s %s\n", "--help", "print this help");
}

static int parse_value(const cli_option *o, const char *v) {
    char *end;
    errno = 0;
    switch (o->type) {
    case OPT_INT: {
        long x = strtol(v, &end, 10);
        if (errno || end == v || *end || x < INT_MIN || x > INT_MAX) break;
        *(int *)o->target = (int)x;
        return 0;
    }
    case OPT_FLOAT: {
        float x = strtof(v, &end);
        if (errno || end == v || *end || !isfinite(x)) break;
        *(float *)o->target = x;
        return 0;
    }
    case OPT_U64: {
        if (*v == '-') break;
        unsigned long long x = strtoull(v, &end, 10);
        if (errno || end == v || *end) break;
        *(unsigned long long *)o->target = x;
        return 0;
    }
    case OPT_STR:
        *(const char **)o->target = v;
        return 0;
    case OPT_LIST: {
        opt_list *l = o->target;
        if (l->n == OPT_LIST_MAX) {
            fprintf(stderr, "nobubble: %s given more than %d times\n", o->flag, OPT_LIST_MAX);
            return -1;
        }
        l->items[l->n++] = v;
        return 0;
    }
    case OPT_FLAG:
        break;
    }
    static const char *const expected[] = {"an integer", "a finite number", "a non-negative integer", "", "", ""};
    fprintf(stderr, "nobubble: %s '%s': expected %s\n", o->flag, v, expected[o->type]);
    return -1;
}

int cli_parse(const char *usage, int argc, char **argv, const cli_option *opts, int n_opts) {
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            cli_help(stdout, usage, opts, n_opts);
            return 1;
        }
        const char *eq = strchr(a, '=');
        size_t len = eq ? (size_t)(eq - a) : strlen(a);
        const cli_option *o = NULL;
        for (int k = 0; k < n_opts && !o; k++)
            if (strlen(opts[k].flag) == len && !strncmp(opts[k].flag, a, len)) o = &opts[k];
        if (!o) {
            fprintf(stderr, "nobubble %s: unknown option '%s' (see --help)\n", argv[0], a);
            return -1;
        }
        if (o->type == OPT_FLAG) {
            if (eq) {
                fprintf(stderr, "nobubble %s: %s takes no value\n", argv[0], o->flag);
                return -1;
            }
            *(int *)o->target = 1;
            continue;
        }
        const char *v = eq ? eq + 1 : (i + 1 < argc ? argv[++i] : NULL);
        if (!v) {
            fprintf(stderr, "nobubble %s: %s needs a value\n", argv[0], o->flag);
            return -1;
        }
        if (parse_value(o, v)) return -1;
    }
    return 0;
}
