/* nb_tile_gemm (src/backend/tile.c) and the attention built on it (src/layers/attention.c).
 *
 * The tile product: every element of C is specified exactly (backend/backend.h): one chain over k in
 * order, init (C's old value or 0), then fused multiply-adds (multiply and add where the build has no
 * FMA), then alpha times the chain. So each result is checked bitwise against that chain written out
 * here with fmaf, and within rounding against a double-precision product; shapes cover every row tail
 * (M mod 4), every vector count (N up to 5 vectors), K = 0, both strides of A (A and A^T) and both
 * inits. Sentinels around C check that nothing outside its rows and padded width is written.
 *
 * Attention: forward (output and log-sum-exp) and backward (q, k and v gradients of a weighted sum of
 * the output) against a naive double-precision implementation written here from the formulas (the
 * softmax of q.k / sqrt(hd) over the positions up to the query's; dq, dk, dv by the chain rule), on
 * shapes with several query blocks of 64, a last block that is not whole, head widths that are not
 * whole vectors (24, 40) and wider than one tile (128), grouped and multi-query heads; and the same
 * bits at 1 and 3 threads.
 *
 * nb_gemm_tn_tiles (src/backend/gemm_tn.c), C = alpha A^T B + beta C: each element is specified as one
 * fmaf chain over k in order from 0, then alpha * sum + beta * C (C not read when beta is 0), so it too
 * is checked bitwise against that chain written here, and within rounding against double; on shapes
 * that leave partial register tiles (rows not a multiple of 6, columns not of the vector panel), span
 * several cache tiles (more than 264 rows, 256 columns) and several k slices (K above 128, and K = 0),
 * with padded strides and dense ones, sentinels around C, NaN in C when beta is 0; and the same bits at 1, 2 and 3
 * threads and from inside a parallel region (one product per thread).
 *
 * nb_tile_gemm_bf16 (src/backend/tile_bf16.c): bf16 rows times B packed in pairs along k, within K + 1
 * roundings of the double product, on every row tail, 1 to 5 vectors (partial last ones), K 0 to 132,
 * both inits; sentinels as above. Attention under bf16 (q, k, v and dO bf16 values): forward and
 * backward against the double reference on the same values, within the bf16 roundings of the
 * probabilities and score gradients, and the same bits at 1 and 3 threads. */
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "backend/cpu.h"
#include "check.h"
#include "layers/layers.h"

static unsigned rng = 12345;
static float uniform(void) { /* in [-1, 1) */
    rng = rng * 1103515245u + 12345u;
    return (float)((rng >> 8) & 0xffffff) / 8388608.0f - 1.0f;
}

static float chain(int K, float alpha, const float *A, ptrdiff_t ars, ptrdiff_t aks, int i, const float *B, int ldb,
                   int j, float init) {
    float acc = init;
    for (int k = 0; k < K; k++) {
#ifdef __FMA__
        acc = fmaf(A[i * ars + k * aks], B[k * ldb + j], acc);
#else
        acc = acc + A[i * ars + k * aks] * B[k * ldb + j];
#endif
    }
    return alpha * acc;
}

