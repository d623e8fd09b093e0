/* The one interface between the math and the matrix-multiply hardware: every matrix product
 * in nobubble goes through nb_gemm, so that a new backend (another CPU library, CUDA) is one
 * file. Row-major:  C[M,N] = alpha * op(A)[M,K] * op(B)[K,N] + beta * C,
 * op(X) = X^T when the matching trans flag is set; lda/ldb/ldc are row strides.
 * Two CPU implementations are built in, oneDNN's sgemm and OpenBLAS (OpenMP build), and a
 * third choice that mixes them: "hybrid" (the default) uses oneDNN except for products A^T B,
 * where oneDNN 2.6 is slow and OpenBLAS is not. NB_GEMM=onednn|openblas|hybrid in the
 * environment, or nb_gemm_select, picks one.
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

void nb_gemm(int trans_a, int trans_b, int M, int N, int K, float alpha, const float *A, int lda,
             const float *B, int ldb, float beta, float *C, int ldc);
/* The name of the backend in use, for run headers and benchmarks. */
const char *nb_gemm_backend(void);
/* Chooses the backend by name ("onednn", "openblas" or "hybrid"); -1 with a message otherwise.
 * Call before any GEMM runs (it is not synchronized with running GEMMs). */
int nb_gemm_select(const char *name);

/* The implementations (one file each). */
void nb_gemm_onednn(int trans_a, int trans_b, int M, int N, int K, float alpha, const float *A, int lda,
                    const float *B, int ldb, float beta, float *C, int ldc);
void nb_gemm_openblas(int trans_a, int trans_b, int M, int N, int K, float alpha, const float *A, int lda,
                      const float *B, int ldb, float beta, float *C, int ldc);
#endif
