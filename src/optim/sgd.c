/* SGD with momentum: m = mu m + g; d = lr (nesterov ? g + mu m : m) + lr wd w. */
#include "optim/rules.h"

static int sgd_step(tensor_state *ts, const rule_ctx *c, const float *g, const float *w, float *d) {
    const float mu = c->p->momentum, lr = c->lr, wd = decay_of(ts->t, c->p);
    const int nesterov = c->p->nesterov;
    float *m = ts->buf[0];
    const size_t n = ts->t->numel;
#pragma omp parallel for simd schedule(static) if (n > PAR_MIN)
    for (size_t i = 0; i < n; i++) {
        m[i] = mu * m[i] + g[i];
        d[i] = lr * (nesterov ? g[i] + mu * m[i] : m[i]) + lr * wd * w[i];
    }
    ts->count++;
    return 0;
}

const nb_optim_rule sgd_rule = {.step = sgd_step, .buffers = {{"m", STATE_PER_VALUE}}};
