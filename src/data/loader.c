/* The batch loader: a glob of shards read as one token stream, cut into windows of T + 1
 * tokens, visited in a per-epoch order (identity or seeded shuffle), split across ranks.
 * docs/data.md states the order exactly. */
#define _POSIX_C_SOURCE 200809L
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "util/hash.h"
#include "nobubble/data.h"
#include "util/error.h"

struct nb_loader {
    char *pattern;
    nb_shard *shards;
    size_t n_shards;
    size_t *start;       /* n_shards + 1 cumulative token offsets */
    size_t N;            /* tokens in all */
    int B, T, rank, n_ranks;
    uint64_t seed;
    uint64_t W;          /* windows */
    uint64_t bpe;        /* batches per epoch */
    uint64_t *perm;      /* the current epoch's window order (NULL for seed 0) */
    uint64_t epoch, step;
    uint64_t fingerprint;
};

static uint64_t rand_below(uint64_t *st, uint64_t n) {
    uint64_t limit = UINT64_MAX - UINT64_MAX % n, x;
    do x = nb_splitmix64(st); while (x >= limit);
    return x % n;
}

/* Window order of an epoch: Fisher-Yates, i from W-1 down to 1 swapping with j uniform in
 * [0, i], draws from splitmix64 seeded with seed * 0x9E3779B97F4A7C15 ^ (epoch + 1) * 0xD1B54A32D192ED03. */
static void make_perm(nb_loader *l) {
    if (!l->perm) return;
    for (uint64_t i = 0; i < l->W; i++) l->perm[i] = i;
    uint64_t st = l->seed * 0x9E3779B97F4A7C15ULL ^ (l->epoch + 1) * 0xD1B54A32D192ED03ULL;
    for (uint64_t i = l->W - 1; i > 0; i--) {
        uint64_t j = rand_below(&st, i + 1), t = l->perm[i];
        l->perm[i] = l->perm[j];
        l->perm[j] = t;
    }
}

void nb_loader_free(nb_loader *l) {
    if (!l) return;
    for (size_t i = 0; i < l->n_shards; i++) nb_shard_close(&l->shards[i]);
    free(l->shards);
    free(l->start);
    free(l->perm);
    free(l->pattern);
    free(l);
}

int nb_loader_check_pattern(const char *pattern) {
    glob_t g;
    const int gr = glob(pattern, 0, NULL, &g), found = gr == 0 && g.gl_pathc > 0;
    if (gr == 0) globfree(&g);
    if (found) return 0;
    /* The folder part, when it holds no pattern characters and does not exist: the likelier mistake. */
    char dir[4096];
    const char *slash = strrchr(pattern, '/');
    struct stat st;
    snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - pattern) : 0, pattern);
    if (slash && slash > pattern && !strpbrk(dir, "*?[") && stat(dir, &st) != 0)
        return nb_fail("loader: no shard files match '%s' (no folder %s)", pattern, dir);
    return nb_fail("loader: no shard files match '%s'", pattern);
}

int nb_loader_open(nb_loader **out, const char *pattern, int B, int T, int vocab_size, uint64_t seed, int rank,
                   int n_ranks) {
    *out = NULL;
    if (B < 1 || T < 1) return nb_fail("loader %s: B=%d and T=%d must be positive", pattern, B, T);
    if (n_ranks < 1 || rank < 0 || rank >= n_ranks)
        return nb_fail("loader %s: rank %d out of range for %d ranks", pattern, rank, n_ranks);
    if (vocab_size < 1) return nb_fail("loader %s: vocabulary size %d is not positive", pattern, vocab_size);
    if (nb_loader_check_pattern(pattern)) return -1;
    glob_t g;
    if (glob(pattern, 0, NULL, &g) != 0) return nb_fail("loader: no shard files match '%s'", pattern);
    nb_loader *l = calloc(1, sizeof *l);
    if (!l) { globfree(&g); return nb_fail("out of memory"); }
    l->pattern = strdup(pattern);
    l->shards = calloc(g.gl_pathc, sizeof *l->shards);
    l->start = calloc(g.gl_pathc + 1, sizeof *l->start);
    if (!l->pattern || !l->shards || !l->start) { globfree(&g); nb_loader_free(l); return nb_fail("out of memory"); }
    l->B = B; l->T = T; l->rank = rank; l->n_ranks = n_ranks; l->seed = seed;
    uint64_t fp = NB_FNV_INIT;
    for (size_t i = 0; i < g.gl_pathc; i++) { /* glob sorts the names */
        if (nb_shard_open(g.gl_pathv[i], &l->shards[i])) { globfree(&g); nb_loader_free(l); return -1; }
        l->n_shards++;
        nb_shard *s = &l->shards[i];
        if (!(s->token_bytes == 2 && vocab_size >= 65536) && nb_shard_max_token(s) >= (uint32_t)vocab_size) {
            size_t k = 0;
            while (nb_shard_token(s, k) < (uint32_t)vocab_size) k++;
            const uint32_t top = nb_shard_max_token(s);
            nb_fail("shard %s: token id %u at position %zu is >= the vocabulary size %d: this shard needs a vocabulary "
                    "of at least %llu (its largest id is %u): give the model that many tokens (train --set "
                    "vocab_size=N; llm.c's GPT-2 shards need 50257) or use shards made with the model's tokenizer",
                    s->path, nb_shard_token(s, k), k, vocab_size, (unsigned long long)top + 1, top);
            globfree(&g);
            nb_loader_free(l);
            return -1;
        }
        l->start[i + 1] = l->start[i] + s->n_tokens;
        const char *base = strrchr(s->path, '/');
        base = base ? base + 1 : s->path;
        fp = nb_fnv1a(fp, base, strlen(base) + 1);
        uint64_t nt = s->n_tokens;
        fp = nb_fnv1a(fp, &nt, sizeof nt);
    }
    globfree(&g);
    l->N = l->start[l->n_shards];
    l->W = l->N > 0 ? (uint64_t)(l->N - 1) / (uint64_t)T : 0;
    l->bpe = l->W / ((uint64_t)B * (uint64_t)n_ranks);
    if (l->bpe == 0) {
        nb_fail("loader %s: %zu tokens in %zu shard(s), fewer than the B*T*n_ranks+1 = %llu one batch needs", pattern,
                l->N, l->n_shards, (unsigned long long)((uint64_t)B * (uint64_t)T * (uint64_t)n_ranks + 1));
        nb_loader_free(l);
        return -1;
    }
    int64_t params[5] = {B, T, rank, n_ranks, (int64_t)seed};
    l->fingerprint = nb_fnv1a(fp, params, sizeof params);
    if (seed) {
        l->perm = malloc(l->W * sizeof *l->perm);
        if (!l->perm) { nb_loader_free(l); return nb_fail("out of memory (%llu windows)", (unsigned long long)l->W); }
        make_perm(l);
    }
    *out = l;
    return 0;
}

