/* The optimizer's element-wise rules on the GPU's memory (rules.h's table for the CUDA backend's device
 * memory mode): AdamW (the auxiliary rule too), Lion, Adan and MARS as their kernels
 * (src/backend/cuda/kernels.h, checked on an H200 against these rules' CPU code), queued on the backend's
 * stream. Built only with -DNB_CUDA=ON; not yet run on a GPU in this form (docs/gpu.md). */
#ifdef NB_HAVE_CUDA
#include <cuda_runtime.h>
#include "backend/cuda.h"
#include "backend/cuda/kernels.h"
#include "optim/rules.h"
#include "util/error.h"

static int cuda_rule_step(const nb_backend *be, const nb_optim_rule *rule, tensor_state *ts, const rule_ctx *c,
                          const float *g, const float *w, float *d) {
    const nbk_optim_step a = {.lr = c->lr, .beta1 = c->p->beta1, .beta2 = c->p->beta2, .beta3 = c->p->beta3,
                              .eps = c->p->eps, .weight_decay = decay_of(ts->t, c->p), .gamma = c->p->gamma,
                              .count = ts->count};
    const cudaStream_t stream = (cudaStream_t)nb_cuda_stream(be);
    const size_t n = ts->t->numel;
    int rc;
    if (rule == &adamw_rule) {
        rc = nbk_adamw_step(d, ts->buf[0], ts->buf[1], g, w, n, &a, stream);
    } else if (rule == &lion_rule) {
        rc = nbk_lion_step(d, ts->buf[0], g, w, n, &a, stream);
    } else if (rule == &adan_rule) {
        rc = nbk_adan_step(d, ts->buf[0], ts->buf[1], ts->buf[2], ts->buf[3], g, w, n, &a, stream);
    } else if (rule == &mars_rule) {
        double *scratch = nb_cuda_scratch(be, sizeof(double) * nbk_mars_scratch_doubles());
        rc = scratch ? nbk_mars_step(d, ts->buf[0], ts->buf[1], ts->buf[2], g, w, n, &a, scratch, stream) : -1;
    } else {
        return nb_fail("this rule has no kernel on the GPU's memory yet (AdamW, Lion, Adan and MARS have)");
    }
    if (rc) return -1;
    ts->count++;
    return 0;
}

static const nb_rule_ops cuda_rules = {.step = cuda_rule_step};

const nb_rule_ops *nb_rule_ops_cuda(void) { return &cuda_rules; }
#else
typedef int nb_no_cuda_rules; /* ISO C wants a translation unit to declare something */
#endif
