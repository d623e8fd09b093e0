/* oneDNN matmul primitives, one per shape, cached per thread: the bf16 products of
 * gemm_bf16.c. Internal to src/backend. */
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
 * for the OpenMP thread count in force: a parallel region's thread gets a one-thread primitive): 0, or -1
 * after nb_fail. */
int nb_matmul_run(const nb_matmul_shape *s, const void *A, const void *B, float *C);
#endif
