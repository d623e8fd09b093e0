/* nb_gemm's results do not depend on the OpenMP thread count (src/backend/gemm.c, "Results independent
 * of the thread count"): for every backend and transpose, on the shapes where a library's own threading
 * changes the order of a sum (oneDNN 2.6 splits K when C is small for its threads: M <= 128, N = 512,
 * K >= 1536 at 8 threads; its M = 1 path at 2 threads; OpenBLAS 0.3.21's threaded driver blocks a K of
 * 600 otherwise than its single-threaded one), on a C that is one tile (run on the calling
 * thread), on odd shapes that leave partial tiles, on ones cut into many tiles, and on a C large enough
 * for oneDNN's own threads (which split C, not K), C at 2, 3 and 8 threads is bitwise C at 1 thread. Each C is
 * also checked against a double-precision product of the same values (float32 accumulation's bound),
 * with padded strides whose padding must stay untouched, so that a tile put in the wrong place fails. */
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "backend/backend.h"
#include "check.h"
#include "util/error.h"

typedef struct {
    int ta, tb, M, N, K;
} shape;

static double op(const float *X, int trans, int ld, int r, int c) {
    return trans ? X[(size_t)c * ld + r] : X[(size_t)r * ld + c];
}

/* alpha op(A) op(B) + beta C0 in double, and float32 accumulation's bound on each element's error. */
static void reference(const shape *s, float alpha, float beta, const float *A, int lda, const float *B, int ldb,
                      const float *C0, int ldc, double *want, double *bound) {
    for (int i = 0; i < s->M; i++)
        for (int j = 0; j < s->N; j++) {
            double sum = 0, mag = 0;
            for (int l = 0; l < s->K; l++) {
                const double p = op(A, s->ta, lda, i, l) * op(B, s->tb, ldb, l, j);
                sum += p;
                mag += fabs(p);
            }
            const double c0 = C0[(size_t)i * ldc + j];
            want[(size_t)i * s->N + j] = alpha * sum + beta * c0;
            bound[(size_t)i * s->N + j] = 2.0 * (s->K + 1) * 0x1p-24 * (fabs(alpha) * mag + fabs(beta * c0)) + 1e-30;
        }
}

/* C against the reference, and the padding of C's rows. */
static void compare(const char *what, const shape *s, const double *want, const double *bound, const float *C0,
                    const float *C, int ldc) {
    double worst = 0;
    int pad_ok = 1;
    for (int i = 0; i < s->M; i++) {
        for (int j = 0; j < s->N; j++) {
            const size_t at = (size_t)i * s->N + j;
            const double err = fabs(C[(size_t)i * ldc + j] - want[at]) / bound[at];
            if (!(err <= worst)) worst = isnan(err) ? INFINITY : err;
        }
        for (int j = s->N; j < ldc; j++) pad_ok &= C[(size_t)i * ldc + j] == C0[(size_t)i * ldc + j];
    }
    CHECK(worst <= 1.0, "%s %c%c M=%d N=%d K=%d: error %.3g of the float32 bound", what, s->ta ? 'T' : 'N',
          s->tb ? 'T' : 'N', s->M, s->N, s->K, worst);
    CHECK(pad_ok, "%s %c%c M=%d N=%d K=%d: the row padding is untouched", what, s->ta ? 'T' : 'N', s->tb ? 'T' : 'N',
          s->M, s->N, s->K);
}

static float *filled(size_t n, float scale, float phase) {
    float *x = malloc(sizeof(float) * (n ? n : 1));
    for (size_t i = 0; i < n; i++) x[i] = scale * sinf(0.61f * (float)i + phase);
    return x;
}

/* For each backend: C at 1 thread against the reference, at 2, 3 and 8 threads against C at 1 thread.
 * Padded strides (pad = 1) or dense matrices (pad = 0: the only ones oneDNN 2.6's brgemm takes). */
