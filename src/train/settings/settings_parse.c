/* A setting's value: from a flag's text (with its range), as text, as a --help line, and the
 * defaults that depend on other settings. The rows are in settings.c. */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "nobubble/pipeline.h"
#include "nobubble/runtime.h"
#include "nobubble/train.h"
#include "train/settings/settings_value.h"
#include "util/decimal.h"
#include "util/error.h"
#include "util/range.h"

void *setting_field(const nb_setting *s, const nb_train_options *o) { return (char *)o + s->offset; }

void setting_set_number(const nb_setting *s, nb_train_options *o, double v) {
    void *f = setting_field(s, o);
    switch (s->type) {
    case NB_SET_INT: case NB_SET_BOOL: case NB_SET_ENUM: case NB_SET_DELAY: {
        int x = (int)v;   /* a delay's number is its mode, nb_delay_options' first field (tau stays) */
        memcpy(f, &x, sizeof x);
        break;
    }
    case NB_SET_U64: *(uint64_t *)f = (uint64_t)v; break;
    case NB_SET_FLOAT: *(float *)f = (float)v; break;
    case NB_SET_DOUBLE: *(double *)f = v; break;
    case NB_SET_EF: ((nb_delay_options *)f)->ef = v != 0 ? 1 : 0; break;  /* 0: off (the default); see parse_number */
    case NB_SET_STRING: *(const char **)f = NULL; break;
    }
}

/* The value of a numeric or boolean row as a double (u64 rows: their range is the type's). */
static double number_of(const nb_setting *s, const nb_train_options *o) {
    const void *f = setting_field(s, o);
    switch (s->type) {
    case NB_SET_INT: case NB_SET_BOOL: return *(const int *)f;
    case NB_SET_FLOAT: return *(const float *)f;
    case NB_SET_EF: return ((const nb_delay_options *)f)->ef_alpha;
    default: return 0;
    }
}

/* A by_optimizer row's default under optimizer kind (the default optimizer's where kind is none): read from
 * the options that kind's descriptor gives, its lr as --lr and its defaults as the optimizer's fields. */
static double optimizer_default(const nb_setting *s, int kind) {
    const nb_optimizer_desc *d = nb_optimizer_desc_of((nb_optimizer_kind)kind);
    if (!d) d = nb_optimizer_desc_of((nb_optimizer_kind)nb_setting_by_name("optimizer")->def);
    nb_train_options o;
    memset(&o, 0, sizeof o);
    o.optim = d->defaults;
    o.schedule.lr = d->lr;
    return number_of(s, &o);
}

void setting_set_default(const nb_setting *s, nb_train_options *o) {
    setting_set_number(s, o, s->by_optimizer ? optimizer_default(s, o->optim.kind) : s->def);
}

/* The part that keeps the range of a row's field: the optimizer's hyperparameters, the schedule's and the
 * delay's numbers (--ef ALPHA's number is ef_alpha). NULL: the row's own. */
static const nb_range *part_range(const nb_setting *s) {
    static const struct {
        size_t at, size;
        const nb_range *table;
    } parts[] = {
        {offsetof(nb_train_options, optim), sizeof(nb_optim_params), nb_optim_ranges},
        {offsetof(nb_train_options, schedule), sizeof(nb_schedule), nb_schedule_ranges},
        {offsetof(nb_train_options, delay), sizeof(nb_delay_options), nb_delay_ranges},
    };
    const size_t at = s->type == NB_SET_EF ? offsetof(nb_train_options, delay.ef_alpha) : s->offset;
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++)   /* unsigned: an offset below the part wraps */
        if (at - parts[i].at < parts[i].size) return nb_range_at(parts[i].table, at - parts[i].at);
    return NULL;
}

int nb_setting_range(const nb_setting *s, nb_range *r) {
    const nb_range *part = part_range(s);
    if (part) *r = *part;
    else *r = (nb_range){s->flag, s->offset, s->type == NB_SET_INT, s->min, s->max, s->min_open, s->max_open};
    return r->min <= r->max;
}

int nb_setting_has_range(const nb_setting *s) {
    nb_range r;
    return nb_setting_range(s, &r);
}

void setting_format_float(char *buf, size_t size, float v) {
    for (int p = 1; p <= 9; p++) {
        snprintf(buf, size, "%.*g", p, (double)v);
        if (strtof(buf, NULL) == v) return;
    }
}

