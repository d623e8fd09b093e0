/* One forward and backward of a small model's single stage on a given backend, for the backend tests:
 * `tiny` cut to 2 layers, a vocabulary of 64, `context` tokens by 2 sequences of fixed tokens, weights
 * from `seed`, tied head (its gradient summed). */
#ifndef NB_TESTS_STAGE_STEP_H
#define NB_TESTS_STAGE_STEP_H
#include <stddef.h>
#include "nobubble/backend.h"
#include "nobubble/model.h"

/* The loss into *loss and the gradients into grads (room for the stage's parameters; their count into
 * *n_params); *held (may be NULL) receives the backend the stage held. 0, or -1 with nb_last_error. */
int stage_step(const nb_backend *be, nb_precision precision, int context, uint64_t seed, float *loss, float *grads,
               size_t *n_params, const nb_backend **held);
#endif
