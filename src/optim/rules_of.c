/* Which rule table a backend's memory takes (optim/rules.h, nb_rules_of). */
#include "optim/rules.h"

const nb_rule_ops *nb_rules_of(const nb_backend *be) {
    if (be && be->rules) return be->rules;
    switch (be ? be->device : NB_DEVICE_HOST) {
    case NB_DEVICE_GUARDED: return nb_rule_ops_guarded();
#ifdef NB_HAVE_CUDA
    case NB_DEVICE_CUDA: return nb_rule_ops_cuda();
#endif
    default: return NULL;
    }
}
