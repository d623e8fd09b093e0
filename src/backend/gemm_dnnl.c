/* A product on the CPU through oneDNN's sgemm (row-major, like the rest of nobubble). */
#include <oneapi/dnnl/dnnl.h>
#include "backend/cpu.h"
#include "util/error.h"

int nb_cpu_gemm_onednn(int trans_a, int trans_b, int M, int N, int K, float alpha, const float *A, int lda,
                       const float *B, int ldb, float beta, float *C, int ldc) {
    dnnl_status_t st = dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', M, N, K, alpha, A, lda,
                                  B, ldb, beta, C, ldc);
    if (st != dnnl_success) /* bad strides (a programming error) or a library failure */
        return nb_fail("oneDNN's sgemm failed (status %d, M=%d N=%d K=%d)", (int)st, M, N, K);
    return 0;
}
