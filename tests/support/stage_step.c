/* stage_step.h */
#include "stage_step.h"
#include "model_pass.h"
#include <stdlib.h>
#include <string.h>

int stage_step(const nb_backend *be, nb_precision precision, int context, uint64_t seed, float *loss, float *grads,
               size_t *n_params, const nb_backend **held) {
    nb_config cfg;
    nb_config_preset("tiny", &cfg);
    cfg.n_layers = 2, cfg.vocab_size = 64, cfg.context = context;
    nb_model m;
    if (nb_model_create(&m, &cfg, 1, NULL, be)) return -1;
    nb_model_init(&m, seed);
    nb_stage *s = &m.stages[0];
    if (held) *held = s->backend;
    const int N = 2 * context;
    int *tokens = malloc(sizeof(int) * (size_t)N), *targets = malloc(sizeof(int) * (size_t)N);
    nb_acts *a = precision == NB_PRECISION_BF16 && nb_stage_set_precision(s, precision, 2) ? NULL
                                                                                          : nb_acts_create(s, 2, context);
    int rc = !a || !tokens || !targets;
    for (int i = 0; !rc && i < N; i++) tokens[i] = (i * 7) % 64, targets[i] = (i * 11 + 3) % 64;
    rc = rc || nb_stage_forward(s, s->params, 0, a, tokens, NULL, targets, loss) ||
         nb_stage_backward(s, s->params, 0, a, NULL, 1.0f);
    if (!rc) {
        model_sum_tied_grads(&m);
        memcpy(grads, s->grads, sizeof(float) * s->n_params);
        *n_params = s->n_params;
    }
    free(tokens);
    free(targets);
    nb_acts_free(a);
    nb_model_free(&m);
    return rc ? -1 : 0;
}
