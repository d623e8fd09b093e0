/* The schedule-only kinds: interleaved 1F1B (v model chunks per stage) and ZB-H1 (the backward split into
 * its input gradient B and its weight gradient W). Their bubble fraction and peak activations against the
 * published closed forms (docs/schedules.md), the validator's rejections of hand-broken ones, and their
 * lowered lists (the chunks' messages, the W's none). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "check.h"
#include "nobubble/pipeline.h"

#define MAX_P 16

/* Uniform costs: forward f, backward b of which W is w (0: half), update 0, no latency. */
static nb_pipe_costs uniform(int P, double f, double b, double w) {
    static double F[MAX_P], B[MAX_P], U[MAX_P], W[MAX_P];
    for (int s = 0; s < P; s++) F[s] = f, B[s] = b, U[s] = 0, W[s] = w;
    nb_pipe_costs c = {F, B, U, 0, w > 0 ? W : NULL};
    return c;
}

static int generate(nb_pipe_kind kind, int P, int M, int S, int v, nb_pipe_schedule *sc) {
    const nb_pipe_gen_options o = {v};
    return nb_pipe_generate_ex(sc, kind, P, M, S, &o);
}

static int simulate(nb_pipe_kind kind, int P, int M, int S, int v, nb_pipe_costs c, nb_pipe_sim *sim) {
    nb_pipe_schedule sc;
    if (generate(kind, P, M, S, v, &sc)) return -1;
    int rc = nb_pipe_validate(&sc) || nb_pipe_simulate(&sc, &c, sim);
    nb_pipe_free(&sc);
    return rc;
}

static int close_to(double a, double b) { return fabs(a - b) <= 1e-9 * (fabs(b) > 1 ? fabs(b) : 1); }

static double sum(const double *x, int n) {
    double t = 0;
    for (int i = 0; i < n; i++) t += x[i];
    return t;
}

/* Interleaved 1F1B with f = b per stage (each chunk 1/v of them): the bubble is 1F1B's divided by v
 * (Narayanan et al. 2021), so the fraction is (P - 1) / (v M + P - 1) and the makespan per step
 * M (f + b) + (P - 1)(f + b) / v; the busiest stage (stage 0) holds P + (P - 1) / v micro-batches'
 * activations, 1F1B's P times 1 + (P - 1) / (v P) (Korthikanti et al. 2022), once M >= 2P; one version. */
static void test_interleaved_closed_forms(void) {
    const int Ps[] = {1, 2, 3, 4, 6}, vs[] = {2, 3, 4};
    int checked = 0, bad = 0, acts_checked = 0;
    for (int pi = 0; pi < 5; pi++)
        for (int m = 1; m <= 3; m++)
            for (int vi = 0; vi < 3; vi++)
                for (int S = 1; S <= 2; S++)
                    for (int ci = 0; ci < 2; ci++) {
                        const int P = Ps[pi], M = m * P, v = vs[vi];
                        const double c = ci ? 3.0 : 1.0;
                        nb_pipe_sim sim;
                        if (simulate(NB_PIPE_INTERLEAVED, P, M, S, v, uniform(P, c, c, 0), &sim)) {
                            CHECK(0, "interleaved P=%d M=%d v=%d: %s", P, M, v, nb_last_error());
                            bad++;
                            continue;
                        }
                        checked++;
                        const double want = (double)(P - 1) / (v * M + P - 1);
                        const double makespan = S * (M * 2 * c + (P - 1) * 2 * c / v);
                        int ok = close_to(sim.bubble_fraction, want) && close_to(sim.makespan, makespan);
                        for (int s = 0; s < P; s++) ok &= sim.peak_versions[s] == 1;
                        if (M >= 2 * P) {
                            acts_checked++;
                            double busiest = 0;
                            for (int s = 0; s < P; s++)
                                busiest = sim.peak_activation_mbs[s] > busiest ? sim.peak_activation_mbs[s] : busiest;
                            ok &= close_to(sim.peak_activation_mbs[0], P + (double)(P - 1) / v) &&
                                  busiest == sim.peak_activation_mbs[0];
                        }
                        if (!ok) {
                            bad++;
                            CHECK(0, "interleaved P=%d M=%d v=%d S=%d f=b=%g: bubble %.17g (want %.17g), makespan %g (want %g), "
                                  "stage 0 holds %g micro-batches (want %g)", P, M, v, S, c, sim.bubble_fraction, want,
                                  sim.makespan, makespan, sim.peak_activation_mbs[0], P + (double)(P - 1) / v);
                        }
                        nb_pipe_sim_free(&sim);
                    }
    CHECK(checked >= 150 && acts_checked >= 100 && bad == 0,
          "interleaved: bubble (P-1)/(vM+P-1) and stage 0's P + (P-1)/v activations (%d cases, %d wrong)", checked, bad);

    /* below 1F1B's bubble, with the same costs (f = 1, b = 2 too) */
    nb_pipe_sim a, b;
    if (!simulate(NB_PIPE_INTERLEAVED, 4, 8, 1, 2, uniform(4, 1, 2, 0), &a) &&
        !simulate(NB_PIPE_1F1B, 4, 8, 1, 0, uniform(4, 1, 2, 0), &b)) {
        CHECK(a.bubble_fraction < b.bubble_fraction && close_to(a.bubble_fraction, 3.0 / 19),
              "interleaved v=2 (%.4f) below 1f1b (%.4f) at P=4 M=8, f=1 b=2", a.bubble_fraction, b.bubble_fraction);
        nb_pipe_sim_free(&a);
        nb_pipe_sim_free(&b);
    } else CHECK(0, "interleaved against 1f1b: %s", nb_last_error());
}

