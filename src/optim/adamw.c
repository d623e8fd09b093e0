/* AdamW: m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2; mh = m/(1-b1^(k+1)); vh = v/(1-b2^(k+1));
 * d = lr mh/(sqrt(vh) + eps) + lr wd w, with k this tensor's update count. Also the auxiliary rule of
 * what Muon, NorMuon, SOAP and MARS do not take (embeddings, gains), whose context gives the aux betas
 * as beta1 and beta2. */
#include <math.h>
#include "optim/rules.h"

static int adamw_step(tensor_state *ts, const rule_ctx *c, const float *g, const float *w, float *d) {
    const float beta1 = c->p->beta1, beta2 = c->p->beta2, lr = c->lr, wd = decay_of(ts->t, c->p), eps = c->p->eps;
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
    return 0;
}

const nb_optim_rule adamw_rule = {.step = adamw_step, .buffers = {{"m", STATE_PER_VALUE}, {"v", STATE_PER_VALUE}}};
