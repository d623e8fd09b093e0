/* Causal grouped-query attention without a stored T x T matrix: forward keeps only each
 * query row's log-sum-exp; backward recomputes the probabilities from it. Work is done in
 * blocks of QBLOCK query rows, each against the keys it can see, with GEMMs; a block's scores
 * live in a per-thread scratch of QBLOCK x T floats, so activation memory grows linearly with
 * the context length. One task per (sequence, head) in forward and per (sequence, kv head) in
 * backward, each on one thread, so the result does not depend on the number of threads. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "backend/gemm.h"
#include "layers/fastmath.h"
#include "layers/layers.h"

enum { QBLOCK = 64 };

static inline float dot(const float *a, const float *b, int n) {
    float s = 0.0f;
#pragma omp simd reduction(+ : s)
    for (int i = 0; i < n; i++) s += a[i] * b[i];
    return s;
}

/* Rounds a row to bf16 values in place (a product operand under bf16); serial: it runs inside a task. */
static inline void round_bf16(float *x, int n) {
#pragma omp simd
    for (int i = 0; i < n; i++) x[i] = nb_bf16_rounded(x[i]);
}

/* out16[rows][hd] (row stride ld) = bf16(out): one block of a head's output, cast while it is in cache. */
static void cast_block(nb_bf16 *out16, const float *out, int rows, int hd, int ld) {
    for (int i = 0; i < rows; i++) {
#pragma omp simd
        for (int j = 0; j < hd; j++) out16[(size_t)i * ld + j] = nb_bf16_from_float(out[(size_t)i * ld + j]);
    }
}

void attention_forward(float *out, nb_bf16 *out16, float *lse, const float *qkv, int B, int T, int H, int Hkv, int hd,
                       int bf16) {
    const int dq = H * hd, dkv = Hkv * hd, stride = dq + 2 * dkv, group = H / Hkv;
    const float scale = 1.0f / sqrtf((float)hd);
#pragma omp parallel
    {
        float *S = malloc(sizeof(float) * QBLOCK * (size_t)T);
#pragma omp for schedule(static) collapse(2)
        for (int b = 0; b < B; b++)
            for (int h = 0; h < H; h++) {
                const float *base = qkv + (size_t)b * T * stride;
                const float *K = base + dq + (h / group) * hd, *V = base + dq + dkv + (h / group) * hd;
                for (int t0 = 0; t0 < T; t0 += QBLOCK) {
                    const int nq = T - t0 < QBLOCK ? T - t0 : QBLOCK, nk = t0 + nq;
                    nb_gemm(0, 1, nq, nk, hd, scale, base + (size_t)t0 * stride + h * hd, stride, K, stride, 0.0f, S, nk);
                    for (int i = 0; i < nq; i++) {
                        float *row = S + (size_t)i * nk, m = -INFINITY, sum = 0.0f;
                        const int visible = t0 + i + 1;
                        /* The maximum of a set does not depend on the order it is taken in (a +0/-0
                         * tie changes only m's sign, which row[s] - m and m + log(sum) absorb, since
                         * sum >= 1), so the vectorized reduction gives bitwise the serial result. */
#pragma omp simd reduction(max : m)
                        for (int s = 0; s < visible; s++) m = row[s] > m ? row[s] : m;
#pragma omp simd reduction(+ : sum)
                        for (int s = 0; s < visible; s++) {
                            row[s] = nb_expf(row[s] - m);
                            sum += row[s];
                        }
                        const float inv = 1.0f / sum;
#pragma omp simd
                        for (int s = 0; s < visible; s++) row[s] *= inv;
                        for (int s = visible; s < nk; s++) row[s] = 0.0f;
                        if (bf16) round_bf16(row, visible);
                        lse[((size_t)b * H + h) * T + t0 + i] = m + logf(sum);
                    }
                    const size_t at = ((size_t)b * T + t0) * dq + (size_t)h * hd;
                    nb_gemm(0, 0, nq, hd, nk, 1.0f, S, nk, V, stride, 0.0f, out + at, dq);
                    if (out16) cast_block(out16 + at, out + at, nq, hd, dq);
                }
            }
        free(S);
    }
}

void attention_backward(float *dqkv, const float *dout, const float *out, const float *lse, const float *qkv,
                        int B, int T, int H, int Hkv, int hd, int bf16) {
    const int dq = H * hd, dkv = Hkv * hd, stride = dq + 2 * dkv, group = H / Hkv;
    const float scale = 1.0f / sqrtf((float)hd);
    memset(dqkv, 0, sizeof(float) * (size_t)B * T * stride);
    /* The query heads that share a kv head all add into its dk and dv, so they stay in one
     * task and no two threads write the same rows. */
#pragma omp parallel
    {
        float *P = malloc(sizeof(float) * QBLOCK * (size_t)T), *dS = malloc(sizeof(float) * QBLOCK * (size_t)T);
#pragma omp for schedule(static) collapse(2)
        for (int b = 0; b < B; b++)
            for (int kvh = 0; kvh < Hkv; kvh++) {
                const float *base = qkv + (size_t)b * T * stride;
                float *dbase = dqkv + (size_t)b * T * stride;
                const float *K = base + dq + kvh * hd, *V = base + dq + dkv + kvh * hd;
                float *dK = dbase + dq + kvh * hd, *dV = dbase + dq + dkv + kvh * hd;
                for (int h = kvh * group; h < (kvh + 1) * group; h++)
                    for (int t0 = 0; t0 < T; t0 += QBLOCK) {
                        const int nq = T - t0 < QBLOCK ? T - t0 : QBLOCK, nk = t0 + nq;
                        const float *Q = base + (size_t)t0 * stride + h * hd;
                        const float *dO = dout + ((size_t)b * T + t0) * dq + h * hd;
                        const float *O = out + ((size_t)b * T + t0) * dq + h * hd;
                        /* P from the saved log-sum-exp; dP = dO V^T */
                        nb_gemm(0, 1, nq, nk, hd, scale, Q, stride, K, stride, 0.0f, P, nk);
                        nb_gemm(0, 1, nq, nk, hd, 1.0f, dO, dq, V, stride, 0.0f, dS, nk);
                        for (int i = 0; i < nq; i++) {
                            float *p = P + (size_t)i * nk, *ds = dS + (size_t)i * nk;
                            const int visible = t0 + i + 1;
                            const float l = lse[((size_t)b * H + h) * T + t0 + i];
                            const float D = dot(dO + (size_t)i * dq, O + (size_t)i * dq, hd);
#pragma omp simd
                            for (int s = 0; s < visible; s++) {
                                p[s] = nb_expf(p[s] - l);
                                ds[s] = p[s] * (ds[s] - D) * scale;
                            }
                            for (int s = visible; s < nk; s++) p[s] = ds[s] = 0.0f;
                            if (bf16) {
                                round_bf16(p, visible);
                                round_bf16(ds, visible);
                            }
                        }
                        /* dQ = dS K, dK += dS^T Q, dV += P^T dO */
                        nb_gemm(0, 0, nq, hd, nk, 1.0f, dS, nk, K, stride, 0.0f, dbase + (size_t)t0 * stride + h * hd, stride);
                        nb_gemm(1, 0, nk, hd, nq, 1.0f, dS, nk, Q, stride, 1.0f, dK, stride);
                        nb_gemm(1, 0, nk, hd, nq, 1.0f, P, nk, dO, dq, 1.0f, dV, stride);
                    }
            }
        free(P);
        free(dS);
    }
}
