/* nobubble prepare: documents -> tokenizer -> train/val shards + manifest, written into a
 * temporary folder that is renamed into place at the end. docs/data.md states the rules. */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "util/json.h"
#include "util/hash.h"
#include "util/clock.h"
#include "data/input.h"
#include "nobubble/data.h"
#include "util/error.h"
#include "util/fs.h"

#define BIBLE_CMD "bible -f Gen1:1-Rev22:21"
#define BIBLE_DATA "/usr/lib/bible.data"
#define DEFAULT_SHARD_TOKENS 100000000u

void nb_prepare_defaults(nb_prepare_opts *o) {
    memset(o, 0, sizeof *o);
    o->vocab_size = 4096;
    o->val_fraction = 0.05;
    o->seed = 1337;
    o->verbose = 1;
}

/* ------------------------------------------------------------ the default corpus */
int nb_bible_documents(char **text, size_t **doc_off, size_t *n_docs) {
    *text = NULL;
    *doc_off = NULL;
    *n_docs = 0;
    FILE *p = popen(BIBLE_CMD " 2>/dev/null", "r");
    if (!p) return nb_fail("default corpus: cannot run `%s`: %s", BIBLE_CMD, strerror(errno));
    nb_buf out = {0}, raw = {0};
    char chunk[1 << 16];
    size_t got;
    while ((got = fread(chunk, 1, sizeof chunk, p)) > 0)
        if (nb_buf_put(&raw, chunk, got)) break;
    int st = pclose(p);
    if (st != 0 || raw.n < 1000000) {
        nb_buf_free(&raw);
        return nb_fail("default corpus: `%s` failed or printed too little (is Debian's bible-kjv package installed? "
                       "apt-get install bible-kjv; or pass --input FILE)", BIBLE_CMD);
    }
    /* Lines look like "Ge1:1 In the beginning ...", "1Sm3:4 ...": the reference, a space, the verse.
     * One document per chapter: its verses, one per line. */
    size_t *offs = NULL, n = 0, cap = 0;
    char prev_book[32] = "";
    long prev_ch = -1;
    int rc = 0;
    for (size_t i = 0; i < raw.n && !rc;) {
        size_t e = i;
        while (e < raw.n && raw.p[e] != '\n') e++;
        char *line = raw.p + i;
        size_t len = e - i;
        i = e + 1;
        if (len == 0) continue;
        char *sp = memchr(line, ' ', len);
        char *colon = sp ? memchr(line, ':', (size_t)(sp - line)) : NULL;
        if (!colon) { rc = nb_fail("default corpus: unexpected line from `%s`: %.40s", BIBLE_CMD, line); break; }
        char *d = colon;
        while (d > line && d[-1] >= '0' && d[-1] <= '9') d--;
        size_t bl = (size_t)(d - line);
        if (d == colon || bl == 0 || bl >= sizeof prev_book) {
            rc = nb_fail("default corpus: unexpected reference from `%s`: %.40s", BIBLE_CMD, line);
            break;
        }
        long ch = strtol(d, NULL, 10);
        if (ch != prev_ch || strncmp(prev_book, line, bl) || prev_book[bl]) {
            if (n + 2 > cap) {
                cap = cap ? cap * 2 : 2048;
                size_t *no = realloc(offs, cap * sizeof *no);
                if (!no) { rc = nb_fail("out of memory"); break; }
                offs = no;
            }
            offs[n++] = out.n;
            memcpy(prev_book, line, bl);
            prev_book[bl] = 0;
            prev_ch = ch;
        }
        size_t tl = len - (size_t)(sp + 1 - line);
        if (nb_buf_put(&out, sp + 1, tl) || nb_buf_put(&out, "\n", 1)) rc = -1;
    }
    nb_buf_free(&raw);
    if (rc || n == 0) {
        free(offs);
        nb_buf_free(&out);
        return rc ? rc : nb_fail("default corpus: no verses");
    }
    offs[n] = out.n;
    *text = out.p;
    *doc_off = offs;
    *n_docs = n;
    return 0;
}

