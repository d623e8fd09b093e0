/* Lion: c = b1 m + (1-b1) g; d = lr sign(c) + lr wd w (sign(0) = 0); then m = b2 m + (1-b2) g. */
#include "optim/rules.h"

static int lion_step(tensor_state *ts, const rule_ctx *c, const float *g, const float *w, float *d) {
    const float b1 = c->p->beta1, b2 = c->p->beta2, lr = c->lr, wd = decay_of(ts->t, c->p);
    float *m = ts->buf[0];
    const size_t n = ts->t->numel;
#pragma omp parallel for simd schedule(static) if (n > PAR_MIN)
    for (size_t i = 0; i < n; i++) {
        float u = b1 * m[i] + (1.0f - b1) * g[i];
        float sign = u > 0.0f ? 1.0f : (u < 0.0f ? -1.0f : 0.0f);
        d[i] = lr * sign + lr * wd * w[i];
        m[i] = b2 * m[i] + (1.0f - b2) * g[i];
    }
    ts->count++;
    return 0;
}

const nb_optim_rule lion_rule = {.step = lion_step, .buffers = {{"m", STATE_PER_VALUE}}};
