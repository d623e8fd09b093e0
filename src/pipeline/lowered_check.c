/* The lowered lists' validator (nb_low_validate): every action well formed, every SEND paired with
 * exactly one RECV and the reverse, and the lists run to their ends when sends never wait (the run
 * itself is lowered_dry_run.c's). docs/schedules.md, "The lowered form". */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "nobubble/pipeline.h"
#include "pipeline/lowered_dry_run.h"
#include "util/error.h"

/* Records "lowered: ENDPOINT action K (ACTION): PROBLEM" and returns -1. k is the index in e's list. */
static int fail_at(const nb_low_schedule *l, int e, size_t k, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static int fail_at(const nb_low_schedule *l, int e, size_t k, const char *fmt, ...) {
    char problem[512], who[32], what[96];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(problem, sizeof problem, fmt, ap);
    va_end(ap);
    return nb_fail("lowered: %s action %zu (%s): %s", nb_low_endpoint_text(e, l->n_stages, who, sizeof who), k,
                   nb_low_action_text(&l->actions[l->start[e] + k], l->n_stages, what, sizeof what), problem);
}

static int n_chunks(const nb_low_schedule *l) { return l->n_chunks > 0 ? l->n_chunks : 1; }

/* Whether an ACT from stage `up` to `down` may carry the boundary after chunk c (pipeline.h): to the next
 * stage from any chunk, or with chunks from the last stage's chunk c to stage 0's c + 1. GRAD the reverse. */
static int boundary_ok(int up, int down, int c, int P, int v) {
    if (up >= P || down >= P || c < 0 || c >= v) return 0;
    return down == up + 1 || (P > 1 && up == P - 1 && down == 0 && c < v - 1);
}

/* The direction each message kind travels (pipeline.h's nb_msg_kind): what a lowering may emit. Only ACT
 * and GRAD carry a chunk. */
static int direction_ok(nb_msg_kind kind, int from, int to, int chunk, int P, int v) {
    const int coordinator = P, from_stage = from < P, to_stage = to < P;
    if (chunk != 0 && kind != NB_MSG_ACT && kind != NB_MSG_GRAD) return 0;
    switch (kind) {
    case NB_MSG_ACT: return boundary_ok(from, to, chunk, P, v);
    case NB_MSG_GRAD: return boundary_ok(to, from, chunk, P, v);
    case NB_MSG_EVAL_ACT: return from_stage && to == from + 1 && to_stage;
    case NB_MSG_TIED_GRAD: return from == P - 1 && to == 0;
    case NB_MSG_TIED_W: return from == 0 && to == P - 1;
    case NB_MSG_NORM: return from_stage && to_stage;
    case NB_MSG_STATS: case NB_MSG_SAVED: case NB_MSG_DONE: return from_stage && to == coordinator;
    case NB_MSG_EVAL_LOSS: return from == P - 1 && to == coordinator;
    case NB_MSG_PARAMS: return from >= 1 && from_stage && to == coordinator;
    case NB_MSG_COMMITTED: case NB_MSG_END: return from == coordinator && to_stage;
    default: return 0;
    }
}

static const char *const direction_rule[NB_MSG_KINDS] = {
    "stage s to stage s+1 (with chunks, also chunk c < v-1 of the last stage to stage 0)",
    "stage s+1 to stage s (with chunks, also stage 0 to chunk c < v-1 of the last stage)", "the last stage to stage 0", "stage 0 to the last stage",
    "a stage to another stage", "a stage to the coordinator", "stage s to stage s+1", "the last stage to the coordinator",
    "a stage to the coordinator", "the coordinator to a stage", "the coordinator to a stage",
    "a stage to the coordinator", "stages 1 .. P-1 to the coordinator"};

static int check_message(const nb_low_schedule *l, int e, size_t k, const nb_low_action *a) {
    const int P = l->n_stages;
    if ((unsigned)a->msg >= NB_MSG_KINDS) return fail_at(l, e, k, "unknown message kind %d", (int)a->msg);
    if (a->peer < 0 || a->peer > P)
        return fail_at(l, e, k, "peer %d out of range: expected 0 .. %d (%d is the coordinator)", a->peer, P, P);
    if (a->peer == e) return fail_at(l, e, k, "a message to or from its own endpoint");
    if (a->index < 0) return fail_at(l, e, k, "message index %d: expected >= 0", a->index);
    if (a->step < -1 || a->step >= l->n_steps)
        return fail_at(l, e, k, "step %d: expected -1 .. %d", a->step, l->n_steps - 1);
    const int from = a->op == NB_LOW_SEND ? e : a->peer, to = a->op == NB_LOW_SEND ? a->peer : e;
    if (a->chunk < 0 || a->chunk >= n_chunks(l))
        return fail_at(l, e, k, "chunk %d: expected 0 .. %d", a->chunk, n_chunks(l) - 1);
    if (!direction_ok(a->msg, from, to, a->chunk, P, n_chunks(l)))
        return fail_at(l, e, k, "%s goes from %s, not %d to %d%s", nb_msg_kind_name(a->msg), direction_rule[a->msg], from,
                       to, a->chunk ? " with a chunk" : "");
    return 0;
}

static int is_coordinator_op(nb_low_op op) {
    return op == NB_LOW_REPORT || op == NB_LOW_DECIDE || op == NB_LOW_COMMIT || op == NB_LOW_FINISH;
}

/* A forward, a whole backward or either half of a split one: a micro-batch's pass on a version and chunk. */
static int is_pass(nb_low_op op) {
    return op == NB_LOW_FORWARD || op == NB_LOW_BACKWARD || op == NB_LOW_BACKWARD_INPUT || op == NB_LOW_BACKWARD_WEIGHT;
}

static int check_compute(const nb_low_schedule *l, int e, size_t k, const nb_low_action *a) {
    const int P = l->n_stages;
    if (is_coordinator_op(a->op) != (e == P))
        return fail_at(l, e, k, "%s runs on %s only", nb_low_op_name(a->op), e == P ? "a stage" : "the coordinator");
    if (a->op == NB_LOW_FINISH) return 0;
    if (a->step < 0 || a->step >= l->n_steps)
        return fail_at(l, e, k, "step %d: expected 0 .. %d", a->step, l->n_steps - 1);
    if (is_pass(a->op)) {
        if (a->mb < 0) return fail_at(l, e, k, "micro-batch %d: expected >= 0", a->mb);
        if (a->version < 0 || a->version > a->step)
            return fail_at(l, e, k, "version %d: expected 0 .. %d (the step)", a->version, a->step);
    }
    if (a->chunk != 0 && (!is_pass(a->op) || a->chunk < 0 || a->chunk >= n_chunks(l)))
        return fail_at(l, e, k, "chunk %d: expected %s", a->chunk, is_pass(a->op) ? "0 .. v-1" : "0 (not a pass)");
    if (a->op == NB_LOW_EVAL && a->index < 0) return fail_at(l, e, k, "validation batch %d: expected >= 0", a->index);
    return 0;
}

/* A stage's updates and versions: APPLY in step order from its first one (the step a resumed run starts
 * at), each after its GRADS, and no pass (forward, backward, B, W) on a version its updates have not made yet. */
static int check_versions(const nb_low_schedule *l, int e) {
    const nb_low_action *a = l->actions + l->start[e];
    const size_t n = l->start[e + 1] - l->start[e];
    int version = -1, grads = -1;  /* the weights' version once known (the first APPLY's step); the last GRADS */
    for (size_t k = 0; k < n && version < 0; k++)
        if (a[k].op == NB_LOW_APPLY) version = a[k].step;
    for (size_t k = 0; k < n; k++) {
        if (a[k].op == NB_LOW_GRADS) grads = a[k].step;
        if (is_pass(a[k].op) && version >= 0 && a[k].version > version)
            return fail_at(l, e, k, "version %d used with only version %d made (a version from the future)", a[k].version,
                           version);
        if (a[k].op != NB_LOW_APPLY) continue;
        if (a[k].step != version) return fail_at(l, e, k, "expected APPLY(%d) next (updates in step order)", version);
        if (grads != version) return fail_at(l, e, k, "no GRADS(%d) since the previous update", version);
        version++;
    }
    return 0;
}

int lowered_check_fields(const nb_low_schedule *l) {
    if (!l || !l->start || !l->actions) return nb_fail("lowered: empty (not lowered)");
    if (l->n_stages < 1 || l->n_steps < 0)
        return nb_fail("lowered: P = %d, S = %d: expected P >= 1 and S >= 0", l->n_stages, l->n_steps);
    if (l->start[0] != 0) return nb_fail("lowered: the first list starts at %zu, not 0", l->start[0]);
    for (int e = 0; e <= l->n_stages; e++) {
        if (l->start[e + 1] < l->start[e]) return nb_fail("lowered: endpoint %d's list ends before it starts", e);
        for (size_t k = 0; k < l->start[e + 1] - l->start[e]; k++) {
            const nb_low_action *a = &l->actions[l->start[e] + k];
            if ((unsigned)a->op >= NB_LOW_OPS) return fail_at(l, e, k, "unknown op %d", (int)a->op);
            if (lowered_is_message(a->op) ? check_message(l, e, k, a) : check_compute(l, e, k, a)) return -1;
        }
        if (e < l->n_stages && check_versions(l, e)) return -1;
    }
    return 0;
}

/* One end of a message, with its sort key packed in two words, compared hi first: sender, receiver,
 * chunk, kind, index, SEND before RECV (the fields check made every part >= 0: peers in 0 .. P, index >= 0,
 * a known kind, a chunk below v). The sort brings a message's SENDs, then its RECVs, together, each in
 * list order. */
typedef struct {
    uint64_t hi, lo;  /* hi: from << 32 | to; lo: chunk << 37 | kind << 33 | index << 1 | is_recv */
    size_t at;        /* global action index */
} message_end;

static message_end make_end(int from, int to, int chunk, int kind, int index, int is_recv, size_t at) {
    return (message_end){(uint64_t)(unsigned)from << 32 | (unsigned)to,
                         (uint64_t)(unsigned)chunk << 37 | (uint64_t)(unsigned)kind << 33 |
                             (uint64_t)(unsigned)index << 1 | (unsigned)is_recv,
                         at};
}
static int end_from(const message_end *x) { return (int)(x->hi >> 32); }
static int end_to(const message_end *x) { return (int)(x->hi & 0xffffffffu); }
static int end_chunk(const message_end *x) { return (int)(x->lo >> 37); }
static int end_kind(const message_end *x) { return (int)((x->lo >> 33) & 15u); }
static int end_index(const message_end *x) { return (int)((x->lo >> 1) & 0xffffffffu); }
static int end_is_recv(const message_end *x) { return (int)(x->lo & 1); }
/* The same message (sender, receiver, kind, index), either end. */
static int same_message(const message_end *x, const message_end *y) { return x->hi == y->hi && x->lo >> 1 == y->lo >> 1; }

#define DIGITS 16  /* bytes of the two key words, least significant first */
static unsigned digit(const message_end *x, int d) { return (unsigned)((d < 8 ? x->lo : x->hi) >> (8 * (d % 8))) & 255u; }

/* Sorts the ends by key, stably (a least-significant-digit radix sort), so that the ends of one message
 * stay in list order, the order collect_ends gives them. O(n) where a comparison sort of the millions of
 * messages of a long run was the validator's and the simulator's largest cost. -1 when out of memory. */
static int sort_ends(message_end *ends, size_t n) {
    size_t(*count)[256] = calloc(DIGITS, sizeof *count);
    message_end *tmp = malloc(sizeof *tmp * (n ? n : 1)), *from = ends, *to = tmp;
    if (!count || !tmp) {
        free(count);
        free(tmp);
        return -1;
    }
    for (size_t i = 0; i < n; i++)
        for (int d = 0; d < DIGITS; d++) count[d][digit(&ends[i], d)]++;
    for (int d = 0; d < DIGITS; d++) {
        if (n == 0 || count[d][digit(&from[0], d)] == n) continue;  /* one value: the pass would change nothing */
        size_t at = 0;
        for (int v = 0; v < 256; v++) {
            const size_t c = count[d][v];
            count[d][v] = at;
            at += c;
        }
        for (size_t i = 0; i < n; i++) to[count[d][digit(&from[i], d)]++] = from[i];
        message_end *t = from;
        from = to;
        to = t;
    }
    if (from != ends) memcpy(ends, from, sizeof *ends * n);
    free(count);
    free(tmp);
    return 0;
}

static int endpoint_of(const nb_low_schedule *l, size_t g) {
    int lo = 0, hi = l->n_stages;  /* the last e with start[e] <= g */
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (l->start[mid] <= g) lo = mid;
        else hi = mid - 1;
    }
    return lo;
}

