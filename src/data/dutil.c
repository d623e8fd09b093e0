#define _POSIX_C_SOURCE 200809L
#include "data/dutil.h"
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "util/error.h"
#include "util/fs.h"

/* ------------------------------------------------------------ buffers */
int nbd_buf_reserve(nbd_buf *b, size_t extra) {
    if (b->n + extra + 1 <= b->cap) return 0;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->n + extra + 1) cap *= 2;
    char *p = realloc(b->p, cap);
    if (!p) return nb_fail("out of memory (%zu bytes)", cap);
    b->p = p;
    b->cap = cap;
    return 0;
}

int nbd_buf_put(nbd_buf *b, const void *data, size_t n) {
    if (nbd_buf_reserve(b, n)) return -1;
    if (n) memcpy(b->p + b->n, data, n);
    b->n += n;
    b->p[b->n] = 0;
    return 0;
}

int nbd_buf_printf(nbd_buf *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (k < 0) return nb_fail("formatting failed");
    if (nbd_buf_reserve(b, (size_t)k)) return -1;
    va_start(ap, fmt);
    vsnprintf(b->p + b->n, (size_t)k + 1, fmt, ap);
    va_end(ap);
    b->n += (size_t)k;
    return 0;
}

int nbd_buf_json_str(nbd_buf *b, const char *s, size_t n) {
    if (nbd_buf_put(b, "\"", 1)) return -1;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        int r;
        if (c == '"') r = nbd_buf_put(b, "\\\"", 2);
        else if (c == '\\') r = nbd_buf_put(b, "\\\\", 2);
        else if (c == '\n') r = nbd_buf_put(b, "\\n", 2);
        else if (c == '\t') r = nbd_buf_put(b, "\\t", 2);
        else if (c == '\r') r = nbd_buf_put(b, "\\r", 2);
        else if (c < 0x20 || c == 0x7f) r = nbd_buf_printf(b, "\\u%04x", c);
        else r = nbd_buf_put(b, &s[i], 1);
        if (r) return -1;
    }
    return nbd_buf_put(b, "\"", 1);
}

void nbd_buf_free(nbd_buf *b) {
    free(b->p);
    b->p = NULL;
    b->n = b->cap = 0;
}

/* ------------------------------------------------------------ files */
char *nbd_dirname(const char *path) {
    const char *slash = strrchr(path, '/');
    if (!slash) return strdup(".");
    if (slash == path) return strdup("/");
    size_t n = (size_t)(slash - path);
    char *d = malloc(n + 1);
    if (!d) return NULL;
    memcpy(d, path, n);
    d[n] = 0;
    return d;
}

int nbd_fsync_dir(const char *dir) {
    int fd = open(dir, O_RDONLY);
    if (fd < 0) return nb_fail("%s: cannot open folder: %s", dir, strerror(errno));
    fsync(fd);  /* some file systems refuse fsync on folders: not an error */
    close(fd);
    return 0;
}

int nbd_afile_open(nbd_afile *a, const char *path) {
    memset(a, 0, sizeof *a);
    size_t n = strlen(path);
    a->path = strdup(path);
    a->tmp = malloc(n + 16);
    if (!a->path || !a->tmp) {
        free(a->path);
        free(a->tmp);
        return nb_fail("out of memory");
    }
    snprintf(a->tmp, n + 16, "%s.tmp.XXXXXX", path);
    int fd = mkstemp(a->tmp);
    if (fd < 0) {
        int e = errno;
        free(a->path);
        free(a->tmp);
        a->path = a->tmp = NULL;
        return nb_fail("%s: cannot create a temporary file next to it: %s", path, strerror(e));
    }
    fchmod(fd, 0644);
    a->f = fdopen(fd, "wb");
    if (!a->f) {
        close(fd);
        unlink(a->tmp);
        free(a->path);
        free(a->tmp);
        a->path = a->tmp = NULL;
        return nb_fail("%s: fdopen failed", path);
    }
    return 0;
}

void nbd_afile_abort(nbd_afile *a) {
    if (a->f) fclose(a->f);
    if (a->tmp) unlink(a->tmp);
    free(a->tmp);
    free(a->path);
    memset(a, 0, sizeof *a);
}

