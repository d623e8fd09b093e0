/* AdamW exactly as in update-rules.md section 2, returning the step instead of applying it. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "nobubble/optim.h"
#include "util/error.h"

nb_adamw_params nb_adamw_defaults(void) {
    nb_adamw_params p = {0.9f, 0.95f, 1e-8f, 0.0f};
    return p;
}

int nb_adamw_init(nb_adamw *o, const nb_stage *s, nb_adamw_params p) {
    memset(o, 0, sizeof *o);
    if (!(p.beta1 >= 0 && p.beta1 < 1)) return nb_fail("--beta1 %g: expected 0 <= beta1 < 1", p.beta1);
    if (!(p.beta2 >= 0 && p.beta2 < 1)) return nb_fail("--beta2 %g: expected 0 <= beta2 < 1", p.beta2);
    if (!(p.eps > 0)) return nb_fail("--eps %g: expected a positive number", p.eps);
    if (!(p.weight_decay >= 0)) return nb_fail("--wd %g: expected >= 0", p.weight_decay);
    o->p = p;
    o->stage = s;
    o->m = calloc(s->n_params ? s->n_params : 1, sizeof(float));
    o->v = calloc(s->n_params ? s->n_params : 1, sizeof(float));
    if (!o->m || !o->v) return nb_fail("out of memory for AdamW state");
    return 0;
}

void nb_adamw_free(nb_adamw *o) {
    free(o->m);
    free(o->v);
    memset(o, 0, sizeof *o);
}

void nb_adamw_step(nb_adamw *o, const float *grads, const float *w, float lr, float *d) {
    const float b1 = o->p.beta1, b2 = o->p.beta2, eps = o->p.eps;
    const float c1 = 1.0f - (float)pow(b1, (double)(o->step + 1));
    const float c2 = 1.0f - (float)pow(b2, (double)(o->step + 1));
    for (int ti = 0; ti < o->stage->n_tensors; ti++) {
        const nb_tensor *t = &o->stage->tensors[ti];
        const float wd = t->group == NB_GROUP_GAIN ? 0.0f : o->p.weight_decay;
        float *m = o->m + t->offset, *v = o->v + t->offset, *dt = d + t->offset;
        const float *g = grads + t->offset, *wt = w + t->offset;
#pragma omp parallel for simd schedule(static)
        for (size_t i = 0; i < t->numel; i++) {
            m[i] = b1 * m[i] + (1.0f - b1) * g[i];
            v[i] = b2 * v[i] + (1.0f - b2) * g[i] * g[i];
            float mh = m[i] / c1, vh = v[i] / c2;
            dt[i] = lr * mh / (sqrtf(vh) + eps) + lr * wd * wt[i];
        }
    }
    o->step++;
}
