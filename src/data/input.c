/* What prepare reads: input.h. */
#include "data/input.h"
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>
#include <zstd.h>
#include "util/error.h"
#include "util/fs.h"

enum { CHUNK = 1 << 16 };

static int too_large(const char *what, const char *path, size_t max_bytes) {
    return nb_fail("%s %s decompresses to more than %zu bytes", what, path, max_bytes);
}

/* Every gzip member in turn (a file may hold several, as `cat a.gz b.gz` makes). */
static int inflate_all(const char *what, const char *path, const unsigned char *in, size_t n, size_t max_bytes,
                       nb_buf *out) {
    z_stream z;
    memset(&z, 0, sizeof z);
    if (inflateInit2(&z, 16 + MAX_WBITS) != Z_OK) return nb_fail("%s %s: zlib could not start: out of memory", what, path);
    unsigned char chunk[CHUNK];
    size_t used = 0;
    int rc = 0;
    while (!rc) {
        const size_t left = n - used;
        z.next_in = (unsigned char *)in + used;
        z.avail_in = left > UINT32_MAX ? UINT32_MAX : (uInt)left;
        z.next_out = chunk;
        z.avail_out = sizeof chunk;
        const uInt before = z.avail_in;
        int st = inflate(&z, Z_NO_FLUSH);
        used += before - z.avail_in;
        const size_t got = sizeof chunk - z.avail_out;
        if (max_bytes && out->n + got > max_bytes) rc = too_large(what, path, max_bytes);
        else if (got && nb_buf_put(out, chunk, got)) rc = -1;
        else if (st == Z_STREAM_END) {
            if (used == n) break;
            if (n - used < 2 || in[used] != 0x1f || in[used + 1] != 0x8b)
                break;  /* trailing bytes that are no gzip member: as gzip(1), ignored */
            inflateReset(&z);
        } else if (st == Z_BUF_ERROR && got == 0) {  /* no progress: the input ended inside a member */
            rc = used == n ? nb_fail("%s %s: the gzip stream is truncated (it ends before its last member does)", what, path)
                           : nb_fail("%s %s: not a valid gzip stream (%zu bytes in)", what, path, used);
        } else if (st != Z_OK && st != Z_BUF_ERROR) {
            rc = nb_fail("%s %s: not a valid gzip stream (%s, %zu bytes in)", what, path, z.msg ? z.msg : "zlib error", used);
        }
    }
    inflateEnd(&z);
    return rc;
}

/* Every zstd frame in turn. */
static int unzstd_all(const char *what, const char *path, const unsigned char *in, size_t n, size_t max_bytes,
                      nb_buf *out) {
    ZSTD_DCtx *d = ZSTD_createDCtx();
    if (!d) return nb_fail("%s %s: zstd could not start: out of memory", what, path);
    unsigned char chunk[CHUNK];
    ZSTD_inBuffer src = {in, n, 0};
    size_t hint = 0;
    int rc = 0;
    for (;;) {
        ZSTD_outBuffer dst = {chunk, sizeof chunk, 0};
        hint = ZSTD_decompressStream(d, &dst, &src);
        if (ZSTD_isError(hint)) {
            rc = nb_fail("%s %s: not a valid zstd stream (%s, %zu bytes in)", what, path, ZSTD_getErrorName(hint), src.pos);
            break;
        }
        if (max_bytes && out->n + dst.pos > max_bytes) { rc = too_large(what, path, max_bytes); break; }
        if (dst.pos && nb_buf_put(out, chunk, dst.pos)) { rc = -1; break; }
        /* all input read and the output not full: the decoder holds nothing more back */
        if (src.pos == src.size && dst.pos < dst.size) break;
    }
    /* hint > 0 at the end: the last frame wanted more bytes than the file has */
    if (!rc && hint != 0) rc = nb_fail("%s %s: the zstd stream is truncated (its last frame is incomplete)", what, path);
    ZSTD_freeDCtx(d);
    return rc;
}