int nbd_afile_commit(nbd_afile *a) {
    int bad = ferror(a->f) || fflush(a->f) != 0 || fsync(fileno(a->f)) != 0;
    int e = errno;
    if (fclose(a->f) != 0) bad = 1;
    a->f = NULL;
    if (bad) {
        nb_fail("%s: write failed: %s", a->path, strerror(e));
        nbd_afile_abort(a);
        return -1;
    }
    if (rename(a->tmp, a->path) != 0) {
        nb_fail("%s: cannot rename the temporary file into place: %s", a->path, strerror(errno));
        nbd_afile_abort(a);
        return -1;
    }
    char *dir = nbd_dirname(a->path);
    if (dir) nbd_fsync_dir(dir);
    free(dir);
    free(a->tmp);
    free(a->path);
    memset(a, 0, sizeof *a);
    return 0;
}

int nbd_write_file_atomic(const char *path, const void *data, size_t n) {
    nbd_afile a;
    if (nbd_afile_open(&a, path)) return -1;
    if (n && fwrite(data, 1, n, a.f) != n) {
        nb_fail("%s: write failed: %s", path, strerror(errno));
        nbd_afile_abort(&a);
        return -1;
    }
    return nbd_afile_commit(&a);
}

int nbd_read_file(const char *path, char **data, size_t *n, const char *what) {
    const char *w = what ? what : "file";
    FILE *f = fopen(path, "rb");
    if (!f) return nb_fail("%s %s: cannot open: %s", w, path, strerror(errno));
    struct stat st;
    if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
        fclose(f);
        return nb_fail("%s %s: not a regular file", w, path);
    }
    size_t size = (size_t)st.st_size;
    char *p = malloc(size + 1);
    if (!p) {
        fclose(f);
        return nb_fail("%s %s: out of memory (%zu bytes)", w, path, size);
    }
    size_t got = fread(p, 1, size, f);
    int err = ferror(f);
    fclose(f);
    if (err || got != size) {
        free(p);
        return nb_fail("%s %s: read failed", w, path);
    }
    p[size] = 0;
    *data = p;
    *n = size;
    return 0;
}

int nbd_mkdir_p(const char *path) { return nb_fs_mkdirs(path, NULL); }

/* ------------------------------------------------------------ hashes, random, time */
uint64_t nbd_fnv1a(const void *data, size_t n, uint64_t h) {
    const unsigned char *p = data;
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 0x100000001b3ULL;
    return h;
}