uint64_t nb_loader_peek_window(const nb_loader *l, int b) {
    uint64_t g = l->step * (uint64_t)l->B * (uint64_t)l->n_ranks + (uint64_t)l->rank * (uint64_t)l->B + (uint64_t)b;
    return l->perm ? l->perm[g] : g;
}

/* Copies tokens [pos, pos + n) of the stream. */
static void gather(const nb_loader *l, size_t pos, size_t n, int *dst) {
    size_t lo = 0, hi = l->n_shards; /* the shard holding pos: start[lo] <= pos < start[lo+1] */
    while (hi - lo > 1) {
        size_t mid = (lo + hi) / 2;
        if (l->start[mid] <= pos) lo = mid; else hi = mid;
    }
    while (n) {
        while (pos >= l->start[lo + 1]) lo++; /* skips empty shards too */
        const nb_shard *s = &l->shards[lo];
        size_t off = pos - l->start[lo], m = s->n_tokens - off < n ? s->n_tokens - off : n;
        if (s->token_bytes == 2) {
            const uint8_t *p = s->payload + 2 * off;
            for (size_t i = 0; i < m; i++) dst[i] = p[2 * i] | p[2 * i + 1] << 8;
        } else {
            for (size_t i = 0; i < m; i++) dst[i] = (int)nb_shard_token(s, off + i);
        }
        dst += m; pos += m; n -= m;
    }
}

int nb_loader_next(nb_loader *l, int *inputs, int *targets) {
    size_t T = (size_t)l->T;
    int *win = malloc((T + 1) * sizeof *win);
    if (!win) return nb_fail("out of memory");
    for (int b = 0; b < l->B; b++) {
        uint64_t w = nb_loader_peek_window(l, b);
        gather(l, (size_t)w * T, T + 1, win);
        memcpy(inputs + (size_t)b * T, win, T * sizeof *win);
        memcpy(targets + (size_t)b * T, win + 1, T * sizeof *win);
    }
    free(win);
    if (++l->step == l->bpe) {
        l->step = 0;
        l->epoch++;
        make_perm(l);
    }
    return 0;
}

int nb_loader_seek(nb_loader *l, uint64_t position) {
    uint64_t e = position / l->bpe;
    l->step = position % l->bpe;
    if (e != l->epoch) {
        l->epoch = e;
        make_perm(l);
    }
    return 0;
}

void nb_loader_reset(nb_loader *l) { nb_loader_seek(l, 0); }
size_t nb_loader_total_tokens(const nb_loader *l) { return l->N; }
size_t nb_loader_batches_per_epoch(const nb_loader *l) { return (size_t)l->bpe; }
uint64_t nb_loader_position(const nb_loader *l) { return l->epoch * l->bpe + l->step; }
uint64_t nb_loader_epoch(const nb_loader *l) { return l->epoch; }
size_t nb_loader_n_shards(const nb_loader *l) { return l->n_shards; }
uint64_t nb_loader_fingerprint(const nb_loader *l) { return l->fingerprint; }