/* With one chunk, interleaved is 1F1B, action for action. */
static void test_interleaved_one_chunk_is_1f1b(void) {
    int same = 0, total = 0;
    for (int P = 1; P <= 5; P++)
        for (int M = P; M <= 3 * P; M += P) {
            nb_pipe_schedule a, b;
            total++;
            if (!generate(NB_PIPE_INTERLEAVED, P, M, 2, 1, &a) && !generate(NB_PIPE_1F1B, P, M, 2, 0, &b)) {
                same += a.n_chunks == 1 && nb_pipe_n_actions(&a) == nb_pipe_n_actions(&b) &&
                        !memcmp(a.actions, b.actions, sizeof(nb_pipe_action) * nb_pipe_n_actions(&a));
                nb_pipe_free(&a);
                nb_pipe_free(&b);
            }
        }
    CHECK(same == total, "interleaved with v = 1 is 1f1b's schedule (%d of %d)", same, total);
    nb_pipe_schedule sc;
    CHECK(!nb_pipe_generate(&sc, NB_PIPE_INTERLEAVED, 2, 4, 1) && sc.n_chunks == 2, "nb_pipe_generate: 2 chunks");
    nb_pipe_free(&sc);
}

/* ZB-H1 with T_F = T_B = T_W = 1: the bubble is (P - 1)(T_F + T_B - T_W) per stage against 1F1B's
 * (P - 1)(T_F + T_B + T_W) (Qi et al. 2023), a third of it: makespan S (3M + P - 1). Every stage holds P
 * micro-batches (forward done, W not), 1F1B's stage 0's, and one version. */
