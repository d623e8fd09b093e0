/* oneDNN matmul primitives, one per shape, cached per thread: shared by the float32 "matmul" backend
 * (gemm.c) and nb_gemm_bf16 (gemm_bf16.c). Internal to src/backend. */
#ifndef NB_BACKEND_DNNL_MATMUL_H
#define NB_BACKEND_DNNL_MATMUL_H

/* C[M,N] = alpha op(A) op(B) + beta C, nb_gemm's conventions; A and B are float32 or (bf16 = 1) bf16,
 * C float32. */
typedef struct {
    int trans_a, trans_b, M, N, K, lda, ldb, ldc;
    float alpha, beta;
    int bf16;
} nb_matmul_shape;

/* Runs the product through the cached primitive of this shape and this thread (created on first use,
 * for the OpenMP thread count in force: a parallel region's thread gets a one-thread primitive) and
 * returns 1. With brgemm_only set, a shape that oneDNN does not run with its brgemm kernels (the fast
 * ones; oneDNN 2.6 takes them only for dense matrices, and otherwise falls back to its sgemm) is left
 * untouched and 0 returned, so that the caller runs it its own way. */
int nb_matmul_run(const nb_matmul_shape *s, const void *A, const void *B, float *C, int brgemm_only);
#endif
