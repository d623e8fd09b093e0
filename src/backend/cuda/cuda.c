/* The CUDA backend, "cuda" (-DNB_CUDA=ON): the matrix products on an NVIDIA GPU through cuBLAS.
 *
 * What runs where, in this first step of the GPU backend:
 * - nb_gemm and nb_gemm_bf16 run as one cuBLAS product each: cublasSgemm in fp32 (no TF32: cuBLAS's
 *   default math mode keeps fp32 products in fp32), cublasGemmEx with bf16 operands and fp32 accumulation
 *   and output for bf16, the same contract as the CPU's bf16 products (backend.h).
 * - nb_syrk and nb_syrk_bf16 run as a full product on the GPU, then the lower triangle is copied from the
 *   upper one on the host, so that C is exactly symmetric as the contract asks.
 * - attention's small per-task products (nb_tile_gemm*) stay on the CPU's register tiles: they are made
 *   from inside a parallel region, a few thousand floats each.
 * - memory is the host's (the CPU backend's): each product copies its operands to the device and its
 *   result back. A stage's weights, gradients and activations on the device are the next step (issue 42).
 * cuBLAS runs on this backend's one stream, so every product gives the same bits on every run on the
 * same GPU and toolkit (cuBLAS's reproducibility rule), whatever the host's thread count. Products made
 * from several threads at once (Muon's, SOAP's per-matrix products) take turns: the handle, the stream
 * and the device buffers are the backend's, one product at a time.
 *
 * The row-major products map onto cuBLAS's column-major ones by transposition: a row-major X with row
 * stride ld is the column-major X^T with leading dimension ld, so C = op(A) op(B) is computed as
 * C^T = op(B)^T op(A)^T, with the operands swapped and the same transposition flags. */
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "backend/cpu.h"
#include "backend/cuda.h"
#include "backend/cuda/kernels.h"
#include "backend/failure.h"
#include "util/alloc.h"
#include "util/error.h"

enum { OPERAND_A, OPERAND_B, OPERAND_C, N_OPERANDS };

typedef struct {
    int device;
    cudaStream_t stream;
    cublasHandle_t handle;
    pthread_mutex_t lock;              /* one product at a time (the stream, the handle, the buffers) */
    void *buffer[N_OPERANDS];          /* device memory for A, B and C, grown as products need */
    size_t capacity[N_OPERANDS];
    void *scratch;                     /* device memory mode: the layers' scratch (nb_cuda_scratch_hold) */
    pthread_mutex_t scratch_lock;      /* one user of the scratch at a time (a threads pipeline's stages share it) */
    size_t scratch_bytes;
    double *sums;                      /* device memory mode: sum_squares's partial sums and its result */
    pthread_mutex_t sums_lock;         /* one sum_squares at a time: a threads pipeline's stages share sums */
    nb_failure failure;
    char label[400];
    int device_memory;                 /* 1: the device memory mode (nb_cuda_open_device_memory) */
    int next_kernels;                  /* 1: the kernels not yet run on a GPU (NB_CUDA_KERNELS=next) */
} cuda_state;

static cuda_state *state_of(const nb_backend *b) { return b->impl; }

static int cuda_failed(cudaError_t e, const char *what) {
    return nb_fail("cuda: %s: %s (%s)", what, cudaGetErrorString(e), cudaGetErrorName(e));
}

static int cublas_failed(cublasStatus_t st, const char *what) {
    return nb_fail("cuda: %s: cuBLAS status %d (%s)", what, (int)st, cublasGetStatusString(st));
}

/* Buffer i holds at least `bytes`. */
static int reserve(cuda_state *s, int i, size_t bytes) {
    if (bytes <= s->capacity[i]) return 0;
    if (s->buffer[i]) cudaFree(s->buffer[i]);
    s->buffer[i] = NULL;
    s->capacity[i] = 0;
    cudaError_t e = cudaMalloc(&s->buffer[i], bytes);
    if (e != cudaSuccess) {
        s->buffer[i] = NULL;
        nb_fail("cuda: out of device memory for a product's operand (%zu bytes): %s", bytes, cudaGetErrorString(e));
        return -1;
    }
    s->capacity[i] = bytes;
    return 0;
}