static void check_tile(int M, int N, int K, int transposed, int accumulate, float alpha) {
    const int w = nb_cpu_tile_width(), Np = (N + w - 1) / w * w, ldb = Np + 3, ldc = Np + 5;
    /* A(i, k) = A[i * a_rs + k * a_ks]: A stored M x K with row stride K + 2, or A^T stored K x M with row
     * stride M + 1; (M + 1) x (K + 2) floats hold either. */
    const ptrdiff_t a_rs = transposed ? 1 : K + 2, a_ks = transposed ? M + 1 : 1;
    float *A = malloc(sizeof(float) * (size_t)(M + 1) * (K + 2));
    float *B = malloc(sizeof(float) * (size_t)(K + 1) * ldb);
    const size_t csize = (size_t)(M + 2) * ldc;
    float *C = malloc(sizeof(float) * csize), *C0 = malloc(sizeof(float) * csize);
    for (size_t i = 0; i < (size_t)(M + 1) * (K + 2); i++) A[i] = uniform();
    for (size_t i = 0; i < (size_t)(K + 1) * ldb; i++) B[i] = uniform();
    for (int k = 0; k < K; k++)
        for (int j = N; j < Np; j++) B[k * ldb + j] = 0.0f; /* the padding the contract asks for */
    for (size_t i = 0; i < csize; i++) C0[i] = uniform();
    memcpy(C, C0, sizeof(float) * csize);
    float *Cm = C + ldc; /* one row of sentinels above */
    nb_cpu_tile_gemm(M, N, K, alpha, A, a_rs, a_ks, B, ldb, accumulate, Cm, ldc);
    int bits = 1, near = 1, outside = 1;
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            const float init = accumulate ? C0[(size_t)(i + 1) * ldc + j] : 0.0f;
            const float want = chain(K, alpha, A, a_rs, a_ks, i, B, ldb, j, init);
            const float got = Cm[(size_t)i * ldc + j];
            if (memcmp(&got, &want, sizeof got)) bits = 0;
            double ref = init, mag = fabs(init);
            for (int k = 0; k < K; k++) {
                const double p = (double)A[i * a_rs + k * a_ks] * B[k * ldb + j];
                ref += p;
                mag += fabs(p);
            }
            ref *= alpha;
            if (fabs(got - ref) > (K + 2) * 6e-8 * fabs(alpha) * mag + 1e-30) near = 0;
        }
    for (size_t i = 0; i < csize; i++) {
        const size_t row = i / ldc, col = i % ldc;
        const int inside = row >= 1 && row <= (size_t)M && col < (size_t)Np;
        if (!inside && memcmp(&C[i], &C0[i], sizeof(float))) outside = 0;
    }
    CHECK(bits, "tile M%d N%d K%d %s %s alpha %g: each element the fmaf chain, bitwise", M, N, K,
          transposed ? "A^T" : "A", accumulate ? "accumulate" : "overwrite", alpha);
    CHECK(near, "tile M%d N%d K%d %s %s: within rounding of the double product", M, N, K, transposed ? "A^T" : "A",
          accumulate ? "accumulate" : "overwrite");
    CHECK(outside, "tile M%d N%d K%d: nothing written outside C's rows and padded width", M, N, K);
    free(A), free(B), free(C), free(C0);
}

/* ---- nb_tile_gemm_bf16: bf16 rows times B in pairs along k ---- */
static float bf16_value(float x) { return nb_bf16_to_float(nb_bf16_from_float(x)); }

static void check_tile16(int M, int N, int K, int accumulate, float alpha) {
    const int Np = (N + 15) / 16 * 16, lda = K + 2, ldb = Np + 16, ldc = Np + 5;
    nb_bf16 *A = malloc(sizeof(nb_bf16) * (size_t)M * lda), *B = calloc((size_t)(K / 2 + 1) * 2 * ldb, sizeof(nb_bf16));
    float *Bf = malloc(sizeof(float) * (size_t)(K + 1) * Np);
    const size_t csize = (size_t)(M + 2) * ldc;
    float *C = malloc(sizeof(float) * csize), *C0 = malloc(sizeof(float) * csize);
    for (size_t i = 0; i < (size_t)M * lda; i++) A[i] = nb_bf16_from_float(uniform());
    for (int k = 0; k < K; k++)
        for (int j = 0; j < Np; j++) {
            Bf[(size_t)k * Np + j] = j < N ? bf16_value(uniform()) : 0.0f; /* padding columns 0, as asked */
            B[(size_t)(k / 2) * 2 * ldb + 2 * j + k % 2] = nb_bf16_from_float(Bf[(size_t)k * Np + j]);
        }
    for (size_t i = 0; i < csize; i++) C0[i] = uniform();
    memcpy(C, C0, sizeof(float) * csize);
    float *Cm = C + ldc;
    nb_cpu_tile_gemm_bf16(M, N, K, alpha, A, lda, B, ldb, accumulate, Cm, ldc);
    int near = 1, outside = 1;
    double worst = 0;
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            const double init = accumulate ? C0[(size_t)(i + 1) * ldc + j] : 0.0;
            double ref = init, mag = fabs(init);
            for (int k = 0; k < K; k++) {
                const double p = (double)nb_bf16_to_float(A[(size_t)i * lda + k]) * Bf[(size_t)k * Np + j];
                ref += p;
                mag += fabs(p);
            }
            ref *= alpha;
            /* each product exact, each of the K additions rounded once: K + 1 roundings of at most 2^-24 */
            const double err = fabs(Cm[(size_t)i * ldc + j] - ref), bound = (K + 2) * 6e-8 * fabs(alpha) * mag + 1e-30;
            if (!(err <= bound)) near = 0;
            if (mag > 0 && err / (fabs(alpha) * mag) > worst) worst = err / (fabs(alpha) * mag);
        }
    for (size_t i = 0; i < csize; i++) {
        const size_t row = i / ldc, col = i % ldc;
        const int inside = row >= 1 && row <= (size_t)M && col < (size_t)Np;
        if (!inside && memcmp(&C[i], &C0[i], sizeof(float))) outside = 0;
    }
    CHECK(near, "tile16 M%d N%d K%d %s alpha %g: within K + 1 roundings of the double product (worst %.2g of the "
                "sum of |products|)", M, N, K, accumulate ? "accumulate" : "overwrite", alpha, worst);
    CHECK(outside, "tile16 M%d N%d K%d: nothing written outside C's rows and padded width", M, N, K);
    free(A), free(B), free(Bf), free(C), free(C0);
}

