/* Internal helpers of the data part: growable byte buffers, atomic files, SHA-256,
 * whole-file reads, folders. Prefixed nbd_ so they cannot collide with other parts. */
#ifndef NB_DATA_DUTIL_H
#define NB_DATA_DUTIL_H
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef struct { char *p; size_t n, cap; } nbd_buf;
int nbd_buf_reserve(nbd_buf *b, size_t extra);
int nbd_buf_put(nbd_buf *b, const void *data, size_t n);
int nbd_buf_printf(nbd_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Appends s as a JSON string literal (quotes and escapes; bytes >= 0x80 copied as they are). */
int nbd_buf_json_str(nbd_buf *b, const char *s, size_t n);
void nbd_buf_free(nbd_buf *b);

/* A file written under a temporary name in the same folder, then fsync'ed and renamed. */
typedef struct { FILE *f; char *tmp; char *path; } nbd_afile;
int nbd_afile_open(nbd_afile *a, const char *path);
int nbd_afile_commit(nbd_afile *a);    /* on failure the temporary file is removed */
void nbd_afile_abort(nbd_afile *a);
int nbd_write_file_atomic(const char *path, const void *data, size_t n);
int nbd_fsync_dir(const char *dir);    /* the folder holding path entries */
char *nbd_dirname(const char *path);   /* malloc'ed; "." when there is no slash */

/* Reads a whole file (NUL-terminated, *n excludes the NUL). what: how to name it in errors
 * (e.g. "--input"), may be NULL. */
int nbd_read_file(const char *path, char **data, size_t *n, const char *what);
int nbd_mkdir_p(const char *path);

void nbd_sha256(const void *data, size_t n, uint8_t out[32]);
void nbd_sha256_hex(const void *data, size_t n, char hex[65]);
uint64_t nbd_fnv1a(const void *data, size_t n, uint64_t h);
#define NBD_FNV_INIT 0xcbf29ce484222325ULL
uint64_t nbd_splitmix64(uint64_t *state);
double nbd_now(void);

/* A tiny JSON reader: a tree of values. Numbers are kept as double and, when integral, as
 * int64 too. Strings are UTF-8 (\u escapes decoded, surrogate pairs joined). */
typedef enum { NBD_JNULL, NBD_JBOOL, NBD_JNUM, NBD_JSTR, NBD_JARR, NBD_JOBJ } nbd_jtype;
typedef struct nbd_json nbd_json;
struct nbd_json {
    nbd_jtype type;
    int b;
    double num;
    int64_t i;
    int is_int;
    char *str; size_t str_len;       /* JSTR */
    nbd_json *items; size_t n;       /* JARR / JOBJ (values) */
    char **keys;                     /* JOBJ */
};
/* Parses text (len bytes); what names the source in errors. */
int nbd_json_parse(const char *text, size_t len, nbd_json *out, const char *what);
void nbd_json_free(nbd_json *v);
const nbd_json *nbd_json_get(const nbd_json *obj, const char *key);   /* NULL when absent */
#endif