static void test_zbh1_closed_forms(void) {
    const int Ps[] = {1, 2, 3, 4, 5, 6, 8};
    int checked = 0, bad = 0;
    for (int pi = 0; pi < 7; pi++)
        for (int mi = 0; mi < 3; mi++)
            for (int S = 1; S <= 2; S++) {
                const int P = Ps[pi], M = mi == 0 ? P : mi == 1 ? P + 1 : 2 * P + 3;
                nb_pipe_sim z, o;
                if (simulate(NB_PIPE_ZBH1, P, M, S, 0, uniform(P, 1, 2, 0), &z) ||
                    simulate(NB_PIPE_1F1B, P, M, S, 0, uniform(P, 1, 2, 0), &o)) {
                    CHECK(0, "zbh1 P=%d M=%d: %s", P, M, nb_last_error());
                    bad++;
                    continue;
                }
                checked++;
                int ok = z.makespan == S * (3.0 * M + P - 1) &&
                         close_to(z.bubble_fraction, (double)(P - 1) / (3 * M + P - 1)) &&
                         close_to(sum(z.idle, P) * 3, sum(o.idle, P));
                for (int s = 0; s < P; s++)
                    ok &= z.peak_activations[s] == P && z.peak_versions[s] == 1 &&
                          z.peak_activations[s] == nb_pipe_peak_in_flight(NB_PIPE_ZBH1, P, M, S, s);
                ok &= z.peak_activations[0] == o.peak_activations[0];
                if (!ok) {
                    bad++;
                    CHECK(0, "zbh1 P=%d M=%d S=%d: makespan %g (want %g), bubble %.17g, idle %g (1f1b's %g), stage 0 "
                          "holds %d (1f1b %d)", P, M, S, z.makespan, S * (3.0 * M + P - 1), z.bubble_fraction,
                          sum(z.idle, P), sum(o.idle, P), z.peak_activations[0], o.peak_activations[0]);
                }
                nb_pipe_sim_free(&z);
                nb_pipe_sim_free(&o);
            }
    CHECK(checked >= 40 && bad == 0, "zbh1: a third of 1f1b's bubble at 1f1b's peak activations (%d cases, %d wrong)",
          checked, bad);

    /* other costs: (P - 1)(T_F + T_B - T_W) per stage, the paper's formula, where T_W <= T_F and T_W <= T_B; a
     * longer W (the last three) fills only part of the gap, which then costs (P - 1) max(T_F, T_B) (measured) */
    const double costs[][3] = {{1, 2, 1}, {2, 1, 1}, {1, 1, 0.5}, {1, 2, 0.5}, {1.5, 1, 1}, {2, 3, 1},
                               {1.5, 1, 1.5}, {1, 0.5, 1.5}, {1, 2, 2}};
    for (int i = 0; i < 9; i++) {
        const double F = costs[i][0], Bc = costs[i][1], W = costs[i][2];
        const int P = 4, M = 8;
        nb_pipe_sim z;
        if (simulate(NB_PIPE_ZBH1, P, M, 1, 0, uniform(P, F, Bc + W, W), &z)) {
            CHECK(0, "zbh1 costs %g %g %g: %s", F, Bc, W, nb_last_error());
            continue;
        }
        const double longest = F > Bc ? F : Bc, paper = (P - 1) * (F + Bc - W);
        const double bubble = z.makespan - M * (F + Bc + W), want = W <= F && W <= Bc ? paper : (P - 1) * longest;
        CHECK(close_to(bubble, want), "zbh1 T_F=%g T_B=%g T_W=%g: bubble %g per stage, want %g ((P-1)(T_F+T_B-T_W) = %g)",
              F, Bc, W, bubble, want, paper);
        nb_pipe_sim_free(&z);
    }
    nb_pipe_schedule sc;
    CHECK(nb_pipe_generate(&sc, NB_PIPE_ZBH1, 4, 3, 1) && strstr(nb_last_error(), "--microbatches 3 with --stages 4") &&
              strstr(nb_last_error(), "zbh1 needs M >= P"),
          "zbh1 with M < P is refused: %s", nb_last_error());
}

static void test_refused(void) {
    nb_pipe_schedule sc;
    const nb_pipe_gen_options two = {2}, bad = {-1};
    CHECK(nb_pipe_generate_ex(&sc, NB_PIPE_INTERLEAVED, 4, 6, 1, &two) &&
              strstr(nb_last_error(), "--microbatches 6 with --stages 4: interleaved needs M a multiple of P"),
          "interleaved with M not a multiple of P: %s", nb_last_error());
    CHECK(nb_pipe_generate_ex(&sc, NB_PIPE_INTERLEAVED, 2, 2, 1, &bad) && strstr(nb_last_error(), "--chunks -1"),
          "v < 1 is refused: %s", nb_last_error());
    CHECK(nb_pipe_generate_ex(&sc, NB_PIPE_1F1B, 2, 2, 1, &two) && strstr(nb_last_error(), "only interleaved"),
          "chunks for 1f1b are refused: %s", nb_last_error());
    nb_pipe_kind k;
    CHECK(!nb_pipe_kind_parse("interleaved", &k) && k == NB_PIPE_INTERLEAVED && !nb_pipe_kind_parse("zbh1", &k) &&
              k == NB_PIPE_ZBH1,
          "the names parse");
    CHECK(!nb_pipe_kind_check_executed(NB_PIPE_2BW) && !nb_pipe_kind_check_executed(NB_PIPE_SEQUENTIAL) &&
              !nb_pipe_kind_check_executed(NB_PIPE_ZBH1) && !nb_pipe_kind_check_executed(NB_PIPE_INTERLEAVED) &&
              nb_pipe_kind_check_executed((nb_pipe_kind)99),
          "the trainer's kinds: %s", nb_last_error());
    CHECK(nb_pipe_peak_in_flight(NB_PIPE_INTERLEAVED, 2, 2, 1, 0) < 0, "interleaved's peak has no closed form here");
}

