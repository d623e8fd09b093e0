/* The delay rules' update on the guarded device (backend/guarded.h): the CPU's passes on the mirrors. */
#include "backend/guarded.h"
#include "delay/ops.h"

static void guarded_apply(const nb_backend *be, nb_apply_kind kind, float *keep, float *current, float *d, float *prev,
                          float alpha, int first, size_t n) {
    nb_delay_apply_host(kind, nb_guarded_host(be, keep), nb_guarded_host(be, current), nb_guarded_host(be, d),
                        nb_guarded_host(be, prev), alpha, first, n);
}

static void guarded_taylor(const nb_backend *be, float *grads, const float *current, const float *old, float lambda,
                           size_t n) {
    nb_delay_taylor_host(nb_guarded_host(be, grads), nb_guarded_host(be, current), nb_guarded_host(be, old), lambda, n);
}

static double guarded_taylor_sq(const nb_backend *be, const float *grads, const float *current, const float *old,
                                float lambda, size_t n) {
    return nb_delay_taylor_sq_host(nb_guarded_host(be, grads), nb_guarded_host(be, current), nb_guarded_host(be, old),
                                   lambda, n);
}

static const nb_delay_ops guarded_delay = {.apply = guarded_apply, .taylor = guarded_taylor, .taylor_sq = guarded_taylor_sq};

const nb_delay_ops *nb_delay_ops_guarded(void) { return &guarded_delay; }
