/* JSON text: a growable byte buffer that writers fill, and a small reader (see json.h). */
#include "util/json.h"
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "util/error.h"
#include "util/fs.h"

/* ------------------------------------------------------------ buffers */
int nb_buf_reserve(nb_buf *b, size_t extra) {
    if (b->n + extra + 1 <= b->cap) return 0;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->n + extra + 1) cap *= 2;
    char *p = realloc(b->p, cap);
    if (!p) return nb_fail("out of memory (%zu bytes)", cap);
    b->p = p;
    b->cap = cap;
    return 0;
}

int nb_buf_put(nb_buf *b, const void *data, size_t n) {
    if (nb_buf_reserve(b, n)) return -1;
    if (n) memcpy(b->p + b->n, data, n);
    b->n += n;
    b->p[b->n] = 0;
    return 0;
}

int nb_buf_printf(nb_buf *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (k < 0) return nb_fail("formatting failed");
    if (nb_buf_reserve(b, (size_t)k)) return -1;
    va_start(ap, fmt);
    vsnprintf(b->p + b->n, (size_t)k + 1, fmt, ap);
    va_end(ap);
    b->n += (size_t)k;
    return 0;
}

int nb_buf_json_str(nb_buf *b, const char *s, size_t n) {
    if (nb_buf_put(b, "\"", 1)) return -1;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        int r;
        if (c == '"') r = nb_buf_put(b, "\\\"", 2);
        else if (c == '\\') r = nb_buf_put(b, "\\\\", 2);
        else if (c == '\n') r = nb_buf_put(b, "\\n", 2);
        else if (c == '\t') r = nb_buf_put(b, "\\t", 2);
        else if (c == '\r') r = nb_buf_put(b, "\\r", 2);
        else if (c < 0x20 || c == 0x7f) r = nb_buf_printf(b, "\\u%04x", c);
        else r = nb_buf_put(b, &s[i], 1);
        if (r) return -1;
    }
    return nb_buf_put(b, "\"", 1);
}

void nb_buf_free(nb_buf *b) {
    free(b->p);
    b->p = NULL;
    b->n = b->cap = 0;
}

/* ------------------------------------------------------------ JSON reader */
typedef struct { const char *s; size_t n, i; int depth; unsigned flags; nb_json_error *err; } jp;

/* Records where (p->i) and why the text is not JSON; the caller writes the message. */
static int jfail(jp *p, const char *msg) {
    size_t line = 1, column = 1;
    for (size_t k = 0; k < p->i && k < p->n; k++) {
        if (p->s[k] == '\n') line++, column = 1;
        else column++;
    }
    p->err->line = line;
    p->err->column = column;
    snprintf(p->err->text, sizeof p->err->text, "%s", msg);
    return -1;
}
static void jws(jp *p) {
    while (p->i < p->n && (p->s[p->i] == ' ' || p->s[p->i] == '\n' || p->s[p->i] == '\t' || p->s[p->i] == '\r')) p->i++;
}
static int jvalue(jp *p, nb_json *v);

static int hex4(jp *p, unsigned *u) {
    if (p->i + 4 > p->n) return jfail(p, "short \\u escape");
    *u = 0;
    for (int k = 0; k < 4; k++) {
        char c = p->s[p->i++];
        unsigned d = c >= '0' && c <= '9' ? (unsigned)(c - '0') : c >= 'a' && c <= 'f' ? (unsigned)(c - 'a' + 10)
                   : c >= 'A' && c <= 'F' ? (unsigned)(c - 'A' + 10) : 99;
        if (d == 99) return jfail(p, "bad hex digit in \\u escape");
        *u = *u * 16 + d;
    }
    return 0;
}