/* The validator's message on a schedule, or "" when it passes. */
static const char *verdict(const nb_pipe_schedule *sc) { return nb_pipe_validate(sc) ? nb_last_error() : ""; }

static void expect_rejected(const nb_pipe_schedule *sc, const char *what, const char *p1, const char *p2) {
    const char *msg = verdict(sc);
    CHECK(*msg && strstr(msg, p1) && (!p2 || strstr(msg, p2)), "%s: rejected naming '%s'%s%s: got '%s'", what, p1,
          p2 ? " and " : "", p2 ? p2 : "", msg);
}

/* The index in stage s's list of its first action (op, mb, chunk), or -1. */
static long find(const nb_pipe_schedule *sc, int s, nb_pipe_op op, int mb, int chunk) {
    for (size_t k = sc->start[s]; k < sc->start[s + 1]; k++)
        if (sc->actions[k].op == op && sc->actions[k].mb == mb && sc->actions[k].chunk == chunk) return (long)(k - sc->start[s]);
    return -1;
}

static void swap(nb_pipe_schedule *sc, int s, long i, long j) {
    nb_pipe_action *a = sc->actions + sc->start[s], t = a[i];
    a[i] = a[j];
    a[j] = t;
}

/* Generates kind, swaps stage s's actions i and j (looked up by find) and expects the validator to name p1, p2. */
static void broken(nb_pipe_kind kind, int P, int M, int v, int s, const nb_pipe_action *x, const nb_pipe_action *y,
                   const char *what, const char *p1, const char *p2) {
    nb_pipe_schedule sc;
    if (generate(kind, P, M, 1, v, &sc)) {
        CHECK(0, "%s: %s", what, nb_last_error());
        return;
    }
    CHECK(!*verdict(&sc), "%s: the generated schedule passes: %s", what, verdict(&sc));
    const long i = find(&sc, s, x->op, x->mb, x->chunk), j = find(&sc, s, y->op, y->mb, y->chunk);
    CHECK(i >= 0 && j >= 0, "%s: both actions found", what);
    if (i >= 0 && j >= 0) {
        swap(&sc, s, i, j);
        expect_rejected(&sc, what, p1, p2);
    }
    nb_pipe_free(&sc);
}

