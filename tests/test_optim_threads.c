/* Muon, NorMuon and SOAP run their matrices one per thread, each GEMM then on one thread: the steps must
 * be bitwise the same whatever the number of threads (1, 2 or 3). */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "check.h"
#include "nobubble/optim.h"

enum { STEPS = 12 };

static void run(nb_optimizer_kind kind, int threads, const nb_tensor *t, int n_t, size_t n, float *d_out) {
    omp_set_num_threads(threads);
    nb_optim_params p = nb_optim_defaults(kind);
    p.weight_decay = 0.1f;
    p.precond_every = 4;
    nb_optimizer *o;
    CHECK(nb_optimizer_create(&o, &p, t, n_t, n, NULL) == 0, "%s", nb_last_error());
    float *w = malloc(sizeof(float) * n), *g = malloc(sizeof(float) * n);
    srand(3);
    for (size_t i = 0; i < n; i++) w[i] = (float)rand() / RAND_MAX - 0.5f;
    for (int step = 0; step < STEPS; step++) {
        for (size_t i = 0; i < n; i++) g[i] = (float)rand() / RAND_MAX - 0.5f;
        nb_optimizer_step(o, g, w, 0.01f, 0.002f, d_out + (size_t)step * n);
        for (size_t i = 0; i < n; i++) w[i] -= d_out[(size_t)step * n + i];
    }
    free(w);
    free(g);
    nb_optimizer_free(o);
}

int main(void) {
    /* matrices of several shapes (square, wide, tall), an embedding and a gain */
    nb_tensor t[6] = {
        {.name = "a", .ndim = 2, .shape = {64, 64}, .group = NB_GROUP_MATRIX},
        {.name = "b", .ndim = 2, .shape = {48, 96}, .group = NB_GROUP_MATRIX},
        {.name = "c", .ndim = 2, .shape = {96, 48}, .group = NB_GROUP_MATRIX},
        {.name = "d", .ndim = 2, .shape = {32, 32}, .group = NB_GROUP_MATRIX},
        {.name = "e", .ndim = 2, .shape = {40, 16}, .group = NB_GROUP_EMBED},
        {.name = "f", .ndim = 1, .shape = {16, 0}, .group = NB_GROUP_GAIN},
    };
    size_t n = 0;
    for (int i = 0; i < 6; i++) {
        t[i].numel = (size_t)t[i].shape[0] * (t[i].ndim == 2 ? (size_t)t[i].shape[1] : 1);
        t[i].offset = n;
        n += t[i].numel;
    }
    nb_optimizer_kind kinds[3] = {NB_OPT_MUON, NB_OPT_SOAP, NB_OPT_NORMUON};
    for (int k = 0; k < 3; k++) {
        float *d1 = malloc(sizeof(float) * n * STEPS), *dk = malloc(sizeof(float) * n * STEPS);
        run(kinds[k], 1, t, 6, n, d1);
        for (int threads = 2; threads <= 3; threads++) {
            run(kinds[k], threads, t, 6, n, dk);
            CHECK(memcmp(d1, dk, sizeof(float) * n * STEPS) == 0, "%s: %d threads give bitwise the steps of 1 thread",
                  nb_optimizer_name(kinds[k]), threads);
        }
        free(d1);
        free(dk);
    }
    return check_summary();
}
