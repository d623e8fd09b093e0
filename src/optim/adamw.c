/* AdamW: m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2; mh = m/(1-b1^(k+1)); vh = v/(1-b2^(k+1));
 * d = lr mh/(sqrt(vh) + eps) + lr wd w, with k this tensor's update count. Also the rule of
 * embed and gain tensors under Muon, SOAP and MARS (with their aux betas). */
#include <math.h>
#include "optim/rules.h"

void adamw_step(tensor_state *ts, const rule_ctx *c, float beta1, float beta2, const float *g, const float *w, float *d) {
    const float lr = c->lr, wd = decay_of(ts->t, c->p), eps = c->p->eps;
    const float c1 = 1.0f - (float)pow(beta1, (double)(ts->count + 1));
    const float c2 = 1.0f - (float)pow(beta2, (double)(ts->count + 1));
    float *m = ts->buf[0], *v = ts->buf[1];
    const size_t n = ts->t->numel;
#pragma omp parallel for simd schedule(static) if (n > PAR_MIN)
    for (size_t i = 0; i < n; i++) {
        m[i] = beta1 * m[i] + (1.0f - beta1) * g[i];
        v[i] = beta2 * v[i] + (1.0f - beta2) * g[i] * g[i];
        d[i] = lr * (m[i] / c1) / (sqrtf(v[i] / c2) + eps) + lr * wd * w[i];
    }
    ts->count++;
}
