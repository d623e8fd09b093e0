/* The loader: exact windows and targets, determinism, shuffles that are permutations, no
 * overlap across ranks, exact resume through position/seek, and its errors. The test shards
 * hold token value = position in the stream, so every batch can be checked exactly. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "check.h"
#include "nobubble/data.h"

static char dir[256], pattern[512];
#define V (1 << 20)

static void mkshard(const char *name, size_t first, size_t n, int vocab) {
    uint32_t *t = malloc((n + 1) * sizeof *t);
    for (size_t i = 0; i < n; i++) t[i] = (uint32_t)(first + i);
    char p[512];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    if (nb_shard_write(p, t, n, vocab)) fprintf(stderr, "mkshard: %s\n", nb_last_error());
    free(t);
}

/* checks that row b of a batch is one whole window and returns its index (or -1) */
static long window_of(const int *in, const int *tg, int b, int T) {
    const int *x = in + (size_t)b * T, *y = tg + (size_t)b * T;
    if (x[0] % T) return -1;
    for (int t = 0; t < T; t++)
        if (x[t] != x[0] + t || y[t] != x[0] + t + 1) return -1;
    return x[0] / T;
}

static void test_sequential(void) {
    nb_loader *l;
    int B = 4, T = 16;
    CHECK(nb_loader_open(&l, pattern, B, T, V, 0, 0, 1) == 0, "open: %s", nb_last_error());
    if (!l) return;
    size_t N = 1000 + 1 + 0 + 2345, W = (N - 1) / T;
    CHECK(nb_loader_total_tokens(l) == N, "total tokens %zu", nb_loader_total_tokens(l));
    CHECK(nb_loader_batches_per_epoch(l) == W / B, "batches per epoch %zu", nb_loader_batches_per_epoch(l));
    CHECK(nb_loader_n_shards(l) == 4, "4 shards");
    int in[64], tg[64];
    int ok = 1;
    for (size_t s = 0; s < W / B; s++) {
        nb_loader_next(l, in, tg);
        for (int b = 0; b < B; b++) ok &= window_of(in, tg, b, T) == (long)(s * B + (size_t)b);
    }
    CHECK(ok, "seed 0 visits windows 0, 1, 2, ... in order, across shard boundaries");
    CHECK(nb_loader_epoch(l) == 1 && nb_loader_position(l) == W / B, "epoch wraps");
    nb_loader_next(l, in, tg);
    CHECK(window_of(in, tg, 0, T) == 0 && window_of(in, tg, 3, T) == 3, "epoch 2 starts again at window 0");
    nb_loader_reset(l);
    CHECK(nb_loader_position(l) == 0, "reset -> position 0");
    nb_loader_next(l, in, tg);
    CHECK(window_of(in, tg, 0, T) == 0, "reset gives the first batch again");
    nb_loader_free(l);
}

static void test_shuffle_and_determinism(void) {
    int B = 4, T = 16;
    nb_loader *a, *b, *c;
    CHECK(nb_loader_open(&a, pattern, B, T, V, 7, 0, 1) == 0, "open a");
    CHECK(nb_loader_open(&b, pattern, B, T, V, 7, 0, 1) == 0, "open b");
    CHECK(nb_loader_open(&c, pattern, B, T, V, 8, 0, 1) == 0, "open c");
    if (!a || !b || !c) return;
    size_t bpe = nb_loader_batches_per_epoch(a), W = (nb_loader_total_tokens(a) - 1) / T;
    char *seen = calloc(W, 1);
    long *order0 = malloc(bpe * B * sizeof *order0);
    int ina[64], tga[64], inb[64], tgb[64], inc[64], tgc[64];
    int same_ab = 1, same_ac = 1, whole = 1, distinct = 1, same_epochs = 1;
    for (size_t s = 0; s < 2 * bpe + 5; s++) {
        nb_loader_next(a, ina, tga);
        nb_loader_next(b, inb, tgb);
        nb_loader_next(c, inc, tgc);
        same_ab &= !memcmp(ina, inb, sizeof ina) && !memcmp(tga, tgb, sizeof tga);
        same_ac &= !memcmp(ina, inc, sizeof ina);
        for (int r = 0; r < B; r++) {
            long w = window_of(ina, tga, r, T);
            whole &= w >= 0 && (size_t)w < W;
            if (w < 0 || (size_t)w >= W) continue;
            if (s < bpe) { distinct &= !seen[w]; seen[w] = 1; order0[s * B + (size_t)r] = w; }
            else if (s < 2 * bpe) same_epochs &= order0[(s - bpe) * B + (size_t)r] == w;
        }
    }
    CHECK(same_ab, "same seed, same batches");
    CHECK(!same_ac, "another seed, another order");
    CHECK(whole, "every row is one whole window with targets shifted by one");
    CHECK(distinct, "an epoch never repeats a window");
    CHECK(!same_epochs, "each epoch has its own order");
    long sequential = 1;
    for (size_t i = 0; i < 8; i++) sequential &= order0[i] == (long)i;
    CHECK(!sequential, "seed 7 shuffles");
    CHECK(nb_loader_fingerprint(a) == nb_loader_fingerprint(b) && nb_loader_fingerprint(a) != nb_loader_fingerprint(c),
          "fingerprint follows the seed");
    free(seen); free(order0);
    nb_loader_free(a); nb_loader_free(b); nb_loader_free(c);
}

