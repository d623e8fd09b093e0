/* The settings table (train.h): its rows are well-formed, every flag round-trips from the parser
 * through nb_train_options into summary.json and a checkpoint's run metadata, a resume applies each
 * row's policy, and --help, docs/limits.md and docs/optimizers.md say what the table says. */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "check.h"
#include "nobubble/backend.h"
#include "nobubble/checkpoint.h"
#include "nobubble/optim.h"
#include "nobubble/pipeline.h"
#include "nobubble/runtime.h"
#include "nobubble/train.h"
#include "train/outputs/outputs.h"
#include "train/run/run_fields.h"
#include "train/settings/settings_value.h"
#include "util/error.h"
#include "util/json.h"
#include "util/range.h"

static int is_number(const nb_setting *s) {
    return s->type == NB_SET_INT || s->type == NB_SET_U64 || s->type == NB_SET_FLOAT || s->type == NB_SET_EF;
}

static int in_range(const nb_setting *s, double x) {
    nb_range r;
    nb_setting_range(s, &r);
    return (r.min_open ? x > r.min : x >= r.min) && (r.max_open ? x < r.max : x <= r.max);
}

/* The row's number in o (int, bool and float rows). */
static double number_in(const nb_setting *s, const nb_train_options *o) {
    const void *f = setting_field(s, o);
    return s->type == NB_SET_FLOAT ? *(const float *)f : s->type == NB_SET_INT || s->type == NB_SET_BOOL ? *(const int *)f : s->def;
}

/* The row's default under optimizer kind. */
static double default_under(const nb_setting *s, nb_optimizer_kind kind) {
    nb_train_options o;
    nb_train_defaults(&o);
    o.optim.kind = kind;
    setting_set_default(s, &o);
    return number_in(s, &o);
}

static int is_model_field(const nb_setting *s) { return s->offset < sizeof(nb_config); }   /* model: first */

static int same(const char *a, const char *b) { return a && b && !strcmp(a, b); }

/* ---- the table itself ---- */

static void test_rows_are_well_formed(void) {
    for (int i = 0; i < nb_settings_count; i++) {
        const nb_setting *s = &nb_settings[i];
        for (int j = 0; j < i; j++) {
            const nb_setting *t = &nb_settings[j];
            CHECK(strcmp(s->name, t->name), "%s: the name is used twice", s->name);
            CHECK(!s->flag || (!same(s->flag, t->flag) && !same(s->flag, t->off_flag)), "%s: flag used twice", s->flag);
            CHECK(!s->off_flag || (!same(s->off_flag, t->flag) && !same(s->off_flag, t->off_flag)), "%s twice",
                  s->off_flag);
            CHECK(!s->summary_key || !same(s->summary_key, t->summary_key), "summary key %s twice", s->summary_key);
            CHECK(!s->checkpoint_key || !same(s->checkpoint_key, t->checkpoint_key), "checkpoint key %s twice",
                  s->checkpoint_key);
        }
        if (!s->flag) continue;
        CHECK(nb_setting_by_flag(s->flag) == s, "%s: found by its flag", s->flag);
        CHECK(s->help && s->metavar, "%s: has a help line", s->flag);
        if (!is_number(s)) continue;
        CHECK(nb_setting_has_range(s), "%s: a number flag has a range", s->flag);
        if (s->type != NB_SET_EF && !s->by_optimizer)
            CHECK(in_range(s, s->def), "%s: the default %g lies in its range", s->flag, s->def);
        for (int k = 0; s->by_optimizer && k < NB_OPT_COUNT; k++)
            CHECK(in_range(s, default_under(s, (nb_optimizer_kind)k)), "%s: %s's default in range", s->flag,
                  nb_optimizer_name((nb_optimizer_kind)k));
    }
}

/* A row's range is the owning part's where its field lies in nb_optim_params, nb_schedule or nb_delay_options
 * (only --ef, --taylor there): the row gives none of its own, and the part's row names the same flag and
 * type. Per-optimizer defaults come from the descriptors: such a row sets --lr or an optimizer's field. */
