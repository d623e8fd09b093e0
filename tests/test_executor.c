/* The executor (src/train/exec/exec.c, docs/executor.md) apart from the model:
 * - every kind's lowered lists validate for P = 1..8 and M = 1..8, with checkpoints, evaluation, a tied
 *   embedding, clipping and a resumed start;
 * - a stop on request: for every decision step the coordinator can take, exec_stop_end finds an end soon
 *   after it, and the lists each endpoint actually runs (the full run's up to where it learns the
 *   decision, then the cut run's) validate: every message sent is received, nothing deadlocks;
 * - the driver: endpoints driven in turn by one thread finish a ring of messages, and lists that wait
 *   for each other fail as a deadlock instead of hanging;
 * - data parallelism's buckets: the plans of stages' gradients against layouts computed by hand. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "check.h"
#include "model/stage.h"
#include "nobubble/pipeline.h"
#include "nobubble/runtime.h"
#include "train/exec/exec.h"

static const nb_pipe_kind kinds[] = {NB_PIPE_GPIPE, NB_PIPE_1F1B, NB_PIPE_2BW, NB_PIPE_PIPEDREAM, NB_PIPE_SEQUENTIAL};

/* A run of `kind` with the delay's own versions (2BW's for the sequential order: the one-process 2BW). */
static int make_schedule(nb_pipe_kind kind, int P, int M, int S, nb_pipe_schedule *sc) {
    if (kind == NB_PIPE_GPIPE || kind == NB_PIPE_1F1B) return nb_pipe_generate(sc, kind, P, M, S);
    const int steps = kind == NB_PIPE_PIPEDREAM ? S * M : S, Mk = kind == NB_PIPE_PIPEDREAM ? 1 : M;
    int *v = malloc(sizeof(int) * (size_t)steps * P);
    for (int t = 0; t < steps; t++)
        for (int s = 0; s < P; s++) v[t * P + s] = nb_pipe_version_rule(kind == NB_PIPE_SEQUENTIAL ? NB_PIPE_2BW : kind, P, s, t);
    int rc = kind == NB_PIPE_SEQUENTIAL ? nb_pipe_generate_sequential(sc, P, Mk, steps, v)
                                        : nb_pipe_generate_versions(sc, kind, P, Mk, steps, v);
    free(v);
    return rc;
}

/* Options: 0 plain; 1 tied, clip, eval every 3 steps (2 batches), save every 2 (parts); 2 the same saved
 * whole from step 1 (a resumed one-process run). */
static void lower_options(int which, const exec_run *run, nb_low_options *o) {
    memset(o, 0, sizeof *o);
    if (!which) return;
    *o = (nb_low_options){.tied = 1, .clip = 1, .eval_batches = 2, .eval_at = run->eval_at, .save_at = run->save_at,
                          .save_final = 1, .save_whole = which == 2, .from_step = which == 2 ? 1 : 0,
                          .gather_params = which == 1};
}

/* The lists endpoint e runs when it learns at position `at` of the full lists that the run ends with the
 * cut: the full list's actions 0..at, then the cut's from at + 1. */
static int switched_lists(const nb_low_schedule *full, const nb_low_schedule *cut, const size_t *at,
                          nb_low_schedule *out) {
    const int E = full->n_stages + 1;
    size_t total = 0;
    for (int e = 0; e < E; e++) total += at[e] + 1 + (cut->start[e + 1] - cut->start[e]);
    memset(out, 0, sizeof *out);
    out->n_stages = full->n_stages;
    out->n_steps = cut->n_steps;
    out->end_lag = full->end_lag;
    out->start = malloc(sizeof(size_t) * (size_t)(E + 1));
    out->actions = malloc(sizeof(nb_low_action) * total);
    size_t k = 0;
    for (int e = 0; e < E; e++) {
        out->start[e] = k;
        const size_t n_cut = cut->start[e + 1] - cut->start[e];
        memcpy(out->actions + k, full->actions + full->start[e], sizeof(nb_low_action) * (at[e] + 1));
        k += at[e] + 1;
        if (n_cut > at[e] + 1) {
            memcpy(out->actions + k, cut->actions + cut->start[e] + at[e] + 1, sizeof(nb_low_action) * (n_cut - at[e] - 1));
            k += n_cut - at[e] - 1;
        }
    }
    out->start[E] = k;
    return 0;
}