uint64_t nbd_splitmix64(uint64_t *state) {
    uint64_t z = (*state += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

double nbd_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static const uint32_t K256[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

#define ROR(x, n) (((x) >> (n)) | ((x) << (32 - (n))))
static void sha256_block(uint32_t h[8], const uint8_t *p) {
    uint32_t w[64];
    for (int i = 0; i < 16; i++)
        w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 | (uint32_t)p[4 * i + 2] << 8 | p[4 * i + 3];
    for (int i = 16; i < 64; i++) {
        uint32_t s0 = ROR(w[i - 15], 7) ^ ROR(w[i - 15], 18) ^ (w[i - 15] >> 3);
        uint32_t s1 = ROR(w[i - 2], 17) ^ ROR(w[i - 2], 19) ^ (w[i - 2] >> 10);
        w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], hh = h[7];
    for (int i = 0; i < 64; i++) {
        uint32_t t1 = hh + (ROR(e, 6) ^ ROR(e, 11) ^ ROR(e, 25)) + ((e & f) ^ (~e & g)) + K256[i] + w[i];
        uint32_t t2 = (ROR(a, 2) ^ ROR(a, 13) ^ ROR(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
        hh = g; g = f; f = e; e = d + t1; d = c; c = b; b = a; a = t1 + t2;
    }
    h[0] += a; h[1] += b; h[2] += c; h[3] += d; h[4] += e; h[5] += f; h[6] += g; h[7] += hh;
}

void nbd_sha256(const void *data, size_t n, uint8_t out[32]) {
    uint32_t h[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    const uint8_t *p = data;
    size_t full = n / 64;
    for (size_t i = 0; i < full; i++) sha256_block(h, p + 64 * i);
    uint8_t tail[128] = {0};
    size_t rem = n - full * 64;
    if (rem) memcpy(tail, p + full * 64, rem);
    tail[rem] = 0x80;
    size_t tl = rem + 9 <= 64 ? 64 : 128;
    uint64_t bits = (uint64_t)n * 8;
    for (int i = 0; i < 8; i++) tail[tl - 1 - i] = (uint8_t)(bits >> (8 * i));
    sha256_block(h, tail);
    if (tl == 128) sha256_block(h, tail + 64);
    for (int i = 0; i < 8; i++) {
        out[4 * i] = (uint8_t)(h[i] >> 24);
        out[4 * i + 1] = (uint8_t)(h[i] >> 16);
        out[4 * i + 2] = (uint8_t)(h[i] >> 8);
        out[4 * i + 3] = (uint8_t)h[i];
    }
}

void nbd_sha256_hex(const void *data, size_t n, char hex[65]) {
    uint8_t d[32];
    nbd_sha256(data, n, d);
    for (int i = 0; i < 32; i++) snprintf(hex + 2 * i, 3, "%02x", d[i]);
}

/* ------------------------------------------------------------ JSON reader */
typedef struct { const char *s; size_t n, i; const char *what; int depth; } jp;

static int jfail(jp *p, const char *msg) {
    size_t line = 1;
    for (size_t k = 0; k < p->i && k < p->n; k++) line += p->s[k] == '\n';
    return nb_fail("%s: invalid JSON at line %zu: %s", p->what, line, msg);
}
static void jws(jp *p) {
    while (p->i < p->n && (p->s[p->i] == ' ' || p->s[p->i] == '\n' || p->s[p->i] == '\t' || p->s[p->i] == '\r')) p->i++;
}
static int jvalue(jp *p, nbd_json *v);

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
    nbd_buf b = {0};
    for (;;) {
        if (p->i >= p->n) { nbd_buf_free(&b); return jfail(p, "unterminated string"); }
        unsigned char c = (unsigned char)p->s[p->i++];
        if (c == '"') break;
        if (c < 0x20) { nbd_buf_free(&b); return jfail(p, "control character in string"); }
        if (c != '\\') { if (nbd_buf_put(&b, &c, 1)) goto oom; continue; }
        if (p->i >= p->n) { nbd_buf_free(&b); return jfail(p, "unterminated escape"); }
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
            if (hex4(p, &u)) { nbd_buf_free(&b); return -1; }
            if (u >= 0xD800 && u < 0xDC00 && p->i + 6 <= p->n && p->s[p->i] == '\\' && p->s[p->i + 1] == 'u') {
                size_t save = p->i;
                p->i += 2;
                unsigned lo;
                if (hex4(p, &lo)) { nbd_buf_free(&b); return -1; }
                if (lo >= 0xDC00 && lo < 0xE000) u = 0x10000 + ((u - 0xD800) << 10) + (lo - 0xDC00);
                else p->i = save;
            }
            unsigned char o[4];
            int k;
            if (u < 0x80) { o[0] = (unsigned char)u; k = 1; }
            else if (u < 0x800) { o[0] = (unsigned char)(0xC0 | u >> 6); o[1] = (unsigned char)(0x80 | (u & 63)); k = 2; }
            else if (u < 0x10000) { o[0] = (unsigned char)(0xE0 | u >> 12); o[1] = (unsigned char)(0x80 | ((u >> 6) & 63)); o[2] = (unsigned char)(0x80 | (u & 63)); k = 3; }
            else { o[0] = (unsigned char)(0xF0 | u >> 18); o[1] = (unsigned char)(0x80 | ((u >> 12) & 63)); o[2] = (unsigned char)(0x80 | ((u >> 6) & 63)); o[3] = (unsigned char)(0x80 | (u & 63)); k = 4; }
            if (nbd_buf_put(&b, o, (size_t)k)) goto oom;
            continue;
        }
        default: nbd_buf_free(&b); return jfail(p, "unknown escape");
        }
        if (nbd_buf_put(&b, &ch, 1)) goto oom;
    }
    if (!b.p && nbd_buf_reserve(&b, 1)) goto oom;
    b.p[b.n] = 0;
    *out = b.p;
    *len = b.n;
    return 0;
oom:
    nbd_buf_free(&b);
    return -1;
}

static int jpush(nbd_json *v, size_t *cap) {
    if (v->n < *cap) return 0;
    size_t nc = *cap ? *cap * 2 : 8;
    nbd_json *it = realloc(v->items, nc * sizeof *it);
    if (!it) return nb_fail("out of memory");
    v->items = it;
    if (v->type == NBD_JOBJ) {
        char **k = realloc(v->keys, nc * sizeof *k);
        if (!k) return nb_fail("out of memory");
        v->keys = k;
    }
    *cap = nc;
    return 0;
}

static int jvalue(jp *p, nbd_json *v) {
    memset(v, 0, sizeof *v);
    jws(p);
    if (p->i >= p->n) return jfail(p, "unexpected end");
    if (++p->depth > 200) return jfail(p, "nested too deeply");
    char c = p->s[p->i];
    int r = 0;
    if (c == '{' || c == '[') {
        v->type = c == '{' ? NBD_JOBJ : NBD_JARR;
        char close = c == '{' ? '}' : ']';
        size_t cap = 0;
        p->i++;
        jws(p);
        if (p->i < p->n && p->s[p->i] == close) { p->i++; p->depth--; return 0; }
        for (;;) {
            if (jpush(v, &cap)) { r = -1; break; }
            char *key = NULL;
            if (v->type == NBD_JOBJ) {
                jws(p);
                size_t kl;
                if (p->i >= p->n || p->s[p->i] != '"') { r = jfail(p, "expected a string key"); break; }
                if (jstring(p, &key, &kl)) { r = -1; break; }
                jws(p);
                if (p->i >= p->n || p->s[p->i] != ':') { free(key); r = jfail(p, "expected ':'"); break; }
                p->i++;
                v->keys[v->n] = key;
            }
            if (jvalue(p, &v->items[v->n])) { free(key); nbd_json_free(&v->items[v->n]); r = -1; break; }
            v->n++;
            jws(p);
            if (p->i < p->n && p->s[p->i] == ',') { p->i++; continue; }
            if (p->i < p->n && p->s[p->i] == close) { p->i++; break; }
            r = jfail(p, v->type == NBD_JOBJ ? "expected ',' or '}'" : "expected ',' or ']'");
            break;
        }
    } else if (c == '"') {
        v->type = NBD_JSTR;
        r = jstring(p, &v->str, &v->str_len);
    } else if (c == 't' && p->n - p->i >= 4 && !memcmp(p->s + p->i, "true", 4)) {
        v->type = NBD_JBOOL; v->b = 1; p->i += 4;
    } else if (c == 'f' && p->n - p->i >= 5 && !memcmp(p->s + p->i, "false", 5)) {
        v->type = NBD_JBOOL; p->i += 5;
    } else if (c == 'n' && p->n - p->i >= 4 && !memcmp(p->s + p->i, "null", 4)) {
        v->type = NBD_JNULL; p->i += 4;
    } else if (c == '-' || (c >= '0' && c <= '9')) {
        size_t st = p->i;
        if (p->s[p->i] == '-') p->i++;
        int digits = 0, integral = 1;
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
        v->type = NBD_JNUM;
        v->num = strtod(tmp, NULL);
        if (integral && digits <= 18) { v->is_int = 1; v->i = strtoll(tmp, NULL, 10); }
    } else {
        return jfail(p, "unexpected character");
    }
    p->depth--;
    if (r) nbd_json_free(v);
    return r;
}

int nbd_json_parse(const char *text, size_t len, nbd_json *out, const char *what) {
    jp p = {text, len, 0, what ? what : "JSON", 0};
    if (jvalue(&p, out)) return -1;
    jws(&p);
    if (p.i != p.n) {
        nbd_json_free(out);
        return jfail(&p, "trailing characters after the value");
    }
    return 0;
}

void nbd_json_free(nbd_json *v) {
    if (!v) return;
    for (size_t k = 0; k < v->n; k++) {
        nbd_json_free(&v->items[k]);
        if (v->keys) free(v->keys[k]);
    }
    free(v->items);
    free(v->keys);
    free(v->str);
    memset(v, 0, sizeof *v);
}

const nbd_json *nbd_json_get(const nbd_json *obj, const char *key) {
    if (!obj || obj->type != NBD_JOBJ) return NULL;
    for (size_t k = 0; k < obj->n; k++)
        if (!strcmp(obj->keys[k], key)) return &obj->items[k];
    return NULL;
}
