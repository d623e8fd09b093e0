/* MARS, the approximate MARS-AdamW form, on matrix tensors:
 *   c = g + gamma (b1/(1-b1)) (g - g_prev)  (g_prev = g at the first step);
 *   if ||c||_2 > 1: c = c/||c||_2 (per tensor); then AdamW's moments and step on c; g_prev = g. */
#include <math.h>
#include "optim/rules.h"

static int mars_step(tensor_state *ts, const rule_ctx *c, const float *g, const float *w, float *d) {
    const float b1 = c->p->beta1, b2 = c->p->beta2, lr = c->lr, eps = c->p->eps, wd = decay_of(ts->t, c->p);
    const float k = c->p->gamma * b1 / (1.0f - b1);
    const int first = ts->count == 0;
    float *m = ts->buf[0], *v = ts->buf[1], *gp = ts->buf[2], *cc = d;  /* c lives in d until the end */
    const size_t n = ts->t->numel;
    double sq = 0.0;
    for (size_t i = 0; i < n; i++) {
        cc[i] = first ? g[i] : g[i] + k * (g[i] - gp[i]);
        sq += (double)cc[i] * cc[i];
    }
    const float scale = sq > 1.0 ? (float)(1.0 / sqrt(sq)) : 1.0f;
    const float c1 = 1.0f - (float)pow(b1, (double)(ts->count + 1));
    const float c2 = 1.0f - (float)pow(b2, (double)(ts->count + 1));
#pragma omp parallel for simd schedule(static) if (n > PAR_MIN)
    for (size_t i = 0; i < n; i++) {
        float ci = cc[i] * scale;
        m[i] = b1 * m[i] + (1.0f - b1) * ci;
        v[i] = b2 * v[i] + (1.0f - b2) * ci * ci;
        d[i] = lr * (m[i] / c1) / (sqrtf(v[i] / c2) + eps) + lr * wd * w[i];
        gp[i] = g[i];
    }
    ts->count++;
    return 0;
}

/* Its rule takes matrices only; the rest take the auxiliary AdamW. */
const nb_optim_rule mars_rule = {
    .step = mars_step,
    .buffers = {{"m", STATE_PER_VALUE}, {"v", STATE_PER_VALUE}, {"g_prev", STATE_PER_VALUE}},
    .matrices_only = 1,
};
