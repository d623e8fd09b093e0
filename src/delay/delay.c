/* Delay modes, weight versions and mitigations (docs/rules.md, sections 3 and 4). */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "nobubble/delay.h"
#include "delay/ops.h"
#include "util/alloc.h"
#include "util/error.h"
#include "util/range.h"

/* Indexed by nb_delay_mode: --delay's names (fixed takes its TAU: fixed:TAU), summary.json's delay.mode. */
static const char *const mode_names[] = {"sync", "2bw", "pipedream", "fixed"};
#define N_MODES (int)(sizeof mode_names / sizeof mode_names[0])

const nb_range nb_delay_ranges[] = {
    {"--ef", offsetof(nb_delay_options, ef_alpha), 0, 0, NB_RANGE_HUGE, 0, 0},
    {"--taylor", offsetof(nb_delay_options, taylor), 0, 0, NB_RANGE_HUGE, 0, 0},
    {NULL, 0, 0, 0, 0, 0, 0},
};

const char *nb_delay_mode_name(nb_delay_mode mode) {
    return (unsigned)mode < N_MODES ? mode_names[mode] : "unknown";
}

void nb_delay_modes_text(const char *sep, const char *last_sep, char *buf, size_t size) {
    size_t at = 0;
    if (size) buf[0] = 0;
    for (int k = 0; k < N_MODES && at < size; k++) {
        const char *before = k == 0 ? "" : k == N_MODES - 1 ? last_sep : sep;
        int n = snprintf(buf + at, size - at, "%s%s%s", before, mode_names[k], k == NB_DELAY_FIXED ? ":TAU" : "");
        if (n < 0) break;
        at += (size_t)n;
    }
}

int nb_delay_parse(const char *text, nb_delay_options *o) {
    for (int k = 0; k < N_MODES; k++)
        if (k != NB_DELAY_FIXED && !strcmp(text, mode_names[k])) {
            o->mode = (nb_delay_mode)k;
            return 0;
        }
    if (!strncmp(text, "fixed:", 6)) {
        char *end;
        errno = 0;
        long tau = strtol(text + 6, &end, 10);
        if (errno || end == text + 6 || *end || tau < 0 || tau > 1000000)
            return nb_fail("--delay %s: expected fixed:TAU with an integer TAU from 0 to 1000000", text);
        o->mode = NB_DELAY_FIXED;
        o->tau = (int)tau;
    } else {
        char modes[96];
        nb_delay_modes_text(", ", " or ", modes, sizeof modes);
        return nb_fail("--delay '%s': expected %s", text, modes);
    }
    return 0;
}

/* The mode one of the modes, and a fixed TAU within what --delay parses. */
static int check_mode(const nb_delay_options *o) {
    if ((int)o->mode < 0 || (int)o->mode >= N_MODES) {
        char modes[96];
        nb_delay_modes_text(", ", " or ", modes, sizeof modes);
        return nb_fail("--delay: mode %d is not a delay (expected %s)", (int)o->mode, modes);
    }
    if (o->mode == NB_DELAY_FIXED && o->tau < 0) return nb_fail("--delay fixed:%d: expected TAU >= 0", o->tau);
    if (o->mode == NB_DELAY_FIXED && o->tau > 1000000) return nb_fail("--delay fixed:%d: expected TAU <= 1000000", o->tau);
    return 0;
}

int nb_delay_validate(const nb_delay_options *o, int total_steps, int n_stages) {
    if (check_mode(o)) return -1;
    const nb_range *ef = nb_range_at(nb_delay_ranges, offsetof(nb_delay_options, ef_alpha));
    if (o->ef && nb_range_check(ef, o)) return -1;
    if (nb_range_check(nb_range_at(nb_delay_ranges, offsetof(nb_delay_options, taylor)), o)) return -1;
    if (o->sync_start < 0 || o->sync_start > total_steps)
        return nb_fail("--sync-start %d: expected 0 <= K <= the run's %d steps", o->sync_start, total_steps);
    if (o->sync_cooldown < 0 || o->sync_cooldown > total_steps)
        return nb_fail("--sync-cooldown %d: expected 0 <= K <= the run's %d steps", o->sync_cooldown, total_steps);
    if (n_stages < 1) return nb_fail("stages = %d: expected >= 1", n_stages);
    return 0;
}