/* Every decision step t of the coordinator: an end within 2P + 3 steps (the next step in the
 * sequential order), and the switched lists validate. */
static int check_stops(exec_run *run, int *n_stops) {
    const int P = run->P;
    for (int t = run->low_opt.from_step; t < run->S; t++) {
        if (nb_low_find(&run->low, P, NB_LOW_DECIDE, 0, t, 0) == (size_t)-1) continue;
        const int end = exec_stop_end(run, t);
        const int bound = run->sc.kind == NB_PIPE_SEQUENTIAL ? t + 1 : t + 2 * P + 3;
        CHECK(end > t && (end <= bound || end == run->S), "%s P %d M %d: decided after step %d, ends after %d (bound %d)",
              nb_pipe_kind_name(run->sc.kind), P, run->M, t, end, bound);
        if (end >= run->S) continue;
        nb_pipe_schedule cut_sc;
        nb_low_schedule cut, mixed;
        CHECK(nb_pipe_truncate(&run->sc, end, &cut_sc) == 0 && nb_pipe_lower(&cut_sc, &run->low_opt, &cut) == 0,
              "cut: %s", nb_last_error());
        size_t at[16];
        for (int e = 0; e < P; e++) at[e] = nb_low_find(&run->low, e, NB_LOW_RECV, NB_MSG_END, t + run->low.end_lag, t);
        at[P] = nb_low_find(&run->low, P, NB_LOW_DECIDE, 0, t, 0);
        switched_lists(&run->low, &cut, at, &mixed);
        if (nb_low_validate(&mixed)) {
            CHECK(0, "%s P %d M %d: stop decided after step %d, ending after %d: %s", nb_pipe_kind_name(run->sc.kind), P,
                  run->M, t, end, nb_last_error());
            return -1;
        }
        (*n_stops)++;
        nb_low_free(&mixed);
        nb_low_free(&cut);
        nb_pipe_free(&cut_sc);
    }
    return 0;
}

static void test_lowered_runs_and_stops(void) {
    int lowered = 0, stops = 0;
    unsigned char eval_at[64], save_at[64];
    for (int t = 0; t < 64; t++) {
        eval_at[t] = t % 3 == 2;
        save_at[t] = t % 2 == 1;
    }
    for (int ki = 0; ki < 5; ki++)
        for (int P = 1; P <= 8; P++)
            for (int M = 1; M <= 8; M++)
                for (int which = 0; which < 3; which++) {
                    const nb_pipe_kind kind = kinds[ki];
                    if ((kind == NB_PIPE_1F1B || kind == NB_PIPE_2BW) && M < P) continue;
                    if (kind == NB_PIPE_PIPEDREAM && M > 2) continue;  /* M x S steps of one micro-batch */
                    const int S = kind == NB_PIPE_PIPEDREAM ? P + 4 : 2 * P + 6;
                    exec_run run;
                    memset(&run, 0, sizeof run);
                    CHECK(make_schedule(kind, P, M, S, &run.sc) == 0, "%s P %d M %d: %s", nb_pipe_kind_name(kind), P, M,
                          nb_last_error());
                    run.P = P;
                    run.S = run.sc.n_steps;
                    run.M = run.sc.n_micro;
                    run.eval_at = eval_at;
                    run.save_at = save_at;
                    lower_options(which, &run, &run.low_opt);
                    CHECK(nb_pipe_lower(&run.sc, &run.low_opt, &run.low) == 0, "lower: %s", nb_last_error());
                    CHECK(nb_low_validate(&run.low) == 0, "%s P %d M %d options %d: %s", nb_pipe_kind_name(kind), P, M,
                          which, nb_last_error());
                    lowered++;
                    /* Stops: every decision of the smaller runs, and with checkpoints (which the cut adds). */
                    if (which && (P <= 4 || M == P)) check_stops(&run, &stops);
                    nb_low_free(&run.low);
                    nb_pipe_free(&run.sc);
                }
    printf("%d lowered runs validated; %d stops switched and validated\n", lowered, stops);
    CHECK(lowered > 500 && stops > 1000, "coverage: %d runs, %d stops", lowered, stops);
}