static void test_ranges_of_the_parts(void) {
    const size_t optim = offsetof(nb_train_options, optim), schedule = offsetof(nb_train_options, schedule);
    for (int i = 0; i < nb_settings_count; i++) {
        const nb_setting *s = &nb_settings[i];
        if (!s->flag) continue;
        nb_range r;
        const int has = nb_setting_range(s, &r);
        const int in_optim = s->offset - optim < sizeof(nb_optim_params);
        const int in_schedule = s->offset - schedule < sizeof(nb_schedule);
        if (has && (in_optim || in_schedule || s->type == NB_SET_EF || !strcmp(s->name, "taylor"))) {
            CHECK(s->min > s->max, "%s: its range is its part's, not the row's", s->flag);
            CHECK(same(r.flag, s->flag), "%s: the part's range names %s", s->flag, r.flag);
            CHECK(r.integer == (s->type == NB_SET_INT), "%s: an integer range for an integer row", s->flag);
        }
        if (s->by_optimizer)
            CHECK(in_optim || s->offset == offsetof(nb_train_options, schedule.lr), "%s: by optimizer, but no field of "
                  "the optimizer's", s->flag);
    }
    for (const nb_range *r = nb_optim_ranges; r->flag; r++) {
        const nb_setting *s = nb_setting_by_flag(r->flag);
        CHECK(s && s->offset == optim + r->offset, "nb_optim_ranges' %s is the settings row of that field", r->flag);
    }
    /* The parts' bounds on step counts are the run's. */
    CHECK(nb_range_at(nb_schedule_ranges, offsetof(nb_schedule, warmup))->max == NB_TRAIN_MAX_STEPS &&
              nb_range_at(nb_optim_ranges, offsetof(nb_optim_params, precond_every))->max == NB_TRAIN_MAX_STEPS,
          "--warmup and --precond-every: at most NB_TRAIN_MAX_STEPS");
}

/* Enum rows name their values as the parts that own them do. */
static void test_enum_names(void) {
    const nb_setting *opt = nb_setting_by_name("optimizer"), *sched = nb_setting_by_name("schedule");
    const nb_setting *pipe = nb_setting_by_name("pipeline"), *tr = nb_setting_by_name("transport");
    for (int k = 0; k < NB_OPT_COUNT; k++)
        CHECK(same(opt->names(k), nb_optimizer_name((nb_optimizer_kind)k)), "optimizer %d", k);
    CHECK(!opt->names(NB_OPT_COUNT) && !opt->names(-1), "every optimizer, no more");
    for (int k = 0; k <= NB_SCHEDULE_CONSTANT; k++)
        CHECK(same(sched->names(k), nb_schedule_name((nb_schedule_kind)k)), "schedule %d", k);
    CHECK(!sched->names(NB_SCHEDULE_CONSTANT + 1), "every schedule, no more");
    for (int k = 0; k <= NB_PIPE_ZBH1; k++) CHECK(same(pipe->names(k), nb_pipe_kind_name((nb_pipe_kind)k)), "pipe %d", k);
    CHECK(!pipe->names(NB_PIPE_ZBH1 + 1), "--pipeline: the six kinds (not the sequential order)");
    /* every kind parses and the settings take it (interleaved and zbh1 run since issue 40) */
    nb_train_options o;
    nb_settings_args a;
    nb_train_defaults(&o);
    nb_settings_begin(&a, &o);
    CHECK(!nb_settings_arg(&a, "--pipeline", "interleaved") && !nb_settings_arg(&a, "--chunks", "3") &&
              !nb_settings_finish(&a) && o.pipeline == NB_PIPE_INTERLEAVED && o.chunks == 3,
          "--pipeline interleaved --chunks 3 is taken: %s", nb_last_error());
    for (int k = 0; k <= NB_TRANSPORT_MPI; k++)
        CHECK(same(tr->names(k), nb_transport_name((nb_transport_kind)k)), "transport %d", k);
    CHECK(!tr->names(NB_TRANSPORT_MPI + 1), "every transport, no more");
}

