/* The CPU backend's fp32 products in an order fixed by the shape alone, on the libraries a backend
 * names (nb_cpu_config), and the time spent in them (nb_gemm_timing). */
#include <omp.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include "backend/cpu.h"
#include "util/clock.h"
#include "util/error.h"

static atomic_int timing_on;
static atomic_llong timed_ns;           /* integer nanoseconds: C11 has no atomic add on doubles */
static atomic_llong routing_ns;         /* the same for nb_routing_begin/end */
static _Thread_local int gemm_depth;    /* > 1 inside a GEMM that another GEMM entry point runs */

void nb_gemm_timing(int on) {
    atomic_store(&timed_ns, 0);
    atomic_store(&routing_ns, 0);
    atomic_store(&timing_on, on);
}

double nb_gemm_seconds(void) { return (double)atomic_load(&timed_ns) * 1e-9; }
double nb_routing_seconds(void) { return (double)atomic_load(&routing_ns) * 1e-9; }

double nb_routing_begin(void) {
    return atomic_load_explicit(&timing_on, memory_order_relaxed) ? nb_now() : -1.0;
}

void nb_routing_end(double start) {
    if (start >= 0) atomic_fetch_add_explicit(&routing_ns, (long long)((nb_now() - start) * 1e9), memory_order_relaxed);
}

double nb_cpu_time_begin(void) {
    if (gemm_depth++ || !atomic_load_explicit(&timing_on, memory_order_relaxed)) return -1.0;
    return nb_now();
}

void nb_cpu_time_end(double start) {
    gemm_depth--;
    if (start < 0) return;
    const double share = (nb_now() - start) / omp_get_num_threads();
    atomic_fetch_add_explicit(&timed_ns, (long long)(share * 1e9), memory_order_relaxed);
}

/* ---- Results independent of the thread count ----
 * The libraries' own threading changes the order of C's sums with the thread count: oneDNN 2.6 splits
 * the inner dimension K over its threads when C is small for their number (M <= 128, N = 512,
 * K >= 1536 at 8 threads; its M = 1 path already at 2), and OpenBLAS 0.3.21's threaded driver blocks
 * K otherwise than its single-threaded one where K is not a multiple of 256 (A^T B with K = 500, 600,
 * 1000, 3000 rows at 2 threads). So outside a parallel region nb_gemm cuts C into tiles fixed by M and
 * N alone, each one single-threaded library call, and hands the tiles to the OpenMP threads: an
 * element's sum is that call's, whatever the thread count. Only oneDNN with a large C (at least
 * ONEDNN_THREADS_MIN elements) keeps its own threads, which then split C, not K (the same bits at 1 to
 * 16 threads; tiles there cost 4-6% of medium's step: BENCHMARKS.md, "Thread counts"). Inside a
 * parallel region (attention's blocks, the optimizers' matrices: one product per thread) it is one
 * call, which the libraries run on the calling thread. docs/executor.md, "Thread counts". */
enum { TILE_MIN = 256, TILES_MAX = 16, ONEDNN_THREADS_MIN = 1 << 20 };

typedef struct {
    nb_cpu_gemm_fn fn;  /* the library that runs the product */
    int trans_a, trans_b, M, N, K;
    float alpha, beta;
    const float *A, *B;
    float *C;
    int lda, ldb, ldc;
} gemm_call;

/* Tiles of at least TILE_MIN rows and columns (where C has them), halving the longer side until there
 * are TILES_MAX of them: large tiles, as each call packs its own panels of A and B; sides stay
 * multiples of 16 (the kernels' register blocks). */
static void tile_plan(int M, int N, int *tm, int *tn) {
    int m = M, n = N;
    while ((long)((M + m - 1) / m) * ((N + n - 1) / n) < TILES_MAX) {
        int *side = m >= n ? &m : &n;
        if (*side < 2 * TILE_MIN) side = side == &m ? &n : &m;
        if (*side < 2 * TILE_MIN) break;
        *side = ((*side + 1) / 2 + 15) / 16 * 16;
    }
    *tm = m;
    *tn = n;
}

/* Tile t of the plan: C's block at (i, j), from op(A)'s rows i.. and op(B)'s columns j... */
static int gemm_tile(const gemm_call *g, int t, int tm, int tn, int cols) {
    const int i = t / cols * tm, j = t % cols * tn;
    const float *A = g->trans_a ? g->A + i : g->A + (size_t)i * g->lda;
    const float *B = g->trans_b ? g->B + (size_t)j * g->ldb : g->B + j;
    return g->fn(g->trans_a, g->trans_b, g->M - i < tm ? g->M - i : tm, g->N - j < tn ? g->N - j : tn, g->K, g->alpha,
                 A, g->lda, B, g->ldb, g->beta, g->C + (size_t)i * g->ldc + j, g->ldc);
}

/* Tiles 0..n-1 one after another, the library on this thread only: in an active parallel region it takes
 * one thread by itself; elsewhere this thread's OpenMP thread count is 1 meanwhile (a per-thread setting, so
 * other threads' products are untouched). */
