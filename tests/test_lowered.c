/* Lowered lists (include/nobubble/pipeline.h, "Lowering"): the validator catches every broken message
 * (dropped, duplicated, from itself, out of range, a deadlock) in hand-made lists, and the simulator
 * costs the messages. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "check.h"
#include "nobubble/pipeline.h"

/* Hand-made lists: up to 8 endpoints of up to 256 actions, turned into an nb_low_schedule. */
#define HAND_ENDPOINTS 8
#define HAND_ACTIONS 256
typedef struct {
    int P, steps;  /* steps: 0 for 1 */
    size_t n[HAND_ENDPOINTS];
    nb_low_action a[HAND_ENDPOINTS][HAND_ACTIONS];
} hand;

static void put(hand *h, int e, nb_low_action x) {
    if (h->n[e] < HAND_ACTIONS) h->a[e][h->n[e]++] = x;
}
static void compute(hand *h, int e, nb_low_op op, int step) { put(h, e, (nb_low_action){op, 0, -1, -1, step, -1, -1, 0}); }
static void pass(hand *h, int e, nb_low_op op, int mb) { put(h, e, (nb_low_action){op, 0, -1, -1, 0, mb, 0, 0}); }
static void send(hand *h, int e, nb_msg_kind k, int to, int index) {
    put(h, e, (nb_low_action){NB_LOW_SEND, k, to, index, index < 0 ? -1 : 0, -1, -1, 0});
}
static void recv(hand *h, int e, nb_msg_kind k, int from, int index) {
    put(h, e, (nb_low_action){NB_LOW_RECV, k, from, index, 0, -1, -1, 0});
}

/* GPipe of one step as a lowering would write it: P stages, M micro-batches, and the coordinator. */
static void hand_gpipe(hand *h, int P, int M) {
    memset(h, 0, sizeof *h);
    h->P = P;
    for (int s = 0; s < P; s++) {
        for (int j = 0; j < M; j++) {
            if (s > 0) recv(h, s, NB_MSG_ACT, s - 1, j);
            pass(h, s, NB_LOW_FORWARD, j);
            if (s < P - 1) send(h, s, NB_MSG_ACT, s + 1, j);
        }
        for (int j = 0; j < M; j++) {
            if (s < P - 1) recv(h, s, NB_MSG_GRAD, s + 1, j);
            pass(h, s, NB_LOW_BACKWARD, j);
            if (s > 0) send(h, s, NB_MSG_GRAD, s - 1, j);
        }
        compute(h, s, NB_LOW_GRADS, 0);
        compute(h, s, NB_LOW_APPLY, 0);
        send(h, s, NB_MSG_STATS, P, 0);
        send(h, s, NB_MSG_DONE, P, 0);
    }
    for (int s = 0; s < P; s++) recv(h, P, NB_MSG_STATS, s, 0);
    compute(h, P, NB_LOW_REPORT, 0);
    for (int s = 0; s < P; s++) recv(h, P, NB_MSG_DONE, s, 0);
    compute(h, P, NB_LOW_FINISH, -1);
}

static void to_lists(const hand *h, nb_low_schedule *l) {
    size_t total = 0;
    for (int e = 0; e <= h->P; e++) total += h->n[e];
    l->n_stages = h->P;
    l->n_steps = h->steps ? h->steps : 1;
    l->end_lag = 0;
    l->start = malloc(sizeof(size_t) * ((size_t)h->P + 2));
    l->actions = malloc(sizeof(nb_low_action) * (total ? total : 1));
    size_t at = 0;
    for (int e = 0; e <= h->P; e++) {
        l->start[e] = at;
        memcpy(l->actions + at, h->a[e], sizeof(nb_low_action) * h->n[e]);
        at += h->n[e];
    }
    l->start[h->P + 1] = at;
}

static void free_lists(nb_low_schedule *l) {
    free(l->start);
    free(l->actions);
    l->start = NULL;
    l->actions = NULL;
}

/* The validator's message on a hand-made list, or "" when it passes (a static copy). */
static const char *verdict_of(const hand *h) {
    static char msg[1024];
    nb_low_schedule l;
    to_lists(h, &l);
    snprintf(msg, sizeof msg, "%s", nb_low_validate(&l) ? nb_last_error() : "");
    free_lists(&l);
    return msg;
}

