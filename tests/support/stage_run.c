/* stage_run.h */
#include "stage_run.h"
#include <stdlib.h>
#include <string.h>
#include "check.h"
#include "util/error.h"

static float *on_host(const nb_backend *be, const float *mem, size_t n) {
    float *h = calloc(n ? n : 1, sizeof(float));
    if (h && mem) nb_backend_to_host(be, h, mem, sizeof(float) * n);
    return h;
}

int stage_run(const nb_backend *be, const nb_config *cfg, int n_stages, int B, int T, int logit_rows, stage_outcome *o) {
    return stage_run_at(be, cfg, n_stages, B, T, logit_rows, NB_PRECISION_FP32, o);
}

int stage_run_at(const nb_backend *be, const nb_config *cfg, int n_stages, int B, int T, int logit_rows, nb_precision p,
                 stage_outcome *o) {
    nb_model m;
    memset(o, 0, sizeof *o);
    if (n_stages < 1 || n_stages > 2 || nb_model_create(&m, cfg, n_stages, NULL, be) || nb_model_init(&m, 11)) {
        CHECK(0, "model of %d stage(s) on %s: %s", n_stages, be->name, nb_last_error());
        return -1;
    }
    nb_acts *a[2] = {NULL, NULL};
    int rc = 0;
    for (int s = 0; s < n_stages; s++) {
        m.stages[s].logit_rows = logit_rows;
        if (nb_stage_set_precision(&m.stages[s], p, 1)) rc = -1, CHECK(0, "precision: %s", nb_last_error());
        if (!(a[s] = nb_acts_create(&m.stages[s], B, T))) rc = -1;
    }
    const size_t nd = (size_t)B * T * cfg->d_model, N = (size_t)B * T;
    int *tokens = calloc(N, sizeof(int)), *targets = calloc(N, sizeof(int));
    if (!tokens || !targets) rc = nb_fail("out of memory for tokens");
    for (int k = 0; k < STAGE_RUN_MICRO && !rc; k++) {
        for (size_t i = 0; i < N; i++)
            tokens[i] = (int)((7 * i + 3 * k + 1) % (size_t)cfg->vocab_size),
            targets[i] = (int)((5 * i + k + 2) % (size_t)cfg->vocab_size);
        nb_stage *first = &m.stages[0], *last = &m.stages[n_stages - 1];
        rc = nb_stage_forward(first, first->params, 0, a[0], tokens, NULL, targets, &o->loss[k]);
        if (!rc && n_stages == 2)
            rc = nb_stage_forward(last, last->params, 0, a[1], NULL, nb_acts_output(a[0]), targets, &o->loss[k]);
        if (!rc) rc = nb_stage_backward(last, last->params, 0, a[n_stages - 1], NULL, 0.5f);
        if (!rc && n_stages == 2) rc = nb_stage_backward(first, first->params, 0, a[0], nb_acts_input_grad(a[1]), 0.5f);
        if (!rc && n_stages == 2) {
            o->output[k] = on_host(be, nb_acts_output(a[0]), nd);
            o->input_grad[k] = on_host(be, nb_acts_input_grad(a[1]), nd);
        }
    }
    CHECK(rc == 0, "forward and backward on %s: %s", be->name, rc ? nb_last_error() : "");
    for (int s = 0; s < n_stages && !rc; s++) {
        o->grads[s] = on_host(be, m.stages[s].grads, m.stages[s].n_params);
        if (m.stages[s].tied_head_grad)
            o->tied[s] = on_host(be, m.stages[s].tied_head_grad, m.stages[s].tensors[0].numel);
    }
    if (!rc && nb_backend_check(be)) rc = -1, CHECK(0, "%s after the run: %s", be->name, nb_last_error());
    free(tokens), free(targets);
    for (int s = 0; s < n_stages; s++) nb_acts_free(a[s]);
    nb_model_free(&m);
    return rc;
}

void stage_outcome_free(stage_outcome *o) {
    for (int i = 0; i < 2; i++) free(o->grads[i]), free(o->tied[i]);
    for (int k = 0; k < STAGE_RUN_MICRO; k++) free(o->output[k]), free(o->input_grad[k]);
}
