/* Causal grouped-query attention without a stored T x T matrix: forward keeps only each
 * query row's log-sum-exp; backward recomputes the probabilities from it. Activation memory
 * therefore grows linearly with the context length. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "layers/layers.h"

static inline float dot(const float *a, const float *b, int n) {
    float s = 0.0f;
#pragma omp simd reduction(+ : s)
    for (int i = 0; i < n; i++) s += a[i] * b[i];
    return s;
}

static inline void axpy(float *y, float a, const float *x, int n) {
#pragma omp simd
    for (int i = 0; i < n; i++) y[i] += a * x[i];
}

void attention_forward(float *out, float *lse, const float *qkv, int B, int T, int H, int Hkv, int hd) {
    const int dq = H * hd, dkv = Hkv * hd, stride = dq + 2 * dkv, group = H / Hkv;
    const float scale = 1.0f / sqrtf((float)hd);
#pragma omp parallel
    {
        float *p = malloc(sizeof(float) * (size_t)T);  /* one row of probabilities */
#pragma omp for schedule(static) collapse(2)
        for (int b = 0; b < B; b++)
            for (int h = 0; h < H; h++) {
                const float *base = qkv + (size_t)b * T * stride;
                const int koff = dq + (h / group) * hd, voff = dq + dkv + (h / group) * hd;
                for (int t = 0; t < T; t++) {
                    const float *q = base + (size_t)t * stride + h * hd;
                    float m = -INFINITY;
                    for (int s = 0; s <= t; s++) {
                        p[s] = dot(q, base + (size_t)s * stride + koff, hd) * scale;
                        m = p[s] > m ? p[s] : m;
                    }
                    float sum = 0.0f;
                    for (int s = 0; s <= t; s++) {
                        p[s] = expf(p[s] - m);
                        sum += p[s];
                    }
                    float *o = out + ((size_t)b * T + t) * dq + h * hd;
                    memset(o, 0, sizeof(float) * hd);
                    for (int s = 0; s <= t; s++) axpy(o, p[s], base + (size_t)s * stride + voff, hd);
                    float inv = 1.0f / sum;
                    for (int i = 0; i < hd; i++) o[i] *= inv;
                    lse[((size_t)b * H + h) * T + t] = m + logf(sum);
                }
            }
        free(p);
    }
}

void attention_backward(float *dqkv, const float *dout, const float *out, const float *lse, const float *qkv,
                        int B, int T, int H, int Hkv, int hd) {
    const int dq = H * hd, dkv = Hkv * hd, stride = dq + 2 * dkv, group = H / Hkv;
    const float scale = 1.0f / sqrtf((float)hd);
    memset(dqkv, 0, sizeof(float) * (size_t)B * T * stride);
    /* One task per (sequence, kv head): the query heads that share a kv head all add into
     * its dk and dv, so they stay in one task and no two threads write the same row. */
#pragma omp parallel for schedule(static) collapse(2)
    for (int b = 0; b < B; b++)
        for (int kvh = 0; kvh < Hkv; kvh++) {
            const float *base = qkv + (size_t)b * T * stride;
            float *dbase = dqkv + (size_t)b * T * stride;
            const int koff = dq + kvh * hd, voff = dq + dkv + kvh * hd;
            for (int h = kvh * group; h < (kvh + 1) * group; h++)
                for (int t = 0; t < T; t++) {
                    const size_t row = (size_t)b * T + t;
                    const float *q = base + (size_t)t * stride + h * hd;
                    const float *dO = dout + row * dq + h * hd, *O = out + row * dq + h * hd;
                    float *dqr = dbase + (size_t)t * stride + h * hd;
                    const float l = lse[((size_t)b * H + h) * T + t], D = dot(dO, O, hd);
                    for (int s = 0; s <= t; s++) {
                        const float *k = base + (size_t)s * stride + koff, *v = base + (size_t)s * stride + voff;
                        float p = expf(dot(q, k, hd) * scale - l);
                        float ds = p * (dot(dO, v, hd) - D) * scale;
                        axpy(dqr, ds, k, hd);
                        axpy(dbase + (size_t)s * stride + koff, ds, q, hd);
                        axpy(dbase + (size_t)s * stride + voff, p, dO, hd);
                    }
                }
        }
}