/* The table's per-optimizer defaults: the sheet's (nb_optim_defaults) and docs/optimizers.md's lrs. */
static void test_optimizer_defaults(void) {
    static const struct { const char *name; size_t at; } sheet[] = {
        {"beta1", offsetof(nb_optim_params, beta1)},       {"beta2", offsetof(nb_optim_params, beta2)},
        {"beta3", offsetof(nb_optim_params, beta3)},       {"momentum", offsetof(nb_optim_params, momentum)},
        {"eps", offsetof(nb_optim_params, eps)},           {"gamma", offsetof(nb_optim_params, gamma)},
        {"aux_beta1", offsetof(nb_optim_params, aux_beta1)}, {"aux_beta2", offsetof(nb_optim_params, aux_beta2)},
    };
    for (int k = 0; k < NB_OPT_COUNT; k++) {
        nb_train_options o;
        nb_settings_args a;
        nb_train_defaults(&o);
        nb_settings_begin(&a, &o);
        CHECK(!nb_settings_arg(&a, "--optimizer", nb_optimizer_name((nb_optimizer_kind)k)) && !nb_settings_finish(&a),
              "--optimizer %s", nb_optimizer_name((nb_optimizer_kind)k));
        nb_optim_params p = nb_optim_defaults((nb_optimizer_kind)k);
        for (size_t i = 0; i < sizeof sheet / sizeof sheet[0]; i++)
            CHECK(*(float *)((char *)&o.optim + sheet[i].at) == *(float *)((char *)&p + sheet[i].at),
                  "%s: %s as the sheet's", nb_optimizer_name((nb_optimizer_kind)k), sheet[i].name);
        CHECK(o.optim.nesterov == p.nesterov && o.optim.ns_steps == p.ns_steps &&
              o.optim.precond_every == p.precond_every && o.optim.max_precond_dim == p.max_precond_dim,
              "%s: the integer hyperparameters as the sheet's", nb_optimizer_name((nb_optimizer_kind)k));
        static const float lr[] = {0.05f, 1e-3f, 0.02f, 3e-4f, 1e-3f, 1e-3f, 1e-3f, 0.02f};
        _Static_assert(sizeof lr / sizeof lr[0] == NB_OPT_COUNT,
                       "one per optimizer: a new one needs its value here (docs/optimizers.md)");
        CHECK(o.schedule.lr == lr[k] && o.optim.weight_decay == 0.1f, "%s: lr %g, wd %g as docs/optimizers.md",
              nb_optimizer_name((nb_optimizer_kind)k), o.schedule.lr, o.optim.weight_decay);
    }
    /* The sentence the values above come from, whitespace folded. */
    size_t n;
    char *doc = (char *)check_slurp("docs/optimizers.md", &n), *w = doc;
    for (char *r = doc; r && *r; r++)
        if (!(*r == ' ' || *r == '\n') || (w > doc && w[-1] != ' ')) *w++ = *r == '\n' ? ' ' : *r;
    if (w) *w = 0;
    CHECK(doc && strstr(doc, "when `--lr` is not given: sgd 0.05; adamw, adan, mars, soap 1e-3; muon, normuon 0.02; lion 3e-4. "
                             "The default weight decay of `nobubble train` is 0.1 for every optimizer"),
          "docs/optimizers.md states the default learning rates and weight decay");
    free(doc);
}

/* ---- the round trip ---- */

/* A value of the row other than its default, as a flag's text. */
static void other_value(const nb_setting *s, char *buf, size_t size) {
    const double def = s->by_optimizer ? default_under(s, NB_OPT_ADAMW) : s->def;   /* adamw: the default */
    nb_range r;
    nb_setting_range(s, &r);
    switch (s->type) {
    case NB_SET_INT: snprintf(buf, size, "%d", (int)def + 1 <= r.max ? (int)def + 1 : (int)def - 1); break;
    case NB_SET_U64: snprintf(buf, size, "%llu", (unsigned long long)s->def + 7); break;
    case NB_SET_FLOAT: snprintf(buf, size, "%.9g", def != 0 ? def * 0.5 : r.max < 1 ? r.max * 0.5 : 0.25); break;
    case NB_SET_EF: snprintf(buf, size, "0.5"); break;
    case NB_SET_STRING: snprintf(buf, size, "dir \"%s\"\\*.bin", s->name); break;
    case NB_SET_ENUM: snprintf(buf, size, "%s", s->names(s->def < 0 ? 0 : (int)s->def + 1)); break;
    case NB_SET_DELAY: snprintf(buf, size, "fixed:3"); break;
    default: buf[0] = 0;
    }
}

