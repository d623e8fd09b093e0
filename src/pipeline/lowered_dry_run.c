/* A dry run of lowered lists (no stage computes, no message moves; the executor is src/train/exec/):
 * a worklist of endpoints, each advanced until its list ends or it reaches a RECV whose SEND has not
 * run; a SEND wakes its receiver if that receiver waits for it. Every action is run once and every
 * wake-up is O(1), so the run is O(actions). Shared by the validator (order only) and the simulator
 * (with times). */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "nobubble/pipeline.h"
#include "pipeline/lowered_dry_run.h"
#include "util/error.h"

#define NOT_WAITING SIZE_MAX
/* A deadlock message names at most this many blocked receives (the error text is 1 KiB). */
#define REPORT_MAX 6

typedef struct {
    const nb_low_schedule *l;
    const size_t *partner;
    const nb_low_costs *c;        /* NULL: order only */
    double *t_start, *t_finish;
    size_t *next;                 /* per endpoint: its actions run so far */
    size_t *waiting;              /* per endpoint: the RECV it is blocked on, or NOT_WAITING */
    double *free_at;              /* per endpoint: when its last action finished */
    double *wire_free;            /* per endpoint: when its link has sent the bytes queued on it */
    double *arrive;               /* per SEND with a cost model: when its message is at its receiver */
    int *queue, head, count;      /* endpoints to advance (a ring of P + 1) */
    unsigned char *queued;
} run_state;

static int n_endpoints(const run_state *r) { return r->l->n_stages + 1; }
static size_t list_length(const nb_low_schedule *l, int e) { return l->start[e + 1] - l->start[e]; }

static void push(run_state *r, int e) {
    if (r->queued[e]) return;
    r->queue[(r->head + r->count) % n_endpoints(r)] = e;
    r->count++;
    r->queued[e] = 1;
}

static int pop(run_state *r) {
    int e = r->queue[r->head];
    r->head = (r->head + 1) % n_endpoints(r);
    r->count--;
    r->queued[e] = 0;
    return e;
}

static double per_stage(const double *costs, int e) { return costs ? costs[e] : 0.0; }

/* How long action a of endpoint e keeps its endpoint busy. */
static double duration(const nb_low_costs *c, const nb_low_action *a, int e) {
    switch (a->op) {
    case NB_LOW_FORWARD: return per_stage(c->forward, e);
    case NB_LOW_BACKWARD: return per_stage(c->backward, e);
    case NB_LOW_BACKWARD_INPUT: return per_stage(c->backward_input, e);
    case NB_LOW_BACKWARD_WEIGHT: return per_stage(c->backward_weight, e);
    case NB_LOW_APPLY: return per_stage(c->update, e);
    case NB_LOW_EVAL: return per_stage(c->eval, e);
    case NB_LOW_SAVE: return c->save;
    case NB_LOW_REDUCE: return per_stage(c->reduce, e);
    case NB_LOW_RECV: case NB_LOW_GRADS: return 0.0;
    default: return c->action;  /* SEND and the coordinator's actions */
    }
}

/* When the message of SEND g (endpoint e's, just timed) arrives: its bytes leave on e's link once the
 * send has finished and the link has sent what was queued on it before (one link per endpoint, shared by
 * all its messages: a stage's activations to the next stage and gradients to the one before queue on
 * the same wire), then the latency (the coordinator's own, or the stages'). */
static void time_message(run_state *r, int e, size_t g) {
    const nb_low_costs *c = r->c;
    const nb_low_action *a = &r->l->actions[g];
    const double wire = c->bytes_per_second > 0 ? c->bytes[a->msg] / c->bytes_per_second : 0.0;
    const int P = r->l->n_stages, via_coordinator = e == P || a->peer == P;
    double left = r->t_finish[g];
    if (wire > 0) {
        if (r->wire_free[e] > left) left = r->wire_free[e];
        left += wire;
        r->wire_free[e] = left;
    }
    r->arrive[g] = left + (via_coordinator ? c->coordinator_latency : c->latency);
}

static void time_action(run_state *r, int e, size_t g, size_t send) {
    const nb_low_action *a = &r->l->actions[g];
    double t0 = r->free_at[e];
    if (a->op == NB_LOW_RECV) {
        if (r->arrive[send] > t0) t0 = r->arrive[send];
    }
    r->t_start[g] = t0;
    r->t_finish[g] = r->free_at[e] = t0 + duration(r->c, a, e);
    if (a->op == NB_LOW_SEND) time_message(r, e, g);
}