int nb_input_read(const char *path, const char *what, size_t max_bytes, nb_buf *out, const char **compression) {
    char *raw = NULL;
    size_t n = 0;
    if (nb_fs_read_file(path, &raw, &n, what)) return -1;
    const unsigned char *b = (const unsigned char *)raw;
    const size_t start = out->n;
    int rc;
    const char *kind = "none";
    if (n >= 2 && b[0] == 0x1f && b[1] == 0x8b) {
        kind = "gzip";
        rc = inflate_all(what, path, b, n, max_bytes, out);
    } else if (n >= 4 && b[0] == 0x28 && b[1] == 0xb5 && b[2] == 0x2f && b[3] == 0xfd) {
        kind = "zstd";
        rc = unzstd_all(what, path, b, n, max_bytes, out);
    } else {
        rc = max_bytes && n > max_bytes ? nb_fail("%s %s is larger than %zu bytes", what, path, max_bytes)
                                        : nb_buf_put(out, raw, n);
    }
    free(raw);
    if (!rc && (rc = nb_buf_reserve(out, 1)) == 0) out->p[out->n] = 0;  /* NUL-terminated, even when empty */
    if (rc) out->n = start;
    if (compression) *compression = kind;
    return rc;
}

static int ends_with(const char *s, size_t n, const char *suffix) {
    const size_t k = strlen(suffix);
    return n >= k && !strncmp(s + n - k, suffix, k);
}

const char *nb_input_format_of(const char *path) {
    size_t n = strlen(path);
    if (ends_with(path, n, ".gz")) n -= 3;
    else if (ends_with(path, n, ".zst")) n -= 4;
    else if (ends_with(path, n, ".zstd")) n -= 5;
    return ends_with(path, n, ".jsonl") || ends_with(path, n, ".ndjson") ? "jsonl" : "text";
}

static int blank(const char *s, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (s[i] != ' ' && s[i] != '\t' && s[i] != '\r') return 0;
    return 1;
}

/* One line's document: 1 with its text appended (0 bytes: an empty text), 0 for a bad line (why says
 * what was wrong), -1 on a failure to allocate. */
static int line_document(const char *line, size_t len, const char *field, nb_buf *text, char *why, size_t size) {
    nb_json v;
    nb_json_error err;
    if (nb_json_read(line, len, &v, 0, &err)) {
        if (err.line == 0) return -1;
        snprintf(why, size, "not JSON at column %zu: %s", err.column, err.text);
        return 0;
    }
    int rc = 1;
    const nb_json *f = v.type == NB_JOBJ ? nb_json_get(&v, field) : NULL;
    if (v.type != NB_JOBJ) snprintf(why, size, "not a JSON object"), rc = 0;
    else if (!f) snprintf(why, size, "no member \"%s\" (--text-field)", field), rc = 0;
    else if (f->type != NB_JSTR) snprintf(why, size, "member \"%s\" is not a string", field), rc = 0;
    else if (f->str_len && nb_buf_put(text, f->str, f->str_len)) rc = -1;
    nb_json_free(&v);
    return rc;
}

int nb_jsonl_documents(const char *path, const char *data, size_t n, const char *field, int skip_bad, nb_buf *text,
                       size_t **offs, size_t *n_docs, size_t *bad) {
    size_t cap = 1024, count = 0, line_no = 0, i = 0;
    size_t *o = malloc(sizeof(size_t) * cap);
    if (!o) return nb_fail("out of memory reading %s", path);
    o[0] = text->n;
    *bad = 0;
    while (i < n) {
        const char *end = memchr(data + i, '\n', n - i);
        const size_t len = end ? (size_t)(end - (data + i)) : n - i;
        line_no++;
        if (!blank(data + i, len)) {
            char why[160];
            const size_t before = text->n;
            int got = line_document(data + i, len, field, text, why, sizeof why);
            if (got < 0) { free(o); return -1; }
            if (!got && !skip_bad) {
                free(o);
                return nb_fail("--input %s, line %zu: %s (--skip-bad-lines skips such lines)", path, line_no, why);
            }
            if (!got) (*bad)++;
            if (got && text->n > before) {
                if (count + 2 > cap) {
                    size_t *g = realloc(o, sizeof(size_t) * (cap *= 2));
                    if (!g) { free(o); return nb_fail("out of memory reading %s", path); }
                    o = g;
                }
                o[++count] = text->n;
            }
        }
        i += len + (end ? 1 : 0);
    }
    *offs = o;
    *n_docs = count;
    return 0;
}
