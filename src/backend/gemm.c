/* Dispatch of nb_gemm to the chosen backend. */
#include <omp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include "backend/gemm.h"
#include "util/clock.h"
#include "util/error.h"

typedef void (*gemm_fn)(int, int, int, int, int, float, const float *, int, const float *, int, float, float *, int);

/* oneDNN 2.6's sgemm runs C = A^T B at about half its usual speed when A is tall and C
 * narrow (weight gradients such as the LM head's), where OpenBLAS does not (measured on
 * the development machine, see BENCHMARKS.md); "hybrid" sends those products to OpenBLAS. */
static void gemm_hybrid(int trans_a, int trans_b, int M, int N, int K, float alpha, const float *A, int lda,
                        const float *B, int ldb, float beta, float *C, int ldc) {
    if (trans_a && !trans_b) nb_gemm_openblas(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    else nb_gemm_onednn(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

static const struct {
    const char *name, *label;
    gemm_fn fn;
} backends[] = {
    {"onednn", "oneDNN sgemm", nb_gemm_onednn},
    {"openblas", "OpenBLAS sgemm", nb_gemm_openblas},
    {"hybrid", "oneDNN sgemm, OpenBLAS for A^T B", gemm_hybrid},
};

/* The default: hybrid, the fastest of the three on the development machine (BENCHMARKS.md). */
static int active = 2;  /* index into backends */
static pthread_once_t from_env = PTHREAD_ONCE_INIT;

/* NB_GEMM is read once, before the first GEMM; an unknown name keeps the default here (the nobubble
 * binary refuses it before any command runs: src/cli/main.c). */
static void read_env(void) {
    const char *e = getenv("NB_GEMM");
    if (e && *e) nb_gemm_select(e);
}

int nb_gemm_select(const char *name) {
    for (size_t i = 0; i < sizeof backends / sizeof backends[0]; i++)
        if (!strcmp(name, backends[i].name)) {
            active = (int)i;
            return 0;
        }
    return nb_fail("GEMM backend '%s': expected onednn, openblas or hybrid", name);
}

const char *nb_gemm_backend(void) {
    pthread_once(&from_env, read_env);
    return backends[active].label;
}

static atomic_int timing_on;
static atomic_llong timed_ns;           /* integer nanoseconds: C11 has no atomic add on doubles */
static _Thread_local int gemm_depth;    /* > 1 inside a GEMM that another GEMM entry point runs */

void nb_gemm_timing(int on) {
    atomic_store(&timed_ns, 0);
    atomic_store(&timing_on, on);
}

double nb_gemm_seconds(void) { return (double)atomic_load(&timed_ns) * 1e-9; }

double nb_gemm_time_begin(void) {
    if (gemm_depth++ || !atomic_load_explicit(&timing_on, memory_order_relaxed)) return -1.0;
    return nb_now();
}

void nb_gemm_time_end(double start) {
    gemm_depth--;
    if (start < 0) return;
    const double share = (nb_now() - start) / omp_get_num_threads();
    atomic_fetch_add_explicit(&timed_ns, (long long)(share * 1e9), memory_order_relaxed);
}

void nb_gemm(int trans_a, int trans_b, int M, int N, int K, float alpha, const float *A, int lda,
             const float *B, int ldb, float beta, float *C, int ldc) {
    if (M == 0 || N == 0) return;
    pthread_once(&from_env, read_env);
    const double start = nb_gemm_time_begin();
    backends[active].fn(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    nb_gemm_time_end(start);
}

/* In tiles, so that the column-wise reads of the upper triangle stay in cache. */
void nb_mirror_upper(float *C, int N, int ldc) {
    enum { TILE = 64 };
    for (int i0 = 0; i0 < N; i0 += TILE)
        for (int j0 = 0; j0 <= i0; j0 += TILE)
            for (int i = i0; i < i0 + TILE && i < N; i++)
                for (int j = j0; j < j0 + TILE && j < i; j++) C[(size_t)i * ldc + j] = C[(size_t)j * ldc + i];
}

void nb_syrk(int trans, int N, int K, float alpha, const float *A, int lda, float beta, float *C, int ldc) {
    if (N == 0) return;
    const double start = nb_gemm_time_begin();
    if (K == 0) {  /* an empty sum: C = beta C (a BLAS would refuse the zero leading dimension) */
        for (int i = 0; i < N; i++)
            for (int j = i; j < N; j++) C[(size_t)i * ldc + j] = beta == 0.0f ? 0.0f : beta * C[(size_t)i * ldc + j];
    } else {
        nb_syrk_openblas(trans, N, K, alpha, A, lda, beta, C, ldc);
    }
    nb_mirror_upper(C, N, ldc);
    nb_gemm_time_end(start);
}