static void test_validator_rejects(void) {
    const nb_pipe_action B0 = {NB_PIPE_BACKWARD_INPUT, 0, 0, 0, 0}, W0 = {NB_PIPE_BACKWARD_WEIGHT, 0, 0, 0, 0},
                         W1 = {NB_PIPE_BACKWARD_WEIGHT, 1, 0, 0, 0}, U = {NB_PIPE_UPDATE, -1, 0, 0, 0};
    /* ZB-H1 P = 2, M = 2; stage 0: F0 F1 B0 W0 B1 W1 U, stage 1: F0 B0 F1 B1 W0 W1 U */
    broken(NB_PIPE_ZBH1, 2, 2, 0, 0, &B0, &W0, "W before its B", "stage 0 action 2 (weight gradient mb 0)",
           "before its input gradient (B)");
    broken(NB_PIPE_ZBH1, 2, 2, 0, 1, &W0, &W1, "W's out of order", "stage 1 action 5 (weight gradient mb 0)",
           "weight gradients out of order: after mb 1");
    broken(NB_PIPE_ZBH1, 2, 2, 0, 1, &W1, &U, "an update before the step's last W", "stage 1 action 5 (update of step 0)",
           "(a W is missing)");
    /* interleaved P = 2, M = 2, v = 2: on stage 0, chunk 1 (virtual stage 2) is downstream of chunk 0 (0) */
    const nb_pipe_action F00 = {NB_PIPE_FORWARD, 0, 0, 0, 0}, F01 = {NB_PIPE_FORWARD, 0, 0, 0, 1},
                         B00 = {NB_PIPE_BACKWARD, 0, 0, 0, 0}, B01 = {NB_PIPE_BACKWARD, 0, 0, 0, 1};
    broken(NB_PIPE_INTERLEAVED, 2, 2, 2, 0, &B00, &B01, "a B before the downstream virtual stage's B",
           "(backward mb 0 chunk 0): backward before the backward of chunk 1 (the virtual stage after it)", NULL);
    broken(NB_PIPE_INTERLEAVED, 2, 2, 2, 0, &F00, &F01, "a forward before the upstream virtual stage's",
           "(forward mb 0 chunk 1): forward before the forward of chunk 0 (the virtual stage before it)", NULL);
    /* one stage, v = 2: the chunks exchange no message, the schedule's own check keeps their order */
    broken(NB_PIPE_INTERLEAVED, 1, 2, 2, 0, &B00, &B01, "P = 1: a B before the downstream B",
           "stage 0 action", "backward before the backward of chunk 1");

    nb_pipe_schedule sc;
    if (!generate(NB_PIPE_INTERLEAVED, 2, 2, 1, 2, &sc)) {
        sc.actions[sc.start[1] + 1].chunk = 2;
        expect_rejected(&sc, "a chunk out of range", "stage 1 action 1", "chunk 2 out of range: expected 0..1");
        nb_pipe_free(&sc);
    }
    /* A cycle across stages (the lowered check's): stage 0 runs F0 B0 W0 F1 B1 W1 (no warm-up forward), stage 1
     * F0 F1 B0 W0 B1 W1: stage 0's B0 waits for stage 1's, which comes after stage 1's F1, which waits for stage
     * 0's F1, after its B0. */
    const size_t counts[2] = {7, 7};
    CHECK(!nb_pipe_alloc(&sc, NB_PIPE_ZBH1, 2, 2, 1, counts), "alloc");
    const nb_pipe_action F0 = {NB_PIPE_FORWARD, 0, 0, 0, 0}, F1 = {NB_PIPE_FORWARD, 1, 0, 0, 0},
                         B1 = {NB_PIPE_BACKWARD_INPUT, 1, 0, 0, 0};
    const nb_pipe_action s0[] = {F0, B0, W0, F1, B1, W1, U}, s1[] = {F0, F1, B0, W0, B1, W1, U};
    memcpy(sc.actions, s0, sizeof s0);
    memcpy(sc.actions + 7, s1, sizeof s1);
    expect_rejected(&sc, "a cyclic wait across stages", "deadlock", "a cycle of waits: stage 0 -> stage 1 -> stage 0");
    const nb_pipe_action fixed[] = {F0, F1, B0, W0, B1, W1, U};
    memcpy(sc.actions, fixed, sizeof fixed);
    CHECK(!*verdict(&sc), "with the warm-up forward it passes: %s", verdict(&sc));
    nb_pipe_free(&sc);
}

/* The lowered lists: every boundary between virtual stages crossed by one ACT and one GRAD per
 * micro-batch (v P - 1 of them; none with P = 1), the last stage's chunks sending to stage 0; a W with no
 * message; the options (tied, clip, saving) lower and validate; evaluation through chunks is refused. */