static void remove_at(hand *h, int e, size_t k) {
    memmove(&h->a[e][k], &h->a[e][k + 1], sizeof(nb_low_action) * (h->n[e] - k - 1));
    h->n[e]--;
}

static void insert_at(hand *h, int e, size_t k, nb_low_action x) {
    memmove(&h->a[e][k + 1], &h->a[e][k], sizeof(nb_low_action) * (h->n[e] - k));
    h->a[e][k] = x;
    h->n[e]++;
}

/* The index in endpoint e's hand-made list of the first SEND/RECV of this kind and index. */
static size_t find(const hand *h, int e, nb_low_op op, nb_msg_kind k, int index) {
    for (size_t i = 0; i < h->n[e]; i++)
        if (h->a[e][i].op == op && h->a[e][i].msg == k && h->a[e][i].index == index) return i;
    return (size_t)-1;
}

/* One stage of two steps running `acts`, and a coordinator that only finishes. Returns h. */
static const hand *one_stage(hand *h, const nb_low_action *acts, int n) {
    memset(h, 0, sizeof *h);
    h->P = 1;
    h->steps = 2;
    for (int i = 0; i < n; i++) put(h, 0, acts[i]);
    compute(h, 1, NB_LOW_FINISH, -1);
    return h;
}

static void expect_error(const hand *h, const char *what, const char *const *parts) {
    const char *msg = verdict_of(h);
    int ok = *msg != 0;
    for (int i = 0; parts[i] && ok; i++) ok = strstr(msg, parts[i]) != NULL;
    CHECK(ok, "%s: the validator's message should name %s ...; got '%s'", what, parts[0], msg);
}

static void test_valid_passes(void) {
    hand h;
    for (int P = 1; P <= 4; P++)
        for (int M = 1; M <= 3; M++) {
            hand_gpipe(&h, P, M);
            const char *msg = verdict_of(&h);
            CHECK(!*msg, "hand-made GPipe P=%d M=%d validates: %s", P, M, msg);
        }
}

static void test_dropped_send(void) {
    hand h;
    hand_gpipe(&h, 2, 2);
    const size_t k = find(&h, 1, NB_LOW_SEND, NB_MSG_GRAD, 1), r = find(&h, 0, NB_LOW_RECV, NB_MSG_GRAD, 1);
    remove_at(&h, 1, k);
    char where[64];
    snprintf(where, sizeof where, "stage 0 action %zu (RECV GRAD(1) <- stage 1)", r);
    const char *parts[] = {where, "no matching SEND in stage 1's list", NULL};
    expect_error(&h, "a dropped SEND GRAD(1)", parts);
    /* a dropped SEND to the coordinator: its RECV is named */
    hand_gpipe(&h, 3, 1);
    remove_at(&h, 2, find(&h, 2, NB_LOW_SEND, NB_MSG_STATS, 0));
    const char *coord[] = {"coordinator action 2 (RECV STATS(0) <- stage 2)", "no matching SEND", NULL};
    expect_error(&h, "a dropped SEND STATS(0)", coord);
}

static void test_dropped_recv(void) {
    hand h;
    hand_gpipe(&h, 2, 1);
    remove_at(&h, 1, find(&h, 1, NB_LOW_RECV, NB_MSG_ACT, 0));
    const char *parts[] = {"stage 0 action 1 (SEND ACT(0) -> stage 1)", "no matching RECV in stage 1's list", NULL};
    expect_error(&h, "a dropped RECV ACT(0)", parts);
}

