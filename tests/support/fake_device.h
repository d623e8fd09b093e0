/* A backend whose memory the host cannot touch: what a GPU's is to the host, made on the CPU so that the
 * tests can check that a stage placed on a device (src/model/stage.h, nb_stage_place) reaches its memory
 * only through its backend. alloc hands out addresses in a reserved range with no access at all (any load
 * or store there faults), each the mirror of a host buffer that only the backend's own calls reach: its
 * copies, its products and its layer table (layers/ops.h) translate each address and run the inner
 * backend's CPU code on the mirror. A call given an address outside the range where the device's memory
 * is expected counts as a misuse (fake_device_misuses) and runs on it unchanged. */
#ifndef NB_TESTS_FAKE_DEVICE_H
#define NB_TESTS_FAKE_DEVICE_H
#include "backend/backend.h"

/* NULL when the address space cannot be reserved. */
nb_backend *fake_device_open(const nb_backend *inner);
void fake_device_close(nb_backend *b);
long fake_device_misuses(const nb_backend *b);
#endif