/* Parses `flag value` (and what the row needs beside it) into defaults. */
static int parse_one(const nb_setting *s, const char *value, nb_train_options *o) {
    nb_settings_args a;
    nb_train_defaults(o);
    nb_settings_begin(&a, o);
    /* A boolean row is given as whichever flag moves it off its default (adamw: --nesterov). */
    const double def = s->by_optimizer ? default_under(s, NB_OPT_ADAMW) : s->def;
    const char *flag = s->type == NB_SET_BOOL && def != 0 ? s->off_flag : s->flag;
    if (s->type == NB_SET_ENUM && !strcmp(s->name, "transport") && nb_settings_arg(&a, "--pipeline", "2bw")) return -1;
    return nb_settings_arg(&a, flag, s->type == NB_SET_BOOL ? NULL : value) || nb_settings_finish(&a);
}

/* summary.json's value of the row, as the text nb_setting_format would give (numbers compared as such). */
static int summary_has(const nb_setting *s, const nb_json *root, const nb_train_options *o) {
    char section[32], want[4096];
    snprintf(section, sizeof section, "%.*s", (int)(strchr(s->summary_key, '.') - s->summary_key), s->summary_key);
    const nb_json *v = nb_json_get(nb_json_get(root, section), strchr(s->summary_key, '.') + 1);
    if (!v) return 0;
    nb_setting_format(s, o, want, sizeof want);
    switch (s->type) {
    case NB_SET_BOOL: return v->type == NB_JBOOL && v->b == atoi(want);
    case NB_SET_EF: return v->type == NB_JBOOL && v->b == o->delay.ef;
    case NB_SET_DELAY: return v->type == NB_JSTR && same(v->str, nb_delay_mode_name(o->delay.mode));
    case NB_SET_STRING: case NB_SET_ENUM: return v->type == NB_JSTR && same(v->str, want);
    case NB_SET_FLOAT: return v->type == NB_JNUM && (float)v->num == strtof(want, NULL);
    case NB_SET_DOUBLE: return v->type == NB_JNUM && v->num == strtod(want, NULL);
    default: return v->type == NB_JNUM && v->is_int && v->i == strtoll(want, NULL, 10);
    }
}

static int summary_round_trip(const nb_setting *s, nb_train_options o, const char *dir) {
    nb_train_result res = {.final_train_loss = 1.5, .final_val_loss = NAN, .weights_hash = 42};
    o.out_dir = dir;
    if (!o.train_pattern) o.train_pattern = "x";
    if (train_write_summary(&o, &res, o.seq_len ? o.seq_len : o.model.context, NULL)) return 0;
    char path[4200];
    snprintf(path, sizeof path, "%s/summary.json", dir);
    size_t n;
    char *text = (char *)check_slurp(path, &n);
    nb_json root;
    int ok = text && !nb_json_parse(text, n, &root, path);
    ok = ok && summary_has(s, &root, &o) && nb_json_get(&root, "final_val_loss")->type == NB_JNULL;
    if (text && ok) nb_json_free(&root);
    free(text);
    return ok;
}

/* A checkpoint's metadata written from o, read back: equal to o's, and a resume with the defaults
 * instead is refused (fixed), needs --override (override) or goes on (free), as the row says. */