static void test_ranks(void) {
    int B = 4, T = 16, R = 3;
    for (int seed = 0; seed < 2; seed++) {
        nb_loader *l[3];
        size_t W = 0;
        for (int r = 0; r < R; r++) {
            CHECK(nb_loader_open(&l[r], pattern, B, T, V, (uint64_t)seed * 99, r, R) == 0, "open rank %d", r);
            if (!l[r]) return;
        }
        W = (nb_loader_total_tokens(l[0]) - 1) / T;
        size_t bpe = nb_loader_batches_per_epoch(l[0]);
        CHECK(bpe == W / (size_t)(B * R), "batches per epoch with 3 ranks: %zu", bpe);
        int *owner = malloc(W * sizeof *owner);
        for (size_t i = 0; i < W; i++) owner[i] = -1;
        int disjoint = 1, whole = 1, count = 0;
        int in[64], tg[64];
        for (size_t s = 0; s < bpe; s++)
            for (int r = 0; r < R; r++) {
                nb_loader_next(l[r], in, tg);
                for (int b = 0; b < B; b++) {
                    long w = window_of(in, tg, b, T);
                    if (w < 0) { whole = 0; continue; }
                    if (seed == 0) whole &= w == (long)(s * (size_t)(B * R) + (size_t)(r * B + b));
                    disjoint &= owner[w] == -1;
                    owner[w] = r;
                    count++;
                }
            }
        CHECK(disjoint, "seed %d: ranks never share a window in an epoch", seed);
        CHECK(whole, "seed %d: rank rows are whole windows (seed 0: the documented slice)", seed);
        CHECK(count == (int)(bpe * (size_t)(B * R)), "seed %d: windows per epoch", seed);
        free(owner);
        for (int r = 0; r < R; r++) nb_loader_free(l[r]);
    }
}

static void test_resume(void) {
    int B = 2, T = 32;
    nb_loader *a, *b;
    CHECK(nb_loader_open(&a, pattern, B, T, V, 5, 1, 2) == 0, "open");
    CHECK(nb_loader_open(&b, pattern, B, T, V, 5, 1, 2) == 0, "open");
    if (!a || !b) return;
    size_t bpe = nb_loader_batches_per_epoch(a), steps = 2 * bpe + 7;
    int *all_in = malloc(steps * B * T * sizeof *all_in), *all_tg = malloc(steps * B * T * sizeof *all_tg);
    for (size_t s = 0; s < steps; s++) {
        CHECK(nb_loader_position(a) == s, "position counts batches");
        nb_loader_next(a, all_in + s * B * T, all_tg + s * B * T);
    }
    uint64_t probes[] = {0, 1, 13, bpe - 1, bpe, bpe + 1, 2 * bpe + 3, 5, 0};
    int in[64], tg[64];
    for (size_t k = 0; k < sizeof probes / sizeof probes[0]; k++) {
        uint64_t p = probes[k];
        nb_loader_seek(b, p);
        CHECK(nb_loader_position(b) == p, "seek(%llu) position", (unsigned long long)p);
        int same = 1;
        for (uint64_t s = p; s < p + 3 && s < steps; s++) {
            nb_loader_next(b, in, tg);
            same &= !memcmp(in, all_in + s * B * T, B * T * sizeof *in) && !memcmp(tg, all_tg + s * B * T, B * T * sizeof *tg);
        }
        CHECK(same, "after seek(%llu) the batches equal the uninterrupted run's", (unsigned long long)p);
    }
    free(all_in); free(all_tg);
    nb_loader_free(a); nb_loader_free(b);
}

static void test_errors(void) {
    nb_loader *l = NULL;
    char p[600];
    snprintf(p, sizeof p, "%s/nothing_*.bin", dir);
    CHECK(nb_loader_open(&l, p, 1, 8, V, 0, 0, 1) == -1 && strstr(nb_last_error(), p), "no match names the pattern: %s",
          nb_last_error());
    CHECK(nb_loader_open(&l, pattern, 4, 1000, V, 0, 0, 1) == -1 && strstr(nb_last_error(), "fewer"),
          "too few tokens for one batch: %s", nb_last_error());
    CHECK(nb_loader_open(&l, pattern, 1, 3345, V, 0, 0, 1) == 0, "exactly B*T+1 tokens is enough: %s", nb_last_error());
    nb_loader_free(l);
    l = NULL;
    CHECK(nb_loader_open(&l, pattern, 1, 8, 3000, 0, 0, 1) == -1 && strstr(nb_last_error(), "x_train_000003.bin") &&
          strstr(nb_last_error(), "3000"), "token >= vocab names the shard: %s", nb_last_error());
    CHECK(nb_loader_open(&l, pattern, 1, 8, V, 0, 2, 2) == -1, "rank out of range");
    /* a damaged shard in the set */
    snprintf(p, sizeof p, "%s/x_train_000009.bin", dir);
    FILE *f = fopen(p, "wb");
    fputs("not a shard", f);
    fclose(f);
    CHECK(nb_loader_open(&l, pattern, 1, 8, V, 0, 0, 1) == -1 && strstr(nb_last_error(), "x_train_000009.bin"),
          "bad shard named: %s", nb_last_error());
    unlink(p);
}

int main(void) {
    snprintf(dir, sizeof dir, "/tmp/nb_test_loader_XXXXXX");
    if (!mkdtemp(dir)) { perror("mkdtemp"); return 1; }
    /* stream positions 0..3345: a uint16 shard, a 1-token uint32 shard, an empty one, a uint32 one */
    mkshard("x_train_000000.bin", 0, 1000, 65536);
    mkshard("x_train_000001.bin", 1000, 1, V);
    mkshard("x_train_000002.bin", 1001, 0, 65536);
    mkshard("x_train_000003.bin", 1001, 2345, V);
    mkshard("x_val_000000.bin", 0, 10, 65536); /* not matched by the pattern */
    snprintf(pattern, sizeof pattern, "%s/x_train_*.bin", dir);
    test_sequential();
    test_shuffle_and_determinism();
    test_ranks();
    test_resume();
    test_errors();
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    check_run(cmd);
    return check_summary();
}