static message_end *collect_ends(const nb_low_schedule *l, size_t *n_out) {
    size_t n = 0, total = l->start[l->n_stages + 1];
    for (size_t g = 0; g < total; g++) n += lowered_is_message(l->actions[g].op);
    message_end *ends = malloc(sizeof *ends * (n ? n : 1));
    if (!ends) return NULL;
    n = 0;
    for (int e = 0; e <= l->n_stages; e++)
        for (size_t g = l->start[e]; g < l->start[e + 1]; g++) {
            const nb_low_action *a = &l->actions[g];
            if (!lowered_is_message(a->op)) continue;
            const int recv = a->op == NB_LOW_RECV;
            ends[n++] = make_end(recv ? a->peer : e, recv ? e : a->peer, a->chunk, (int)a->msg, a->index, recv, g);
        }
    *n_out = n;
    return ends;
}

static int report_unmatched(const nb_low_schedule *l, const message_end *x, size_t sends, size_t recvs) {
    char other[32], from[32], to[32], chunk[24] = "";
    const int e = endpoint_of(l, x->at), P = l->n_stages;
    if (end_chunk(x)) snprintf(chunk, sizeof chunk, ", chunk %d", end_chunk(x));
    return fail_at(l, e, x->at - l->start[e], "no matching %s in %s's list (%zu SEND and %zu RECV of %s(%d%s) from %s to %s)",
                   end_is_recv(x) ? "SEND" : "RECV",
                   nb_low_endpoint_text(end_is_recv(x) ? end_from(x) : end_to(x), P, other, sizeof other), sends, recvs,
                   nb_msg_kind_name((nb_msg_kind)end_kind(x)), end_index(x), chunk,
                   nb_low_endpoint_text(end_from(x), P, from, sizeof from), nb_low_endpoint_text(end_to(x), P, to, sizeof to));
}

