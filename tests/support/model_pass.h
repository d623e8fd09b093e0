/* A whole model's forward and backward for one micro-batch, stage after stage in one thread, for the
 * tests that compare a model with references (PyTorch's fixtures, double-precision sums, other splits,
 * generation). The library has no such driver: every run goes through the executor, whose stage role
 * (src/train/exec/worker.c) makes these same calls, a stage's activations sent to the next as a message. */
#ifndef NB_TESTS_MODEL_PASS_H
#define NB_TESTS_MODEL_PASS_H
#include "nobubble/model.h"

/* Forward on each stage's current weights (acts: one slot per stage); the loss of the last into *loss. */
int model_forward(nb_model *m, nb_acts **acts, const int *tokens, const int *targets, float *loss);
/* Backward from the last stage to the first, loss_scale x the gradient added to each stage's grads. */
int model_backward(nb_model *m, nb_acts **acts, float loss_scale);
/* A tied embedding's gradient completed as a run completes it (nb_stage_sum_tied_grad, the last stage's
 * copy's gradient as the head's part across a split), then mirrored into that copy, so that tests can
 * compare a split's every tensor with the unsplit model's. */
void model_sum_tied_grads(nb_model *m);
#endif