/* A row-major matrix of rows x cols elements of `size` bytes, row stride ld, between the host and buffer
 * i (the same row stride there). Only the rows' cols elements move: the host's bytes between rows (a
 * strided view into a larger matrix) are neither read nor written. */
static int upload(cuda_state *s, int i, const void *host, int rows, int cols, int ld, size_t size) {
    if (reserve(s, i, ((size_t)(rows - 1) * (size_t)ld + (size_t)cols) * size)) return -1;
    cudaError_t e = cudaMemcpy2DAsync(s->buffer[i], (size_t)ld * size, host, (size_t)ld * size, (size_t)cols * size,
                                      (size_t)rows, cudaMemcpyHostToDevice, s->stream);
    return e == cudaSuccess ? 0 : cuda_failed(e, "copying an operand to the GPU");
}

static int download(cuda_state *s, void *host, int rows, int cols, int ld) {
    cudaError_t e = cudaMemcpy2DAsync(host, (size_t)ld * sizeof(float), s->buffer[OPERAND_C], (size_t)ld * sizeof(float),
                                      (size_t)cols * sizeof(float), (size_t)rows, cudaMemcpyDeviceToHost, s->stream);
    if (e == cudaSuccess) e = cudaStreamSynchronize(s->stream);
    return e == cudaSuccess ? 0 : cuda_failed(e, "copying a product back from the GPU");
}

/* C[M,N] = beta C when K = 0 (nothing to multiply; beta = 0 writes zeros whatever C held). */
static void scale_rows(float *C, int M, int N, int ldc, float beta) {
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) C[(size_t)i * ldc + j] = beta == 0.0f ? 0.0f : beta * C[(size_t)i * ldc + j];
}

/* One product, fp32 (size 4) or bf16 (size 2) operands: nb_gemm's contract. B == A with the same layout
 * (a symmetric product) is copied once. Returns -1 after nb_fail. */
