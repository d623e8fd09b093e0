/* train --config FILE: a run's settings as one JSON object, read with the project's JSON reader
 * (src/util/json.h; a key given twice is refused), and the resolved configuration every run writes
 * into its --out (NB_TRAIN_CONFIG_FILE) in the same form, so that --config of that file runs the same
 * computation again. Keys are the settings table's: a flag's name without "--" ("lr", "aux-lr"; the
 * row's name, "aux_lr", is taken too) and the model's fields ("n_layers"); values are typed as the row
 * says. Every value goes through the parser the flags use (nb_settings_arg), so the ranges and
 * messages are the table's; an integer goes as its digits in the file, exactly (a seed up to
 * 2^64 - 1 too). docs/config.md. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "nobubble/train.h"
#include "train/settings/config_file.h"
#include "train/settings/settings_value.h"
#include "util/error.h"
#include "util/fs.h"
#include "train/settings/config_yaml.h"
#include "util/json.h"

struct nb_train_config_file {
    nb_json root;        /* owns the strings that string settings point to */
    char **model_sets;   /* "FIELD=VALUE", applied by the caller after the model's preset */
    int n_model_sets;
};

/* A model field's row: no flag, a summary key under "model.". */
static int is_model_row(const nb_setting *s) {
    return !s->flag && s->summary_key && !strncmp(s->summary_key, "model.", 6);
}

/* What a key names: a row with a flag (by its flag without "--", or its name) or a model field. */
static const nb_setting *row_of_key(const char *key) {
    char flag[128];
    snprintf(flag, sizeof flag, "--%s", key);
    const nb_setting *s = nb_setting_by_flag(flag);
    if (s && !strcmp(s->flag, flag)) return s;   /* not an off flag such as --no-nesterov */
    s = nb_setting_by_name(key);
    return s && (s->flag || is_model_row(s)) ? s : NULL;
}

/* --resume, --override and --force: what one command does with the folders it is given, not how a
 * run computes; a file shared between runs must not carry them (a saved file would restart, or wipe,
 * whatever its "out" names). Kept out of the written file and refused in a read one. */
static int is_action_row(const nb_setting *s) {
    static const char *const actions[] = {"resume", "override", "force"};
    for (size_t i = 0; i < sizeof actions / sizeof actions[0]; i++)
        if (!strcmp(s->name, actions[i])) return 1;
    return 0;
}

/* A number written without a fraction or an exponent ("3", "-20"; not "3.0", "3e2"). */
static int is_integer(const char *text, const nb_json *v) {
    return v->type == NB_JNUM && !memchr(text + v->at, '.', v->len) && !memchr(text + v->at, 'e', v->len) &&
           !memchr(text + v->at, 'E', v->len);
}

static const char *json_kind(const char *text, const nb_json *v) {
    switch (v->type) {
    case NB_JOBJ: return "an object";
    case NB_JARR: return "an array";
    case NB_JSTR: return "a string";
    case NB_JNUM: return is_integer(text, v) ? "an integer" : "a number";
    case NB_JBOOL: return "a boolean";
    default: return "null";
    }
}

static const char *wanted_kind(const nb_setting *s) {
    switch (s->type) {
    case NB_SET_INT: return "an integer";
    case NB_SET_U64: return "a non-negative integer (or a string of its digits)";
    case NB_SET_FLOAT: case NB_SET_DOUBLE: case NB_SET_EF: return "a number";
    case NB_SET_BOOL: return "true or false";
    default: return "a string";
    }
}

/* The number's digits as the file writes them (an integer: exact, whatever its size). */
static void digits_of(const char *json, const nb_json *v, char *text, size_t size) {
    snprintf(text, size, "%.*s", (int)(v->len < size ? v->len : size - 1), json + v->at);
}

/* The value as the text its flag would take (into text), or -1 when its JSON type is not the row's.
 * json: the file's text, where a number's digits are. */