static void checkpoint_round_trip(const nb_setting *s, const nb_train_options *o, const char *dir) {
    run_field f[RUN_FIELDS_MAX];
    int n = run_fields(o, o->stages, f);
    const char *meta[2 * RUN_FIELDS_MAX];
    char keys[RUN_FIELDS_MAX][80], path[4200];
    for (int i = 0; i < n; i++) {
        snprintf(keys[i], sizeof keys[i], "run.%s", f[i].key);
        meta[2 * i] = keys[i];
        meta[2 * i + 1] = f[i].value;
    }
    const float one = 1;
    nb_st_tensor t = {.name = "x", .ndim = 1, .shape = {1}, .data = &one};
    snprintf(path, sizeof path, "%s/state.safetensors", dir);
    nb_st_file file;
    if (nb_st_write(path, &t, 1, meta, n) || nb_st_open(path, &file)) {
        CHECK(0, "%s: write and open the metadata: %s", s->name, nb_last_error());
        return;
    }
    char value[4096], overridden[1024], key[80];
    nb_setting_format(s, o, value, sizeof value);
    snprintf(key, sizeof key, "run.%s", s->checkpoint_key);
    CHECK(same(nb_st_meta(&file, key), value), "%s: %s reads back as %s", s->name, key, value);
    nb_train_options same_run = *o, defaults = *o, d;
    same_run.resume_dir = "ck";
    CHECK(!run_fields_check(&file, &same_run, o->stages, NULL, overridden, sizeof overridden) && !overridden[0],
          "%s: the same run resumes without --override", s->name);
    /* The same run but for this row, back at its default. */
    nb_train_defaults(&d);
    if (is_model_field(s))
        memcpy((char *)&defaults + s->offset, (char *)&d + s->offset, s->type == NB_SET_DOUBLE ? sizeof(double) : sizeof(int));
    else
        setting_set_default(s, &defaults);
    defaults.resume_dir = "ck";
    const int refused = run_fields_check(&file, &defaults, defaults.stages, NULL, overridden, sizeof overridden);
    const char *why = nb_last_error();
    if (s->resume == NB_RESUME_FIXED) {
        CHECK(refused && strstr(why, "not even --override"), "%s (fixed): a change is refused: %s", s->name, why);
    } else if (s->resume == NB_RESUME_OVERRIDE) {
        CHECK(refused && strstr(why, "give --override"), "%s (override): refused without --override", s->name);
        defaults.resume_override = 1;
        CHECK(!run_fields_check(&file, &defaults, defaults.stages, NULL, overridden, sizeof overridden) &&
                  strstr(overridden, value), "%s: with --override, named in the warning: '%s'", s->name, overridden);
    } else {
        CHECK(!refused, "%s (free): a change goes on: %s", s->name, refused ? why : "");
    }
    nb_st_close(&file);
}

static void test_every_flag_round_trips(const char *dir) {
    for (int i = 0; i < nb_settings_count; i++) {
        const nb_setting *s = &nb_settings[i];
        if (!s->flag) continue;
        char text[256], before[4096], after[4096];
        nb_train_options o, d;
        other_value(s, text, sizeof text);
        nb_train_defaults(&d);
        if (parse_one(s, text, &o)) {
            CHECK(0, "%s %s: %s", s->flag, text, nb_last_error());
            continue;
        }
        nb_setting_format(s, &d, before, sizeof before);
        nb_setting_format(s, &o, after, sizeof after);
        CHECK(strcmp(before, after), "%s %s: the options changed from the default %s", s->flag, text, before);
        if (is_number(s)) CHECK(strtof(after, NULL) == strtof(text, NULL), "%s %s: read %s", s->flag, text, after);
        if (s->type == NB_SET_STRING || s->type == NB_SET_ENUM || s->type == NB_SET_DELAY)
            CHECK(same(after, text), "%s %s: read %s", s->flag, text, after);
        if (s->summary_key) CHECK(summary_round_trip(s, o, dir), "%s %s: summary.json has it", s->flag, text);
        if (s->checkpoint_key) checkpoint_round_trip(s, &o, dir);
    }
}

/* Model fields come from --set (nb_config_override) and go the same way. */
static void test_model_fields_round_trip(const char *dir) {
    for (int i = 0; i < nb_settings_count; i++) {
        const nb_setting *s = &nb_settings[i];
        if (s->flag || !is_model_field(s)) continue;
        nb_train_options o;
        nb_train_defaults(&o);
        char set[64];
        snprintf(set, sizeof set, "%s=%s", s->name, s->type == NB_SET_BOOL ? "0" : "12345");
        CHECK(!nb_config_override(&o.model, set), "--set %s", set);
        CHECK(summary_round_trip(s, o, dir), "--set %s: summary.json has it", set);
        if (s->checkpoint_key) checkpoint_round_trip(s, &o, dir);
    }
}

/* A boolean flag alone, or with =true, =false, =1, =0 (for the flag named: --no-nesterov=false is nesterov on);
 * any other value is refused naming it. */
