/* Private to src/backend: the CUDA backend (cuda/cuda.c), built with -DNB_CUDA=ON (NB_HAVE_CUDA). */
#ifndef NB_BACKEND_CUDA_H
#define NB_BACKEND_CUDA_H
#include "backend/backend.h"

/* Opens "cuda": the first GPU that CUDA_VISIBLE_DEVICES leaves. Fails, saying why, where there is no GPU
 * or no driver. */
int nb_cuda_open(const char *spec, nb_backend **out);
/* The same GPU with its memory as the backend's (device_memory = 1): alloc is cudaMalloc, the products run on
 * device pointers in place, the copies are CUDA copies, all queued on the backend's one stream. Its layers are
 * the kernels (layers/ops.h's nb_layer_ops_cuda, which the opener sets as its `layers`). What `--device
 * cuda` opens (nb_backend_open_device; docs/gpu.md). */
int nb_cuda_open_device_memory(nb_backend **out);
/* For the layer table on this backend's memory (cudaStream_t as void *): its stream, the recording of a
 * kernel's failure (nb_fail first), and a scratch buffer of at least bytes on the device, grown on demand: held
 * by the caller (other threads' holds wait) until nb_cuda_scratch_release, which it calls once the work that
 * uses the buffer is queued on the stream or its result read back; NULL after recording a failure (not held). */
void *nb_cuda_stream(const nb_backend *b);
void nb_cuda_keep_failure(const nb_backend *b);
void *nb_cuda_scratch_hold(const nb_backend *b, size_t bytes);
void nb_cuda_scratch_release(const nb_backend *b);
/* Whether the kernels not yet run on a GPU are used (NB_CUDA_KERNELS=next when the backend opened). */
int nb_cuda_next_kernels(const nb_backend *b);
#endif
