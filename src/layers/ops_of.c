/* Which layer table a backend's memory takes (layers/ops.h, nb_layers_of). */
#include "layers/ops.h"

const nb_layer_ops *nb_layers_of(const nb_backend *be) {
    if (be && be->layers) return be->layers;
    switch (be ? be->device : NB_DEVICE_HOST) {
    case NB_DEVICE_HOST: return nb_layer_ops_cpu();
    case NB_DEVICE_GUARDED: return nb_layer_ops_guarded();
#ifdef NB_HAVE_CUDA
    case NB_DEVICE_CUDA: return nb_layer_ops_cuda();
#endif
    default: return NULL;
    }
}