void nb_delay_describe(const nb_delay_options *o, char *buf, size_t size) {
    int n = o->mode == NB_DELAY_FIXED ? snprintf(buf, size, "delay fixed:%d", o->tau)
                                      : snprintf(buf, size, "delay %s", nb_delay_mode_name(o->mode));
    if (o->ef && n >= 0 && (size_t)n < size) n += snprintf(buf + n, size - n, ", error feedback alpha %g", o->ef_alpha);
    if (o->taylor > 0 && n >= 0 && (size_t)n < size) n += snprintf(buf + n, size - n, ", taylor lambda %g", o->taylor);
    if (o->sync_start && n >= 0 && (size_t)n < size) n += snprintf(buf + n, size - n, ", sync start %d", o->sync_start);
    if (o->sync_cooldown && n >= 0 && (size_t)n < size) snprintf(buf + n, size - n, ", sync cooldown %d", o->sync_cooldown);
}

int nb_delay_tau_max(const nb_delay_options *o, int stage, int n_stages) {
    switch (o->mode) {
    case NB_DELAY_2BW: return 1;
    case NB_DELAY_PIPEDREAM: return n_stages - 1 - stage;
    case NB_DELAY_FIXED: return o->tau;
    case NB_DELAY_SYNC: default: return 0;
    }
}

int nb_delay_tau(const nb_delay_options *o, int stage, int n_stages, int step, int total_steps) {
    if (step < o->sync_start || step >= total_steps - o->sync_cooldown) return 0;
    return nb_delay_tau_max(o, stage, n_stages);
}

struct nb_stash {
    nb_delay_options o;
    int stage, n_stages, total_steps, tau_max;
    size_t n;
    const nb_backend *be;  /* a device's backend whose memory holds versions and d_prev (nb_stash_create_on); NULL: the host's */
    float *versions;  /* tau_max copies: w_v lives in slot v mod tau_max */
    float *d_prev;    /* EF: the previous step's d (NULL without EF) */
    int ef_running;   /* EF was applied at the previous step */
};

/* n floats of the stash's memory: the host's, or its device backend's. */
static float *stash_alloc(const nb_stash *s, size_t n, const char *what) {
    return s->be ? nb_backend_alloc(s->be, sizeof(float) * n, what) : nb_calloc(n, sizeof(float), what);
}

static void stash_release(const nb_stash *s, float *p) {
    if (s->be) nb_backend_free(s->be, p);
    else free(p);
}

int nb_stash_create(nb_stash **out, const nb_delay_options *o, int stage, int n_stages, int total_steps,
                    const float *w0, size_t n) {
    return nb_stash_create_on(out, o, stage, n_stages, total_steps, w0, n, NULL);
}

int nb_stash_create_on(nb_stash **out, const nb_delay_options *o, int stage, int n_stages, int total_steps,
                       const float *w0, size_t n, const nb_backend *be) {
    *out = NULL;
    /* what nb_delay_tau_max reads: a bad stage, stage count or mode would give a negative or absurd ring,
     * which nb_stash_weights would then index */
    if (n_stages < 1 || stage < 0 || stage >= n_stages)
        return nb_fail("stash: stage %d of %d stages: expected 0 <= stage < stages", stage, n_stages);
    if (check_mode(o)) return -1;
    if (n && !w0 && nb_delay_tau_max(o, stage, n_stages) > 0) return nb_fail("stash: no initial weights (w0 is NULL)");
    if (be && !be->device_memory) be = NULL;  /* the host's memory: the host's passes */
    if (be && !nb_delay_of(be)) return nb_fail("delay on the %s backend's memory: the backend has no update pass", be->name);
    nb_stash *s = nb_calloc(1, sizeof *s, "a stash of weight versions");
    if (!s) return -1;
    s->be = be;
    s->o = *o;
    s->stage = stage;
    s->n_stages = n_stages;
    s->total_steps = total_steps;
    s->tau_max = nb_delay_tau_max(o, stage, n_stages);
    s->n = n;
    if (s->tau_max > 0) {
        char what[64];
        snprintf(what, sizeof what, "%d stashed weight versions", s->tau_max);
        if (!(s->versions = stash_alloc(s, n * (size_t)s->tau_max, what))) {
            nb_stash_free(s);
            return -1;
        }
        for (int k = 0; k < s->tau_max; k++) {
            if (be) nb_backend_copy(be, s->versions + (size_t)k * n, w0, sizeof(float) * n);
            else memcpy(s->versions + (size_t)k * n, w0, sizeof(float) * n);
        }
        if (o->ef && !(s->d_prev = stash_alloc(s, n, "the error-feedback buffer"))) {
            nb_stash_free(s);
            return -1;
        }
    }
    *out = s;
    return 0;
}

