/* Internal: bfloat16 values and the casts between them and float32, shared by the layers, the optimizers
 * and the backends. */
#ifndef NB_BACKEND_BF16_H
#define NB_BACKEND_BF16_H
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include "util/host_device.h"

/* ---- bfloat16 (docs/rules.md section 5) ----
 * A bf16 value is the high half of a float32: 8 exponent bits, 7 stored mantissa bits. Casts round
 * to nearest, ties to even; a NaN stays a NaN (quiet). The product of two bf16 values is exact in
 * float32, so a bf16 GEMM that accumulates in float32 equals an sgemm on the widened operands up to
 * the order of its additions: that is how nb_gemm_bf16 runs where the CPU has no bf16 instructions. */
typedef uint16_t nb_bf16;

/* The casts are integer operations: the CUDA kernels (cuda/kernels.cu) compile them for the GPU too. */

NB_HOST_DEVICE static inline nb_bf16 nb_bf16_from_float(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (nb_bf16)((u >> 16) | 0x40);  /* NaN: keep it quiet */
    u += 0x7fffu + ((u >> 16) & 1u);
    return (nb_bf16)(u >> 16);
}

NB_HOST_DEVICE static inline float nb_bf16_to_float(nb_bf16 b) {
    uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* float(bf16(f)): the value a bf16 operand would carry, kept in a float. */
NB_HOST_DEVICE static inline float nb_bf16_rounded(float f) { return nb_bf16_to_float(nb_bf16_from_float(f)); }

/* dst[i] = bf16(src[i]) for n values (threaded for large n). */
void nb_bf16_cast(nb_bf16 *dst, const float *src, size_t n);
/* x[i] = float(bf16(x[i])): the value a bf16 operand would carry, kept in a float. */
void nb_bf16_round(float *x, size_t n);
/* dst[i] = float(src[i]) for n values (exact; threaded for large n). */
void nb_bf16_widen(float *dst, const nb_bf16 *src, size_t n);
#endif
