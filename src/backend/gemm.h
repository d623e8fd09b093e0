/* The one interface between the math and the matrix-multiply hardware: every matrix product
 * in nobubble goes through nb_gemm (or nb_syrk, for the symmetric products X X^T of Muon's
 * Newton-Schulz, or nb_tile_gemm, for attention's small per-task blocks), so that a new backend
 * (another CPU library, CUDA) is one file. Row-major:  C[M,N] = alpha * op(A)[M,K] * op(B)[K,N] + beta * C,
 * op(X) = X^T when the matching trans flag is set; lda/ldb/ldc are row strides.
 * Two CPU libraries are built in, oneDNN's sgemm and OpenBLAS (OpenMP build), and choices that mix
 * them: "hybrid" uses oneDNN except for products A^T B, where oneDNN 2.6 is slow and OpenBLAS is not;
 * "tiles" (the default where the build targets AVX-512; "hybrid" elsewhere) is hybrid with its A^T B
 * (every weight gradient) on nobubble's own packed register tiles (nb_gemm_tn_tiles) instead of
 * OpenBLAS; "matmul" is hybrid with its large A B and A B^T
 * (C of 2^20 elements or more, at most 1,024 columns, dense) through oneDNN's matmul primitive (brgemm
 * kernels, cached per shape and thread) instead of its sgemm. NB_GEMM=onednn|openblas|hybrid|matmul|tiles
 * in the environment, or nb_gemm_select, picks one.
 *
 * Where a device backend (a GPU) plugs in, later; none is built today (docs/architecture.md):
 *  - Kernels per layer, not only GEMM: src/layers/layers.h is the list of what a stage computes
 *    (embedding, rmsnorm, linear, rope, attention, swiglu, cross_entropy, forward and backward).
 *    A device backend gives each of those one implementation beside the CPU's (a table of function
 *    pointers chosen here, as nb_gemm_select chooses a GEMM), with nb_gemm its linear products.
 *  - Memory that lives on the device: today every buffer is a host float* (a stage's parameters,
 *    gradients and activation slots, allocated by src/model/stage.c; the optimizer state and weight
 *    versions of src/optim and src/delay). The seam is those allocations: a backend would own
 *    alloc/free/copy of a stage's buffers, and the layers, optimizer rules and stash would take the
 *    same pointers, now device ones. Host copies are needed only where bytes leave the stage:
 *    messages between stages (src/runtime), checkpoints (src/checkpoint, src/train/state.c) and the
 *    weights hash.
 *  - This header stays the one place that names a backend: the rest of src/ calls nb_gemm and the
 *    layer functions, and never a library (oneDNN, OpenBLAS, a device runtime) directly.
 * Bitwise reproducibility holds per backend: a device's kernels would be checked against the CPU's
 * within tolerance, and against themselves bitwise. */
#ifndef NB_BACKEND_GEMM_H
#define NB_BACKEND_GEMM_H
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* The result does not depend on the OpenMP thread count: outside a parallel region C is cut into tiles
 * fixed by M and N, each one single-threaded library call, spread over the threads (only oneDNN with a
 * C of at least 2^20 elements keeps its own threads, which split C, not K); inside one it is one call on
 * the calling thread (gemm.c, "Results independent of the thread count"). */
void nb_gemm(int trans_a, int trans_b, int M, int N, int K, float alpha, const float *A, int lda,
             const float *B, int ldb, float beta, float *C, int ldc);
/* C[N,N] = alpha * op(A) op(A)^T + beta * C with op(A) = A (N x K, trans = 0: A A^T) or A^T (A stored
 * K x N, trans = 1: A^T A): a symmetric product. Both triangles are written (the upper one computed, the
 * lower one copied from it, so C is exactly symmetric); only the upper triangle of C on entry affects the
 * result (for beta). The upper triangle runs as row panels of 128 through nb_gemm (gemm.c: about 5/8 of a
 * full product's flops at N = 512), so it has nb_gemm's properties: the same result whatever the thread
 * count, on the calling thread inside a parallel region (Muon and NorMuon call it there, one matrix per
 * thread). Counted by nb_gemm_timing like a GEMM. */
