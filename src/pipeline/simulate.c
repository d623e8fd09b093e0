/* The schedule validator and simulator (docs/schedules.md). There is one model of a pipeline's
 * run: its lowering (lower.c), checked by the lowered validator and timed by the lowered simulator.
 * Here are only what the schedule adds to it:
 *
 * - the checks of the schedule's own meaning, which the lowered check does not see (check_structure):
 *   well-formed actions (the lowering takes any op that is not a forward or backward for an update,
 *   and does not look at a micro-batch's range or step); each micro-batch forwarded and backwarded
 *   exactly once per stage, forward first (a stage's own order has no message that would show it,
 *   and one stage has no messages at all); the version the delay rule gives; the backward on its
 *   forward's version (weight stashing); backwards in micro-batch order and between update t - 1
 *   and update t; updates from step 0, one per step, in order, each after its step's backwards, on
 *   the version the updates made (the lowered check lets updates begin at any step, as a resumed
 *   run's do, and the lowering ignores an update's version). A version used before the updates
 *   made it and deadlock are the lowered check's (nb_low_validate).
 * - the statistics of a simulated schedule: the lowered simulator's times of the schedule's
 *   actions, and from them busy, idle, the bubble, the steady-state window and the peaks. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "nobubble/pipeline.h"
#include "util/error.h"

static const char *op_name(nb_pipe_op op) {
    return op == NB_PIPE_FORWARD ? "forward" : op == NB_PIPE_BACKWARD ? "backward" : op == NB_PIPE_UPDATE ? "update" : "?";
}

static void describe(char *buf, size_t size, const nb_pipe_action *a) {
    if (a->op == NB_PIPE_UPDATE) snprintf(buf, size, "update of step %d", a->step);
    else snprintf(buf, size, "%s mb %d", op_name(a->op), a->mb);
}

#define FAIL_AT(fmt, ...)                                                                               \
    do {                                                                                                \
        char what_[64];                                                                                 \
        describe(what_, sizeof what_, a);                                                               \
        rc = nb_fail("schedule: stage %d action %zu (%s): " fmt, s, k, what_, __VA_ARGS__);             \
        goto done;                                                                                      \
    } while (0)

/* The schedule's own checks (above), stage by stage, in one pass each. */
static int check_structure(const nb_pipe_schedule *sc) {
    if (!sc || !sc->start || !sc->actions) return nb_fail("schedule: empty (not generated)");
    if (sc->n_stages < 1 || sc->n_micro < 1 || sc->n_steps < 1)
        return nb_fail("schedule: P = %d, M = %d, S = %d: expected all >= 1", sc->n_stages, sc->n_micro, sc->n_steps);
    const int N = sc->n_micro * sc->n_steps, M = sc->n_micro;
    int *fwd_ver = malloc(sizeof(int) * (size_t)N);
    unsigned char *state = malloc((size_t)N); /* bit 0: forwarded, bit 1: backwarded */
    int rc = 0;
    if (!fwd_ver || !state) {
        free(fwd_ver);
        free(state);
        return nb_fail("out of memory validating a schedule of %d micro-batches", N);
    }
    for (int s = 0; s < sc->n_stages; s++) {
        memset(state, 0, (size_t)N);
        int updates = 0, n_fwd = 0, n_bwd = 0, last_bwd = -1;
        size_t n = sc->start[s + 1] - sc->start[s], k = 0;
        const nb_pipe_action *a = NULL;
        for (k = 0; k < n; k++) {
            a = &sc->actions[sc->start[s] + k];
            if (a->op == NB_PIPE_UPDATE) {
                if (a->step != updates) FAIL_AT("expected the update of step %d next (updates in step order)", updates);
                if (updates >= sc->n_steps) FAIL_AT("more updates than the %d steps", sc->n_steps);
                if (n_bwd != (updates + 1) * M)
                    FAIL_AT("comes after %d backwards: expected all %d micro-batches of steps 0..%d backwarded first",
                            n_bwd, (updates + 1) * M, updates);
                if (a->version != updates) FAIL_AT("version %d: expected %d, the updates done", a->version, updates);
                updates++;
                continue;
            }
            if (a->op != NB_PIPE_FORWARD && a->op != NB_PIPE_BACKWARD) FAIL_AT("unknown op %d", (int)a->op);
            if (a->mb < 0 || a->mb >= N) FAIL_AT("micro-batch out of range: expected 0..%d", N - 1);
            if (a->step != a->mb / M) FAIL_AT("step %d: micro-batch %d belongs to step %d", a->step, a->mb, a->mb / M);
            int rule = nb_pipe_step_version(sc, s, a->step);
            if (a->op == NB_PIPE_FORWARD) {
                if (state[a->mb] & 1) FAIL_AT("micro-batch %d forwarded twice", a->mb);
                if (a->version != rule)
                    FAIL_AT("version %d: the %s delay rule gives version %d for step %d", a->version,
                            nb_pipe_kind_name(sc->kind), rule, a->step);
                state[a->mb] |= 1;
                fwd_ver[a->mb] = a->version;
                n_fwd++;
            } else {
                if (!(state[a->mb] & 1)) FAIL_AT("backward before its forward on this stage%s", "");
                if (state[a->mb] & 2) FAIL_AT("micro-batch %d backwarded twice", a->mb);
                if (a->version != fwd_ver[a->mb])
                    FAIL_AT("version mismatch: the forward used version %d, the backward version %d (weight stashing)",
                            fwd_ver[a->mb], a->version);
                if (a->mb < last_bwd)
                    FAIL_AT("backwards out of order: after mb %d (gradients accumulate in micro-batch order)", last_bwd);
                if (updates != a->step)
                    FAIL_AT("backward of step %d after %d updates: expected exactly %d (between update %d and %d)",
                            a->step, updates, a->step, a->step - 1, a->step);
                state[a->mb] |= 2;
                last_bwd = a->mb;
                n_bwd++;
            }
        }
        a = NULL;
        if (n_fwd != N || n_bwd != N) {
            int j = 0;
            while (j < N && state[j] == 3) j++;
            rc = nb_fail("schedule: stage %d: micro-batch %d is never %s (%d forwards and %d backwards of %d)", s, j,
                         (state[j] & 1) ? "backwarded" : "forwarded", n_fwd, n_bwd, N);
            goto done;
        }
        if (updates != sc->n_steps) {
            rc = nb_fail("schedule: stage %d: %d updates, expected one per step (%d)", s, updates, sc->n_steps);
            goto done;
        }
    }
done:
    free(fwd_ver);
    free(state);
    return rc;
}

