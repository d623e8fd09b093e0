/* The CUDA backend ("cuda", src/backend/cuda/cuda.c), where a GPU is. In a build without -DNB_CUDA=ON,
 * or on a machine without a GPU, it checks the refusal (a message naming the option, or saying that no
 * GPU was found) and exits 77, which ctest reports as skipped with the reason printed.
 * - Products against a double-precision reference of the same operands (fp32, and bf16 operands widened
 *   exactly), every transposition, strided rows, beta 0 and not: each element within the bound of an
 *   fp32 sum of K terms in any order, gamma(K + 2) times the sum of the magnitudes; the bytes between
 *   strided rows of C never written.
 * - Symmetric products exactly symmetric, a NaN in C's lower triangle on entry ignored (the contract).
 * - The same product three times gives the same bits; products from four threads at once give the bits
 *   each gives alone.
 * - A bad product (a row stride shorter than its row) is recorded, reported once by nb_backend_check,
 *   then the backend works again.
 * - A 2-layer stage's forward and backward on the GPU against the CPU's default backend (fp32 within
 *   1e-5 relative, bf16 within 2e-2), bitwise the same on the GPU twice; Muon's step (symmetric and plain
 *   products) against the CPU's within 1e-4. */
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "backend/backend.h"
#include "check.h"
#include "stage_step.h"
#include "nobubble/model.h"
#include "nobubble/optim.h"
#include "util/error.h"

static nb_backend *gpu;

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static float uniform(void) { /* in [-1, 1) */
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (float)((double)(rng >> 11) / 4503599627370496.0 - 1.0);
}

static float widen(nb_bf16 x) {
    uint32_t u = (uint32_t)x << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}
static nb_bf16 narrow(float f) { /* truncation is enough for test operands: any bf16 value will do */
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return (nb_bf16)(u >> 16);
}

/* op(X)[i][k] of a row-major matrix stored rows x cols (stride ld), as double. */
static double at(const float *X, int ld, int trans, int i, int k) {
    return trans ? (double)X[(size_t)k * ld + i] : (double)X[(size_t)i * ld + k];
}

enum { SENTINEL = 12345 };

