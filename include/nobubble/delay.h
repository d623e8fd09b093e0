/* nobubble: staleness. Which weight version each stage's forward and backward use at step t
 * (the delay a PipeDream-2BW or PipeDream pipeline imposes), the weight versions a stage keeps
 * for it, and the mitigations: error feedback, Taylor (delay-compensated) gradients, and
 * synchronous start and cooldown (docs/rules.md sections 3 and 4).
 *
 * Per step t and stage s, in order:
 *   w = nb_stash_weights(...)            the version w_{t - tau_s(t)} to run forward/backward on
 *   (gradients g computed on w)
 *   nb_stash_taylor(...)                 g~ = g + lambda g g (w_t - w_{t - tau})  (if asked)
 *   (the optimizer computes d_t from g~ and the current w_t)
 *   nb_stash_apply(...)                  w_{t+1} = w_t - d_t - alpha (d_t - d_{t-1})  (EF if asked)
 */
#ifndef NOBUBBLE_DELAY_H
#define NOBUBBLE_DELAY_H
#include <stddef.h>
#include "nobubble/backend.h"
#include "nobubble/common.h"

typedef enum { NB_DELAY_SYNC, NB_DELAY_2BW, NB_DELAY_PIPEDREAM, NB_DELAY_FIXED } nb_delay_mode;

typedef struct nb_delay_options {
    nb_delay_mode mode;
    int tau;            /* fixed:TAU */
    int ef;             /* error feedback on the step */
    float ef_alpha;     /* 1: the paper's x_{t+1} = x_t - 2 u_{t-1} + u_{t-2} */
    float taylor;       /* lambda of the delay-compensated gradient (0: off) */
    int sync_start;     /* tau = 0 for steps t < sync_start */
    int sync_cooldown;  /* tau = 0 for the last sync_cooldown steps */
} nb_delay_options;

/* "sync", "2bw", "pipedream" or "fixed:TAU" into o->mode / o->tau (other fields untouched). */
int nb_delay_parse(const char *text, nb_delay_options *o);
/* "sync", "2bw", "pipedream" or "fixed" (without its TAU). */
const char *nb_delay_mode_name(nb_delay_mode mode);
/* What --delay takes, the modes joined: "sync, 2bw, pipedream or fixed:TAU" (sep ", ", last_sep " or "). */
void nb_delay_modes_text(const char *sep, const char *last_sep, char *buf, size_t size);
/* The ranges of the mitigations' numbers (--ef's alpha, --taylor's lambda), which nb_delay_validate checks
 * and the settings table (train.h) parses, shows and documents; ended by a row without a flag. */
extern const nb_range nb_delay_ranges[];
/* Checks the options against nb_delay_ranges and a run of total_steps steps over n_stages stages. */
int nb_delay_validate(const nb_delay_options *o, int total_steps, int n_stages);
/* One line describing the delay and every mitigation turned on, for run headers. */
void nb_delay_describe(const nb_delay_options *o, char *buf, size_t size);
/* The delay of stage s (0 = the input side) of n_stages at step t of a run of total_steps. */
int nb_delay_tau(const nb_delay_options *o, int stage, int n_stages, int step, int total_steps);
/* The largest delay stage s ever has: it keeps that many older versions. */
int nb_delay_tau_max(const nb_delay_options *o, int stage, int n_stages);

/* A stage's older weight versions (a ring of tau_max copies, all w_0 before step 0) and, with
 * error feedback, its previous step. */
typedef struct nb_stash nb_stash;

int nb_stash_create(nb_stash **out, const nb_delay_options *o, int stage, int n_stages, int total_steps,
                    const float *w0, size_t n);
/* The same on backend be (NULL: the host): where its memory is a device's, w0, the versions, the EF buffer
 * and the weights and steps given to nb_stash_apply are that memory, and each step runs there (the
 * checkpoint accessors below then give device addresses); Taylor's compensation runs there too. */
int nb_stash_create_on(nb_stash **out, const nb_delay_options *o, int stage, int n_stages, int total_steps,
                       const float *w0, size_t n, const nb_backend *be);
void nb_stash_free(nb_stash *s);
/* Bytes held beyond the current weights (versions, EF buffer); _for: those of a stash that
 * nb_stash_create would make for n weights, before it is made (memory estimates, benchmarks). */
size_t nb_stash_bytes(const nb_stash *s);
size_t nb_stash_bytes_for(const nb_delay_options *o, int stage, int n_stages, size_t n);
/* For checkpoints: the stored versions (tau_max x n floats, NULL when none), the EF buffer (n
 * floats, NULL without EF) and whether EF ran at the previous step. */
float *nb_stash_versions(nb_stash *s, size_t *count);
float *nb_stash_ef_buffer(nb_stash *s, size_t *count);
int nb_stash_ef_running(const nb_stash *s);
void nb_stash_set_ef_running(nb_stash *s, int running);
/* The delay this stage uses at step t. */
int nb_stash_tau(const nb_stash *s, int step);
/* The weights the forward and backward of step t run on: current (= w_t) when tau is 0, else
 * the stored w_{t - tau}. */
const float *nb_stash_weights(const nb_stash *s, const float *current, int step);
/* The weights of version v when `updates` updates are done: current when v == updates, else
 * the stored w_v (NULL unless updates - tau_max <= v < updates). A pipeline stage addresses its
 * weights this way, since it may run a step's forward before the previous step's update. */
const float *nb_stash_version(const nb_stash *s, const float *current, int version, int updates);
/* Taylor compensation of the gradients of step t in place (nothing when off or tau = 0). */
void nb_stash_taylor(const nb_stash *s, float *grads, const float *current, int step);
/* The squared norm of the correction nb_stash_taylor would add to grads[offset, offset + count) at
 * step t (0 when Taylor is off or tau = 0); call it before nb_stash_taylor. For the metric
 * taylor_ratio = ||correction|| / ||gradient|| (docs/staleness.md); summed in a fixed order. */
double nb_stash_taylor_sq(const nb_stash *s, const float *grads, const float *current, int step, size_t offset,
                          size_t count);
/* Applies step t: d (the optimizer's d_t) becomes the applied step (EF-corrected when EF is on
 * and tau > 0), w_t is kept as a version, then current -= d. The run's metrics of the step (the
 * update's norm, the version distance) are the stage role's, computed apart (src/train/exec/worker.c). */
void nb_stash_apply(nb_stash *s, float *current, float *d, int step);
#endif