/* ---- the driver, with roles that only count ---- */

typedef struct {
    int value;
    int acts;
} toy;

static int toy_buffer(exec_endpoint *e, const nb_low_action *a, void **data, size_t *bytes) {
    (void)a;
    *data = &((toy *)e->role)->value;
    *bytes = sizeof(int);
    return 0;
}

static int toy_act(exec_endpoint *e, const nb_low_action *a) {
    (void)a;
    toy *t = e->role;
    t->value++;
    t->acts++;
    return 0;
}

/* Three endpoints on one hub, driven in turn: e sends to e + 1, then receives from e - 1, then
 * computes, n times. */
static void test_driver(void) {
    enum { E = 3, N = 5 };
    nb_low_action acts[E * N * 3];
    nb_low_schedule l = {.n_stages = E - 1, .n_steps = N, .end_lag = 0};
    size_t start[E + 1];
    l.start = start;
    l.actions = acts;
    size_t k = 0;
    for (int e = 0; e < E; e++) {
        start[e] = k;
        for (int i = 0; i < N; i++) {
            acts[k++] = (nb_low_action){NB_LOW_SEND, NB_MSG_STATS, (e + 1) % E, i, i, -1, -1, 0};
            acts[k++] = (nb_low_action){NB_LOW_RECV, NB_MSG_STATS, (e + E - 1) % E, i, i, -1, -1, 0};
            acts[k++] = (nb_low_action){NB_LOW_GRADS, 0, -1, -1, i, -1, -1, 0};
        }
    }
    start[E] = k;
    nb_train_options o;
    memset(&o, 0, sizeof o);
    exec_run run;
    memset(&run, 0, sizeof run);
    run.o = &o;
    toy toys[E];
    exec_endpoint eps[E], *all[E];
    nb_hub *hub = nb_hub_create(E);
    memset(toys, 0, sizeof toys);
    for (int e = 0; e < E; e++) {
        eps[e] = (exec_endpoint){.run = &run, .id = e, .link = nb_hub_link(hub, e), .low = &l, .buffer = toy_buffer,
                                 .act = toy_act, .role = &toys[e]};
        all[e] = &eps[e];
    }
    CHECK(exec_drive(all, E, 1) == 0, "a ring of %d endpoints on one thread: %s", E, nb_last_error());
    for (int e = 0; e < E; e++) CHECK(toys[e].acts == N, "endpoint %d ran %d of %d computations", e, toys[e].acts, N);
    nb_hub_free(hub);
    /* Every endpoint receives before it sends: each waits for another. */
    for (int e = 0; e < E; e++) {
        nb_low_action send = acts[start[e]];
        acts[start[e]] = acts[start[e] + 1];
        acts[start[e] + 1] = send;
    }
    hub = nb_hub_create(E);
    for (int e = 0; e < E; e++) {
        eps[e].link = nb_hub_link(hub, e);
        eps[e].pos = 0;
    }
    CHECK(exec_drive(all, E, 1) != 0 && strstr(nb_last_error(), "deadlock"),
          "every endpoint receives first: a deadlock is reported, not a hang (%s)", nb_last_error());
    CHECK(nb_low_validate(&l) != 0, "the validator rejects the same lists before anything runs");
    nb_hub_free(hub);
}

