/* Tokenizer throughput on the default corpus: training time (vocab 4096) and encode/decode MB/s
 * on one core. Usage: bench_tokenizer [vocab]   (needs Debian's bible-kjv) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "nobubble/data.h"
#include "util/clock.h"

int main(int argc, char **argv) {
    int vocab = argc > 1 ? atoi(argv[1]) : 4096;
    char *text;
    size_t *off, nd;
    if (nb_bible_documents(&text, &off, &nd)) { fprintf(stderr, "%s\n", nb_last_error()); return 1; }
    size_t bytes = off[nd];
    const char **dp = malloc(nd * sizeof *dp);
    size_t *dl = malloc(nd * sizeof *dl);
    for (size_t i = 0; i < nd; i++) { dp[i] = text + off[i]; dl[i] = off[i + 1] - off[i]; }
    nb_tokenizer *t;
    double t0 = nb_now();
    if (nb_tokenizer_train(&t, dp, dl, nd, vocab, 0)) { fprintf(stderr, "%s\n", nb_last_error()); return 1; }
    double t_train = nb_now() - t0;
    uint32_t *ids = malloc(bytes * sizeof *ids);
    size_t n = 0;
    double best_cold = 0, best_warm = 1e30;
    for (int rep = 0; rep < 4; rep++) {
        t0 = nb_now();
        n = nb_tokenizer_encode(t, text, bytes, ids);
        double dt = nb_now() - t0;
        if (rep == 0) best_cold = dt; else if (dt < best_warm) best_warm = dt;
    }
    int *iv = malloc(n * sizeof *iv);
    for (size_t i = 0; i < n; i++) iv[i] = (int)ids[i];
    char *back = malloc(bytes + 1);
    t0 = nb_now();
    size_t m = nb_tokenizer_decode(t, iv, n, back, bytes + 1);
    double t_dec = nb_now() - t0;
    int ok = m == bytes && !memcmp(back, text, bytes);
    printf("corpus %.2f MB, %zu documents; vocab %d\n", bytes / 1e6, nd, vocab);
    printf("train: %.3f s\n", t_train);
    printf("encode: %zu tokens (%.2f bytes/token); first pass (cold cache) %.1f MB/s, warm %.1f MB/s\n", n,
           (double)bytes / n, bytes / 1e6 / best_cold, bytes / 1e6 / best_warm);
    printf("decode: %.1f MB/s; round trip %s\n", bytes / 1e6 / t_dec, ok ? "exact" : "MISMATCH");
    nb_tokenizer_free(t);
    free(ids); free(iv); free(back); free(dp); free(dl); free(text); free(off);
    return ok ? 0 : 1;
}
