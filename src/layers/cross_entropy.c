#include <math.h>
#include "util/fastmath.h"
#include "layers/layers.h"

/* log sum exp of one row of logits. */
static inline float row_lse(const float *z, int V) {
    float m = z[0];
#pragma omp simd reduction(max : m)
    for (int i = 1; i < V; i++) m = z[i] > m ? z[i] : m;
    float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
    for (int i = 0; i < V; i++) sum += nb_expf(z[i] - m);
    return m + logf(sum);
}

/* sum over rows of lse - logit of the target, in double, in row order. */
static double loss_sum(const float *lse, const float *logits, const int *targets, int N, int V) {
    double total = 0.0;
    for (int n = 0; n < N; n++) total += (double)lse[n] - (double)logits[(size_t)n * V + targets[n]];
    return total;
}

/* d = bf16(k softmax(z) - k onehot(t)) of one row, from its log-sum-exp l. */
static inline void row_grad_bf16(nb_bf16 *d, const float *z, float l, int t, int V, float k) {
#pragma omp simd
    for (int i = 0; i < V; i++) d[i] = nb_bf16_from_float(k * nb_expf(z[i] - l) - (i == t ? k : 0.0f));
}

double cross_entropy_forward(float *lse, const float *logits, const int *targets, int N, int V) {
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) lse[n] = row_lse(logits + (size_t)n * V, V);
    return loss_sum(lse, logits, targets, N, V);
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
    for (int n = 0; n < N; n++)
        row_grad_bf16(dlogits + (size_t)n * V, logits + (size_t)n * V, lse[n], targets[n], V, k);
}

/* Each row's gradient right after its log-sum-exp, while the row is still in cache: the logits are read
 * from memory once instead of twice. */
double cross_entropy_forward_grad_bf16(float *lse, nb_bf16 *dlogits, const float *logits, const int *targets, int N,
                                       int V, int n_mean) {
    const float k = 1.0f / (float)n_mean;
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        const float *z = logits + (size_t)n * V;
        lse[n] = row_lse(z, V);
        row_grad_bf16(dlogits + (size_t)n * V, z, lse[n], targets[n], V, k);
    }
    return loss_sum(lse, logits, targets, N, V);
}
