/* nb_cpu_gemm_tn_tiles: C = alpha * A^T B + beta * C (A stored K x M, B K x N, row-major) on nobubble's own
 * register tiles: the weight gradients dW += dy^T x.
 *
 * Why not a library: oneDNN 2.6's sgemm runs A^T B at half its usual speed, and OpenBLAS, which
 * "hybrid" uses for it, must run single-threaded in tiles fixed by M and N so that the sums do not
 * depend on the thread count; each tile packs its own panels. Here every element of C is defined by
 * itself: one chain of fused multiply-adds over k = 0..K-1 in order, starting from 0, then
 * alpha * sum + beta * C (C not read when beta is 0). Blocking and threads only decide who computes
 * which element when, never its value, so the blocks can follow the thread count and the caches.
 *
 * Blocking (the classic one): C in tiles of at most MC x NC, spread over the threads; for each tile, K in
 * slices of KC. A slice of B is copied into panels of PANEL columns ([k][PANEL], one 32 KiB panel per
 * register-tile column, read from L1 by every row tile), a slice of A into micro-panels of R rows
 * ([k][R]: the R values a k step broadcasts lie side by side). The partial sums stay in a float scratch
 * tile between slices, stored and reloaded exactly, so each element's chain over k is unbroken. */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "backend/cpu.h"
#include "util/error.h"
#include "backend/vec.h"
#include "util/thread_buffer.h"

/* The register tile: R rows x CV vectors of VW floats (R * CV accumulators, CV loads and R broadcasts
 * per k). AVX-512's 32 registers hold 6 x 4 (24 accumulators); AVX2's 16 hold 6 x 2. */
#if VW == 16
#define CV 4
#else
#define CV 2
#endif
enum {
    R = 6,
    PANEL = VW * CV, /* columns of a B panel and of a register tile */
    KC = 128,        /* k per slice: a B panel is KC x PANEL floats (32 KiB on AVX-512) */
    MC = 6 * 44,     /* rows of C per tile at most (264, a multiple of R) */
    NC = 4 * 64,     /* columns of C per tile at most (a multiple of PANEL) */
};

typedef struct {
    float *A;   /* [MC / R][KC][R]: the slice of A, micro-panel after micro-panel, zero past the tile's rows */
    float *B;   /* [NC / PANEL][KC][PANEL]: the slice of B, panel after panel, zero past the tile's columns */
    float *acc; /* [MC][NC]: the tile's sums so far */
} tn_scratch;

/* This thread's scratch, kept between calls: allocating it per call cost page faults in every weight
 * gradient (glibc gives large blocks back to the system on free; perf showed the faults). */
static nb_thread_buffer scratch_buffer;

/* This thread's scratch; 0, or -1 after nb_fail when it cannot be had. */
static int scratch_get(tn_scratch *s) {
    const size_t a = (size_t)MC * KC + 16, b = (size_t)KC * NC, c = (size_t)MC * NC; /* A: 2 floats of slack, a line */
    float *mem = nb_thread_buffer_get(&scratch_buffer, (a + b + c) * sizeof(float));
    if (!mem) return nb_fail("out of memory: the A^T B tiles' scratch (%zu bytes per thread)", (a + b + c) * sizeof(float));
    *s = (tn_scratch){.B = mem, .A = mem + b, .acc = mem + b + a};
    return 0;
}

static int ceil_div(int a, int b) { return (a + b - 1) / b; }

typedef struct {
    int M, N, K;
    float alpha, beta;
    const float *A, *B;
    float *C;
    int lda, ldb, ldc;
    int mc, nc; /* the tiles' size: at most MC x NC */
} tn_call;

/* One register tile: acc[R][PANEL] (row stride NC) over kc steps of the packed slices; from zero when
 * first, else from the sums stored before. */
static void micro_tile(const float *a, const float *b, int kc, int first, float *acc) {
    vec c[R][CV];
    for (int r = 0; r < R; r++)
        for (int v = 0; v < CV; v++) c[r][v] = first ? (vec){0} : *(const vec *)(acc + r * NC + v * VW);
    for (int k = 0; k < kc; k++, a += R, b += PANEL) {
        vec bv[CV];
        for (int v = 0; v < CV; v++) bv[v] = *(const vec *)(b + v * VW);
        for (int r = 0; r < R; r++) {
            const vec x = splat(a[r]);
            for (int v = 0; v < CV; v++) c[r][v] = fma_v(x, bv[v], c[r][v]);
        }
    }
    for (int r = 0; r < R; r++)
        for (int v = 0; v < CV; v++) *(vec *)(acc + r * NC + v * VW) = c[r][v];
}