static int value_text(const nb_setting *s, const char *json, const nb_json *v, char *text, size_t size) {
    switch (s->type) {
    case NB_SET_INT:
        if (!is_integer(json, v)) return -1;
        digits_of(json, v, text, size);
        return 0;
    case NB_SET_U64:
        if (v->type == NB_JSTR && v->str[0] && strspn(v->str, "0123456789") == v->str_len) {
            snprintf(text, size, "%s", v->str);
            return 0;
        }
        if (!is_integer(json, v)) return -1;
        digits_of(json, v, text, size);
        return 0;
    case NB_SET_FLOAT: case NB_SET_DOUBLE: case NB_SET_EF:
        if (v->type != NB_JNUM) return -1;
        snprintf(text, size, "%.17g", v->num);
        return 0;
    case NB_SET_BOOL:
        if (v->type != NB_JBOOL) return -1;
        snprintf(text, size, "%d", v->b);
        return 0;
    default:
        if (v->type != NB_JSTR) return -1;
        snprintf(text, size, "%s", v->str);
        return 0;
    }
}

static int add_model_set(nb_train_config_file *f, const char *name, const char *text) {
    char **grown = realloc(f->model_sets, (size_t)(f->n_model_sets + 1) * sizeof *grown);
    if (!grown) return nb_fail("out of memory");
    f->model_sets = grown;
    size_t n = strlen(name) + strlen(text) + 2;
    if (!(f->model_sets[f->n_model_sets] = malloc(n))) return nb_fail("out of memory");
    snprintf(f->model_sets[f->n_model_sets++], n, "%s=%s", name, text);
    return 0;
}

/* One key: its row, its type, then the flags' parser (ranges, names) or, for a model field, kept for
 * the caller. given[row] becomes 2: set by the file (the command line, 1, may set it again). */
static int apply_key(nb_settings_args *a, nb_train_config_file *f, const char *name, const char *json, const char *key,
                     const nb_json *v) {
    const nb_setting *s = row_of_key(key);
    char text[4096];
    if (!s)
        return nb_fail("%s: unknown key \"%s\": expected a setting's name, as its flag without \"--\" (\"lr\", "
                       "\"aux-lr\") or a model field (\"n_layers\"); nobubble train --help lists them", name, key);
    if (is_action_row(s))
        return nb_fail("%s: \"%s\": %s is a decision of the command line, not a setting a file can carry; give "
                       "it as a flag", name, key, s->flag);
    if (value_text(s, json, v, text, sizeof text))
        return nb_fail("%s: \"%s\" is %s: expected %s", name, key, json_kind(json, v), wanted_kind(s));
    if (v->type == NB_JSTR && strlen(v->str) != v->str_len)
        return nb_fail("%s: \"%s\": the string holds \\u0000", name, key);
    if (is_model_row(s)) return add_model_set(f, s->name, text);
    unsigned char *given = &a->given[s - nb_settings];
    if (*given == 2)   /* "aux-lr" and "aux_lr": one setting under its two names, which the JSON reader cannot see */
        return nb_fail("%s: \"%s\": the setting %s is given twice in the file (as \"%s\" and \"%s\"): keep one", name,
                       key, s->flag, s->flag + 2, s->name);
    if (s->type == NB_SET_BOOL) {
        setting_set_number(s, a->o, v->b);
    } else if (nb_settings_arg(a, s->flag, s->type == NB_SET_STRING ? v->str : text)) {
        return nb_fail("%s: \"%s\": %s", name, key, nb_last_error());
    }
    *given = 2;
    return 0;
}

void nb_train_config_free(nb_train_config_file *f) {
    if (!f) return;
    for (int i = 0; i < f->n_model_sets; i++) free(f->model_sets[i]);
    free(f->model_sets);
    nb_json_free(&f->root);
    free(f);
}

