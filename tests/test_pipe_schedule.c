/* Pipeline schedules: generators, validator and simulator (include/nobubble/pipeline.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "check.h"
#include "nobubble/delay.h"
#include "nobubble/pipeline.h"

static const nb_pipe_kind kinds[] = {NB_PIPE_GPIPE, NB_PIPE_1F1B, NB_PIPE_PIPEDREAM, NB_PIPE_2BW};

/* Uniform costs for P stages (static buffers, P <= 1024). */
static nb_pipe_costs uniform(int P, double f, double b, double u, double c) {
    static double F[1024], B[1024], U[1024];
    for (int s = 0; s < P; s++) F[s] = f, B[s] = b, U[s] = u;
    nb_pipe_costs costs = {F, B, U, c, NULL};
    return costs;
}

static int simulate(nb_pipe_kind kind, int P, int M, int S, nb_pipe_costs costs, nb_pipe_sim *sim) {
    nb_pipe_schedule sc;
    if (nb_pipe_generate(&sc, kind, P, M, S)) return -1;
    int rc = nb_pipe_simulate(&sc, &costs, sim);
    nb_pipe_free(&sc);
    return rc;
}

/* The validator's message on a schedule, or "" when it passes. */
static const char *verdict(const nb_pipe_schedule *sc) { return nb_pipe_validate(sc) ? nb_last_error() : ""; }

static nb_pipe_action *act(nb_pipe_schedule *sc, int s, int k) { return &sc->actions[sc->start[s] + k]; }

static void test_bubble_exact(void) {
    const int Ps[] = {1, 2, 3, 4, 5, 8}, Ms[] = {1, 2, 3, 4, 7, 8, 16};
    const double costs[] = {1.0, 3.0};
    int checked = 0, bad = 0;
    for (int ki = 0; ki < 2; ki++)
        for (int pi = 0; pi < 6; pi++)
            for (int mi = 0; mi < 7; mi++)
                for (int ci = 0; ci < 2; ci++) {
                    nb_pipe_kind kind = ki ? NB_PIPE_1F1B : NB_PIPE_GPIPE;
                    int P = Ps[pi], M = Ms[mi];
                    if (kind == NB_PIPE_1F1B && M < P) continue;
                    nb_pipe_sim sim;
                    if (simulate(kind, P, M, 1, uniform(P, costs[ci], costs[ci], 0, 0), &sim)) {
                        CHECK(0, "%s P=%d M=%d: %s", nb_pipe_kind_name(kind), P, M, nb_last_error());
                        continue;
                    }
                    double want = (double)(P - 1) / (M + P - 1);
                    checked++;
                    if (sim.bubble_fraction != want) {
                        bad++;
                        CHECK(0, "%s P=%d M=%d f=b=%g: bubble %.17g, want (P-1)/(M+P-1) = %.17g", nb_pipe_kind_name(kind),
                              P, M, costs[ci], sim.bubble_fraction, want);
                    }
                    int acts_ok = 1, vers_ok = 1;
                    for (int s = 0; s < P; s++) {
                        int want_acts = kind == NB_PIPE_GPIPE ? M : P - s;
                        acts_ok &= sim.peak_activations[s] == want_acts;
                        vers_ok &= sim.peak_versions[s] == 1;
                    }
                    CHECK(acts_ok, "%s P=%d M=%d: peak activations (stage 0: %d) should be %s", nb_pipe_kind_name(kind),
                          P, M, sim.peak_activations[0], kind == NB_PIPE_GPIPE ? "M" : "P - s");
                    CHECK(vers_ok, "%s P=%d M=%d: a synchronous schedule holds 1 version", nb_pipe_kind_name(kind), P, M);
                    CHECK(sim.makespan == (M + P - 1) * 2 * costs[ci], "%s P=%d M=%d: makespan %g", nb_pipe_kind_name(kind),
                          P, M, sim.makespan);
                    nb_pipe_sim_free(&sim);
                }
    CHECK(checked > 40 && bad == 0, "bubble fraction exact for GPipe and 1F1B (%d cases, %d wrong)", checked, bad);
}

