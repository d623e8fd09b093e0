/* Internal to the backend: the vector of the register tiles (tile.c, gemm_tn.c) and the two operations
 * whose rounding their per-element contracts fix. VW floats per vector: AVX-512, AVX, or 4 (the
 * compiler's generic vectors) elsewhere. */
#ifndef NB_BACKEND_VEC_H
#define NB_BACKEND_VEC_H
#if defined(__AVX__)
#include <immintrin.h>
#endif

#if defined(__AVX512F__)
#define VW 16
#elif defined(__AVX__)
#define VW 8
#else
#define VW 4
#endif

typedef float vec __attribute__((vector_size(VW * sizeof(float))));

/* x in every lane (adding x to a zero vector would not do: 0 + -0 is +0, and it costs an add). */
static inline vec splat(float x) {
#if VW == 16
    return (vec)_mm512_set1_ps(x);
#elif VW == 8
    return (vec)_mm256_set1_ps(x);
#else
    vec v;
    for (int l = 0; l < VW; l++) v[l] = x;
    return v;
#endif
}

/* acc + a * b rounded once where the CPU has FMA (the intrinsic, not a contraction the compiler may or
 * may not make: the same bits at every optimization level); multiplied, then added, where it has not. */
static inline vec fma_v(vec a, vec b, vec acc) {
#if VW == 16
    return (vec)_mm512_fmadd_ps((__m512)a, (__m512)b, (__m512)acc);
#elif VW == 8 && defined(__FMA__)
    return (vec)_mm256_fmadd_ps((__m256)a, (__m256)b, (__m256)acc);
#else
    return acc + a * b;
#endif
}
#endif
