/* nb_tile_gemm_bf16: attention's small products with bf16 operands on the CPU's bf16 dot-product
 * instruction (AVX512-BF16's VDPBF16PS), where the build targets it.
 *
 * Why: under --precision bf16 attention's operands are bf16 values; nb_tile_gemm multiplies them as
 * floats, one FMA per product. VDPBF16PS takes 32 bf16 values per operand and adds two products per
 * float lane: twice the products per instruction, and half the bytes of the packed operand.
 *
 * Same shape of kernel as tile.c: a tile of R rows x CV vectors of C in registers, k walked in order,
 * two k at a time. B comes packed in pairs along k (backend/backend.h), so one 64-byte load holds 16
 * columns x 2 k; A's pair (A[i][k], A[i][k+1]) is adjacent in a bf16 row and is broadcast as one 32-bit
 * value. Every element of C is the same chain of instructions whatever tile or thread computes it, so
 * the result depends on neither M, N nor the thread count; it differs from nb_tile_gemm on the same
 * values by the instruction's rounding of each pair (docs/precision.md). */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include "backend/cpu.h"
#include "util/error.h"
#include "backend/vec.h"

/* An odd K would drop its last k silently (B holds pairs): a programming error, refused. */
static int odd_k(int K) {
    return K % 2 ? nb_fail("internal error: a bf16 tile product with odd K = %d (pad with a zero k)", K) : 0;
}

#if defined(__AVX512BF16__) && VW == 16
enum { RMAX = NB_TILE_ROWS, CVMAX = 4 };

int nb_cpu_tile_bf16_available(void) { return 1; }

static inline __attribute__((always_inline)) void tile16(const int R, const int CV, int K2, float alpha,
                                                          const nb_bf16 *A, ptrdiff_t lda, const nb_bf16 *B,
                                                          ptrdiff_t ldb, int accumulate, float *C, ptrdiff_t ldc) {
    __m512 acc[RMAX][CVMAX];
    for (int r = 0; r < R; r++)
        for (int c = 0; c < CV; c++)
            acc[r][c] = accumulate ? _mm512_loadu_ps(C + r * ldc + c * VW) : _mm512_setzero_ps();
    for (int kp = 0; kp < K2; kp++) {
        __m512bh b[CVMAX];
        for (int c = 0; c < CV; c++) b[c] = (__m512bh)_mm512_loadu_si512(B + (size_t)kp * 2 * ldb + c * 2 * VW);
        for (int r = 0; r < R; r++) {
            int pair;
            __builtin_memcpy(&pair, A + r * lda + 2 * kp, sizeof pair);
            const __m512bh a = (__m512bh)_mm512_set1_epi32(pair);
            for (int c = 0; c < CV; c++) acc[r][c] = _mm512_dpbf16_ps(acc[r][c], a, b[c]);
        }
    }
    const __m512 s = _mm512_set1_ps(alpha);
    for (int r = 0; r < R; r++)
        for (int c = 0; c < CV; c++) _mm512_storeu_ps(C + r * ldc + c * VW, _mm512_mul_ps(s, acc[r][c]));
}

#define TILE16_CASE(r, cv)                                                 \
    case (r) * 8 + (cv):                                                   \
        tile16(r, cv, K2, alpha, A, lda, B, ldb, accumulate, C, ldc); \
        return;

static void dispatch16(int R, int CV, int K2, float alpha, const nb_bf16 *A, ptrdiff_t lda, const nb_bf16 *B,
                       ptrdiff_t ldb, int accumulate, float *C, ptrdiff_t ldc) {
    switch (R * 8 + CV) {
        TILE16_CASE(1, 1) TILE16_CASE(2, 1) TILE16_CASE(3, 1) TILE16_CASE(4, 1)
        TILE16_CASE(1, 2) TILE16_CASE(2, 2) TILE16_CASE(3, 2) TILE16_CASE(4, 2)
        TILE16_CASE(1, 3) TILE16_CASE(2, 3) TILE16_CASE(3, 3) TILE16_CASE(4, 3)
        TILE16_CASE(1, 4) TILE16_CASE(2, 4) TILE16_CASE(3, 4) TILE16_CASE(4, 4)
    }
}

int nb_cpu_tile_gemm_bf16(int M, int N, int K, float alpha, const nb_bf16 *A, ptrdiff_t lda, const nb_bf16 *B,
                       ptrdiff_t ldb, int accumulate, float *C, ptrdiff_t ldc) {
    if (odd_k(K)) return -1;
    const int nv = (N + VW - 1) / VW, K2 = K / 2;
    for (int i = 0; i < M; i += RMAX) {
        const int R = M - i < RMAX ? M - i : RMAX;
        for (int v = 0; v < nv; v += CVMAX) {
            const int CV = nv - v < CVMAX ? nv - v : CVMAX;
            dispatch16(R, CV, K2, alpha, A + (size_t)i * lda, lda, B + (size_t)v * 2 * VW, ldb, accumulate,
                       C + (size_t)i * ldc + v * VW, ldc);
        }
    }
    return 0;
}
#else
int nb_cpu_tile_bf16_available(void) { return 0; }

/* Without the instruction nobody calls it (attention asks the backend's tile_bf16_native first); a scalar
 * version of the same sums keeps the symbol defined and the contract testable. Like the instruction it
 * treats subnormal inputs as zero and flushes a subnormal sum to zero (each product of two bf16 values
 * is exact in double; the float sum then rounds once per addition, as the instruction's). */
static float flush_subnormal(float x) { return fabsf(x) < FLT_MIN ? 0.0f * x : x; }
static float daz(nb_bf16 v) { return flush_subnormal(nb_bf16_to_float(v)); }

int nb_cpu_tile_gemm_bf16(int M, int N, int K, float alpha, const nb_bf16 *A, ptrdiff_t lda, const nb_bf16 *B,
                       ptrdiff_t ldb, int accumulate, float *C, ptrdiff_t ldc) {
    if (odd_k(K)) return -1;
    const int Np = (N + VW - 1) / VW * VW;
    for (int i = 0; i < M; i++)
        for (int j = 0; j < Np; j++) {
            float acc = accumulate ? C[(size_t)i * ldc + j] : 0.0f;
            for (int kp = 0; kp < K / 2; kp++) {
                const nb_bf16 *b = B + (size_t)kp * 2 * ldb + 2 * j;
                const nb_bf16 *a = A + (size_t)i * lda + 2 * kp;
                acc = flush_subnormal(acc + (float)((double)daz(a[1]) * daz(b[1])));
                acc = flush_subnormal(acc + (float)((double)daz(a[0]) * daz(b[0])));
            }
            C[(size_t)i * ldc + j] = alpha * acc;
        }
    return 0;
}
#endif