static void test_2bw_steady_state(void) {
    const int cases[][2] = {{2, 2}, {4, 4}, {4, 8}, {8, 8}};
    for (int i = 0; i < 4; i++) {
        int P = cases[i][0], M = cases[i][1], S = 64;
        nb_pipe_sim a, b;
        if (simulate(NB_PIPE_2BW, P, M, S, uniform(P, 1, 2, 0, 0), &a) ||
            simulate(NB_PIPE_1F1B, P, M, S, uniform(P, 1, 2, 0, 0), &b)) {
            CHECK(0, "2bw/1f1b P=%d M=%d: %s", P, M, nb_last_error());
            continue;
        }
        CHECK(a.steady_idle_fraction < 0.03, "2bw P=%d M=%d S=%d: steady-state idle %.4f should be < 3%%", P, M, S,
              a.steady_idle_fraction);
        CHECK(a.steady_idle_fraction < b.steady_idle_fraction && a.bubble_fraction < b.bubble_fraction,
              "2bw P=%d M=%d: idle %.4f (bubble %.4f) should be below 1f1b's %.4f (%.4f)", P, M, a.steady_idle_fraction,
              a.bubble_fraction, b.steady_idle_fraction, b.bubble_fraction);
        /* no flush: one fill and one drain over all M x S micro-batches */
        CHECK(a.makespan == (M * S + P - 1) * 3.0, "2bw P=%d M=%d: makespan %g, want (MS + P - 1)(f + b) = %g", P, M,
              a.makespan, (M * S + P - 1) * 3.0);
        int ok = 1;
        for (int s = 0; s < P; s++) ok &= a.peak_versions[s] == 2 && a.peak_activations[s] == P - s;
        CHECK(ok, "2bw P=%d M=%d: peak versions 2 and activations P - s on every stage (stage 0: %d, %d)", P, M,
              a.peak_versions[0], a.peak_activations[0]);
        nb_pipe_sim_free(&a);
        nb_pipe_sim_free(&b);
    }
    /* the idle fraction falls towards 0 as the run gets longer */
    nb_pipe_sim s4, s64;
    if (!simulate(NB_PIPE_2BW, 4, 4, 4, uniform(4, 1, 2, 0, 0), &s4) &&
        !simulate(NB_PIPE_2BW, 4, 4, 256, uniform(4, 1, 2, 0, 0), &s64)) {
        CHECK(s64.steady_idle_fraction < s4.steady_idle_fraction / 10 && s64.steady_idle_fraction < 0.005,
              "2bw steady idle tends to 0: %.4f (S=4) -> %.4f (S=256)", s4.steady_idle_fraction, s64.steady_idle_fraction);
        nb_pipe_sim_free(&s4);
        nb_pipe_sim_free(&s64);
    } else CHECK(0, "2bw long run: %s", nb_last_error());
}

static void test_pipedream_versions(void) {
    for (int P = 1; P <= 6; P++) {
        nb_pipe_sim sim;
        if (simulate(NB_PIPE_PIPEDREAM, P, 4, 4, uniform(P, 1, 2, 0, 0), &sim)) {
            CHECK(0, "pipedream P=%d: %s", P, nb_last_error());
            continue;
        }
        int ok = 1;
        for (int s = 0; s < P; s++) ok &= sim.peak_versions[s] == P - s && sim.peak_activations[s] == P - s;
        CHECK(ok, "pipedream P=%d: peak versions and activations P - s at stage s (stage 0: %d, %d)", P,
              sim.peak_versions[0], sim.peak_activations[0]);
        nb_pipe_sim_free(&sim);
    }
    /* the schedule is stored as one micro-batch per step */
    nb_pipe_schedule sc;
    CHECK(!nb_pipe_generate(&sc, NB_PIPE_PIPEDREAM, 3, 4, 2) && sc.n_micro == 1 && sc.n_steps == 8 &&
              nb_pipe_n_actions(&sc) == 3 * (2 * 8 + 8),
          "pipedream: M x S micro-batches, one update each");
    nb_pipe_free(&sc);
}

