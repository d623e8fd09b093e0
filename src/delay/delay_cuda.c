/* The delay rules on the GPU's memory (ops.h's table for the CUDA backend's device memory mode): the update
 * (nbk_delay_apply), Taylor compensation and its metric (nbk_taylor, nbk_taylor_sq), kernels on the backend's
 * stream, their failures recorded in the backend. Built only with -DNB_CUDA=ON; checked on an H100 (docs/gpu.md). */
#ifdef NB_HAVE_CUDA
#include <cuda_runtime.h>
#include <math.h>
#include "backend/cuda.h"
#include "backend/cuda/kernels.h"
#include "delay/ops.h"
#include "util/error.h"

_Static_assert(NB_APPLY_ONLY == 0 && NB_APPLY_KEEP == 1 && NB_APPLY_EF == 2, "nbk_delay_apply's kinds");

static void cuda_apply(const nb_backend *be, nb_apply_kind kind, float *keep, float *current, float *d, float *prev,
                       float alpha, int first, size_t n) {
    if (nbk_delay_apply((int)kind, keep, current, d, prev, alpha, first, n, (cudaStream_t)nb_cuda_stream(be)))
        nb_cuda_keep_failure(be);
}

static void cuda_taylor(const nb_backend *be, float *grads, const float *current, const float *old, float lambda,
                        size_t n) {
    if (nbk_taylor(grads, current, old, lambda, n, (cudaStream_t)nb_cuda_stream(be))) nb_cuda_keep_failure(be);
}

/* The metric waits for its number; NAN after a failure (recorded in the backend). */
static double cuda_taylor_sq(const nb_backend *be, const float *grads, const float *current, const float *old,
                             float lambda, size_t n) {
    const cudaStream_t stream = (cudaStream_t)nb_cuda_stream(be);
    double *parts = nb_cuda_scratch_hold(be, sizeof(double) * (NBK_SQ_PARTS + 1)), sum = NAN;
    if (!parts) return NAN;
    if (nbk_taylor_sq(grads, current, old, lambda, n, parts, parts + NBK_SQ_PARTS, stream)) {
        nb_cuda_scratch_release(be);
        nb_cuda_keep_failure(be);
        return NAN;
    }
    cudaError_t e = cudaMemcpyAsync(&sum, parts + NBK_SQ_PARTS, sizeof sum, cudaMemcpyDeviceToHost, stream);
    if (e == cudaSuccess) e = cudaStreamSynchronize(stream);
    nb_cuda_scratch_release(be);  /* the sum is read back */
    if (e == cudaSuccess) return sum;
    nb_fail("cuda: reading Taylor's norm back: %s (%s)", cudaGetErrorString(e), cudaGetErrorName(e));
    nb_cuda_keep_failure(be);
    return NAN;
}

static const nb_delay_ops cuda_delay = {.apply = cuda_apply, .taylor = cuda_taylor, .taylor_sq = cuda_taylor_sq};

const nb_delay_ops *nb_delay_ops_cuda(void) { return &cuda_delay; }
#else
typedef int nb_no_cuda_delay; /* ISO C wants a translation unit to declare something */
#endif
