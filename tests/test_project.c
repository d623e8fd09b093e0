/* The projection (nb_proj_*, docs/projection.md) against closed forms worked out by hand: the ring
 * all-reduce's time, SmolLM-360M's published parameter count (361,821,120, its Hugging Face model card's
 * 362M), the steady step of GPipe and 1F1B ((M + P - 1)(f + b) + u) and of 2BW (M (f + b) + u) on equal
 * stages, the all-reduce added once per synchronous step, the messages queued on one link, and the
 * layouts refused. */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "check.h"
#include "nobubble/common.h"
#include "nobubble/pipeline.h"

#define P_MAX 8

static int close_to(double a, double b) { return fabs(a - b) <= 1e-9 * (fabs(b) > 1 ? fabs(b) : 1); }

/* A device whose rates the costs below do not use (the simulation takes the stages' costs), with a link
 * of bw bytes per second and no latency. */
static nb_proj_device device(double bw) {
    nb_proj_device d = {1e12, 2, 0.5, 0, 2, 4, 16, 4, 0, bw};
    return d;
}

/* Equal stages: forward f, backward b, update u, params each, one message of msg bytes. */
static nb_proj_stages equal_stages(int P, double f, double b, double u, double params, double msg) {
    static double F[P_MAX], B[P_MAX], U[P_MAX], N[P_MAX];
    for (int s = 0; s < P; s++) F[s] = f, B[s] = b, U[s] = u, N[s] = params;
    nb_proj_stages st = {F, B, U, NULL, N, NULL, msg};
    return st;
}

static double step_of(nb_pipe_kind kind, int P, int D, int M, const nb_proj_device *dev, const nb_proj_stages *st,
                      double *idle) {
    const nb_proj_layout l = {kind, P, D, M, 1, 0};
    nb_proj_result r;
    if (nb_proj_simulate(&l, dev, st, 0, &r)) {
        CHECK(0, "%s P %d D %d M %d: %s", nb_pipe_kind_name(kind), P, D, M, nb_last_error());
        return NAN;
    }
    if (idle) *idle = r.idle_fraction;
    return r.step_s;
}

static void test_allreduce(void) {
    CHECK(nb_proj_allreduce_seconds(8e6, 1, 1e-5, 1e9) == 0, "one replica sums nothing");
    /* 2 (D - 1) (latency + bytes / (D bw)) = 6 (1e-5 + 2e-3) */
    CHECK(close_to(nb_proj_allreduce_seconds(8e6, 4, 1e-5, 1e9), 6 * (1e-5 + 2e-3)), "ring, D = 4: %.9g",
          nb_proj_allreduce_seconds(8e6, 4, 1e-5, 1e9));
}

static void test_shape(void) {
    const nb_proj_shape smol = {32, 960, 2560, 15, 5, 49152, 2048, 1};
    CHECK(nb_proj_params(&smol) == 361821120.0, "SmolLM-360M: %.0f parameters, expected 361821120",
          nb_proj_params(&smol));
    /* One block's forward per sequence: 2 T (2 d^2 + 2 d kv + 3 d f) + 2 T^2 d, kv = 960 x 5 / 15 = 320 */
    const double T = 2048, d = 960;
    CHECK(close_to(nb_proj_block_flops(&smol), 2 * T * (2 * d * d + 2 * d * 320 + 3 * d * 2560) + 2 * T * T * d),
          "block flops");
    int blocks[4];
    CHECK(nb_proj_split(&smol, 4, blocks) == 0, "split into 4");
    CHECK(blocks[0] + blocks[1] + blocks[2] + blocks[3] == 32, "every block on a stage");
    /* The head (2 T d V) is 2 x 49152 x 960 x 2048 / 48.3e9 = 4.0 blocks' work: the last stage takes fewer
     * blocks than the others, and is at most one block away from the slowest other stage. */
    CHECK(blocks[3] < blocks[0], "the head's stage takes fewer blocks: %d %d %d %d", blocks[0], blocks[1], blocks[2],
          blocks[3]);
    CHECK(nb_proj_split(&smol, 33, blocks) != 0 && strstr(nb_last_error(), "33 stages"), "more stages than blocks: %s",
          nb_last_error());
}

