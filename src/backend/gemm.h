/* The one interface between the math and the matrix-multiply hardware: every matrix product
 * in nobubble goes through nb_gemm, so that a new backend (another CPU library, CUDA) is one
 * file. Row-major:  C[M,N] = alpha * op(A)[M,K] * op(B)[K,N] + beta * C,
 * op(X) = X^T when the matching trans flag is set; lda/ldb/ldc are row strides.
 * Two CPU implementations are built in, oneDNN's sgemm and OpenBLAS (OpenMP build), and a
 * third choice that mixes them: "hybrid" (the default) uses oneDNN except for products A^T B,
 * where oneDNN 2.6 is slow and OpenBLAS is not. NB_GEMM=onednn|openblas|hybrid in the
 * environment, or nb_gemm_select, picks one. */
#ifndef NB_BACKEND_GEMM_H
#define NB_BACKEND_GEMM_H

void nb_gemm(int trans_a, int trans_b, int M, int N, int K, float alpha, const float *A, int lda,
             const float *B, int ldb, float beta, float *C, int ldc);
/* The name of the backend in use, for run headers and benchmarks. */
const char *nb_gemm_backend(void);
/* Chooses the backend by name ("onednn", "openblas" or "hybrid"); -1 with a message otherwise.
 * Call before any GEMM runs (it is not synchronized with running GEMMs). */
int nb_gemm_select(const char *name);

/* The implementations (one file each). */
void nb_gemm_onednn(int trans_a, int trans_b, int M, int N, int K, float alpha, const float *A, int lda,
                    const float *B, int ldb, float beta, float *C, int ldc);
void nb_gemm_openblas(int trans_a, int trans_b, int M, int N, int K, float alpha, const float *A, int lda,
                      const float *B, int ldb, float beta, float *C, int ldc);
#endif
