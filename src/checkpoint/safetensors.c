/* safetensors: the atomic writer (F32) and the validating reader (F32, F16, BF16). */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "util/json.h"
#include "util/fs.h"
#include "nobubble/checkpoint.h"
#include "checkpoint/checksum.h"
#include "util/error.h"

static int host_is_le(void) {
    const uint16_t one = 1;
    unsigned char b;
    memcpy(&b, &one, 1);
    return b == 1;
}

const char *nb_st_dtype_name(nb_st_dtype d) {
    switch (d) {
    case NB_ST_F32: return "F32";
    case NB_ST_F16: return "F16";
    case NB_ST_BF16: return "BF16";
    }
    return "?";
}

static size_t dtype_size(nb_st_dtype d) { return d == NB_ST_F32 ? 4 : 2; }

/* ------------------------------------------------------------------ the header's checksum */
typedef struct {
    const char *key, *value;
} meta_pair;

typedef struct {
    const char *name, *dtype;
    int ndim;
    const int64_t *shape;
    uint64_t begin, end;
} digest_entry;

static int cmp_pair_key(const void *a, const void *b) {
    return strcmp(((const meta_pair *)a)->key, ((const meta_pair *)b)->key);
}

static int cmp_digest_name(const void *a, const void *b) {
    return strcmp(((const digest_entry *)a)->name, ((const digest_entry *)b)->name);
}

/* XXH3 of the header's canonical form (docs/checkpoints.md, "The header's checksum"): for each metadata pair
 * in ascending byte order of its key, 'M' key NUL value NUL; then for each tensor in ascending byte order of
 * its name, 'T' name NUL dtype NUL each dimension in decimal followed by ',' NUL begin NUL end NUL. Sorted,
 * so that the value does not depend on how a writer orders its JSON; unescaped strings, so that it does not
 * depend on how it escapes them. Sorts m and e in place; -1 when out of memory. */
static int canonical_digest(meta_pair *m, int n_meta, digest_entry *e, int n, uint64_t *out) {
    qsort(m, (size_t)n_meta, sizeof *m, cmp_pair_key);
    qsort(e, (size_t)n, sizeof *e, cmp_digest_name);
    nb_buf b = {0};
    int r = 0;
    for (int k = 0; k < n_meta && !r; k++)
        r = nb_buf_put(&b, "M", 1) || nb_buf_put(&b, m[k].key, strlen(m[k].key) + 1) ||
            nb_buf_put(&b, m[k].value, strlen(m[k].value) + 1);
    for (int i = 0; i < n && !r; i++) {
        r = nb_buf_put(&b, "T", 1) || nb_buf_put(&b, e[i].name, strlen(e[i].name) + 1) ||
            nb_buf_put(&b, e[i].dtype, strlen(e[i].dtype) + 1);
        for (int d = 0; d < e[i].ndim && !r; d++) r = nb_buf_printf(&b, "%lld,", (long long)e[i].shape[d]);
        r = r || nb_buf_put(&b, "", 1) || nb_buf_printf(&b, "%llu", (unsigned long long)e[i].begin) ||
            nb_buf_put(&b, "", 1) || nb_buf_printf(&b, "%llu", (unsigned long long)e[i].end) || nb_buf_put(&b, "", 1);
    }
    if (!r) *out = nb_st_checksum(b.p ? b.p : "", b.n);
    nb_buf_free(&b);
    return r ? -1 : 0;
}

/* The header's checksum of a parsed header: every metadata pair but the header's checksum itself, and every
 * entry. The one path from a header to its checksum: nb_st_open hashes the file's header with it, and
 * nb_st_write the header it is about to write, parsed by the same parser (digest_of_header), so that the two
 * cannot disagree on what the canonical form holds. -1 when out of memory. */
static int header_digest(const nb_st_file *f, uint64_t *out) {
    meta_pair *m = calloc(f->n_meta ? (size_t)f->n_meta : 1, sizeof *m);
    digest_entry *e = calloc(f->n ? (size_t)f->n : 1, sizeof *e);
    int n_pairs = 0, r = !m || !e;
    for (int k = 0; !r && k < f->n_meta; k++)
        if (strcmp(f->meta_keys[k], NB_ST_HEADER_CHECKSUM_KEY)) m[n_pairs++] = (meta_pair){f->meta_keys[k], f->meta_values[k]};
    for (int i = 0; !r && i < f->n; i++) {
        const nb_st_entry *x = &f->entries[i];
        e[i] = (digest_entry){x->name, nb_st_dtype_name(x->dtype), x->ndim, x->shape, x->begin, x->end};
    }
    r = r || canonical_digest(m, n_pairs, e, f->n, out);
    free(m);
    free(e);
    return r ? -1 : 0;
}