/* Runs endpoint e's actions until its list ends or a RECV's SEND has not run yet. */
static void advance(run_state *r, int e) {
    const nb_low_schedule *l = r->l;
    while (r->next[e] < list_length(l, e)) {
        const size_t g = l->start[e] + r->next[e];
        const nb_low_action *a = &l->actions[g];
        const size_t other = lowered_is_message(a->op) ? r->partner[g] : NOT_WAITING;
        if (a->op == NB_LOW_RECV && other >= l->start[a->peer] + r->next[a->peer]) {
            r->waiting[e] = g;
            return;
        }
        if (r->c) time_action(r, e, g, other);
        r->next[e]++;
        if (a->op == NB_LOW_SEND && r->waiting[a->peer] == other) {
            r->waiting[a->peer] = NOT_WAITING;
            push(r, a->peer);
        }
    }
}

/* Appends to a message being built, never past its end. */
static void append(char *buf, size_t size, size_t *len, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static void append(char *buf, size_t size, size_t *len, const char *fmt, ...) {
    if (*len >= size) return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf + *len, size - *len, fmt, ap);
    va_end(ap);
    if (n > 0) *len += (size_t)n;
}

/* The cycle of waits found by following, from the first stuck endpoint, whom each one waits for. */
static void describe_cycle(const run_state *r, int first, char *msg, size_t size, size_t *len) {
    const nb_low_schedule *l = r->l;
    unsigned char *seen = calloc((size_t)n_endpoints(r), 1);
    char who[32];
    if (!seen) return;
    int e = first;
    while (!seen[e] && r->waiting[e] != NOT_WAITING) {
        seen[e] = 1;
        e = l->actions[r->waiting[e]].peer;
    }
    if (seen[e]) {  /* e is on the cycle: walk it once */
        append(msg, size, len, " a cycle of waits: %s", nb_low_endpoint_text(e, l->n_stages, who, sizeof who));
        int hops = 0, x = e;
        do {
            x = l->actions[r->waiting[x]].peer;
            append(msg, size, len, " -> %s", hops++ < 2 * REPORT_MAX ? nb_low_endpoint_text(x, l->n_stages, who, sizeof who) : "...");
        } while (x != e && hops <= 2 * REPORT_MAX);
        append(msg, size, len, ";");
    }
    free(seen);
}

static int report_deadlock(const run_state *r) {
    const nb_low_schedule *l = r->l;
    char msg[1024], who[32], what[96], sender[32];
    size_t len = 0;
    int stuck = 0, first = -1;
    for (int e = 0; e < n_endpoints(r); e++)
        if (r->next[e] < list_length(l, e) && !stuck++) first = e;
    if (!stuck) return 0;
    append(msg, sizeof msg, &len, "lowered: deadlock (%d endpoint%s stuck):", stuck, stuck > 1 ? "s" : "");
    describe_cycle(r, first, msg, sizeof msg, &len);
    int listed = 0;
    for (int e = 0; e < n_endpoints(r) && listed < REPORT_MAX; e++) {
        if (r->next[e] >= list_length(l, e)) continue;
        const size_t g = r->waiting[e], send = r->partner[g];
        const nb_low_action *a = &l->actions[g];
        append(msg, sizeof msg, &len, "%s %s action %zu (%s) waits for %s action %zu", listed++ ? ";" : "",
               nb_low_endpoint_text(e, l->n_stages, who, sizeof who), g - l->start[e],
               nb_low_action_text(a, l->n_stages, what, sizeof what),
               nb_low_endpoint_text(a->peer, l->n_stages, sender, sizeof sender), send - l->start[a->peer]);
    }
    if (stuck > listed) append(msg, sizeof msg, &len, "; and %d more stuck", stuck - listed);
    return nb_fail("%s", msg);
}

static void free_state(run_state *r) {
    free(r->next);
    free(r->waiting);
    free(r->free_at);
    free(r->wire_free);
    free(r->arrive);
    free(r->queue);
    free(r->queued);
}

int lowered_dry_run(const nb_low_schedule *l, const size_t *partner, const nb_low_costs *costs, double *t_start,
                double *t_finish) {
    const size_t E = (size_t)l->n_stages + 1;
    const size_t total = l->start[l->n_stages + 1];
    run_state r = {l, partner, costs, t_start, t_finish, calloc(E, sizeof(size_t)), malloc(E * sizeof(size_t)),
                   calloc(E, sizeof(double)), calloc(E, sizeof(double)),
                   costs ? malloc(sizeof(double) * (total ? total : 1)) : NULL, malloc(E * sizeof(int)), 0, 0,
                   calloc(E, 1)};
    if (!r.next || !r.waiting || !r.free_at || !r.wire_free || (costs && !r.arrive) || !r.queue || !r.queued) {
        free_state(&r);
        return nb_fail("out of memory running a lowered schedule of %zu endpoints", E);
    }
    for (size_t e = 0; e < E; e++) {
        r.waiting[e] = NOT_WAITING;
        push(&r, (int)e);
    }
    while (r.count) advance(&r, pop(&r));
    int rc = report_deadlock(&r);
    free_state(&r);
    return rc;
}