/* B's rows k0..k0+kc, columns j0..j0+nc, into panels of PANEL columns (zeros past nc). A row at a
 * time, so that memory is read in order (the few panels take the stores). */
static void pack_b(float *dst, const float *B, int ldb, int k0, int kc, int j0, int nc) {
    const int full = nc / PANEL, w = nc - full * PANEL;
    for (int k = 0; k < kc; k++) {
        const float *src = B + (size_t)(k0 + k) * ldb + j0;
        float *row = dst + (size_t)k * PANEL;
        for (int p = 0; p < full; p++) {
#pragma omp simd
            for (int j = 0; j < PANEL; j++) row[(size_t)p * KC * PANEL + j] = src[p * PANEL + j];
        }
        if (w)
            for (int j = 0; j < PANEL; j++) row[(size_t)full * KC * PANEL + j] = j < w ? src[full * PANEL + j] : 0.0f;
    }
}

/* A's rows k0..k0+kc, columns i0..i0+mc (op(A)'s rows), into micro-panels of R (zeros past mc). A
 * micro-panel at a time, so that the stores run in order (k outside scattered them over all the panels:
 * a third of the time went there, measured with perf). Where op(A) has 8 more rows, each k's R values
 * move as one 8-float copy whose last two land where the next k's go (or, after the last k, in the
 * next micro-panel's first, written after; the scratch has room past the last): 2 instructions
 * instead of 6 scalar moves. */
static void pack_a(float *dst, const float *A, int lda, int M, int k0, int kc, int i0, int mc) {
    for (int p = 0; p * R < mc; p++) {
        const int h = mc - p * R < R ? mc - p * R : R;
        const float *src = A + (size_t)k0 * lda + i0 + p * R;
        float *d = dst + (size_t)p * KC * R;
        if (h == R && i0 + p * R + 8 <= M) {
            for (int k = 0; k < kc; k++, src += lda, d += R) memcpy(d, src, 8 * sizeof(float));
        } else {
            for (int k = 0; k < kc; k++, src += lda, d += R)
                for (int r = 0; r < R; r++) d[r] = r < h ? src[r] : 0.0f;
        }
    }
}

/* The cache lines of slice rows k0..k0+kc (A's columns i0..i0+mc, then B's j0..j0+nc), numbered row by
 * row; lines first..last-1 are asked into L2 while the register tiles work on the slice before. Its
 * gain is small: medians 1.04-1.06x on 512 x 512 x 4,096 and 1,536 x 512 x 4,096 at 1 and 2 threads
 * (4 alternating rounds against a build without it), inside this machine's noise. */
static void prefetch_slice(const tn_call *g, int k0, int kc, int i0, int mc, int j0, int nc, int first, int last) {
    const int la = ceil_div(mc, 16), per_row = la + ceil_div(nc, 16);
    for (int l = first; l < last && l < kc * per_row; l++) {
        const int k = k0 + l / per_row, c = l % per_row;
        const float *x = c < la ? g->A + (size_t)k * g->lda + i0 + c * 16 : g->B + (size_t)k * g->ldb + j0 + (c - la) * 16;
        __builtin_prefetch(x, 0, 2);
    }
}