/* The reader's header parser (below), which the writer also runs on the header it builds. */
static int parse_header_text(nb_st_file *f, const char *text, size_t n);

/* ------------------------------------------------------------------ writer */
/* Element count of a shape, refusing products past 2^60 (no size_t overflow anywhere after). */
static int shape_numel(const int64_t *shape, int ndim, size_t *out) {
    uint64_t n = 1;
    for (int d = 0; d < ndim; d++) {
        if (shape[d] < 0) return -1;
        if (shape[d] == 0) { n = 0; continue; }
        if (n && (uint64_t)shape[d] > (UINT64_C(1) << 60) / n) return -1;
        n *= (uint64_t)shape[d];
    }
    *out = (size_t)n;
    return 0;
}

/* Copies floats x[*i..] into buf as little-endian bytes until buf (4096 bytes) is full or x ends;
 * returns the bytes copied. For big-endian hosts: a little-endian one uses x as it is. */
static size_t next_le_bytes(const float *x, size_t n, size_t *i, unsigned char buf[4096]) {
    size_t k = 0;
    for (; k < 4096 / 4 && *i < n; k++, (*i)++) {
        uint32_t u;
        memcpy(&u, &x[*i], 4);
        for (int b = 0; b < 4; b++) buf[4 * k + b] = (unsigned char)(u >> (8 * b));
    }
    return 4 * k;
}

static int write_floats_le(FILE *f, const float *x, size_t n) {
    if (host_is_le()) return n && fwrite(x, sizeof(float), n, f) != n ? -1 : 0;
    unsigned char buf[4096];
    for (size_t i = 0; i < n;) {
        size_t bytes = next_le_bytes(x, n, &i, buf);
        if (fwrite(buf, 1, bytes, f) != bytes) return -1;
    }
    return 0;
}

/* The checksum of the tensor's bytes as the file holds them (little-endian), converted in pieces on
 * a big-endian host. */
static uint64_t checksum_floats_le(const float *x, size_t n) {
    if (host_is_le()) return nb_st_checksum(x, n * 4);
    nb_sum h;
    nb_sum_init(&h, NB_ST_XXH3);
    unsigned char buf[4096];
    for (size_t i = 0; i < n;) nb_sum_update(&h, buf, next_le_bytes(x, n, &i, buf));
    return nb_sum_final(&h);
}

static int check_tensors(const char *path, const nb_st_tensor *t, int n) {
    for (int i = 0; i < n; i++) {
        size_t numel = 0;
        if (!t[i].name || !t[i].name[0]) return nb_fail("%s: tensor %d has no name", path, i);
        if (!strcmp(t[i].name, "__metadata__"))
            return nb_fail("%s: a tensor may not be named __metadata__", path);
        if (t[i].ndim < 0 || t[i].ndim > NB_ST_WRITE_MAX_DIMS)
            return nb_fail("%s: tensor '%s': %d dimensions (0 to %d allowed)", path, t[i].name, t[i].ndim,
                           NB_ST_WRITE_MAX_DIMS);
        if (shape_numel(t[i].shape, t[i].ndim, &numel))
            return nb_fail("%s: tensor '%s': bad shape (negative or too large)", path, t[i].name);
        if (numel && !t[i].data) return nb_fail("%s: tensor '%s': no data", path, t[i].name);
        for (int j = 0; j < i; j++)
            if (!strcmp(t[i].name, t[j].name)) return nb_fail("%s: tensor '%s' given twice", path, t[i].name);
    }
    return 0;
}

static int check_meta(const char *path, const char *const *meta, int n_meta) {
    for (int k = 0; k < n_meta; k++) {
        if (!meta[2 * k] || !meta[2 * k + 1]) return nb_fail("%s: metadata entry %d is NULL", path, k);
        if (!strcmp(meta[2 * k], "format")) return nb_fail("%s: metadata key 'format' is reserved (always \"pt\")", path);
        if (!strcmp(meta[2 * k], NB_ST_HEADER_CHECKSUM_KEY))
            return nb_fail("%s: metadata key '%s' is reserved for the header's checksum", path, meta[2 * k]);
        if (!strncmp(meta[2 * k], NB_ST_CHECKSUM_KEY, strlen(NB_ST_CHECKSUM_KEY)))
            return nb_fail("%s: metadata key '%s': keys beginning with '%s' are reserved for the tensors' checksums",
                           path, meta[2 * k], NB_ST_CHECKSUM_KEY);
        for (int j = 0; j < k; j++)
            if (!strcmp(meta[2 * k], meta[2 * j])) return nb_fail("%s: metadata key '%s' given twice", path, meta[2 * k]);
    }
    return 0;
}