/* "[1..65536]", "(0..1000000000]", "[0..1)" */
static void format_range(const nb_setting *s, const nb_range *r, char *buf, size_t size) {
    if (s->type == NB_SET_U64) {
        snprintf(buf, size, "[0..2^64-1]");
        return;
    }
    snprintf(buf, size, "%c%.10g..%.10g%c", r->min_open ? '(' : '[', r->min, r->max, r->max_open ? ')' : ']');
}

static const char *expected_kind(const nb_setting *s) {
    return s->type == NB_SET_INT ? "an integer" : s->type == NB_SET_U64 ? "a non-negative integer" : "a number";
}

/* "--steps 0: out of range, expected an integer from 1 to 100000000"; an open end is written as an
 * interval: "--beta1 1: out of range, expected a number in [0, 1)". */
static int out_of_range(const nb_range *r, const char *flag, const char *text) {
    char expected[96];
    nb_range_expected(r, expected, sizeof expected);
    return nb_fail("%s %s: out of range, expected %s", flag, text, expected);
}

static int malformed(const nb_setting *s, const char *flag, const char *text) {
    const char *what = s->type == NB_SET_FLOAT || s->type == NB_SET_EF ? "a decimal number" : expected_kind(s);
    nb_range r;
    if (!nb_setting_range(s, &r)) return nb_fail("%s '%s': expected %s", flag, text, what);
    char range[64];
    format_range(s, &r, range, sizeof range);
    return nb_fail("%s '%s': expected %s in %s", flag, text, what, range);
}

/* A number flag: well-formed (decimal only), then in range (a well-formed integer past long long is out
 * of range). */
static int parse_number(const nb_setting *s, const char *flag, const char *text, nb_train_options *o) {
    char *end;
    errno = 0;
    double x;
    if (!nb_is_decimal(text, s->type == NB_SET_INT || s->type == NB_SET_U64)) return malformed(s, flag, text);
    if (s->type == NB_SET_INT) {
        long long v = strtoll(text, &end, 10);
        if (end == text || *end) return malformed(s, flag, text);
        x = errno == ERANGE ? (*text == '-' ? -HUGE_VAL : HUGE_VAL) : (double)v;
    } else if (s->type == NB_SET_U64) {
        unsigned long long v = strtoull(text, &end, 10);
        if (*text == '-' || errno || end == text || *end) return malformed(s, flag, text);
        *(uint64_t *)setting_field(s, o) = v;   /* exactly: a double cannot hold every u64 */
        return 0;
    } else {
        float v = strtof(text, &end);
        if (errno || end == text || *end || !isfinite(v)) return malformed(s, flag, text);
        x = v;
    }
    nb_range r;
    if (nb_setting_range(s, &r) && !nb_range_holds(&r, x)) return out_of_range(&r, flag, text);
    if (s->type == NB_SET_EF) {   /* --ef ALPHA turns error feedback on, also with alpha 0 */
        nb_delay_options *d = setting_field(s, o);
        d->ef = 1;
        d->ef_alpha = (float)x;
        return 0;
    }
    setting_set_number(s, o, x);
    return 0;
}

static int parse_enum(const nb_setting *s, const char *flag, const char *text, nb_train_options *o) {
    int v;
    if (nb_names_parse(s->names, flag, text, &v)) return -1;
    setting_set_number(s, o, v);
    return 0;
}

void nb_settings_begin(nb_settings_args *a, nb_train_options *o) {
    memset(a, 0, sizeof *a);
    a->o = o;
}