/* ------------------------------------------------------------ documents */
typedef struct { const char *p; size_t n; int src; } doc_t;
typedef struct { doc_t *d; size_t n, cap; } docs_t;

static int docs_add(docs_t *ds, const char *p, size_t n, int src) {
    if (ds->n == ds->cap) {
        size_t nc = ds->cap ? ds->cap * 2 : 1024;
        doc_t *nd = realloc(ds->d, nc * sizeof *nd);
        if (!nd) return nb_fail("out of memory");
        ds->d = nd;
        ds->cap = nc;
    }
    ds->d[ds->n++] = (doc_t){p, n, src};
    return 0;
}

static int blank_line(const char *s, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (s[i] != ' ' && s[i] != '\t' && s[i] != '\r' && s[i] != '\f' && s[i] != '\v') return 0;
    return 1;
}

/* Paragraphs: maximal runs of non-blank lines (a blank line is empty or only whitespace).
 * A document is its lines' bytes, each with its newline (the last may lack one at EOF). */
static int split_paragraphs(const char *text, size_t n, int src, docs_t *ds, size_t *count) {
    size_t i = 0, start = 0;
    int in_par = 0;
    *count = 0;
    while (i < n) {
        size_t e = i;
        while (e < n && text[e] != '\n') e++;
        size_t next = e < n ? e + 1 : e;
        if (blank_line(text + i, e - i)) {
            if (in_par) {
                if (docs_add(ds, text + start, i - start, src)) return -1;
                (*count)++;
                in_par = 0;
            }
        } else if (!in_par) {
            in_par = 1;
            start = i;
        }
        i = next;
    }
    if (in_par) {
        if (docs_add(ds, text + start, n - start, src)) return -1;
        (*count)++;
    }
    return 0;
}

/* How one --input was read, for the manifest. */
typedef struct {
    const char *format, *compression;
    size_t bad_lines;  /* JSON Lines skipped with skip_bad_lines */
} input_info;

/* --format as given, or told by the input's name. */
static int input_format(const nb_prepare_opts *o, const char *path, const char **format) {
    if (!o->format || !strcmp(o->format, "auto")) *format = nb_input_format_of(path);
    else if (!strcmp(o->format, "text") || !strcmp(o->format, "jsonl")) *format = o->format;
    else return nb_fail("--format %s: expected text, jsonl or auto", o->format);
    return 0;
}

/* Input i's documents into ds: its bytes (decompressed) split into paragraphs, or its JSON Lines'
 * text members. *buf keeps the text the documents point into. */
static int input_documents(const nb_prepare_opts *o, int i, docs_t *ds, char **buf, size_t *bytes, size_t *count,
                           input_info *info) {
    const char *path = o->inputs[i], *field = o->text_field ? o->text_field : "text";
    nb_buf raw = {0};
    if (input_format(o, path, &info->format)) return -1;
    if (nb_input_read(path, "--input", 0, &raw, &info->compression)) {
        nb_buf_free(&raw);
        return -1;
    }
    *bytes = raw.n;
    if (raw.n == 0) {
        nb_buf_free(&raw);
        return nb_fail("--input %s is empty%s", path, strcmp(info->compression, "none") ? " once decompressed" : "");
    }
    if (!strcmp(info->format, "text")) {
        *buf = raw.p;
        if (split_paragraphs(raw.p, raw.n, i, ds, count)) return -1;
        return *count ? 0 : nb_fail("--input %s has no text (only blank lines)", path);
    }
    if (!*field) {
        nb_buf_free(&raw);
        return nb_fail("--text-field: expected the name of a string member of each line, not an empty name");
    }
    nb_buf text = {0};
    size_t *offs = NULL;
    int rc = nb_jsonl_documents(path, raw.p, raw.n, field, o->skip_bad_lines, &text, &offs, count, &info->bad_lines);
    nb_buf_free(&raw);
    *buf = text.p;
    for (size_t k = 0; !rc && k < *count; k++) rc = docs_add(ds, text.p + offs[k], offs[k + 1] - offs[k], i);
    free(offs);
    if (!rc && !*count)
        rc = nb_fail("--input %s has no documents: no line holds a non-empty string \"%s\" (--text-field)", path, field);
    return rc;
}