/* ,"nobubble.checksum:<name>":"xxh3:<16 hex digits>" */
static int put_checksum(nb_buf *h, const char *name, uint64_t sum) {
    nb_buf key = {0};
    int r = nb_buf_printf(&key, "%s%s", NB_ST_CHECKSUM_KEY, name);
    r = r || nb_buf_put(h, ",", 1);
    r = r || nb_buf_json_str(h, key.p, key.n);
    r = r || nb_buf_printf(h, ":\"%s%016llx\"", NB_ST_CHECKSUM_ALGO, (unsigned long long)sum);
    nb_buf_free(&key);
    return r;
}

/* The start of the header: "format", the caller's pairs and each tensor's checksum, with __metadata__ left
 * open for the header's checksum. Non-zero when out of memory. */
static int put_metadata(nb_buf *h, const nb_st_tensor *t, int n, const char *const *meta, int n_meta) {
    int r = nb_buf_put(h, "{\"__metadata__\":{\"format\":\"pt\"", 30);
    for (int k = 0; k < n_meta && !r; k++) {
        r = nb_buf_put(h, ",", 1);
        r = r || nb_buf_json_str(h, meta[2 * k], strlen(meta[2 * k]));
        r = r || nb_buf_put(h, ":", 1);
        r = r || nb_buf_json_str(h, meta[2 * k + 1], strlen(meta[2 * k + 1]));
    }
    for (int i = 0; i < n && !r; i++) {
        size_t numel = 0;
        shape_numel(t[i].shape, t[i].ndim, &numel);
        r = put_checksum(h, t[i].name, checksum_floats_le(t[i].data, numel));
    }
    return r;
}

/* The rest of the header: __metadata__ closed, then the entries (F32, contiguous in the order given);
 * *data_size: their bytes. Non-zero when out of memory. */
static int put_entries(nb_buf *h, const nb_st_tensor *t, int n, uint64_t *data_size) {
    uint64_t off = 0;
    int r = nb_buf_put(h, "}", 1);
    for (int i = 0; i < n && !r; i++) {
        size_t numel = 0;
        shape_numel(t[i].shape, t[i].ndim, &numel);
        uint64_t bytes = (uint64_t)numel * 4;
        r = nb_buf_put(h, ",", 1);
        r = r || nb_buf_json_str(h, t[i].name, strlen(t[i].name));
        r = r || nb_buf_put(h, ":{\"dtype\":\"F32\",\"shape\":[", 25);
        for (int d = 0; d < t[i].ndim && !r; d++)
            r = nb_buf_printf(h, "%s%lld", d ? "," : "", (long long)t[i].shape[d]);
        r = r || nb_buf_printf(h, "],\"data_offsets\":[%llu,%llu]}", (unsigned long long)off,
                                (unsigned long long)(off + bytes));
        off += bytes;
    }
    *data_size = off;
    return r || nb_buf_put(h, "}", 1);
}

/* The header's checksum of the header h (complete but for that pair), parsed by nb_st_open's parser and
 * hashed by its function: what the writer stores is then what the reader recomputes, by construction. A
 * header the parser refuses (a shape the reader cannot read) fails here, before the file is created,
 * with the parser's message naming path; data_size: the tensors' bytes, which the entries must tile. */
static int digest_of_header(const char *path, const nb_buf *h, uint64_t data_size, uint64_t *out) {
    nb_st_file f = {.fd = -1, .path = (char *)path, .file_size = data_size};  /* no file: data from 0 */
    int r = parse_header_text(&f, h->p, h->n);
    if (!r && header_digest(&f, out)) r = nb_fail("%s: out of memory building the header", path);
    f.path = NULL;  /* the caller's, which nb_st_close would free */
    nb_st_close(&f);
    return r;
}

/* The header: metadata (format, the caller's pairs, the tensors' checksums, the header's), the entries, spaces
 * up to a multiple of 8. The two parts are built once: joined, they are the header without its checksum,
 * which digest_of_header hashes; then the checksum goes between them, last in __metadata__. -1 with a message
 * naming path. */
static int build_header(nb_buf *h, const char *path, const nb_st_tensor *t, int n, const char *const *meta,
                        int n_meta) {
    nb_buf tail = {0};
    uint64_t data_size = 0, digest = 0;
    int r = put_metadata(h, t, n, meta, n_meta) || put_entries(&tail, t, n, &data_size);
    const size_t at = h->n;  /* where the header's checksum goes */
    r = r || nb_buf_put(h, tail.p, tail.n);
    if (r) r = nb_fail("%s: out of memory building the header", path);
    else if (!(r = digest_of_header(path, h, data_size, &digest))) {
        h->n = at;
        r = nb_buf_printf(h, ",\"%s\":\"%s%016llx\"", NB_ST_HEADER_CHECKSUM_KEY, NB_ST_CHECKSUM_ALGO,
                          (unsigned long long)digest) || nb_buf_put(h, tail.p, tail.n);
        while (!r && h->n % 8) r = nb_buf_put(h, " ", 1);
        if (r) r = nb_fail("%s: out of memory building the header", path);
    }
    nb_buf_free(&tail);
    return r;
}

