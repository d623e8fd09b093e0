/* The GCIDE corpus (Debian's dict-gcide: a dictd database, gzip-compatible dictzip read with zlib)
 * as plain-text documents, one per dictionary entry. docs/data.md states the rules:
 * - the database's own header (00-database-* entries, the licence text) comes before the first
 *   entry and is skipped;
 * - an entry starts at a line in column 0 holding the headword and its pronunciation between
 *   backslashes (`Apple \Ap"ple\, n. ...`); every other line belongs to the current entry;
 * - markup: the pronunciation `\...\` is dropped, `{cross references}` lose their braces, source
 *   tags (`[1913 Webster]`, `[WordNet 1.5]`, `[PJC]`, ...) are dropped, GCIDE's bracketed
 *   character codes become letters (`[=a]` a, `['e]` e, `[ae]` ae, `[imac]` i, `[aum]` a,
 *   `[eth]` th; other letter-only codes such as `[root]` are dropped); labels such as `[Obs.]`
 *   and etymologies stay; lines lose their indentation and runs of blank lines become one. */
#define _GNU_SOURCE  /* memmem */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "data/input.h"
#include "nobubble/data.h"
#include "util/error.h"
#include "util/fs.h"
#include "util/json.h"

#define GCIDE_PACKAGE "dict-gcide"
#define GCIDE_MAX_BYTES ((size_t)1 << 30)  /* far above GCIDE's 40 MB: a bound on what a file may inflate to */

/* The whole file, inflated (gzip, dictzip or plain text). */
static int read_gz(const char *path, nb_buf *raw) {
    if (access(path, R_OK))
        return nb_fail("gcide corpus: cannot read %s: %s (install Debian's %s package: apt-get install %s; or pass "
                       "--gcide-file FILE)", path, strerror(errno), GCIDE_PACKAGE, GCIDE_PACKAGE);
    return nb_input_read(path, "gcide corpus:", GCIDE_MAX_BYTES, raw, NULL);
}

/* A headword line: in column 0, with a pronunciation " \...\" after the headword. Returns the
 * pronunciation's start (the space) and sets *end past its closing backslash, or NULL. */
static const char *pronunciation(const char *line, size_t len, size_t *end) {
    if (len == 0 || line[0] == ' ' || line[0] == '\t') return NULL;
    for (size_t i = 1; i + 1 < len; i++)
        if (line[i] == ' ' && line[i + 1] == '\\') {
            const char *close = memchr(line + i + 2, '\\', len - i - 2);
            if (!close) return NULL;
            *end = (size_t)(close - line) + 1;
            return line + i;
        }
    return NULL;
}

static int is_mark(char c) { return strchr("^'=.~\"`-,", c) != NULL; }
static int is_lower(char c) { return c >= 'a' && c <= 'z'; }

/* What a bracketed code [c] (n bytes) becomes; returns 0 when the bracket is not a code or a tag
 * (it is then kept as written), 1 when it was replaced (possibly by nothing). */
static int bracket_text(const char *c, size_t n, nb_buf *out) {
    if ((n >= 7 && memmem(c, n, "Webster", 7)) || (n >= 7 && memmem(c, n, "WordNet", 7)) ||
        (n >= 3 && memmem(c, n, "PJC", 3)))
        return 1;  /* a source tag */
    if (n == 0 || n > 6) return 0;
    int marks = 0;
    for (size_t i = 0; i < n; i++) {
        if (is_mark(c[i])) marks++;
        else if (!is_lower(c[i])) return 0;
    }
    if (marks == (int)n) return 0;
    if (marks) {  /* a letter with a diacritic: its letters */
        for (size_t i = 0; i < n; i++)
            if (is_lower(c[i]) && nb_buf_put(out, &c[i], 1)) return -1;
        return 1;
    }
    if ((n == 2 && (!memcmp(c, "ae", 2) || !memcmp(c, "oe", 2)))) return nb_buf_put(out, c, 2) ? -1 : 1;
    if ((n == 4 && !memcmp(c + 1, "mac", 3)) || (n == 3 && !memcmp(c + 1, "um", 2))) return nb_buf_put(out, c, 1) ? -1 : 1;
    if ((n == 3 && !memcmp(c, "eth", 3)) || (n == 5 && !memcmp(c, "thorn", 5))) return nb_buf_put(out, "th", 2) ? -1 : 1;
    return 1;  /* another character code ([root], [add], ...): dropped */
}

