/* A model's stages (one or two) through STAGE_RUN_MICRO micro-batches of forward and backward on a backend
 * (a stage in a device's memory too: everything comes back through the backend's to_host), for the tests
 * that compare one backend's run with another's. */
#ifndef NB_TESTS_STAGE_RUN_H
#define NB_TESTS_STAGE_RUN_H
#include "backend/backend.h"
#include "nobubble/model.h"

enum { STAGE_RUN_MICRO = 2 };

/* What a run leaves, on the host: the losses, each stage's gradients (and its tied head's), and with two
 * stages the first's output and the second's input gradient per micro-batch. */
typedef struct {
    float loss[STAGE_RUN_MICRO];
    float *grads[2], *tied[2];
    float *output[STAGE_RUN_MICRO], *input_grad[STAGE_RUN_MICRO];
} stage_outcome;

/* Weights from seed 11, fixed tokens and targets (different per micro-batch), loss scale 0.5, logit_rows
 * (0: the stage's default). 0, or -1 after a failed CHECK naming the call. */
int stage_run(const nb_backend *be, const nb_config *cfg, int n_stages, int B, int T, int logit_rows, stage_outcome *o);
/* The same at a precision (stage_run: fp32); bf16 keeps one weight version's bf16 copy per stage. */
int stage_run_at(const nb_backend *be, const nb_config *cfg, int n_stages, int B, int T, int logit_rows, nb_precision p,
                 stage_outcome *o);
void stage_outcome_free(stage_outcome *o);
#endif
