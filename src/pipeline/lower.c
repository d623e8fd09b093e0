/* Lowering: a schedule's per-stage lists (forward, backward, update) turned into per-endpoint lists
 * in which every message a run exchanges is an explicit SEND and RECV, plus the coordinator's list
 * (include/nobubble/pipeline.h gives the order; docs/executor.md the reasons). The executor runs
 * these lists as they are, so what the validator and the simulator see is what runs. */
#include <stdlib.h>
#include <string.h>
#include "nobubble/pipeline.h"
#include "util/error.h"

static const char *const msg_names[NB_MSG_KINDS] = {"ACT",   "GRAD",      "TIED_GRAD", "TIED_W", "NORM",
                                                    "STATS", "EVAL_ACT",  "EVAL_LOSS", "SAVED",  "COMMITTED",
                                                    "END",   "DONE",      "PARAMS"};
static const char *const op_names[NB_LOW_OPS] = {"SEND",   "RECV",   "FORWARD", "BACKWARD", "GRADS",
                                                 "APPLY",  "EVAL",   "SAVE",    "REPORT",   "DECIDE",
                                                 "COMMIT", "FINISH", "BACKWARD_INPUT", "BACKWARD_WEIGHT", "REDUCE"};

const char *nb_msg_kind_name(nb_msg_kind kind) { return (unsigned)kind < NB_MSG_KINDS ? msg_names[kind] : "?"; }
const char *nb_low_op_name(nb_low_op op) { return (unsigned)op < NB_LOW_OPS ? op_names[op] : "?"; }

/* One endpoint's list as it grows. */
typedef struct {
    nb_low_action *a;
    size_t n, cap;
    int failed;
} list;

static void put(list *l, nb_low_action x) {
    if (l->failed) return;
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 64;
        nb_low_action *a = realloc(l->a, sizeof *a * cap);
        if (!a) {
            l->failed = 1;
            return;
        }
        l->a = a;
        l->cap = cap;
    }
    l->a[l->n++] = x;
}

static void compute(list *l, nb_low_op op, int step) { put(l, (nb_low_action){op, 0, -1, -1, step, -1, -1, 0}); }
/* A SEND or RECV; chunk: an ACT's or GRAD's boundary between virtual stages (pipeline.h). */
static void message(list *l, nb_low_op op, nb_msg_kind k, int peer, int index, int step, int chunk) {
    put(l, (nb_low_action){op, k, peer, index, step, -1, -1, chunk});
}
static void send(list *l, nb_msg_kind k, int to, int index, int step) { message(l, NB_LOW_SEND, k, to, index, step, 0); }
static void recv(list *l, nb_msg_kind k, int from, int index, int step) { message(l, NB_LOW_RECV, k, from, index, step, 0); }
/* A forward or backward of a micro-batch on a chunk. */
static void pass(list *l, nb_low_op op, const nb_pipe_action *a) {
    put(l, (nb_low_action){op, 0, -1, -1, a->step, a->mb, a->version, a->chunk});
}

/* What the lowering of one schedule needs at hand. */
typedef struct {
    const nb_pipe_schedule *sc;
    const nb_low_options *o;
    int P, S, coord, lag, tied_split, v;
} lowering;

/* The stage of the virtual stage before (dir -1) or after (dir +1) chunk c of stage s, whose activations
 * it receives or to which it sends them (and the gradients back), with *boundary the chunk upstream of the
 * boundary between them, which the message carries; -1 when there is none (the model's first or last
 * virtual stage) or when it is stage s itself (P = 1: the chunks follow each other in one list, where
 * the schedule's own check keeps their order). Virtual stage k is chunk k / P of stage k % P. */
static int neighbour(const lowering *w, int s, int c, int dir, int *boundary) {
    const int k = c * w->P + s + dir;
    if (k < 0 || k >= w->v * w->P || k % w->P == s) return -1;
    *boundary = dir < 0 ? k / w->P : c;
    return k % w->P;
}