/* Pairs one message's ends [g0, g1): the k-th SEND with the k-th RECV. Returns the first end left
 * unmatched, or NULL. */
static const message_end *pair_group(const message_end *g0, const message_end *g1, size_t *partner, size_t *sends,
                                     size_t *recvs) {
    const message_end *r = g0;
    while (r < g1 && !end_is_recv(r)) r++;
    *sends = (size_t)(r - g0);
    *recvs = (size_t)(g1 - r);
    const size_t n = *sends < *recvs ? *sends : *recvs;
    for (size_t i = 0; i < n; i++) {
        partner[g0[i].at] = r[i].at;
        partner[r[i].at] = g0[i].at;
    }
    if (*sends == *recvs) return NULL;
    return *sends > *recvs ? g0 + n : r + n;
}

int lowered_pair(const nb_low_schedule *l, size_t *partner) {
    size_t n;
    message_end *ends = collect_ends(l, &n);
    if (!ends || sort_ends(ends, n)) {
        free(ends);
        return nb_fail("out of memory pairing the messages of a lowered schedule");
    }
    const message_end *worst = NULL;  /* the unmatched end earliest in the lists, so the report is stable */
    size_t worst_sends = 0, worst_recvs = 0;
    for (size_t i = 0, j; i < n; i = j) {
        for (j = i + 1; j < n && same_message(&ends[j], &ends[i]);) j++;
        size_t sends, recvs;
        const message_end *u = pair_group(ends + i, ends + j, partner, &sends, &recvs);
        if (u && (!worst || u->at < worst->at)) worst = u, worst_sends = sends, worst_recvs = recvs;
    }
    int rc = worst ? report_unmatched(l, worst, worst_sends, worst_recvs) : 0;
    free(ends);
    return rc;
}

int lowered_prepare(const nb_low_schedule *l, size_t **partner) {
    *partner = NULL;
    if (lowered_check_fields(l)) return -1;
    const size_t total = l->start[l->n_stages + 1];
    size_t *p = malloc(sizeof *p * (total ? total : 1));
    if (!p) return nb_fail("out of memory validating a lowered schedule of %zu actions", total);
    if (lowered_pair(l, p)) {
        free(p);
        return -1;
    }
    *partner = p;
    return 0;
}

int nb_low_validate(const nb_low_schedule *l) {
    size_t *partner;
    if (lowered_prepare(l, &partner)) return -1;
    int rc = lowered_dry_run(l, partner, NULL, NULL, NULL);
    free(partner);
    return rc;
}