int nb_settings_arg(nb_settings_args *a, const char *flag, const char *value) {
    const nb_setting *s = nb_setting_by_flag(flag);
    if (!s) return nb_fail("unknown option '%s'", flag);
    unsigned char *given = &a->given[s - nb_settings];
    /* Only a boolean flag stands alone (and a text one, where NULL is none); NULL is what a binding passes for
     * a flag alone (the Python package's batch=True). */
    if (!value && s->type != NB_SET_BOOL && s->type != NB_SET_STRING)
        return nb_fail("%s: expected a value (%s), not the flag alone", flag, s->metavar ? s->metavar : "VALUE");
    switch (s->type) {
    case NB_SET_BOOL: {
        /* A value, --FLAG=true|false|1|0, says whether the named flag holds: --nesterov=false is --no-nesterov. */
        int named = 1;
        if (value && (!strcmp(value, "false") || !strcmp(value, "0"))) named = 0;
        else if (value && strcmp(value, "true") && strcmp(value, "1"))
            return nb_fail("%s=%s: expected true, false, 1 or 0 (or the flag alone)", flag, value);
        const int on = (!s->off_flag || strcmp(flag, s->off_flag)) == named;
        if (*given == 1 && *(int *)setting_field(s, a->o) != on)
            return nb_fail("give %s or %s, not both", s->flag, s->off_flag);
        setting_set_number(s, a->o, on);
        break;
    }
    case NB_SET_STRING:
        /* "" is no name: --device '' and --gemm '' ran the defaults, --init-from '' read /config.json */
        if (value && !*value)
            return nb_fail("%s '': expected %s, not an empty string", flag, s->metavar ? s->metavar : "a value");
        *(const char **)setting_field(s, a->o) = value;
        break;
    case NB_SET_ENUM:
        if (parse_enum(s, flag, value, a->o)) return -1;
        break;
    case NB_SET_DELAY:
        if (nb_delay_parse(value, setting_field(s, a->o))) return -1;
        break;
    default:
        if (parse_number(s, flag, value, a->o)) return -1;
    }
    *given = 1;
    return 0;
}

/* --pipeline sets the delay its schedule imposes; an explicit --delay must agree with it; a kind that is
 * a schedule only (interleaved, zbh1) is refused here, before any work. Without --pipeline there is one
 * process: no other transport, and not under mpirun. */
static int pipeline_delay(nb_settings_args *a) {
    nb_train_options *o = a->o;
    const nb_setting *delay = nb_setting_by_name("delay");
    if (o->pipeline < 0) {
        if (o->transport != NB_TRANSPORT_THREADS || nb_mpi_launched())
            return nb_fail("--transport and mpirun need --pipeline KIND (one process per stage)");
        return 0;
    }
    if (nb_pipe_kind_check_executed((nb_pipe_kind)o->pipeline)) return -1;
    const char *own = nb_pipe_delay_name((nb_pipe_kind)o->pipeline);
    char given[32];
    nb_setting_format(delay, o, given, sizeof given);
    if (a->given[delay - nb_settings] && strcmp(given, own))
        return nb_fail("--pipeline %s runs with the delay %s, not --delay %s (leave --delay out)",
                       nb_pipe_kind_name((nb_pipe_kind)o->pipeline), own, given);
    return nb_delay_parse(own, &o->delay);
}

/* Under mpirun with more than one process and no --transport: one stage per process (--transport mpi,
 * --stages the world size over --data-parallel's replicas), rather than every process running the whole
 * pipeline into the same files. Flags that say otherwise are refused, naming both (with --data-parallel,
 * a --stages that does not make the world by nb_train, before anything is built). A world of one is left
 * as it was. */
static int follow_mpirun(nb_settings_args *a) {
    nb_train_options *o = a->o;
    const int world = nb_mpi_world_size(), D = o->data_parallel;
    if (world == 0 || world == 1) return 0;
    const nb_setting *transport = nb_setting_by_name("transport"), *stages = nb_setting_by_name("stages");
    if (a->given[transport - nb_settings]) {
        if (o->transport == NB_TRANSPORT_MPI) return 0;
        return nb_fail("--transport threads under mpirun (%d processes): each process would run the whole pipeline "
                       "into the same files; leave --transport out (one stage per process) or run one process "
                       "without mpirun", world);
    }
    if (world < 0)
        return nb_fail("started by an MPI launcher that does not give the number of processes (no "
                       "OMPI_COMM_WORLD_SIZE or PMI_SIZE, or not a count): give --transport mpi and --stages P");
    if (world % D)
        return nb_fail("--data-parallel %d, but mpirun started %d processes: expected a multiple of %d (one process "
                       "per stage of each replica)", D, world, D);
    if (D == 1 && a->given[stages - nb_settings] && o->stages != world)
        return nb_fail("--stages %d, but mpirun started %d processes (one per stage): expected --stages %d or "
                       "mpirun -np %d", o->stages, world, world, o->stages);
    if (o->pipeline < 0) {
        char kinds[96];
        nb_pipe_kind_list(kinds, sizeof kinds);
        if (D > 1)
            return nb_fail("mpirun started %d processes, %d replicas of %d pipeline stage(s): expected --pipeline KIND "
                           "(%s%s)", world, D, world / D, kinds,
                           world == D ? "; a replica of one stage without delay: --pipeline 1f1b" : "");
        return nb_fail("mpirun started %d processes, one per pipeline stage: expected --pipeline KIND (%s)", world,
                       kinds);
    }
    o->transport = NB_TRANSPORT_MPI;
    if (!a->given[stages - nb_settings]) o->stages = world / D;
    return 0;
}