static int evaluates(const lowering *w, int t) { return w->o->eval_batches > 0 && w->o->eval_at && w->o->eval_at[t]; }
static int saves(const lowering *w, int t) {
    return (w->o->save_at && w->o->save_at[t]) || (w->o->save_final && t == w->S - 1);
}
/* Stage s receives END(t - lag) at its update t; the coordinator sends END(t) when some stage will. */
static int ends_sent(const lowering *w, int t) { return t + w->lag <= w->S - 1; }

/* A stage's position as its list is lowered: the updates made and the version of the last stage's
 * copy of the tied embedding. */
typedef struct {
    int s, updates, copy;
} stage_pos;

/* The last stage of a tied split, before it reads its current weights: the first stage's embedding
 * of the same version, unless it already has it. */
static void fresh_copy(const lowering *w, list *l, stage_pos *p) {
    if (!w->tied_split || p->s != w->P - 1 || p->copy == p->updates) return;
    recv(l, NB_MSG_TIED_W, 0, p->updates, -1);
    p->copy = p->updates;
}

static void lower_forward(const lowering *w, list *l, stage_pos *p, const nb_pipe_action *a) {
    int from, to, chunk;
    if (a->version == p->updates) fresh_copy(w, l, p);
    if ((from = neighbour(w, p->s, a->chunk, -1, &chunk)) >= 0)
        message(l, NB_LOW_RECV, NB_MSG_ACT, from, a->mb, a->step, chunk);
    pass(l, NB_LOW_FORWARD, a);
    if ((to = neighbour(w, p->s, a->chunk, +1, &chunk)) >= 0) message(l, NB_LOW_SEND, NB_MSG_ACT, to, a->mb, a->step, chunk);
}

/* A whole backward or a split one's input gradient (B): the gradient from the virtual stage after, the
 * pass, the gradient to the one before. A split one's W takes and sends nothing. */
static void lower_backward(const lowering *w, list *l, const stage_pos *p, const nb_pipe_action *a) {
    int from, to, chunk;
    if ((from = neighbour(w, p->s, a->chunk, +1, &chunk)) >= 0)
        message(l, NB_LOW_RECV, NB_MSG_GRAD, from, a->mb, a->step, chunk);
    pass(l, a->op == NB_PIPE_BACKWARD ? NB_LOW_BACKWARD : NB_LOW_BACKWARD_INPUT, a);
    if ((to = neighbour(w, p->s, a->chunk, -1, &chunk)) >= 0) message(l, NB_LOW_SEND, NB_MSG_GRAD, to, a->mb, a->step, chunk);
}

/* Evaluation after update t: the validation batches forward through the stages on their current
 * weights; the last stage sends the mean loss to the coordinator. */
static void lower_eval(const lowering *w, list *l, stage_pos *p, int t) {
    const int s = p->s;
    fresh_copy(w, l, p);
    for (int b = 0; b < w->o->eval_batches; b++) {
        if (s > 0) recv(l, NB_MSG_EVAL_ACT, s - 1, b, t);
        put(l, (nb_low_action){NB_LOW_EVAL, 0, -1, b, t, -1, -1, 0});
        if (s < w->P - 1) send(l, NB_MSG_EVAL_ACT, s + 1, b, t);
    }
    if (s == w->P - 1) send(l, NB_MSG_EVAL_LOSS, w->coord, t, t);
}

