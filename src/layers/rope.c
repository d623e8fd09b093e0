#include "layers/layers.h"

/* Rotates one (lo, hi) pair of half-heads by +angle (sign 1) or -angle (sign -1: the transpose of
 * a rotation is the rotation by the opposite angle). The one place the rotation is written, so that
 * the float32 and the bf16 passes compute the same values. */
#pragma omp declare simd notinbranch
static inline float rotated_lo(float a, float b, float c, float si) { return a * c - b * si; }
#pragma omp declare simd notinbranch
static inline float rotated_hi(float a, float b, float c, float si) { return b * c + a * si; }

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
                lo[i] = rotated_lo(a, b, c[i], si);
                hi[i] = rotated_hi(a, b, c[i], si);
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

/* One pass over each row instead of three (rotate, round, cast): the rotated heads are rounded as
 * they are computed, the heads that are not rotated (v) are rounded and cast as they are read. */
void rope_forward_bf16(float *x, nb_bf16 *x16, int B, int T, int stride, int n_rot_heads, int hd,
                       const float *cos_t, const float *sin_t) {
    const int half = hd / 2, rotated = n_rot_heads * hd;
#pragma omp parallel for schedule(static)
    for (int n = 0; n < B * T; n++) {
        const float *c = cos_t + (size_t)(n % T) * half, *s = sin_t + (size_t)(n % T) * half;
        float *row = x + (size_t)n * stride;
        nb_bf16 *row16 = x16 + (size_t)n * stride;
        for (int h = 0; h < n_rot_heads; h++) {
            float *lo = row + (size_t)h * hd, *hi = lo + half;
            nb_bf16 *lo16 = row16 + (size_t)h * hd, *hi16 = lo16 + half;
#pragma omp simd
            for (int i = 0; i < half; i++) {
                const float a = lo[i], b = hi[i], si = s[i];
                const nb_bf16 l16 = nb_bf16_from_float(rotated_lo(a, b, c[i], si));
                const nb_bf16 h16 = nb_bf16_from_float(rotated_hi(a, b, c[i], si));
                lo16[i] = l16;
                hi16[i] = h16;
                lo[i] = nb_bf16_to_float(l16);
                hi[i] = nb_bf16_to_float(h16);
            }
        }
#pragma omp simd
        for (int i = rotated; i < stride; i++) {
            const nb_bf16 v16 = nb_bf16_from_float(row[i]);
            row16[i] = v16;
            row[i] = nb_bf16_to_float(v16);
        }
    }
}

/* The backward's rotation (by -angle) written to bf16 as it is computed, the rest of each row (dv) cast:
 * one pass where rotating in place and the cast made two. */
void rope_backward_cast_bf16(nb_bf16 *dx16, const float *dx, int B, int T, int stride, int n_rot_heads, int hd,
                             const float *cos_t, const float *sin_t) {
    const int half = hd / 2, rotated = n_rot_heads * hd;
#pragma omp parallel for schedule(static)
    for (int n = 0; n < B * T; n++) {
        const float *c = cos_t + (size_t)(n % T) * half, *s = sin_t + (size_t)(n % T) * half;
        const float *row = dx + (size_t)n * stride;
        nb_bf16 *row16 = dx16 + (size_t)n * stride;
        for (int h = 0; h < n_rot_heads; h++) {
            const float *lo = row + (size_t)h * hd, *hi = lo + half;
            nb_bf16 *lo16 = row16 + (size_t)h * hd, *hi16 = lo16 + half;
#pragma omp simd
            for (int i = 0; i < half; i++) {
                const float a = lo[i], b = hi[i], si = -1.0f * s[i];
                lo16[i] = nb_bf16_from_float(rotated_lo(a, b, c[i], si));
                hi16[i] = nb_bf16_from_float(rotated_hi(a, b, c[i], si));
            }
        }
#pragma omp simd
        for (int i = rotated; i < stride; i++) row16[i] = nb_bf16_from_float(row[i]);
    }
}