static int jstring(jp *p, char **out, size_t *len) {
    p->i++; /* opening quote */
    nb_buf b = {0};
    for (;;) {
        if (p->i >= p->n) { nb_buf_free(&b); return jfail(p, "unterminated string"); }
        unsigned char c = (unsigned char)p->s[p->i++];
        if (c == '"') break;
        if (c < 0x20) { nb_buf_free(&b); return jfail(p, "control character in string"); }
        if (c != '\\') { if (nb_buf_put(&b, &c, 1)) goto oom; continue; }
        if (p->i >= p->n) { nb_buf_free(&b); return jfail(p, "unterminated escape"); }
        char e = p->s[p->i++];
        char ch;
        switch (e) {
        case '"': ch = '"'; break;
        case '\\': ch = '\\'; break;
        case '/': ch = '/'; break;
        case 'b': ch = '\b'; break;
        case 'f': ch = '\f'; break;
        case 'n': ch = '\n'; break;
        case 'r': ch = '\r'; break;
        case 't': ch = '\t'; break;
        case 'u': {
            unsigned u;
            if (hex4(p, &u)) { nb_buf_free(&b); return -1; }
            if (u >= 0xD800 && u < 0xDC00 && p->i + 6 <= p->n && p->s[p->i] == '\\' && p->s[p->i + 1] == 'u') {
                size_t save = p->i;
                p->i += 2;
                unsigned lo;
                if (hex4(p, &lo)) { nb_buf_free(&b); return -1; }
                if (lo >= 0xDC00 && lo < 0xE000) u = 0x10000 + ((u - 0xD800) << 10) + (lo - 0xDC00);
                else p->i = save;
            }
            unsigned char o[4];
            int k;
            if (u < 0x80) { o[0] = (unsigned char)u; k = 1; }
            else if (u < 0x800) { o[0] = (unsigned char)(0xC0 | u >> 6); o[1] = (unsigned char)(0x80 | (u & 63)); k = 2; }
            else if (u < 0x10000) { o[0] = (unsigned char)(0xE0 | u >> 12); o[1] = (unsigned char)(0x80 | ((u >> 6) & 63)); o[2] = (unsigned char)(0x80 | (u & 63)); k = 3; }
            else { o[0] = (unsigned char)(0xF0 | u >> 18); o[1] = (unsigned char)(0x80 | ((u >> 12) & 63)); o[2] = (unsigned char)(0x80 | ((u >> 6) & 63)); o[3] = (unsigned char)(0x80 | (u & 63)); k = 4; }
            if (nb_buf_put(&b, o, (size_t)k)) goto oom;
            continue;
        }
        default: nb_buf_free(&b); return jfail(p, "unknown escape");
        }
        if (nb_buf_put(&b, &ch, 1)) goto oom;
    }
    if (!b.p && nb_buf_reserve(&b, 1)) goto oom;
    b.p[b.n] = 0;
    *out = b.p;
    *len = b.n;
    return 0;
oom:
    nb_buf_free(&b);
    return -1;
}

static int jpush(nb_json *v, size_t *cap) {
    if (v->n < *cap) return 0;
    size_t nc = *cap ? *cap * 2 : 8;
    nb_json *it = realloc(v->items, nc * sizeof *it);
    if (!it) return nb_fail("out of memory");
    v->items = it;
    if (v->type == NB_JOBJ) {
        char **k = realloc(v->keys, nc * sizeof *k);
        if (!k) return nb_fail("out of memory");
        v->keys = k;
    }
    *cap = nc;
    return 0;
}

/* A key and where it stands, for NB_JSON_UNIQUE_KEYS. */
typedef struct { const char *key; size_t at; } jkey;

static int jkey_cmp(const void *a, const void *b) {
    const jkey *x = a, *y = b;
    int c = strcmp(x->key, y->key);
    return c ? c : (x->at > y->at) - (x->at < y->at);
}

/* NB_JSON_UNIQUE_KEYS: the object's keys sorted (n log n, whatever a hostile file holds), the
 * earliest second use of a key, if any, is the error's place. */
