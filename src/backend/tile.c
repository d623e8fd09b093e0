/* nb_tile_gemm: the small products inside one task (attention's blocks), register-blocked.
 *
 * Why not nb_gemm: attention multiplies 64 x (up to T) x 64 blocks with strided operands, thousands
 * of times per step, one thread each. A library call packs both operands and pays its setup every
 * time; measured at 55-85 GFLOP/s on one thread where the same libraries reach 120+ on the linear
 * layers (BENCHMARKS.md). Here the caller packs B once (K^T, V, ... for a whole head) and A is read in
 * place, any strides, so op(A) is A or A^T for free.
 *
 * The kernel keeps a tile of RMAX rows x CV vectors of C in registers and walks k in order, one fused
 * multiply-add per element per k. So every element of C is the same chain whatever the tile it falls
 * in, and the result depends on neither M, N nor the thread that runs it. The FMA is the intrinsic,
 * not a contraction the compiler may or may not make (it makes none at -O0, nor under ISO C's default,
 * docs/precision.md): the same bits at every optimization level. */
#include "backend/cpu.h"
#include "backend/vec.h"

#if VW == 16
#define CVMAX 4
#else
#define CVMAX 2
#endif
enum { RMAX = NB_TILE_ROWS };

/* The same vector at any float's alignment: loads and stores through it need not be aligned. */
typedef float vec_u __attribute__((vector_size(VW * sizeof(float)), aligned(sizeof(float)), may_alias));

int nb_cpu_tile_width(void) { return VW; }

/* One tile: C[R][CV * VW] of the result. Inlined with constant R and CV at each call in tile_dispatch,
 * so that the accumulators are registers and the loops unroll. */
static inline __attribute__((always_inline)) void tile(const int R, const int CV, int K, float alpha,
                                                        const float *A, ptrdiff_t ars, ptrdiff_t aks,
                                                        const float *B, ptrdiff_t ldb, int accumulate, float *C,
                                                        ptrdiff_t ldc) {
    vec acc[RMAX][CVMAX];
    for (int r = 0; r < R; r++)
        for (int c = 0; c < CV; c++) {
            acc[r][c] = (vec){0};
            if (accumulate) acc[r][c] = *(const vec_u *)(C + r * ldc + c * VW);
        }
    for (int k = 0; k < K; k++) {
        vec b[CVMAX];
        for (int c = 0; c < CV; c++) b[c] = *(const vec_u *)(B + k * ldb + c * VW);
        for (int r = 0; r < R; r++) {
            const vec a = splat(A[r * ars + k * aks]);
            for (int c = 0; c < CV; c++) acc[r][c] = fma_v(a, b[c], acc[r][c]);
        }
    }
    for (int r = 0; r < R; r++)
        for (int c = 0; c < CV; c++) *(vec_u *)(C + r * ldc + c * VW) = alpha * acc[r][c];
}

#define TILE_CASE(r, cv)                                                 \
    case (r) * 8 + (cv):                                                 \
        tile(r, cv, K, alpha, A, ars, aks, B, ldb, accumulate, C, ldc); \
        return;

static void tile_dispatch(int R, int CV, int K, float alpha, const float *A, ptrdiff_t ars, ptrdiff_t aks,
                          const float *B, ptrdiff_t ldb, int accumulate, float *C, ptrdiff_t ldc) {
    switch (R * 8 + CV) {
        TILE_CASE(1, 1) TILE_CASE(2, 1) TILE_CASE(3, 1) TILE_CASE(4, 1)
        TILE_CASE(1, 2) TILE_CASE(2, 2) TILE_CASE(3, 2) TILE_CASE(4, 2)
#if CVMAX == 4
        TILE_CASE(1, 3) TILE_CASE(2, 3) TILE_CASE(3, 3) TILE_CASE(4, 3)
        TILE_CASE(1, 4) TILE_CASE(2, 4) TILE_CASE(3, 4) TILE_CASE(4, 4)
#endif
    }
}

void nb_cpu_tile_gemm(int M, int N, int K, float alpha, const float *A, ptrdiff_t ars, ptrdiff_t aks,
                  const float *B, ptrdiff_t ldb, int accumulate, float *C, ptrdiff_t ldc) {
    const int nv = (N + VW - 1) / VW;
    for (int i = 0; i < M; i += RMAX) {
        const int R = M - i < RMAX ? M - i : RMAX;
        for (int v = 0; v < nv; v += CVMAX) {
            const int CV = nv - v < CVMAX ? nv - v : CVMAX;
            tile_dispatch(R, CV, K, alpha, A + i * ars, ars, aks, B + v * VW, ldb, accumulate, C + i * ldc + v * VW,
                          ldc);
        }
    }
}
