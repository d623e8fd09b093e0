/* The memory estimate (train.h, "memory"): for one small model every term counted by hand from what
 * the code allocates (model/stage.c, model/acts.c, worker.c, optim/optimizer.c, delay/delay.c), the
 * delay's versions and EF buffer, the activation slots of a pipeline against the generated schedules'
 * peaks, an interleaved MPI rank's stages added, and the check's refusal, which names the override. */
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <string.h>
#include "check.h"
#include "model/acts.h"
#include "nobubble/pipeline.h"
#include "nobubble/runtime.h"
#include "nobubble/train.h"

/* V 64, d 16, 2 blocks, 2 heads of 8 (and 2 key/value heads), d_ffn 32, context 8, tied. */
static nb_config small_config(void) {
    nb_config c;
    nb_config_preset("tiny", &c);
    c.vocab_size = 64, c.d_model = 16, c.n_layers = 2, c.n_heads = 2, c.n_kv_heads = 2, c.d_ffn = 32;
    c.context = 8, c.tied = 1;
    return c;
}

static void by_hand(void) {
    nb_train_options o;
    nb_train_defaults(&o);
    o.model = small_config();
    o.batch = 2, o.seq_len = 4, o.steps = 5, o.val_pattern = NULL;
    nb_memory_estimate e;
    CHECK(nb_train_memory_estimate(&o, &e) == 0, "estimate: %s", nb_last_error());
    /* parameters: the embedding 64 x 16; per block two gains of 16, q, k, v, o of 16 x 16, gate and up
     * 32 x 16, down 16 x 32; the final gain 16 (tied in one stage: no head tensor) */
    const double n = 64 * 16 + 2 * (16 + 4 * 256 + 16 + 3 * 512) + 16;
    CHECK(n == 6224, "hand count %g", n);
    CHECK(e.weights == 4 * n, "weights %g, expected %g", e.weights, 4 * n);
    /* gradients, the update d, and the tied head's gradient apart (64 x 16) */
    CHECK(e.gradients == 4 * n + 4 * n + 4 * 64 * 16, "gradients %g", e.gradients);
    /* AdamW: m and v; scratch per thread: four 1-float blocks, two 1-double blocks, one bf16 value */
    const double threads = omp_get_max_threads();
    CHECK(e.optimizer == 8 * n + threads * (4 * 4 + 2 * 8 + 2), "optimizer %g (threads %g)", e.optimizer, threads);
    CHECK(e.versions == 0, "synchronous fp32 keeps no versions: %g", e.versions);
    /* One slot (the one-process order), N = 8 rows, each array rounded up to 64 bytes: tokens, targets
     * (32 -> 64 each), the residual stream 3 x 8 x 16 floats; per block ln1 512, rstd1 64, qkv 8 x 48
     * floats 1536, att 512, lse 8 x 2 floats 64, mid 512, ln2 512, rstd2 64, gate/up 8 x 64 floats 2048,
     * h 1024; the head: lnf 512, rstdf 64, the logits 8 x 64 floats 2048, ce_lse 64. */
    const double block = 512 + 64 + 1536 + 512 + 64 + 512 + 512 + 64 + 2048 + 1024;
    const double slot = 64 + 64 + 1536 + 2 * block + (512 + 64 + 2048 + 64);
    CHECK(e.activations == slot + sizeof(nb_acts) + 2 * sizeof(block_acts), "activations %g, expected %g",
          e.activations, slot + sizeof(nb_acts) + 2 * sizeof(block_acts));
    /* the backward's scratch (dres 512, dln 512, dqkv 1536, datt 512, dgu 2048, dh 1024), the two
     * message buffers (2 x 512), the loader's step positions (8 x 5), RoPE (2 x 8 x 4 floats) */
    const double scratch = 512 + 512 + 1536 + 512 + 2048 + 1024 + 1024 + 8 * 5 + 256;
    CHECK(e.scratch == scratch, "scratch %g, expected %g", e.scratch, scratch);
    CHECK(e.runtime > 0 && e.processes == 1, "runtime %g, processes %d", e.runtime, e.processes);
    const double sum = e.weights + e.gradients + e.optimizer + e.versions + e.activations + e.scratch + e.runtime;
    CHECK(e.total == sum, "total %g, the parts sum to %g", e.total, sum);

    /* 2BW simulated on 2 stages, with EF: one older version and one EF buffer of each stage's weights
     * (the last stage holds the tied head's copy, 64 x 16 more) */
    o.stages = 2;
    nb_delay_parse("2bw", &o.delay);
    o.delay.ef = 1;
    CHECK(nb_train_memory_estimate(&o, &e) == 0, "2bw: %s", nb_last_error());
    CHECK(e.versions == 2 * 4 * (n + 64 * 16), "2bw + EF versions %g, expected %g", e.versions, 2 * 4 * (n + 64 * 16));
    /* bf16: each stage's bf16 copies too, tau_max + 2 = 3 of them */
    o.precision = NB_PRECISION_BF16;
    CHECK(nb_train_memory_estimate(&o, &e) == 0, "bf16: %s", nb_last_error());
    CHECK(e.versions == 2 * 4 * (n + 64 * 16) + 3 * 2 * (n + 64 * 16), "bf16 versions %g", e.versions);
}