/* ------------------------------------------------------------ output folder */
static int any_name(const char *name) { return name != NULL; }

/* Removes a folder of files (a temporary, or the --out a new one replaced). Never through a symbolic
 * link: a replaced --out that was a link loses the link only, not the files it pointed to. */
static int remove_flat_dir(const char *dir) {
    struct stat st;
    if (nb_fs_is_link(dir)) return unlink(dir);
    if (nb_fs_remove_files(dir, NULL, 0, any_name, "folder")) return -1;
    return lstat(dir, &st) == 0 ? -1 : 0;
}

/* 0: absent, 1: replaceable (empty, or holds manifest.json), -1: error recorded */
static int check_out_dir(const char *out, int force) {
    struct stat st;
    if (stat(out, &st) != 0) return 0;
    if (!force) return nb_fail("--out %s already exists (use --force to replace it)", out);
    if (!S_ISDIR(st.st_mode)) return nb_fail("--out %s exists and is not a folder; not replacing it", out);
    DIR *d = opendir(out);
    if (!d) return nb_fail("--out %s: cannot read the folder: %s", out, strerror(errno));
    int entries = 0, manifest = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        entries++;
        if (!strcmp(e->d_name, "manifest.json")) manifest = 1;
    }
    closedir(d);
    if (entries && !manifest)
        return nb_fail("--out %s exists and is not a prepare output (no manifest.json): not replacing it even with "
                       "--force", out);
    return 1;
}

static char *path_join(const char *dir, const char *name) {
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = malloc(n);
    if (p) snprintf(p, n, "%s/%s", dir, name);
    return p;
}

/* ------------------------------------------------------------ shard writer */
typedef struct {
    const char *dir, *name, *split;
    int vocab;
    size_t shard_tokens;
    uint32_t *buf;
    size_t n, cap;
    int shards;
    size_t total;
    nb_buf list;  /* manifest entries */
} sink_t;

static int sink_flush(sink_t *s, size_t count) {
    char fname[512];
    snprintf(fname, sizeof fname, "%s_%s_%06d.bin", s->name, s->split, s->shards);
    char *path = path_join(s->dir, fname);
    if (!path) return nb_fail("out of memory");
    int r = nb_shard_write(path, s->buf, count, s->vocab);
    free(path);
    if (r) return -1;
    if (nb_buf_printf(&s->list, "%s\n      {\"file\": \"%s\", \"tokens\": %zu}", s->shards ? "," : "", fname, count))
        return -1;
    s->shards++;
    s->total += count;
    memmove(s->buf, s->buf + count, (s->n - count) * sizeof *s->buf);
    s->n -= count;
    return 0;
}

/* Appends EOT + the document's tokens, writing full shards as they fill. */
static int sink_doc(sink_t *s, nb_tokenizer *t, const char *p, size_t n) {
    if (s->n + n + 1 > s->cap) {
        size_t nc = s->cap ? s->cap : 1 << 20;
        while (nc < s->n + n + 1) nc *= 2;
        uint32_t *nb = realloc(s->buf, nc * sizeof *nb);
        if (!nb) return nb_fail("out of memory");
        s->buf = nb;
        s->cap = nc;
    }
    s->buf[s->n++] = (uint32_t)nb_tokenizer_eot(t);
    size_t m = nb_tokenizer_encode(t, p, n, s->buf + s->n);
    if (m == NB_ENCODE_FAILED) {
        char why[512];
        snprintf(why, sizeof why, "%s", nb_last_error());
        return nb_fail("tokenizing a %zu-byte document of the %s split: %s; nothing was written", n, s->split, why);
    }
    s->n += m;
    while (s->n >= s->shard_tokens)
        if (sink_flush(s, s->shard_tokens)) return -1;
    return 0;
}