static int unique_keys(jp *p, const nb_json *v, const size_t *key_at) {
    if (v->n < 2) return 0;
    jkey *k = malloc(v->n * sizeof *k);
    if (!k) return nb_fail("out of memory");
    for (size_t j = 0; j < v->n; j++) k[j] = (jkey){v->keys[j], key_at[j]};
    qsort(k, v->n, sizeof *k, jkey_cmp);
    size_t dup = (size_t)-1;
    const char *key = NULL;
    for (size_t j = 1; j < v->n; j++)
        if (!strcmp(k[j - 1].key, k[j].key) && k[j].at < dup) dup = k[j].at, key = k[j].key;
    free(k);
    if (dup == (size_t)-1) return 0;
    char msg[sizeof p->err->text];
    snprintf(msg, sizeof msg, "the key \"%.48s\" given twice in one object", key);
    p->i = dup;
    return jfail(p, msg);
}

static int jvalue(jp *p, nb_json *v) {
    memset(v, 0, sizeof *v);
    jws(p);
    v->at = p->i;
    if (p->i >= p->n) return jfail(p, "unexpected end");
    if (++p->depth > 200) return jfail(p, "nested too deeply");
    char c = p->s[p->i];
    int r = 0;
    if (c == '{' || c == '[') {
        v->type = c == '{' ? NB_JOBJ : NB_JARR;
        char close = c == '{' ? '}' : ']';
        size_t cap = 0, *key_at = NULL;   /* with NB_JSON_UNIQUE_KEYS: where each key stands */
        int unique = v->type == NB_JOBJ && (p->flags & NB_JSON_UNIQUE_KEYS);
        p->i++;
        jws(p);
        if (p->i < p->n && p->s[p->i] == close) { p->i++; p->depth--; v->len = p->i - v->at; return 0; }
        for (;;) {
            size_t old_cap = cap;
            if (jpush(v, &cap)) { r = -1; break; }
            if (unique && cap != old_cap) {
                size_t *grown = realloc(key_at, cap * sizeof *grown);
                if (!grown) { r = nb_fail("out of memory"); break; }
                key_at = grown;
            }
            char *key = NULL;
            if (v->type == NB_JOBJ) {
                jws(p);
                size_t kl, at = p->i;
                if (p->i >= p->n || p->s[p->i] != '"') { r = jfail(p, "expected a string key"); break; }
                if (jstring(p, &key, &kl)) { r = -1; break; }
                if (unique && strlen(key) != kl) { free(key); p->i = at; r = jfail(p, "a key holds \\u0000"); break; }
                if (unique) key_at[v->n] = at;
                jws(p);
                if (p->i >= p->n || p->s[p->i] != ':') { free(key); r = jfail(p, "expected ':'"); break; }
                p->i++;
                v->keys[v->n] = key;
            }
            if (jvalue(p, &v->items[v->n])) { free(key); nb_json_free(&v->items[v->n]); r = -1; break; }
            v->n++;
            jws(p);
            if (p->i < p->n && p->s[p->i] == ',') { p->i++; continue; }
            if (p->i < p->n && p->s[p->i] == close) { p->i++; r = unique ? unique_keys(p, v, key_at) : 0; break; }
            r = jfail(p, v->type == NB_JOBJ ? "expected ',' or '}'" : "expected ',' or ']'");
            break;
        }
        free(key_at);
    } else if (c == '"') {
        v->type = NB_JSTR;
        r = jstring(p, &v->str, &v->str_len);
    } else if (c == 't' && p->n - p->i >= 4 && !memcmp(p->s + p->i, "true", 4)) {
        v->type = NB_JBOOL; v->b = 1; p->i += 4;
    } else if (c == 'f' && p->n - p->i >= 5 && !memcmp(p->s + p->i, "false", 5)) {
        v->type = NB_JBOOL; p->i += 5;
    } else if (c == 'n' && p->n - p->i >= 4 && !memcmp(p->s + p->i, "null", 4)) {
        v->type = NB_JNULL; p->i += 4;
    } else if (c == '-' || (c >= '0' && c <= '9')) {
        size_t st = p->i;
        if (p->s[p->i] == '-') p->i++;
        int digits = 0, integral = 1;
        if (p->i + 1 < p->n && p->s[p->i] == '0' && p->s[p->i + 1] >= '0' && p->s[p->i + 1] <= '9')
            return jfail(p, "a number with a leading zero");
        while (p->i < p->n && p->s[p->i] >= '0' && p->s[p->i] <= '9') { p->i++; digits++; }
        if (!digits) return jfail(p, "bad number");
        if (p->i < p->n && p->s[p->i] == '.') {
            integral = 0;
            p->i++;
            int fd = 0;
            while (p->i < p->n && p->s[p->i] >= '0' && p->s[p->i] <= '9') { p->i++; fd++; }
            if (!fd) return jfail(p, "bad number");
        }
        if (p->i < p->n && (p->s[p->i] == 'e' || p->s[p->i] == 'E')) {
            integral = 0;
            p->i++;
            if (p->i < p->n && (p->s[p->i] == '+' || p->s[p->i] == '-')) p->i++;
            int ed = 0;
            while (p->i < p->n && p->s[p->i] >= '0' && p->s[p->i] <= '9') { p->i++; ed++; }
            if (!ed) return jfail(p, "bad number");
        }
        char tmp[64];
        size_t len = p->i - st;
        if (len >= sizeof tmp) return jfail(p, "number too long");
        memcpy(tmp, p->s + st, len);
        tmp[len] = 0;
        v->type = NB_JNUM;
        v->num = strtod(tmp, NULL);
        if (integral && digits <= 18) { v->is_int = 1; v->i = strtoll(tmp, NULL, 10); }
    } else {
        return jfail(p, "unexpected character");
    }
    p->depth--;
    if (r) nb_json_free(v);
    else v->len = p->i - v->at;
    return r;
}

