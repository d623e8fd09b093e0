#include "cli/args.h"
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "nobubble/common.h"
#include "nobubble/train.h"
#include "util/decimal.h"

/* The range a help line ends in ("... [MIN..MAX]"); 0 when it names none. */
static int has_range(const cli_option *o, double *lo, double *hi) {
    if (o->type != OPT_INT && o->type != OPT_FLOAT && o->type != OPT_U64) return 0;
    const char *open = strrchr(o->help, '['), *dots = open ? strstr(open, "..") : NULL;
    char low[32], *end;
    if (!dots || (size_t)(dots - open) > sizeof low) return 0;
    memcpy(low, open + 1, (size_t)(dots - open - 1));   /* "0..1" would read as "0." then ".1" */
    low[dots - open - 1] = 0;
    *lo = strtod(low, &end);
    if (end == low || *end) return 0;
    *hi = strtod(dots + 2, &end);
    return !strcmp(end, "]");
}

void cli_help(FILE *f, const char *usage, const cli_option *opts, int n_opts) {
    fprintf(f, "%s\n\noptions:\n", usage);
    for (int i = 0; i < n_opts; i++) fprintf(f, "  %-16s %s\n", opts[i].flag, opts[i].help);
    fprintf(f, "  %-16s %s\n", "--help", "print this help");
}

static int out_of_range(const char *cmd, const cli_option *o, const char *v, double x) {
    double lo, hi;
    if (!has_range(o, &lo, &hi) || (x >= lo && x <= hi)) return 0;
    fprintf(stderr, "nobubble %s: %s %s: out of range, expected %s from %.10g to %.10g\n", cmd, o->flag, v,
            o->type == OPT_FLOAT ? "a number" : "an integer", lo, hi);
    return 1;
}

static int parse_value(const char *cmd, const cli_option *o, const char *v) {
    char *end;
    errno = 0;
    /* Decimal only: strtof would read "0x10" as 16 and "inf" as infinity. */
    if ((o->type == OPT_INT || o->type == OPT_U64 || o->type == OPT_FLOAT) && !nb_is_decimal(v, o->type != OPT_FLOAT))
        goto malformed;
    switch (o->type) {
    case OPT_INT: {
        long long x = strtoll(v, &end, 10);
        if (end == v || *end) break;
        /* A well-formed integer past the range (or past long long) is named as out of range. */
        if (errno == ERANGE) x = *v == '-' ? LLONG_MIN : LLONG_MAX;
        if (out_of_range(cmd, o, v, (double)x)) return -1;
        if (errno || x < INT_MIN || x > INT_MAX) break;
        *(int *)o->target = (int)x;
        return 0;
    }
    case OPT_FLOAT: {
        float x = strtof(v, &end);
        if (errno || end == v || *end || !isfinite(x)) break;
        if (out_of_range(cmd, o, v, (double)x)) return -1;
        *(float *)o->target = x;
        return 0;
    }
    case OPT_U64: {
        if (*v == '-') break;
        unsigned long long x = strtoull(v, &end, 10);
        if (errno || end == v || *end) break;
        if (out_of_range(cmd, o, v, (double)x)) return -1;
        *(unsigned long long *)o->target = x;
        return 0;
    }
    case OPT_STR:
        *(const char **)o->target = v;
        return 0;
    case OPT_LIST: {
        opt_list *l = o->target;
        if (l->n == OPT_LIST_MAX) {
            fprintf(stderr, "nobubble %s: %s given more than %d times\n", cmd, o->flag, OPT_LIST_MAX);
            return -1;
        }
        l->items[l->n++] = v;
        return 0;
    }
    case OPT_SETTING:
        if (!nb_settings_arg(o->target, o->flag, v)) return 0;
        fprintf(stderr, "nobubble %s: %s\n", cmd, nb_last_error());
        return -1;
    case OPT_FLAG:
        break;
    }
malformed:;
    static const char *const expected[] = {"an integer", "a decimal number", "a non-negative integer", "", "", "", ""};
    double lo, hi;
    fprintf(stderr, "nobubble %s: %s '%s': expected %s", cmd, o->flag, v, expected[o->type]);
    if (has_range(o, &lo, &hi)) fprintf(stderr, " from %.10g to %.10g", lo, hi);
    fputc('\n', stderr);
    return -1;
}

int cli_check_threads(const char *cmd, const char *flag, int n) {
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    long cap = cores > 0 && 4 * cores < CLI_MAX_THREADS ? 4 * cores : CLI_MAX_THREADS;
    if (n >= 0 && n <= cap) return 0;
    fprintf(stderr, "nobubble %s: %s %d: expected 1 to %ld threads (4 x the %ld online cores, at most %d)\n", cmd,
            flag, n, cap, cores, CLI_MAX_THREADS);
    return -1;
}

static int takes_no_value(const cli_option *o) {
    if (o->type == OPT_SETTING) return nb_setting_by_flag(o->flag)->type == NB_SET_BOOL;
    return o->type == OPT_FLAG;
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
        if (takes_no_value(o)) {
            /* the flag alone, or --FLAG=true|false|1|0 */
            const char *b = eq ? eq + 1 : NULL;
            const int yes = !b || !strcmp(b, "true") || !strcmp(b, "1"), no = b && (!strcmp(b, "false") || !strcmp(b, "0"));
            if (!yes && !no) {
                fprintf(stderr, "nobubble %s: %s=%s: expected true, false, 1 or 0 (or the flag alone)\n", argv[0], o->flag, b);
                return -1;
            }
            if (o->type == OPT_FLAG) *(int *)o->target = yes;
            else if (parse_value(argv[0], o, b)) return -1;
            continue;
        }
        const char *v = eq ? eq + 1 : (i + 1 < argc ? argv[++i] : NULL);
        if (!v) {
            fprintf(stderr, "nobubble %s: %s needs a value\n", argv[0], o->flag);
            return -1;
        }
        if (parse_value(argv[0], o, v)) return -1;
    }
    return 0;
}

int cli_memory_check(const char *cmd, nb_memory_estimate *e, int check) {
    if (!check || !nb_memory_check(e, "--no-memory-check")) return 0;
    fprintf(stderr, "nobubble %s: %s\n", cmd, nb_last_error());
    return -1;
}