typedef struct { double t0, last; size_t done, total; int verbose; } progress_t;

/* On a terminal one line rewritten in place; otherwise a line every 5 s and the last one. */
static void progress(progress_t *pr, int final) {
    if (!pr->verbose) return;
    int tty = isatty(2);
    double now = nb_now();
    if (!final && now - pr->last < (tty ? 0.2 : 5.0)) return;
    if (!final && pr->last == 0 && !tty) { pr->last = now; return; }
    pr->last = now;
    double el = now - pr->t0 > 1e-9 ? now - pr->t0 : 1e-9;
    fprintf(stderr, "%sencoding: %.1f/%.1f MB  %.1f MB/s%s", tty ? "\r" : "", pr->done / 1e6, pr->total / 1e6,
            pr->done / 1e6 / el, final || !tty ? "\n" : "");
}

/* ------------------------------------------------------------ prepare */
/* ------------------------------------------------------------ the built-in corpora */
int nb_corpus_check(const char *corpus) {
    if (!corpus || !strcmp(corpus, "bible") || !strcmp(corpus, "gcide") || !strcmp(corpus, "bible+gcide")) return 0;
    return nb_fail("--corpus '%s': expected bible, gcide or bible+gcide", corpus);
}

/* The parts of a corpus in order: bible, gcide or both; returns how many. */
static int corpus_parts(const char *corpus, const char **parts) {
    corpus = corpus ? corpus : "bible";
    int n = 0;
    if (strstr(corpus, "bible")) parts[n++] = "bible";
    if (strstr(corpus, "gcide")) parts[n++] = "gcide";
    return n;
}

/* One built-in part's documents, added to ds; texts[k] and offs[k] keep them alive. */
static int corpus_documents(const nb_prepare_opts *o, const char *part, docs_t *ds, char **text, size_t **off,
                            size_t *bytes, size_t *n_docs) {
    int rc = !strcmp(part, "bible") ? nb_bible_documents(text, off, n_docs)
                                     : nb_gcide_documents(o->gcide_path, text, off, n_docs);
    for (size_t i = 0; i < *n_docs && !rc; i++) rc = docs_add(ds, *text + (*off)[i], (*off)[i + 1] - (*off)[i], 0);
    if (!rc) *bytes = (*off)[*n_docs];
    return rc;
}

/* The manifest's entry for a built-in part. */
static int corpus_source(nb_buf *man, const nb_prepare_opts *o, const char *part, size_t bytes, size_t n_docs) {
    const char *path = !strcmp(part, "bible") ? BIBLE_DATA : o->gcide_path ? o->gcide_path : NB_GCIDE_PATH;
    struct stat st;
    long long size = stat(path, &st) == 0 ? (long long)st.st_size : -1;
    int rc = nb_buf_printf(man, "\n    {\"path\": ") || nb_buf_json_str(man, path, strlen(path));
    return rc || nb_buf_printf(man, ", \"bytes\": %lld, \"package\": \"%s\", \"extracted_with\": \"%s\", "
                               "\"text_bytes\": %zu, \"documents\": %zu}", size,
                               !strcmp(part, "bible") ? "bible-kjv" : "dict-gcide",
                               !strcmp(part, "bible") ? BIBLE_CMD : "zlib (dictzip is gzip)", bytes, n_docs);
}