/* The instruction's subnormal rule (backend.h: subnormals flushed), which the scalar fallback follows: a
 * product below float's normal range and a subnormal bf16 input both count as zero. */
static void check_tile16_subnormals(void) {
    enum { LDB = 16 };
    nb_bf16 A[2], B[2 * LDB] = {0};
    float C[LDB];
    const nb_bf16 tiny = nb_bf16_from_float(ldexpf(1.0f, -70)), one = nb_bf16_from_float(1.0f);
    const nb_bf16 sub = (nb_bf16)1; /* the smallest positive bf16 subnormal, about 9.2e-41 */
    A[0] = tiny, A[1] = 0;          /* k = 0: 2^-70 x 2^-70 = 2^-140, subnormal in float */
    for (int j = 0; j < LDB; j++) B[2 * j] = tiny;
    nb_cpu_tile_gemm_bf16(1, LDB, 2, 1.0f, A, 2, B, LDB, 0, C, LDB);
    CHECK(C[0] == 0.0f, "tile16: a subnormal product is flushed to zero (got %g)", C[0]);
    A[0] = sub, A[1] = one; /* k = 0: a subnormal input; k = 1: 1 x 1 */
    for (int j = 0; j < LDB; j++) B[2 * j] = one, B[2 * j + 1] = one;
    nb_cpu_tile_gemm_bf16(1, LDB, 2, 1.0f, A, 2, B, LDB, 0, C, LDB);
    CHECK(C[0] == 1.0f, "tile16: a subnormal input counts as zero (got %.9g)", C[0]);
}

/* ---- nb_gemm_tn_tiles: C = alpha A^T B + beta C ---- */
/* pad: padded strides (1), or A and B dense and allocated to the float (0), so that a read past either's
 * end is one the sanitizers see. */