static void test_boolean_values(void) {
    const nb_setting *row = nb_setting_by_flag("--nesterov");
    struct { const char *flag, *value, *want; } cases[] = {
        {"--nesterov", NULL, "1"},     {"--nesterov", "false", "0"}, {"--nesterov", "0", "0"},
        {"--nesterov", "true", "1"},   {"--no-nesterov", NULL, "0"}, {"--no-nesterov", "false", "1"},
        {"--no-nesterov", "1", "0"},
    };
    for (size_t i = 0; row && i < sizeof cases / sizeof cases[0]; i++) {
        nb_train_options o;
        nb_settings_args a;
        nb_train_defaults(&o);
        nb_settings_begin(&a, &o);
        char got[32] = "";
        const int rc = nb_settings_arg(&a, cases[i].flag, cases[i].value);
        if (!rc) nb_setting_format(row, &o, got, sizeof got);
        CHECK(!rc && !strcmp(got, cases[i].want), "%s=%s: nesterov %s, want %s (%s)", cases[i].flag,
              cases[i].value ? cases[i].value : "(alone)", got, cases[i].want, rc ? nb_last_error() : "ok");
    }
    nb_train_options o;
    nb_settings_args a;
    nb_train_defaults(&o);
    nb_settings_begin(&a, &o);
    CHECK(row && nb_settings_arg(&a, "--nesterov", "maybe") && strstr(nb_last_error(), "--nesterov=maybe: expected true"),
          "--nesterov=maybe refused: %s", nb_last_error());
}

/* tied, a yes/no model field, takes true and false as well as 1 and 0, and nothing else. */
static void test_tied_words(void) {
    nb_config c;
    nb_config_preset("tiny", &c);
    CHECK(!nb_config_override(&c, "tied=false") && c.tied == 0 && !nb_config_override(&c, "tied=true") && c.tied == 1 &&
              !nb_config_override(&c, "tied=0") && c.tied == 0,
          "tied=true, false and 0");
    CHECK(nb_config_override(&c, "tied=yes") && strstr(nb_last_error(), "tied"), "tied=yes refused: %s", nb_last_error());
}

/* The JSON writer escapes: a --train glob with a quote and a backslash reads back as given. */
static void test_summary_escapes(const char *dir) {
    nb_train_options o;
    nb_train_defaults(&o);
    o.train_pattern = "data/\"odd\"\\name*.bin";
    CHECK(summary_round_trip(nb_setting_by_name("train"), o, dir), "a quote and a backslash in --train");
}

/* ---- the parser's messages and the cross-field rules ---- */

static void expect_error(const char *flag, const char *value, const char *message) {
    nb_train_options o;
    nb_settings_args a;
    nb_train_defaults(&o);
    nb_settings_begin(&a, &o);
    int rc = nb_settings_arg(&a, flag, value) || nb_settings_finish(&a);
    CHECK(rc && strstr(nb_last_error(), message), "%s %s: expected '%s', got '%s'", flag, value ? value : "", message,
          rc ? nb_last_error() : "no error");
}