void nb_stash_free(nb_stash *s) {
    if (!s) return;
    stash_release(s, s->versions);
    stash_release(s, s->d_prev);
    free(s);
}

size_t nb_stash_bytes_for(const nb_delay_options *o, int stage, int n_stages, size_t n) {
    const int tau_max = nb_delay_tau_max(o, stage, n_stages);
    return sizeof(float) * n * ((size_t)tau_max + (o->ef && tau_max > 0 ? 1 : 0));
}

size_t nb_stash_bytes(const nb_stash *s) { return nb_stash_bytes_for(&s->o, s->stage, s->n_stages, s->n); }

float *nb_stash_versions(nb_stash *s, size_t *count) {
    *count = s->versions ? s->n * (size_t)s->tau_max : 0;
    return s->versions;
}

float *nb_stash_ef_buffer(nb_stash *s, size_t *count) {
    *count = s->d_prev ? s->n : 0;
    return s->d_prev;
}

int nb_stash_ef_running(const nb_stash *s) { return s->ef_running; }
void nb_stash_set_ef_running(nb_stash *s, int running) { s->ef_running = running; }

int nb_stash_tau(const nb_stash *s, int step) {
    return nb_delay_tau(&s->o, s->stage, s->n_stages, step, s->total_steps);
}

/* w_{t - tau} for 1 <= tau <= tau_max: the slot of version t - tau (negative versions are w_0,
 * which every slot holds until it is first overwritten). */
static const float *version(const nb_stash *s, int step, int tau) {
    int v = step - tau, slot = ((v % s->tau_max) + s->tau_max) % s->tau_max;
    return s->versions + (size_t)slot * s->n;
}

const float *nb_stash_weights(const nb_stash *s, const float *current, int step) {
    int tau = nb_stash_tau(s, step);
    return tau == 0 ? current : version(s, step, tau);
}

const float *nb_stash_version(const nb_stash *s, const float *current, int v, int updates) {
    if (v == updates) return current;
    if (v > updates || v < updates - s->tau_max || v < 0) return NULL;
    return s->versions + (size_t)(v % s->tau_max) * s->n;
}

void nb_stash_taylor(const nb_stash *s, float *grads, const float *current, int step) {
    int tau = nb_stash_tau(s, step);
    if (tau == 0 || !(s->o.taylor > 0)) return;
    const float lambda = s->o.taylor, *old = version(s, step, tau);
    if (s->be) nb_delay_of(s->be)->taylor(s->be, grads, current, old, lambda, s->n);
    else nb_delay_taylor_host(grads, current, old, lambda, s->n);
}

double nb_stash_taylor_sq(const nb_stash *s, const float *grads, const float *current, int step, size_t offset,
                          size_t count) {
    int tau = nb_stash_tau(s, step);
    if (tau == 0 || !(s->o.taylor > 0) || offset > s->n || count > s->n - offset) return 0.0;
    const float lambda = s->o.taylor, *old = version(s, step, tau) + offset;
    if (s->be) return nb_delay_of(s->be)->taylor_sq(s->be, grads + offset, current + offset, old, lambda, count);
    return nb_delay_taylor_sq_host(grads + offset, current + offset, old, lambda, count);
}

void nb_stash_apply(nb_stash *s, float *current, float *d, int step) {
    const size_t n = s->n;
    const int tau = nb_stash_tau(s, step);
    /* EF: d_{t-1} := d_t on the first step that uses it (after a synchronous phase too). */
    const int ef_now = s->d_prev && tau > 0, ef_first = ef_now && !s->ef_running;
    /* Keep w_t in the slot of version t - tau_max, which no step after this one needs. */
    float *keep = s->tau_max > 0 ? s->versions + (size_t)(step % s->tau_max) * n : NULL;
    s->ef_running = ef_now;
    const nb_apply_kind kind = ef_now ? NB_APPLY_EF : keep ? NB_APPLY_KEEP : NB_APPLY_ONLY;
    if (s->be) nb_delay_of(s->be)->apply(s->be, kind, keep, current, d, s->d_prev, s->o.ef_alpha, ef_first, n);
    else nb_delay_apply_host(kind, keep, current, d, s->d_prev, s->o.ef_alpha, ef_first, n);
}
