/* A product on the CPU through OpenBLAS's cblas_sgemm (its OpenMP build, so that it shares nobubble's
 * threads instead of starting its own). */
#include <cblas.h>
#include "backend/cpu.h"

int nb_cpu_gemm_openblas(int trans_a, int trans_b, int M, int N, int K, float alpha, const float *A, int lda,
                         const float *B, int ldb, float beta, float *C, int ldc) {
    cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans, M, N, K,
                alpha, A, lda, B, ldb, beta, C, ldc);
    return 0;
}