/* The versions of every generated schedule are those of src/delay/delay.c's delays. */
static void test_versions_match_delay(void) {
    const nb_delay_mode modes[] = {NB_DELAY_SYNC, NB_DELAY_SYNC, NB_DELAY_PIPEDREAM, NB_DELAY_2BW};
    int bad = 0, n = 0;
    for (int ki = 0; ki < 4; ki++) {
        const int P = 4, M = 4, S = 5;
        nb_pipe_schedule sc;
        if (nb_pipe_generate(&sc, kinds[ki], P, M, S)) { CHECK(0, "%s", nb_last_error()); continue; }
        nb_delay_options o;
        memset(&o, 0, sizeof o);
        o.mode = modes[ki];
        for (int s = 0; s < P; s++)
            for (size_t k = sc.start[s]; k < sc.start[s + 1]; k++) {
                const nb_pipe_action *a = &sc.actions[k];
                if (a->op == NB_PIPE_UPDATE) continue;
                int v = a->step - nb_delay_tau(&o, s, P, a->step, sc.n_steps);
                n++;
                bad += a->version != (v < 0 ? 0 : v);
            }
        nb_pipe_free(&sc);
    }
    CHECK(n > 0 && bad == 0, "versions equal step - tau of the delay simulation (%d of %d differ)", bad, n);
}

static void test_generators_validate(void) {
    int n = 0, bad = 0;
    for (int ki = 0; ki < 4; ki++)
        for (int P = 1; P <= 6; P++)
            for (int M = 1; M <= 8; M++)
                for (int S = 1; S <= 3; S++) {
                    nb_pipe_schedule sc;
                    int rc = nb_pipe_generate(&sc, kinds[ki], P, M, S);
                    if ((kinds[ki] == NB_PIPE_1F1B || kinds[ki] == NB_PIPE_2BW) && M < P) {
                        if (!rc || !strstr(nb_last_error(), "M >= P")) {
                            bad++;
                            CHECK(0, "%s P=%d M=%d: M < P must be refused", nb_pipe_kind_name(kinds[ki]), P, M);
                        }
                        if (!rc) nb_pipe_free(&sc);
                        continue;
                    }
                    n++;
                    if (rc || nb_pipe_validate(&sc)) {
                        bad++;
                        CHECK(0, "%s P=%d M=%d S=%d: %s", nb_pipe_kind_name(kinds[ki]), P, M, S, nb_last_error());
                    }
                    nb_pipe_free(&sc);
                }
    CHECK(n > 300 && bad == 0, "every generated schedule passes the validator (%d schedules)", n);
    nb_pipe_kind k;
    CHECK(nb_pipe_kind_parse("zerobubble", &k) && strstr(nb_last_error(), "gpipe, 1f1b, pipedream, 2bw"),
          "an unknown kind is refused with the valid ones listed");
    CHECK(!nb_pipe_kind_parse("2bw", &k) && k == NB_PIPE_2BW, "2bw parses");
    nb_pipe_schedule sc;
    CHECK(nb_pipe_generate(&sc, NB_PIPE_GPIPE, 0, 4, 1) && strstr(nb_last_error(), "--stages 0"), "P = 0 is refused");
}

static void expect_rejected(const nb_pipe_schedule *sc, const char *what, const char *p1, const char *p2) {
    const char *msg = verdict(sc);
    CHECK(*msg && strstr(msg, p1) && (!p2 || strstr(msg, p2)), "%s: rejected naming '%s'%s%s: got '%s'", what, p1,
          p2 ? " and " : "", p2 ? p2 : "", msg);
}