static void check_tn(int M, int N, int K, float alpha, float beta, int pad) {
    const int lda = M + 3 * pad, ldb = N + pad, ldc = N + 2;
    float *A = malloc(sizeof(float) * ((size_t)K * lda + 1 - !pad)), *B = malloc(sizeof(float) * ((size_t)K * ldb + 1 - !pad));
    const size_t csize = (size_t)(M + 2) * ldc; /* a row of sentinels above and below */
    float *C0 = malloc(sizeof(float) * csize), *C = malloc(sizeof(float) * csize), *Ct = malloc(sizeof(float) * csize);
    for (size_t i = 0; i < (size_t)K * lda; i++) A[i] = uniform();
    for (size_t i = 0; i < (size_t)K * ldb; i++) B[i] = uniform();
    for (size_t i = 0; i < csize; i++) C0[i] = beta == 0.0f && i >= (size_t)ldc && i < (size_t)(M + 1) * ldc ? NAN : uniform();
    memcpy(C, C0, sizeof(float) * csize);
    omp_set_num_threads(1);
    nb_cpu_gemm_tn_tiles(1, 0, M, N, K, alpha, A, lda, B, ldb, beta, C + ldc, ldc);
    int bits = 1, near = 1, outside = 1;
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            const float c0 = C0[(size_t)(i + 1) * ldc + j], sum = chain(K, 1.0f, A, 1, lda, i, B, ldb, j, 0.0f);
            const float want = beta == 0.0f ? alpha * sum : alpha * sum + beta * c0;
            const float got = C[(size_t)(i + 1) * ldc + j];
            if (memcmp(&got, &want, sizeof got)) bits = 0;
            double ref = 0, mag = 0;
            for (int k = 0; k < K; k++) {
                const double p = (double)A[(size_t)k * lda + i] * B[(size_t)k * ldb + j];
                ref += p;
                mag += fabs(p);
            }
            const double old = beta == 0.0f ? 0.0 : beta * (double)c0; /* c0 is NaN when beta is 0 */
            ref = alpha * ref + old;
            if (!(fabs(got - ref) <= (K + 3) * 6e-8 * (fabs(alpha) * mag + fabs(old)) + 1e-30)) near = 0;
        }
    for (size_t i = 0; i < csize; i++) {
        const size_t row = i / ldc, col = i % ldc;
        if (!(row >= 1 && row <= (size_t)M && col < (size_t)N) && memcmp(&C[i], &C0[i], sizeof(float))) outside = 0;
    }
    CHECK(bits, "tn M%d N%d K%d alpha %g beta %g: each element the fmaf chain, then alpha sum + beta C, bitwise", M, N,
          K, alpha, beta);
    CHECK(near, "tn M%d N%d K%d: within rounding of the double product", M, N, K);
    CHECK(outside, "tn M%d N%d K%d: nothing written outside C", M, N, K);
    int same = 1;
    for (int t = 2; t <= 3; t++) {
        memcpy(Ct, C0, sizeof(float) * csize);
        omp_set_num_threads(t);
        nb_cpu_gemm_tn_tiles(1, 0, M, N, K, alpha, A, lda, B, ldb, beta, Ct + ldc, ldc);
        same &= !memcmp(C, Ct, sizeof(float) * csize);
    }
    float *Cp = malloc(sizeof(float) * 2 * csize);
    memcpy(Cp, C0, sizeof(float) * csize);
    memcpy(Cp + csize, C0, sizeof(float) * csize);
#pragma omp parallel num_threads(2)
    nb_cpu_gemm_tn_tiles(1, 0, M, N, K, alpha, A, lda, B, ldb, beta, Cp + (size_t)omp_get_thread_num() * csize + ldc, ldc);
    same &= !memcmp(C, Cp, sizeof(float) * csize) && !memcmp(C, Cp + csize, sizeof(float) * csize);
    CHECK(same, "tn M%d N%d K%d: the same bits at 1, 2 and 3 threads and inside a parallel region", M, N, K);
    omp_set_num_threads(1);
    free(A), free(B), free(C), free(C0), free(Ct), free(Cp);
}

/* ---- attention against a double-precision reference ---- */

typedef struct {
    int B, T, H, Hkv, hd;
} shape;