static void test_swapped_receives_deadlock(void) {
    hand h;
    hand_gpipe(&h, 3, 1);  /* stage 1: RECV ACT(0), FORWARD, SEND ACT(0), RECV GRAD(0), BACKWARD, SEND GRAD(0) */
    const size_t a = find(&h, 1, NB_LOW_RECV, NB_MSG_ACT, 0), g = find(&h, 1, NB_LOW_RECV, NB_MSG_GRAD, 0);
    nb_low_action x = h.a[1][a];
    h.a[1][a] = h.a[1][g];
    h.a[1][g] = x;
    char blocked[96];
    snprintf(blocked, sizeof blocked, "stage 1 action %zu (RECV GRAD(0) <- stage 2) waits for stage 2", a);
    const char *parts[] = {"deadlock", "a cycle of waits: stage 1 -> stage 2 -> stage 1", blocked,
                           "stage 2 action 0 (RECV ACT(0) <- stage 1) waits for stage 1",
                           "stage 0 action 2 (RECV GRAD(0) <- stage 1)", "coordinator action 0 (RECV STATS(0) <- stage 0)",
                           NULL};
    expect_error(&h, "two swapped receives", parts);
}

static void test_duplicated_send(void) {
    hand h;
    hand_gpipe(&h, 2, 2);
    const size_t k = find(&h, 0, NB_LOW_SEND, NB_MSG_ACT, 1);
    insert_at(&h, 0, k + 1, h.a[0][k]);
    char where[64];
    snprintf(where, sizeof where, "stage 0 action %zu (SEND ACT(1) -> stage 1)", k + 1);
    const char *parts[] = {where, "no matching RECV in stage 1's list (2 SEND and 1 RECV of ACT(1)", NULL};
    expect_error(&h, "a duplicated SEND", parts);
}

static void test_bad_peers(void) {
    hand h;
    hand_gpipe(&h, 2, 1);
    const size_t k = find(&h, 1, NB_LOW_RECV, NB_MSG_ACT, 0);
    h.a[1][k].peer = 1;
    const char *self[] = {"stage 1 action 0 (RECV ACT(0) <- stage 1)", "its own endpoint", NULL};
    expect_error(&h, "a receive from itself", self);
    for (int bad = -1; bad <= 3; bad += 4) {
        hand_gpipe(&h, 2, 1);
        h.a[0][find(&h, 0, NB_LOW_SEND, NB_MSG_ACT, 0)].peer = bad;
        const char *range[] = {"stage 0 action 1", "peer", "out of range: expected 0 .. 2", NULL};
        expect_error(&h, "a peer out of range", range);
    }
    hand_gpipe(&h, 2, 1);
    h.a[2][1].peer = 0;  /* two STATS from stage 0, none from 1 */
    const char *twice[] = {"no matching", NULL};
    expect_error(&h, "a receive from the wrong stage", twice);
    hand_gpipe(&h, 3, 1);
    h.a[0][find(&h, 0, NB_LOW_SEND, NB_MSG_ACT, 0)].peer = 2;  /* skips stage 1 */
    const char *skip[] = {"stage 0 action 1", "ACT goes from stage s to stage s+1", NULL};
    expect_error(&h, "an ACT past the next stage", skip);
}

