#include <math.h>
#include "util/fastmath.h"
#include "layers/layers.h"

#pragma omp declare simd notinbranch
static inline float silu_times(float g, float u) { return g / (1.0f + nb_expf(-g)) * u; }

void swiglu_forward(float *h, const float *gu, int N, int F) {
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        const float *g = gu + (size_t)n * 2 * F, *u = g + F;
        float *hr = h + (size_t)n * F;
#pragma omp simd
        for (int i = 0; i < F; i++) hr[i] = silu_times(g[i], u[i]);
    }
}

void swiglu_forward_bf16(nb_bf16 *h, const nb_bf16 *gu, int N, int F) {
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        const nb_bf16 *g = gu + (size_t)n * 2 * F, *u = g + F;
        nb_bf16 *hr = h + (size_t)n * F;
#pragma omp simd
        for (int i = 0; i < F; i++) hr[i] = nb_bf16_from_float(silu_times(nb_bf16_to_float(g[i]), nb_bf16_to_float(u[i])));
    }
}

/* gate and up rounded to bf16 as they are read (and kept), h computed from the rounded values: one pass
 * where the cast and swiglu_forward_bf16 made two over gate/up. */
void swiglu_forward_cast_bf16(nb_bf16 *h, nb_bf16 *gu16, const float *gu, int N, int F) {
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        const float *g = gu + (size_t)n * 2 * F, *u = g + F;
        nb_bf16 *g16 = gu16 + (size_t)n * 2 * F, *u16 = g16 + F, *hr = h + (size_t)n * F;
#pragma omp simd
        for (int i = 0; i < F; i++) {
            const nb_bf16 gb = nb_bf16_from_float(g[i]), ub = nb_bf16_from_float(u[i]);
            g16[i] = gb;
            u16[i] = ub;
            hr[i] = nb_bf16_from_float(silu_times(nb_bf16_to_float(gb), nb_bf16_to_float(ub)));
        }
    }
}

void swiglu_backward(float *dgu, const float *dh, const float *gu, int N, int F) {
    /* silu(g) = g s(g) with s the sigmoid; silu'(g) = s (1 + g (1 - s)). */
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        const float *g = gu + (size_t)n * 2 * F, *u = g + F, *d = dh + (size_t)n * F;
        float *dg = dgu + (size_t)n * 2 * F, *du = dg + F;
#pragma omp simd
        for (int i = 0; i < F; i++) {
            float s = 1.0f / (1.0f + nb_expf(-g[i]));
            du[i] = d[i] * g[i] * s;
            dg[i] = d[i] * u[i] * s * (1.0f + g[i] * (1.0f - s));
        }
    }
}

/* The same, dgu cast to bf16 as it is computed (the gate/up product's output gradient, which its backward
 * products read only as a bf16 operand): one pass where the float32 dgu and its cast made two. */
void swiglu_backward_bf16_cast(nb_bf16 *dgu16, const float *dh, const nb_bf16 *gu, int N, int F) {
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        const nb_bf16 *g16 = gu + (size_t)n * 2 * F, *u16 = g16 + F;
        const float *d = dh + (size_t)n * F;
        nb_bf16 *dg = dgu16 + (size_t)n * 2 * F, *du = dg + F;
#pragma omp simd
        for (int i = 0; i < F; i++) {
            const float g = nb_bf16_to_float(g16[i]), u = nb_bf16_to_float(u16[i]);
            float s = 1.0f / (1.0f + nb_expf(-g));
            du[i] = nb_bf16_from_float(d[i] * g * s);
            dg[i] = nb_bf16_from_float(d[i] * u * s * (1.0f + g * (1.0f - s)));
        }
    }
}
