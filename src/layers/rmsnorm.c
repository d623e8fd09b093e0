#include <math.h>
#include <omp.h>
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

/* dx of one row: dx_i += r g_i dy_i - x_i r^3 / d * sum_j g_j dy_j x_j. */
static inline void row_dx(float *dxr, const float *dy, const float *xr, const float *gain, float r, int d) {
    float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
    for (int i = 0; i < d; i++) dot += gain[i] * dy[i] * xr[i];
    float c = dot * r * r * r / (float)d;
#pragma omp simd
    for (int i = 0; i < d; i++) dxr[i] += r * gain[i] * dy[i] - c * xr[i];
}

/* dgain[lo, hi) += dy x r of one row. */
static inline void row_dgain(float *dgain, const float *dy, const float *xr, float r, int lo, int hi) {
#pragma omp simd
    for (int i = lo; i < hi; i++) dgain[i] += dy[i] * xr[i] * r;
}

void rmsnorm_backward(float *dx, float *dgain, const float *dout, const float *x, const float *gain,
                      const float *rstd, int N, int d) {
    /* y_i = g_i x_i r with r = (mean(x^2) + eps)^(-1/2). The gain's gradient sums over rows, always in
     * row order, so that it does not depend on the thread count: one thread does both in one pass over
     * the rows; several split dx by rows, then dgain by columns (each column's sum stays serial). */
    if (omp_get_max_threads() == 1) {
        for (int n = 0; n < N; n++) {
            const float *xr = x + (size_t)n * d, *dy = dout + (size_t)n * d;
            row_dx(dx + (size_t)n * d, dy, xr, gain, rstd[n], d);
            row_dgain(dgain, dy, xr, rstd[n], 0, d);
        }
        return;
    }
#pragma omp parallel
    {
#pragma omp for schedule(static)
        for (int n = 0; n < N; n++)
            row_dx(dx + (size_t)n * d, dout + (size_t)n * d, x + (size_t)n * d, gain, rstd[n], d);
        /* columns in chunks of 16 floats (a cache line), as even as that allows */
        const int threads = omp_get_num_threads(), me = omp_get_thread_num();
        const int chunks = (d + 15) / 16, lo_chunk = (int)((long)chunks * me / threads);
        const int lo = 16 * lo_chunk, hi_chunk = (int)((long)chunks * (me + 1) / threads);
        const int hi = 16 * hi_chunk < d ? 16 * hi_chunk : d;
        for (int n = 0; n < N && lo < hi; n++)
            row_dgain(dgain, dout + (size_t)n * d, x + (size_t)n * d, rstd[n], lo, hi);
    }
}