int nb_json_read(const char *text, size_t len, nb_json *out, unsigned flags, nb_json_error *err) {
    jp p = {text, len, 0, 0, flags, err};
    err->line = err->column = 0;
    err->text[0] = 0;
    if (jvalue(&p, out)) return -1;
    jws(&p);
    if (p.i != p.n) {
        nb_json_free(out);
        return jfail(&p, "trailing characters after the value");
    }
    return 0;
}

static int parse_with(const char *text, size_t len, nb_json *out, const char *what, unsigned flags) {
    nb_json_error err;
    if (!nb_json_read(text, len, out, flags, &err)) return 0;
    if (!err.line) return -1;   /* out of memory, said */
    return nb_fail("%s: invalid JSON at line %zu: %s", what ? what : "JSON", err.line, err.text);
}

int nb_json_parse(const char *text, size_t len, nb_json *out, const char *what) {
    return parse_with(text, len, out, what, 0);
}

void nb_json_free(nb_json *v) {
    if (!v) return;
    for (size_t k = 0; k < v->n; k++) {
        nb_json_free(&v->items[k]);
        if (v->keys) free(v->keys[k]);
    }
    free(v->items);
    free(v->keys);
    free(v->str);
    memset(v, 0, sizeof *v);
}

const nb_json *nb_json_get(const nb_json *obj, const char *key) {
    if (!obj || obj->type != NB_JOBJ) return NULL;
    for (size_t k = 0; k < obj->n; k++)
        if (!strcmp(obj->keys[k], key)) return &obj->items[k];
    return NULL;
}

int nb_json_read_file(const char *path, const char *what, unsigned flags, nb_json *out) {
    char *text;
    size_t n;
    if (nb_fs_read_file(path, &text, &n, what)) return -1;
    int rc = parse_with(text, n, out, path, flags);
    free(text);
    return rc ? -1 : 0;
}