/* C's tile at (i0, j0): the sums slice by slice, then C = alpha * sum + beta * C. */
static void tn_tile(const tn_call *g, const tn_scratch *s, int i0, int j0) {
    const int mc = g->M - i0 < g->mc ? g->M - i0 : g->mc, nc = g->N - j0 < g->nc ? g->N - j0 : g->nc;
    const int panels = ceil_div(nc, PANEL), rowp = ceil_div(mc, R);
    if (g->K == 0)
        for (int i = 0; i < mc; i++) memset(s->acc + (size_t)i * NC, 0, sizeof(float) * nc);
    for (int k0 = 0; k0 < g->K; k0 += KC) {
        const int kc = g->K - k0 < KC ? g->K - k0 : KC;
        pack_b(s->B, g->B, g->ldb, k0, kc, j0, nc);
        pack_a(s->A, g->A, g->lda, g->M, k0, kc, i0, mc);
        const int next = k0 + kc, nkc = g->K - next < KC ? g->K - next : KC, tiles = panels * rowp;
        const int lines = nkc * (ceil_div(mc, 16) + ceil_div(nc, 16)); /* prefetch_slice's numbering */
        for (int p = 0; p < panels; p++)
            for (int q = 0; q < rowp; q++) {
                const int t = p * rowp + q;
                prefetch_slice(g, next, nkc, i0, mc, j0, nc, (int)((long)lines * t / tiles),
                               (int)((long)lines * (t + 1) / tiles));
                micro_tile(s->A + (size_t)q * KC * R, s->B + (size_t)p * KC * PANEL, kc, k0 == 0,
                           s->acc + (size_t)q * R * NC + p * PANEL);
            }
    }
    const float alpha = g->alpha, beta = g->beta;
    for (int i = 0; i < mc; i++) {
        const float *sum = s->acc + (size_t)i * NC;
        float *c = g->C + (size_t)(i0 + i) * g->ldc + j0;
        if (beta == 0.0f) /* C's old values are not read (BLAS: they may be NaN) */
            for (int j = 0; j < nc; j++) c[j] = alpha * sum[j];
        else
            for (int j = 0; j < nc; j++) c[j] = alpha * sum[j] + beta * c[j];
    }
}

/* Tiles of at most MC x NC, as equal as the register tiles allow (rows a multiple of R, columns of
 * PANEL), split further until every thread has one and, below four per thread, until the threads get
 * equal counts (3 tiles on 2 threads left one idle for a third of the time: 0.94x OpenBLAS on 192 x 576,
 * measured). Any size gives the same bits. */
static int tile_count(int M, int N, int threads, int *mc, int *nc) {
    int tm = ceil_div(M, MC), tn = ceil_div(N, NC), n = 0;
    for (;;) {
        *mc = ceil_div(ceil_div(M, tm), R) * R;
        *nc = ceil_div(ceil_div(N, tn), PANEL) * PANEL;
        n = ceil_div(M, *mc) * ceil_div(N, *nc);
        if (n >= 4 * threads || (n >= threads && n % threads == 0)) break;
        const int rows = ceil_div(M, tm), cols = ceil_div(N, tn);
        if (rows > 4 * R && rows >= cols) tm++;
        else if (cols > PANEL) tn++;
        else if (rows > R) tm++;
        else break;
    }
    return n;
}

int nb_cpu_gemm_tn_tiles(int trans_a, int trans_b, int M, int N, int K, float alpha, const float *A, int lda,
                         const float *B, int ldb, float beta, float *C, int ldc) {
    (void)trans_a, (void)trans_b;  /* only ever called for A^T B */
    if (M <= 0 || N <= 0) return 0;
    const int threads = omp_in_parallel() ? 1 : omp_get_max_threads();
    tn_call g = {M, N, K, alpha, beta, A, B, C, lda, ldb, ldc, MC, NC};
    const int n = tile_count(M, N, threads, &g.mc, &g.nc);
    const int cols = ceil_div(N, g.nc);
    tn_scratch s;
    if (threads <= 1 || n == 1) {
        if (scratch_get(&s)) return -1;
        for (int t = 0; t < n; t++) tn_tile(&g, &s, t / cols * g.mc, t % cols * g.nc);
        return 0;
    }
    int failed = 0;
#pragma omp parallel num_threads(threads < n ? threads : n) private(s) reduction(| : failed)
    {
        failed = scratch_get(&s) != 0;
        /* every thread takes part in the loop (a worksharing loop must be met by all); one without
         * scratch computes nothing and the product is reported failed */
#pragma omp for schedule(dynamic, 1)
        for (int t = 0; t < n; t++)
            if (!failed) tn_tile(&g, &s, t / cols * g.mc, t % cols * g.nc);
    }
    if (failed) return nb_fail("out of memory: the A^T B tiles' scratch");
    return 0;
}