static void test_messages(void) {
    expect_error("--batch", "0", "--batch 0: out of range, expected an integer from 1 to 65536");
    expect_error("--steps", "99999999999999999999", "--steps 99999999999999999999: out of range");
    expect_error("--beta1", "1", "--beta1 1: out of range, expected a number in [0, 1)");
    expect_error("--lr", "0", "--lr 0: out of range, expected a number in (0, 1000000000]");
    expect_error("--lr", "nan", "--lr 'nan': expected a decimal number");
    expect_error("--lr", "0x10", "--lr '0x10': expected a decimal number");   /* strtof would read 16 */
    expect_error("--seed", "-1", "--seed '-1': expected a non-negative integer");
    expect_error("--optimizer", "adam", "--optimizer 'adam': expected one of sgd, adamw, muon, lion, adan, mars, soap, normuon");
    expect_error("--transport", "mpi", "--transport and mpirun need --pipeline KIND");
    nb_train_options o;
    nb_settings_args a;
    nb_train_defaults(&o);
    nb_settings_begin(&a, &o);
    CHECK(!nb_settings_arg(&a, "--nesterov", NULL) && nb_settings_arg(&a, "--no-nesterov", NULL) &&
              strstr(nb_last_error(), "give --nesterov or --no-nesterov, not both"), "--nesterov --no-nesterov");
    /* a flag that takes a value, given none (NULL: what nb_run_set gets for Python's batch=True): an error, not a crash */
    const char *valued[] = {"--batch", "--lr", "--seed", "--optimizer", "--delay", "--ef"};
    for (size_t i = 0; i < sizeof valued / sizeof *valued; i++) {
        nb_train_defaults(&o);
        nb_settings_begin(&a, &o);
        CHECK(nb_settings_arg(&a, valued[i], NULL) && strstr(nb_last_error(), valued[i]) &&
                  strstr(nb_last_error(), "expected a value"), "%s without its value", valued[i]);
    }
    nb_run *run = nb_run_new();
    CHECK(run && nb_run_set(run, "--batch", NULL) && strstr(nb_last_error(), "--batch: expected a value"),
          "nb_run_set --batch NULL");
    nb_run_free(run);
    nb_settings_begin(&a, &o);
    CHECK(!nb_settings_arg(&a, "--pipeline", "2bw") && !nb_settings_arg(&a, "--delay", "pipedream") &&
              nb_settings_finish(&a) && strstr(nb_last_error(), "--pipeline 2bw runs with the delay 2bw, not --delay pipedream"),
          "--pipeline and another --delay");
    nb_train_defaults(&o);
    nb_settings_begin(&a, &o);
    CHECK(!nb_settings_arg(&a, "--lr", "0.5") && !nb_settings_arg(&a, "--optimizer", "muon") && !nb_settings_finish(&a) &&
              o.schedule.lr == 0.5f && o.optim.momentum == 0.95f && o.optim.nesterov == 1,
          "a given --lr stays, whatever the order; muon's own defaults fill the rest");
    nb_train_defaults(&o);
    nb_settings_begin(&a, &o);
    CHECK(!nb_settings_arg(&a, "--ef", "0") && o.delay.ef == 1 && o.delay.ef_alpha == 0, "--ef 0: on, with alpha 0");
    nb_train_defaults(&o);
    o.batch = 0;
    CHECK(nb_settings_check(&o) && strstr(nb_last_error(), "--batch 0: out of range"), "nb_settings_check: the range");
    /* enum fields a caller of nb_train fills itself: a value no name has is refused, not run as the default */
    nb_train_defaults(&o);
    o.delay.mode = (nb_delay_mode)99;
    CHECK(nb_settings_check(&o) && strstr(nb_last_error(), "--delay: mode 99"), "nb_settings_check: delay mode 99");
    nb_train_defaults(&o);
    o.schedule.kind = (nb_schedule_kind)99;
    CHECK(nb_settings_check(&o) && strstr(nb_last_error(), "--schedule 99"), "nb_settings_check: schedule kind 99");
    nb_train_defaults(&o);
    o.transport = 99;
    CHECK(nb_settings_check(&o) && strstr(nb_last_error(), "--transport 99"), "nb_settings_check: transport 99");
    nb_train_defaults(&o);
    o.pipeline = -5;
    CHECK(nb_settings_check(&o) && strstr(nb_last_error(), "--pipeline -5"), "nb_settings_check: pipeline -5");
    nb_train_defaults(&o);
    CHECK(!nb_settings_check(&o), "nb_settings_check: the defaults (pipeline -1: none) pass");
}

/* ---- what the command line and the docs show ---- */

/* `nobubble train --help` has every flag's generated line: the parser has every row. */
static void test_help_shows_the_table(void) {
    const char *bin = getenv("NB_BIN");
    if (!bin) {
        CHECK(0, "NB_BIN is not set (ctest sets it to the nobubble binary)");
        return;
    }
    char cmd[4200], line[512];
    snprintf(cmd, sizeof cmd, "%s train --help", bin);
    FILE *p = popen(cmd, "r");
    static char help[65536];
    size_t n = p ? fread(help, 1, sizeof help - 1, p) : 0;
    help[n] = 0;
    if (p) pclose(p);
    for (int i = 0; i < nb_settings_count; i++) {
        const nb_setting *s = &nb_settings[i];
        if (!s->flag) continue;
        char want[300];
        if (s->offset == offsetof(nb_train_options, gemm)) {  /* the command writes the build's backends into it */
            snprintf(line, sizeof line, "\n  %-16s ", s->flag);
            const char *at = strstr(help, line), *end = at ? strchr(at + 1, '\n') : NULL;
            snprintf(want, sizeof want, "%.*s", end ? (int)(end - at) : 0, at ? at : "");
            CHECK(end && strstr(want, nb_backend_choices()), "--help's %s line names the build's backends (%s): '%s'",
                  s->flag, nb_backend_choices(), want);
            continue;
        }
        nb_setting_help(s, want, sizeof want);
        snprintf(line, sizeof line, "  %-16s %s\n", s->flag, want);
        CHECK(strstr(help, line) != NULL, "--help shows '%s'", line);
    }
}