/* The closed forms against the generated schedules' own peaks (what the worker allocates). */
static void slots_against_schedules(void) {
    const nb_pipe_kind kinds[] = {NB_PIPE_GPIPE, NB_PIPE_1F1B, NB_PIPE_2BW, NB_PIPE_PIPEDREAM, NB_PIPE_ZBH1};
    const int shapes[][3] = {{4, 4, 3}, {3, 8, 2}, {4, 1, 5}, {2, 2, 1}};   /* P, M, steps */
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++)
        for (size_t h = 0; h < sizeof shapes / sizeof shapes[0]; h++) {
            const int P = shapes[h][0], M = kinds[k] == NB_PIPE_PIPEDREAM ? 1 : shapes[h][1], S = shapes[h][2];
            nb_pipe_schedule sc;
            if (nb_pipe_generate(&sc, kinds[k], P, M, S)) continue;   /* 1F1B and 2BW need M >= P */
            for (int s = 0; s < P; s++) {
                int inflight = 0, peak = 1;
                for (size_t a = sc.start[s]; a < sc.start[s + 1]; a++) {
                    if (sc.actions[a].op == NB_PIPE_FORWARD && ++inflight > peak) peak = inflight;
                    if (sc.actions[a].op == NB_PIPE_BACKWARD || sc.actions[a].op == NB_PIPE_BACKWARD_WEIGHT) inflight--;
                }
                CHECK(nb_pipe_stage_peak(&sc, s) == peak, "%s stage %d: nb_pipe_stage_peak %d, counted %d",
                      nb_pipe_kind_name(kinds[k]), s, nb_pipe_stage_peak(&sc, s), peak);
                const int closed = nb_pipe_peak_in_flight(kinds[k], P, M, S, s);
                CHECK(closed == peak, "%s P %d M %d steps %d stage %d: closed form %d, schedule %d",
                      nb_pipe_kind_name(kinds[k]), P, M, S, s, closed, peak);
            }
            nb_pipe_free(&sc);
        }
}

/* ZB-H1: each micro-batch in flight also holds the output gradients its W reads, and holds its slot until
 * that W. By hand for the small model split 1 + 1 blocks, micro-batches of 2 x 4 = 8 tokens: per block
 * 8 x (d 16 + gate|up 64 + d 16 + q/k/v 48) = 1152 floats, and the head's 8 x 64 logits: stage 0 4608
 * bytes, stage 1 6656 bytes, each times the stage's peak micro-batches in flight; over 1F1B's estimate
 * also the slots ZB-H1 holds longer (its peaks against 1F1B's). */