/* One product on the GPU against the double reference; bf16 operands when bf16. */
static void check_product(int bf16, int ta, int tb, int M, int N, int K, float alpha, float beta, int pad) {
    const int a_rows = ta ? K : M, a_cols = ta ? M : K, b_rows = tb ? N : K, b_cols = tb ? K : N;
    const int lda = a_cols + pad, ldb = b_cols + pad, ldc = N + pad;
    float *A = malloc(sizeof(float) * (size_t)a_rows * lda), *B = malloc(sizeof(float) * (size_t)b_rows * ldb);
    float *C = malloc(sizeof(float) * (size_t)M * ldc), *C0 = malloc(sizeof(float) * (size_t)M * ldc);
    nb_bf16 *A16 = malloc(sizeof(nb_bf16) * (size_t)a_rows * lda), *B16 = malloc(sizeof(nb_bf16) * (size_t)b_rows * ldb);
    for (size_t i = 0; i < (size_t)a_rows * lda; i++) A16[i] = narrow(uniform()), A[i] = bf16 ? widen(A16[i]) : uniform();
    for (size_t i = 0; i < (size_t)b_rows * ldb; i++) B16[i] = narrow(uniform()), B[i] = bf16 ? widen(B16[i]) : uniform();
    for (int i = 0; i < M; i++)
        for (int j = 0; j < ldc; j++) C0[(size_t)i * ldc + j] = j < N ? uniform() : (float)SENTINEL;
    memcpy(C, C0, sizeof(float) * (size_t)M * ldc);
    if (bf16) nb_gemm_bf16(gpu, ta, tb, M, N, K, alpha, A16, lda, B16, ldb, beta, C, ldc);
    else nb_gemm(gpu, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    const int failed = nb_backend_check(gpu);
    double worst = 0;  /* error / bound, worst element */
    int gaps = 0;
    const double gamma = (K + 2) * ldexp(1.0, -24) / (1 - (K + 2) * ldexp(1.0, -24));
    for (int i = 0; i < M; i++) {
        for (int j = 0; j < N; j++) {
            double ref = 0, mag = 0;
            for (int k = 0; k < K; k++) {
                const double p = at(A, lda, ta, i, k) * at(B, ldb, tb, k, j);
                ref += p, mag += fabs(p);
            }
            const double c0 = C0[(size_t)i * ldc + j];
            ref = alpha * ref + beta * c0;
            const double bound = gamma * (fabs(alpha) * mag + fabs(beta * c0)) + 1e-30;
            const double e = fabs(C[(size_t)i * ldc + j] - ref) / bound;
            if (!(e <= worst)) worst = e;  /* NaN counts as the worst */
        }
        for (int j = N; j < ldc; j++) gaps += C[(size_t)i * ldc + j] != (float)SENTINEL;
    }
    CHECK(!failed && worst <= 1.0 && gaps == 0,
          "%s %c%c %dx%dx%d pad %d beta %g: worst error %.3g of the bound, %d gap values written (%s)",
          bf16 ? "bf16" : "fp32", ta ? 'T' : 'N', tb ? 'T' : 'N', M, N, K, pad, beta, worst, gaps,
          failed ? nb_last_error() : "ok");
    free(A), free(B), free(C), free(C0), free(A16), free(B16);
}

static void check_products(void) {
    const int shapes[][3] = {{1, 1, 1}, {3, 5, 7}, {64, 48, 96}, {129, 257, 65}, {300, 200, 1024}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int t = 0; t < 4; t++)
            for (int bf16 = 0; bf16 < 2; bf16++) {
                check_product(bf16, t & 1, t >> 1, shapes[s][0], shapes[s][1], shapes[s][2], 1.25f, 0.0f, 0);
                check_product(bf16, t & 1, t >> 1, shapes[s][0], shapes[s][1], shapes[s][2], -0.5f, 0.75f, 3);
            }
}

static void check_symmetric(void) {
    enum { N = 70, K = 90, LD = 96 };
    static float A[K * LD], C[N * LD], R[N * LD];
    static nb_bf16 A16[K * LD];
    for (int i = 0; i < K * LD; i++) A16[i] = narrow(uniform()), A[i] = widen(A16[i]);
    for (int bf16 = 0; bf16 < 2; bf16++)
        for (int trans = 0; trans < 2; trans++) {
            for (int i = 0; i < N; i++)
                for (int j = 0; j < LD; j++) C[i * LD + j] = j < i ? NAN : 0.5f;  /* lower triangle: NaN */
            if (bf16) nb_syrk_bf16(gpu, trans, N, K, 2.0f, A16, LD, 0.25f, C, LD);
            else nb_syrk(gpu, trans, N, K, 2.0f, A, LD, 0.25f, C, LD);
            const int failed = nb_backend_check(gpu);
            int asym = 0;
            double worst = 0;
            for (int i = 0; i < N; i++)
                for (int j = 0; j < N; j++) {
                    asym += memcmp(&C[i * LD + j], &C[j * LD + i], sizeof(float)) != 0;
                    double ref = 0, mag = 0;
                    for (int k = 0; k < K; k++) {
                        const double p = trans ? (double)A[k * LD + i] * A[k * LD + j] : (double)A[i * LD + k] * A[j * LD + k];
                        ref += p, mag += fabs(p);
                    }
                    const double e = fabs(C[i * LD + j] - (2.0 * ref + 0.125)) / ((K + 2) * 6e-8 * (2 * mag + 0.125));
                    if (!(e <= worst)) worst = e;
                }
            CHECK(!failed && !asym && worst <= 1.0, "%s syrk trans %d: %d asymmetric pairs, worst error %.3g of the bound",
                  bf16 ? "bf16" : "fp32", trans, asym, worst);
        }
    (void)R;
}

static void check_repeatable(void) {
    enum { M = 200, N = 300, K = 500, T = 4 };
    float *A = malloc(sizeof(float) * M * K), *B = malloc(sizeof(float) * K * N);
    float *C[3], *P[T], *Q[T];
    for (int i = 0; i < M * K; i++) A[i] = uniform();
    for (int i = 0; i < K * N; i++) B[i] = uniform();
    for (int r = 0; r < 3; r++) {
        C[r] = calloc((size_t)M * N, sizeof(float));
        nb_gemm(gpu, 0, 0, M, N, K, 1.0f, A, K, B, N, 0.0f, C[r], N);
    }
    CHECK(!nb_backend_check(gpu) && !memcmp(C[0], C[1], sizeof(float) * M * N) && !memcmp(C[0], C[2], sizeof(float) * M * N),
          "the same product three times: the same bits");
    /* four threads at once, each its own shape (a different K), against the same products made alone */
    for (int t = 0; t < T; t++) {
        P[t] = calloc((size_t)M * N, sizeof(float)), Q[t] = calloc((size_t)M * N, sizeof(float));
        nb_gemm(gpu, 0, 0, M, N, K - 50 * t, 1.0f, A, K, B, N, 0.0f, P[t], N);
    }
#pragma omp parallel for num_threads(T)
    for (int t = 0; t < T; t++) nb_gemm(gpu, 0, 0, M, N, K - 50 * t, 1.0f, A, K, B, N, 0.0f, Q[t], N);
    int same = 1;
    for (int t = 0; t < T; t++) same &= !memcmp(P[t], Q[t], sizeof(float) * M * N);
    CHECK(!nb_backend_check(gpu) && same, "products from %d threads at once: the bits of each alone", T);
    for (int r = 0; r < 3; r++) free(C[r]);
    for (int t = 0; t < T; t++) free(P[t]), free(Q[t]);
    free(A), free(B);
}

static void check_failure(void) {
    float A[16] = {0}, B[16] = {0}, C[16] = {0};
    nb_gemm(gpu, 0, 0, 4, 4, 4, 1.0f, A, 2, B, 4, 0.0f, C, 4);  /* lda 2 < K 4 */
    CHECK(nb_backend_check(gpu) == -1 && strstr(nb_last_error(), "row stride"), "a bad stride is recorded: %s",
          nb_last_error());
    CHECK(nb_backend_check(gpu) == 0, "the record is cleared once reported");
    A[0] = 2, B[0] = 3;
    nb_gemm(gpu, 0, 0, 4, 4, 4, 1.0f, A, 4, B, 4, 0.0f, C, 4);
    CHECK(nb_backend_check(gpu) == 0 && C[0] == 6.0f, "the backend works after a failure (C[0] = %g)", C[0]);
}

static int stage_step_on(const nb_backend *be, nb_precision precision, float *loss, float *grads, size_t *n) {
    return stage_step(be, precision, 32, 11, loss, grads, n, NULL);
}

static void check_stage(void) {
    static float g_cpu[1 << 20], g_gpu[1 << 20], g_again[1 << 20];
    for (int p = 0; p < 2; p++) {
        const nb_precision prec = p ? NB_PRECISION_BF16 : NB_PRECISION_FP32;
        float l_cpu = 0, l_gpu = 0, l_again = 0;
        size_t n_cpu = 0, n_gpu = 0, n_again = 0;
        const int ok = !stage_step_on(nb_backend_default(), prec, &l_cpu, g_cpu, &n_cpu) &&
                       !stage_step_on(gpu, prec, &l_gpu, g_gpu, &n_gpu) && !stage_step_on(gpu, prec, &l_again, g_again, &n_again);
        CHECK(ok && n_cpu == n_gpu, "%s stage on the CPU and the GPU: %s", nb_precision_name(prec), ok ? "ok" : nb_last_error());
        if (!ok) continue;
        const double tol = p ? 2e-2 : 1e-5, loss_err = fabs((double)l_gpu - l_cpu) / fabs((double)l_cpu);
        const double grad_err = check_rel_err_f(g_gpu, g_cpu, n_cpu, 1e-6);
        CHECK(loss_err <= tol && grad_err <= (p ? 5e-2 : 1e-4),
              "%s: the GPU's loss %.9g against the CPU's %.9g (relative %.2g), gradients within %.2g", nb_precision_name(prec),
              l_gpu, l_cpu, loss_err, grad_err);
        CHECK(l_gpu == l_again && !memcmp(g_gpu, g_again, sizeof(float) * n_gpu), "%s: the GPU twice, the same bits",
              nb_precision_name(prec));
    }
    /* Muon's Newton-Schulz: symmetric and plain products on the backend the optimizer was made with */
    nb_tensor t = {.name = "w", .ndim = 2, .shape = {96, 160}, .offset = 0, .numel = 96 * 160, .group = NB_GROUP_MATRIX};
    static float g[96 * 160], w_cpu[96 * 160], w_gpu[96 * 160], d_cpu[96 * 160], d_gpu[96 * 160];
    for (int i = 0; i < 96 * 160; i++) g[i] = uniform(), w_cpu[i] = w_gpu[i] = 0.02f * uniform();
    nb_optim_params op = nb_optim_defaults(NB_OPT_MUON);
    nb_optimizer *oc, *og;
    CHECK(!nb_optimizer_create(&oc, &op, &t, 1, t.numel, nb_backend_default()) &&
              !nb_optimizer_create(&og, &op, &t, 1, t.numel, gpu),
          "Muon on both: %s", nb_last_error());
    const int rc = nb_optimizer_step(oc, g, w_cpu, 1e-3f, 1e-3f, d_cpu) | nb_optimizer_step(og, g, w_gpu, 1e-3f, 1e-3f, d_gpu);
    const double err = check_rel_err_f(d_gpu, d_cpu, t.numel, 1e-6);
    CHECK(!rc && err <= 1e-4, "Muon's step on the GPU within %.2g of the CPU's (%s)", err, rc ? nb_last_error() : "ok");
    nb_optimizer_free(oc);
    nb_optimizer_free(og);
}

int main(void) {
    if (nb_backend_open("cuda", &gpu)) {
        const char *why = nb_last_error();
        CHECK(strstr(why, "-DNB_CUDA=ON") || strstr(why, "GPU"), "the refusal says why: %s", why);
        printf("skipped: %s\n", why);
        return check_failed ? 1 : 77;
    }
    CHECK(!strcmp(nb_backend_name(gpu), "cuda") && strstr(nb_backend_label(gpu), "cuBLAS"), "opened: %s",
          nb_backend_label(gpu));
    printf("backend: %s\n", nb_backend_label(gpu));
    check_products();
    check_symmetric();
    check_repeatable();
    check_failure();
    check_stage();
    nb_backend_close(gpu);
    return check_summary();
}
