/* model_pass.h */
#include "model_pass.h"
#include <string.h>

int model_forward(nb_model *m, nb_acts **acts, const int *tokens, const int *targets, float *loss) {
    for (int i = 0; i < m->n_stages; i++) {
        nb_stage *s = &m->stages[i];
        const float *x_in = i > 0 ? nb_acts_output(acts[i - 1]) : NULL;
        if (nb_stage_forward(s, s->params, NB_VERSION_NONE, acts[i], tokens, x_in, targets, loss)) return -1;
    }
    return 0;
}

int model_backward(nb_model *m, nb_acts **acts, float loss_scale) {
    for (int i = m->n_stages - 1; i >= 0; i--) {
        nb_stage *s = &m->stages[i];
        const float *dout = i < m->n_stages - 1 ? nb_acts_input_grad(acts[i + 1]) : NULL;
        if (nb_stage_backward(s, s->params, NB_VERSION_NONE, acts[i], dout, loss_scale)) return -1;
    }
    return 0;
}

void model_sum_tied_grads(nb_model *m) {
    nb_stage *first = &m->stages[0], *last = &m->stages[m->n_stages - 1];
    if (!m->cfg.tied) return;
    if (m->n_stages == 1) {
        nb_stage_sum_tied_grad(first, NULL);
        return;
    }
    float *copy = last->grads + last->tensors[last->n_tensors - 1].offset;
    nb_stage_sum_tied_grad(first, copy);
    memcpy(copy, first->grads + first->tensors[0].offset, sizeof(float) * first->tensors[0].numel);
}
