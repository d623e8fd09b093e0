/* The schedule validator and simulator (docs/schedules.md). There is one model of a pipeline's
 * run: its lowering (lower.c), checked by the lowered validator and timed by the lowered simulator.
 * Here are only what the schedule adds to it:
 *
 * - the checks of the schedule's own meaning, which the lowered check does not see (check_structure):
 *   well-formed actions (the lowering takes any op that is not a forward or backward for an update,
 *   and does not look at a micro-batch's range, step or chunk); each micro-batch forwarded and
 *   backwarded exactly once per stage and chunk, forward first, a split backward's W after its B (a
 *   stage's own order has no message that would show it, and one stage has no messages at all); the
 *   chunks of one micro-batch in order on a stage (forwards up, backwards down: with P = 1 they
 *   exchange no message either); the version the delay rule gives; the backward on its forward's
 *   version (weight stashing); weight gradients (backward, W) in micro-batch order per chunk, and
 *   every backward between update t - 1 and update t; updates from step 0, one per step, in order,
 *   each after its step's weight gradients, on the version the updates made (the lowered check lets
 *   updates begin at any step, as a resumed run's do, and the lowering ignores an update's version).
 *   A version used before the updates made it and deadlock (which also keeps a B after the B of the
 *   virtual stage downstream on another stage) are the lowered check's (nb_low_validate).
 * - the statistics of a simulated schedule: the lowered simulator's times of the schedule's
 *   actions, and from them busy, idle, the bubble, the steady-state window and the peaks. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "nobubble/pipeline.h"
#include "util/error.h"

static const char *op_name(nb_pipe_op op) {
    switch (op) {
    case NB_PIPE_FORWARD: return "forward";
    case NB_PIPE_BACKWARD: return "backward";
    case NB_PIPE_UPDATE: return "update";
    case NB_PIPE_BACKWARD_INPUT: return "input gradient";
    case NB_PIPE_BACKWARD_WEIGHT: return "weight gradient";
    }
    return "?";
}

/* "forward mb 3", with the chunk where a stage has several ("forward mb 3 chunk 1"). */
static void describe(char *buf, size_t size, const nb_pipe_action *a, int v) {
    if (a->op == NB_PIPE_UPDATE) snprintf(buf, size, "update of step %d", a->step);
    else if (v > 1 || a->chunk) snprintf(buf, size, "%s mb %d chunk %d", op_name(a->op), a->mb, a->chunk);
    else snprintf(buf, size, "%s mb %d", op_name(a->op), a->mb);
}

#define FAIL_AT(fmt, ...)                                                                               \
    do {                                                                                                \
        char what_[80];                                                                                 \
        describe(what_, sizeof what_, a, v);                                                            \
        rc = nb_fail("schedule: stage %d action %zu (%s): " fmt, s, k, what_, __VA_ARGS__);             \
        goto done;                                                                                      \
    } while (0)

/* What a stage has done with one (micro-batch, chunk): forwarded, its input gradient (a whole backward or
 * B), its weight gradient (a whole backward or W). */
enum { DONE_F = 1, DONE_B = 2, DONE_W = 4, DONE_ALL = 7 };

/* The schedule's own checks (above), stage by stage, in one pass each. A (micro-batch j, chunk c) is unit
 * j v + c. */