int nb_prepare(const nb_prepare_opts *o, nb_prepare_stats *stats) {
    double t_start = nb_now();
    nb_prepare_stats st = {0};
    if (!o->out_dir || !*o->out_dir) return nb_fail("--out: an output folder is required");
    if (!o->tokenizer && o->vocab_size < NB_TOKENIZER_MIN_VOCAB)
        return nb_fail("--vocab %d is too small: at least %d (256 byte tokens + the end-of-text token)", o->vocab_size,
                       NB_TOKENIZER_MIN_VOCAB);
    if (!o->tokenizer && o->vocab_size > NB_TOKENIZER_MAX_VOCAB)
        return nb_fail("--vocab %d is too large (at most %d)", o->vocab_size, NB_TOKENIZER_MAX_VOCAB);
    if (!(o->val_fraction >= 0 && o->val_fraction < 1))
        return nb_fail("--val-fraction %g must be at least 0 and below 1", o->val_fraction);
    size_t shard_tokens = o->shard_tokens ? o->shard_tokens : DEFAULT_SHARD_TOKENS;
    if (shard_tokens > (size_t)INT32_MAX) return nb_fail("--shard-tokens %zu is too large (at most %d)", shard_tokens, INT32_MAX);

    /* the output folder, without trailing slashes */
    char *out = strdup(o->out_dir);
    if (!out) return nb_fail("out of memory");
    for (size_t l = strlen(out); l > 1 && out[l - 1] == '/'; l--) out[l - 1] = 0;
    /* The shards are named <name>_train_NNNNNN.bin inside --out: the name must not lead out of it. */
    if (o->name && nb_fs_check_name(o->name, "--name")) {
        free(out);
        return -1;
    }
    int rc = 0;
    int exists = check_out_dir(out, o->force);
    char **bufs = NULL;
    size_t *sizes = NULL;
    docs_t ds = {0};
    size_t *per_src = NULL, *corpus_off[2] = {NULL, NULL};
    input_info *info = NULL;
    const char *parts[2];
    char *corpus_text[2] = {NULL, NULL}, *parent = NULL, *tmp = NULL, *old = NULL, *name = NULL;
    nb_tokenizer *tok = NULL;
    unsigned char *is_val = NULL;
    size_t *order = NULL;
    sink_t sinks[2];
    memset(sinks, 0, sizeof sinks);
    nb_buf man = {0};
    if (!o->n_inputs && nb_corpus_check(o->corpus)) { free(out); return -1; }
    if (o->n_inputs && o->corpus) { free(out); return nb_fail("--corpus %s and --input: give one of them", o->corpus); }
    int n_parts = corpus_parts(o->corpus, parts);
    int n_src = o->n_inputs ? o->n_inputs : n_parts;
    if (exists < 0) { rc = -1; goto done; }

    /* 1. documents */
    bufs = calloc((size_t)n_src, sizeof *bufs);
    sizes = calloc((size_t)n_src, sizeof *sizes);
    per_src = calloc((size_t)n_src, sizeof *per_src);
    info = calloc((size_t)n_src, sizeof *info);
    if (!bufs || !sizes || !per_src || !info) { rc = nb_fail("out of memory"); goto done; }
    if (o->n_inputs == 0) {
        for (int k = 0; k < n_parts && !rc; k++)
            rc = corpus_documents(o, parts[k], &ds, &corpus_text[k], &corpus_off[k], &sizes[k], &per_src[k]);
    } else {
        for (int i = 0; i < o->n_inputs && !rc; i++)
            rc = input_documents(o, i, &ds, &bufs[i], &sizes[i], &per_src[i], &info[i]);
    }
    if (rc) goto done;
    for (int i = 0; i < n_src; i++) st.input_bytes += sizes[i];

    /* 2. validation documents: a seeded shuffle of the document indices, the first n_val */
    size_t n_val = (size_t)floor(o->val_fraction * (double)ds.n + 0.5);
    if (o->val_fraction > 0 && n_val == 0) n_val = 1;
    if (o->val_fraction > 0 && ds.n < 2) {
        rc = nb_fail("the input has %zu document (documents are separated by blank lines): a validation split needs at "
                     "least 2 (or pass --val-fraction 0)", ds.n);
        goto done;
    }
    if (n_val >= ds.n) n_val = ds.n - 1;
    is_val = calloc(ds.n, 1);
    order = malloc(ds.n * sizeof *order);
    if (!is_val || !order) { rc = nb_fail("out of memory"); goto done; }
    for (size_t i = 0; i < ds.n; i++) order[i] = i;
    uint64_t rs = o->seed;
    for (size_t i = ds.n - 1; i > 0; i--) {
        uint64_t bound = (uint64_t)i + 1, limit = UINT64_MAX - UINT64_MAX % bound, x;
        do x = nb_splitmix64(&rs); while (x >= limit);
        size_t j = (size_t)(x % bound), t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
    for (size_t i = 0; i < n_val; i++) is_val[order[i]] = 1;
    st.val_docs = n_val;
    st.train_docs = ds.n - n_val;

    /* 3. tokenizer */
    double t_tok = nb_now();
    if (o->tokenizer) {
        if (nb_tokenizer_load(&tok, o->tokenizer)) {
            char msg[1100];
            snprintf(msg, sizeof msg, "%s", nb_last_error());
            rc = nb_fail("--tokenizer: %s", msg);
            goto done;
        }
    } else {
        const char **dp = malloc((st.train_docs + 1) * sizeof *dp);
        size_t *dl = malloc((st.train_docs + 1) * sizeof *dl);
        if (!dp || !dl) { free(dp); free(dl); rc = nb_fail("out of memory"); goto done; }
        size_t k = 0;
        for (size_t i = 0; i < ds.n; i++)
            if (!is_val[i]) { dp[k] = ds.d[i].p; dl[k] = ds.d[i].n; k++; }
        rc = nb_tokenizer_train(&tok, dp, dl, k, o->vocab_size, o->verbose);
        free(dp);
        free(dl);
        if (rc) {
            char msg[1100];
            snprintf(msg, sizeof msg, "%s", nb_last_error());
            nb_fail("--vocab %d: %s", o->vocab_size, msg);
            goto done;
        }
    }
    st.seconds_tokenizer = nb_now() - t_tok;
    nb_tokenizer_special_as_text(tok, o->special_as_text);
    int vocab = nb_tokenizer_vocab_size(tok);

    /* 4. the temporary output folder */
    parent = nb_fs_dirname(out);
    const char *base = strrchr(out, '/') ? strrchr(out, '/') + 1 : out;
    if (!parent || nb_fs_mkdirs(parent, NULL)) { rc = parent ? -1 : nb_fail("out of memory"); goto done; }
    size_t tl = strlen(parent) + strlen(base) + 32;
    tmp = malloc(tl);
    if (!tmp) { rc = nb_fail("out of memory"); goto done; }
    snprintf(tmp, tl, "%s/.%s.tmp-XXXXXX", parent, base);
    if (!mkdtemp(tmp)) {
        rc = nb_fail("--out %s: cannot create a temporary folder in %s: %s", out, parent, strerror(errno));
        free(tmp);
        tmp = NULL;
        goto done;
    }
    chmod(tmp, 0755);

    /* 5. shards */
    if (o->name) name = strdup(o->name);
    else if (o->n_inputs == 0) name = strdup(n_parts == 2 ? "bible-gcide" : parts[0]);
    else {
        const char *b = strrchr(o->inputs[0], '/') ? strrchr(o->inputs[0], '/') + 1 : o->inputs[0];
        name = strdup(b);
        if (name) {
            char *dot = strrchr(name, '.');
            if (dot && dot != name) *dot = 0;
            for (char *c = name; *c; c++)
                if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') || *c == '-'))
                    *c = '_';
            if (!*name || strstr(name, "_val") || strstr(name, "_train")) { free(name); name = strdup("data"); }
        }
    }
    if (!name) { rc = nb_fail("out of memory"); goto done; }
    const char *split_names[2] = {"train", "val"};
    progress_t pr = {nb_now(), 0, 0, st.input_bytes, o->verbose};
    for (int sp = 0; sp < 2 && !rc; sp++) {
        sink_t *s = &sinks[sp];
        s->dir = tmp; s->name = name; s->split = split_names[sp]; s->vocab = vocab; s->shard_tokens = shard_tokens;
        for (size_t i = 0; i < ds.n && !rc; i++) {
            if (is_val[i] != sp) continue;
            rc = sink_doc(s, tok, ds.d[i].p, ds.d[i].n);
            pr.done += ds.d[i].n;
            progress(&pr, 0);
        }
        if (!rc && s->n) rc = sink_flush(s, s->n);
    }
    if (rc) goto done;
    progress(&pr, 1);
    st.train_tokens = sinks[0].total;
    st.val_tokens = sinks[1].total;
    st.train_shards = sinks[0].shards;
    st.val_shards = sinks[1].shards;

    /* 6. tokenizer.json and manifest.json */
    char *tp = path_join(tmp, "tokenizer.json");
    if (!tp) { rc = nb_fail("out of memory"); goto done; }
    rc = nb_tokenizer_save(tok, tp);
    free(tp);
    if (rc) goto done;
    char hash[65];
    if ((rc = nb_tokenizer_hash(tok, hash))) goto done;
    int u16 = vocab <= 65536;
    rc |= nb_buf_printf(&man, "{\n  \"format\": \"nobubble-prepare\",\n  \"version\": 1,\n  \"created_by\": \"nobubble %s\",\n"
                         "  \"name\": ", NB_VERSION);
    rc |= nb_buf_json_str(&man, name, strlen(name));
    rc |= nb_buf_printf(&man, ",\n  \"tokenizer\": {\"file\": \"tokenizer.json\", \"sha256\": \"%s\", \"vocab_size\": %d, "
                         "\"eot_id\": %d, \"special_tokens_in_text\": \"%s\", \"trained\": %s, \"reused_from\": ", hash,
                         vocab, nb_tokenizer_eot(tok), o->special_as_text ? "text" : "id", o->tokenizer ? "false" : "true");
    if (o->tokenizer) rc |= nb_buf_json_str(&man, o->tokenizer, strlen(o->tokenizer));
    else rc |= nb_buf_printf(&man, "null");
    rc |= nb_buf_printf(&man, "},\n  \"shard_format\": {\"magic\": %d, \"version\": %d, \"token_bytes\": %d},\n  \"sources\": [",
                         u16 ? NB_SHARD_MAGIC_U16 : NB_SHARD_MAGIC_U32, u16 ? NB_SHARD_VERSION_U16 : NB_SHARD_VERSION_U32,
                         u16 ? 2 : 4);
    if (o->n_inputs == 0) {
        for (int k = 0; k < n_parts; k++)
            rc |= (k && nb_buf_printf(&man, ",")) || corpus_source(&man, o, parts[k], sizes[k], per_src[k]);
    } else {
        for (int i = 0; i < o->n_inputs; i++) {
            rc |= nb_buf_printf(&man, "%s\n    {\"path\": ", i ? "," : "");
            rc |= nb_buf_json_str(&man, o->inputs[i], strlen(o->inputs[i]));
            rc |= nb_buf_printf(&man, ", \"format\": \"%s\", \"compression\": \"%s\", \"bytes\": %zu, \"documents\": %zu",
                                info[i].format, info[i].compression, sizes[i], per_src[i]);
            if (!strcmp(info[i].format, "jsonl")) {
                const char *field = o->text_field ? o->text_field : "text";
                rc |= nb_buf_printf(&man, ", \"text_field\": ");
                rc |= nb_buf_json_str(&man, field, strlen(field));
                rc |= nb_buf_printf(&man, ", \"skipped_lines\": %zu", info[i].bad_lines);
            }
            rc |= nb_buf_printf(&man, "}");
        }
    }
    rc |= nb_buf_printf(&man, "\n  ],\n  \"split\": {\n    \"documents\": \"%s\",\n"
                         "    \"separator\": \"every document is preceded by the end-of-text token\",\n"
                         "    \"selection\": \"Fisher-Yates shuffle of the document indices (splitmix64 seeded with seed); "
                         "the first round(val_fraction * documents) are validation (at least 1 when val_fraction > 0, at "
                         "most documents - 1); each split keeps the input order\",\n"
                         "    \"val_fraction\": %.15g,\n    \"seed\": %llu,\n    \"train_documents\": %zu,\n"
                         "    \"val_documents\": %zu\n  },\n",
                         o->n_inputs ? "text: paragraphs, runs of non-blank lines separated by blank lines, never across "
                                       "files; JSON Lines: one per line, its text member (empty ones skipped)"
                         : n_parts == 2 ? "one per chapter of the King James Bible (one verse per line), then one per "
                                          "GCIDE dictionary entry (markup stripped)"
                         : !strcmp(parts[0], "bible") ? "one per chapter of the King James Bible, one verse per line"
                                                      : "one per GCIDE dictionary entry (markup stripped)",
                         o->val_fraction, (unsigned long long)o->seed, st.train_docs, st.val_docs);
    for (int sp = 0; sp < 2; sp++)
        rc |= nb_buf_printf(&man, "  \"%s\": {\"tokens\": %zu, \"shards\": [%s%s]}%s\n", split_names[sp], sinks[sp].total,
                             sinks[sp].list.p ? sinks[sp].list.p : "", sinks[sp].shards ? "\n    " : "", sp ? "" : ",");
    rc |= nb_buf_printf(&man, "}\n");
    if (rc) { rc = -1; goto done; }
    char *mp = path_join(tmp, "manifest.json");
    if (!mp) { rc = nb_fail("out of memory"); goto done; }
    rc = nb_fs_write_atomic(mp, man.p, man.n);
    free(mp);
    if (rc) goto done;
    nb_fs_fsync_dir(tmp);

    /* 7. into place */
    exists = check_out_dir(out, o->force);
    if (exists < 0) { rc = -1; goto done; }
    if (exists) {
        old = malloc(tl);
        if (!old) { rc = nb_fail("out of memory"); goto done; }
        snprintf(old, tl, "%s/.%s.old-XXXXXX", parent, base);
        if (!mkdtemp(old) || rename(out, old) != 0) {
            rc = nb_fail("--out %s: cannot move the existing folder aside: %s", out, strerror(errno));
            rmdir(old);
            free(old);
            old = NULL;
            goto done;
        }
    }
    if (rename(tmp, out) != 0) {
        rc = nb_fail("--out %s: cannot rename %s into place: %s", out, tmp, strerror(errno));
        if (old && rename(old, out) == 0) { free(old); old = NULL; }
        goto done;
    }
    free(tmp);
    tmp = NULL;
    nb_fs_fsync_dir(parent);
    if (old && remove_flat_dir(old) != 0 && o->verbose)
        fprintf(stderr, "warning: could not remove the replaced folder %s\n", old);

done:
    if (tmp) remove_flat_dir(tmp);
    free(tmp);
    free(old);
    free(parent);
    free(name);
    for (int sp = 0; sp < 2; sp++) { free(sinks[sp].buf); nb_buf_free(&sinks[sp].list); }
    nb_buf_free(&man);
    nb_tokenizer_free(tok);
    free(is_val);
    free(order);
    if (bufs) for (int i = 0; i < n_src; i++) free(bufs[i]);
    free(bufs);
    free(sizes);
    free(per_src);
    free(info);
    free(ds.d);
    for (int k = 0; k < 2; k++) {
        free(corpus_text[k]);
        free(corpus_off[k]);
    }
    free(out);
    st.seconds_total = nb_now() - t_start;
    if (stats) *stats = st;
    return rc;
}