int nb_st_write(const char *path, const nb_st_tensor *t, int n, const char *const *meta, int n_meta) {
    if (n < 0 || n_meta < 0 || (n > 0 && !t) || (n_meta > 0 && !meta))
        return nb_fail("%s: bad arguments to the safetensors writer", path);
    /* validate everything before creating anything */
    if (check_tensors(path, t, n) || check_meta(path, meta, n_meta)) return -1;
    nb_buf h = {0};
    if (build_header(&h, path, t, n, meta, n_meta)) {
        nb_buf_free(&h);
        return -1;
    }
    nb_afile a;
    if (nb_afile_open(&a, path)) {
        nb_buf_free(&h);
        return -1;
    }
    unsigned char len8[8];
    for (int b = 0; b < 8; b++) len8[b] = (unsigned char)((uint64_t)h.n >> (8 * b));
    int bad = fwrite(len8, 1, 8, a.f) != 8 || fwrite(h.p, 1, h.n, a.f) != h.n;
    nb_buf_free(&h);
    for (int i = 0; i < n && !bad; i++) {
        size_t numel = 0;
        shape_numel(t[i].shape, t[i].ndim, &numel);
        bad = write_floats_le(a.f, t[i].data, numel) != 0;
    }
    if (bad) {
        nb_fail("%s: write failed: %s", path, strerror(errno));
        nb_afile_abort(&a);
        return -1;
    }
    return nb_afile_commit(&a);
}

/* ------------------------------------------------------------------ reader */
void nb_st_close(nb_st_file *f) {
    if (!f) return;
    if (f->fd >= 0) close(f->fd);
    for (int i = 0; i < f->n; i++) free(f->entries[i].name);
    free(f->entries);
    free(f->by_name_);
    for (int k = 0; k < f->n_meta; k++) {
        free(f->meta_keys[k]);
        free(f->meta_values[k]);
    }
    free(f->meta_keys);
    free(f->meta_values);
    free(f->path);
    memset(f, 0, sizeof *f);
    f->fd = -1;
}

static int read_full(int fd, void *buf, size_t n, uint64_t at) {
    unsigned char *p = buf;
    while (n) {
        ssize_t k = pread(fd, p, n, (off_t)at);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return -1;
        p += k;
        n -= (size_t)k;
        at += (uint64_t)k;
    }
    return 0;
}

static int get_u64(const nb_json *v, uint64_t *out) {
    if (!v || v->type != NB_JNUM || !v->is_int || v->i < 0) return -1;
    *out = (uint64_t)v->i;
    return 0;
}

