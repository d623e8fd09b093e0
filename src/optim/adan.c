/* Adan in code form, betas (b1, b2, b3) = (0.98, 0.92, 0.99) by default, with decoupled weight
 * decay instead of Adan's proximal form:
 *   diff = g - g_prev (0 at the first step); m = b1 m + (1-b1) g; v = b2 v + (1-b2) diff;
 *   n = b3 n + (1-b3) (g + b2 diff)^2; den = sqrt(n/(1-b3^k)) + eps;
 *   d = lr (m/(1-b1^k))/den + lr b2 (v/(1-b2^k))/den + lr wd w;  g_prev = g  (k = count + 1). */
#include <math.h>
#include "optim/rules.h"

static int adan_step(tensor_state *ts, const rule_ctx *c, const float *g, const float *w, float *d) {
    const float b1 = c->p->beta1, b2 = c->p->beta2, b3 = c->p->beta3, lr = c->lr, eps = c->p->eps;
    const float wd = decay_of(ts->t, c->p);
    const double k = (double)(ts->count + 1);
    const float c1 = 1.0f - (float)pow(b1, k), c2 = 1.0f - (float)pow(b2, k), c3 = 1.0f - (float)pow(b3, k);
    const int first = ts->count == 0;
    float *m = ts->buf[0], *v = ts->buf[1], *nn = ts->buf[2], *gp = ts->buf[3];
    const size_t n = ts->t->numel;
#pragma omp parallel for simd schedule(static) if (n > PAR_MIN)
    for (size_t i = 0; i < n; i++) {
        float diff = first ? 0.0f : g[i] - gp[i];
        m[i] = b1 * m[i] + (1.0f - b1) * g[i];
        v[i] = b2 * v[i] + (1.0f - b2) * diff;
        float u = g[i] + b2 * diff;
        nn[i] = b3 * nn[i] + (1.0f - b3) * u * u;
        float den = sqrtf(nn[i] / c3) + eps;
        d[i] = lr * (m[i] / c1) / den + lr * b2 * (v[i] / c2) / den + lr * wd * w[i];
        gp[i] = g[i];
    }
    ts->count++;
    return 0;
}

const nb_optim_rule adan_rule = {
    .step = adan_step,
    .buffers = {{"m", STATE_PER_VALUE}, {"v", STATE_PER_VALUE}, {"n", STATE_PER_VALUE}, {"g_prev", STATE_PER_VALUE}},
};
