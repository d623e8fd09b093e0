/* Internal: JSON text. A growable byte buffer that writers fill (with JSON string literals among
 * other text), and a tiny reader that gives a tree of values (config.json, manifests, grid files,
 * training state metadata, run summaries). */
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

/* The reader. Numbers are kept as double and, when integral, as int64 too. Strings are UTF-8
 * (\u escapes decoded, surrogate pairs joined). */
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
};
/* Parses text (len bytes); what names the source in errors. */
int nb_json_parse(const char *text, size_t len, nb_json *out, const char *what);
void nb_json_free(nb_json *v);
const nb_json *nb_json_get(const nb_json *obj, const char *key);   /* NULL when absent */
#endif
