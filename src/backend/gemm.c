/* Dispatch of nb_gemm to the chosen backend. */
#include <omp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include "backend/dnnl_matmul.h"
#include "backend/gemm.h"
#include "util/clock.h"
#include "util/error.h"

typedef void (*gemm_fn)(int, int, int, int, int, float, const float *, int, const float *, int, float, float *, int);

/* nb_gemm_tn_tiles under gemm_fn's signature (only ever called for A^T B). */
static void tn_tiles(int trans_a, int trans_b, int M, int N, int K, float alpha, const float *A, int lda,
                     const float *B, int ldb, float beta, float *C, int ldc) {
    (void)trans_a, (void)trans_b;
    nb_gemm_tn_tiles(M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

/* Each backend names who runs A^T B (tn) and who runs the other products (fn).
 * - "hybrid": oneDNN 2.6's sgemm runs C = A^T B at about half its usual speed when A is tall and C
 *   narrow (weight gradients such as the LM head's), where OpenBLAS does not (measured on the
 *   development machine, see BENCHMARKS.md), so those go to OpenBLAS.
 * - "matmul" is hybrid whose large products A B and A B^T run oneDNN's matmul primitive (its brgemm
 *   kernels; matmul_wanted below), measured no faster than hybrid on a whole step, so not the default
 *   (BENCHMARKS.md, "oneDNN's matmul primitive in fp32").
 * - "tiles" is hybrid whose A^T B run nobubble's own packed register tiles (gemm_tn.c) instead of
 *   OpenBLAS's fixed-order tiles. */
static const struct {
    const char *name, *label;
    gemm_fn fn, tn;
    int matmul;  /* large products through oneDNN's matmul primitive (gemm_fixed_order) */
} backends[] = {
    {"onednn", "oneDNN sgemm", nb_gemm_onednn, nb_gemm_onednn, 0},
    {"openblas", "OpenBLAS sgemm", nb_gemm_openblas, nb_gemm_openblas, 0},
    {"hybrid", "oneDNN sgemm, OpenBLAS for A^T B", nb_gemm_onednn, nb_gemm_openblas, 0},
    {"matmul", "hybrid, oneDNN matmul (brgemm) for large A B and A B^T", nb_gemm_onednn, nb_gemm_openblas, 1},
    {"tiles", "oneDNN sgemm, own register tiles for A^T B", nb_gemm_onednn, tn_tiles, 0},
};

/* The default: tiles where the build targets AVX-512 (BENCHMARKS.md, "Weight gradients on register
 * tiles": its A^T B 1.02-1.24x hybrid's per product, the step's GEMM time 6-15% less against the same
 * non-GEMM time); hybrid elsewhere, where the AVX2 tiles ran at 0.85-1.03x OpenBLAS's AVX2 kernels. */
#if defined(__AVX512F__)
static int active = 4;  /* index into backends */
#else
static int active = 2;
#endif
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
    return nb_fail("GEMM backend '%s': expected onednn, openblas, hybrid, matmul or tiles", name);
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
    gemm_fn fn;  /* the library that runs the product */
    int matmul;  /* large products through oneDNN's matmul primitive where it runs brgemm */
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
static void gemm_tile(const gemm_call *g, int t, int tm, int tn, int cols) {
    const int i = t / cols * tm, j = t % cols * tn;
    const float *A = g->trans_a ? g->A + i : g->A + (size_t)i * g->lda;
    const float *B = g->trans_b ? g->B + (size_t)j * g->ldb : g->B + j;
    g->fn(g->trans_a, g->trans_b, g->M - i < tm ? g->M - i : tm, g->N - j < tn ? g->N - j : tn, g->K, g->alpha, A,
          g->lda, B, g->ldb, g->beta, g->C + (size_t)i * g->ldc + j, g->ldc);
}

/* Tiles 0..n-1 one after another, the library on this thread only: in an active parallel region it takes
 * one thread by itself; elsewhere this thread's OpenMP thread count is 1 meanwhile (a per-thread setting, so
 * other threads' products are untouched). */
static void gemm_tiles_here(const gemm_call *g, int n, int tm, int tn, int cols) {
    const int threads = omp_in_parallel() ? 1 : omp_get_max_threads();
    if (threads > 1) omp_set_num_threads(1);
    for (int t = 0; t < n; t++) gemm_tile(g, t, tm, tn, cols);
    if (threads > 1) omp_set_num_threads(threads);
}

/* The products that "matmul" sends to oneDNN's matmul primitive, by a rule on the shape alone (so that
 * the bits never depend on timing): C large enough for oneDNN's own threads (which split C, never K, for
 * these: 2, 3 and 8 threads against 1 in tests/test_gemm_threads.c, 16 by hand); op(A) = A (for A^T B
 * the brgemm of oneDNN 2.6 splits K at some thread counts, so those stay in OpenBLAS's fixed tiles); at
 * most MATMUL_N_MAX columns, where brgemm beat the sgemm (1.09-1.25x on medium's and smollm-135m's
 * shapes at 2 threads; 0.6-0.98x with 1,536 columns or more: BENCHMARKS.md, "oneDNN's matmul primitive
 * in fp32"). oneDNN 2.6 runs brgemm only on dense matrices; for any other shape the sgemm runs. */
enum { MATMUL_N_MAX = 1024 };

static int matmul_wanted(const gemm_call *g) {
    return !g->trans_a && g->N <= MATMUL_N_MAX && (long)g->M * g->N >= ONEDNN_THREADS_MIN;
}

static void gemm_fixed_order(const gemm_call *g) {
    if (g->fn == tn_tiles) {  /* independent of the thread count by construction */
        nb_gemm_tn_tiles(g->M, g->N, g->K, g->alpha, g->A, g->lda, g->B, g->ldb, g->beta, g->C, g->ldc);
        return;
    }
    if (omp_get_level() > 0) {  /* the caller's region gives each thread its own products */
        gemm_tiles_here(g, 1, g->M, g->N, 1);
        return;
    }
    if (g->matmul && matmul_wanted(g)) {
        const nb_matmul_shape s = {g->trans_a, g->trans_b, g->M, g->N, g->K, g->lda, g->ldb, g->ldc, g->alpha, g->beta, 0};
        if (nb_matmul_run(&s, g->A, g->B, g->C, 1)) return;
    }
    if (g->fn == nb_gemm_onednn && (long)g->M * g->N >= ONEDNN_THREADS_MIN) {  /* its threads split C, not K */
        g->fn(g->trans_a, g->trans_b, g->M, g->N, g->K, g->alpha, g->A, g->lda, g->B, g->ldb, g->beta, g->C, g->ldc);
        return;
    }
    int tm, tn;
    tile_plan(g->M, g->N, &tm, &tn);
    const int cols = (g->N + tn - 1) / tn, n = (g->M + tm - 1) / tm * cols;
    const int threads = omp_get_max_threads() < n ? omp_get_max_threads() : n;
    if (threads <= 1) {
        gemm_tiles_here(g, n, tm, tn, cols);
        return;
    }
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
    for (int t = 0; t < n; t++) gemm_tile(g, t, tm, tn, cols);
}

void nb_gemm(int trans_a, int trans_b, int M, int N, int K, float alpha, const float *A, int lda,
             const float *B, int ldb, float beta, float *C, int ldc) {
    if (M == 0 || N == 0) return;
    pthread_once(&from_env, read_env);
    const double start = nb_gemm_time_begin();
    const gemm_fn fn = trans_a && !trans_b ? backends[active].tn : backends[active].fn;
    const gemm_call g = {fn, backends[active].matmul, trans_a, trans_b, M, N, K, alpha, beta, A, B, C, lda, ldb, ldc};
    gemm_fixed_order(&g);
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

/* C's upper triangle in row panels of NB_SYRK_PANEL rows: panel i is the GEMM
 * op(A)[i, i + p) op(A)[i, N)^T, (N + p) / 2N of a full product's flops (5/8 at N = 512), on the GEMM
 * backend. Measured on one thread (AMD Zen 5, BENCHMARKS.md, "Muon's symmetric products on the GEMM
 * backend"), oneDNN's panels ran Muon's Gram matrices from 256 rows up 1.3-1.6x faster than OpenBLAS's
 * ssyrk, which the environment may hold to AVX2; from 128 rows down a panel is the whole product, which
 * still ran no slower. A panel also computes the part of its diagonal block below the diagonal (reading
 * C there when beta is not 0): nb_mirror_upper then overwrites it, so only the upper triangle's values
 * matter, as documented. */
void nb_syrk(int trans, int N, int K, float alpha, const float *A, int lda, float beta, float *C, int ldc) {
    if (N == 0) return;
    const double start = nb_gemm_time_begin();
    if (K == 0) {  /* an empty sum: C = beta C (a BLAS would refuse the zero leading dimension) */
        for (int i = 0; i < N; i++)
            for (int j = i; j < N; j++) C[(size_t)i * ldc + j] = beta == 0.0f ? 0.0f : beta * C[(size_t)i * ldc + j];
    } else {
        for (int i = 0; i < N; i += NB_SYRK_PANEL) {
            const int rows = N - i < NB_SYRK_PANEL ? N - i : NB_SYRK_PANEL;
            const float *Ai = trans ? A + i : A + (size_t)i * lda;
            nb_gemm(trans, !trans, rows, N - i, K, alpha, Ai, lda, Ai, lda, beta, C + (size_t)i * ldc + i, ldc);
        }
    }
    nb_mirror_upper(C, N, ldc);
    nb_gemm_time_end(start);
}
