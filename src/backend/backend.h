/* Internal: what the math calls on a backend (include/nobubble/backend.h says what a backend is).
 * Every matrix product in nobubble goes through one of the calls below, on the backend its stage holds:
 * nb_gemm, nb_syrk (the symmetric products X X^T of Muon's Newton-Schulz), nb_tile_gemm (attention's
 * small per-task blocks), each also with bf16 operands. A backend is a table of these operations with
 * its own state, the way src/runtime/link.h makes a transport; a new backend (a GPU's) is one more
 * table, and no caller changes.
 *
 * Where a device backend plugs in (docs/architecture.md, "Backends"): it implements the products
 * below and the memory calls (alloc, free, copies to and from the host, check); a stage's weights,
 * gradients and activation slots are then its memory. What stays on the host: the bytes that leave a
 * stage (messages between stages, checkpoints, the weights hash), copied through to_host/from_host.
 *
 * Row-major throughout:  C[M,N] = alpha * op(A)[M,K] * op(B)[K,N] + beta * C, op(X) = X^T when the
 * matching trans flag is set; lda/ldb/ldc are row strides. A product's failure (out of memory, a
 * library's error) is recorded in the backend and reported by nb_backend_check; C is then unspecified.
 * The memory calls report at once instead (alloc returns NULL with nb_fail). */
#ifndef NB_BACKEND_BACKEND_H
#define NB_BACKEND_BACKEND_H
#include <stddef.h>
#include "backend/bf16.h"
#include "nobubble/backend.h"

typedef struct nb_backend_ops {
    void (*gemm)(const nb_backend *b, int trans_a, int trans_b, int M, int N, int K, float alpha, const float *A,
                 int lda, const float *B, int ldb, float beta, float *C, int ldc);
    void (*gemm_bf16)(const nb_backend *b, int trans_a, int trans_b, int M, int N, int K, float alpha,
                      const nb_bf16 *A, int lda, const nb_bf16 *B, int ldb, float beta, float *C, int ldc);
    void (*syrk)(const nb_backend *b, int trans, int N, int K, float alpha, const float *A, int lda, float beta,
                 float *C, int ldc);
    void (*syrk_bf16)(const nb_backend *b, int trans, int N, int K, float alpha, const nb_bf16 *A, int lda,
                      float beta, float *C, int ldc);
    void (*tile_gemm)(const nb_backend *b, int M, int N, int K, float alpha, const float *A, ptrdiff_t ars,
                      ptrdiff_t aks, const float *B, ptrdiff_t ldb, int accumulate, float *C, ptrdiff_t ldc);
    void (*tile_gemm_bf16)(const nb_backend *b, int M, int N, int K, float alpha, const nb_bf16 *A, ptrdiff_t lda,
                           const nb_bf16 *B, ptrdiff_t ldb, int accumulate, float *C, ptrdiff_t ldc);
    /* Zeroed memory of the backend, and its release. Unlike the products, memory reports at once: NULL
     * with nb_fail naming `what` (the calling thread's error), nothing recorded. */
    void *(*alloc)(const nb_backend *b, size_t bytes, const char *what);
    void (*free)(const nb_backend *b, void *p);
    /* Copies between the backend's memory and the host's. */
    void (*to_host)(const nb_backend *b, void *host, const void *mem, size_t bytes);
    void (*from_host)(const nb_backend *b, void *mem, const void *host, size_t bytes);
    /* Waits for queued work; 0, or -1 with nb_fail of the first failure recorded since the last check. */
    int (*check)(const nb_backend *b);
    void (*close)(nb_backend *b);
    /* Within the backend's memory: dst = src (bytes; the ranges may overlap), and zeroing. */
    void (*copy)(const nb_backend *b, void *dst, const void *src, size_t bytes);
    void (*zero)(const nb_backend *b, void *mem, size_t bytes);
    /* Arithmetic on n floats of the backend's memory, for what the executor computes between a stage's
     * backward and its optimizer (the tied embedding's sum, global clipping, the norms in metrics):
     * dst += src; x *= scale; and the sum of squares of x (y NULL) or of x - y, in double, deterministic
     * (one order whatever the thread count), returned to the host (a device waits for it). */
    void (*add)(const nb_backend *b, float *dst, const float *src, size_t n);
    void (*scale)(const nb_backend *b, float *x, size_t n, float scale);
    double (*sum_squares)(const nb_backend *b, const float *x, const float *y, size_t n);
} nb_backend_ops;