int nb_settings_finish(nb_settings_args *a) {
    for (int i = 0; i < nb_settings_count; i++)
        if (nb_settings[i].by_optimizer && !a->given[i]) setting_set_default(&nb_settings[i], a->o);
    return follow_mpirun(a) || pipeline_delay(a);
}

void setting_format_display(const nb_setting *s, const nb_train_options *o, char *buf, size_t size) {
    if (s->type != NB_SET_FLOAT) {
        nb_setting_format(s, o, buf, size);
        if (s->type == NB_SET_BOOL) snprintf(buf, size, "%s", *(const int *)setting_field(s, o) ? "on" : "off");
        return;
    }
    const float v = *(const float *)setting_field(s, o);
    setting_format_float(buf, size, v);
    /* The shortest text of 300 is 3e+02: whole numbers are written whole. */
    if (strchr(buf, 'e') && fabsf(v) >= 1 && fabsf(v) < 1e9f && v == truncf(v)) snprintf(buf, size, "%.0f", (double)v);
}

void nb_setting_format(const nb_setting *s, const nb_train_options *o, char *buf, size_t size) {
    const void *f = setting_field(s, o);
    const nb_delay_options *d = f;
    switch (s->type) {
    case NB_SET_INT: case NB_SET_BOOL: snprintf(buf, size, "%d", *(const int *)f); break;
    case NB_SET_U64: snprintf(buf, size, "%llu", (unsigned long long)*(const uint64_t *)f); break;
    case NB_SET_FLOAT: setting_format_float(buf, size, *(const float *)f); break;
    case NB_SET_DOUBLE: snprintf(buf, size, "%.17g", *(const double *)f); break;
    case NB_SET_STRING: snprintf(buf, size, "%s", *(const char *const *)f ? *(const char *const *)f : ""); break;
    case NB_SET_ENUM: {
        int v = *(const int *)f;
        snprintf(buf, size, "%s", v >= 0 && s->names(v) ? s->names(v) : "none");
        break;
    }
    case NB_SET_DELAY:
        if (d->mode == NB_DELAY_FIXED) snprintf(buf, size, "fixed:%d", d->tau);
        else snprintf(buf, size, "%s", nb_delay_mode_name(d->mode));
        break;
    case NB_SET_EF:
        if (d->ef) setting_format_float(buf, size, d->ef_alpha);
        else snprintf(buf, size, "off");
        break;
    }
}