/* "1 to 65536", "[0, 1)", "0 to 2^64-1" */
static void range_words(const nb_setting *s, char *buf, size_t size) {
    nb_range r;
    nb_setting_range(s, &r);
    if (s->type == NB_SET_U64) snprintf(buf, size, "0 to 2^64-1");
    else if (!r.min_open && !r.max_open) snprintf(buf, size, "%.10g to %.10g", r.min, r.max);
    else snprintf(buf, size, "%c%.10g, %.10g%c", r.min_open ? '(' : '[', r.min, r.max, r.max_open ? ')' : ']');
}

/* docs/limits.md has one line per flag with a range, as the table gives it. */
static void test_limits_doc(void) {
    size_t n;
    char *doc = (char *)check_slurp("docs/limits.md", &n);
    for (int i = 0; doc && i < nb_settings_count; i++) {
        const nb_setting *s = &nb_settings[i];
        if (!s->flag || !nb_setting_has_range(s)) continue;
        char words[96], line[200];
        range_words(s, words, sizeof words);
        snprintf(line, sizeof line, "| `%s` | %s |", s->flag, words);
        CHECK(strstr(doc, line) != NULL, "docs/limits.md lacks the line: %s", line);
    }
    CHECK(doc != NULL, "read docs/limits.md");
    free(doc);
}

/* The line of docs/checkpoints.md's resume table that ends with `ending`, or NULL. */
static char *doc_line(char *doc, const char *ending) {
    char *at = strstr(doc, ending);
    if (!at) return NULL;
    while (at > doc && at[-1] != '\n') at--;
    char *end = strchr(at, '\n');
    if (end) *end = 0;
    return at;
}

/* docs/checkpoints.md names each recorded setting in the row of its resume policy. */
static void test_checkpoints_doc(void) {
    size_t n;
    char *doc = (char *)check_slurp("docs/checkpoints.md", &n);
    char *copy = doc ? strdup(doc) : NULL;
    char *never = doc ? doc_line(doc, "| never: they fix the saved tensors' shapes") : NULL;
    char *override = copy ? doc_line(copy, "| only with `--override`, which prints") : NULL;
    CHECK(never && override, "docs/checkpoints.md has the resume table");
    for (int i = 0; never && override && i < nb_settings_count; i++) {
        const nb_setting *s = &nb_settings[i];
        if (!s->checkpoint_key || s->resume == NB_RESUME_SPLIT) continue;
        char name[64];
        if (s->flag) snprintf(name, sizeof name, "`%s`", s->flag);
        else snprintf(name, sizeof name, "`%s`", s->name);
        const char *line = s->resume == NB_RESUME_FIXED ? never : override;
        CHECK(strstr(line, name) != NULL, "docs/checkpoints.md: %s in the row of its policy", name);
    }
    free(doc);
    free(copy);
}

int main(void) {
    char dir[] = "/tmp/nb_test_settings_XXXXXX";
    if (!mkdtemp(dir)) return 1;
    test_rows_are_well_formed();
    test_ranges_of_the_parts();
    test_enum_names();
    test_optimizer_defaults();
    test_every_flag_round_trips(dir);
    test_model_fields_round_trip(dir);
    test_tied_words();
    test_boolean_values();
    test_summary_escapes(dir);
    test_messages();
    test_help_shows_the_table();
    test_limits_doc();
    test_checkpoints_doc();
    char cmd[200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    check_run(cmd);
    return check_summary();
}