static int cmp_begin(const void *a, const void *b) {
    const nb_st_entry *x = *(const nb_st_entry *const *)a, *y = *(const nb_st_entry *const *)b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    return x->end < y->end ? -1 : x->end > y->end;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* A name that occurs twice among the header's keys (NULL when none), found by sorting: a header may hold
 * millions of names, and comparing every pair would take hours. */
static const char *duplicate_key(char **keys, size_t n, int *oom) {
    *oom = 0;
    if (n < 2) return NULL; /* an empty header's keys are NULL, which memcpy and qsort may not be given */
    char **sorted = malloc(sizeof *sorted * n);
    const char *dup = NULL;
    *oom = !sorted;
    if (!sorted) return NULL;
    memcpy(sorted, keys, sizeof *sorted * n);
    qsort(sorted, n, sizeof *sorted, cmp_str);
    for (size_t k = 1; k < n && !dup; k++)
        if (!strcmp(sorted[k], sorted[k - 1])) dup = sorted[k];
    free(sorted);
    return dup;
}

static int cmp_entry_name(const void *a, const void *b) {
    return strcmp((*(const nb_st_entry *const *)a)->name, (*(const nb_st_entry *const *)b)->name);
}

/* The entries sorted by name, for nb_st_find's binary search. */
static int index_names(nb_st_file *f) {
    f->by_name_ = malloc(sizeof *f->by_name_ * (size_t)(f->n ? f->n : 1));
    if (!f->by_name_) return nb_fail("%s: out of memory", f->path);
    for (int i = 0; i < f->n; i++) f->by_name_[i] = &f->entries[i];
    qsort(f->by_name_, (size_t)f->n, sizeof *f->by_name_, cmp_entry_name);
    return 0;
}

/* Fills the entries and metadata from the parsed header; f->path names the file. */
static int parse_header(nb_st_file *f, const nb_json *root) {
    const char *P = f->path;
    if (root->type != NB_JOBJ) return nb_fail("%s: the header is not a JSON object", P);
    int oom;
    const char *dup = duplicate_key(root->keys, root->n, &oom);
    if (oom) return nb_fail("%s: out of memory", P);
    if (dup) return nb_fail("%s: duplicate name '%s' in the header", P, dup);
    f->entries = calloc(root->n ? root->n : 1, sizeof *f->entries);
    if (!f->entries) return nb_fail("%s: out of memory", P);
    for (size_t k = 0; k < root->n; k++) {
        const char *name = root->keys[k];
        const nb_json *v = &root->items[k];
        if (!strcmp(name, "__metadata__")) {
            if (v->type != NB_JOBJ) return nb_fail("%s: __metadata__ is not an object", P);
            f->meta_keys = calloc(v->n ? v->n : 1, sizeof(char *));
            f->meta_values = calloc(v->n ? v->n : 1, sizeof(char *));
            if (!f->meta_keys || !f->meta_values) return nb_fail("%s: out of memory", P);
            for (size_t m = 0; m < v->n; m++) {
                if (v->items[m].type != NB_JSTR)
                    return nb_fail("%s: __metadata__ value of '%s' is not a string", P, v->keys[m]);
                f->meta_keys[m] = strdup(v->keys[m]);
                f->meta_values[m] = strdup(v->items[m].str);
                f->n_meta++;
                if (!f->meta_keys[m] || !f->meta_values[m]) return nb_fail("%s: out of memory", P);
            }
            continue;
        }
        if (!name[0]) return nb_fail("%s: a tensor has an empty name", P);
        nb_st_entry *e = &f->entries[f->n];
        e->name = strdup(name);
        if (!e->name) return nb_fail("%s: out of memory", P);
        f->n++;
        if (v->type != NB_JOBJ) return nb_fail("%s: tensor '%s': entry is not an object", P, name);
        const nb_json *dt = nb_json_get(v, "dtype"), *sh = nb_json_get(v, "shape"),
                       *of = nb_json_get(v, "data_offsets");
        if (!dt || dt->type != NB_JSTR) return nb_fail("%s: tensor '%s': missing or non-string dtype", P, name);
        if (!strcmp(dt->str, "F32")) e->dtype = NB_ST_F32;
        else if (!strcmp(dt->str, "F16")) e->dtype = NB_ST_F16;
        else if (!strcmp(dt->str, "BF16")) e->dtype = NB_ST_BF16;
        else return nb_fail("%s: tensor '%s': unsupported dtype '%s' (F32, F16 and BF16 are read)", P, name, dt->str);
        if (!sh || sh->type != NB_JARR) return nb_fail("%s: tensor '%s': missing shape array", P, name);
        if (sh->n > NB_ST_MAX_DIMS) return nb_fail("%s: tensor '%s': %zu dimensions (at most %d)", P, name, sh->n, NB_ST_MAX_DIMS);
        e->ndim = (int)sh->n;
        for (size_t d = 0; d < sh->n; d++) {
            uint64_t u;
            if (get_u64(&sh->items[d], &u) || u > (UINT64_C(1) << 60))
                return nb_fail("%s: tensor '%s': shape entry %zu is not an integer >= 0", P, name, d);
            e->shape[d] = (int64_t)u;
        }
        if (shape_numel(e->shape, e->ndim, &e->numel)) return nb_fail("%s: tensor '%s': shape too large", P, name);
        if (!of || of->type != NB_JARR || of->n != 2 || get_u64(&of->items[0], &e->begin) || get_u64(&of->items[1], &e->end))
            return nb_fail("%s: tensor '%s': data_offsets must be [begin, end] with integers >= 0", P, name);
        if (e->end < e->begin) return nb_fail("%s: tensor '%s': data_offsets end %llu before begin %llu", P, name,
                                              (unsigned long long)e->end, (unsigned long long)e->begin);
        uint64_t want = (uint64_t)e->numel * dtype_size(e->dtype);
        if (e->end - e->begin != want)
            return nb_fail("%s: tensor '%s': %llu bytes in data_offsets but dtype %s x shape needs %llu", P, name,
                           (unsigned long long)(e->end - e->begin), dt->str, (unsigned long long)want);
    }
    /* the tensors must tile [0, data size) exactly */
    uint64_t data_size = f->file_size - f->data_start;
    nb_st_entry **order = malloc(sizeof *order * (size_t)(f->n ? f->n : 1));
    if (!order) return nb_fail("%s: out of memory", P);
    for (int i = 0; i < f->n; i++) order[i] = &f->entries[i];
    qsort(order, (size_t)f->n, sizeof *order, cmp_begin);
    uint64_t at = 0;
    int r = 0;
    for (int i = 0; i < f->n && !r; i++) {
        const nb_st_entry *e = order[i];
        if (e->end > data_size)
            r = nb_fail("%s: tensor '%s': data_offsets [%llu, %llu] run past the end of the file (%llu tensor bytes)", P,
                        e->name, (unsigned long long)e->begin, (unsigned long long)e->end, (unsigned long long)data_size);
        else if (e->begin < at)
            r = nb_fail("%s: tensor '%s': data_offsets [%llu, %llu] overlap tensor '%s'", P, e->name,
                        (unsigned long long)e->begin, (unsigned long long)e->end, order[i - 1]->name);
        else if (e->begin > at)
            r = nb_fail("%s: tensor '%s': data_offsets begin at %llu, leaving a gap of %llu bytes after offset %llu", P,
                        e->name, (unsigned long long)e->begin, (unsigned long long)(e->begin - at), (unsigned long long)at);
        at = e->end;
    }
    free(order);
    if (!r && at != data_size)
        r = nb_fail("%s: %llu bytes after the last tensor (a gap: tensors end at %llu of %llu)", P,
                    (unsigned long long)(data_size - at), (unsigned long long)at, (unsigned long long)data_size);
    return r ? r : index_names(f);
}

/* Parses the header's text (n bytes) into f's entries and metadata, checked as parse_header checks them; f->path
 * names the file, f->data_start and f->file_size bound the tensors' bytes. Text, not a file, so that
 * nb_st_write can parse the header it is about to write (digest_of_header). */
static int parse_header_text(nb_st_file *f, const char *text, size_t n) {
    nb_json root;
    char what[600];
    snprintf(what, sizeof what, "%s: header", f->path);
    if (nb_json_parse(text, n, &root, what)) return -1;
    int r = parse_header(f, &root);
    nb_json_free(&root);
    return r;
}

/* The algorithm a checksum value names ("xxh3:", or "nbh64:" in older files), then 16 lowercase
 * hex digits; -1 when the value is anything else. */
static int parse_checksum(const char *v, nb_st_algo *algo, uint64_t *out) {
    size_t a = strlen(NB_ST_CHECKSUM_ALGO), old = strlen(NB_ST_CHECKSUM_ALGO_OLD);
    if (!strncmp(v, NB_ST_CHECKSUM_ALGO, a)) *algo = NB_ST_XXH3;
    else if (!strncmp(v, NB_ST_CHECKSUM_ALGO_OLD, old)) *algo = NB_ST_NBH64, a = old;
    else return -1;
    if (strlen(v + a) != 16) return -1;
    uint64_t x = 0;
    for (const char *c = v + a; *c; c++) {
        int d = *c >= '0' && *c <= '9' ? *c - '0' : *c >= 'a' && *c <= 'f' ? *c - 'a' + 10 : -1;
        if (d < 0) return -1;
        x = x << 4 | (uint64_t)d;
    }
    *out = x;
    return 0;
}

/* Gives each entry the checksum the metadata holds for it. nobubble writes one for every tensor, and
 * Hugging Face's files have none; so a checksum key naming no tensor of the file, or checksums for some
 * tensors but not others, is a damaged file (e.g. a flipped bit in a key's name, which would otherwise
 * silently drop that tensor's check) and is refused. */
static int attach_checksums(nb_st_file *f) {
    size_t prefix = strlen(NB_ST_CHECKSUM_KEY);
    int n_sums = 0;
    for (int k = 0; k < f->n_meta; k++) {
        const char *key = f->meta_keys[k];
        if (strncmp(key, NB_ST_CHECKSUM_KEY, prefix)) continue;
        nb_st_entry *e = (nb_st_entry *)nb_st_find(f, key + prefix);
        if (!e)
            return nb_fail("%s: metadata '%s' is the checksum of a tensor '%s' the file does not hold (a damaged "
                           "header?)", f->path, key, key + prefix);
        if (e->has_checksum) return nb_fail("%s: tensor '%s' has two checksums", f->path, e->name);
        if (parse_checksum(f->meta_values[k], &e->checksum_algo, &e->checksum))
            return nb_fail("%s: metadata '%s' = '%s' is not a checksum (expected '%s' or '%s' and 16 lowercase hex "
                           "digits)", f->path, key, f->meta_values[k], NB_ST_CHECKSUM_ALGO, NB_ST_CHECKSUM_ALGO_OLD);
        e->has_checksum = 1;
        n_sums++;
    }
    for (int i = 0; n_sums && i < f->n; i++)
        if (!f->entries[i].has_checksum)
            return nb_fail("%s: tensor '%s' has no checksum while %d other tensor(s) have one (a file nobubble wrote "
                           "has one for every tensor: a damaged header?)", f->path, f->entries[i].name, n_sums);
    return 0;
}

/* The header's checksum, where the file has one: recomputed from what was parsed (header_digest) and compared. */
static int check_header_checksum(const nb_st_file *f) {
    const char *want_text = nb_st_meta(f, NB_ST_HEADER_CHECKSUM_KEY);
    if (!want_text) return 0;  /* written before the header's checksum, or by another tool */
    nb_st_algo algo;
    uint64_t want, got = 0;
    if (parse_checksum(want_text, &algo, &want) || algo != NB_ST_XXH3)
        return nb_fail("%s: metadata '%s' = '%s' is not a checksum (expected '%s' and 16 lowercase hex digits)",
                       f->path, NB_ST_HEADER_CHECKSUM_KEY, want_text, NB_ST_CHECKSUM_ALGO);
    if (header_digest(f, &got)) return nb_fail("%s: out of memory checking the header", f->path);
    if (got != want)
        return nb_fail("%s: header checksum mismatch (its metadata and tensor entries hash to %s%016llx, the header "
                       "says %s): the file is corrupt", f->path, NB_ST_CHECKSUM_ALGO, (unsigned long long)got, want_text);
    return 0;
}

int nb_st_open(const char *path, nb_st_file *f) {
    memset(f, 0, sizeof *f);
    f->fd = -1;
    f->path = strdup(path);
    if (!f->path) return nb_fail("%s: out of memory", path);
    struct stat st;
    f->fd = nb_fs_open_regular(path, NULL, &st);
    if (f->fd < 0) {
        nb_st_close(f);
        return -1;
    }
    f->file_size = (uint64_t)st.st_size;
    unsigned char len8[8];
    if (f->file_size < 8 || read_full(f->fd, len8, 8, 0)) {
        nb_fail("%s: shorter than the 8-byte header length (%llu bytes)", path, (unsigned long long)f->file_size);
        nb_st_close(f);
        return -1;
    }
    uint64_t N = 0;
    for (int b = 0; b < 8; b++) N |= (uint64_t)len8[b] << (8 * b);
    if (N > NB_ST_MAX_HEADER) {
        nb_fail("%s: header length %llu is over the 100 MB limit", path, (unsigned long long)N);
        nb_st_close(f);
        return -1;
    }
    if (N > f->file_size - 8) {
        nb_fail("%s: header length %llu runs past the end of the file (%llu bytes)", path, (unsigned long long)N,
                (unsigned long long)f->file_size);
        nb_st_close(f);
        return -1;
    }
    f->header_len = N;
    f->data_start = 8 + N;
    char *text = malloc((size_t)N + 1);
    if (!text) {
        nb_fail("%s: out of memory for a %llu-byte header", path, (unsigned long long)N);
        nb_st_close(f);
        return -1;
    }
    if (read_full(f->fd, text, (size_t)N, 8)) {
        free(text);
        nb_fail("%s: read failed: %s", path, strerror(errno));
        nb_st_close(f);
        return -1;
    }
    text[N] = 0;
    int r = parse_header_text(f, text, (size_t)N);
    free(text);
    r = r ? r : attach_checksums(f);
    r = r ? r : check_header_checksum(f);
    if (r) {
        nb_st_close(f);
        return -1;
    }
    return 0;
}

const nb_st_entry *nb_st_find(const nb_st_file *f, const char *name) {
    if (!f->by_name_) return NULL;
    nb_st_entry key, *kp = &key;
    key.name = (char *)name;
    nb_st_entry **hit = bsearch(&kp, f->by_name_, (size_t)f->n, sizeof *f->by_name_, cmp_entry_name);
    return hit ? *hit : NULL;
}

int nb_st_verify(const nb_st_file *f, int *checked) {
    float *buf = NULL;
    size_t cap = 0;
    int rc = 0, n_checked = 0;
    for (int i = 0; i < f->n && !rc; i++) {
        const nb_st_entry *e = &f->entries[i];
        if (!buf || e->numel > cap) {   /* never NULL, even for an empty tensor */
            const size_t n = e->numel > 1 ? e->numel : 1;
            float *grown = realloc(buf, n * sizeof *grown);
            if (!grown) {
                rc = nb_fail("%s: out of memory reading tensor '%s'", f->path, e->name);
                break;
            }
            buf = grown, cap = n;
        }
        rc = nb_st_read_f32(f, e->name, buf, e->numel);
        n_checked += e->has_checksum;
    }
    free(buf);
    if (checked) *checked = n_checked;
    return rc ? -1 : 0;
}

const char *nb_st_meta(const nb_st_file *f, const char *key) {
    for (int k = 0; k < f->n_meta; k++)
        if (!strcmp(f->meta_keys[k], key)) return f->meta_values[k];
    return NULL;
}

static float bf16_to_f32(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float x;
    memcpy(&x, &u, 4);
    return x;
}

static float f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h >> 15) << 31, exp = (h >> 10) & 31, man = h & 1023, u;
    if (exp == 31) u = sign | 0x7f800000u | (man << 13);           /* inf, nan */
    else if (exp) u = sign | ((exp + 112) << 23) | (man << 13);    /* normal: 127 - 15 = 112 */
    else if (!man) u = sign;                                       /* zero */
    else {                                                         /* subnormal: normalize */
        int e = 113;
        while (!(man & 1024)) { man <<= 1; e--; }
        u = sign | ((uint32_t)e << 23) | ((man & 1023) << 13);
    }
    float x;
    memcpy(&x, &u, 4);
    return x;
}

