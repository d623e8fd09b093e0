/* Internal: the guarded device, the CPU behind a device's boundary (`--device guarded`, docs/gpu.md).
 *
 * A backend whose memory the host cannot touch, as a GPU's cannot be: alloc hands out addresses in a
 * reserved range with no access at all (any load or store there faults), each the mirror of a host buffer
 * that only the backend's own calls reach. Its copies, products and arithmetic, and the layer, rule and
 * delay tables made for it (layers/ops_guarded.c, optim/rules_guarded.c, delay/delay_guarded.c), translate
 * each address and run the inner CPU backend's code on the mirror, so a run on it computes the CPU's bits
 * while reaching its stages' memory only as a device's. What it is for: checking on any machine, in CI,
 * that everything the executor does with a stage on a device (messages, norms, checkpoints, resume) goes
 * through the backend; a GPU's run differs from it only inside the backend's calls.
 *
 * An address outside the range where the device's memory is expected (a host pointer given as the device's)
 * is a misuse: counted (nb_guarded_misuses), recorded as the backend's failure (nb_backend_check reports it,
 * naming the call) and, so that the run stops with that message rather than a fault, used as it is. */
#ifndef NB_BACKEND_GUARDED_H
#define NB_BACKEND_GUARDED_H
#include "backend/backend.h"

/* Over an open CPU backend, closed with it where `owns` (nb_backend_open_device), else the caller's (tests).
 * NULL with nb_fail where the range cannot be reserved. */
nb_backend *nb_guarded_wrap(const nb_backend *inner, int owns);
/* 1 for a guarded backend. */
int nb_guarded_is(const nb_backend *b);
/* The mirror of device address p (NULL stays NULL): what the tables' entries compute on. */
void *nb_guarded_host(const nb_backend *b, const void *p);
/* The CPU backend inside, which runs the mirrors' products. */
const nb_backend *nb_guarded_inner(const nb_backend *b);
long nb_guarded_misuses(const nb_backend *b);
#endif
