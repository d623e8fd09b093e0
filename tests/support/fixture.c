#include "fixture.h"
#include "nobubble/model.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A bounded cursor over the file's bytes; every read checks the remaining length. */
typedef struct { const unsigned char *p; size_t left; } cursor;

static int take(cursor *c, void *dst, size_t n) {
    if (n > c->left) return -1;
    memcpy(dst, c->p, n);
    c->p += n;
    c->left -= n;
    return 0;
}

static int take_u32(cursor *c, uint32_t *v) {
    unsigned char b[4];
    if (take(c, b, 4)) return -1;
    *v = (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
    return 0;
}

static int take_u64(cursor *c, uint64_t *v) {
    unsigned char b[8];
    if (take(c, b, 8)) return -1;
    *v = 0;
    for (int i = 7; i >= 0; i--) *v = *v << 8 | b[i];
    return 0;
}

static int read_file(const char *path, unsigned char **buf, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return -1;
    size_t cap = 1 << 16, n = 0;
    unsigned char *b = malloc(cap);
    while (b) {
        if (n == cap) {
            unsigned char *nb = realloc(b, cap * 2);
            if (!nb) { free(b); b = NULL; break; }
            b = nb;
            cap *= 2;
        }
        size_t got = fread(b + n, 1, cap - n, f);
        n += got;
        if (got == 0) break;
    }
    int err = ferror(f);
    fclose(f);
    if (!b || err) { free(b); return -1; }
    *buf = b;
    *len = n;
    return 0;
}

#define BAD(...) do { fprintf(stderr, "nbfx_load: %s: ", path); fprintf(stderr, __VA_ARGS__); \
                      fputc('\n', stderr); goto fail; } while (0)

nbfx *nbfx_load(const char *path) {
    unsigned char *buf = NULL;
    size_t len = 0;
    if (read_file(path, &buf, &len)) {
        fprintf(stderr, "nbfx_load: %s: cannot read the file\n", path);
        return NULL;
    }
    nbfx *f = calloc(1, sizeof *f);
    if (!f) { free(buf); return NULL; }
    cursor c = { buf, len };
    char magic[8];
    uint32_t count;
    if (take(&c, magic, 8) || memcmp(magic, "NBFX0001", 8)) BAD("not an NBFX0001 file (bad magic)");
    if (take_u32(&c, &count)) BAD("truncated header");
    if (count > 100000) BAD("implausible entry count %u", count);
    f->entries = calloc(count ? count : 1, sizeof *f->entries);
    if (!f->entries) BAD("out of memory");
    for (uint32_t i = 0; i < count; i++) {
        nbfx_entry *e = &f->entries[i];
        uint32_t nlen, dtype, ndim;
        if (take_u32(&c, &nlen)) BAD("entry %u: truncated name length", i);
        if (nlen == 0 || nlen > 4096) BAD("entry %u: bad name length %u", i, nlen);
        if (nlen > c.left) BAD("entry %u: truncated name", i);
        e->name = malloc(nlen + 1);
        if (!e->name) BAD("out of memory");
        f->n_entries = (int)i + 1;   /* from here on entry i is freed by nbfx_free */
        take(&c, e->name, nlen);
        e->name[nlen] = '\0';
        if (memchr(e->name, '\0', nlen)) BAD("entry %u: name contains a NUL byte", i);
        if (take_u32(&c, &dtype) || take_u32(&c, &ndim)) BAD("entry '%s': truncated header", e->name);
        if (dtype != NBFX_F64 && dtype != NBFX_I32) BAD("entry '%s': unknown dtype %u", e->name, dtype);
        if (ndim > NBFX_MAX_DIMS) BAD("entry '%s': ndim %u exceeds %d", e->name, ndim, NBFX_MAX_DIMS);
        e->dtype = (int)dtype;
        e->ndim = (int)ndim;
        size_t elsize = dtype == NBFX_F64 ? 8 : 4;
        uint64_t numel = 1;
        for (uint32_t k = 0; k < ndim; k++) {
            if (take_u64(&c, &e->dims[k])) BAD("entry '%s': truncated dims", e->name);
            if (e->dims[k] != 0 && numel > UINT64_MAX / e->dims[k])
                BAD("entry '%s': element count overflows", e->name);
            numel *= e->dims[k];
        }
        if (numel > c.left / elsize)
            BAD("entry '%s': data truncated (%llu elements of %zu bytes, %zu bytes left)", e->name,
                (unsigned long long)numel, elsize, c.left);
        e->numel = (size_t)numel;
        void *data = malloc(e->numel ? e->numel * elsize : 1);
        if (!data) BAD("out of memory");
        if (dtype == NBFX_F64) {
            e->f64 = data;
            for (size_t k = 0; k < e->numel; k++) {
                uint64_t bits = 0;  /* length checked above */
                take_u64(&c, &bits);
                memcpy(&e->f64[k], &bits, 8);
            }
        } else {
            e->i32 = data;
            for (size_t k = 0; k < e->numel; k++) {
                uint32_t bits = 0;  /* length checked above */
                take_u32(&c, &bits);
                memcpy(&e->i32[k], &bits, 4);
            }
        }
        for (uint32_t j = 0; j < i; j++)
            if (!strcmp(f->entries[j].name, e->name)) BAD("duplicate entry '%s'", e->name);
    }
    if (c.left) BAD("%zu trailing bytes after the last entry", c.left);
    free(buf);
    return f;
fail:
    free(buf);
    nbfx_free(f);
    return NULL;
}

