/* The GEMM time counter behind `nobubble bench`'s share outside GEMMs (src/backend/backend.h): off, it
 * counts nothing; on, what it counts lies between zero and the wall time around the calls, a bf16 GEMM
 * that widens to nb_gemm counts once (counted twice, the inner product's time would exceed the outer
 * wall time), and GEMMs made by the threads of a parallel region count wall / threads each (counted in
 * full, two threads' times would exceed the region's wall time). The bounds hold on any machine at any
 * speed: each counted interval lies inside the measured one. */
#include <omp.h>
#include <stdlib.h>
#include "backend/backend.h"
#include "check.h"
#include "util/clock.h"

enum { N = 384 };

static float *filled(size_t n, float v) {
    float *x = malloc(sizeof(float) * n);
    for (size_t i = 0; i < n; i++) x[i] = v * (float)(i % 7 + 1);
    return x;
}

static nb_backend *be;

static void gemm_square(const float *A, const float *B, float *C) {
    nb_gemm(be, 0, 0, N, N, N, 1.0f, A, N, B, N, 0.0f, C, N);
}

int main(void) {
    /* the path whose nb_gemm_bf16 runs nb_gemm inside */
    CHECK(nb_backend_open("tiles:widen", &be) == 0, "%s", nb_last_error());
    float *A = filled((size_t)N * N, 0.5f), *B = filled((size_t)N * N, 0.25f), *C = filled((size_t)2 * N * N, 0);
    nb_bf16 *A16 = malloc(sizeof(nb_bf16) * N * N), *B16 = malloc(sizeof(nb_bf16) * N * N);
    nb_bf16_cast(A16, A, (size_t)N * N);
    nb_bf16_cast(B16, B, (size_t)N * N);

    nb_gemm_timing(0);
    gemm_square(A, B, C);
    nb_gemm_bf16(be, 0, 0, N, N, N, 1.0f, A16, N, B16, N, 0.0f, C, N);
    CHECK(nb_gemm_seconds() == 0.0, "off: nothing counted (%g s)", nb_gemm_seconds());

    nb_gemm_timing(1);
    double t0 = nb_now();
    for (int i = 0; i < 3; i++) gemm_square(A, B, C);
    double wall = nb_now() - t0, got = nb_gemm_seconds();
    CHECK(got > 0 && got <= wall, "serial: counted %g s of %g s wall", got, wall);

    nb_gemm_timing(1);
    CHECK(nb_gemm_seconds() == 0.0, "turning it on zeroes the count");
    t0 = nb_now();
    nb_gemm_bf16(be, 0, 0, N, N, N, 1.0f, A16, N, B16, N, 0.0f, C, N);
    wall = nb_now() - t0;
    got = nb_gemm_seconds();
    CHECK(got > 0 && got <= wall, "a widened bf16 GEMM counts once: %g s of %g s wall", got, wall);

    nb_gemm_timing(1);
    t0 = nb_now();
#pragma omp parallel num_threads(2)
    gemm_square(A, B, C + (size_t)omp_get_thread_num() * N * N);
    wall = nb_now() - t0;
    got = nb_gemm_seconds();
    CHECK(got > 0 && got <= wall, "in a parallel region each thread counts wall / threads: %g s of %g s wall", got,
          wall);
    nb_gemm_timing(0);
    nb_backend_close(be);
    free(A); free(B); free(C); free(A16); free(B16);
    return check_summary();
}