static void split_backward(void) {
    nb_train_options o;
    nb_train_defaults(&o);
    o.model = small_config();
    o.batch = 2, o.seq_len = 4, o.steps = 3, o.val_pattern = NULL, o.stages = 2, o.microbatches = 2;
    nb_memory_estimate one, zb;
    o.pipeline = NB_PIPE_1F1B;
    CHECK(nb_train_memory_estimate(&o, &one) == 0, "1f1b: %s", nb_last_error());
    o.pipeline = NB_PIPE_ZBH1;
    CHECK(nb_train_memory_estimate(&o, &zb) == 0, "zbh1: %s", nb_last_error());
    nb_model m;
    CHECK(nb_model_layout(&m, &o.model, 2, NULL) == 0, "layout: %s", nb_last_error());
    double expected = 0;
    const double recorded[2] = {4608, 6656};
    for (int s = 0; s < 2; s++) {
        const int zp = nb_pipe_peak_in_flight(NB_PIPE_ZBH1, 2, 2, 3, s), op = nb_pipe_peak_in_flight(NB_PIPE_1F1B, 2, 2, 3, s);
        expected += zp * recorded[s] + (zp - op) * (double)nb_acts_bytes(&m.stages[s], 2, 4);
    }
    nb_model_free(&m);
    CHECK(zb.activations - one.activations == expected, "zbh1: %g over 1f1b's activations, expected %g",
          zb.activations - one.activations, expected);
}

/* An interleaved MPI rank holds its worker's v virtual stages: the estimate is a worker's (the largest in
 * all), its stages' weights added (here 2 workers x 2 chunks of 4 blocks: stages w and w + 2), not one
 * stage's. */
static void interleaved_rank(void) {
    nb_train_options o;
    nb_train_defaults(&o);
    o.model = small_config();
    o.model.n_layers = 4;
    o.batch = 2, o.seq_len = 4, o.steps = 3, o.val_pattern = NULL, o.stages = 2, o.microbatches = 2;
    o.pipeline = NB_PIPE_INTERLEAVED, o.transport = NB_TRANSPORT_MPI;
    nb_memory_estimate e;
    CHECK(nb_train_memory_estimate(&o, &e) == 0, "interleaved over MPI: %s", nb_last_error());
    int split[4];
    nb_model m;
    CHECK(nb_config_balanced_split(&o.model, 4, 4, split) == 0 && nb_model_layout(&m, &o.model, 4, split) == 0,
          "layout: %s", nb_last_error());
    double worker[2];
    for (int w = 0; w < 2; w++) worker[w] = 4.0 * (double)(m.stages[w].n_params + m.stages[w + 2].n_params);
    nb_model_free(&m);
    CHECK(e.weights == worker[0] || e.weights == worker[1], "a rank's weights %g, expected a worker's two stages' "
          "(%g or %g)", e.weights, worker[0], worker[1]);
}

/* A need above what is available is refused, naming the parts, the figure's source and the override. */
static void refusal(void) {
    nb_memory_estimate e;
    memset(&e, 0, sizeof e);
    e.weights = 1e18, e.total = 1e18, e.processes = 1;
    CHECK(nb_memory_check(&e, "--no-memory-check") != 0, "an exabyte is refused");
    const char *msg = nb_last_error();
    CHECK(strstr(msg, "the model needs about") && strstr(msg, "(weights ") && strstr(msg, "is available (") &&
              strstr(msg, "use --no-memory-check to run anyway"), "message: %s", msg);
    e.total = 1, e.weights = 1;
    CHECK(nb_memory_check(&e, "--no-memory-check") == 0, "a byte fits: %s", nb_last_error());
    CHECK(e.available > 0, "available %g (%s)", e.available, e.available_source);
}

int main(void) {
    by_hand();
    slots_against_schedules();
    split_backward();
    interleaved_rank();
    refusal();
    return check_summary();
}
