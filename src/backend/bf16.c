/* The bf16 casts of whole arrays (bf16.h). */
#include "backend/bf16.h"

void nb_bf16_cast(nb_bf16 *dst, const float *src, size_t n) {
#pragma omp parallel for schedule(static) if (n > 65536)
    for (size_t i = 0; i < n; i++) dst[i] = nb_bf16_from_float(src[i]);
}

void nb_bf16_round(float *x, size_t n) {
#pragma omp parallel for schedule(static) if (n > 65536)
    for (size_t i = 0; i < n; i++) x[i] = nb_bf16_rounded(x[i]);
}

void nb_bf16_widen(float *dst, const nb_bf16 *src, size_t n) {
#pragma omp parallel for schedule(static) if (n > 65536)
    for (size_t i = 0; i < n; i++) dst[i] = nb_bf16_to_float(src[i]);
}
