/* The run's configuration as recorded in a checkpoint, and the rules for resuming with another
 * one (see run_fields.h and docs/checkpoints.md), from the settings table (settings.c). */
#include "train/run/run_fields.h"
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "nobubble/checkpoint.h"
#include "util/error.h"

/* How a resume treats the row under this run's delay. */
static run_field_kind kind_of(const nb_setting *s, const nb_train_options *o) {
    switch (s->resume) {
    case NB_RESUME_FIXED: return RUN_FIELD_FIXED;
    case NB_RESUME_OVERRIDE: return RUN_FIELD_OVERRIDE;
    case NB_RESUME_SPLIT: return o->delay.mode == NB_DELAY_PIPEDREAM ? RUN_FIELD_OVERRIDE : RUN_FIELD_FREE;
    default: return RUN_FIELD_FREE;
    }
}

/* Every row of the settings table with a checkpoint key, in table order. Messages name a row by its
 * flag, a model field as "model NAME". */
int run_fields(const nb_train_options *o, int n_stages, run_field *f) {
    nb_train_options run = *o;
    run.stages = n_stages;
    if (!run.seq_len) run.seq_len = o->model.context;   /* the length the run uses */
    int n = 0;
    for (int i = 0; i < nb_settings_count && n < RUN_FIELDS_MAX; i++) {
        const nb_setting *s = &nb_settings[i];
        if (!s->checkpoint_key) continue;
        run_field *x = &f[n++];
        x->key = s->checkpoint_key;
        x->setting = s;
        x->kind = kind_of(s, &run);
        nb_setting_format(s, &run, x->value, sizeof x->value);
    }
    return n;
}

/* "--lr", or "model d_model" for a model field (set with --set). */
static void shown_name(const run_field *x, char *buf, size_t size) {
    if (x->setting->flag) snprintf(buf, size, "%s", x->setting->flag);
    else snprintf(buf, size, "model %s", x->setting->name);
}

/* Appends "; FIELD VALUE (checkpoint: SAVED)" to a growing list. */
static void append_diff(char *list, size_t size, const run_field *x, const char *saved) {
    size_t at = strlen(list);
    char shown[64];
    shown_name(x, shown, sizeof shown);
    if (at < size)
        snprintf(list + at, size - at, "%s%s %s (checkpoint: %s)", at ? "; " : "", shown, x->value,
                 saved ? saved : "not recorded");
}

static int is_data_layout(const char *key) {
    return !strcmp(key, "batch") || !strcmp(key, "seq") || !strcmp(key, "data_seed");
}

int run_fields_check(const nb_st_file *f, const nb_train_options *o, int n_stages, const uint64_t *fingerprint,
                     char *overridden, size_t size) {
    run_field fields[RUN_FIELDS_MAX];
    int n = run_fields(o, n_stages, fields), data_same_shape = 1;
    char fixed[1024] = "", changed[1024] = "", key[64];
    for (int i = 0; i < n; i++) {
        if (fields[i].kind == RUN_FIELD_FREE) continue;
        snprintf(key, sizeof key, "run.%s", fields[i].key);
        const char *saved = nb_st_meta(f, key);
        if (!saved) saved = fields[i].setting->unrecorded;
        if (saved && !strcmp(saved, fields[i].value)) continue;
        if (is_data_layout(fields[i].key)) data_same_shape = 0;
        append_diff(fields[i].kind == RUN_FIELD_FIXED ? fixed : changed, sizeof fixed, &fields[i], saved);
    }
    /* The loader's fingerprint covers the shards' names and sizes besides batch, seq and data seed:
     * with those equal, a different fingerprint means other training data. */
    const char *fp = nb_st_meta(f, "loader_fingerprint");
    char now[32];
    if (fingerprint) snprintf(now, sizeof now, "%" PRIu64, *fingerprint);
    if (fingerprint && data_same_shape && (!fp || strcmp(fp, now))) {
        size_t at = strlen(changed);
        snprintf(changed + at, sizeof changed - at, "%straining data (the shards' names or sizes differ)", at ? "; " : "");
    }
    if (fixed[0])
        return nb_fail("--resume %s: the checkpoint cannot continue as this run: %s. These fix the saved tensors' "
                       "shapes; not even --override changes them", o->resume_dir, fixed);
    if (changed[0] && !o->resume_override)
        return nb_fail("--resume %s: this run's configuration differs from the checkpoint's: %s. Resume with the "
                       "checkpoint's values, or give --override to continue with these", o->resume_dir, changed);
    snprintf(overridden, size, "%s", changed);
    return 0;
}