int nb_settings_parse_config(nb_settings_args *a, const char *text, size_t n, const char *name,
                             nb_train_config_file **out) {
    *out = NULL;
    nb_json_error err;
    nb_train_config_file *f = calloc(1, sizeof *f);
    if (!f) return nb_fail("out of memory");
    int rc = nb_json_read(text, n, &f->root, NB_JSON_UNIQUE_KEYS, &err);
    if (rc && err.line)
        nb_fail("%s:%zu:%zu: not valid JSON: %s", name, err.line, err.column, err.text);
    else if (!rc && f->root.type != NB_JOBJ)
        rc = nb_fail("%s: the top level is %s: expected an object of settings ({\"lr\": 0.001, ...})", name,
                     json_kind(text, &f->root));
    for (size_t k = 0; !rc && k < f->root.n; k++)   /* in the file's order */
        rc = apply_key(a, f, name, text, f->root.keys[k], &f->root.items[k]);
    if (rc) {
        nb_train_config_free(f);
        return -1;
    }
    *out = f;
    return 0;
}

int nb_settings_read_config(nb_settings_args *a, const char *path, nb_train_config_file **out) {
    char *text, what[4200];
    size_t n;
    *out = NULL;
    snprintf(what, sizeof what, "--config %s", path);
    if (nb_fs_read_file(path, &text, &n, "--config")) return -1;
    nb_buf json = {0};
    int rc;
    if (train_config_is_yaml(path))   /* written by hand in YAML: the same settings as JSON's */
        rc = train_config_yaml_to_json(text, n, what, &json) ? -1 : nb_settings_parse_config(a, json.p, json.n, what, out);
    else
        rc = nb_settings_parse_config(a, text, n, what, out);
    nb_buf_free(&json);
    free(text);
    return rc;
}

int nb_train_config_model_count(const nb_train_config_file *f) { return f ? f->n_model_sets : 0; }
const char *nb_train_config_model_set(const nb_train_config_file *f, int i) { return f->model_sets[i]; }

/* ------------------------------------------------------------------ writing */
/* Whether a row goes into the written configuration: what the run computes and where it reads and
 * writes; not the one-off actions (--resume, --override, --force, --memory-check), nor the second halves of --delay
 * and --ef (their first halves carry them), nor what was left unset. */
static int written(const nb_setting *s, const nb_train_options *o) {
    /* --memory-check's override is not written either: --config of a run's own file checks again. */
    if ((!s->flag && !is_model_row(s)) || is_action_row(s) || !strcmp(s->name, "memory_check")) return 0;
    const void *f = setting_field(s, o);
    if (s->type == NB_SET_STRING) return *(const char *const *)f != NULL;
    if (s->type == NB_SET_EF) return ((const nb_delay_options *)f)->ef;
    if (s->type == NB_SET_ENUM) return *(const int *)f >= 0;
    return 1;
}

static int put_value(nb_buf *b, const nb_setting *s, const nb_train_options *o) {
    char text[4096];
    nb_setting_format(s, o, text, sizeof text);
    switch (s->type) {
    case NB_SET_BOOL: return nb_buf_printf(b, "%s", *(const int *)setting_field(s, o) ? "true" : "false");
    case NB_SET_INT: case NB_SET_U64: case NB_SET_FLOAT: case NB_SET_DOUBLE: case NB_SET_EF:
        return nb_buf_printf(b, "%s", text);
    default: return nb_buf_json_str(b, text, strlen(text));
    }
}

int train_write_config(const nb_train_options *o) {
    nb_buf b = {0};
    int rc = nb_buf_printf(&b, "{");
    int first = 1;
    for (int i = 0; i < nb_settings_count && !rc; i++) {
        const nb_setting *s = &nb_settings[i];
        if (!written(s, o)) continue;
        const char *key = s->flag ? s->flag + 2 : s->name;
        rc = nb_buf_printf(&b, "%s\n  ", first ? "" : ",") || nb_buf_json_str(&b, key, strlen(key)) ||
             nb_buf_printf(&b, ": ") || put_value(&b, s, o);
        first = 0;
    }
    rc = rc || nb_buf_printf(&b, "\n}\n");
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", o->out_dir, NB_TRAIN_CONFIG_FILE);
    if (!rc) rc = nb_fs_write_atomic(path, b.p, b.n);
    nb_buf_free(&b);
    return rc;
}