static void test_lowered(void) {
    for (int P = 1; P <= 4; P++)
        for (int v = 1; v <= 3; v++) {
            nb_pipe_schedule sc;
            nb_low_schedule l;
            const int M = 2 * P, S = 2;
            unsigned char save_at[2] = {1, 1};
            nb_low_options o = {0};
            o.tied = o.clip = 1;
            o.save_at = save_at;
            if (generate(NB_PIPE_INTERLEAVED, P, M, S, v, &sc) || nb_pipe_lower(&sc, &o, &l)) {
                CHECK(0, "lower interleaved P=%d v=%d: %s", P, v, nb_last_error());
                continue;
            }
            long acts = 0, grads = 0, wrapped = 0;
            for (size_t g = 0; g < l.start[P + 1]; g++) {
                const nb_low_action *a = &l.actions[g];
                if (a->op != NB_LOW_SEND) continue;
                acts += a->msg == NB_MSG_ACT;
                grads += a->msg == NB_MSG_GRAD;
                wrapped += a->msg == NB_MSG_ACT && a->peer == 0;
            }
            const long boundaries = P > 1 ? (long)v * P - 1 : 0, N = (long)M * S;
            CHECK(!nb_low_validate(&l) && acts == boundaries * N && grads == acts && wrapped == (P > 1 ? (v - 1) * N : 0),
                  "interleaved P=%d v=%d: %ld ACT and %ld GRAD (want %ld each), %ld to stage 0: %s", P, v, acts, grads,
                  boundaries * N, wrapped, nb_last_error());
            nb_low_free(&l);
            unsigned char eval_at[2] = {0, 1};
            o.eval_batches = 1;
            o.eval_at = eval_at;
            const int rc = nb_pipe_lower(&sc, &o, &l);
            CHECK(v == 1 ? !rc : rc && strstr(nb_last_error(), "evaluation through"), "evaluation with v=%d: %s", v,
                  rc ? nb_last_error() : "lowered");
            if (!rc) nb_low_free(&l);
            nb_pipe_free(&sc);
        }
    nb_pipe_schedule sc;
    nb_low_schedule l;
    const nb_low_options plain = {0};
    if (!generate(NB_PIPE_INTERLEAVED, 2, 2, 1, 2, &sc) && !nb_pipe_lower(&sc, &plain, &l)) {
        char text[96];
        const size_t k = nb_low_find(&l, 0, NB_LOW_SEND, NB_MSG_ACT, 0, 0);
        /* stage 0's first message: mb 0 out of virtual stage 0 to stage 1 */
        CHECK(k != (size_t)-1 && !strcmp(nb_low_action_text(&l.actions[l.start[0] + k], 2, text, sizeof text),
                                         "SEND ACT(0) -> stage 1"),
              "stage 0 sends ACT(0) to stage 1: %s", text);
        size_t g = l.start[0];
        while (g < l.start[1] && !(l.actions[g].op == NB_LOW_SEND && l.actions[g].chunk == 1)) g++;
        CHECK(g < l.start[1] && !strcmp(nb_low_action_text(&l.actions[g], 2, text, sizeof text), "SEND ACT(0, chunk 1) -> stage 1"),
              "chunk 1 of stage 0 sends on: %s", text);
        /* an ACT out of the last chunk of the last stage, to stage 0: no virtual stage is there */
        for (size_t h = l.start[1]; h < l.start[2]; h++)
            if (l.actions[h].op == NB_LOW_SEND && l.actions[h].msg == NB_MSG_ACT && l.actions[h].chunk == 0) {
                l.actions[h].chunk = 1;
                break;
            }
        CHECK(nb_low_validate(&l) && strstr(nb_last_error(), "ACT goes from stage s to stage s+1"),
              "an ACT across a boundary that is not there is refused: %s", nb_last_error());
        nb_low_free(&l);
        nb_pipe_free(&sc);
    } else CHECK(0, "lower interleaved: %s", nb_last_error());
    if (!generate(NB_PIPE_ZBH1, 3, 4, 2, 0, &sc) && !nb_pipe_lower(&sc, &plain, &l)) {
        long w = 0, w_messages = 0;
        for (int s = 0; s < 3; s++)
            for (size_t g = l.start[s]; g < l.start[s + 1]; g++) {
                if (l.actions[g].op != NB_LOW_BACKWARD_WEIGHT) continue;
                w++;
                /* a W is neither preceded by a receive nor followed by a send of its own */
                w_messages += (g + 1 < l.start[s + 1] && l.actions[g + 1].op == NB_LOW_SEND && l.actions[g + 1].msg == NB_MSG_GRAD &&
                               l.actions[g + 1].index == l.actions[g].mb);
            }
        CHECK(!nb_low_validate(&l) && w == 3 * 8 && w_messages == 0, "zbh1 lowered: %ld W's, %ld with a GRAD", w, w_messages);
        nb_low_free(&l);
        nb_pipe_free(&sc);
    } else CHECK(0, "lower zbh1: %s", nb_last_error());
}

