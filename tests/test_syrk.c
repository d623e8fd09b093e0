/* nb_syrk and nb_syrk_bf16 (src/backend/backend.h) against a double-precision product of the same values:
 * C = alpha op(A) op(A)^T + beta C for A A^T and A^T A, over shapes (1 x 1, odd, K < N, K > N, K = 0,
 * N over one row panel of 128 and not a multiple of it),
 * padded strides, alpha and beta. The error must stay within float32 accumulation's bound
 * (2 K 2^-24 (|alpha| sum |a a| + |beta c|)); C must come out exactly symmetric, its lower triangle on
 * entry must not matter (it holds NaN here), and the padding between rows must stay untouched. ctest
 * runs this file again with NB_GEMM=tiles:onednn for nb_syrk_bf16's other path. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "backend/backend.h"
#include "check.h"

/* A's element (i, l) of op(A) (N x K), as a double. */
static double op_a(const float *A, int trans, int lda, int i, int l) {
    return trans ? A[(size_t)l * lda + i] : A[(size_t)i * lda + l];
}

/* Checks C (N x N, row stride ldc) against alpha op(A) op(A)^T + beta C0 in double; A holds float values
 * (the widened bf16 values for nb_syrk_bf16). */
static void compare(const char *what, int trans, int N, int K, float alpha, float beta, const float *A, int lda,
                    const float *C0, const float *C, int ldc) {
    double worst = 0;
    int symmetric = 1, pad_ok = 1;
    for (int i = 0; i < N; i++)
        for (int j = 0; j < N; j++) {
            double sum = 0, mag = 0;
            for (int l = 0; l < K; l++) {
                double p = op_a(A, trans, lda, i, l) * op_a(A, trans, lda, j, l);
                sum += p;
                mag += fabs(p);
            }
            const double c0 = C0[(size_t)(i < j ? i : j) * ldc + (i < j ? j : i)];  /* the upper triangle's */
            const double want = alpha * sum + beta * c0;
            const double bound = 2.0 * (K + 1) * 0x1p-24 * (fabs(alpha) * mag + fabs(beta * c0)) + 1e-30;
            const double err = fabs(C[(size_t)i * ldc + j] - want) / bound;
            if (!(err <= worst)) worst = isnan(err) ? INFINITY : err;
            symmetric &= C[(size_t)i * ldc + j] == C[(size_t)j * ldc + i];
        }
    for (int i = 0; i < N; i++)
        for (int j = N; j < ldc; j++) pad_ok &= C[(size_t)i * ldc + j] == C0[(size_t)i * ldc + j];
    CHECK(worst <= 1.0, "%s trans=%d N=%d K=%d alpha %g beta %g: error %.3g of the float32 bound", what, trans, N, K,
          alpha, beta, worst);
    CHECK(symmetric, "%s trans=%d N=%d K=%d: C is exactly symmetric", what, trans, N, K);
    CHECK(pad_ok, "%s trans=%d N=%d K=%d: the row padding is untouched", what, trans, N, K);
}

/* C0: the upper triangle and the padding hold values, the strict lower triangle NaN (it must be ignored). */
static void fill_c(float *C0, int N, int ldc) {
    for (int i = 0; i < N; i++)
        for (int j = 0; j < ldc; j++) C0[(size_t)i * ldc + j] = j < i ? NAN : 0.25f * (float)((i * 7 + j) % 9) - 1.0f;
}

static nb_backend *be;

static void check_syrk(int trans, int N, int K, float alpha, float beta) {
    const int rows = trans ? K : N, cols = trans ? N : K, lda = cols + 3, ldc = N + 2;
    float *A = malloc(sizeof(float) * ((size_t)rows * lda + 1)), *C = malloc(sizeof(float) * (size_t)N * ldc);
    float *C0 = malloc(sizeof(float) * (size_t)N * ldc), *Aw = malloc(sizeof(float) * ((size_t)rows * lda + 1));
    nb_bf16 *H = malloc(sizeof(nb_bf16) * ((size_t)rows * lda + 1));
    for (int i = 0; i < rows * lda; i++) A[i] = sinf(0.37f * i + 0.2f) * 2.0f;
    fill_c(C0, N, ldc);
    memcpy(C, C0, sizeof(float) * (size_t)N * ldc);
    nb_syrk(be, trans, N, K, alpha, A, lda, beta, C, ldc);
    compare("nb_syrk", trans, N, K, alpha, beta, A, lda, C0, C, ldc);

    for (int i = 0; i < rows * lda; i++) {
        H[i] = nb_bf16_from_float(A[i]);
        Aw[i] = nb_bf16_to_float(H[i]);
    }
    memcpy(C, C0, sizeof(float) * (size_t)N * ldc);
    nb_syrk_bf16(be, trans, N, K, alpha, H, lda, beta, C, ldc);
    compare("nb_syrk_bf16", trans, N, K, alpha, beta, Aw, lda, C0, C, ldc);
    free(A);
    free(Aw);
    free(H);
    free(C);
    free(C0);
}

int main(void) {
    /* NB_GEMM picks the backend (ctest runs this file with tiles:onednn too: nb_syrk_bf16's other path) */
    int exit_code;
    if (!(be = check_env_backend(&exit_code))) return exit_code;
    for (int trans = 0; trans < 2; trans++) {
        check_syrk(trans, 1, 1, 1.0f, 0.0f);
        check_syrk(trans, 17, 40, 1.0f, 0.0f);
        check_syrk(trans, 40, 17, 0.5f, 1.0f);
        check_syrk(trans, 64, 129, 2.0315f, -4.775f);
        /* several row panels of 128, the last one short (gemm.c: nb_syrk's panels) */
        check_syrk(trans, 129, 33, 1.0f, 0.0f);
        check_syrk(trans, 300, 70, 2.0315f, -4.775f);
        check_syrk(trans, 5, 3, -2.0f, 0.75f);
        check_syrk(trans, 6, 0, 1.0f, 0.5f);
        check_syrk(trans, 3, 0, 1.0f, 0.0f);
    }
    nb_backend_close(be);
    return check_summary();
}
