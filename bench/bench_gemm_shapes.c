/* nb_gemm's backends on the products of one training step, side by side: for each shape, the backends
 * (default hybrid and tiles) alternate call by call, 11 calls each, and the table gives each one's
 * GFLOP/s (median call) and the speedup of each later one over the first (the first's median time over
 * its), so drifts of a shared machine touch all alike.
 * Shapes are the linear layers' of a step of T tokens: forward x W^T (N T), input gradient dy W (N N),
 * weight gradient dy^T x (T N, beta 1), for the given (in, out) pairs.
 * Usage: bench_gemm_shapes [--backends a,b] TOKENS IN:OUT [IN:OUT ...]
 *   e.g. bench_gemm_shapes 4096 512:512 512:256 512:1536 1536:512 512:8192   (medium at B 8 x T 512) */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "backend/backend.h"
#include "util/clock.h"
#include "util/error.h"

enum { CALLS = 11, MAX_BACKENDS = 4 };

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static float *random_matrix(size_t n) {
    float *x = malloc(sizeof(float) * n);
    if (!x) {
        fprintf(stderr, "bench_gemm_shapes: out of memory\n");
        exit(1);
    }
    unsigned s = 12345;
    for (size_t i = 0; i < n; i++) {
        s = s * 1103515245u + 12345u;
        x[i] = (float)((s >> 9) & 0xffff) / 65536.0f - 0.5f;
    }
    return x;
}

/* One product for every backend, alternating; prints one row. */
static nb_backend *backends[MAX_BACKENDS];

static void compare(const char *what, int ta, int tb, int M, int N, int K, float beta, int n_names) {
    const int lda = ta ? M : K, ldb = tb ? K : N;
    float *A = random_matrix((size_t)M * K), *B = random_matrix((size_t)K * N), *C = random_matrix((size_t)M * N);
    double t[MAX_BACKENDS][CALLS];
    for (int c = 0; c < CALLS; c++)
        for (int b = 0; b < n_names; b++) {
            const double start = nb_now();
            nb_gemm(backends[b], ta, tb, M, N, K, 1.0f, A, lda, B, ldb, beta, C, N);
            t[b][c] = nb_now() - start;
        }
    const double gflop = 2.0 * M * N * K * 1e-9;
    printf("| %s | %c%c | %d | %d | %d |", what, ta ? 'T' : 'N', tb ? 'T' : 'N', M, N, K);
    double first = 0;
    for (int b = 0; b < n_names; b++) {
        qsort(t[b], CALLS, sizeof(double), cmp_double);
        if (b == 0) first = t[b][CALLS / 2];
        printf(" %.1f |", gflop / t[b][CALLS / 2]);
    }
    for (int b = 1; b < n_names; b++) printf(" %.2f |", first / t[b][CALLS / 2]);
    printf("\n");
    free(A);
    free(B);
    free(C);
}

int main(int argc, char **argv) {
    char *names[MAX_BACKENDS] = {"hybrid", "tiles"};
    int n_names = 2, arg = 1;
    if (argc > 2 && !strcmp(argv[1], "--backends")) {
        n_names = 0;
        for (char *tok = strtok(argv[2], ","); tok && n_names < MAX_BACKENDS; tok = strtok(NULL, ","))
            names[n_names++] = tok;
        arg = 3;
    }
    for (int b = 0; b < n_names; b++)
        if (nb_backend_open(names[b], &backends[b])) {
            fprintf(stderr, "bench_gemm_shapes: --backends: %s\n", nb_last_error());
            return 2;
        }
    if (argc - arg < 2 || atoi(argv[arg]) <= 0) {
        fprintf(stderr, "usage: bench_gemm_shapes [--backends a,b] TOKENS IN:OUT [IN:OUT ...]\n");
        return 2;
    }
    const int tokens = atoi(argv[arg]);
    printf("%d OpenMP threads, %d tokens; GFLOP/s of the median of %d alternating calls\n\n", omp_get_max_threads(),
           tokens, CALLS);
    printf("| product | op | M | N | K |");
    for (int b = 0; b < n_names; b++) printf(" %s |", names[b]);
    for (int b = 1; b < n_names; b++) printf(" %s speedup |", names[b]);
    printf("\n|---|---|---|---|---|");
    for (int b = 0; b < 2 * n_names - 1; b++) printf("---|");
    printf("\n");
    for (int i = arg + 1; i < argc; i++) {
        int in, out;
        if (sscanf(argv[i], "%d:%d", &in, &out) != 2 || in <= 0 || out <= 0) {
            fprintf(stderr, "bench_gemm_shapes: '%s': expected IN:OUT, two positive integers\n", argv[i]);
            return 2;
        }
        char what[64];
        snprintf(what, sizeof what, "%d->%d forward", in, out);
        compare(what, 0, 1, tokens, out, in, 0.0f, n_names);
        snprintf(what, sizeof what, "%d->%d input grad", in, out);
        compare(what, 0, 0, tokens, in, out, 0.0f, n_names);
        snprintf(what, sizeof what, "%d->%d weight grad", in, out);
        compare(what, 1, 0, out, in, tokens, 1.0f, n_names);
    }
    return 0;
}