static void test_validator_rejects(void) {
    nb_pipe_schedule sc;
    /* a backward before its forward: stage 1 of GPipe (F0 F1 B0 B1 U) as B0 F0 F1 B1 U */
    nb_pipe_generate(&sc, NB_PIPE_GPIPE, 2, 2, 1);
    CHECK(!*verdict(&sc), "gpipe P=2 M=2 is valid");
    nb_pipe_action b0 = *act(&sc, 1, 2);
    *act(&sc, 1, 2) = *act(&sc, 1, 1);
    *act(&sc, 1, 1) = *act(&sc, 1, 0);
    *act(&sc, 1, 0) = b0;
    expect_rejected(&sc, "backward before forward", "stage 1 action 0", "backward before its forward");
    nb_pipe_free(&sc);

    /* forward and backward of one micro-batch on different versions (2BW, step 1 on version 0) */
    nb_pipe_generate(&sc, NB_PIPE_2BW, 2, 2, 3);
    int hit = 0;
    for (size_t k = sc.start[0]; k < sc.start[1] && !hit; k++)
        if (sc.actions[k].op == NB_PIPE_BACKWARD && sc.actions[k].mb == 3) sc.actions[k].version = 1, hit = 1;
    expect_rejected(&sc, "version mismatch", "version mismatch", "stage 0");
    nb_pipe_free(&sc);

    /* a forward on a version other than the delay rule's (1F1B is synchronous) */
    nb_pipe_generate(&sc, NB_PIPE_1F1B, 2, 2, 2);
    for (size_t k = sc.start[1]; k < sc.start[2]; k++)
        if (sc.actions[k].op != NB_PIPE_UPDATE && sc.actions[k].step == 1) sc.actions[k].version = 0;
    expect_rejected(&sc, "stale version in a synchronous schedule", "delay rule gives version 1", "stage 1");
    nb_pipe_free(&sc);

    /* an update before its step's backwards are done */
    nb_pipe_generate(&sc, NB_PIPE_GPIPE, 1, 2, 1); /* F0 F1 B0 B1 U */
    nb_pipe_action u = *act(&sc, 0, 4);
    *act(&sc, 0, 4) = *act(&sc, 0, 3);
    *act(&sc, 0, 3) = u;
    expect_rejected(&sc, "early update", "stage 0 action 3 (update of step 0)", "backwarded first");
    nb_pipe_free(&sc);

    /* a micro-batch that is never backwarded (its backward replaced by a second forward) */
    nb_pipe_generate(&sc, NB_PIPE_GPIPE, 1, 2, 1);
    act(&sc, 0, 3)->op = NB_PIPE_FORWARD;
    expect_rejected(&sc, "duplicate forward", "forwarded twice", NULL);
    nb_pipe_free(&sc);

    /* backwards out of micro-batch order (the accumulation order would change) */
    nb_pipe_generate(&sc, NB_PIPE_GPIPE, 1, 2, 1);
    act(&sc, 0, 2)->mb = 1;
    act(&sc, 0, 3)->mb = 0;
    expect_rejected(&sc, "backwards out of order", "out of order", NULL);
    nb_pipe_free(&sc);

    /* a cyclic wait: stage 0 runs F0 B0 F1 B1 (no warm-up), stage 1 F0 F1 B0 B1 */
    size_t counts[2] = {5, 5};
    CHECK(!nb_pipe_alloc(&sc, NB_PIPE_1F1B, 2, 2, 1, counts), "alloc");
    const nb_pipe_action s0[] = {{NB_PIPE_FORWARD, 0, 0, 0, 0}, {NB_PIPE_BACKWARD, 0, 0, 0, 0}, {NB_PIPE_FORWARD, 1, 0, 0, 0},
                                 {NB_PIPE_BACKWARD, 1, 0, 0, 0}, {NB_PIPE_UPDATE, -1, 0, 0, 0}};
    const nb_pipe_action s1[] = {{NB_PIPE_FORWARD, 0, 0, 0, 0}, {NB_PIPE_FORWARD, 1, 0, 0, 0}, {NB_PIPE_BACKWARD, 0, 0, 0, 0},
                                 {NB_PIPE_BACKWARD, 1, 0, 0, 0}, {NB_PIPE_UPDATE, -1, 0, 0, 0}};
    memcpy(act(&sc, 0, 0), s0, sizeof s0);
    memcpy(act(&sc, 1, 0), s1, sizeof s1);
    /* deadlock is the lowered check's: it names the lowered lists' receives (their indices in those lists) */
    expect_rejected(&sc, "cyclic wait", "deadlock", "a cycle of waits: stage 0 -> stage 1 -> stage 0");
    expect_rejected(&sc, "cyclic wait", "stage 0 action 2 (RECV GRAD(0) <- stage 1) waits for stage 1",
                    "stage 1 action 2 (RECV ACT(1) <- stage 0) waits for stage 0");
    nb_pipe_sim sim;
    nb_pipe_costs c = uniform(2, 1, 1, 0, 0);
    CHECK(nb_pipe_simulate(&sc, &c, &sim) && strstr(nb_last_error(), "deadlock"), "the simulator refuses it too");
    /* the same stage 0 with a warm-up forward is fine */
    const nb_pipe_action fixed[] = {{NB_PIPE_FORWARD, 0, 0, 0, 0}, {NB_PIPE_FORWARD, 1, 0, 0, 0}, {NB_PIPE_BACKWARD, 0, 0, 0, 0},
                                    {NB_PIPE_BACKWARD, 1, 0, 0, 0}, {NB_PIPE_UPDATE, -1, 0, 0, 0}};
    memcpy(act(&sc, 0, 0), fixed, sizeof fixed);
    CHECK(!*verdict(&sc), "the repaired schedule passes: %s", verdict(&sc));
    nb_pipe_free(&sc);

    /* a forward on a version its updates have not made yet (the lowered check's): one stage runs
     * F0 B0 F1 U0 B1 U1, step 1's forward on version 1 before update 0 */
    const size_t six[1] = {6};
    CHECK(!nb_pipe_alloc(&sc, NB_PIPE_1F1B, 1, 1, 2, six), "alloc");
    const nb_pipe_action early[] = {{NB_PIPE_FORWARD, 0, 0, 0, 0}, {NB_PIPE_BACKWARD, 0, 0, 0, 0}, {NB_PIPE_FORWARD, 1, 1, 1, 0},
                                    {NB_PIPE_UPDATE, -1, 0, 0, 0}, {NB_PIPE_BACKWARD, 1, 1, 1, 0}, {NB_PIPE_UPDATE, -1, 1, 1, 0}};
    memcpy(act(&sc, 0, 0), early, sizeof early);
    expect_rejected(&sc, "a version from the future", "FORWARD mb 1 (step 1, version 1)", "a version from the future");
    nb_pipe_free(&sc);
}