static void test_bad_fields(void) {
    hand h;
    hand_gpipe(&h, 2, 1);
    compute(&h, 0, NB_LOW_REPORT, 0);
    const char *report[] = {"stage 0 action", "REPORT runs on the coordinator only", NULL};
    expect_error(&h, "a REPORT on a stage", report);
    hand_gpipe(&h, 2, 1);
    h.a[0][0].version = 1;  /* FORWARD of step 0 on version 1 */
    const char *version[] = {"stage 0 action 0 (FORWARD mb 0 (step 0, version 1))", "expected 0 .. 0", NULL};
    expect_error(&h, "a version from the future", version);
    hand_gpipe(&h, 2, 1);
    h.a[1][0].msg = (nb_msg_kind)NB_MSG_KINDS;
    const char *kind[] = {"stage 1 action 0", "unknown message kind", NULL};
    expect_error(&h, "an unknown message kind", kind);
    hand_gpipe(&h, 2, 1);
    h.a[2][1].index = -3;
    const char *index[] = {"coordinator action 1", "message index -3", NULL};
    expect_error(&h, "a negative index", index);
    /* one stage, two steps: updates out of order, an APPLY without its GRADS, a version from the future */
    const nb_low_action grads0 = {NB_LOW_GRADS, 0, -1, -1, 0, -1, -1, 0}, apply0 = {NB_LOW_APPLY, 0, -1, -1, 0, -1, -1, 0};
    const nb_low_action grads1 = {NB_LOW_GRADS, 0, -1, -1, 1, -1, -1, 0}, apply1 = {NB_LOW_APPLY, 0, -1, -1, 1, -1, -1, 0};
    const nb_low_action forward1 = {NB_LOW_FORWARD, 0, -1, -1, 1, 1, 1, 0};
    const nb_low_action swapped[] = {grads1, apply1, grads0, apply0}, no_grads[] = {apply0, grads1, apply1},
                        early[] = {forward1, grads0, apply0};
    const char *order[] = {"stage 0 action 3 (APPLY(0)): expected APPLY(2) next (updates in step order)", NULL};
    expect_error(one_stage(&h, swapped, 4), "updates out of step order", order);
    const char *missing[] = {"stage 0 action 0 (APPLY(0)): no GRADS(0) since the previous update", NULL};
    expect_error(one_stage(&h, no_grads, 3), "an APPLY without its GRADS", missing);
    const char *future[] = {"stage 0 action 0 (FORWARD mb 1 (step 1, version 1)): version 1 used with only version 0 made", NULL};
    expect_error(one_stage(&h, early, 3), "a version from the future", future);
    nb_low_schedule empty = {0};
    CHECK(nb_low_validate(&empty) && strstr(nb_last_error(), "empty"), "an empty schedule is refused (%s)", nb_last_error());
}