static int check_structure(const nb_pipe_schedule *sc) {
    if (!sc || !sc->start || !sc->actions) return nb_fail("schedule: empty (not generated)");
    if (sc->n_stages < 1 || sc->n_micro < 1 || sc->n_steps < 1 || sc->n_chunks < 1)
        return nb_fail("schedule: P = %d, M = %d, S = %d, v = %d: expected all >= 1", sc->n_stages, sc->n_micro,
                       sc->n_steps, sc->n_chunks);
    const int N = sc->n_micro * sc->n_steps, M = sc->n_micro, v = sc->n_chunks;
    const size_t units = (size_t)N * (size_t)v;
    int *fwd_ver = malloc(sizeof(int) * units), *last_w = malloc(sizeof(int) * (size_t)v);
    unsigned char *state = malloc(units);
    int rc = 0;
    if (!fwd_ver || !state || !last_w) {
        free(fwd_ver);
        free(state);
        free(last_w);
        return nb_fail("out of memory validating a schedule of %d micro-batches", N);
    }
    for (int s = 0; s < sc->n_stages; s++) {
        memset(state, 0, units);
        for (int c = 0; c < v; c++) last_w[c] = -1;
        long long n_fwd = 0, n_b = 0, n_w = 0;  /* units forwarded, input gradients, weight gradients */
        int updates = 0;
        size_t n = sc->start[s + 1] - sc->start[s], k = 0;
        const nb_pipe_action *a = NULL;
        for (k = 0; k < n; k++) {
            a = &sc->actions[sc->start[s] + k];
            if (a->op == NB_PIPE_UPDATE) {
                if (a->step != updates) FAIL_AT("expected the update of step %d next (updates in step order)", updates);
                if (updates >= sc->n_steps) FAIL_AT("more updates than the %d steps", sc->n_steps);
                if (n_w != (long long)(updates + 1) * M * v)
                    FAIL_AT("comes after %lld backwards: expected all %lld micro-batches%s of steps 0..%d backwarded first%s",
                            n_w, (long long)(updates + 1) * M * v, v > 1 ? " x chunks" : "", updates,
                            n_b > n_w ? " (a W is missing)" : "");
                if (a->version != updates) FAIL_AT("version %d: expected %d, the updates done", a->version, updates);
                if (a->chunk != 0) FAIL_AT("chunk %d: an update is the whole stage's (chunk 0)", a->chunk);
                updates++;
                continue;
            }
            if (a->op != NB_PIPE_FORWARD && a->op != NB_PIPE_BACKWARD && a->op != NB_PIPE_BACKWARD_INPUT &&
                a->op != NB_PIPE_BACKWARD_WEIGHT)
                FAIL_AT("unknown op %d", (int)a->op);
            if (a->mb < 0 || a->mb >= N) FAIL_AT("micro-batch out of range: expected 0..%d", N - 1);
            if (a->step != a->mb / M) FAIL_AT("step %d: micro-batch %d belongs to step %d", a->step, a->mb, a->mb / M);
            if (a->chunk < 0 || a->chunk >= v) FAIL_AT("chunk %d out of range: expected 0..%d", a->chunk, v - 1);
            const size_t u = (size_t)a->mb * v + a->chunk;
            const int rule = nb_pipe_step_version(sc, s, a->step);
            if (a->op == NB_PIPE_FORWARD) {
                if (state[u] & DONE_F) FAIL_AT("micro-batch %d forwarded twice", a->mb);
                if (a->version != rule)
                    FAIL_AT("version %d: the %s delay rule gives version %d for step %d", a->version,
                            nb_pipe_kind_name(sc->kind), rule, a->step);
                if (a->chunk > 0 && !(state[u - 1] & DONE_F))
                    FAIL_AT("forward before the forward of chunk %d (the virtual stage before it) on this stage",
                            a->chunk - 1);
                state[u] |= DONE_F;
                fwd_ver[u] = a->version;
                n_fwd++;
                continue;
            }
            const int weight = a->op != NB_PIPE_BACKWARD_INPUT;  /* whole or W: the gradient accumulates */
            if (a->op == NB_PIPE_BACKWARD_WEIGHT) {
                if (state[u] & DONE_W) FAIL_AT("micro-batch %d's weight gradient twice", a->mb);
                if (!(state[u] & DONE_B)) FAIL_AT("weight gradient before its input gradient (B) on this stage%s", "");
            } else {
                if (!(state[u] & DONE_F)) FAIL_AT("backward before its forward on this stage%s", "");
                if (state[u] & DONE_B) FAIL_AT("micro-batch %d backwarded twice", a->mb);
                if (a->chunk < v - 1 && !(state[u + 1] & DONE_B))
                    FAIL_AT("backward before the backward of chunk %d (the virtual stage after it) on this stage",
                            a->chunk + 1);
            }
            if (a->version != fwd_ver[u])
                FAIL_AT("version mismatch: the forward used version %d, the backward version %d (weight stashing)",
                        fwd_ver[u], a->version);
            if (updates != a->step)
                FAIL_AT("backward of step %d after %d updates: expected exactly %d (between update %d and %d)",
                        a->step, updates, a->step, a->step - 1, a->step);
            if (weight && a->mb < last_w[a->chunk])
                FAIL_AT("%s out of order: after mb %d (gradients accumulate in micro-batch order)",
                        a->op == NB_PIPE_BACKWARD ? "backwards" : "weight gradients", last_w[a->chunk]);
            if (a->op != NB_PIPE_BACKWARD_WEIGHT) state[u] |= DONE_B, n_b++;
            if (weight) state[u] |= DONE_W, n_w++, last_w[a->chunk] = a->mb;
        }
        a = NULL;
        if (n_fwd != (long long)units || n_b != (long long)units || n_w != (long long)units) {
            size_t u = 0;
            while (u < units && state[u] == DONE_ALL) u++;
            char chunk[24] = "";
            if (v > 1) snprintf(chunk, sizeof chunk, " chunk %d", (int)(u % v));
            rc = nb_fail("schedule: stage %d: micro-batch %d%s is never %s (%lld forwards, %lld backwards and %lld weight "
                         "gradients of %zu)", s, (int)(u / v), chunk,
                         !(state[u] & DONE_F) ? "forwarded" : !(state[u] & DONE_B) ? "backwarded" : "given its weight gradient (W)",
                         n_fwd, n_b, n_w, units);
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
    free(last_w);
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

/* The times of the schedule's actions: stage s's FORWARD, BACKWARD, BACKWARD_INPUT, BACKWARD_WEIGHT and
 * APPLY in its lowered list are its schedule actions, in order (GRADS, sends and receives sit between them). */
static void copy_times(const nb_pipe_schedule *sc, const nb_low_schedule *l, const nb_low_sim *sim, double *t_start,
                       double *t_finish) {
    for (int s = 0; s < sc->n_stages; s++) {
        size_t k = sc->start[s];
        for (size_t g = l->start[s]; g < l->start[s + 1]; g++) {
            const nb_low_op op = l->actions[g].op;
            if (op != NB_LOW_FORWARD && op != NB_LOW_BACKWARD && op != NB_LOW_BACKWARD_INPUT &&
                op != NB_LOW_BACKWARD_WEIGHT && op != NB_LOW_APPLY)
                continue;
            t_start[k] = sim->t_start[g];
            t_finish[k++] = sim->t_finish[g];
        }
    }
}

static int check_cost(const char *name, int s, double v, int zero_ok) {
    if ((zero_ok ? v >= 0 : v > 0) && isfinite(v)) return 0;
    return nb_fail("%s cost of stage %d = %g: expected a number %s", name, s, v, zero_ok ? ">= 0" : "> 0");
}

int nb_pipe_action_costs(const nb_pipe_schedule *sc, const nb_pipe_costs *c, double *buf, nb_low_costs *out) {
    const int P = sc->n_stages, v = sc->n_chunks > 0 ? sc->n_chunks : 1;
    memset(out, 0, sizeof *out);
    for (int s = 0; s < P; s++) {
        if (check_cost("forward", s, c->forward[s], 0) || check_cost("backward", s, c->backward[s], 0) ||
            check_cost("update", s, c->update[s], 1))
            return -1;
        const double w = c->backward_weight ? c->backward_weight[s] : c->backward[s] / 2;
        if (!(w > 0 && w < c->backward[s]) || !isfinite(w))
            return nb_fail("backward weight cost of stage %d = %g: expected a number > 0 and below the backward's %g "
                           "(the input gradient is the rest)", s, w, c->backward[s]);
        buf[s] = c->forward[s] / v;
        buf[P + s] = c->backward[s] / v;
        buf[2 * P + s] = (c->backward[s] - w) / v;
        buf[3 * P + s] = w / v;
    }
    if (!(c->comm >= 0) || !isfinite(c->comm)) return nb_fail("comm cost = %g: expected a number >= 0", c->comm);
    out->forward = buf;
    out->backward = buf + P;
    out->backward_input = buf + 2 * P;
    out->backward_weight = buf + 3 * P;
    out->update = c->update;
    out->latency = c->comm;
    return 0;
}

/* The schedule run as its lowering (no tied embedding, clipping, evaluation or saving) with the
 * schedule's costs (each chunk's the stage's / v): ACT and GRAD take comm from send to receive, every
 * other message and the coordinator take no time, so a forward at s > 0 starts once the forward at
 * s - 1 has finished plus comm and its stage is free, a backward or B likewise from s + 1 (with chunks,
 * between virtual stages), a W or an update when its stage is free. The lowering's own messages (STATS,
 * END, DONE) never hold a stage up (docs/schedules.md). */
static int lowered_times(const nb_pipe_schedule *sc, const nb_low_costs *lc, double *t_start, double *t_finish) {
    nb_low_schedule l;
    const nb_low_options plain = {0};
    if (nb_pipe_lower(sc, &plain, &l)) return -1;
    nb_low_sim sim;
    int rc = nb_low_simulate(&l, lc, &sim);
    if (!rc) copy_times(sc, &l, &sim, t_start, t_finish);
    nb_low_sim_free(&sim);
    nb_low_free(&l);
    return rc;
}

void nb_pipe_sim_free(nb_pipe_sim *sim) {
    if (!sim) return;
    free(sim->busy); free(sim->idle); free(sim->peak_activations); free(sim->peak_activation_mbs); free(sim->peak_versions);
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
    nb_low_costs lc;
    double *per_action = malloc(sizeof(double) * 4 * (size_t)P);
    if (!per_action) return nb_fail("out of memory simulating a schedule of %d stages", P);
    if (nb_pipe_action_costs(sc, c, per_action, &lc)) {
        free(per_action);
        return -1;
    }
    const size_t n = nb_pipe_n_actions(sc);
    out->n_stages = P;
    out->busy = calloc((size_t)P, sizeof(double));
    out->idle = calloc((size_t)P, sizeof(double));
    out->peak_activations = calloc((size_t)P, sizeof(int));
    out->peak_activation_mbs = calloc((size_t)P, sizeof(double));
    out->peak_versions = calloc((size_t)P, sizeof(int));
    out->t_start = malloc(sizeof(double) * (n ? n : 1));
    out->t_finish = malloc(sizeof(double) * (n ? n : 1));
    size_t max_local = 0;
    for (int s = 0; s < P; s++)
        if (sc->start[s + 1] - sc->start[s] > max_local) max_local = sc->start[s + 1] - sc->start[s];
    int *last_use = malloc(sizeof(int) * ((size_t)sc->n_steps + 1)), *sup = malloc(sizeof(int) * ((size_t)sc->n_steps + 1));
    int *diff = malloc(sizeof(int) * (max_local + 1));
    int rc = 0;
    if (!out->busy || !out->idle || !out->peak_activations || !out->peak_activation_mbs || !out->peak_versions ||
        !out->t_start || !out->t_finish || !last_use || !sup || !diff) {
        rc = nb_fail("out of memory simulating a schedule of %zu actions", n);
        goto done;
    }
    if ((rc = lowered_times(sc, &lc, out->t_start, out->t_finish))) goto done;
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
            /* activations are held from the forward to the last pass that reads them: a W reads them again */
            if (acts[k].op == NB_PIPE_FORWARD && ++inflight > peak) peak = inflight;
            if (acts[k].op == NB_PIPE_BACKWARD || acts[k].op == NB_PIPE_BACKWARD_WEIGHT) inflight--;
        }
        out->busy[s] = busy;
        out->idle[s] = makespan - busy;
        idle_total += makespan - busy;
        steady_idle += (makespan - t_w) - busy_w;
        steady_time += makespan - t_w;
        out->peak_activations[s] = peak;
        out->peak_activation_mbs[s] = (double)peak / sc->n_chunks;  /* a chunk holds 1/v of the stage's layers */
        out->peak_versions[s] = peak_versions(sc, s, last_use, sup, diff);
    }
    out->bubble_fraction = makespan > 0 ? idle_total / ((double)P * makespan) : 0.0;
    out->steady_idle_fraction = steady_time > 0 ? steady_idle / steady_time : 0.0;
done:
    free(last_use); free(sup); free(diff); free(per_action);
    if (rc) nb_pipe_sim_free(out);
    return rc;
}