static void test_cost_model(void) {
    /* GPipe P=2 M=1 with comm 0.5: F0 [0,1] at s0, [1.5,2.5] at s1, B0 [2.5,3.5] at s1, [4,5] at s0 */
    nb_pipe_schedule sc;
    nb_pipe_sim sim;
    nb_pipe_generate(&sc, NB_PIPE_GPIPE, 2, 1, 1);
    nb_pipe_costs c = uniform(2, 1, 1, 0, 0.5);
    if (!nb_pipe_simulate(&sc, &c, &sim)) {
        CHECK(sim.makespan == 5.0 && sim.t_start[sc.start[1]] == 1.5 && sim.t_start[sc.start[0] + 1] == 4.0,
              "comm latency: makespan %g (want 5)", sim.makespan);
        CHECK(sim.busy[0] == 2 && sim.idle[0] == 3 && sim.bubble_fraction == 6.0 / 10.0, "busy/idle with comm");
        nb_pipe_sim_free(&sim);
    } else CHECK(0, "%s", nb_last_error());
    nb_pipe_free(&sc);
    /* update cost: one stage, M = 2, S = 2, f = 1, b = 2, u = 0.5: 2 x (6 + 0.5) */
    nb_pipe_generate(&sc, NB_PIPE_GPIPE, 1, 2, 2);
    c = uniform(1, 1, 2, 0.5, 0);
    if (!nb_pipe_simulate(&sc, &c, &sim)) {
        CHECK(sim.makespan == 13.0 && sim.bubble_fraction == 0.0, "update cost: makespan %g (want 13)", sim.makespan);
        nb_pipe_sim_free(&sim);
    } else CHECK(0, "%s", nb_last_error());
    /* per-stage costs: a slow last stage sets the pace */
    nb_pipe_free(&sc);
    nb_pipe_generate(&sc, NB_PIPE_GPIPE, 2, 4, 1);
    double F[2] = {1, 2}, B[2] = {1, 2}, U[2] = {0, 0};
    nb_pipe_costs pc = {F, B, U, 0, NULL};
    if (!nb_pipe_simulate(&sc, &pc, &sim)) {
        /* s1 forwards run [1,9], its backwards [9,17]; s0's last backward [17,18] */
        CHECK(sim.makespan == 18.0 && sim.busy[0] == 8 && sim.busy[1] == 16, "per-stage costs: makespan %g (want 18)",
              sim.makespan);
        nb_pipe_sim_free(&sim);
    } else CHECK(0, "%s", nb_last_error());
    F[1] = 0;
    CHECK(nb_pipe_simulate(&sc, &pc, &sim) && strstr(nb_last_error(), "forward cost of stage 1"), "a zero cost is refused");
    F[1] = 1;
    pc.comm = -1;
    CHECK(nb_pipe_simulate(&sc, &pc, &sim) && strstr(nb_last_error(), "comm cost"), "a negative comm cost is refused");
    nb_pipe_free(&sc);
    /* The simulation is the lowered lists': in the one-process order every stage waits, at its update,
     * for the decision on that step (END), so a slow last update holds the next step back. P = 3,
     * M = 1, S = 2, f = b = 1, u = 0.5, 0.5, 3: stage 2's update 0 runs 4..7, so stage 0 starts step 1
     * at 7 and stage 2's update 1 runs 11..14 (without the wait: 6.5 and a makespan of 13.5). */
    const int versions[6] = {0, 0, 0, 1, 1, 1};
    double F3[3] = {1, 1, 1}, U3[3] = {0.5, 0.5, 3};
    nb_pipe_costs c3 = {F3, F3, U3, 0, NULL};
    if (!nb_pipe_generate_sequential(&sc, 3, 1, 2, versions) && !nb_pipe_simulate(&sc, &c3, &sim)) {
        CHECK(sim.makespan == 14.0 && sim.t_start[sc.start[0] + 3] == 7.0,
              "sequential: step 1 starts at 7, after every stage's update 0 (%g), makespan %g (want 14)",
              sim.t_start[sc.start[0] + 3], sim.makespan);
        nb_pipe_sim_free(&sim);
    } else CHECK(0, "%s", nb_last_error());
    nb_pipe_free(&sc);
}

