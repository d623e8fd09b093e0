/* One table per kind: every optimizer's descriptor is complete (a name of its own, defaults inside their
 * ranges, a rule with a step and uniquely named buffers, a round trip through the settings parser, a step
 * whose state is named after the descriptors), and every other kind's names (learning-rate schedules,
 * pipelines, transports, delays, precisions) are unique and parse back to their value. A new optimizer or
 * kind with a missing piece fails here, naming it. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "check.h"
#include "nobubble/delay.h"
#include "nobubble/optim.h"
#include "nobubble/pipeline.h"
#include "nobubble/runtime.h"
#include "nobubble/train.h"
#include "optim/rules.h"
#include "util/error.h"
#include "util/range.h"

static int same(const char *a, const char *b) { return a && b && !strcmp(a, b); }

/* A name a flag's value and a checkpoint's key can hold: lowercase letters, digits, '_'. */
static int plain_name(const char *s) {
    if (!s || !*s) return 0;
    for (; *s; s++)
        if (!(islower((unsigned char)*s) || isdigit((unsigned char)*s) || *s == '_')) return 0;
    return 1;
}

/* names(0), names(1), ... until NULL: plain, unique, and parse(name) gives the value back. */
static void check_names(const char *kind, nb_names_fn names, int (*parse)(const char *, int *)) {
    int n = 0;
    for (; names(n) && n < 64; n++) {
        CHECK(plain_name(names(n)), "%s %d: the name '%s' is plain", kind, n, names(n));
        for (int j = 0; j < n; j++) CHECK(!same(names(j), names(n)), "%s: '%s' twice", kind, names(n));
        int v = -1;
        CHECK(!parse(names(n), &v) && v == n, "%s '%s' parses to %d (got %d: %s)", kind, names(n), n, v,
              nb_last_error());
    }
    CHECK(n > 0 && n < 64 && !names(-1), "%s: names 0..%d, then NULL", kind, n - 1);
    int v;
    CHECK(parse("no-such-name", &v) && strstr(nb_last_error(), names(0)), "%s: an unknown name lists the known: %s",
          kind, nb_last_error());
}

static int parse_optimizer(const char *s, int *v) { return nb_optimizer_parse(s, (nb_optimizer_kind *)v); }
static int parse_schedule(const char *s, int *v) { return nb_schedule_parse(s, (nb_schedule_kind *)v); }
static int parse_pipeline(const char *s, int *v) { return nb_pipe_kind_parse(s, (nb_pipe_kind *)v); }
static int parse_transport(const char *s, int *v) { return nb_transport_parse(s, (nb_transport_kind *)v); }
static int parse_delay(const char *s, int *v) {
    nb_delay_options o = {0};
    const int rc = nb_delay_parse(s, &o);
    *v = (int)o.mode;
    return rc;
}
/* --delay's names: the modes but fixed, which takes its TAU ("fixed:TAU", checked below). */
static const char *delay_names(int i) {
    return i >= 0 && i < NB_DELAY_FIXED ? nb_delay_mode_name((nb_delay_mode)i) : NULL;
}
/* --precision's, through the settings table (the model part has no parser of its own). */
static int parse_precision(const char *s, int *v) {
    nb_train_options o;
    nb_settings_args a;
    nb_train_defaults(&o);
    nb_settings_begin(&a, &o);
    const int rc = nb_settings_arg(&a, "--precision", s);
    *v = (int)o.precision;
    return rc;
}

