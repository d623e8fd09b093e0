#include "layers/layers.h"

/* Rotates each (i, i + hd/2) pair of every head by +angle (forward) or -angle (backward:
 * the transpose of a rotation is the rotation by the opposite angle). */
static void rope_rotate(float *x, int B, int T, int stride, int n_rot_heads, int hd, const float *cos_t,
                        const float *sin_t, float sign) {
    int half = hd / 2;
#pragma omp parallel for schedule(static)
    for (int n = 0; n < B * T; n++) {
        const float *c = cos_t + (size_t)(n % T) * half, *s = sin_t + (size_t)(n % T) * half;
        for (int h = 0; h < n_rot_heads; h++) {
            float *lo = x + (size_t)n * stride + (size_t)h * hd, *hi = lo + half;
#pragma omp simd
            for (int i = 0; i < half; i++) {
                float a = lo[i], b = hi[i], si = sign * s[i];
                lo[i] = a * c[i] - b * si;
                hi[i] = b * c[i] + a * si;
            }
        }
    }
}

void rope_forward(float *x, int B, int T, int stride, int n_rot_heads, int hd, const float *cos_t,
                  const float *sin_t) {
    rope_rotate(x, B, T, stride, n_rot_heads, hd, cos_t, sin_t, 1.0f);
}

void rope_backward(float *dx, int B, int T, int stride, int n_rot_heads, int hd, const float *cos_t,
                   const float *sin_t) {
    rope_rotate(dx, B, T, stride, n_rot_heads, hd, cos_t, sin_t, -1.0f);
}
