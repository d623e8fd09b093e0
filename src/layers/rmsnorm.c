#include <math.h>
#include "layers/layers.h"

/* 1 / sqrt(mean(x^2) + eps) of one row. */
static inline float row_rstd(const float *xr, int d, float eps) {
    float ss = 0.0f;
#pragma omp simd reduction(+ : ss)
    for (int i = 0; i < d; i++) ss += xr[i] * xr[i];
    return 1.0f / sqrtf(ss / (float)d + eps);
}

void rmsnorm_forward(float *out, float *rstd, const float *x, const float *gain, int N, int d, float eps) {
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        const float *xr = x + (size_t)n * d;
        float *yr = out + (size_t)n * d;
        const float r = rstd[n] = row_rstd(xr, d, eps);
#pragma omp simd
        for (int i = 0; i < d; i++) yr[i] = xr[i] * r * gain[i];
    }
}

void rmsnorm_forward_bf16(nb_bf16 *out, float *rstd, const float *x, const float *gain, int N, int d, float eps) {
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        const float *xr = x + (size_t)n * d;
        nb_bf16 *yr = out + (size_t)n * d;
        const float r = rstd[n] = row_rstd(xr, d, eps);
#pragma omp simd
        for (int i = 0; i < d; i++) yr[i] = nb_bf16_from_float(xr[i] * r * gain[i]);
    }
}

void rmsnorm_backward(float *dx, float *dgain, const float *dout, const float *x, const float *gain,
                      const float *rstd, int N, int d) {
    /* y_i = g_i x_i r with r = (mean(x^2) + eps)^(-1/2), so
     * dx_i = r g_i dy_i - x_i r^3 / d * sum_j g_j dy_j x_j. */
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        const float *xr = x + (size_t)n * d, *dy = dout + (size_t)n * d;
        float *dxr = dx + (size_t)n * d;
        float r = rstd[n], dot = 0.0f;
#pragma omp simd reduction(+ : dot)
        for (int i = 0; i < d; i++) dot += gain[i] * dy[i] * xr[i];
        float c = dot * r * r * r / (float)d;
#pragma omp simd
        for (int i = 0; i < d; i++) dxr[i] += r * gain[i] * dy[i] - c * xr[i];
    }
    /* The gain's gradient sums over rows: serial over rows, vectorized along the row. */
    for (int n = 0; n < N; n++) {
        const float *xr = x + (size_t)n * d, *dy = dout + (size_t)n * d;
        float r = rstd[n];
#pragma omp simd
        for (int i = 0; i < d; i++) dgain[i] += dy[i] * xr[i] * r;
    }
}