const nbfx_entry *nbfx_get(const nbfx *f, const char *name) {
    if (!f) return NULL;
    for (int i = 0; i < f->n_entries; i++)
        if (!strcmp(f->entries[i].name, name)) return &f->entries[i];
    return NULL;
}

void nbfx_free(nbfx *f) {
    if (!f) return;
    for (int i = 0; i < f->n_entries; i++) {
        free(f->entries[i].name);
        free(f->entries[i].f64);
        free(f->entries[i].i32);
    }
    free(f->entries);
    free(f);
}

int nbfx_model_config(const nbfx *f, nb_config *cfg, int *B, int *T) {
    const nbfx_entry *c = nbfx_get(f, "config"), *theta = nbfx_get(f, "rope_theta"), *eps = nbfx_get(f, "norm_eps");
    if (!c || c->dtype != NBFX_I32 || c->numel != 10 || !theta || theta->dtype != NBFX_F64 || theta->numel != 1) {
        fprintf(stderr, "fixture: missing or malformed \"config\" (i32 [10]) or \"rope_theta\" (f64 [1])\n");
        return -1;
    }
    nb_config_preset("tiny", cfg);
    cfg->vocab_size = c->i32[0];
    cfg->d_model = c->i32[1];
    cfg->n_layers = c->i32[2];
    cfg->n_heads = c->i32[3];
    cfg->n_kv_heads = c->i32[4];
    cfg->d_ffn = c->i32[5];
    cfg->context = c->i32[6];
    cfg->tied = c->i32[7];
    cfg->rope_theta = theta->f64[0];
    cfg->norm_eps = eps && eps->dtype == NBFX_F64 && eps->numel == 1 ? eps->f64[0] : 1e-5;
    *B = c->i32[8];
    *T = c->i32[9];
    const nbfx_entry *moe = nbfx_get(f, "moe"), *coef = nbfx_get(f, "aux_coef");
    if (moe && moe->dtype == NBFX_I32 && moe->numel == 2 && coef && coef->dtype == NBFX_F64 && coef->numel == 1) {
        cfg->n_experts = moe->i32[0];  /* every block a MoE block, as Mixtral's */
        cfg->experts_per_token = moe->i32[1];
        cfg->moe_every = 1;
        cfg->aux_coef = coef->f64[0];
    }
    return 0;
}