static void lower_update(const lowering *w, list *l, stage_pos *p, int t) {
    const int s = p->s, P = w->P;
    fresh_copy(w, l, p);  /* w_t, with its copy, is kept as a version by the update */
    if (w->o->replicas > 1) compute(l, NB_LOW_REDUCE, t);  /* before the head's part leaves the last stage */
    if (w->tied_split && s == P - 1) send(l, NB_MSG_TIED_GRAD, 0, t, t);
    if (w->tied_split && s == 0) recv(l, NB_MSG_TIED_GRAD, P - 1, t, t);
    compute(l, NB_LOW_GRADS, t);
    /* Every stage sends its norm to every other, then takes theirs in stage order: each sums the same
     * numbers in the same order, so every stage clips by the same norm. */
    for (int i = 0; w->o->clip && i < P; i++)
        if (i != s) send(l, NB_MSG_NORM, i, t, t);
    for (int i = 0; w->o->clip && i < P; i++)
        if (i != s) recv(l, NB_MSG_NORM, i, t, t);
    compute(l, NB_LOW_APPLY, t);
    p->updates++;
    if (w->tied_split && s == 0) send(l, NB_MSG_TIED_W, P - 1, p->updates, t);
    send(l, NB_MSG_STATS, w->coord, t, t);
    if (evaluates(w, t)) lower_eval(w, l, p, t);
    if (t - w->lag >= w->o->from_step) recv(l, NB_MSG_END, w->coord, t - w->lag, t);
    if (!saves(w, t)) return;
    fresh_copy(w, l, p);
    if (w->o->save_whole) {
        send(l, NB_MSG_SAVED, w->coord, t, t);
        recv(l, NB_MSG_COMMITTED, w->coord, t, t);
    } else {
        compute(l, NB_LOW_SAVE, t);
        send(l, NB_MSG_SAVED, w->coord, t, t);
    }
}

static void lower_stage(const lowering *w, list *l, int s) {
    stage_pos p = {s, w->o->from_step, w->o->from_step};
    for (size_t k = w->sc->start[s]; k < w->sc->start[s + 1]; k++) {
        const nb_pipe_action *a = &w->sc->actions[k];
        if (a->step < w->o->from_step) continue;  /* done before the checkpoint the run resumed from */
        if (a->op == NB_PIPE_FORWARD) lower_forward(w, l, &p, a);
        else if (a->op == NB_PIPE_BACKWARD || a->op == NB_PIPE_BACKWARD_INPUT) lower_backward(w, l, &p, a);
        else if (a->op == NB_PIPE_BACKWARD_WEIGHT) pass(l, NB_LOW_BACKWARD_WEIGHT, a);
        else lower_update(w, l, &p, a->step);
    }
    fresh_copy(w, l, &p);  /* the final weights, whole */
    send(l, NB_MSG_DONE, w->coord, 0, -1);
    if (w->o->gather_params && s > 0) send(l, NB_MSG_PARAMS, w->coord, 0, -1);
}

static void lower_coordinator(const lowering *w, list *l) {
    const int P = w->P;
    for (int t = w->o->from_step; t < w->S; t++) {
        for (int i = 0; i < P; i++) recv(l, NB_MSG_STATS, i, t, t);
        if (evaluates(w, t)) recv(l, NB_MSG_EVAL_LOSS, P - 1, t, t);
        compute(l, NB_LOW_REPORT, t);
        if (ends_sent(w, t)) {
            compute(l, NB_LOW_DECIDE, t);
            for (int i = 0; i < P; i++) send(l, NB_MSG_END, i, t, t);
        }
        if (!saves(w, t)) continue;
        for (int i = 0; i < P; i++) recv(l, NB_MSG_SAVED, i, t, t);
        compute(l, NB_LOW_COMMIT, t);
        for (int i = 0; w->o->save_whole && i < P; i++) send(l, NB_MSG_COMMITTED, i, t, t);
    }
    for (int i = 0; i < P; i++) recv(l, NB_MSG_DONE, i, 0, -1);
    for (int i = 1; w->o->gather_params && i < P; i++) recv(l, NB_MSG_PARAMS, i, 0, -1);
    compute(l, NB_LOW_FINISH, -1);
}

/* END's lag: the one-process order finishes every stage's step before the next begins, so a stage can
 * wait for the decision on its own step; a pipeline's stages are up to P steps apart (a stage's update t
 * comes after every stage's update t - P: see docs/executor.md), so waiting for the decision on step
 * t - P - 1 never holds it up. */
