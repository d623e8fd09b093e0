/* Private to src/backend: the CUDA backend (cuda/cuda.c), built with -DNB_CUDA=ON (NB_HAVE_CUDA). */
#ifndef NB_BACKEND_CUDA_H
#define NB_BACKEND_CUDA_H
#include "backend/backend.h"

/* Opens "cuda": the first GPU that CUDA_VISIBLE_DEVICES leaves. Fails, saying why, where there is no GPU
 * or no driver. */
int nb_cuda_open(const char *spec, nb_backend **out);
#endif
