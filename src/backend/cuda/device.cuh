/* Private to src/backend/cuda: what every kernel file shares (kernels.cu, attention.cu).
 *
 * The arithmetic is written with the round-to-nearest intrinsics, which nvcc never contracts into fused
 * multiply-adds, so that an expression rounds where the CPU's C rounds (the CPU build contracts nothing:
 * -std=c11 means -ffp-contract=off); a fused multiply-add is written as one (__fmaf_rn) where the CPU's
 * is one (the tile products' chains). */
#ifndef NB_BACKEND_CUDA_DEVICE_CUH
#define NB_BACKEND_CUDA_DEVICE_CUH
#include <cuda_runtime.h>
extern "C" {
#include "util/error.h"
}

namespace nbk {

__device__ __forceinline__ float mul(float a, float b) { return __fmul_rn(a, b); }
__device__ __forceinline__ float add(float a, float b) { return __fadd_rn(a, b); }
__device__ __forceinline__ float sub(float a, float b) { return __fsub_rn(a, b); }
__device__ __forceinline__ float dvd(float a, float b) { return __fdiv_rn(a, b); }

/* 0 after a launch that was accepted; -1 with nb_fail naming the kernel otherwise. */
inline int launched(const char *what) {
    const cudaError_t e = cudaGetLastError();
    if (e == cudaSuccess) return 0;
    return nb_fail("cuda: kernel %s: %s (%s)", what, cudaGetErrorString(e), cudaGetErrorName(e));
}

}  // namespace nbk
#endif