static void test_large(void) {
    clock_t t0 = clock();
    const int P = 1024, M = 1024, S = 2;
    nb_pipe_sim sim;
    if (simulate(NB_PIPE_2BW, P, M, S, uniform(P, 1, 1, 0, 0), &sim)) {
        CHECK(0, "P=1024: %s", nb_last_error());
        return;
    }
    int ok = 1;
    for (int s = 0; s < P; s++) ok &= sim.peak_versions[s] == 2 && sim.peak_activations[s] == P - s;
    CHECK(ok, "P=1024 2bw: 2 versions, P - s activations");
    CHECK(sim.makespan == 2.0 * (M * S + P - 1), "P=1024 2bw: makespan %g", sim.makespan);
    nb_pipe_sim_free(&sim);
    if (simulate(NB_PIPE_1F1B, P, M, 1, uniform(P, 1, 1, 0, 0), &sim)) {
        CHECK(0, "P=1024 1f1b: %s", nb_last_error());
        return;
    }
    CHECK(sim.bubble_fraction == (double)(P - 1) / (M + P - 1), "P=1024 1f1b bubble %.17g", sim.bubble_fraction);
    nb_pipe_sim_free(&sim);
    nb_pipe_schedule sc;
    CHECK(!nb_pipe_generate(&sc, NB_PIPE_PIPEDREAM, P, 4, 1) && !nb_pipe_validate(&sc), "P=1024 pipedream validates");
    nb_pipe_free(&sc);
    double secs = (double)(clock() - t0) / CLOCKS_PER_SEC;
    printf("P = 1024 simulations: %.2f s CPU\n", secs);
    CHECK(secs < 20, "P = 1024 is fast (%.2f s)", secs);
}