static void test_steady_steps(void) {
    const nb_proj_device dev = device(1e9);
    const int P = 4, M = 8;
    const double f = 1, b = 2, u = 0.5;
    const nb_proj_stages st = equal_stages(P, f, b, u, 1e6, 0);
    double idle = -1;
    CHECK(close_to(step_of(NB_PIPE_GPIPE, P, 1, M, &dev, &st, NULL), (M + P - 1) * (f + b) + u), "gpipe step");
    CHECK(close_to(step_of(NB_PIPE_1F1B, P, 1, M, &dev, &st, &idle), (M + P - 1) * (f + b) + u), "1f1b step");
    /* idle: (P - 1)(f + b) of every stage's (M + P - 1)(f + b) + u */
    CHECK(close_to(idle, (P - 1) * (f + b) / ((M + P - 1) * (f + b) + u)), "1f1b idle %.6f", idle);
    CHECK(close_to(step_of(NB_PIPE_2BW, P, 1, M, &dev, &st, &idle), M * (f + b) + u), "2bw steady step");
    CHECK(fabs(idle) < 1e-9, "2bw steady idle %.3g", idle);
    /* D = 2: every stage's REDUCE of 4 MB at 1 GB/s, 2 (2 - 1)(4e6 / 2e9) = 4 ms, once per step. */
    const double reduce = nb_proj_allreduce_seconds(4e6, 2, 0, 1e9);
    CHECK(close_to(step_of(NB_PIPE_1F1B, P, 2, M, &dev, &st, NULL), (M + P - 1) * (f + b) + u + reduce),
          "1f1b step with 2 replicas");
    CHECK(close_to(step_of(NB_PIPE_2BW, P, 2, M, &dev, &st, NULL), M * (f + b) + u + reduce), "2bw with 2 replicas");
}

/* GPipe, P = 2, M = 4, f = 1, b = 2, u = 0, messages of 3 s on the wire. Stage 0's forwards end at 1, 2,
 * 3, 4; their messages leave one after another on its link: arrive 4, 7, 10, 13; stage 1 forwards at 4,
 * 7, 10, 13 and runs its backwards from 14 to 22, ending 16, 18, 20, 22; their gradients queue on stage
 * 1's link: arrive 19, 22, 25, 28; stage 0's backwards end 21, 24, 27, 30. A step: 30 (messages that
 * overlapped on the wire would make it 21). */
static void test_link_queue(void) {
    const nb_proj_device dev = device(1e9);
    const nb_proj_stages st = equal_stages(2, 1, 2, 0, 0, 3e9);
    CHECK(close_to(step_of(NB_PIPE_GPIPE, 2, 1, 4, &dev, &st, NULL), 30), "gpipe with queued messages: %.6g",
          step_of(NB_PIPE_GPIPE, 2, 1, 4, &dev, &st, NULL));
}

static void test_refused(void) {
    const nb_proj_device dev = device(1e9);
    const nb_proj_stages st = equal_stages(4, 1, 2, 0, 0, 0);
    nb_proj_result r;
    const nb_proj_layout few = {NB_PIPE_1F1B, 4, 1, 2, 1, 0};
    CHECK(nb_proj_simulate(&few, &dev, &st, 0, &r) != 0, "1f1b with M < P refused");
    const nb_proj_layout pd = {NB_PIPE_PIPEDREAM, 4, 1, 4, 1, 0};
    CHECK(nb_proj_simulate(&pd, &dev, &st, 0, &r) != 0 && strstr(nb_last_error(), "pipedream"),
          "pipedream not projected: %s", nb_last_error());
    nb_proj_device slow = dev;
    slow.bytes_per_second = 0;
    const nb_proj_layout ok = {NB_PIPE_1F1B, 4, 1, 4, 1, 0};
    CHECK(nb_proj_simulate(&ok, &slow, &st, 0, &r) != 0 && strstr(nb_last_error(), "bandwidth"),
          "zero bandwidth refused: %s", nb_last_error());
}

int main(void) {
    test_allreduce();
    test_shape();
    test_steady_steps();
    test_link_queue();
    test_refused();
    return check_summary();
}
