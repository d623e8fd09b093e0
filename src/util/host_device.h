/* Internal: NB_HOST_DEVICE marks the small inline functions that the CUDA kernels (src/backend/cuda/kernels.cu)
 * compile for the GPU as well as the host (the bf16 casts, nb_expf); it is empty outside nvcc. */
#ifndef NB_UTIL_HOST_DEVICE_H
#define NB_UTIL_HOST_DEVICE_H
#ifdef __CUDACC__
#define NB_HOST_DEVICE __host__ __device__
#else
#define NB_HOST_DEVICE
#endif
#endif