/* A version table equal to the kind's rule gives exactly the kind's own schedule; a table with a
 * synchronous start and cooldown (the delay's versions) validates, flushes in those steps (every
 * stage's first forward of step t after its update t - 1) and streams in the others. */
static void test_version_tables(void) {
    const nb_pipe_kind stream[] = {NB_PIPE_1F1B, NB_PIPE_2BW, NB_PIPE_PIPEDREAM};
    int same = 0, total = 0;
    for (int ki = 0; ki < 3; ki++)
        for (int P = 1; P <= 4; P++)
            for (int M = P; M <= P + 2; M++) {
                int Mk = stream[ki] == NB_PIPE_PIPEDREAM ? 1 : M, S = 5;
                int *v = malloc(sizeof(int) * (size_t)S * P);
                for (int t = 0; t < S; t++)
                    for (int st = 0; st < P; st++) v[t * P + st] = nb_pipe_version_rule(stream[ki], P, st, t);
                nb_pipe_schedule a, b;
                total++;
                if (!nb_pipe_generate(&a, stream[ki], P, Mk, S) && !nb_pipe_generate_versions(&b, stream[ki], P, Mk, S, v))
                    same += nb_pipe_n_actions(&a) == nb_pipe_n_actions(&b) &&
                            !memcmp(a.actions, b.actions, sizeof(nb_pipe_action) * nb_pipe_n_actions(&a));
                nb_pipe_free(&a);
                nb_pipe_free(&b);
                free(v);
            }
    CHECK(same == total, "a table with the rule's versions gives the kind's schedule (%d of %d)", same, total);

    nb_delay_options d = {0};
    nb_delay_parse("2bw", &d);
    d.sync_start = 2;
    d.sync_cooldown = 2;
    const int P = 3, M = 4, S = 8;
    int v[8 * 3];
    for (int t = 0; t < S; t++)
        for (int st = 0; st < P; st++) {
            int x = t - nb_delay_tau(&d, st, P, t, S);
            v[t * P + st] = x > 0 ? x : 0;
        }
    nb_pipe_schedule sc;
    CHECK(!nb_pipe_generate_versions(&sc, NB_PIPE_2BW, P, M, S, v) && !nb_pipe_validate(&sc), "sync start/cooldown: %s",
          nb_last_error());
    int flushes = 0;
    for (int st = 0; st < P; st++) {
        int updates = 0, seen[8] = {0};
        for (size_t k = sc.start[st]; k < sc.start[st + 1]; k++) {
            const nb_pipe_action *a = &sc.actions[k];
            if (a->op == NB_PIPE_UPDATE) updates++;
            /* The first stage runs ahead (P - 1 forwards in flight): a step that starts after
             * its previous update there is a flush. */
            if (st == 0 && a->op == NB_PIPE_FORWARD && !seen[a->step]++ && updates == a->step) flushes |= 1 << a->step;
            if (a->op == NB_PIPE_FORWARD && !(a->step < 2 || a->step >= S - 2))
                CHECK(a->version == a->step - 1, "stage %d step %d streams on version %d", st, a->step, a->version);
        }
    }
    /* Steps 1 (inside the start), 6 and 7 (the cooldown) flush; the streaming steps 3..5 do not (step 2,
     * the first delayed one, needs version 1 only). Step 0 flushes trivially. */
    CHECK((flushes & 0xC3) == 0xC3 && !(flushes & 0x38), "the first stage flushes exactly at the synchronous steps (mask %#x)", flushes);
    nb_pipe_free(&sc);
    v[3 * P + 1] = 4;
    CHECK(nb_pipe_generate_versions(&sc, NB_PIPE_2BW, P, M, S, v) && strstr(nb_last_error(), "version 4 for stage 1 at step 3"),
          "a version from the future is refused (%s)", nb_last_error());
    CHECK(nb_pipe_generate_versions(&sc, NB_PIPE_GPIPE, P, M, S, NULL) && strstr(nb_last_error(), "stream schedule"),
          "gpipe takes no table (%s)", nb_last_error());
}