enum { NB_DEVICE_HOST, NB_DEVICE_GUARDED, NB_DEVICE_CUDA };
struct nb_backend {
    const nb_backend_ops *ops;
    char name[32];          /* as opened: "tiles", "hybrid:widen" */
    const char *label;      /* for run headers and benchmarks */
    int tile_width;         /* nb_tile_gemm pads N to a multiple of this */
    int tile_bf16_native;   /* 1: nb_tile_gemm_bf16 runs on the CPU's bf16 dot-product instruction */
    int bf16_native;        /* 1: nb_gemm_bf16 runs on bf16 instructions; 0: widened to fp32 */
    /* 1: alloc returns memory the host must not read or write (a GPU's). A stage placed on such a backend
     * (nb_stage_place) keeps its weights, gradients, activations and scratch there, and the host reaches them
     * only through to_host and from_host; 0: the host's memory, read in place. */
    int device_memory;
    /* Which device's memory (NB_DEVICE_HOST where device_memory is 0): what picks the layer, rule and delay
     * tables below where the backend does not set them (each part's *_of lookup). */
    int device;
    const struct nb_layer_ops *layers;  /* the layers on this memory (layers/ops.h); NULL: the device's */
    const struct nb_rule_ops *rules;    /* the optimizer's element-wise rules on this memory (optim/rules.h) */
    const struct nb_delay_ops *delay;   /* the delay rules' update on this memory (delay/ops.h) */
    void *impl;             /* the implementation's state */
};

/* ---- The products (the contracts every backend keeps) ----
 * nb_gemm: the result does not depend on the thread count; inside a parallel region it runs on the
 * calling thread (one product per thread: Muon's and SOAP's matrices). */