void nb_syrk(int trans, int N, int K, float alpha, const float *A, int lda, float beta, float *C, int ldc);
/* ---- Small products inside one task (tile.c): attention's blocks ----
 * C[M][N] = alpha * (init + sum over k = 0..K-1 of A(i,k) B[k][j]), init = C's old value when accumulate,
 * else 0; A(i,k) = A[i * ars + k * aks] (any strides: A or A^T in place), B and C rows of ldb and ldc
 * floats. Padding: N is rounded up to nb_tile_width(), and B's rows are read and C's rows written that
 * far, so both must have room (pad B with zeros; the extra columns of C are scratch). Serial, on the
 * calling thread; each element is one chain of fused multiply-adds over k in order (multiply and add
 * where the CPU has no FMA), so the result does not depend on M, N, the blocking or the thread count.
 * Not counted by nb_gemm_timing. NB_TILE_ROWS: the rows of C that one register tile holds (callers
 * that skip work by rows, such as causal attention, cut at multiples of it). */
enum { NB_TILE_ROWS = 4 };
void nb_tile_gemm(int M, int N, int K, float alpha, const float *A, ptrdiff_t ars, ptrdiff_t aks,
                  const float *B, ptrdiff_t ldb, int accumulate, float *C, ptrdiff_t ldc);
int nb_tile_width(void);

/* The name of the backend in use, for run headers and benchmarks. */
const char *nb_gemm_backend(void);
/* Chooses the backend by name ("onednn", "openblas", "hybrid", "matmul" or "tiles"); -1 with a message
 * otherwise.
 * Call before any GEMM runs (it is not synchronized with running GEMMs). */
int nb_gemm_select(const char *name);

/* ---- bfloat16 (docs/rules.md section 5) ----
 * A bf16 value is the high half of a float32: 8 exponent bits, 7 stored mantissa bits. Casts round
 * to nearest, ties to even; a NaN stays a NaN (quiet). The product of two bf16 values is exact in
 * float32, so a bf16 GEMM that accumulates in float32 equals an sgemm on the widened operands up to
 * the order of its additions: that is how nb_gemm_bf16 runs where the CPU has no bf16 instructions. */
typedef uint16_t nb_bf16;

static inline nb_bf16 nb_bf16_from_float(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (nb_bf16)((u >> 16) | 0x40);  /* NaN: keep it quiet */
    u += 0x7fffu + ((u >> 16) & 1u);
    return (nb_bf16)(u >> 16);
}