static void reference(const shape *s, const float *qkv, const float *G, double *out, double *lse, double *dqkv) {
    const int dq = s->H * s->hd, dkv = s->Hkv * s->hd, stride = dq + 2 * dkv, group = s->H / s->Hkv, hd = s->hd;
    const double scale = 1.0 / sqrt((double)hd);
    double *p = malloc(sizeof(double) * s->T), *dp = malloc(sizeof(double) * s->T);
    memset(dqkv, 0, sizeof(double) * (size_t)s->B * s->T * stride);
    for (int b = 0; b < s->B; b++)
        for (int h = 0; h < s->H; h++) {
            const int kv = h / group;
            for (int t = 0; t < s->T; t++) {
                const float *q = qkv + ((size_t)b * s->T + t) * stride + h * hd;
                double m = -INFINITY, sum = 0;
                for (int u = 0; u <= t; u++) {
                    const float *k = qkv + ((size_t)b * s->T + u) * stride + dq + kv * hd;
                    double d = 0;
                    for (int i = 0; i < hd; i++) d += (double)q[i] * k[i];
                    p[u] = d * scale;
                    m = fmax(m, p[u]);
                }
                for (int u = 0; u <= t; u++) sum += exp(p[u] - m);
                for (int u = 0; u <= t; u++) p[u] = exp(p[u] - m) / sum;
                lse[((size_t)b * s->H + h) * s->T + t] = m + log(sum);
                double *o = out + ((size_t)b * s->T + t) * dq + h * hd;
                const float *g = G + ((size_t)b * s->T + t) * dq + h * hd;
                for (int i = 0; i < hd; i++) o[i] = 0;
                double Dsum = 0;
                for (int u = 0; u <= t; u++) {
                    const float *v = qkv + ((size_t)b * s->T + u) * stride + dq + dkv + kv * hd;
                    dp[u] = 0;
                    for (int i = 0; i < hd; i++) o[i] += p[u] * v[i], dp[u] += (double)g[i] * v[i];
                    Dsum += p[u] * dp[u];
                }
                /* d/d score_u of sum_i g_i o_i = p_u (dp_u - sum p dp); the score is scale q.k_u */
                double *dqr = dqkv + ((size_t)b * s->T + t) * stride + h * hd;
                for (int u = 0; u <= t; u++) {
                    const double ds = p[u] * (dp[u] - Dsum) * scale;
                    const float *k = qkv + ((size_t)b * s->T + u) * stride + dq + kv * hd;
                    double *dk = dqkv + ((size_t)b * s->T + u) * stride + dq + kv * hd;
                    double *dv = dqkv + ((size_t)b * s->T + u) * stride + dq + dkv + kv * hd;
                    for (int i = 0; i < hd; i++) {
                        dqr[i] += ds * k[i];
                        dk[i] += ds * q[i];
                        dv[i] += p[u] * g[i];
                    }
                }
            }
        }
    free(p), free(dp);
}

/* bf16 0: fp32 attention against the double reference. bf16 1: attention as a bf16 run calls it (q, k, v
 * and the output gradient bf16 values; the probabilities and score gradients rounded to bf16 inside,
 * 2^-9 relative, which bounds the error) against the double reference on the same values; where the build
 * has AVX512-BF16 this runs the products on nb_tile_gemm_bf16. Both: the same bits at 1 and 3 threads. */
static void check_attention(shape s, int bf16) {
    const int dq = s.H * s.hd, stride = dq + 2 * s.Hkv * s.hd;
    const size_t N = (size_t)s.B * s.T;
    const char *what = bf16 ? "attention bf16" : "attention";
    float *qkv = malloc(sizeof(float) * N * stride), *G = malloc(sizeof(float) * N * dq);
    for (size_t i = 0; i < N * stride; i++) qkv[i] = 1.5f * uniform(); /* scores of a few units: peaked rows */
    for (size_t i = 0; i < N * dq; i++) G[i] = uniform();
    if (bf16) {
        for (size_t i = 0; i < N * stride; i++) qkv[i] = bf16_value(qkv[i]);
        for (size_t i = 0; i < N * dq; i++) G[i] = bf16_value(G[i]);
    }
    float *out = malloc(sizeof(float) * N * dq), *lse = malloc(sizeof(float) * N * s.H);
    float *dqkv = malloc(sizeof(float) * N * stride);
    double *rout = malloc(sizeof(double) * N * dq), *rlse = malloc(sizeof(double) * N * s.H);
    double *rd = malloc(sizeof(double) * N * stride);
    reference(&s, qkv, G, rout, rlse, rd);
    attention_forward(nb_backend_default(), out, NULL, lse, qkv, s.B, s.T, s.H, s.Hkv, s.hd, bf16);
    attention_backward(nb_backend_default(), dqkv, G, out, lse, qkv, s.B, s.T, s.H, s.Hkv, s.hd, bf16);
    const double eo = check_rel_err_d(out, rout, N * dq, 1e-3), el = check_rel_err_d(lse, rlse, N * s.H, 1e-3);
    const double eg = check_rel_err_d(dqkv, rd, N * stride, 1e-3);
    if (bf16)
        printf("%s B%d T%d H%d Hkv%d hd%d: output %.2g, log-sum-exp %.2g, gradients %.2g relative\n", what, s.B, s.T,
               s.H, s.Hkv, s.hd, eo, el, eg);
    CHECK(eo < (bf16 ? 6e-3 : 2e-5) && el < 2e-5, "%s B%d T%d H%d Hkv%d hd%d forward: output %.2g, log-sum-exp %.2g "
          "relative", what, s.B, s.T, s.H, s.Hkv, s.hd, eo, el);
    CHECK(eg < (bf16 ? 6e-3 : 1e-4), "%s B%d T%d H%d Hkv%d hd%d backward: q/k/v gradients %.2g relative", what, s.B,
          s.T, s.H, s.Hkv, s.hd, eg);
    /* The same bits at another thread count. */
    float *out3 = malloc(sizeof(float) * N * dq), *lse3 = malloc(sizeof(float) * N * s.H);
    float *dqkv3 = malloc(sizeof(float) * N * stride);
    const int threads = omp_get_max_threads();
    omp_set_num_threads(threads == 3 ? 1 : 3);
    attention_forward(nb_backend_default(), out3, NULL, lse3, qkv, s.B, s.T, s.H, s.Hkv, s.hd, bf16);
    attention_backward(nb_backend_default(), dqkv3, G, out3, lse3, qkv, s.B, s.T, s.H, s.Hkv, s.hd, bf16);
    omp_set_num_threads(threads);
    CHECK(!memcmp(out, out3, sizeof(float) * N * dq) && !memcmp(lse, lse3, sizeof(float) * N * s.H) &&
              !memcmp(dqkv, dqkv3, sizeof(float) * N * stride),
          "%s B%d T%d H%d Hkv%d hd%d: the same bits at %d and %d threads", what, s.B, s.T, s.H, s.Hkv, s.hd, threads,
          threads == 3 ? 1 : 3);
    free(qkv), free(G), free(out), free(lse), free(dqkv), free(rout), free(rlse), free(rd), free(out3), free(lse3),
        free(dqkv3);
}