/* Bytes are read and hashed in pieces of this size, so that hashing finds them in cache. */
#define READ_PIECE (1u << 20)

/* The F32 tensor e into out, hashed into h (NULL: not hashed). */
static int read_f32_le(const nb_st_file *f, const nb_st_entry *e, float *out, nb_sum *h) {
    unsigned char *p = (unsigned char *)out;
    size_t bytes = e->numel * 4;
    for (size_t i = 0; i < bytes; i += READ_PIECE) {
        size_t k = bytes - i < READ_PIECE ? bytes - i : READ_PIECE;
        if (read_full(f->fd, p + i, k, f->data_start + e->begin + i))
            return nb_fail("%s: tensor '%s': read failed", f->path, e->name);
        if (h) nb_sum_update(h, p + i, k);
    }
    if (!host_is_le())
        for (size_t i = 0; i < e->numel; i++) {
            unsigned char t0 = p[4 * i], t1 = p[4 * i + 1];
            p[4 * i] = p[4 * i + 3]; p[4 * i + 1] = p[4 * i + 2]; p[4 * i + 2] = t1; p[4 * i + 3] = t0;
        }
    return 0;
}

/* The F16 or BF16 tensor e widened into out, its bytes hashed into h (NULL: not hashed). */
static int read_16(const nb_st_file *f, const nb_st_entry *e, float *out, nb_sum *h) {
    unsigned char buf[8192];
    for (size_t i = 0; i < e->numel;) {
        size_t k = e->numel - i < sizeof buf / 2 ? e->numel - i : sizeof buf / 2;
        if (read_full(f->fd, buf, 2 * k, f->data_start + e->begin + 2 * i))
            return nb_fail("%s: tensor '%s': read failed", f->path, e->name);
        if (h) nb_sum_update(h, buf, 2 * k);
        for (size_t j = 0; j < k; j++) {
            uint16_t u = (uint16_t)(buf[2 * j] | buf[2 * j + 1] << 8);
            out[i + j] = e->dtype == NB_ST_BF16 ? bf16_to_f32(u) : f16_to_f32(u);
        }
        i += k;
    }
    return 0;
}

int nb_st_read_f32(const nb_st_file *f, const char *name, float *out, size_t n) {
    const nb_st_entry *e = nb_st_find(f, name);
    if (!e) return nb_fail("%s: no tensor '%s'", f->path, name);
    if (n != e->numel)
        return nb_fail("%s: tensor '%s' has %zu elements, the caller expects %zu", f->path, name, e->numel, n);
    nb_sum h;
    nb_sum_init(&h, e->checksum_algo);
    nb_sum *hp = e->has_checksum ? &h : NULL;   /* files without checksums (Hugging Face's) are read as before */
    if ((e->dtype == NB_ST_F32 ? read_f32_le : read_16)(f, e, out, hp)) return -1;
    const char *algo = e->checksum_algo == NB_ST_NBH64 ? NB_ST_CHECKSUM_ALGO_OLD : NB_ST_CHECKSUM_ALGO;
    if (hp && nb_sum_final(hp) != e->checksum)
        return nb_fail("%s: tensor '%s': data checksum mismatch (the bytes hash to %s%016llx, the header says "
                       "%s%016llx): the file is corrupt", f->path, name, algo,
                       (unsigned long long)nb_sum_final(hp), algo, (unsigned long long)e->checksum);
    return 0;
}