/* Data parallelism's buckets (exec_bucket_plan) over a stage's gradient ranges (nb_stage_grad_ranges), against
 * layouts computed by hand: vocabulary 10, d_model 4, 2 heads of 2 (1 KV head), d_ffn 8. A dense block holds
 * ln1 4, q 16, k 8, v 8, o 16, ln2 4, gate 32, up 32, down 32: 152 values; a MoE block of 2 experts the same
 * attention (56), a router of 8 and 2 x (gate 32 + up 32 + down 32): 256. */
static void expect_plan(const nb_stage *st, size_t bucket, const size_t *want, int n_want, const char *what) {
    size_t starts[8], cuts[8];
    const int n = exec_bucket_plan(starts, nb_stage_grad_ranges(st, starts), st->n_params, bucket, cuts);
    int same = n == n_want;
    for (int k = 0; same && k < n; k++) same = cuts[k] == want[k];
    CHECK(same, "%s, buckets of %zu: %d bucket(s) starting at %zu, %zu, ... (want %d starting at %zu, ...)", what, bucket,
          n, n ? cuts[0] : 0, n > 1 ? cuts[1] : 0, n_want, n_want ? want[0] : 0);
}

static void test_bucket_plan(void) {
    nb_config c = {10, 4, 2, 2, 1, 8, 16, 10000.0, 1e-5, 1, 0, 0, 0, 0.0};
    nb_model m;
    /* one stage, tied: embedding 0..40, block 0 40..192, block 1 192..344, the final norm 344..348 */
    CHECK(nb_model_layout(&m, &c, 1, NULL) == 0 && m.stages[0].n_params == 348, "layout: %s", nb_last_error());
    size_t starts[8];
    CHECK(nb_stage_grad_ranges(&m.stages[0], starts) == 4 && starts[0] == 344 && starts[1] == 192 && starts[2] == 40 &&
          starts[3] == 0, "the ranges of one tied stage: the norm, blocks 1 and 0, the embedding");
    expect_plan(&m.stages[0], 1, (size_t[]){344, 192, 40, 0}, 4, "one stage");
    expect_plan(&m.stages[0], 100, (size_t[]){192, 40, 0}, 3, "one stage");   /* the norm goes with block 1 */
    expect_plan(&m.stages[0], 200, (size_t[]){40, 0}, 2, "one stage");        /* 308, then the embedding's 40 */
    expect_plan(&m.stages[0], 1000, (size_t[]){0}, 1, "one stage");           /* one bucket, at the backward's end */
    nb_model_free(&m);
    /* two stages, untied: 0 holds the embedding and block 0 (192); 1 block 1 0..152, the norm 152..156 and the
     * head 156..196 */
    c.tied = 0;
    CHECK(nb_model_layout(&m, &c, 2, (int[]){1, 1}) == 0 && m.stages[1].n_params == 196, "layout: %s", nb_last_error());
    expect_plan(&m.stages[0], 100, (size_t[]){40, 0}, 2, "stage 0 of 2");
    expect_plan(&m.stages[1], 100, (size_t[]){0}, 1, "stage 1 of 2");         /* 44, then all 196 */
    expect_plan(&m.stages[1], 40, (size_t[]){152, 0}, 2, "stage 1 of 2");
    nb_model_free(&m);
    /* MoE in every other block (block 1), untied, one stage: embedding 0..40, block 0 40..192, block 1
     * 192..448, norm 448..452, head 452..492 */
    c.n_experts = 2, c.experts_per_token = 1, c.moe_every = 2, c.aux_coef = 0.01;
    CHECK(nb_model_layout(&m, &c, 1, NULL) == 0 && m.stages[0].n_params == 492, "MoE layout: %s", nb_last_error());
    expect_plan(&m.stages[0], 200, (size_t[]){192, 0}, 2, "MoE");             /* 300, then 152 + 40 */
    expect_plan(&m.stages[0], 1, (size_t[]){448, 192, 40, 0}, 4, "MoE");
    nb_model_free(&m);
}

int main(void) {
    test_bucket_plan();
    test_lowered_runs_and_stops();
    test_driver();
    return check_summary();
}
