#include <math.h>
#include "layers/fastmath.h"
#include "layers/layers.h"

double cross_entropy_forward(float *lse, const float *logits, const int *targets, int N, int V) {
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        const float *z = logits + (size_t)n * V;
        float m = z[0];
#pragma omp simd reduction(max : m)
        for (int i = 1; i < V; i++) m = z[i] > m ? z[i] : m;
        float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
        for (int i = 0; i < V; i++) sum += nb_expf(z[i] - m);
        lse[n] = m + logf(sum);
    }
    double total = 0.0;
    for (int n = 0; n < N; n++) total += (double)lse[n] - (double)logits[(size_t)n * V + targets[n]];
    return total;
}

void cross_entropy_backward(float *logits, const float *lse, const int *targets, int N, int V, float scale,
                            int n_mean) {
    float k = scale / (float)n_mean;
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        float *z = logits + (size_t)n * V;
        const float l = lse[n];
#pragma omp simd
        for (int i = 0; i < V; i++) z[i] = k * nb_expf(z[i] - l);
        z[targets[n]] -= k;
    }
}

void cross_entropy_grad_bf16(nb_bf16 *dlogits, const float *logits, const float *lse, const int *targets, int N, int V,
                             int n_mean) {
    const float k = 1.0f / (float)n_mean;
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        const float *z = logits + (size_t)n * V;
        nb_bf16 *d = dlogits + (size_t)n * V;
        const float l = lse[n];
        const int t = targets[n];
#pragma omp simd
        for (int i = 0; i < V; i++) d[i] = nb_bf16_from_float(k * nb_expf(z[i] - l) - (i == t ? k : 0.0f));
    }
}