static int end_lag(const nb_pipe_schedule *sc) { return sc->kind == NB_PIPE_SEQUENTIAL ? 0 : sc->n_stages + 1; }

int nb_pipe_lower(const nb_pipe_schedule *sc, const nb_low_options *o, nb_low_schedule *out) {
    memset(out, 0, sizeof *out);
    const int P = sc->n_stages;
    if (o->from_step < 0 || o->from_step > sc->n_steps)
        return nb_fail("lowering: resumed at step %d: expected 0 .. %d", o->from_step, sc->n_steps);
    if (o->eval_batches < 0) return nb_fail("lowering: %d validation batches: expected >= 0", o->eval_batches);
    const int v = sc->n_chunks > 0 ? sc->n_chunks : 1;
    lowering w = {sc, o, P, sc->n_steps, P, end_lag(sc), o->tied && P > 1, v};
    /* An evaluation would pass through every virtual stage, chunk after chunk: not lowered yet. */
    for (int t = 0; v > 1 && t < sc->n_steps; t++)
        if (evaluates(&w, t))
            return nb_fail("lowering: evaluation through %d model chunks per stage (%s) is not lowered yet", v,
                           nb_pipe_kind_name(sc->kind));
    list *lists = calloc((size_t)P + 1, sizeof *lists);
    if (!lists) return nb_fail("out of memory lowering a schedule of %d stages", P);
    for (int s = 0; s < P; s++) lower_stage(&w, &lists[s], s);
    lower_coordinator(&w, &lists[P]);
    size_t total = 0;
    int failed = 0;
    for (int e = 0; e <= P; e++) {
        total += lists[e].n;
        failed |= lists[e].failed;
    }
    out->start = malloc(sizeof(size_t) * ((size_t)P + 2));
    out->actions = malloc(sizeof(nb_low_action) * (total ? total : 1));
    if (failed || !out->start || !out->actions) {
        for (int e = 0; e <= P; e++) free(lists[e].a);
        free(lists);
        nb_low_free(out);
        return nb_fail("out of memory lowering a schedule of %d stages (%zu actions)", P, total);
    }
    out->n_stages = P;
    out->n_steps = sc->n_steps;
    out->end_lag = w.lag;
    out->n_chunks = v;
    size_t at = 0;
    for (int e = 0; e <= P; e++) {
        out->start[e] = at;
        if (lists[e].n) memcpy(out->actions + at, lists[e].a, sizeof(nb_low_action) * lists[e].n);
        at += lists[e].n;
        free(lists[e].a);
    }
    out->start[P + 1] = at;
    free(lists);
    return 0;
}

void nb_low_free(nb_low_schedule *l) {
    if (!l) return;
    free(l->start);
    free(l->actions);
    l->start = NULL;
    l->actions = NULL;
}

static int same_action(const nb_low_action *x, const nb_low_action *y) {
    return x->op == y->op && x->msg == y->msg && x->peer == y->peer && x->index == y->index && x->step == y->step &&
           x->mb == y->mb && x->version == y->version && x->chunk == y->chunk;
}

size_t nb_low_common_prefix(const nb_low_schedule *a, const nb_low_schedule *b, int e) {
    const nb_low_action *x = a->actions + a->start[e], *y = b->actions + b->start[e];
    const size_t na = a->start[e + 1] - a->start[e], nbn = b->start[e + 1] - b->start[e];
    size_t n = 0;
    while (n < na && n < nbn && same_action(&x[n], &y[n])) n++;
    return n;
}

size_t nb_low_find(const nb_low_schedule *l, int e, nb_low_op op, nb_msg_kind msg, int step, int index) {
    const int message = op == NB_LOW_SEND || op == NB_LOW_RECV;
    for (size_t k = l->start[e]; k < l->start[e + 1]; k++) {
        const nb_low_action *a = &l->actions[k];
        if (a->op == op && a->step == step && (!message || (a->msg == msg && a->index == index)))
            return k - l->start[e];
    }
    return (size_t)-1;
}
