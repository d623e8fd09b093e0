/* The pipeline trainer on threads: for every schedule, stage count, optimizer and mitigation,
 * a run of real workers ends with weights bitwise equal to the one-process run with the
 * schedule's delay (the independent reference: one process, stages in sequence, the delay
 * simulated by nb_stash), with the same losses; a failing worker stops every other one. */
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "check.h"
#include "kjv_data.h"
#include "nobubble/pipeline.h"
#include "nobubble/runtime.h"
#include "nobubble/train.h"

static kjv_paths paths;

static const char *const delay_of[] = {"sync", "sync", "pipedream", "2bw"};

/* Runs o once in one process (one GEMM thread, as each worker has) and once as a pipeline of
 * `kind` on threads, and compares. */
static void check_equal(nb_train_options o, nb_pipe_kind kind, const char *what) {
    nb_train_result ref, pipe;
    nb_delay_parse(delay_of[kind], &o.delay);
    o.pipeline = -1;
    omp_set_num_threads(1);
    int rc_ref = nb_train(&o, &ref);
    omp_set_num_threads(2);
    o.pipeline = (int)kind;
    o.transport = NB_TRANSPORT_THREADS;
    o.threads_per_stage = 1;
    int rc_pipe = nb_train(&o, &pipe);
    if (rc_ref || rc_pipe) {
        CHECK(0, "%s: %s", what, nb_last_error());
        return;
    }
    CHECK(ref.weights_hash == pipe.weights_hash, "%s: weights %016llx, one process %016llx", what,
          (unsigned long long)pipe.weights_hash, (unsigned long long)ref.weights_hash);
    CHECK(ref.final_train_loss == pipe.final_train_loss, "%s: train loss %.9g, one process %.9g", what,
          pipe.final_train_loss, ref.final_train_loss);
    CHECK(ref.final_val_loss == pipe.final_val_loss || (isnan(ref.final_val_loss) && isnan(pipe.final_val_loss)),
          "%s: val loss %.9g, one process %.9g", what, pipe.final_val_loss, ref.final_val_loss);
}

static nb_train_options base(int P, int tied) {
    nb_train_options o = kjv_small_run(&paths);
    o.model.n_layers = P;  /* one block per stage */
    o.model.tied = tied;
    o.stages = P;
    o.microbatches = 3;
    o.steps = 5;
    o.eval_every = 2;
    o.eval_batches = 2;
    return o;
}

static void check_schedules_optimizers_ef(void) {
    const nb_pipe_kind kinds[] = {NB_PIPE_GPIPE, NB_PIPE_1F1B, NB_PIPE_2BW, NB_PIPE_PIPEDREAM};
    const nb_optimizer_kind opts[] = {NB_OPT_ADAMW, NB_OPT_MUON};
    for (int ki = 0; ki < 4; ki++)
        for (int P = 2; P <= 3; P++)
            for (int oi = 0; oi < 2; oi++)
                for (int ef = 0; ef <= (kinds[ki] >= NB_PIPE_PIPEDREAM); ef++) {
                    nb_train_options o = base(P, 1);
                    o.optim = nb_optim_defaults(opts[oi]);
                    o.schedule.lr = opts[oi] == NB_OPT_MUON ? 0.02f : 3e-3f;
                    if (kinds[ki] == NB_PIPE_PIPEDREAM) {
                        o.microbatches = 1;
                        o.steps = 8;
                    }
                    o.delay.ef = ef;
                    o.delay.ef_alpha = 1.0f;
                    char what[128];
                    snprintf(what, sizeof what, "%s P=%d %s%s", nb_pipe_kind_name(kinds[ki]), P,
                             nb_optimizer_name(opts[oi]), ef ? " +EF" : "");
                    check_equal(o, kinds[ki], what);
                }
}

/* The mitigations that change the schedule (synchronous start and cooldown flush the pipeline)
 * or need the stages to meet (global clipping), an untied head, and more micro-batches than
 * stages. */
