/* Private to src/backend: the CPU backend's implementation files (cpu.c opens the backends and holds
 * their operation table; gemm.c, gemm_bf16.c, gemm_tn.c, tile.c, tile_bf16.c and the two libraries'
 * files compute). Every function that can fail returns 0, or -1 after nb_fail; cpu.c records the
 * failure in the backend. */
#ifndef NB_BACKEND_CPU_H
#define NB_BACKEND_CPU_H
#include <stddef.h>
#include "backend/backend.h"

/* cpu.c: a CPU backend by name ("tiles", "hybrid:widen"; the name already checked for length), and the
 * build's default name. */
int nb_cpu_open(const char *spec, nb_backend **out);
int nb_cpu_known(const char *spec);  /* 1 when spec names a CPU backend */
const char *nb_cpu_default_name(void);

/* The host's memory, as every backend whose memory is the host's hands it out (the ops' alloc, free,
 * to_host and from_host). */
void *nb_cpu_alloc(const nb_backend *b, size_t bytes, const char *what);
void nb_cpu_free(const nb_backend *b, void *p);
void nb_cpu_copy(const nb_backend *b, void *dst, const void *src, size_t bytes);
void nb_cpu_zero(const nb_backend *b, void *mem, size_t bytes);
/* The host's arithmetic on memory (nb_backend_add, _scale, _sum_squares). */
void nb_cpu_add(const nb_backend *b, float *dst, const float *src, size_t n);
void nb_cpu_scale(const nb_backend *b, float *x, size_t n, float scale);
double nb_cpu_sum_squares(const nb_backend *b, const float *x, const float *y, size_t n);

/* One library's product, nb_gemm's conventions. */
typedef int (*nb_cpu_gemm_fn)(int trans_a, int trans_b, int M, int N, int K, float alpha, const float *A, int lda,
                              const float *B, int ldb, float beta, float *C, int ldc);

/* A CPU backend: who runs which product. */
typedef struct {
    nb_cpu_gemm_fn fn;   /* every product but A^T B */
    nb_cpu_gemm_fn tn;   /* A^T B (the weight gradients) */
    int fn_is_onednn;    /* fn may keep oneDNN's own threads for a large C (they split C, never K) */
    int tn_own_order;    /* tn's result is independent of the thread count by construction (own tiles) */
    int bf16_onednn;     /* bf16 products through oneDNN's bf16 matmul (1) or widened to fp32 (0) */
} nb_cpu_config;

/* 1 where oneDNN 2.6 has a bf16 matmul (AVX-512 and up; it emulates bf16 on avx512_core): what ":onednn"
 * needs (gemm_bf16.c). */
int nb_bf16_onednn_available(void);
/* 1 where oneDNN's own threads split a product's C and never its K, so that its result does not depend on
 * the thread count (its AVX-512 kernels; not its AVX2 ones): what nb_cpu_config.fn_is_onednn needs. */
int nb_onednn_threads_split_c(void);

/* gemm.c: the products in an order fixed by the shape alone (the same bits at any thread count). */
int nb_cpu_gemm(const nb_cpu_config *c, int trans_a, int trans_b, int M, int N, int K, float alpha, const float *A,
                int lda, const float *B, int ldb, float beta, float *C, int ldc);
int nb_cpu_syrk(const nb_cpu_config *c, int trans, int N, int K, float alpha, const float *A, int lda, float beta,
                float *C, int ldc);
/* gemm_bf16.c */
int nb_cpu_gemm_bf16(const nb_cpu_config *c, int trans_a, int trans_b, int M, int N, int K, float alpha,
                     const nb_bf16 *A, int lda, const nb_bf16 *B, int ldb, float beta, float *C, int ldc);
int nb_cpu_syrk_bf16(const nb_cpu_config *c, int trans, int N, int K, float alpha, const nb_bf16 *A, int lda,
                     float beta, float *C, int ldc);
/* The libraries, one file each, and nobubble's own A^T B (gemm_tn.c): C[M,N] = alpha * A^T B + beta * C
 * (A stored K x M) on register tiles over packed, cache-blocked slices: each element one FMA chain over k
 * in order from 0, then alpha * sum + beta * C (C not read when beta is 0), so the result depends on
 * neither the blocking nor the thread count. Its own threads outside a parallel region, the calling
 * thread inside one. */
int nb_cpu_gemm_onednn(int trans_a, int trans_b, int M, int N, int K, float alpha, const float *A, int lda,
                       const float *B, int ldb, float beta, float *C, int ldc);
int nb_cpu_gemm_openblas(int trans_a, int trans_b, int M, int N, int K, float alpha, const float *A, int lda,
                         const float *B, int ldb, float beta, float *C, int ldc);
int nb_cpu_gemm_tn_tiles(int trans_a, int trans_b, int M, int N, int K, float alpha, const float *A, int lda,
                         const float *B, int ldb, float beta, float *C, int ldc);
/* tile.c and tile_bf16.c: the tile products (backend.h's contracts); tile_bf16 fails on an odd K. */
void nb_cpu_tile_gemm(int M, int N, int K, float alpha, const float *A, ptrdiff_t ars, ptrdiff_t aks, const float *B,
                      ptrdiff_t ldb, int accumulate, float *C, ptrdiff_t ldc);
int nb_cpu_tile_gemm_bf16(int M, int N, int K, float alpha, const nb_bf16 *A, ptrdiff_t lda, const nb_bf16 *B,
                          ptrdiff_t ldb, int accumulate, float *C, ptrdiff_t ldc);
int nb_cpu_tile_width(void);
int nb_cpu_tile_bf16_available(void);

/* C's lower triangle (N x N, row stride ldc) <- its upper triangle. */
void nb_cpu_mirror_upper(float *C, int N, int ldc);
/* Rows of C's upper triangle per GEMM in the symmetric products (gemm.c says why 128). */
enum { NB_SYRK_PANEL = 128 };
/* For the product entry points (nb_gemm_timing): begin returns the start time, or a negative value
 * when not counting; end(start) adds the call's share. */
double nb_cpu_time_begin(void);
void nb_cpu_time_end(double start);
#endif