static inline void nb_gemm(const nb_backend *b, int trans_a, int trans_b, int M, int N, int K, float alpha,
                           const float *A, int lda, const float *B, int ldb, float beta, float *C, int ldc) {
    b->ops->gemm(b, trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}
/* bf16 operands, float32 accumulation and output; the same conventions. */
static inline void nb_gemm_bf16(const nb_backend *b, int trans_a, int trans_b, int M, int N, int K, float alpha,
                                const nb_bf16 *A, int lda, const nb_bf16 *B, int ldb, float beta, float *C, int ldc) {
    b->ops->gemm_bf16(b, trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}
/* C[N,N] = alpha * op(A) op(A)^T + beta * C with op(A) = A (N x K, trans = 0: A A^T) or A^T (A stored
 * K x N, trans = 1: A^T A): a symmetric product. Both triangles are written (the upper one computed, the
 * lower one copied from it, so C is exactly symmetric); only the upper triangle of C on entry affects the
 * result (for beta). nb_gemm's properties otherwise. */
static inline void nb_syrk(const nb_backend *b, int trans, int N, int K, float alpha, const float *A, int lda,
                           float beta, float *C, int ldc) {
    b->ops->syrk(b, trans, N, K, alpha, A, lda, beta, C, ldc);
}
static inline void nb_syrk_bf16(const nb_backend *b, int trans, int N, int K, float alpha, const nb_bf16 *A, int lda,
                                float beta, float *C, int ldc) {
    b->ops->syrk_bf16(b, trans, N, K, alpha, A, lda, beta, C, ldc);
}
/* Small products inside one task (attention's blocks):
 * C[M][N] = alpha * (init + sum over k = 0..K-1 of A(i,k) B[k][j]), init = C's old value when accumulate,
 * else 0; A(i,k) = A[i * ars + k * aks] (any strides: A or A^T in place), B and C rows of ldb and ldc
 * floats. Padding: N is rounded up to b->tile_width, and B's rows are read and C's rows written that
 * far, so both must have room (pad B with zeros; the extra columns of C are scratch). Serial, on the
 * calling thread; each element is one chain of fused multiply-adds over k in order (multiply and add
 * where the CPU has no FMA), so the result does not depend on M, N, the blocking or the thread count.
 * NB_TILE_ROWS: the rows of C that one register tile holds (callers that skip work by rows, such as
 * causal attention, cut at multiples of it). */
enum { NB_TILE_ROWS = 4 };
static inline void nb_tile_gemm(const nb_backend *b, int M, int N, int K, float alpha, const float *A, ptrdiff_t ars,
                                ptrdiff_t aks, const float *B, ptrdiff_t ldb, int accumulate, float *C, ptrdiff_t ldc) {
    b->ops->tile_gemm(b, M, N, K, alpha, A, ars, aks, B, ldb, accumulate, C, ldc);
}
/* The same with bf16 operands: C[M][N] = alpha * (init + sum over k-pairs p = 0..K/2-1 of
 * [A(i,2p+1) B(2p+1,j) then A(i,2p) B(2p,j)]) on the CPU's bf16 dot-product instruction (AVX512-BF16's
 * VDPBF16PS: each product exact, each of the two additions rounded to nearest even, subnormal inputs and
 * sums taken as zero). K even (pad with a zero k; an odd K is recorded as a failure). A: bf16 rows,
 * A(i,k) = A[i * lda + k]. B packed in pairs along k: B(k,j) = B[(k / 2) * 2 * ldb + 2 * j + k % 2],
 * ldb >= N rounded up to 16 (pad with zeros); C's rows are written that far, as nb_tile_gemm's. Serial;
 * the same chain for every element whatever M, N or the thread. Fast only where b->tile_bf16_native (a
 * scalar version of the same sums and the same subnormal rule elsewhere, for tests). */
static inline void nb_tile_gemm_bf16(const nb_backend *b, int M, int N, int K, float alpha, const nb_bf16 *A,
                                     ptrdiff_t lda, const nb_bf16 *B, ptrdiff_t ldb, int accumulate, float *C,
                                     ptrdiff_t ldc) {
    b->ops->tile_gemm_bf16(b, M, N, K, alpha, A, lda, B, ldb, accumulate, C, ldc);
}

/* ---- Memory ---- */
static inline void *nb_backend_alloc(const nb_backend *b, size_t bytes, const char *what) {
    return b->ops->alloc(b, bytes, what);
}
static inline void nb_backend_free(const nb_backend *b, void *p) {
    if (p) b->ops->free(b, p);
}
static inline void nb_backend_copy(const nb_backend *b, void *dst, const void *src, size_t bytes) {
    b->ops->copy(b, dst, src, bytes);
}
static inline void nb_backend_zero(const nb_backend *b, void *mem, size_t bytes) { b->ops->zero(b, mem, bytes); }
static inline void nb_backend_add(const nb_backend *b, float *dst, const float *src, size_t n) {
    b->ops->add(b, dst, src, n);
}
static inline void nb_backend_scale(const nb_backend *b, float *x, size_t n, float scale) {
    b->ops->scale(b, x, n, scale);
}
static inline double nb_backend_sum_squares(const nb_backend *b, const float *x, const float *y, size_t n) {
    return b->ops->sum_squares(b, x, y, n);
}
static inline void nb_backend_to_host(const nb_backend *b, void *host, const void *mem, size_t bytes) {
    b->ops->to_host(b, host, mem, bytes);
}
static inline void nb_backend_from_host(const nb_backend *b, void *mem, const void *host, size_t bytes) {
    b->ops->from_host(b, mem, host, bytes);
}

/* ---- Time spent in products, for `nobubble bench`'s share of the step outside them ----
 * Off unless a benchmark turns it on (then each call costs two clock reads). While on, every
 * nb_gemm, nb_gemm_bf16, nb_syrk and nb_syrk_bf16 call adds its wall time divided by the size of the
 * OpenMP team it runs in: a call made outside a parallel region (the linear layers, the head, the weight
 * gradients) adds its wall time; a call made by one thread of a parallel region (Muon's and SOAP's
 * per-matrix products) adds wall / threads, so a region whose threads all multiply adds about its wall
 * time. A product run by another (a bf16 one widened to fp32) counts once. Not counted: the tile
 * products. Not for use while products run on other threads. */
void nb_gemm_timing(int on);    /* turns the count on (1) or off (0) and zeroes it (and the routing's) */
double nb_gemm_seconds(void);   /* seconds counted since the last nb_gemm_timing */
/* The mixture-of-experts layer's time outside its products (softmax, top-k, grouping, the gather, the
 * weighted sum and scatter, the router's and the aux loss's gradients), counted while the products'
 * count is on: nb_routing_end(nb_routing_begin()) around each such part, called outside parallel
 * regions (its wall time). */
double nb_routing_begin(void);  /* -1 while the count is off */
void nb_routing_end(double start);
double nb_routing_seconds(void);  /* seconds counted since the last nb_gemm_timing */

/* 1 where oneDNN reports bf16 instructions (AVX512-BF16 or AMX): what precision "auto" reads. */
int nb_bf16_native(void);
/* The ISA oneDNN reports, for run headers and benchmarks ("avx512_core_amx", "avx2", ...). */
const char *nb_cpu_isa_name(void);
/* Whether NB_CUDA_KERNELS=next asks for the GPU code written since the last run on a GPU and not yet run on one
 * (docs/gpu.md): the CUDA backend's next kernels, and the device paths the executor refuses without it. */
int nb_backend_cuda_next_asked(void);
/* 1 where `device` names a device some build knows (cpu, guarded, cuda), before any is opened ("" names none). */
int nb_backend_device_named(const char *device);
#endif
