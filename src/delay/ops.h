/* Internal: the delay rules' update on a backend whose memory is a device's (nb_backend.device_memory;
 * docs/architecture.md, "A stage in a device's memory"). A stash made there (nb_stash_create_on) keeps its
 * versions and its error-feedback buffer in the backend's memory and applies each step through the
 * backend's `delay` table, whose entry has the contract of nb_delay_apply_host below on that memory. The
 * CUDA backend's is delay_cuda.c's (kernels); the guarded device's calls the host's passes below on its
 * mirrors. Taylor compensation and its metric run there too (taylor, taylor_sq). */
#ifndef NB_DELAY_OPS_H
#define NB_DELAY_OPS_H
#include <stddef.h>
#include "backend/backend.h"

/* What one step does to n weights (delay.c's three passes):
 *   NB_APPLY_ONLY   current -= d                                   (no version kept, no EF)
 *   NB_APPLY_KEEP   keep = current; current -= d                   (2BW, PipeDream)
 *   NB_APPLY_EF     keep = current; d' = d + alpha (d - prev) (d itself when `first`); prev = d; d = d';
 *                   current -= d'                                   (with error feedback) */
typedef enum { NB_APPLY_ONLY, NB_APPLY_KEEP, NB_APPLY_EF } nb_apply_kind;

void nb_delay_apply_host(nb_apply_kind kind, float *keep, float *current, float *d, float *prev, float alpha, int first,
                         size_t n);
/* Taylor compensation of n gradients (nb_stash_taylor): g += lambda g g (current - old); and the squared norm of
 * what it adds, c = lambda g g (current - old) formed alike, in double with 8 lanes combined in a fixed order
 * (nb_stash_taylor_sq). */
void nb_delay_taylor_host(float *grads, const float *current, const float *old, float lambda, size_t n);
double nb_delay_taylor_sq_host(const float *grads, const float *current, const float *old, float lambda, size_t n);

typedef struct nb_delay_ops {
    void (*apply)(const nb_backend *be, nb_apply_kind kind, float *keep, float *current, float *d, float *prev,
                  float alpha, int first, size_t n);
    void (*taylor)(const nb_backend *be, float *grads, const float *current, const float *old, float lambda, size_t n);
    /* the number comes back to the host (a device waits for it) */
    double (*taylor_sq)(const nb_backend *be, const float *grads, const float *current, const float *old, float lambda,
                        size_t n);
} nb_delay_ops;

/* be's table: its own, else its device's (NULL on the host's memory, or for a device this build has no
 * table for). */
const nb_delay_ops *nb_delay_of(const nb_backend *be);
/* The CUDA backend's table (delay_cuda.c, -DNB_CUDA=ON only). */
const nb_delay_ops *nb_delay_ops_cuda(void);
/* The guarded device's (delay_guarded.c; backend/guarded.h): nb_delay_apply_host on its mirrors. */
const nb_delay_ops *nb_delay_ops_guarded(void);
#endif
