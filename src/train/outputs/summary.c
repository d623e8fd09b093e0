/* summary.json: the run's settings, written from the settings table (each row with a summary key,
 * "SECTION.KEY"), then the results. One line per top-level member, each section on one line, so
 * that line tools (tests, sed) read it as easily as the JSON reader does. */
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include "backend/backend.h"
#include "nobubble/common.h"
#include "nobubble/train.h"
#include "train/outputs/outputs.h"
#include "train/settings/settings_value.h"
#include "util/fs.h"
#include "util/json.h"

static int put_str(nb_buf *b, const char *s) { return nb_buf_json_str(b, s, strlen(s)); }

/* One value as JSON: numbers as numbers, booleans (and --ef) as true/false, the rest as strings. */
static int put_value(nb_buf *b, const nb_setting *s, const nb_train_options *o) {
    const void *f = setting_field(s, o);
    char text[4096];
    nb_setting_format(s, o, text, sizeof text);
    switch (s->type) {
    case NB_SET_BOOL: return nb_buf_printf(b, "%s", *(const int *)f ? "true" : "false");
    case NB_SET_EF: return nb_buf_printf(b, "%s", ((const nb_delay_options *)f)->ef ? "true" : "false");
    case NB_SET_DELAY: return put_str(b, nb_delay_mode_name(((const nb_delay_options *)f)->mode));
    case NB_SET_STRING: case NB_SET_ENUM: return put_str(b, text);
    default:
        setting_format_display(s, o, text, sizeof text);
        return nb_buf_printf(b, "%s", text);
    }
}

/* `"SECTION": {"key": value, ...` over the rows of that section, in table order (without the closing brace). */
static int put_section(nb_buf *b, const char *section, const nb_train_options *o) {
    const size_t len = strlen(section);
    int rc = nb_buf_printf(b, "  \"%s\": {", section), first = 1;
    for (int i = 0; i < nb_settings_count && !rc; i++) {
        const nb_setting *s = &nb_settings[i];
        if (!s->summary_key || strncmp(s->summary_key, section, len) || s->summary_key[len] != '.') continue;
        rc = (!first && nb_buf_printf(b, ", ")) || put_str(b, s->summary_key + len + 1) || nb_buf_printf(b, ": ") ||
             put_value(b, s, o);
        first = 0;
    }
    return rc;
}

/* A loss, or null: a resumed run with no step left has none, and JSON has no NaN. */
static int put_loss(nb_buf *b, const char *key, double v) {
    if (isnan(v)) return nb_buf_printf(b, "  \"%s\": null,\n", key);
    return nb_buf_printf(b, "  \"%s\": %.9g,\n", key, v);
}

static int put_summary(nb_buf *b, const nb_train_options *o, const nb_train_result *res, const char *extra) {
    return nb_buf_printf(b, "{\n  \"nobubble\": \"%s\",\n", NB_VERSION) ||
           put_section(b, "model", o) || nb_buf_printf(b, "},\n") ||
           /* What the machine brought, not a setting: the threads. */
           put_section(b, "run", o) || nb_buf_printf(b, ", \"threads\": %d},\n", omp_get_max_threads()) ||
           put_section(b, "delay", o) || nb_buf_printf(b, "},\n") ||
           (extra && nb_buf_printf(b, "  %s,\n", extra)) ||
           put_loss(b, "final_train_loss", res->final_train_loss) ||
           put_loss(b, "final_val_loss", res->final_val_loss) ||
           nb_buf_printf(b, "  \"tokens_per_s\": %.1f,\n  \"seconds\": %.3f,\n  \"weights_hash\": \"%016llx\"\n}\n",
                         res->tokens_per_s, res->seconds, (unsigned long long)res->weights_hash);
}

int train_write_summary(const nb_train_options *o, const nb_train_result *res, int T, const char *extra) {
    nb_train_options run = *o;
    run.seq_len = T;   /* the sequence length the run used (--seq 0: the model's context) */
    nb_buf b = {0};
    char path[4096];
    snprintf(path, sizeof path, "%s/summary.json", o->out_dir);
    nb_afile a;
    int rc = put_summary(&b, &run, res, extra) || nb_afile_open(&a, path);
    if (rc) {
        nb_buf_free(&b);
        return -1;
    }
    fwrite(b.p, 1, b.n, a.f);
    nb_buf_free(&b);
    return nb_afile_commit(&a);   /* "PATH: write failed: ..." */
}
