/* Which delay table a backend's memory takes (delay/ops.h, nb_delay_of). */
#include "delay/ops.h"

const nb_delay_ops *nb_delay_of(const nb_backend *be) {
    if (be && be->delay) return be->delay;
    switch (be ? be->device : NB_DEVICE_HOST) {
    case NB_DEVICE_GUARDED: return nb_delay_ops_guarded();
#ifdef NB_HAVE_CUDA
    case NB_DEVICE_CUDA: return nb_delay_ops_cuda();
#endif
    default: return NULL;
    }
}