static void test_kind_names(void) {
    check_names("optimizer", nb_optimizer_names, parse_optimizer);
    check_names("schedule", nb_schedule_names, parse_schedule);
    check_names("pipeline", nb_pipe_kind_names, parse_pipeline);
    check_names("transport", nb_transport_names, parse_transport);
    check_names("delay", delay_names, parse_delay);
    check_names("precision", nb_precision_names, parse_precision);
    nb_delay_options d = {0};
    CHECK(!nb_delay_parse("fixed:3", &d) && d.mode == NB_DELAY_FIXED && same(nb_delay_mode_name(d.mode), "fixed"),
          "--delay fixed:3");
    for (int k = 0; nb_pipe_kind_names(k); k++) {
        CHECK(!nb_delay_parse(nb_pipe_delay_name((nb_pipe_kind)k), &d), "pipeline %s: its delay %s is a --delay",
              nb_pipe_kind_names(k), nb_pipe_delay_name((nb_pipe_kind)k));
    }
}

/* Every range row: a flag that the settings table has, and a range that holds something. */
static void check_ranges(const char *part, const nb_range *table) {
    int n = 0;
    for (const nb_range *r = table; r->flag; r++, n++) {
        CHECK(!strncmp(r->flag, "--", 2) && nb_setting_by_flag(r->flag), "%s: %s is a flag of the settings table",
              part, r->flag);
        CHECK(r->min < r->max, "%s %s: an empty range", part, r->flag);
        for (const nb_range *q = table; q < r; q++)
            CHECK(q->offset != r->offset && !same(q->flag, r->flag), "%s: %s twice", part, r->flag);
    }
    CHECK(n > 0, "%s: a table of ranges", part);
}

/* The rule: a step, uniquely named buffers, and only a matrix rule runs per matrix. */
static void check_rule(const nb_optimizer_desc *d) {
    const nb_optim_rule *rule = d->rule;
    CHECK(rule && rule->step, "%s: a rule with a step function", d->name);
    if (!rule) return;
    int n = 0;
    while (n < MAX_BUFFERS && rule->buffers[n].name) n++;
    CHECK(n > 0, "%s: its rule keeps some state", d->name);
    for (int b = 0; b < n; b++) {
        const char *name = rule->buffers[b].name;
        int ok = name[0] != 0;
        for (const char *c = name; *c; c++) ok = ok && (isalnum((unsigned char)*c) || *c == '_');
        CHECK(ok, "%s: buffer %d's name '%s' is letters, digits and '_'", d->name, b, name);
        for (int c = 0; c < b; c++)
            CHECK(!same(rule->buffers[b].name, rule->buffers[c].name), "%s: buffer '%s' twice", d->name,
                  rule->buffers[b].name);
    }
    CHECK(!rule->per_matrix || rule->matrices_only, "%s: a per-matrix rule takes matrices only", d->name);
}

/* --optimizer NAME sets the descriptor's defaults and lr (--wd is nobubble train's own, 0.1). */
static void check_settings_round_trip(const nb_optimizer_desc *d, nb_optimizer_kind k) {
    nb_train_options o;
    nb_settings_args a;
    nb_train_defaults(&o);
    nb_settings_begin(&a, &o);
    if (nb_settings_arg(&a, "--optimizer", d->name) || nb_settings_finish(&a)) {
        CHECK(0, "--optimizer %s: %s", d->name, nb_last_error());
        return;
    }
    nb_optim_params want = d->defaults;
    want.weight_decay = o.optim.weight_decay;
    CHECK(o.optim.kind == k && !memcmp(&o.optim, &want, sizeof want), "--optimizer %s: the descriptor's defaults",
          d->name);
    CHECK(o.schedule.lr == d->lr && o.optim.weight_decay == 0.1f, "--optimizer %s: lr %g (its own %g), wd %g", d->name,
          o.schedule.lr, d->lr, o.optim.weight_decay);
    char text[64];
    nb_setting_format(nb_setting_by_name("optimizer"), &o, text, sizeof text);
    CHECK(same(text, d->name), "--optimizer %s: recorded as %s", d->name, text);
}