static int gemm_tiles_here(const gemm_call *g, int n, int tm, int tn, int cols) {
    const int threads = omp_in_parallel() ? 1 : omp_get_max_threads();
    int rc = 0;
    if (threads > 1) omp_set_num_threads(1);
    for (int t = 0; t < n && !rc; t++) rc = gemm_tile(g, t, tm, tn, cols);
    if (threads > 1) omp_set_num_threads(threads);
    return rc;
}

static int gemm_fixed_order(const nb_cpu_config *c, const gemm_call *g) {
    if (g->fn == c->tn && c->tn_own_order)  /* independent of the thread count by construction */
        return g->fn(g->trans_a, g->trans_b, g->M, g->N, g->K, g->alpha, g->A, g->lda, g->B, g->ldb, g->beta, g->C,
                     g->ldc);
    if (omp_get_level() > 0) return gemm_tiles_here(g, 1, g->M, g->N, 1);  /* the caller's region: one per thread */
    if (g->fn == c->fn && c->fn_is_onednn && (long)g->M * g->N >= ONEDNN_THREADS_MIN)  /* its threads split C */
        return g->fn(g->trans_a, g->trans_b, g->M, g->N, g->K, g->alpha, g->A, g->lda, g->B, g->ldb, g->beta, g->C,
                     g->ldc);
    int tm, tn;
    tile_plan(g->M, g->N, &tm, &tn);
    const int cols = (g->N + tn - 1) / tn, n = (g->M + tm - 1) / tm * cols;
    const int threads = omp_get_max_threads() < n ? omp_get_max_threads() : n;
    if (threads <= 1) return gemm_tiles_here(g, n, tm, tn, cols);
    int failed = 0;
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads) reduction(| : failed)
    for (int t = 0; t < n; t++) failed |= gemm_tile(g, t, tm, tn, cols) != 0;
    return failed ? -1 : 0;
}

int nb_cpu_gemm(const nb_cpu_config *c, int trans_a, int trans_b, int M, int N, int K, float alpha, const float *A,
                int lda, const float *B, int ldb, float beta, float *C, int ldc) {
    if (M == 0 || N == 0) return 0;
    const double start = nb_cpu_time_begin();
    const gemm_call g = {trans_a && !trans_b ? c->tn : c->fn, trans_a, trans_b, M, N, K, alpha, beta, A, B, C,
                         lda, ldb, ldc};
    const int rc = gemm_fixed_order(c, &g);
    nb_cpu_time_end(start);
    return rc;
}

/* In tiles, so that the column-wise reads of the upper triangle stay in cache. */
void nb_cpu_mirror_upper(float *C, int N, int ldc) {
    enum { TILE = 64 };
    for (int i0 = 0; i0 < N; i0 += TILE)
        for (int j0 = 0; j0 <= i0; j0 += TILE)
            for (int i = i0; i < i0 + TILE && i < N; i++)
                for (int j = j0; j < j0 + TILE && j < i; j++) C[(size_t)i * ldc + j] = C[(size_t)j * ldc + i];
}

/* C's upper triangle in row panels of NB_SYRK_PANEL rows: panel i is the GEMM
 * op(A)[i, i + p) op(A)[i, N)^T, (N + p) / 2N of a full product's flops (5/8 at N = 512), on the GEMM
 * backend. Measured on one thread (AMD Zen 5, BENCHMARKS.md, "Muon's symmetric products on the GEMM
 * backend"), oneDNN's panels ran Muon's Gram matrices from 256 rows up 1.3-1.6x faster than OpenBLAS's
 * ssyrk, which the environment may hold to AVX2; from 128 rows down a panel is the whole product, which
 * still ran no slower. A panel also computes the part of its diagonal block below the diagonal (reading
 * C there when beta is not 0): nb_cpu_mirror_upper then overwrites it, so only the upper triangle's values
 * matter, as documented. */
int nb_cpu_syrk(const nb_cpu_config *c, int trans, int N, int K, float alpha, const float *A, int lda, float beta,
                float *C, int ldc) {
    if (N == 0) return 0;
    const double start = nb_cpu_time_begin();
    int rc = 0;
    if (K == 0) {  /* an empty sum: C = beta C (a BLAS would refuse the zero leading dimension) */
        for (int i = 0; i < N; i++)
            for (int j = i; j < N; j++) C[(size_t)i * ldc + j] = beta == 0.0f ? 0.0f : beta * C[(size_t)i * ldc + j];
    } else {
        for (int i = 0; i < N && !rc; i += NB_SYRK_PANEL) {
            const int rows = N - i < NB_SYRK_PANEL ? N - i : NB_SYRK_PANEL;
            const float *Ai = trans ? A + i : A + (size_t)i * lda;
            rc = nb_cpu_gemm(c, trans, !trans, rows, N - i, K, alpha, Ai, lda, Ai, lda, beta, C + (size_t)i * ldc + i,
                             ldc);
        }
    }
    nb_cpu_mirror_upper(C, N, ldc);
    nb_cpu_time_end(start);
    return rc;
}
