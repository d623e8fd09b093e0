/* Internal: JSON text. A growable byte buffer that writers fill (with JSON string literals among
 * other text), and the project's one JSON reader, which gives a tree of values (config.json,
 * manifests, tokenizer files, safetensors headers, training state metadata, run summaries, train
 * --config files). Why a reader of its own rather than Debian's Jansson: docs/architecture.md. */
#ifndef NB_UTIL_JSON_H
#define NB_UTIL_JSON_H
#include <stddef.h>
#include <stdint.h>

/* A growable buffer, always NUL-terminated once non-empty; errors through nb_fail. */
typedef struct { char *p; size_t n, cap; } nb_buf;
int nb_buf_reserve(nb_buf *b, size_t extra);
int nb_buf_put(nb_buf *b, const void *data, size_t n);
int nb_buf_printf(nb_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Appends s as a JSON string literal (quotes and escapes; bytes >= 0x80 copied as they are). */
int nb_buf_json_str(nb_buf *b, const char *s, size_t n);
void nb_buf_free(nb_buf *b);

/* The reader. Numbers are kept as double and, when integral, as int64 too; every value also keeps
 * where its text stands in the input (at, len), so that a reader can take a number's exact digits
 * (train --config hands them to the flags' decimal parser). Strings are UTF-8 (\u escapes decoded,
 * surrogate pairs joined). An object keeps its keys in the text's order; nb_json_get finds the
 * first of a key given twice (NB_JSON_UNIQUE_KEYS refuses such objects). */
typedef enum { NB_JNULL, NB_JBOOL, NB_JNUM, NB_JSTR, NB_JARR, NB_JOBJ } nb_jtype;
typedef struct nb_json nb_json;
struct nb_json {
    nb_jtype type;
    int b;
    double num;
    int64_t i;
    int is_int;
    char *str; size_t str_len;       /* JSTR */
    nb_json *items; size_t n;        /* JARR / JOBJ (values) */
    char **keys;                     /* JOBJ */
    size_t at, len;                  /* the value's text: text[at .. at + len) of the input */
};
/* Parses text (len bytes); what names the source in errors ("WHAT: invalid JSON at line N: why"). */
int nb_json_parse(const char *text, size_t len, nb_json *out, const char *what);
/* Reads the file at path (what: its role, for a read error, may be NULL) and parses it with the reader's
 * flags (NB_JSON_UNIQUE_KEYS, below); a parse error names the path. The reader of every JSON file a run or
 * a checkpoint folder holds. */
int nb_json_read_file(const char *path, const char *what, unsigned flags, nb_json *out);

/* Where and why text is not valid JSON: line and column (bytes) from 1, and what was wrong. */
typedef struct { size_t line, column; char text[96]; } nb_json_error;
/* Refuse an object that has a key twice, or a key holding \u0000 (what a key names must be one
 * thing): the error points at the second key. */
#define NB_JSON_UNIQUE_KEYS 1u
/* The reader underneath nb_json_parse, for a caller that writes its own message: on text that is
 * not valid JSON returns -1 with err filled and no message set; on a failure to allocate returns -1
 * with nb_fail's message and err->line 0. */
int nb_json_read(const char *text, size_t len, nb_json *out, unsigned flags, nb_json_error *err);
void nb_json_free(nb_json *v);
const nb_json *nb_json_get(const nb_json *obj, const char *key);   /* NULL when absent */
#endif
