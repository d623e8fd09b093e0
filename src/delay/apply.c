/* The delay rules' update of the weights on the host's memory (delay/ops.h, nb_delay_apply_host): its own file,
 * since the guarded device's table (delay_guarded.c) calls it as the stash (delay.c) does. */
#include "delay/ops.h"

/* current -= d: all a step needs when it keeps no version and runs no EF (a synchronous run). The
 * same subtraction per element as the EF pass below, so bitwise the same. */
static void apply_only(float *current, const float *d, size_t n) {
#pragma omp parallel for simd schedule(static)
    for (size_t i = 0; i < n; i++) current[i] = current[i] - d[i];
}

/* keep[i] = w_t, current -= d: a delayed step without EF (2BW, PipeDream). */
static void keep_and_apply(float *keep, float *current, const float *d, size_t n) {
#pragma omp parallel for simd schedule(static)
    for (size_t i = 0; i < n; i++) {
        const float w = current[i];
        keep[i] = w;
        current[i] = w - d[i];
    }
}

/* A delayed step with EF: d becomes the applied step d_t + alpha (d_t - d_{t-1}) (d_t itself on the
 * first step that uses EF), d_t is remembered, w_t kept, current -= the applied step. One pass. */
static void ef_apply(float *keep, float *current, float *d, float *prev, float alpha, int first, size_t n) {
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) {
        const float w = current[i], computed = d[i];
        const float di = first ? computed : computed + alpha * (computed - prev[i]);
        prev[i] = computed;
        d[i] = di;
        keep[i] = w;
        current[i] = w - di;
    }
}

void nb_delay_apply_host(nb_apply_kind kind, float *keep, float *current, float *d, float *prev, float alpha, int first,
                         size_t n) {
    if (kind == NB_APPLY_EF) ef_apply(keep, current, d, prev, alpha, first, n);
    else if (kind == NB_APPLY_KEEP) keep_and_apply(keep, current, d, n);
    else apply_only(current, d, n);
}


void nb_delay_taylor_host(float *grads, const float *current, const float *old, float lambda, size_t n) {
#pragma omp parallel for simd schedule(static)
    for (size_t i = 0; i < n; i++) grads[i] += lambda * grads[i] * grads[i] * (current[i] - old[i]);
}

/* Eight lanes summed in a fixed order: the same number for any thread count (a metric that the pipeline and
 * the one-process run must write alike). The correction is formed exactly as nb_delay_taylor_host forms it,
 * so this is the norm of what that call adds. */
double nb_delay_taylor_sq_host(const float *grads, const float *current, const float *old, float lambda, size_t n) {
    double lane[8] = {0};
    for (size_t i = 0; i < n; i++) {
        const float c = lambda * grads[i] * grads[i] * (current[i] - old[i]);
        lane[i % 8] += (double)c * c;
    }
    return ((lane[0] + lane[1]) + (lane[2] + lane[3])) + ((lane[4] + lane[5]) + (lane[6] + lane[7]));
}