static void check_shape(const shape *s, int pad) {
    const int a_rows = s->ta ? s->K : s->M, a_cols = s->ta ? s->M : s->K;
    const int b_rows = s->tb ? s->N : s->K, b_cols = s->tb ? s->K : s->N;
    const int lda = a_cols + 3 * pad, ldb = b_cols + pad, ldc = s->N + 2 * pad;
    const float alpha = 0.75f, beta = 0.5f;
    const size_t c_len = (size_t)s->M * ldc;
    float *A = filled((size_t)a_rows * lda, 1.0f, 0.3f), *B = filled((size_t)b_rows * ldb, 0.5f, 1.1f);
    float *C0 = filled(c_len, 2.0f, 2.7f), *C1 = malloc(sizeof(float) * c_len), *Ck = malloc(sizeof(float) * c_len);
    double *want = malloc(sizeof(double) * (size_t)s->M * s->N), *bound = malloc(sizeof(double) * (size_t)s->M * s->N);
    reference(s, alpha, beta, A, lda, B, ldb, C0, ldc, want, bound);
    const char *backends[] = {"hybrid", "onednn", "openblas", "tiles"};
    const int threads[] = {2, 3, 8};
    for (int b = 0; b < 4; b++) {
        nb_backend *be;
        CHECK(nb_backend_open(backends[b], &be) == 0, "%s", nb_last_error());
        memcpy(C1, C0, sizeof(float) * c_len);
        omp_set_num_threads(1);
        nb_gemm(be, s->ta, s->tb, s->M, s->N, s->K, alpha, A, lda, B, ldb, beta, C1, ldc);
        compare(backends[b], s, want, bound, C0, C1, ldc);
        for (int k = 0; k < 3; k++) {
            memcpy(Ck, C0, sizeof(float) * c_len);
            omp_set_num_threads(threads[k]);
            nb_gemm(be, s->ta, s->tb, s->M, s->N, s->K, alpha, A, lda, B, ldb, beta, Ck, ldc);
            CHECK(memcmp(C1, Ck, sizeof(float) * c_len) == 0, "%s %c%c M=%d N=%d K=%d: %d threads give bitwise C of 1 thread",
                  backends[b], s->ta ? 'T' : 'N', s->tb ? 'T' : 'N', s->M, s->N, s->K, threads[k]);
        }
        nb_backend_close(be);
    }
    free(A);
    free(B);
    free(C0);
    free(C1);
    free(Ck);
    free(want);
    free(bound);
}

int main(void) {
    const shape shapes[] = {
        {0, 0, 64, 512, 1536}, {0, 1, 64, 512, 1536}, {0, 0, 64, 512, 8192}, /* oneDNN splits K at 8 threads */
        {1, 0, 512, 64, 1536}, {1, 1, 64, 512, 1536},                        /* the other transposes */
        {0, 1, 64, 256, 1536}, {0, 0, 1, 256, 1536},                         /* one tile */
        {0, 0, 1, 512, 1536},  {0, 1, 1, 700, 512},                          /* M = 1 */
        {0, 1, 300, 700, 100}, {1, 0, 700, 300, 257},                        /* partial tiles */
        {0, 1, 1008, 1000, 32}, {1, 0, 1000, 544, 96},                       /* many tiles */
        {0, 1, 2048, 512, 1536}, {0, 0, 1024, 1024, 600},                    /* oneDNN's threads (C >= 2^20) */
        {1, 0, 512, 512, 600},                                                /* OpenBLAS threaded: other K blocks */
    };
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) check_shape(&shapes[i], 1);
    /* Dense matrices: large ones (C >= 2^20, oneDNN's own threads), both transposes of B, few and many rows
     * per thread, and small ones. */
    const shape dense[] = {
        {0, 1, 1024, 1024, 256}, {0, 0, 2048, 512, 96}, {0, 1, 4096, 256, 40}, {0, 0, 1040, 1024, 33},
        {0, 0, 16384, 64, 24}, {0, 1, 1024, 1536, 64}, {1, 0, 1024, 1024, 48}, {0, 0, 300, 700, 100},
    };
    for (size_t i = 0; i < sizeof dense / sizeof dense[0]; i++) check_shape(&dense[i], 0);
    return check_summary();
}
