/* train --config FILE.yaml: the settings written by hand in YAML (Debian's libyaml reads it), as the JSON
 * file's: one mapping of keys to plain values. Each value becomes the JSON value a person means: a quoted
 * scalar a string, a plain one true, false, null or a number when it reads as one (YAML 1.2's core schema),
 * a string otherwise; and the JSON text goes through the JSON reader's rules (config_file.c). Nested
 * mappings, lists, anchors and aliases are refused naming the line. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>
#include <strings.h>
#include "train/settings/config_yaml.h"
#include "util/error.h"

/* .yaml or .yml, in any case (a file saved as CONFIG.YAML is YAML too) */
static int is_yaml_name(const char *name) {
    const size_t n = strlen(name);
    return (n > 5 && !strcasecmp(name + n - 5, ".yaml")) || (n > 4 && !strcasecmp(name + n - 4, ".yml"));
}

int train_config_is_yaml(const char *path) { return is_yaml_name(path); }

/* Whether v is a JSON number: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)? */
static int json_number(const char *v) {
    const char *p = v + (*v == '-');
    if (*p == '0') p++;
    else if (*p >= '1' && *p <= '9') while (*p >= '0' && *p <= '9') p++;
    else return 0;
    if (*p == '.') {
        if (!(*++p >= '0' && *p <= '9')) return 0;
        while (*p >= '0' && *p <= '9') p++;
    }
    if (*p == 'e' || *p == 'E') {
        p += (p[1] == '+' || p[1] == '-') ? 2 : 1;
        if (!(*p >= '0' && *p <= '9')) return 0;
        while (*p >= '0' && *p <= '9') p++;
    }
    return *p == 0;
}

/* A plain scalar as the JSON value it reads as; anything else a string (whose key then says what it
 * expected). */
static int put_plain(nb_buf *json, const char *v, size_t n) {
    if (!strcmp(v, "true") || !strcmp(v, "false") || !strcmp(v, "null") || json_number(v)) return nb_buf_put(json, v, n);
    return nb_buf_json_str(json, v, n);
}

static int refuse(const char *what, const yaml_event_t *e, const char *why) {
    return nb_fail("%s: line %zu: %s (expected KEY: VALUE lines, one mapping of plain values)", what,
                   (size_t)e->start_mark.line + 1, why);
}

/* The keys read so far and their lines: a key given twice is refused here, naming both YAML lines (the JSON
 * reader would name a place in the converted text). */
typedef struct {
    char **key;
    size_t *line, n;
} seen_keys;

static int note_key(seen_keys *k, const char *what, const char *key, size_t line) {
    for (size_t i = 0; i < k->n; i++)
        if (!strcmp(k->key[i], key))
            return nb_fail("%s: line %zu: the key \"%s\" given twice (first on line %zu)", what, line, key, k->line[i]);
    char **keys = realloc(k->key, sizeof *keys * (k->n + 1));
    if (keys) k->key = keys;
    size_t *lines = realloc(k->line, sizeof *lines * (k->n + 1));
    if (lines) k->line = lines;
    char *copy = strdup(key);
    if (!keys || !lines || !copy) {
        free(copy);
        return nb_fail("%s: out of memory reading its keys", what);
    }
    k->key[k->n] = copy, k->line[k->n++] = line;
    return 0;
}

static void free_keys(seen_keys *k) {
    for (size_t i = 0; i < k->n; i++) free(k->key[i]);
    free(k->key);
    free(k->line);
}

int train_config_yaml_to_json(const char *text, size_t n, const char *what, nb_buf *json) {
    yaml_parser_t p;
    yaml_event_t e;
    seen_keys keys = {0};
    if (!yaml_parser_initialize(&p)) return nb_fail("%s: libyaml could not start: out of memory", what);
    yaml_parser_set_input_string(&p, (const unsigned char *)text, n);
    int rc = 0, depth = 0, pairs = 0, want_key = 1, done = 0;
    while (!rc && !done) {
        if (!yaml_parser_parse(&p, &e)) {
            rc = nb_fail("%s: line %zu: not YAML: %s", what, (size_t)p.problem_mark.line + 1,
                         p.problem ? p.problem : "a syntax error");
            break;
        }
        switch (e.type) {
        case YAML_STREAM_START_EVENT: case YAML_DOCUMENT_START_EVENT: case YAML_DOCUMENT_END_EVENT: break;
        case YAML_STREAM_END_EVENT: done = 1; break;
        case YAML_MAPPING_START_EVENT:
            if (depth++) rc = refuse(what, &e, "a nested mapping");
            else rc = nb_buf_put(json, "{", 1);
            break;
        case YAML_MAPPING_END_EVENT: rc = nb_buf_put(json, "}", 1); break;
        case YAML_SCALAR_EVENT: {
            const char *v = (const char *)e.data.scalar.value;
            const size_t len = e.data.scalar.length;
            if (!depth) { rc = refuse(what, &e, "a value outside a mapping"); break; }
            if (e.data.scalar.anchor) { rc = refuse(what, &e, "an anchor"); break; }
            if (want_key)
                rc = note_key(&keys, what, v, (size_t)e.start_mark.line + 1) || (pairs++ && nb_buf_put(json, ", ", 2)) ||
                     nb_buf_json_str(json, v, len) || nb_buf_put(json, ": ", 2);
            else rc = e.data.scalar.style == YAML_PLAIN_SCALAR_STYLE ? put_plain(json, v, len) : nb_buf_json_str(json, v, len);
            want_key = !want_key;
            break;
        }
        case YAML_SEQUENCE_START_EVENT: rc = refuse(what, &e, "a list"); break;
        case YAML_ALIAS_EVENT: rc = refuse(what, &e, "an alias"); break;
        default: rc = refuse(what, &e, "an unexpected construct"); break;
        }
        yaml_event_delete(&e);
    }
    yaml_parser_delete(&p);
    free_keys(&keys);
    if (!rc && !depth) rc = nb_fail("%s: expected a YAML mapping of settings (KEY: VALUE lines)", what);
    return rc ? -1 : nb_buf_reserve(json, 1);
}