/* The index of stage s's update `step` in its list (its length when absent). */
static size_t update_index(const nb_pipe_schedule *sc, int s, int step) {
    for (size_t k = sc->start[s]; k < sc->start[s + 1]; k++)
        if (sc->actions[k].op == NB_PIPE_UPDATE && sc->actions[k].step == step) return k - sc->start[s];
    return sc->start[s + 1] - sc->start[s];
}

/* A run stopped on request (docs/executor.md) once decided at a stage's update t to end
 * after step F = t + 2P + 2; every other stage learns it at its update t + P + 1 (the latest it
 * can have reached meanwhile) and switches to the truncated schedule. That is sound only if the
 * truncated lists start as the full ones up to those updates, and validate. Checked for every kind,
 * depth and decision step, with the synchronous start and cooldown's mixed versions too. */
static void test_truncation(void) {
    int cases = 0, good = 0;
    for (int ki = 0; ki < 4; ki++)
        for (int P = 1; P <= 4; P++)
            for (int M = P; M <= P + 1; M++)
                for (int mixed = 0; mixed < 2; mixed++) {
                    const nb_pipe_kind kind = kinds[ki];
                    const int Mk = kind == NB_PIPE_PIPEDREAM ? 1 : M, S = 14 + 2 * P;
                    if (mixed && kind == NB_PIPE_GPIPE) continue;
                    int *v = malloc(sizeof(int) * (size_t)S * P);
                    for (int t = 0; t < S; t++)  /* mixed: steps 2..4 synchronous, as after a sync start */
                        for (int st = 0; st < P; st++)
                            v[t * P + st] = mixed && t >= 2 && t <= 4 ? t : nb_pipe_version_rule(kind, P, st, t);
                    nb_pipe_schedule full;
                    int rc = kind == NB_PIPE_GPIPE ? nb_pipe_generate(&full, kind, P, Mk, S)
                                                   : nb_pipe_generate_versions(&full, kind, P, Mk, S, v);
                    free(v);
                    if (rc) {
                        CHECK(0, "%s P=%d M=%d: %s", nb_pipe_kind_name(kind), P, Mk, nb_last_error());
                        continue;
                    }
                    for (int t = 0; t + 2 * P + 2 < S - 1; t++) {
                        const int F = t + 2 * P + 2;
                        nb_pipe_schedule cut;
                        cases++;
                        if (nb_pipe_truncate(&full, F + 1, &cut)) continue;
                        int ok = !nb_pipe_validate(&cut) && cut.n_steps == F + 1;
                        for (int st = 0; st < P && ok; st++) {
                            size_t at = update_index(&full, st, st ? t + P + 1 : t);
                            ok = nb_pipe_common_prefix(&full, &cut, st) > at &&
                                 update_index(&cut, st, F) < cut.start[st + 1] - cut.start[st];
                        }
                        good += ok;
                        if (!ok) fprintf(stderr, "  truncation fails: %s P=%d M=%d mixed=%d t=%d\n", nb_pipe_kind_name(kind), P, Mk, mixed, t);
                        nb_pipe_free(&cut);
                    }
                    nb_pipe_free(&full);
                }
    CHECK(cases > 100 && good == cases, "a schedule cut at F + 1 steps runs as the full one until the stop is known (%d of %d)",
          good, cases);
}

int main(void) {
    test_truncation();
    test_version_tables();
    test_bubble_exact();
    test_2bw_steady_state();
    test_pipedream_versions();
    test_versions_match_delay();
    test_generators_validate();
    test_validator_rejects();
    test_cost_model();
    test_large();
    return check_summary();
}