static void check_mitigations(void) {
    nb_train_options o = base(3, 1);
    o.delay.sync_start = 2;
    o.delay.sync_cooldown = 1;
    o.steps = 6;
    check_equal(o, NB_PIPE_2BW, "2bw P=3 sync start 2, cooldown 1");
    o = base(2, 1);
    o.clip = 0.5f;
    o.delay.taylor = 0.5f;
    o.delay.ef = 1;
    o.delay.ef_alpha = 0.5f;
    check_equal(o, NB_PIPE_2BW, "2bw P=2 clip, Taylor, EF 0.5");
    o = base(3, 0);
    o.microbatches = 5;
    o.optim = nb_optim_defaults(NB_OPT_SOAP);
    check_equal(o, NB_PIPE_2BW, "2bw P=3 M=5 untied SOAP");
    o = base(3, 1);
    o.microbatches = 1;
    o.steps = 8;
    o.delay.sync_start = 3;
    o.delay.taylor = 0.5f;
    check_equal(o, NB_PIPE_PIPEDREAM, "pipedream P=3 sync start 3, Taylor");
}

/* Checkpoints of a pipeline run (the first stage saves while the others wait after the same
 * update) resume bitwise: as a pipeline, in one process, and from a one-process checkpoint made
 * with another split; Muon with EF and a synchronous start, whose flushes the resumed schedule
 * must keep. */
static void check_checkpoints(void) {
    char dir[] = "/tmp/nb_test_pipe_ckpt_XXXXXX";
    if (!mkdtemp(dir)) {
        CHECK(0, "mkdtemp");
        return;
    }
    char save[300], from[320];
    snprintf(save, sizeof save, "%s/ck", dir);
    nb_train_options o = base(3, 1);
    o.optim = nb_optim_defaults(NB_OPT_MUON);
    o.schedule.lr = 0.02f;
    o.steps = 6;
    o.delay.ef = 1;
    o.delay.ef_alpha = 1.0f;
    o.delay.sync_start = 2;
    nb_delay_parse("2bw", &o.delay);
    o.threads_per_stage = 1;
    nb_train_result whole, part, resumed;
    omp_set_num_threads(1);
    o.pipeline = NB_PIPE_2BW;
    int rc = nb_train(&o, &whole);
    o.save_dir = save;
    o.save_every = 2;
    rc |= nb_train(&o, &part);
    CHECK(!rc && part.weights_hash == whole.weights_hash, "saving checkpoints changes nothing (%s)", rc ? nb_last_error() : "");
    o.save_dir = NULL;
    o.save_every = 0;
    snprintf(from, sizeof from, "%s/step_000004", save);
    o.resume_dir = from;
    rc = nb_train(&o, &resumed);
    CHECK(!rc && resumed.weights_hash == whole.weights_hash && resumed.final_val_loss == whole.final_val_loss,
          "a pipeline resumed from its step-4 checkpoint ends equal (%s)", rc ? nb_last_error() : "");
    snprintf(from, sizeof from, "%s/step_000002", save);
    o.pipeline = -1;
    o.stages = 1;  /* the same checkpoint, re-split into one process */
    rc = nb_train(&o, &resumed);
    CHECK(!rc && resumed.weights_hash == whole.weights_hash, "a pipeline checkpoint resumes in one process (%s)",
          rc ? nb_last_error() : "");
    /* A one-process checkpoint (one stage) resumed by a 3-stage pipeline. */
    o.resume_dir = NULL;
    o.save_dir = save;
    o.save_every = 2;
    o.steps = 6;
    o.model.n_layers = 3;
    char save1[300];
    snprintf(save1, sizeof save1, "%s/one", dir);
    o.save_dir = save1;
    rc = nb_train(&o, &part);
    o.save_dir = NULL;
    o.save_every = 0;
    snprintf(from, sizeof from, "%s/step_000002", save1);
    o.resume_dir = from;
    o.pipeline = NB_PIPE_2BW;
    o.stages = 3;
    rc |= nb_train(&o, &resumed);
    CHECK(!rc && resumed.weights_hash == whole.weights_hash, "a one-process checkpoint resumes as a 3-stage pipeline (%s)",
          rc ? nb_last_error() : "");
    omp_set_num_threads(2);
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    check_run(cmd);
}