int main(void) {
    const int w = nb_cpu_tile_width();
    for (int M = 1; M <= 9; M++)
        for (int nv = 1; nv <= 5; nv++)
            for (int K = 0; K <= 70; K += 35) {
                const int N = nv * w - (M % 3) * (w > 4 ? 3 : 1); /* whole and partial last vectors */
                check_tile(M, N, K, M % 2, 0, 1.0f);
                check_tile(M, N, K + 1, (M + 1) % 2, 1, 1.0f);
                check_tile(M, N, K + 3, M % 2, 0, 0.125f);
            }
    const int tn[][3] = {
        {1, 1, 1}, {5, 17, 0}, {6, 64, 128}, {7, 65, 129}, {13, 130, 300}, {8, 16, 3}, /* tails, slices, K = 0 */
        {270, 300, 257}, {264, 256, 384}, {600, 40, 20}, {30, 700, 9},                  /* several cache tiles */
    };
    for (size_t i = 0; i < sizeof tn / sizeof *tn; i++) {
        check_tn(tn[i][0], tn[i][1], tn[i][2], 1.0f, 1.0f, 1);
        check_tn(tn[i][0], tn[i][1], tn[i][2], 0.75f, 0.0f, 1);
        check_tn(tn[i][0], tn[i][1], tn[i][2], -0.5f, 0.25f, 0);
    }
    const shape shapes[] = {
        {2, 150, 4, 2, 64},  /* three query blocks, the last of 22 rows; grouped heads */
        {1, 70, 3, 1, 24},   /* multi-query; a head narrower than two vectors, padded */
        {1, 130, 2, 2, 128}, /* a head wider than one tile */
        {2, 33, 2, 1, 40},   /* one partial block */
        {1, 1, 1, 1, 8},     /* one token */
        {1, 128, 2, 1, 32},  /* keys a multiple of 128: the padded row stride */
    };
    for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++) check_attention(shapes[i], 0);
    for (int M = 1; M <= 9; M++)
        for (int nv = 1; nv <= 5; nv++)
            for (int K = 0; K <= 130; K += 26) {
                const int N = nv * 16 - (M % 3) * 3;
                check_tile16(M, N, K, M % 2, 1.0f);
                check_tile16(M, N, K + 2, (M + 1) % 2, 0.125f);
            }
    check_tile16_subnormals();
    for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++) check_attention(shapes[i], 1);
    printf("attention bf16 products on %s\n", nb_cpu_tile_bf16_available() ? "nb_tile_gemm_bf16 (AVX512-BF16)" : "nb_tile_gemm (no bf16 instruction in this build)");
    return check_summary();
}