/* One line of an entry, markup stripped and indentation dropped, appended to out (with '\n'). */
static int clean_line(const char *line, size_t len, nb_buf *out) {
    size_t skip_to = len;
    const char *pron = pronunciation(line, len, &skip_to);
    size_t skip_from = pron ? (size_t)(pron - line) : len;
    size_t i = 0, start = out->n;
    while (i < len && (line[i] == ' ' || line[i] == '\t')) i++;
    while (i < len) {
        if (i == skip_from) { i = skip_to; continue; }
        char ch = line[i];
        const char *close = ch == '[' ? memchr(line + i + 1, ']', len - i - 1) : NULL;
        if (close) {
            int r = bracket_text(line + i + 1, (size_t)(close - line) - i - 1, out);
            if (r < 0) return -1;
            if (r) { i = (size_t)(close - line) + 1; continue; }
        }
        if (ch != '{' && ch != '}' && ch != '\r' && nb_buf_put(out, &ch, 1)) return -1;
        i++;
    }
    while (out->n > start && (out->p[out->n - 1] == ' ' || out->p[out->n - 1] == '\t')) out->n--;
    return nb_buf_put(out, "\n", 1);
}

/* Document offsets are kept as bytes in an nb_buf (malloc'ed, so aligned for size_t). */
static size_t n_offsets(const nb_buf *o) { return o->n / sizeof(size_t); }
static size_t last_offset(const nb_buf *o) { return ((const size_t *)(const void *)o->p)[n_offsets(o) - 1]; }
static int push_offset(nb_buf *o, size_t at) { return nb_buf_put(o, &at, sizeof at) ? nb_fail("out of memory") : 0; }

/* Ends the current document: its trailing newlines go, an empty one is dropped. */
static void close_doc(nb_buf *out, nb_buf *o) {
    while (out->n > last_offset(o) && out->p[out->n - 1] == '\n') out->n--;
    if (out->n == last_offset(o)) o->n -= sizeof(size_t);
}

int nb_gcide_parse(const char *raw, size_t n, char **text, size_t **doc_off, size_t *n_docs) {
    *text = NULL;
    *doc_off = NULL;
    *n_docs = 0;
    nb_buf out = {0}, o = {0};
    int rc = 0, blank = 0;
    for (size_t i = 0; i < n && !rc;) {
        const char *nl = memchr(raw + i, '\n', n - i);
        size_t len = nl ? (size_t)(nl - (raw + i)) : n - i, end;
        const char *line = raw + i;
        i += len + 1;
        if (pronunciation(line, len, &end)) {
            if (o.n) close_doc(&out, &o);
            rc = push_offset(&o, out.n);
            blank = 0;
        } else if (!o.n) {
            continue;  /* the database header before the first entry */
        }
        size_t before = out.n;
        if (!rc && clean_line(line, len, &out)) rc = nb_fail("out of memory");
        if (rc) break;
        int empty = out.n == before + 1;
        if (empty && (blank || out.n - 1 == last_offset(&o))) out.n = before;  /* one blank line at most */
        blank = empty;
    }
    if (!rc && o.n) close_doc(&out, &o);
    if (!rc && o.n == 0) rc = nb_fail("gcide corpus: no dictionary entries (expected lines like 'Apple \\Ap\"ple\\, n.')");
    if (!rc) rc = push_offset(&o, out.n);
    if (rc) {
        nb_buf_free(&out);
        nb_buf_free(&o);
        return -1;
    }
    *text = out.p ? out.p : calloc(1, 1);
    *doc_off = (size_t *)(void *)o.p;
    *n_docs = n_offsets(&o) - 1;
    return 0;
}

int nb_gcide_documents(const char *path, char **text, size_t **doc_off, size_t *n_docs) {
    nb_buf raw = {0};
    int rc = read_gz(path ? path : NB_GCIDE_PATH, &raw);
    if (!rc) rc = nb_gcide_parse(raw.p ? raw.p : "", raw.n, text, doc_off, n_docs);
    nb_buf_free(&raw);
    return rc;
}