/* A worker that fails (at each position of the pipeline) stops the others: the run returns
 * with a message naming the failed stage instead of hanging. */
static void check_fault(void) {
    for (int s = 0; s < 3; s++) {
        nb_train_options o = base(3, 1);
        o.pipeline = NB_PIPE_2BW;
        nb_delay_parse("2bw", &o.delay);
        o.threads_per_stage = 1;
        char spec[32], want[32];
        snprintf(spec, sizeof spec, "%d:2", s);
        snprintf(want, sizeof want, "stage %d failed", s);
        setenv("NB_PIPELINE_FAULT", spec, 1);
        nb_train_result r;
        int rc = nb_train(&o, &r);
        unsetenv("NB_PIPELINE_FAULT");
        CHECK(rc != 0 && strstr(nb_last_error(), want) && strstr(nb_last_error(), "injected fault"),
              "a failure of stage %d stops the run (rc %d: %s)", s, rc, nb_last_error());
    }
}

/* Bad input is refused before any work starts, with the offending flag named. */
static void check_bad_input(void) {
    struct {
        const char *what, *expect;
        int kind, P, layers, M;
        const char *delay;
    } cases[] = {
        {"M < P for 1f1b", "needs M >= P", NB_PIPE_1F1B, 3, 3, 2, NULL},
        {"M < P for 2bw", "needs M >= P", NB_PIPE_2BW, 2, 2, 1, NULL},
        {"P > blocks", "stages = 3", NB_PIPE_GPIPE, 3, 2, 3, NULL},
        {"pipedream with M > 1", "--microbatches 1", NB_PIPE_PIPEDREAM, 2, 2, 2, NULL},
        {"unknown schedule", "--pipeline 9", 9, 2, 2, 2, NULL},
        {"a delay other than the schedule's", "not --delay sync", NB_PIPE_2BW, 2, 2, 2, "sync"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        nb_train_options o = base(cases[i].P, 1);
        o.model.n_layers = cases[i].layers;
        o.microbatches = cases[i].M;
        o.pipeline = cases[i].kind;
        nb_delay_parse(cases[i].delay ? cases[i].delay : cases[i].kind < 4 ? delay_of[cases[i].kind] : "sync", &o.delay);
        nb_train_result r;
        int rc = nb_train(&o, &r);
        CHECK(rc != 0 && strstr(nb_last_error(), cases[i].expect), "%s: refused (%s)", cases[i].what,
              rc ? nb_last_error() : "accepted");
    }
}

/* The threads transport's receive timeout: a receive from a stage that sends nothing fails after the
 * link's timeout, naming that stage; one whose message is there takes it; no timeout waits for ever
 * (not tested: a receive that would hang). */
static void check_receive_timeout(void) {
    nb_hub *hub = nb_hub_create(2);
    nb_link *a = nb_hub_link(hub, 0), *b = nb_hub_link(hub, 1);
    nb_link_set_timeout(a, 0.05);
    int x = 7, y = 0;
    CHECK(nb_link_recv(a, 1, 3, &y, sizeof y) != 0 && strstr(nb_last_error(), "no message from stage 1 (tag 3) for 0.05 s"),
          "a receive from a silent stage times out naming it (%s)", nb_last_error());
    CHECK(nb_link_send(b, 0, 3, &x, sizeof x) == 0 && nb_link_recv(a, 1, 3, &y, sizeof y) == 0 && y == 7,
          "a message that is there is taken despite the timeout");
    nb_hub_free(hub);
}

int main(void) {
    check_receive_timeout();
    if (kjv_make_data()) {
        fprintf(stderr, "test data: %s\n", nb_last_error());
        return 1;
    }
    check_schedules_optimizers_ef();
    check_mitigations();
    check_checkpoints();
    check_fault();
    check_bad_input();
    kjv_remove_data();
    return check_summary();
}
