/* Internal: an exp that the compiler can vectorize inside `omp simd` loops (libm's expf is
 * a scalar call). The CUDA kernels (src/backend/cuda/kernels.cu) compile the same function for the GPU:
 * its operations (a clamp, floorf, fmaf, a product, a bit pattern) are exact or correctly rounded on both,
 * so the GPU's exp gives the CPU's bits. exp(x) = 2^n exp(r) with n = round(x / ln 2), |r| <= ln(2)/2, exp(r) by
 * its degree-7 Taylor polynomial (truncation error below 6e-9 relative), so the result is
 * within about 2 ulp of expf. Inputs are clamped to [-87, 88], where 2^n stays a normal float;
 * NaN gives NaN. */
#ifndef NB_UTIL_FASTMATH_H
#define NB_UTIL_FASTMATH_H
#include <math.h>
#include <stdint.h>
#include <string.h>
#include "util/host_device.h"

#ifndef __CUDACC__
#pragma omp declare simd notinbranch
#endif
NB_HOST_DEVICE static inline float nb_expf(float x) {
    x = x < -87.0f ? -87.0f : (x > 88.0f ? 88.0f : x);
#ifdef __CUDA_ARCH__
    float n = floorf(__fmul_rn(x, 1.44269504088896341f) + 0.5f);  /* not contracted into an fma: the CPU's */
#else
    float n = floorf(x * 1.44269504088896341f + 0.5f);
#endif
    float r = fmaf(n, -0.693145751953125f, x);   /* ln 2, high part (exact in float) */
    r = fmaf(n, -1.428606765330187e-06f, r);      /* ln 2, low part */
    float p = 1.0f / 5040.0f;
    p = fmaf(p, r, 1.0f / 720.0f);
    p = fmaf(p, r, 1.0f / 120.0f);
    p = fmaf(p, r, 1.0f / 24.0f);
    p = fmaf(p, r, 1.0f / 6.0f);
    p = fmaf(p, r, 0.5f);
    p = fmaf(p, r, 1.0f);
    p = fmaf(p, r, 1.0f);
    /* A NaN input stays NaN through p; n is zeroed for it so that the conversion to int and the
     * shift stay defined. */
    const float ni = n == n ? n : 0.0f;
    int32_t bits = (int32_t)(((uint32_t)((int32_t)ni + 127)) << 23);
    float scale;
    memcpy(&scale, &bits, sizeof scale);
    return p * scale;
}
#endif