/* Appends formatted text to buf (cut at its size). */
static void append(char *buf, size_t size, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void append(char *buf, size_t size, const char *fmt, ...) {
    size_t at = strlen(buf);
    va_list ap;
    va_start(ap, fmt);
    if (at < size) vsnprintf(buf + at, size - at, fmt, ap);
    va_end(ap);
}

/* The default as text: the row's own, or under optimizer kind for a by_optimizer row (kind -1: the default
 * optimizer's). */
static void default_text(const nb_setting *s, int kind, char *buf, size_t size) {
    nb_train_options o;
    memset(&o, 0, sizeof o);
    o.optim.kind = (nb_optimizer_kind)kind;
    setting_set_default(s, &o);
    setting_format_display(s, &o, buf, size);
}

/* "sgd 0.05, muon 0.02, lion 0.0003, normuon 0.02, others 0.001": the optimizers whose default differs from
 * the default optimizer's, then that one; just "1e-08" where none differs. */
static void format_optimizer_defaults(const nb_setting *s, char *buf, size_t size) {
    char own[64], v[64];
    const double usual = optimizer_default(s, -1);
    default_text(s, -1, own, sizeof own);
    buf[0] = 0;
    for (int k = 0; nb_optimizer_names(k); k++) {
        if (optimizer_default(s, k) == usual) continue;
        default_text(s, k, v, sizeof v);
        append(buf, size, "%s %s, ", nb_optimizer_names(k), v);
    }
    append(buf, size, buf[0] ? "others %s" : "%s", own);
}

/* "0.2", "sgd 0.05, muon 0.02, lion 0.0003, others 0.001", "0: off", "300; 0: no limit" */
static void format_default(const nb_setting *s, char *buf, size_t size) {
    char own[64];
    if (s->by_optimizer) {
        format_optimizer_defaults(s, buf, size);
        return;
    }
    default_text(s, -1, own, sizeof own);
    buf[0] = 0;
    if (s->type == NB_SET_STRING || (s->type == NB_SET_ENUM && s->def < 0)) snprintf(own, sizeof own, "none");
    if (s->type == NB_SET_BOOL) return;   /* a plain switch: off unless given */
    if (s->zero_means && !strcmp(own, "0")) append(buf, size, "0: %s", s->zero_means);
    else if (s->zero_means) append(buf, size, "%s; 0: %s", own, s->zero_means);
    else append(buf, size, "%s", own);
}

void nb_setting_help(const nb_setting *s, char *buf, size_t size) {
    char def[160];
    format_default(s, def, sizeof def);
    snprintf(buf, size, "%-6s %s", s->metavar ? s->metavar : "", s->help ? s->help : "");
    char names[256] = "";
    if (s->names) nb_names_join(s->names, " | ", names, sizeof names);
    if (s->type == NB_SET_DELAY) nb_delay_modes_text(" | ", " | ", names, sizeof names);
    if (names[0]) append(buf, size, ": %s", names);
    if (def[0]) append(buf, size, " (%s)", def);
    nb_range r;
    if (nb_setting_range(s, &r)) {
        char range[64];
        format_range(s, &r, range, sizeof range);
        append(buf, size, " %s", range);
    }
}

int nb_settings_check(const nb_train_options *o) {
    for (int i = 0; i < nb_settings_count; i++) {
        const nb_setting *s = &nb_settings[i];
        nb_range r;
        if (s->flag && s->type == NB_SET_ENUM) {   /* a name's value, or -1 (none) where that is the default */
            const int v = *(const int *)setting_field(s, o);
            if ((v == -1 && s->def == -1) || (v >= 0 && s->names(v))) continue;
            char list[256];
            nb_names_join(s->names, ", ", list, sizeof list);
            return nb_fail("%s %d: not a value of its names (expected one of %s%s)", s->flag, v, list,
                           s->def == -1 ? ", or -1 for none" : "");
        }
        if (s->flag && s->type == NB_SET_DELAY) {
            const nb_delay_mode m = ((const nb_delay_options *)setting_field(s, o))->mode;
            if (m != NB_DELAY_SYNC && m != NB_DELAY_2BW && m != NB_DELAY_PIPEDREAM && m != NB_DELAY_FIXED) {
                char modes[128];
                nb_delay_modes_text(", ", " or ", modes, sizeof modes);
                return nb_fail("%s: mode %d is not a delay (expected %s)", s->flag, (int)m, modes);
            }
        }
        if (!s->flag || !nb_setting_range(s, &r) || s->type == NB_SET_U64) continue;
        if (s->type == NB_SET_EF && !o->delay.ef) continue;
        const double x = number_of(s, o);
        if (nb_range_holds(&r, x)) continue;
        char text[64];
        nb_setting_format(s, o, text, sizeof text);
        if (s->type == NB_SET_FLOAT && !isfinite(x)) return malformed(s, s->flag, text);
        return out_of_range(&r, s->flag, text);
    }
    return 0;
}

/* nb_train_defaults: every row's default (here, with the code that sets a row's value, so that the
 * table's file stays data that this one reads). */
/* Model fields take their defaults from the preset, not from the table. */
static int is_model_field(const nb_setting *s) {
    return s->offset - offsetof(nb_train_options, model) < sizeof(nb_config);   /* unsigned: below wraps */
}

void nb_train_defaults(nb_train_options *o) {
    memset(o, 0, sizeof *o);
    nb_config_preset("tiny", &o->model);
    for (int i = 0; i < nb_settings_count; i++)
        if (!is_model_field(&nb_settings[i])) setting_set_default(&nb_settings[i], o);
    o->vocab_from_data = 1;
}