static int product(cuda_state *s, size_t size, int trans_a, int trans_b, int M, int N, int K, float alpha,
                   const void *A, int lda, const void *B, int ldb, float beta, float *C, int ldc) {
    if (M <= 0 || N <= 0) return 0;
    if (K <= 0) {
        scale_rows(C, M, N, ldc, beta);
        return 0;
    }
    const int a_rows = trans_a ? K : M, a_cols = trans_a ? M : K, b_rows = trans_b ? N : K, b_cols = trans_b ? K : N;
    if (lda < a_cols || ldb < b_cols || ldc < N)
        return nb_fail("cuda: product %dx%dx%d: a row stride is shorter than its row (lda %d, ldb %d, ldc %d)", M, N, K,
                       lda, ldb, ldc);
    cudaError_t e = cudaSetDevice(s->device);
    if (e != cudaSuccess) return cuda_failed(e, "selecting the GPU");
    const int same = A == B && lda == ldb && a_rows == b_rows && a_cols == b_cols;
    if (upload(s, OPERAND_A, A, a_rows, a_cols, lda, size)) return -1;
    if (!same && upload(s, OPERAND_B, B, b_rows, b_cols, ldb, size)) return -1;
    if (reserve(s, OPERAND_C, ((size_t)(M - 1) * (size_t)ldc + (size_t)N) * sizeof(float))) return -1;
    if (beta != 0.0f && upload(s, OPERAND_C, C, M, N, ldc, sizeof(float))) return -1;
    const void *dA = s->buffer[OPERAND_A], *dB = same ? dA : s->buffer[OPERAND_B];
    const cublasOperation_t op_a = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, op_b = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasStatus_t st;
    if (size == sizeof(float))
        st = cublasSgemm(s->handle, op_b, op_a, N, M, K, &alpha, dB, ldb, dA, lda, &beta, s->buffer[OPERAND_C], ldc);
    else
        st = cublasGemmEx(s->handle, op_b, op_a, N, M, K, &alpha, dB, CUDA_R_16BF, ldb, dA, CUDA_R_16BF, lda, &beta,
                          s->buffer[OPERAND_C], CUDA_R_32F, ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    if (st != CUBLAS_STATUS_SUCCESS) return cublas_failed(st, size == sizeof(float) ? "sgemm" : "bf16 gemm");
    return download(s, C, M, N, ldc);
}

/* The product under the backend's lock, timed for nb_gemm_timing, its failure recorded. */
static void run_product(const nb_backend *b, size_t size, int trans_a, int trans_b, int M, int N, int K, float alpha,
                        const void *A, int lda, const void *B, int ldb, float beta, float *C, int ldc, int symmetric) {
    cuda_state *s = state_of(b);
    const double t0 = nb_cpu_time_begin();
    pthread_mutex_lock(&s->lock);
    int rc = product(s, size, trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    pthread_mutex_unlock(&s->lock);
    if (!rc && symmetric) nb_cpu_mirror_upper(C, N, ldc);
    nb_cpu_time_end(t0);
    if (rc) nb_failure_keep(&s->failure);
}

static void cuda_gemm(const nb_backend *b, int trans_a, int trans_b, int M, int N, int K, float alpha, const float *A,
                      int lda, const float *B, int ldb, float beta, float *C, int ldc) {
    run_product(b, sizeof(float), trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, 0);
}

static void cuda_gemm_bf16(const nb_backend *b, int trans_a, int trans_b, int M, int N, int K, float alpha,
                           const nb_bf16 *A, int lda, const nb_bf16 *B, int ldb, float beta, float *C, int ldc) {
    run_product(b, sizeof(nb_bf16), trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, 0);
}

/* op(A) op(A)^T as the product of A with itself: trans = 0 is A B^T with B = A, trans = 1 is A^T B. */
static void cuda_syrk(const nb_backend *b, int trans, int N, int K, float alpha, const float *A, int lda, float beta,
                      float *C, int ldc) {
    run_product(b, sizeof(float), trans, !trans, N, N, K, alpha, A, lda, A, lda, beta, C, ldc, 1);
}

static void cuda_syrk_bf16(const nb_backend *b, int trans, int N, int K, float alpha, const nb_bf16 *A, int lda,
                           float beta, float *C, int ldc) {
    run_product(b, sizeof(nb_bf16), trans, !trans, N, N, K, alpha, A, lda, A, lda, beta, C, ldc, 1);
}

static void cuda_tile_gemm(const nb_backend *b, int M, int N, int K, float alpha, const float *A, ptrdiff_t ars,
                           ptrdiff_t aks, const float *B, ptrdiff_t ldb, int accumulate, float *C, ptrdiff_t ldc) {
    (void)b;
    nb_cpu_tile_gemm(M, N, K, alpha, A, ars, aks, B, ldb, accumulate, C, ldc);
}

static void cuda_tile_gemm_bf16(const nb_backend *b, int M, int N, int K, float alpha, const nb_bf16 *A,
                                ptrdiff_t lda, const nb_bf16 *B, ptrdiff_t ldb, int accumulate, float *C,
                                ptrdiff_t ldc) {
    if (nb_cpu_tile_gemm_bf16(M, N, K, alpha, A, lda, B, ldb, accumulate, C, ldc))
        nb_failure_keep(&state_of(b)->failure);
}

/* Every product has synchronized before it returned; an error of the device's since then (a fault, a
 * lost device) is read here. */
static int cuda_check(const nb_backend *b) {
    cuda_state *s = state_of(b);
    pthread_mutex_lock(&s->lock);
    cudaError_t e = cudaStreamSynchronize(s->stream);
    pthread_mutex_unlock(&s->lock);
    if (e != cudaSuccess) {
        cuda_failed(e, "the GPU's queued work");
        nb_failure_keep(&s->failure);
    }
    return nb_failure_take(&s->failure);
}

static void release(cuda_state *s) {
    for (int i = 0; i < N_OPERANDS; i++)
        if (s->buffer[i]) cudaFree(s->buffer[i]);
    if (s->scratch) cudaFree(s->scratch);
    if (s->sums) cudaFree(s->sums);
    if (s->handle) cublasDestroy(s->handle);
    if (s->stream) cudaStreamDestroy(s->stream);
    pthread_mutex_destroy(&s->lock);
    pthread_mutex_destroy(&s->scratch_lock);
    pthread_mutex_destroy(&s->sums_lock);
    nb_failure_destroy(&s->failure);
    free(s);
}

static void cuda_close(nb_backend *b) {
    release(state_of(b));
    free(b);
}

static const nb_backend_ops cuda_ops = {
    .gemm = cuda_gemm,
    .gemm_bf16 = cuda_gemm_bf16,
    .syrk = cuda_syrk,
    .syrk_bf16 = cuda_syrk_bf16,
    .tile_gemm = cuda_tile_gemm,
    .tile_gemm_bf16 = cuda_tile_gemm_bf16,
    .alloc = nb_cpu_alloc,  /* the host's memory (the top of the file) */
    .free = nb_cpu_free,
    .to_host = nb_cpu_copy,
    .from_host = nb_cpu_copy,
    .check = cuda_check,
    .close = cuda_close,
    .copy = nb_cpu_copy,
    .zero = nb_cpu_zero,
    .add = nb_cpu_add,
    .scale = nb_cpu_scale,
    .sum_squares = nb_cpu_sum_squares,
};

/* ---- Device memory mode (nb_cuda_open_device_memory) ----
 * The memory is the GPU's: alloc is cudaMalloc (zeroed on the stream), the copies are CUDA copies on the
 * backend's stream (to_host and from_host wait for theirs, so the host's buffer is free on return), and the
 * products read and write device memory in place: no operand crosses. Everything queues on the one stream
 * in call order, so no call waits for another but to_host, from_host and check. A failure is recorded and
 * reported by check, as with the products above. */

static void keep(cuda_state *s, cudaError_t e, const char *what) {
    if (e == cudaSuccess) return;
    cuda_failed(e, what);
    nb_failure_keep(&s->failure);
}

static void *dev_alloc(const nb_backend *b, size_t bytes, const char *what) {
    cuda_state *s = state_of(b);
    void *p = NULL;
    cudaError_t e = cudaSetDevice(s->device);
    if (e == cudaSuccess) e = cudaMalloc(&p, bytes ? bytes : 1);
    if (e == cudaSuccess) e = cudaMemsetAsync(p, 0, bytes ? bytes : 1, s->stream);
    if (e != cudaSuccess) {
        if (p) cudaFree(p);
        nb_fail("cuda: out of device memory for %s (%zu bytes): %s", what, bytes, cudaGetErrorString(e));
        return NULL;
    }
    return p;
}

static void dev_free(const nb_backend *b, void *p) {
    keep(state_of(b), cudaStreamSynchronize(state_of(b)->stream), "waiting before freeing device memory");
    keep(state_of(b), cudaFree(p), "freeing device memory");
}

static void dev_to_host(const nb_backend *b, void *host, const void *mem, size_t bytes) {
    cuda_state *s = state_of(b);
    if (!bytes) return;
    cudaError_t e = cudaMemcpyAsync(host, mem, bytes, cudaMemcpyDeviceToHost, s->stream);
    if (e == cudaSuccess) e = cudaStreamSynchronize(s->stream);
    keep(s, e, "copying device memory to the host");
}

static void dev_from_host(const nb_backend *b, void *mem, const void *host, size_t bytes) {
    cuda_state *s = state_of(b);
    if (!bytes) return;
    cudaError_t e = cudaMemcpyAsync(mem, host, bytes, cudaMemcpyHostToDevice, s->stream);
    if (e == cudaSuccess) e = cudaStreamSynchronize(s->stream);
    keep(s, e, "copying host memory to the device");
}

static void dev_copy(const nb_backend *b, void *dst, const void *src, size_t bytes) {
    if (bytes) keep(state_of(b), cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, state_of(b)->stream),
                    "copying within device memory");
}

static void dev_zero(const nb_backend *b, void *mem, size_t bytes) {
    if (bytes) keep(state_of(b), cudaMemsetAsync(mem, 0, bytes, state_of(b)->stream), "zeroing device memory");
}

static void dev_add(const nb_backend *b, float *dst, const float *src, size_t n) {
    if (nbk_add(dst, src, n, state_of(b)->stream)) nb_failure_keep(&state_of(b)->failure);
}

static void dev_scale(const nb_backend *b, float *x, size_t n, float scale) {
    if (nbk_scale(x, n, scale, state_of(b)->stream)) nb_failure_keep(&state_of(b)->failure);
}

/* Queued behind the work that wrote x, then waited for: the host needs the number. A failure is recorded
 * (nb_backend_check reports it) and the sum is NAN, which the executor's checks stop on. */
static double dev_sum_squares(const nb_backend *b, const float *x, const float *y, size_t n) {
    cuda_state *s = state_of(b);
    double sum = NAN;
    /* held from the buffer's allocation to the sum's read-back: another stage's kernel queued in between would
     * overwrite the partial sums before this one's copy reads them */
    pthread_mutex_lock(&s->sums_lock);
    if (!s->sums) keep(s, cudaMalloc((void **)&s->sums, sizeof(double) * (NBK_SQ_PARTS + 1)), "sum_squares's buffer");
    cudaError_t e = cudaErrorInvalidValue;
    if (s->sums && nbk_sum_squares(x, y, n, s->sums, s->sums + NBK_SQ_PARTS, s->stream)) {
        nb_failure_keep(&s->failure);
    } else if (s->sums) {
        e = cudaMemcpyAsync(&sum, s->sums + NBK_SQ_PARTS, sizeof sum, cudaMemcpyDeviceToHost, s->stream);
        if (e == cudaSuccess) e = cudaStreamSynchronize(s->stream);
        keep(s, e, "copying a sum of squares to the host");
    }
    pthread_mutex_unlock(&s->sums_lock);
    return e == cudaSuccess ? sum : NAN;
}

/* One product on device memory, queued: nb_gemm's contract (K = 0 scales C by beta, as BLAS does). */
static void dev_product(const nb_backend *b, size_t size, int trans_a, int trans_b, int M, int N, int K, float alpha,
                        const void *A, int lda, const void *B, int ldb, float beta, float *C, int ldc) {
    cuda_state *s = state_of(b);
    if (M <= 0 || N <= 0) return;
    const double t0 = nb_cpu_time_begin();
    const cublasOperation_t op_a = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, op_b = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    pthread_mutex_lock(&s->lock);
    cublasStatus_t st;
    if (size == sizeof(float))
        st = cublasSgemm(s->handle, op_b, op_a, N, M, K, &alpha, B, ldb, A, lda, &beta, C, ldc);
    else
        st = cublasGemmEx(s->handle, op_b, op_a, N, M, K, &alpha, B, CUDA_R_16BF, ldb, A, CUDA_R_16BF, lda, &beta, C,
                          CUDA_R_32F, ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    pthread_mutex_unlock(&s->lock);
    nb_cpu_time_end(t0);
    if (st != CUBLAS_STATUS_SUCCESS) {
        cublas_failed(st, size == sizeof(float) ? "sgemm on device memory" : "bf16 gemm on device memory");
        nb_failure_keep(&s->failure);
    }
}

static void dev_gemm(const nb_backend *b, int trans_a, int trans_b, int M, int N, int K, float alpha, const float *A,
                     int lda, const float *B, int ldb, float beta, float *C, int ldc) {
    dev_product(b, sizeof(float), trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

static void dev_gemm_bf16(const nb_backend *b, int trans_a, int trans_b, int M, int N, int K, float alpha,
                          const nb_bf16 *A, int lda, const nb_bf16 *B, int ldb, float beta, float *C, int ldc) {
    dev_product(b, sizeof(nb_bf16), trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

/* The full product, then the lower triangle from the upper one on the GPU. */
static void dev_syrk_any(const nb_backend *b, size_t size, int trans, int N, int K, float alpha, const void *A, int lda,
                         float beta, float *C, int ldc) {
    dev_product(b, size, trans, !trans, N, N, K, alpha, A, lda, A, lda, beta, C, ldc);
    if (nbk_mirror_upper(C, N, ldc, state_of(b)->stream)) nb_failure_keep(&state_of(b)->failure);
}

static void dev_syrk(const nb_backend *b, int trans, int N, int K, float alpha, const float *A, int lda, float beta,
                     float *C, int ldc) {
    dev_syrk_any(b, sizeof(float), trans, N, K, alpha, A, lda, beta, C, ldc);
}

static void dev_syrk_bf16(const nb_backend *b, int trans, int N, int K, float alpha, const nb_bf16 *A, int lda,
                          float beta, float *C, int ldc) {
    dev_syrk_any(b, sizeof(nb_bf16), trans, N, K, alpha, A, lda, beta, C, ldc);
}

/* Attention runs as its own kernel on device memory (the layer table), never as the CPU's tile products. */
static void no_tiles(const nb_backend *b) {
    nb_fail("cuda: the CPU's tile products cannot run on the GPU's memory (attention has its own kernel there)");
    nb_failure_keep(&state_of(b)->failure);
}

static void dev_tile_gemm(const nb_backend *b, int M, int N, int K, float alpha, const float *A, ptrdiff_t ars,
                          ptrdiff_t aks, const float *B, ptrdiff_t ldb, int accumulate, float *C, ptrdiff_t ldc) {
    (void)M, (void)N, (void)K, (void)alpha, (void)A, (void)ars, (void)aks, (void)B, (void)ldb, (void)accumulate;
    (void)C, (void)ldc;
    no_tiles(b);
}

static void dev_tile_gemm_bf16(const nb_backend *b, int M, int N, int K, float alpha, const nb_bf16 *A, ptrdiff_t lda,
                               const nb_bf16 *B, ptrdiff_t ldb, int accumulate, float *C, ptrdiff_t ldc) {
    (void)M, (void)N, (void)K, (void)alpha, (void)A, (void)lda, (void)B, (void)ldb, (void)accumulate, (void)C;
    (void)ldc;
    no_tiles(b);
}

static const nb_backend_ops cuda_device_ops = {
    .gemm = dev_gemm,
    .gemm_bf16 = dev_gemm_bf16,
    .syrk = dev_syrk,
    .syrk_bf16 = dev_syrk_bf16,
    .tile_gemm = dev_tile_gemm,
    .tile_gemm_bf16 = dev_tile_gemm_bf16,
    .alloc = dev_alloc,
    .free = dev_free,
    .to_host = dev_to_host,
    .from_host = dev_from_host,
    .check = cuda_check,
    .close = cuda_close,
    .copy = dev_copy,
    .zero = dev_zero,
    .add = dev_add,
    .scale = dev_scale,
    .sum_squares = dev_sum_squares,
};

void *nb_cuda_stream(const nb_backend *b) { return state_of(b)->stream; }

void nb_cuda_keep_failure(const nb_backend *b) { nb_failure_keep(&state_of(b)->failure); }

/* The scratch, grown to bytes; called under scratch_lock. */
static void *scratch_of(const nb_backend *b, size_t bytes) {
    cuda_state *s = state_of(b);
    if (bytes <= s->scratch_bytes) return s->scratch;
    /* the work queued on the old buffer (other stages' too) finishes before it goes: waited for here rather
     * than left to cudaFree's own wait */
    if (s->scratch) keep(s, cudaStreamSynchronize(s->stream), "waiting before the layers' scratch grows");
    if (s->scratch) keep(s, cudaFree(s->scratch), "freeing the layers' scratch");
    s->scratch = NULL, s->scratch_bytes = 0;
    if (cudaMalloc(&s->scratch, bytes) != cudaSuccess) {
        s->scratch = NULL;
        nb_fail("cuda: out of device memory for the layers' scratch (%zu bytes)", bytes);
        nb_failure_keep(&s->failure);
        return NULL;
    }
    s->scratch_bytes = bytes;
    return s->scratch;
}

/* The scratch is one buffer for every caller, and a threads pipeline's stages call from their own threads: held
 * from taking it until the work that uses it is queued (the one stream then runs that work before any later
 * user's), or until its result is read back. A growth frees the old buffer only after the stream has finished
 * with it (scratch_of waits for it). */
void *nb_cuda_scratch_hold(const nb_backend *b, size_t bytes) {
    cuda_state *s = state_of(b);
    pthread_mutex_lock(&s->scratch_lock);
    void *p = scratch_of(b, bytes);
    if (!p) pthread_mutex_unlock(&s->scratch_lock);
    return p;
}

void nb_cuda_scratch_release(const nb_backend *b) { pthread_mutex_unlock(&state_of(b)->scratch_lock); }

/* The device, its stream and its cuBLAS handle on that stream. */
static int start_device(cuda_state *s) {
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess) return nb_fail("backend 'cuda': no usable GPU: %s (%s)", cudaGetErrorString(e), cudaGetErrorName(e));
    if (count < 1) return nb_fail("backend 'cuda': no GPU found");
    s->device = 0;
    struct cudaDeviceProp prop;
    if ((e = cudaSetDevice(s->device)) != cudaSuccess || (e = cudaGetDeviceProperties(&prop, s->device)) != cudaSuccess)
        return cuda_failed(e, "opening GPU 0");
    if ((e = cudaStreamCreateWithFlags(&s->stream, cudaStreamNonBlocking)) != cudaSuccess)
        return cuda_failed(e, "creating a stream");
    cublasStatus_t st = cublasCreate(&s->handle);
    if (st != CUBLAS_STATUS_SUCCESS) return cublas_failed(st, "creating a handle");
    if ((st = cublasSetStream(s->handle, s->stream)) != CUBLAS_STATUS_SUCCESS) return cublas_failed(st, "setting the stream");
    if ((st = cublasSetMathMode(s->handle, CUBLAS_DEFAULT_MATH)) != CUBLAS_STATUS_SUCCESS)
        return cublas_failed(st, "setting the math mode");
    snprintf(s->label, sizeof s->label, "cuBLAS on %s (sm_%d%d), %s", prop.name, prop.major, prop.minor,
             s->device_memory ? "memory on the GPU (nobubble's kernels for the layers)"
                              : "operands copied from the host per product");
    return 0;
}

/* NB_CUDA_KERNELS: "next" runs the kernels written since the last run on a GPU and not yet run on one (docs/gpu.md,
 * "Kernels not yet run on a GPU": bf16 attention on the tensor cores, RMSNorm's dgain on every SM), "proven" or
 * unset only those that have passed there. An environment variable rather than a setting: a way to check them on
 * a GPU, not a choice a run records; once they pass they become the default. */
static int kernels_choice(int *next) {
    const char *v = getenv("NB_CUDA_KERNELS");
    *next = v && !strcmp(v, "next");
    if (v && *v && !*next && strcmp(v, "proven"))
        return nb_fail("NB_CUDA_KERNELS='%s': expected 'next' (also the kernels not yet run on a GPU) or 'proven'", v);
    return 0;
}

int nb_cuda_next_kernels(const nb_backend *b) { return state_of(b)->next_kernels; }

static int open_cuda(const char *spec, int device_memory, nb_backend **out) {
    *out = NULL;
    nb_backend *b = nb_calloc(1, sizeof *b, "a backend");
    cuda_state *s = b ? nb_calloc(1, sizeof *s, "the CUDA backend's state") : NULL;
    if (!s) {
        free(b);
        return -1;
    }
    pthread_mutex_init(&s->lock, NULL);
    pthread_mutex_init(&s->scratch_lock, NULL);
    pthread_mutex_init(&s->sums_lock, NULL);
    nb_failure_init(&s->failure);
    s->device_memory = device_memory;
    if (kernels_choice(&s->next_kernels) || start_device(s)) {
        release(s);
        free(b);
        return -1;
    }
    b->ops = device_memory ? &cuda_device_ops : &cuda_ops;
    b->device_memory = device_memory;
    b->device = device_memory ? NB_DEVICE_CUDA : NB_DEVICE_HOST;
    snprintf(b->name, sizeof b->name, "%s", spec);
    b->label = s->label;
    b->tile_width = nb_cpu_tile_width();
    b->tile_bf16_native = nb_cpu_tile_bf16_available();
    b->bf16_native = 1;
    b->impl = s;
    *out = b;
    return 0;
}

int nb_cuda_open(const char *spec, nb_backend **out) { return open_cuda(spec, 0, out); }

int nb_cuda_open_device_memory(nb_backend **out) { return open_cuda("cuda", 1, out); }