static inline float nb_bf16_to_float(nb_bf16 b) {
    uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* float(bf16(f)): the value a bf16 operand would carry, kept in a float. */
static inline float nb_bf16_rounded(float f) { return nb_bf16_to_float(nb_bf16_from_float(f)); }

/* dst[i] = bf16(src[i]) for n values (threaded for large n). */
void nb_bf16_cast(nb_bf16 *dst, const float *src, size_t n);
/* x[i] = float(bf16(x[i])): the value a bf16 operand would carry, kept in a float. */
void nb_bf16_round(float *x, size_t n);
/* dst[i] = float(src[i]) for n values (exact; threaded for large n). */
void nb_bf16_widen(float *dst, const nb_bf16 *src, size_t n);
/* ---- Attention's small products with bf16 operands (tile_bf16.c) ----
 * C[M][N] = alpha * (init + sum over k-pairs p = 0..K/2-1 of [A(i,2p+1) B(2p+1,j) then A(i,2p) B(2p,j)]),
 * init as in nb_tile_gemm, on the CPU's bf16 dot-product instruction (AVX512-BF16's VDPBF16PS: each
 * product exact, each of the two additions rounded to nearest even, subnormal inputs and sums taken as
 * zero). K even (pad with a zero k; an odd K stops the program, as a programming error). A: bf16 rows,
 * A(i,k) = A[i * lda + k]. B packed in pairs along k: B(k,j) = B[(k / 2) * 2 * ldb + 2 * j + k % 2],
 * ldb >= N rounded up to 16 (pad with zeros); C's rows are
 * written that far, as nb_tile_gemm's. Serial; same chain for every element whatever M, N or the thread.
 * nb_tile_bf16_available(): 1 where the build has the instruction (only then is it fast: elsewhere
 * a scalar version of the same sums and the same subnormal rule, for tests). */
int nb_tile_bf16_available(void);
void nb_tile_gemm_bf16(int M, int N, int K, float alpha, const nb_bf16 *A, ptrdiff_t lda, const nb_bf16 *B,
                       ptrdiff_t ldb, int accumulate, float *C, ptrdiff_t ldc);
/* C[M,N] = alpha * op(A) op(B) + beta * C with bf16 operands and float32 accumulation and output;
 * the same conventions as nb_gemm. Widened, it is nb_gemm (independent of the thread count); oneDNN's bf16
 * matmul keeps its own threading, deterministic for a given thread count (docs/executor.md, "Thread counts"). */
void nb_gemm_bf16(int trans_a, int trans_b, int M, int N, int K, float alpha, const nb_bf16 *A, int lda,
                  const nb_bf16 *B, int ldb, float beta, float *C, int ldc);
/* nb_syrk with bf16 operands and float32 accumulation: where nb_gemm_bf16 runs oneDNN's bf16 matmul, the
 * same row panels through it; where it widens, the widened operand through nb_syrk. */
void nb_syrk_bf16(int trans, int N, int K, float alpha, const nb_bf16 *A, int lda, float beta, float *C, int ldc);
/* 1 where oneDNN reports bf16 instructions (AVX512-BF16 or AMX), where nb_gemm_bf16 runs oneDNN's bf16
 * matmul; 0 elsewhere, where it widens the operands and runs the fp32 GEMM. */
int nb_bf16_native(void);
/* The ISA oneDNN reports, for run headers and benchmarks ("avx512_core_amx", "avx2", ...). */
const char *nb_cpu_isa_name(void);

/* ---- Time spent in GEMMs, for `nobubble bench`'s share of the step outside GEMMs ----
 * Off unless a benchmark turns it on (then each call costs two clock reads). While on, every
 * nb_gemm and nb_gemm_bf16 call adds its wall time divided by the size of the OpenMP team it runs in:
 * a call made outside a parallel region (the linear layers, the head, the weight gradients) adds its
 * wall time; a call made by one thread of a parallel region (Muon's
 * and SOAP's per-matrix products) adds wall / threads, so a region whose threads all multiply adds
 * about its wall time (exactly when the threads' GEMM times are equal). A GEMM run by another
 * (nb_gemm_bf16 widening to nb_gemm) counts once. Not for use while GEMMs run on other threads. */
void nb_gemm_timing(int on);    /* turns the count on (1) or off (0) and zeroes it */
double nb_gemm_seconds(void);   /* seconds counted since the last nb_gemm_timing */
/* C's lower triangle (N x N, row stride ldc) <- its upper triangle. */
void nb_mirror_upper(float *C, int N, int ldc);
/* For the GEMM entry points: begin returns the start time, or a negative value when not counting;
 * end(start) adds the call's share. */
double nb_gemm_time_begin(void);
void nb_gemm_time_end(double start);

/* Rows of C's upper triangle per GEMM in nb_syrk and nb_syrk_bf16 (gemm.c says why 128). */
enum { NB_SYRK_PANEL = 128 };

/* The implementations (one file each). */
void nb_gemm_onednn(int trans_a, int trans_b, int M, int N, int K, float alpha, const float *A, int lda,
                    const float *B, int ldb, float beta, float *C, int ldc);
void nb_gemm_openblas(int trans_a, int trans_b, int M, int N, int K, float alpha, const float *A, int lda,
                      const float *B, int ldb, float beta, float *C, int ldc);
/* C[M,N] = alpha * A^T B + beta * C (A stored K x M) on register tiles of its own over packed,
 * cache-blocked slices (gemm_tn.c): each element one FMA chain over k in order from 0, then alpha * sum + beta * C
 * (C not read when beta is 0), so the result depends on neither the blocking nor the thread count. Its
 * own threads outside a parallel region, the calling thread inside one. */
void nb_gemm_tn_tiles(int M, int N, int K, float alpha, const float *A, int lda, const float *B, int ldb, float beta,
                      float *C, int ldc);
#endif