int nb_pipe_validate(const nb_pipe_schedule *sc) {
    if (check_structure(sc)) return -1;
    nb_low_schedule l;
    const nb_low_options plain = {0};
    if (nb_pipe_lower(sc, &plain, &l)) return -1;
    int rc = nb_low_validate(&l);
    nb_low_free(&l);
    return rc;
}

/* The times of the schedule's actions: stage s's FORWARD, BACKWARD and APPLY in its lowered list are
 * its schedule actions, in order (GRADS, sends and receives sit between them). */
static void copy_times(const nb_pipe_schedule *sc, const nb_low_schedule *l, const nb_low_sim *sim, double *t_start,
                       double *t_finish) {
    for (int s = 0; s < sc->n_stages; s++) {
        size_t k = sc->start[s];
        for (size_t g = l->start[s]; g < l->start[s + 1]; g++) {
            const nb_low_op op = l->actions[g].op;
            if (op != NB_LOW_FORWARD && op != NB_LOW_BACKWARD && op != NB_LOW_APPLY) continue;
            t_start[k] = sim->t_start[g];
            t_finish[k++] = sim->t_finish[g];
        }
    }
}

/* The schedule run as its lowering (no tied embedding, clipping, evaluation or saving) with the
 * schedule's costs: ACT and GRAD take comm from send to receive, every other message and the
 * coordinator take no time, so a forward at s > 0 starts once the forward at s - 1 has finished plus
 * comm and its stage is free, a backward likewise from s + 1, an update when its stage is free.
 * The lowering's own messages (STATS, END, DONE) never hold a stage up (docs/schedules.md). */
static int lowered_times(const nb_pipe_schedule *sc, const nb_pipe_costs *c, double *t_start, double *t_finish) {
    nb_low_schedule l;
    const nb_low_options plain = {0};
    if (nb_pipe_lower(sc, &plain, &l)) return -1;
    nb_low_costs lc = {0};
    lc.forward = c->forward;
    lc.backward = c->backward;
    lc.update = c->update;
    lc.latency = c->comm;
    nb_low_sim sim;
    int rc = nb_low_simulate(&l, &lc, &sim);
    if (!rc) copy_times(sc, &l, &sim, t_start, t_finish);
    nb_low_sim_free(&sim);
    nb_low_free(&l);
    return rc;
}

void nb_pipe_sim_free(nb_pipe_sim *sim) {
    if (!sim) return;
    free(sim->busy); free(sim->idle); free(sim->peak_activations); free(sim->peak_versions);
    free(sim->t_start); free(sim->t_finish);
    memset(sim, 0, sizeof *sim);
}

/* Peak weight versions held by stage s: after each action, the current version plus every older
 * version some later action (an in-flight backward or a future forward) still uses. */