/* Small deterministic generator for the permutation tests (splitmix64). */
static unsigned long long mix(unsigned long long *x) {
    unsigned long long z = (*x += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

static void shuffle(nb_low_action *a, size_t n, unsigned long long *seed) {
    for (size_t i = n; i > 1; i--) {
        size_t j = (size_t)(mix(seed) % i);
        nb_low_action x = a[i - 1];
        a[i - 1] = a[j];
        a[j] = x;
    }
}

/* Random orders of one endpoint's list: each either validates (and simulates) or fails with a message
 * that names an endpoint; never a crash (run under ASan by -DNB_SANITIZE=ON). */
static void permutations_of(const nb_low_schedule *base, int rounds, unsigned long long seed, int *passed, int *failed) {
    const size_t total = base->start[base->n_stages + 1];
    nb_low_schedule l = *base;
    l.actions = malloc(sizeof(nb_low_action) * total);
    for (int r = 0; r < rounds; r++) {
        memcpy(l.actions, base->actions, sizeof(nb_low_action) * total);
        const int e = (int)(mix(&seed) % (unsigned long long)(base->n_stages + 1));
        shuffle(l.actions + l.start[e], l.start[e + 1] - l.start[e], &seed);
        if (nb_low_validate(&l)) {
            const char *msg = nb_last_error();
            CHECK(!strncmp(msg, "lowered: ", 9) && strstr(msg, "action"), "a permutation fails cleanly: %s", msg);
            ++*failed;
            continue;
        }
        nb_low_costs costs = {0};
        nb_low_sim sim;
        CHECK(!nb_low_simulate(&l, &costs, &sim), "a valid permutation simulates: %s", nb_last_error());
        nb_low_sim_free(&sim);
        ++*passed;
    }
    free(l.actions);
}

static void test_permutations_hand(void) {
    hand h;
    hand_gpipe(&h, 3, 3);
    nb_low_schedule l;
    to_lists(&h, &l);
    int passed = 0, failed = 0;
    permutations_of(&l, 400, 1, &passed, &failed);
    CHECK(failed > 0, "random orders of a hand-made list: %d valid, %d refused", passed, failed);
    free_lists(&l);
}

/* The simulator on a hand-made 1F1B of 2 stages and 2 micro-batches equals nb_pipe_simulate's (the
 * generated 1F1B's lowering, simulated): the hand-made lists are that lowering. */
static void test_simulate_hand(void) {
    hand h;
    hand_gpipe(&h, 2, 2);
    /* stage 1 as 1F1B: RECV ACT(0), F0, B0, SEND GRAD(0), RECV ACT(1), F1, B1, SEND GRAD(1) */
    nb_low_action s1[8] = {h.a[1][0], h.a[1][1], h.a[1][4], h.a[1][5], h.a[1][2], h.a[1][3], h.a[1][6], h.a[1][7]};
    memcpy(h.a[1], s1, sizeof s1);
    nb_low_schedule l;
    to_lists(&h, &l);
    const double f[] = {1, 1}, b[] = {2, 2}, u[] = {0.5, 0.5};
    for (int comm = 0; comm < 2; comm++) {
        nb_low_costs c = {f, b, u, NULL, 0, 0, comm * 0.25, 0, 0, {0}, NULL, NULL, NULL};
        nb_low_sim sim;
        nb_pipe_schedule sc;
        nb_pipe_sim ref;
        nb_pipe_costs pc = {f, b, u, comm * 0.25, NULL};
        if (nb_low_simulate(&l, &c, &sim) || nb_pipe_generate(&sc, NB_PIPE_1F1B, 2, 2, 1) || nb_pipe_simulate(&sc, &pc, &ref)) {
            CHECK(0, "simulate the hand-made 1F1B: %s", nb_last_error());
            free_lists(&l);
            return;
        }
        CHECK(sim.makespan == ref.makespan, "hand-made 1F1B, comm %g: makespan %g, nb_pipe_simulate's %g", comm * 0.25,
              sim.makespan, ref.makespan);
        CHECK(sim.busy[0] == ref.busy[0] && sim.busy[1] == ref.busy[1] && sim.busy[2] == 0,
              "busy per endpoint as nb_pipe_simulate's (%g, %g; coordinator %g)", sim.busy[0], sim.busy[1], sim.busy[2]);
        const size_t send0 = l.start[0] + 1, recv0 = l.start[1];  /* stage 0's SEND ACT(0), stage 1's RECV ACT(0) */
        CHECK(sim.match[send0] == recv0 && sim.match[recv0] == send0 && sim.match[0] == (size_t)-1,
              "match pairs SEND and RECV (%zu, %zu), -1 for a FORWARD", sim.match[send0], sim.match[recv0]);
        CHECK(sim.msg_count[NB_MSG_ACT] == 2 && sim.msg_count[NB_MSG_GRAD] == 2 && sim.msg_count[NB_MSG_STATS] == 2 &&
                  sim.msg_count[NB_MSG_DONE] == 2 && sim.msg_count[NB_MSG_END] == 0,
              "messages counted per kind");
        nb_low_sim_free(&sim);
        nb_pipe_sim_free(&ref);
        nb_pipe_free(&sc);
    }
    /* bytes over a link: 100-byte activations at 50 bytes/s add 2 per hop; STATS cost nothing */
    nb_low_costs c = {f, b, u, NULL, 0, 0, 0, 0, 50, {0}, NULL, NULL, NULL};
    c.bytes[NB_MSG_ACT] = c.bytes[NB_MSG_GRAD] = 100;
    nb_low_sim sim;
    if (!nb_low_simulate(&l, &c, &sim)) {
        /* stage 1: F0 at 3..4, B0 4..6; GRAD(0) at stage 0 from 8: B0 8..10; ACT(1) sent at 2, F1 at 6..7,
         * B1 7..9; GRAD(1) arrives at 11: B1 11..13, APPLY 13..13.5 */
        CHECK(sim.makespan == 13.5, "bandwidth: makespan %g, expected 13.5", sim.makespan);
        CHECK(sim.msg_bytes[NB_MSG_ACT] == 200 && sim.msg_bytes[NB_MSG_GRAD] == 200 && sim.msg_bytes[NB_MSG_STATS] == 0,
              "bytes per kind (ACT %g, GRAD %g)", sim.msg_bytes[NB_MSG_ACT], sim.msg_bytes[NB_MSG_GRAD]);
        nb_low_sim_free(&sim);
    } else CHECK(0, "simulate with bandwidth: %s", nb_last_error());
    /* the coordinator's messages have their own latency: it hears of the last APPLY (9.5) a second later */
    nb_low_costs slow = {f, b, u, NULL, 0, 0, 0, 1, 0, {0}, NULL, NULL, NULL};
    if (!nb_low_simulate(&l, &slow, &sim)) {
        CHECK(sim.makespan == 10.5 && sim.t_finish[l.start[3] - 1] == 10.5,
              "coordinator latency: makespan %g, expected 10.5 (FINISH then)", sim.makespan);
        nb_low_sim_free(&sim);
    } else CHECK(0, "simulate with a coordinator latency: %s", nb_last_error());
    c.latency = -1;
    CHECK(nb_low_simulate(&l, &c, &sim) && strstr(nb_last_error(), "latency"), "a negative latency is refused (%s)",
          nb_last_error());
    free_lists(&l);
}

/* ---- Lowerings of generated schedules (nb_pipe_lower) ---- */

static const nb_pipe_kind all_kinds[] = {NB_PIPE_GPIPE, NB_PIPE_1F1B, NB_PIPE_PIPEDREAM, NB_PIPE_2BW, NB_PIPE_SEQUENTIAL};
#define N_ALL_KINDS 5

/* The lowering options tried: each alone, then all together. */
enum { OPT_NONE, OPT_TIED, OPT_CLIP, OPT_EVAL, OPT_SAVE, OPT_SAVE_WHOLE, OPT_FROM, OPT_GATHER, OPT_ALL, N_OPTION_SETS };
static const char *const option_names[N_OPTION_SETS] = {"none", "tied", "clip", "eval every 2 (2 batches)", "save every 2",
                                                        "save_whole", "from_step 1", "gather_params", "all"};

/* Options of set `which` for a schedule of S steps; every2 (S entries) marks the steps after which
 * evaluation and saving happen. */
static nb_low_options options_for(int which, unsigned char *every2, int S) {
    for (int t = 0; t < S; t++) every2[t] = (t + 1) % 2 == 0;
    const int all = which == OPT_ALL;
    nb_low_options o = {0};
    o.tied = all || which == OPT_TIED;
    o.clip = all || which == OPT_CLIP;
    if (all || which == OPT_EVAL) o.eval_batches = 2, o.eval_at = every2;
    if (all || which == OPT_SAVE || which == OPT_SAVE_WHOLE) o.save_at = every2, o.save_final = 1;
    o.save_whole = all || which == OPT_SAVE_WHOLE;
    o.from_step = (all || which == OPT_FROM) && S > 1 ? 1 : 0;
    o.gather_params = all || which == OPT_GATHER;
    return o;
}

/* Generates and lowers; *sc and *l are to be freed (also on failure). */
static int lower_case(nb_pipe_kind kind, int P, int M, int S, int which, nb_pipe_schedule *sc, nb_low_schedule *l) {
    memset(l, 0, sizeof *l);
    if (nb_pipe_generate(sc, kind, P, M, S)) return -1;
    unsigned char *every2 = malloc((size_t)sc->n_steps);
    nb_low_options o = options_for(which, every2, sc->n_steps);
    int rc = nb_pipe_lower(sc, &o, l);
    free(every2);
    return rc;
}

static void test_lowerings_validate(void) {
    int cases = 0, bad = 0;
    for (int ki = 0; ki < N_ALL_KINDS; ki++)
        for (int P = 1; P <= 5; P++)
            for (int M = P; M <= P + 1; M++)
                for (int S = 1; S <= 4; S++)
                    for (int which = 0; which < N_OPTION_SETS; which++) {
                        nb_pipe_schedule sc;
                        nb_low_schedule l;
                        cases++;
                        if (lower_case(all_kinds[ki], P, M, S, which, &sc, &l) || nb_low_validate(&l)) {
                            if (bad++ < 10)
                                CHECK(0, "%s P=%d M=%d S=%d options %s: %s", nb_pipe_kind_name(all_kinds[ki]), P, M, S,
                                      option_names[which], nb_last_error());
                        }
                        nb_low_free(&l);
                        nb_pipe_free(&sc);
                    }
    CHECK(bad == 0, "every kind x P 1..5 x M in {P, P+1} x S 1..4 x option set lowers to valid lists (%d of %d bad)", bad,
          cases);
}

/* The global index of endpoint e's first RECV of this kind (the list's end when there is none). */
static size_t first_recv(const nb_low_schedule *l, int e, nb_msg_kind kind) {
    size_t g = l->start[e];
    while (g < l->start[e + 1] && !(l->actions[g].op == NB_LOW_RECV && l->actions[g].msg == kind)) g++;
    return g;
}

/* Dropping any one SEND of a small lowering is caught, and so is moving a middle stage's first
 * RECV GRAD before its first RECV ACT (two receives swapped). */
static void test_broken_lowerings_caught(void) {
    for (int ki = 0; ki < N_ALL_KINDS; ki++) {
        nb_pipe_schedule sc;
        nb_low_schedule l;
        if (lower_case(all_kinds[ki], 3, 3, 2, OPT_ALL, &sc, &l)) {
            CHECK(0, "lower %s: %s", nb_pipe_kind_name(all_kinds[ki]), nb_last_error());
            nb_pipe_free(&sc);
            continue;
        }
        const size_t total = l.start[l.n_stages + 1];
        nb_low_schedule cut = l;
        cut.start = malloc(sizeof(size_t) * ((size_t)l.n_stages + 2));
        cut.actions = malloc(sizeof(nb_low_action) * total);
        int sends = 0, caught = 0;
        for (int e = 0; e <= l.n_stages; e++)
            for (size_t g = l.start[e]; g < l.start[e + 1]; g++) {
                if (l.actions[g].op != NB_LOW_SEND) continue;
                sends++;
                memcpy(cut.actions, l.actions, sizeof(nb_low_action) * g);
                memcpy(cut.actions + g, l.actions + g + 1, sizeof(nb_low_action) * (total - g - 1));
                for (int x = 0; x <= l.n_stages + 1; x++) cut.start[x] = l.start[x] - (x > e);
                caught += nb_low_validate(&cut) != 0 && strstr(nb_last_error(), "no matching SEND") != NULL;
            }
        CHECK(sends > 20 && caught == sends, "%s: each of the %d SENDs dropped is caught (%d)", nb_pipe_kind_name(all_kinds[ki]),
              sends, caught);
        memcpy(cut.actions, l.actions, sizeof(nb_low_action) * total);
        memcpy(cut.start, l.start, sizeof(size_t) * ((size_t)l.n_stages + 2));
        const size_t a = first_recv(&l, 1, NB_MSG_ACT), g = first_recv(&l, 1, NB_MSG_GRAD);
        if (a < g && g < l.start[2]) {
            nb_low_action x = cut.actions[a];
            cut.actions[a] = cut.actions[g];
            cut.actions[g] = x;
            CHECK(nb_low_validate(&cut) && strstr(nb_last_error(), "deadlock") && strstr(nb_last_error(), "RECV GRAD(") &&
                      strstr(nb_last_error(), "stage 2 action"),
                  "%s: swapping stage 1's first RECV ACT and RECV GRAD deadlocks (%s)", nb_pipe_kind_name(all_kinds[ki]),
                  nb_last_error());
        } else CHECK(0, "%s: stage 1 receives an ACT, then a GRAD", nb_pipe_kind_name(all_kinds[ki]));
        free(cut.start);
        free(cut.actions);
        nb_low_free(&l);
        nb_pipe_free(&sc);
    }
}

static void test_permutations_lowered(void) {
    nb_pipe_schedule sc;
    nb_low_schedule l;
    if (lower_case(NB_PIPE_2BW, 3, 3, 2, OPT_ALL, &sc, &l)) CHECK(0, "lower 2bw: %s", nb_last_error());
    else {
        int passed = 0, failed = 0;
        permutations_of(&l, 300, 7, &passed, &failed);
        CHECK(failed > 0, "random orders of a lowered 2bw list: %d valid, %d refused", passed, failed);
    }
    nb_low_free(&l);
    nb_pipe_free(&sc);
}

/* A run that stops early switches to the lowering of its schedule cut after the last step
 * (nb_pipe_truncate, src/train/exec/exec.c): those lists must validate too, for every cut. */
static void test_cut_lowerings_validate(void) {
    int cases = 0, bad = 0;
    for (int ki = 0; ki < N_ALL_KINDS; ki++)
        for (int P = 1; P <= 4; P++)
            for (int which = 0; which < N_OPTION_SETS; which += OPT_ALL) {
                nb_pipe_schedule full;
                const int S = 6;
                if (nb_pipe_generate(&full, all_kinds[ki], P, P, S)) {
                    CHECK(0, "%s P=%d: %s", nb_pipe_kind_name(all_kinds[ki]), P, nb_last_error());
                    continue;
                }
                unsigned char every2[64];
                nb_low_options o = options_for(which, every2, full.n_steps);
                for (int F = 1; F <= full.n_steps; F++) {
                    nb_pipe_schedule cut;
                    nb_low_schedule l = {0};
                    cases++;
                    if ((nb_pipe_truncate(&full, F, &cut) || nb_pipe_lower(&cut, &o, &l) || nb_low_validate(&l)) && bad++ < 5)
                        CHECK(0, "%s P=%d cut after %d steps, options %s: %s", nb_pipe_kind_name(all_kinds[ki]), P, F,
                              option_names[which], nb_last_error());
                    nb_low_free(&l);
                    nb_pipe_free(&cut);
                }
                nb_pipe_free(&full);
            }
    CHECK(cases > 200 && bad == 0, "the lowerings of every cut schedule validate (%d of %d bad)", bad, cases);
}

/* Without tied, clip, eval or save, and with messages costing only the stages' latency, the lowered
 * lists take exactly the schedule's time: nb_pipe_simulate simulates the same lowering but takes the
 * makespan over the schedule's own actions, so this checks that the coordinator and the messages the
 * lowering adds (stats, END, DONE) never end later than the stages' work. */
static void test_makespan_matches(void) {
    const double f[] = {1, 1.5, 1, 2, 1}, b[] = {2, 3, 2.5, 2, 2}, u[] = {0.5, 0, 0.25, 0.5, 1};
    int cases = 0, bad = 0;
    for (int ki = 0; ki < N_ALL_KINDS; ki++)
        for (int P = 1; P <= 5; P++)
            for (int M = P; M <= P + 1; M++)
                for (int S = 1; S <= 4; S += 3)
                    for (int comm = 0; comm < 2; comm++) {
                        nb_pipe_schedule sc;
                        nb_low_schedule l;
                        nb_pipe_sim ref;
                        nb_low_sim sim;
                        nb_pipe_costs pc = {f, b, u, comm * 0.5, NULL};
                        nb_low_costs lc = {f, b, u, NULL, 0, 0, comm * 0.5, 0, 0, {0}, NULL, NULL, NULL};
                        cases++;
                        if (lower_case(all_kinds[ki], P, M, S, OPT_NONE, &sc, &l) || nb_pipe_simulate(&sc, &pc, &ref)) {
                            CHECK(0, "%s P=%d M=%d: %s", nb_pipe_kind_name(all_kinds[ki]), P, M, nb_last_error());
                        } else {
                            if (nb_low_simulate(&l, &lc, &sim)) CHECK(0, "simulate: %s", nb_last_error());
                            else if (sim.makespan != ref.makespan && bad++ < 10)
                                CHECK(0, "%s P=%d M=%d S=%d comm %g: lowered makespan %.17g, nb_pipe_simulate's %.17g",
                                      nb_pipe_kind_name(all_kinds[ki]), P, M, S, comm * 0.5, sim.makespan, ref.makespan);
                            nb_low_sim_free(&sim);
                            nb_pipe_sim_free(&ref);
                        }
                        nb_low_free(&l);
                        nb_pipe_free(&sc);
                    }
    CHECK(bad == 0, "lowered makespan equals nb_pipe_simulate's for every kind (%d of %d differ)", bad, cases);
}

int main(void) {
    test_valid_passes();
    test_dropped_send();
    test_dropped_recv();
    test_swapped_receives_deadlock();
    test_duplicated_send();
    test_bad_peers();
    test_bad_fields();
    test_permutations_hand();
    test_simulate_hand();
    test_lowerings_validate();
    test_cut_lowerings_validate();
    test_broken_lowerings_caught();
    test_permutations_lowered();
    test_makespan_matches();
    return check_summary();
}