/* A run stopped early runs the first steps of the same schedule, which validates. */
static void test_truncate(void) {
    const nb_pipe_kind kinds[] = {NB_PIPE_INTERLEAVED, NB_PIPE_ZBH1};
    for (int i = 0; i < 2; i++) {
        nb_pipe_schedule full, cut;
        if (generate(kinds[i], 2, 4, 5, i ? 0 : 3, &full) || nb_pipe_truncate(&full, 3, &cut)) {
            CHECK(0, "truncate %s: %s", nb_pipe_kind_name(kinds[i]), nb_last_error());
            continue;
        }
        CHECK(!nb_pipe_validate(&cut) && cut.n_steps == 3 && cut.n_chunks == full.n_chunks &&
                  nb_pipe_common_prefix(&full, &cut, 0) == cut.start[1] - cut.start[0],
              "%s cut at 3 steps: the full schedule's first steps", nb_pipe_kind_name(kinds[i]));
        nb_pipe_free(&cut);
        nb_pipe_free(&full);
    }
}

/* An interleaved schedule as its virtual stages (what the trainer runs): V = P x v stages, stage c P + s
 * holding worker s's chunk-c actions in the worker's order and an update per step; valid as a V-stage
 * schedule; a schedule without chunks is refused. */
static void test_virtualize(void) {
    const int P = 3, v = 2, M = 6, S = 2;
    nb_pipe_schedule il, vs;
    CHECK(generate(NB_PIPE_INTERLEAVED, P, M, S, v, &il) == 0, "%s", nb_last_error());
    CHECK(nb_pipe_virtualize(&il, &vs) == 0, "%s", nb_last_error());
    CHECK(vs.n_stages == P * v && vs.n_chunks == 1 && vs.n_micro == M && vs.n_steps == S, "V = %d stages", vs.n_stages);
    CHECK(nb_pipe_validate(&vs) == 0, "the virtual stages are a valid schedule: %s", nb_last_error());
    for (int s = 0; s < P; s++)
        for (int c = 0; c < v; c++) {
            const int k = c * P + s;
            size_t at = vs.start[k];
            int same = 1, updates = 0;
            for (size_t a = il.start[s]; a < il.start[s + 1]; a++) {
                const nb_pipe_action *x = &il.actions[a];
                if (x->op != NB_PIPE_UPDATE && x->chunk != c) continue;
                const nb_pipe_action *y = &vs.actions[at++];
                updates += y->op == NB_PIPE_UPDATE;
                same &= y->op == x->op && y->mb == x->mb && y->step == x->step && y->version == x->version &&
                        y->chunk == 0;
            }
            CHECK(same && at == vs.start[k + 1] && updates == S, "virtual stage %d: worker %d's chunk %d in order", k, s,
                  c);
        }
    nb_pipe_free(&vs);
    nb_pipe_free(&il);
    nb_pipe_schedule ofb;
    CHECK(nb_pipe_generate(&ofb, NB_PIPE_1F1B, 2, 2, 1) == 0, "%s", nb_last_error());
    CHECK(nb_pipe_virtualize(&ofb, &vs) != 0 && strstr(nb_last_error(), "only an interleaved schedule"),
          "1f1b has no virtual stages: %s", nb_last_error());
    nb_pipe_free(&ofb);
}

int main(void) {
    test_virtualize();
    test_interleaved_closed_forms();
    test_interleaved_one_chunk_is_1f1b();
    test_zbh1_closed_forms();
    test_refused();
    test_validator_rejects();
    test_lowered();
    test_truncate();
    return check_summary();
}