static int peak_versions(const nb_pipe_schedule *sc, int s, int *last_use, int *superseded, int *diff) {
    const nb_pipe_action *acts = sc->actions + sc->start[s];
    const int n = (int)(sc->start[s + 1] - sc->start[s]), V = sc->n_steps + 1;
    for (int v = 0; v < V; v++) last_use[v] = -1, superseded[v] = n;
    for (int k = 0; k <= n; k++) diff[k] = 0;
    for (int k = 0; k < n; k++) {
        if (acts[k].op == NB_PIPE_UPDATE) superseded[acts[k].version] = k;
        else if (k > last_use[acts[k].version]) last_use[acts[k].version] = k;
    }
    /* version v is held beyond the current one after actions superseded[v] .. last_use[v] - 1 */
    for (int v = 0; v < V; v++)
        if (last_use[v] > superseded[v]) {
            diff[superseded[v]]++;
            diff[last_use[v]]--;
        }
    int peak = 1, extra = 0;
    for (int k = 0; k < n; k++) {
        extra += diff[k];
        if (1 + extra > peak) peak = 1 + extra;
    }
    return peak;
}

int nb_pipe_simulate(const nb_pipe_schedule *sc, const nb_pipe_costs *c, nb_pipe_sim *out) {
    memset(out, 0, sizeof *out);
    if (check_structure(sc)) return -1;
    const int P = sc->n_stages;
    for (int s = 0; s < P; s++) {
        if (!(c->forward[s] > 0) || !isfinite(c->forward[s]))
            return nb_fail("forward cost of stage %d = %g: expected a number > 0", s, c->forward[s]);
        if (!(c->backward[s] > 0) || !isfinite(c->backward[s]))
            return nb_fail("backward cost of stage %d = %g: expected a number > 0", s, c->backward[s]);
        if (!(c->update[s] >= 0) || !isfinite(c->update[s]))
            return nb_fail("update cost of stage %d = %g: expected a number >= 0", s, c->update[s]);
    }
    if (!(c->comm >= 0) || !isfinite(c->comm)) return nb_fail("comm cost = %g: expected a number >= 0", c->comm);
    const size_t n = nb_pipe_n_actions(sc);
    out->n_stages = P;
    out->busy = calloc((size_t)P, sizeof(double));
    out->idle = calloc((size_t)P, sizeof(double));
    out->peak_activations = calloc((size_t)P, sizeof(int));
    out->peak_versions = calloc((size_t)P, sizeof(int));
    out->t_start = malloc(sizeof(double) * (n ? n : 1));
    out->t_finish = malloc(sizeof(double) * (n ? n : 1));
    size_t max_local = 0;
    for (int s = 0; s < P; s++)
        if (sc->start[s + 1] - sc->start[s] > max_local) max_local = sc->start[s + 1] - sc->start[s];
    int *last_use = malloc(sizeof(int) * ((size_t)sc->n_steps + 1)), *sup = malloc(sizeof(int) * ((size_t)sc->n_steps + 1));
    int *diff = malloc(sizeof(int) * (max_local + 1));
    int rc = 0;
    if (!out->busy || !out->idle || !out->peak_activations || !out->peak_versions || !out->t_start || !out->t_finish ||
        !last_use || !sup || !diff) {
        rc = nb_fail("out of memory simulating a schedule of %zu actions", n);
        goto done;
    }
    if ((rc = lowered_times(sc, c, out->t_start, out->t_finish))) goto done;
    double makespan = 0.0;
    for (size_t i = 0; i < n; i++)
        if (out->t_finish[i] > makespan) makespan = out->t_finish[i];
    out->makespan = makespan;
    const int h = sc->n_steps / 2;
    out->steady_from_step = h;
    double idle_total = 0.0, steady_idle = 0.0, steady_time = 0.0;
    for (int s = 0; s < P; s++) {
        const nb_pipe_action *acts = sc->actions + sc->start[s];
        const double *ts = out->t_start + sc->start[s], *tf = out->t_finish + sc->start[s];
        const size_t ns = sc->start[s + 1] - sc->start[s];
        double busy = 0.0, busy_w = 0.0, t_w = makespan;
        int inflight = 0, peak = 0, in_window = 0;
        for (size_t k = 0; k < ns; k++) {
            double d = tf[k] - ts[k];
            busy += d;
            if (!in_window && acts[k].step >= h) { in_window = 1; t_w = ts[k]; }
            if (in_window) busy_w += d;
            if (acts[k].op == NB_PIPE_FORWARD && ++inflight > peak) peak = inflight;
            if (acts[k].op == NB_PIPE_BACKWARD) inflight--;
        }
        out->busy[s] = busy;
        out->idle[s] = makespan - busy;
        idle_total += makespan - busy;
        steady_idle += (makespan - t_w) - busy_w;
        steady_time += makespan - t_w;
        out->peak_activations[s] = peak;
        out->peak_versions[s] = peak_versions(sc, s, last_use, sup, diff);
    }
    out->bubble_fraction = makespan > 0 ? idle_total / ((double)P * makespan) : 0.0;
    out->steady_idle_fraction = steady_time > 0 ? steady_idle / steady_time : 0.0;
done:
    free(last_use); free(sup); free(diff);
    if (rc) nb_pipe_sim_free(out);
    return rc;
}
