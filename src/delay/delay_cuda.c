/* The delay rules' update on the GPU's memory (ops.h's table for the CUDA backend's device memory mode): one
 * kernel (src/backend/cuda/kernels.h, nbk_delay_apply) on the backend's stream, its failure recorded in the
 * backend. Built only with -DNB_CUDA=ON; not yet run on a GPU (docs/gpu.md). */
#ifdef NB_HAVE_CUDA
#include <cuda_runtime.h>
#include "backend/cuda.h"
#include "backend/cuda/kernels.h"
#include "delay/ops.h"

_Static_assert(NB_APPLY_ONLY == 0 && NB_APPLY_KEEP == 1 && NB_APPLY_EF == 2, "nbk_delay_apply's kinds");

static void cuda_apply(const nb_backend *be, nb_apply_kind kind, float *keep, float *current, float *d, float *prev,
                       float alpha, int first, size_t n) {
    if (nbk_delay_apply((int)kind, keep, current, d, prev, alpha, first, n, (cudaStream_t)nb_cuda_stream(be)))
        nb_cuda_keep_failure(be);
}

static const nb_delay_ops cuda_delay = {.apply = cuda_apply};

const nb_delay_ops *nb_delay_ops_cuda(void) { return &cuda_delay; }
#else
typedef int nb_no_cuda_delay; /* ISO C wants a translation unit to declare something */
#endif