/* One step on a matrix, an embedding and a gain; the state's names come from the descriptors. */
static void check_step_and_state(const nb_optimizer_desc *d) {
    nb_tensor t[3] = {
        {.name = "w", .ndim = 2, .shape = {4, 6}, .offset = 0, .numel = 24, .group = NB_GROUP_MATRIX},
        {.name = "e", .ndim = 2, .shape = {5, 4}, .offset = 24, .numel = 20, .group = NB_GROUP_EMBED},
        {.name = "g", .ndim = 1, .shape = {4, 0}, .offset = 44, .numel = 4, .group = NB_GROUP_GAIN},
    };
    float g[48], w[48], step[48];
    for (int i = 0; i < 48; i++) {
        g[i] = (float)((i * 7) % 11) / 11.0f - 0.45f;
        w[i] = (float)((i * 5) % 13) / 13.0f - 0.5f;
    }
    nb_optim_params p = d->defaults;
    nb_optimizer *o = NULL;
    if (nb_optimizer_create(&o, &p, t, 3, 48, NULL) || nb_optimizer_step(o, g, w, 1e-3f, 1e-3f, step) ||
        nb_optimizer_step(o, g, w, 1e-3f, 1e-3f, step)) {
        CHECK(0, "%s: two steps: %s", d->name, nb_last_error());
        nb_optimizer_free(o);
        return;
    }
    for (int i = 0; i < nb_optimizer_state_count(o); i++) {
        const char *name;
        float *data;
        size_t numel;
        nb_optimizer_state(o, i, &name, &data, &numel);
        const char *colon = strchr(name, ':');
        const int aux = colon && strcmp(colon + 1, "w") && d->rule->matrices_only;
        const char *owner = aux ? "adamw" : d->name;
        CHECK(colon && !strncmp(name, owner, strlen(owner)) && name[strlen(owner)] == '.',
              "%s: state '%s' is named after %s", d->name, name, owner);
        for (int j = 0; j < i; j++) {
            const char *other;
            nb_optimizer_state(o, j, &other, &data, &numel);
            CHECK(!same(name, other), "%s: state '%s' twice", d->name, name);
        }
    }
    nb_optimizer_free(o);
}

static void test_optimizer_descriptors(void) {
    for (int k = 0; k < NB_OPT_COUNT; k++) {
        const nb_optimizer_desc *d = nb_optimizer_desc_of((nb_optimizer_kind)k);
        CHECK(d && plain_name(d->name), "optimizer %d: a descriptor with a name", k);
        if (!d || !d->name) continue;
        CHECK(same(nb_optimizer_name((nb_optimizer_kind)k), d->name), "%s: nb_optimizer_name", d->name);
        CHECK(d->defaults.kind == (nb_optimizer_kind)k, "%s: its defaults say its kind", d->name);
        CHECK(!nb_optim_validate(&d->defaults), "%s: its defaults lie in their ranges: %s", d->name, nb_last_error());
        nb_schedule s = {.lr = d->lr, .cooldown = 0.2f};
        CHECK(!nb_schedule_validate(&s), "%s: its lr %g lies in --lr's range: %s", d->name, d->lr, nb_last_error());
        check_rule(d);
        if (!d->rule || !d->rule->step) continue;
        check_settings_round_trip(d, (nb_optimizer_kind)k);
        check_step_and_state(d);
    }
    CHECK(!nb_optimizer_desc_of(NB_OPT_COUNT) && !nb_optimizer_desc_of((nb_optimizer_kind)-1),
          "no descriptor past the kinds");
    const nb_optimizer_desc *adamw = nb_optimizer_desc_of(NB_OPT_ADAMW);
    CHECK(adamw && adamw->rule && !adamw->rule->matrices_only, "adamw takes every tensor: it is the auxiliary rule");
}

int main(void) {
    test_kind_names();
    check_ranges("nb_optim_ranges", nb_optim_ranges);
    check_ranges("nb_schedule_ranges", nb_schedule_ranges);
    check_ranges("nb_delay_ranges", nb_delay_ranges);
    test_optimizer_descriptors();
    return check_summary();
}
