/* The pipeline trainer: one worker per stage runs its list of actions from the schedule
 * (src/pipeline), exchanging activations and their gradients with its neighbours through a link
 * (src/runtime: threads in this process, or MPI processes). Weight stashing: each forward and
 * backward runs on the version its action names, held by the stage's nb_stash; the update of
 * step t is exactly the one-process trainer's (tied sum, Taylor, clipping, optimizer, EF), so that
 * a pipeline run ends bitwise equal to `nb_train` with the schedule's delay.
 *
 * Messages between stages, each tagged with its kind and index:
 *   ACT j / GRAD j       stage s -> s+1 activations / s+1 -> s their gradient, micro-batch j
 *   TIED_GRAD t          last -> first: the head's gradient of step t (tied embedding)
 *   TIED_W v             first -> last: the embedding after update v - 1 (the head's version v)
 *   NORM t               every -> every: a stage's squared gradient norm (global clipping)
 *   STATS t              every -> first: what step t measured on that stage (metrics line)
 *   EVAL b / EVAL_LOSS t activations of validation batch b / last -> first: the loss
 *   DONE / PARAMS        every -> first at the end: timings, memory, (MPI) the final weights
 *   SAVED t              every -> first: the stage has written its part of the checkpoint after
 *                        update t (or failed to: why); the first then completes the checkpoint
 *   END t                first -> every: after its update t, the step the run ends at (a stop on
 *                        request moves it; see stop_on_request) */
#define _GNU_SOURCE /* CPU sets, pthread_setaffinity_np */
#include <math.h>
#include <omp.h>
#include <signal.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "nobubble/checkpoint.h"
#include "nobubble/data.h"
#include "nobubble/pipeline.h"
#include "nobubble/runtime.h"
#include "train/run.h"
#include "train/state.h"
#include "util/clock.h"
#include "util/error.h"
#include "util/fs.h"
#include "util/signals.h"

enum { TAG_ACT, TAG_GRAD, TAG_TIED_GRAD, TAG_TIED_W, TAG_NORM, TAG_STATS, TAG_EVAL, TAG_EVAL_LOSS, TAG_DONE, TAG_PARAMS,
       TAG_SAVED, TAG_END };

/* Indices wrap at 2^16: far more than the messages of one pair ever in flight at once. */
static int tag(int kind, int index) { return kind + 16 * (index & 0xffff); }

/* What every stage sends the first stage after update t. */
typedef struct {
    double update_sq, version_sq, loss;  /* loss: the mean over the step's micro-batches (last stage) */
    double tau;
} step_stats;

/* What every stage reports at the end. */
typedef struct {
    double busy, eval, wall;              /* seconds: computing, evaluating, in all */
    double steady_busy, steady_wall, steady_eval;  /* over steps steady_from .. steady_to - 1 */
    double bytes;                         /* memory held by the stage */
    double slots;
    double forward, backward, update;     /* mean seconds of each kind of action */
} stage_report;

typedef struct worker worker;

enum { STOP_REPORTED = 2 };  /* worker.stopped: the run ended early on request, every stage done */

typedef struct {
    const nb_train_options *o;
    const nb_pipe_schedule *sc;
    int start;         /* the first step this run runs (after --resume) */
    char last_saved[4200];  /* the newest complete checkpoint, named when a save fails */
    nb_model *model;
    int T, P, M, S, threads;
    nb_schedule sched;
    int steady_from, steady_to;  /* the steady-state window of steps [from, to): the second half,
                                    without the last step, whose end drains the pipeline */
    int *cpus, n_cpus; /* the process's CPUs, for pinning thread workers */
    int pin;
    nb_fs_lock locks[2];  /* the folders the run writes (train_lock_run): the first stage's process holds them */
} run_shared;

/* A stage's clocks at one moment: wall time, computing and evaluating so far. */
typedef struct {
    double t, busy, eval;
} mark;

struct worker {
    run_shared *sh;
    int s;
    const nb_pipe_schedule *sc;  /* the schedule this stage runs: the run's, or its cut at a stop */
    nb_pipe_schedule cut;
    size_t pos;     /* the running action's index in this stage's list */
    int end;        /* the steps this run ends after: sh->S, or fewer when stopped on request */
    int stopped;    /* the run ended early on request: the first stage's error says where to resume */
    int ready;      /* set up (by the main thread, on the threads transport) */
    uint64_t *step_pos;  /* first stage: the loader's position at the start of each step */
    nb_link *link;
    nb_stage *st;
    nb_acts **slots, *eval_slot;
    int *slot_mb, n_slots;
    nb_optimizer *opt;
    nb_stash *stash;
    float *d, *x_in, *dout, *tied_buf;
    nb_loader *train, *val;
    int *tokens, *targets;
    int updates, copy_version;
    int proven;         /* first stage: see train_weights_proven */
    double loss_sum, grad_norm;
    double t0, busy, eval;
    mark steady[2];     /* at the steady-state window's start and end (t = 0: not reached) */
    double op_time[3];  /* seconds spent in forwards, backwards, updates */
    double waited;      /* seconds waiting for messages inside updates (not computing) */
    long op_count[3];
    step_stats *stats;  /* first stage: per step, summed over stages */
    double *val_loss, *step_time, *grad_norms;  /* first stage: per step */
    nb_train_result *res;
    FILE *metrics;      /* first stage: metrics.jsonl */
    char error[1100];
    int failed;
};

static size_t act_bytes(const run_shared *sh) {
    return sizeof(float) * (size_t)sh->o->batch * sh->T * sh->o->model.d_model;
}

static int is_first(const worker *w) { return w->s == 0; }
static int is_last(const worker *w) { return w->s == w->sh->P - 1; }
static int tied_split(const worker *w) { return w->sh->o->model.tied && w->sh->P > 1; }
static size_t embed_numel(const worker *w) { return (size_t)w->sh->o->model.vocab_size * w->sh->o->model.d_model; }

/* The last stage's offset of its tied copy (its last tensor). */
static float *tied_copy(worker *w) { return w->st->params + w->st->tensors[w->st->n_tensors - 1].offset; }

/* The last stage of a tied split: before anything reads its current weights (or keeps them as
 * a version), its copy of the embedding must be the first stage's of the same version. */
static int ensure_tied_copy(worker *w) {
    if (!tied_split(w) || !is_last(w) || w->copy_version == w->updates) return 0;
    if (nb_link_recv(w->link, 0, tag(TAG_TIED_W, w->updates), tied_copy(w), sizeof(float) * embed_numel(w))) return -1;
    w->copy_version = w->updates;
    return 0;
}

static const float *weights_of(worker *w, int version) {
    const float *p = nb_stash_version(w->stash, w->st->params, version, w->updates);
    if (!p) nb_fail("stage %d: weight version %d is not held after %d updates", w->s, version, w->updates);
    return p;
}

static mark mark_now(const worker *w) { return (mark){nb_now(), w->busy, w->eval}; }

static void count_op(worker *w, nb_pipe_op op, double seconds) {
    w->busy += seconds;
    w->op_time[op] += seconds;
    w->op_count[op]++;
}

/* A receive inside an update: its waiting is idle time, not the update's. */
static int recv_waiting(worker *w, int from, int tag_, void *buf, size_t bytes) {
    double t = nb_now();
    int rc = nb_link_recv(w->link, from, tag_, buf, bytes);
    w->waited += nb_now() - t;
    return rc;
}

static int find_slot(const worker *w, int mb) {
    for (int i = 0; i < w->n_slots; i++)
        if (w->slot_mb[i] == mb) return i;
    return -1;
}

static int run_forward(worker *w, const nb_pipe_action *a) {
    const run_shared *sh = w->sh;
    if (a->version == w->updates && ensure_tied_copy(w)) return -1;
    const float *wt = weights_of(w, a->version);
    int slot = find_slot(w, -1);
    if (!wt) return -1;
    if (slot < 0) return nb_fail("stage %d: no free activation slot for micro-batch %d", w->s, a->mb);
    if (is_first(w) && a->mb % sh->M == 0) w->step_pos[a->step] = nb_loader_position(w->train);
    if ((is_first(w) || is_last(w)) && nb_loader_next(w->train, w->tokens, w->targets)) return -1;
    if (!is_first(w) && nb_link_recv(w->link, w->s - 1, tag(TAG_ACT, a->mb), w->x_in, act_bytes(sh))) return -1;
    double t = nb_now();
    float loss = 0;
    if (nb_stage_forward(w->st, wt, w->slots[slot], w->tokens, w->x_in, w->targets, &loss)) return -1;
    count_op(w, NB_PIPE_FORWARD, nb_now() - t);
    w->slot_mb[slot] = a->mb;
    if (is_last(w)) w->loss_sum += loss;
    else if (nb_link_send(w->link, w->s + 1, tag(TAG_ACT, a->mb), nb_acts_output(w->slots[slot]), act_bytes(sh)))
        return -1;
    return 0;
}

static int run_backward(worker *w, const nb_pipe_action *a) {
    const run_shared *sh = w->sh;
    const float *wt = weights_of(w, a->version);
    int slot = find_slot(w, a->mb);
    if (!wt) return -1;
    if (slot < 0) return nb_fail("stage %d: backward of micro-batch %d, which has no activations", w->s, a->mb);
    if (!is_last(w) && nb_link_recv(w->link, w->s + 1, tag(TAG_GRAD, a->mb), w->dout, act_bytes(sh))) return -1;
    double t = nb_now();
    if (nb_stage_backward(w->st, wt, w->slots[slot], is_last(w) ? NULL : w->dout, 1.0f / sh->M)) return -1;
    count_op(w, NB_PIPE_BACKWARD, nb_now() - t);
    w->slot_mb[slot] = -1;
    if (!is_first(w) &&
        nb_link_send(w->link, w->s - 1, tag(TAG_GRAD, a->mb), nb_acts_input_grad(w->slots[slot]), act_bytes(sh)))
        return -1;
    return 0;
}

/* The tied embedding's gradient: the head's part is added to the embedding's, in the order of
 * nb_model_sum_tied_grads (the one-process sum). */
static int sum_tied_grads(worker *w, int step) {
    if (!w->sh->o->model.tied) return 0;
    size_t n = embed_numel(w);
    float *embed = w->st->grads + w->st->tensors[0].offset;
    if (w->st->tied_head_grad) {  /* one stage holds both */
        for (size_t i = 0; i < n; i++) embed[i] += w->st->tied_head_grad[i];
        memset(w->st->tied_head_grad, 0, sizeof(float) * n);
        return 0;
    }
    if (is_last(w)) return nb_link_send(w->link, 0, tag(TAG_TIED_GRAD, step), w->st->grads + w->st->tensors[w->st->n_tensors - 1].offset, sizeof(float) * n);
    if (!is_first(w)) return 0;
    if (recv_waiting(w, w->sh->P - 1, tag(TAG_TIED_GRAD, step), w->tied_buf, sizeof(float) * n)) return -1;
    for (size_t i = 0; i < n; i++) embed[i] += w->tied_buf[i];
    return 0;
}

/* Global-norm clipping across stages: every stage sends its squared norm to every other and sums
 * all of them in stage order, as the one-process trainer does. */
static int clip_gradients(worker *w, int step) {
    const run_shared *sh = w->sh;
    double mine = nb_grad_sum_squares(w->st->grads, w->st->tensors, w->st->n_tensors), sq = 0.0;
    for (int i = 0; i < sh->P; i++)
        if (i != w->s && nb_link_send(w->link, i, tag(TAG_NORM, step), &mine, sizeof mine)) return -1;
    for (int i = 0; i < sh->P; i++) {
        double part = mine;
        if (i != w->s && recv_waiting(w, i, tag(TAG_NORM, step), &part, sizeof part)) return -1;
        sq += part;
    }
    double norm = sqrt(sq);
    if (norm > sh->o->clip) nb_scale(w->st->grads, w->st->n_params, (float)(sh->o->clip / norm));
    w->grad_norm = norm;
    return 0;
}

static int evaluate(worker *w, int step, double *val);
static int report_step(worker *w, int t);
static int checkpoint(worker *w, int step);

/* ---- stopping on request (SIGINT, SIGTERM) ----
 * The stages are at different steps when the signal comes, and a pipeline cannot just stop: every
 * message in flight must still be received. So the first stage, at its update t, picks the last
 * step F = t + 2P + 2, and every stage switches to the schedule cut after F (nb_pipe_truncate),
 * which drains there; the last step's checkpoint is then saved as usual. The others learn the end
 * from END messages: the first sends END t after each update t, and stage s receives END u - P - 1
 * at its update u. The first has always sent it by then (its update u - P - 1 comes before any
 * forward of step u: no kind's versions are more than P steps old), and until the switch the cut
 * schedule runs exactly as the full one (test_pipe_schedule checks every kind, depth and step). */
static int switch_to_end(worker *w, int end) {
    if (end == w->end) return 0;
    if (w->stopped) return nb_fail("stage %d: asked to end after step %d, already ending after %d", w->s, end, w->end);
    if (nb_pipe_truncate(w->sh->sc, end, &w->cut)) return -1;
    if (nb_pipe_common_prefix(w->sc, &w->cut, w->s) <= w->pos)
        return nb_fail("stage %d: cannot end after step %d from action %zu of its schedule", w->s, end, w->pos);
    w->sc = &w->cut;
    w->end = end;
    w->stopped = 1;
    return 0;
}

static int stop_on_request(worker *w, int step) {
    run_shared *sh = w->sh;
    const int P = sh->P;
    if (is_first(w)) {
        const int last = step + 2 * P + 2;
        if (!w->stopped && train_stop_requested() && last < w->end - 1 && switch_to_end(w, last + 1)) return -1;
        for (int i = 1; i < P && step <= w->end - P - 2; i++)  /* only the END messages some stage receives */
            if (nb_link_send(w->link, i, tag(TAG_END, step), &w->end, sizeof w->end)) return -1;
        return 0;
    }
    int end;
    if (step - P - 1 < sh->start) return 0;
    return recv_waiting(w, 0, tag(TAG_END, step - P - 1), &end, sizeof end) || switch_to_end(w, end);
}

/* Update t: the one-process train_step's second half, for this stage. */
static int run_update(worker *w, int step) {
    run_shared *sh = w->sh;
    const nb_train_options *o = sh->o;
    nb_stage *st = w->st;
    if (ensure_tied_copy(w)) return -1;  /* w_t, with its copy, is about to be kept as a version */
    double t = nb_now(), waited0 = w->waited;
    step_stats mine = {0, 0, 0, nb_stash_tau(w->stash, step)};
    if (is_last(w)) {
        mine.loss = w->loss_sum / sh->M;
        w->loss_sum = 0;
        /* The newest checkpoint is the first stage's to know: not named here (see train_diverged). */
        if (!isfinite(mine.loss)) return train_diverged(step, "training loss", mine.loss, NULL);
    }
    if (sum_tied_grads(w, step)) return -1;
    nb_stash_taylor(w->stash, st->grads, st->params, step);
    if (o->clip > 0 && clip_gradients(w, step)) return -1;
    /* Without clipping, each stage checks its own gradient: a non-finite one stops the run before any
     * stage can save this step (a checkpoint needs every stage's part). */
    const double grad_sq = o->clip > 0 ? w->grad_norm * w->grad_norm
                                       : nb_grad_sum_squares(st->grads, st->tensors, st->n_tensors);
    if (!isfinite(grad_sq)) return train_diverged(step, "the gradient norm", sqrt(grad_sq), NULL);
    float lr = nb_schedule_lr(&sh->sched, step);
    const float aux_lr = o->aux_lr * (lr / o->schedule.lr);
    if (mine.tau > 0) {
        const float *old = weights_of(w, step > (int)mine.tau ? step - (int)mine.tau : 0);
        if (!old) return -1;
        mine.version_sq = nb_distance_sq(st->params, old, st->tensors, st->n_tensors);
    }
    nb_optimizer_step(w->opt, st->grads, st->params, lr, aux_lr, w->d);
    nb_stash_apply(w->stash, st->params, w->d, step, NULL, NULL);
    mine.update_sq = nb_grad_sum_squares(w->d, st->tensors, st->n_tensors);
    if (!isfinite(mine.update_sq)) return train_diverged(step, "the update's norm", sqrt(mine.update_sq), NULL);
    memset(st->grads, 0, sizeof(float) * st->n_params);
    w->updates++;
    count_op(w, NB_PIPE_UPDATE, nb_now() - t - (w->waited - waited0));
    if (tied_split(w) && is_first(w) &&
        nb_link_send(w->link, sh->P - 1, tag(TAG_TIED_W, w->updates), st->params + st->tensors[0].offset,
                     sizeof(float) * embed_numel(w)))
        return -1;
    if (!is_first(w)) {
        if (nb_link_send(w->link, 0, tag(TAG_STATS, step), &mine, sizeof mine)) return -1;
    } else {
        step_stats sum = mine;  /* sums in stage order, as the one-process trainer's */
        for (int i = 1; i < sh->P; i++) {
            step_stats part;
            if (nb_link_recv(w->link, i, tag(TAG_STATS, step), &part, sizeof part)) return -1;
            sum.update_sq += part.update_sq;
            sum.version_sq += part.version_sq;
            sum.tau = part.tau > sum.tau ? part.tau : sum.tau;
            if (i == sh->P - 1) sum.loss = part.loss;
        }
        w->stats[step] = sum;
        w->grad_norms[step] = w->grad_norm;
        w->step_time[step] = nb_now() - w->t0 - w->eval;
    }
    if (step == sh->steady_from - 1) w->steady[0] = mark_now(w);
    if (step == sh->steady_to - 1) w->steady[1] = mark_now(w);
    if (stop_on_request(w, step)) return -1;
    int last = step == w->end - 1;
    double val = NAN;
    if (o->val_pattern && train_evaluates(o, step, last)) {
        if (evaluate(w, step, &val)) return -1;
        if (is_first(w) && !isfinite(val)) return train_diverged(step, "the validation loss", val, sh->last_saved);
    }
    if (is_first(w)) {
        w->val_loss[step] = val;
        if (report_step(w, step)) return -1;
    }
    /* After the metrics line: a checkpoint never holds a step whose line a kill could still lose. */
    if (o->save_dir && (last || (o->save_every && (step + 1) % o->save_every == 0)) && checkpoint(w, step)) return -1;
    /* Then --keep's proof (see train_weights_proven), which may prune older checkpoints: a finite
     * validation loss of the weights after step t; or, without validation data, every stage ran step t
     * with a finite loss and gradient (they reported after their checks) on versions no older than t - tau. */
    if (is_first(w) && !o->val_pattern) train_weights_proven(o, step - (int)w->stats[step].tau, &w->proven);
    else if (is_first(w) && !isnan(val)) train_weights_proven(o, step + 1, &w->proven);
    return 0;
}

/* The validation loss of the weights after update `step`, as nb_evaluate computes it: each
 * stage forwards the validation batches on its current weights; the last sends the mean. */
static int evaluate(worker *w, int step, double *val) {
    run_shared *sh = w->sh;
    const nb_train_options *o = sh->o;
    double t = nb_now(), total = 0;
    if (ensure_tied_copy(w)) return -1;
    if (w->val) nb_loader_reset(w->val);
    for (int b = 0; b < o->eval_batches; b++) {
        float l = 0;
        if ((is_first(w) || is_last(w)) && nb_loader_next(w->val, w->tokens, w->targets)) return -1;
        if (!is_first(w) && nb_link_recv(w->link, w->s - 1, tag(TAG_EVAL, b), w->x_in, act_bytes(sh))) return -1;
        if (nb_stage_forward(w->st, w->st->params, w->eval_slot, w->tokens, w->x_in, w->targets, &l)) return -1;
        if (!is_last(w) && nb_link_send(w->link, w->s + 1, tag(TAG_EVAL, b), nb_acts_output(w->eval_slot), act_bytes(sh)))
            return -1;
        total += l;
    }
    double loss = total / o->eval_batches;
    if (sh->P > 1 && is_last(w) && nb_link_send(w->link, 0, tag(TAG_EVAL_LOSS, step), &loss, sizeof loss)) return -1;
    if (sh->P > 1 && is_first(w) && nb_link_recv(w->link, sh->P - 1, tag(TAG_EVAL_LOSS, step), &loss, sizeof loss))
        return -1;
    *val = loss;
    w->eval += nb_now() - t;
    return 0;
}

/* This stage's share of the run's state, as the checkpoint code sees it (its arrays are indexed by stage;
 * a stage fills its own entry only): its optimizer and weight versions, and its loader if it has one. */
static int own_parts(const worker *w, train_parts *p) {
    p->model = w->sh->model;
    p->train = w->train;
    p->opt = calloc((size_t)w->sh->P, sizeof *p->opt);
    p->stash = calloc((size_t)w->sh->P, sizeof *p->stash);
    if (!p->opt || !p->stash) {
        free(p->opt);
        free(p->stash);
        return nb_fail("out of memory");
    }
    p->opt[w->s] = w->opt;
    p->stash[w->s] = w->stash;
    return 0;
}

static void free_parts(train_parts *p) {
    free(p->opt);
    free(p->stash);
}

/* Writes this stage's part of the checkpoint after update `step`. The first stage's loader has read
 * ahead into the next step: its position is saved as it was at the start of that step. */
static int write_part(worker *w, int step, const char *dir) {
    run_shared *sh = w->sh;
    train_parts parts;
    if (own_parts(w, &parts)) return -1;
    const uint64_t now = w->train ? nb_loader_position(w->train) : 0;
    int rc = 0;
    if (is_first(w)) {
        const uint64_t boundary = step + 1 < sh->S && w->step_pos[step + 1] != UINT64_MAX ? w->step_pos[step + 1] : now;
        rc = nb_loader_seek(w->train, boundary);
    }
    rc = rc || train_state_save_part(dir, &parts, w->s, step + 1, sh->o);
    if (is_first(w) && nb_loader_seek(w->train, now)) rc = -1;
    free_parts(&parts);
    return rc;
}

/* What a stage tells the first once it has written its part of a checkpoint. */
typedef struct {
    int failed;
    char error[1024];
} save_status;

/* A checkpoint after update `step`: every stage writes its own part as soon as it has made that
 * update (no stage waits for another, and no stage's state passes through another), then tells the
 * first, which completes the checkpoint (its indexes, then the rename) once every part is there. A
 * part that could not be written fails the run, naming the newest complete checkpoint. */
static int checkpoint(worker *w, int step) {
    run_shared *sh = w->sh;
    const nb_train_options *o = sh->o;
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/step_%06d", o->save_dir, step + 1);
    double t = nb_now();
    save_status mine = {0, ""};
    const double weights_sq = nb_grad_sum_squares(w->st->params, w->st->tensors, w->st->n_tensors);
    if (!isfinite(weights_sq)) {  /* no checkpoint of non-finite weights, ever (see train_diverged) */
        train_diverged(step, "the weights' sum of squares", weights_sq, NULL);
        mine.failed = 1;
        snprintf(mine.error, sizeof mine.error, "stage %d: %s", w->s, nb_last_error());
    } else if (write_part(w, step, dir)) {
        mine.failed = 1;
        snprintf(mine.error, sizeof mine.error, "stage %d: %s", w->s, nb_last_error());
    }
    if (!is_first(w)) {
        w->eval += nb_now() - t;  /* like evaluation, not training time */
        return nb_link_send(w->link, 0, tag(TAG_SAVED, step), &mine, sizeof mine);
    }
    for (int i = 1; i < sh->P; i++) {
        save_status part;
        if (recv_waiting(w, i, tag(TAG_SAVED, step), &part, sizeof part)) return -1;
        if (part.failed && !mine.failed) mine = part;
    }
    if (!mine.failed && train_sync_metrics(w->metrics, o->out_dir)) {
        mine.failed = 1;
        snprintf(mine.error, sizeof mine.error, "%s", nb_last_error());
    }
    if (mine.failed) train_state_abort(dir);  /* every stage is done with the folder */
    if (mine.failed ? nb_fail("%s", mine.error) : train_state_commit(dir, sh->model)) {
        train_save_failed(dir, sh->last_saved);
        return -1;
    }
    snprintf(sh->last_saved, sizeof sh->last_saved, "%s", dir);
    if (!o->quiet) train_report_checkpoint("saved", dir, nb_now() - t);
    w->eval += nb_now() - t;
    return 0;
}

static void report_resume(const run_shared *sh, double seconds) {
    if (sh->o->quiet) return;
    train_report_checkpoint("loaded", sh->o->resume_dir, seconds);
    printf("resumed from %s at step %d\n", sh->o->resume_dir, sh->start);
}

/* Loads this stage's share of the checkpoint --resume names (either layout, any split). */
static int resume_stage(worker *w) {
    run_shared *sh = w->sh;
    const nb_train_options *o = sh->o;
    train_parts parts;
    int start = 0;
    double t = nb_now();
    if (own_parts(w, &parts)) return -1;
    int rc = train_state_load_stages(o->resume_dir, &parts, w->s, w->s, &start, o);
    free_parts(&parts);
    if (rc) return -1;  /* a checkpoint past --steps is refused there */
    sh->start = start;
    w->updates = w->copy_version = start;
    snprintf(sh->last_saved, sizeof sh->last_saved, "%s", o->resume_dir);
    /* MPI: the first rank's time (the others load theirs meanwhile); threads: setup_and_resume's */
    if (is_first(w) && o->transport == NB_TRANSPORT_MPI) report_resume(sh, nb_now() - t);
    return 0;
}

/* ---- one worker ---- */

static void worker_free(worker *w) {
    nb_pipe_free(&w->cut);
    for (int i = 0; w->slots && i < w->n_slots; i++) nb_acts_free(w->slots[i]);
    nb_acts_free(w->eval_slot);
    free(w->slots);
    free(w->slot_mb);
    nb_optimizer_free(w->opt);
    nb_stash_free(w->stash);
    free(w->d);
    free(w->x_in);
    free(w->dout);
    free(w->tied_buf);
    if (w->train) nb_loader_free(w->train);
    if (w->val) nb_loader_free(w->val);
    free(w->tokens);
    free(w->targets);
    free(w->stats);
    free(w->val_loss);
    free(w->step_time);
    free(w->grad_norms);
    free(w->step_pos);
    if (w->metrics) fclose(w->metrics);
}

/* The most forwards in flight (done, backward not yet) in this stage's action list. */
static int slots_needed(const nb_pipe_schedule *sc, int s) {
    int inflight = 0, peak = 1;
    for (size_t k = sc->start[s]; k < sc->start[s + 1]; k++) {
        if (sc->actions[k].op == NB_PIPE_FORWARD && ++inflight > peak) peak = inflight;
        if (sc->actions[k].op == NB_PIPE_BACKWARD) inflight--;
    }
    return peak;
}

static double worker_bytes(const worker *w) {
    const run_shared *sh = w->sh;
    double b = 2.0 * sizeof(float) * w->st->n_params + nb_stash_bytes(w->stash) + sizeof(float) * w->st->n_params;
    for (int i = 0; i < nb_optimizer_state_count(w->opt); i++) {
        const char *name;
        float *data;
        size_t n;
        if (!nb_optimizer_state(w->opt, i, &name, &data, &n)) b += sizeof(float) * (double)n;
    }
    b += (double)(w->n_slots + 1) * nb_acts_bytes(w->st, sh->o->batch, sh->T) + 2.0 * act_bytes(sh);
    return b;
}

static int worker_setup(worker *w) {
    run_shared *sh = w->sh;
    const nb_train_options *o = sh->o;
    nb_stage *st = w->st;
    const size_t BT = (size_t)o->batch * sh->T;
    w->n_slots = slots_needed(sh->sc, w->s);
    w->slots = calloc((size_t)w->n_slots, sizeof *w->slots);
    w->slot_mb = malloc(sizeof(int) * (size_t)w->n_slots);
    w->d = calloc(st->n_params, sizeof(float));
    w->x_in = malloc(act_bytes(sh));
    w->dout = malloc(act_bytes(sh));
    w->tokens = calloc(BT, sizeof(int));
    w->targets = calloc(BT, sizeof(int));
    if (o->model.tied && is_first(w) && sh->P > 1) w->tied_buf = malloc(sizeof(float) * embed_numel(w));
    if (is_first(w)) {
        w->stats = calloc((size_t)sh->S, sizeof *w->stats);
        w->val_loss = malloc(sizeof(double) * (size_t)sh->S);
        w->step_time = calloc((size_t)sh->S, sizeof(double));
        w->grad_norms = calloc((size_t)sh->S, sizeof(double));
        if ((w->step_pos = malloc(sizeof(uint64_t) * (size_t)sh->S)))
            for (int t = 0; t < sh->S; t++) w->step_pos[t] = UINT64_MAX;
    }
    if (!w->slots || !w->slot_mb || !w->d || !w->x_in || !w->dout || !w->tokens || !w->targets ||
        (o->model.tied && is_first(w) && sh->P > 1 && !w->tied_buf) ||
        (is_first(w) && (!w->stats || !w->val_loss || !w->step_time || !w->grad_norms || !w->step_pos)))
        return nb_fail("out of memory");
    for (int i = 0; i < w->n_slots; i++) {
        w->slot_mb[i] = -1;
        if (!(w->slots[i] = nb_acts_create(st, o->batch, sh->T))) return -1;
    }
    if (o->val_pattern && !(w->eval_slot = nb_acts_create(st, o->batch, sh->T))) return -1;
    if (nb_optimizer_create(&w->opt, &o->optim, st->tensors, st->n_tensors, st->n_params)) return -1;
    if (nb_stash_create(&w->stash, &o->delay, w->s, sh->P, sh->S, st->params, st->n_params)) return -1;
    if ((is_first(w) || is_last(w)) &&
        nb_loader_open(&w->train, o->train_pattern, o->batch, sh->T, o->model.vocab_size, o->data_seed, 0, 1))
        return -1;
    if (o->val_pattern && (is_first(w) || is_last(w)) &&
        nb_loader_open(&w->val, o->val_pattern, o->batch, sh->T, o->model.vocab_size, 0, 0, 1))
        return -1;
    if (o->save_dir && nb_fs_mkdirs(o->save_dir, "--save-dir")) return -1;
    memset(st->grads, 0, sizeof(float) * st->n_params);
    if (st->tied_head_grad) memset(st->tied_head_grad, 0, sizeof(float) * embed_numel(w));
    w->ready = 1;
    return 0;
}

static void pin_worker(const worker *w) {
    const run_shared *sh = w->sh;
    if (!sh->pin || sh->n_cpus < 1) return;
    cpu_set_t set;
    CPU_ZERO(&set);
    for (int k = 0; k < sh->threads; k++) CPU_SET(sh->cpus[(w->s * sh->threads + k) % sh->n_cpus], &set);
    pthread_setaffinity_np(pthread_self(), sizeof set, &set);
}

/* Test hook: NB_PIPELINE_FAULT=STAGE:STEP makes that stage fail (or, with :kill, die by SIGKILL; with
 * :stall, stop by SIGSTOP, as a hung process) at the start of that step's update, so that tests can
 * check that the others stop. */
static int injected_fault(const worker *w, int step) {
    const char *spec = getenv("NB_PIPELINE_FAULT");
    int fs = -1, ft = -1;
    char how[16] = "";
    if (!spec || sscanf(spec, "%d:%d:%15s", &fs, &ft, how) < 2 || fs != w->s || ft != step) return 0;
    if (!strcmp(how, "kill")) raise(SIGKILL);
    if (!strcmp(how, "stall")) {
        raise(SIGSTOP);
        return 0;  /* continued: as if it had been slow */
    }
    return nb_fail("injected fault (NB_PIPELINE_FAULT=%s)", spec);
}

static int run_actions(worker *w) {
    w->t0 = nb_now();
    w->steady[0] = mark_now(w);
    /* w->sc may be cut short during an update (stop_on_request); its list starts as before. */
    for (w->pos = 0; w->pos < w->sc->start[w->s + 1] - w->sc->start[w->s]; w->pos++) {
        const nb_pipe_action *a = &w->sc->actions[w->sc->start[w->s] + w->pos];
        int rc;
        if (a->step < w->sh->start) continue;  /* done before the checkpoint this run resumed */
        if (a->op == NB_PIPE_FORWARD) rc = run_forward(w, a);
        else if (a->op == NB_PIPE_BACKWARD) rc = run_backward(w, a);
        else rc = injected_fault(w, a->step) ? -1 : run_update(w, a->step);
        if (rc) return -1;
    }
    return ensure_tied_copy(w);
}

static stage_report report_of(const worker *w) {
    double now = nb_now();
    const mark end = w->steady[1].t > 0 ? w->steady[1] : (mark){now, w->busy, w->eval}, *start = &w->steady[0];
    stage_report r = {w->busy, w->eval, now - w->t0, end.busy - start->busy, end.t - start->t, end.eval - start->eval,
                      worker_bytes(w), w->n_slots, 0, 0, 0};
    double *mean[3] = {&r.forward, &r.backward, &r.update};
    for (int op = 0; op < 3; op++) *mean[op] = w->op_count[op] ? w->op_time[op] / w->op_count[op] : 0;
    return r;
}

static int finish(worker *w, stage_report *reports);

/* The first stage writes metrics.jsonl; opened once the step a resumed run starts at is known
 * (threads: after setup_and_resume), since a resumed run keeps the lines of the steps before it only. */
static int open_metrics(worker *w) {
    const nb_train_options *o = w->sh->o;
    if (!is_first(w) || !o->out_dir) return 0;
    if (nb_fs_mkdirs(o->out_dir, "--out")) return -1;
    w->metrics = train_open_metrics(o->out_dir, o->resume_dir ? w->sh->start : -1);
    return w->metrics ? 0 : -1;
}

static void *worker_main(void *arg) {
    worker *w = arg;
    run_shared *sh = w->sh;
    pin_worker(w);
    omp_set_num_threads(sh->threads);
    stage_report *reports = calloc((size_t)sh->P, sizeof *reports);
    int rc = !reports ? nb_fail("out of memory")
             : w->ready ? 0
                        : (is_first(w) && train_lock_run(sh->o, sh->locks)) || worker_setup(w) ||
                              (sh->o->resume_dir && resume_stage(w));
    if (!rc) rc = open_metrics(w);
    if (!rc) rc = run_actions(w);
    if (!rc) {
        reports[w->s] = report_of(w);
        if (!is_first(w)) {
            rc = nb_link_send(w->link, 0, tag(TAG_DONE, 0), &reports[w->s], sizeof(stage_report));
            /* A process holds only its own stage's weights: the first stage gathers them. */
            if (!rc && sh->o->transport == NB_TRANSPORT_MPI)
                rc = nb_link_send(w->link, 0, tag(TAG_PARAMS, 0), w->st->params, sizeof(float) * w->st->n_params);
        } else {
            rc = finish(w, reports);
        }
    }
    if (rc) {
        snprintf(w->error, sizeof w->error, "%s", nb_last_error());
        w->failed = 1;
        if (w->stopped != STOP_REPORTED) nb_link_fail(w->link, w->error);  /* the others have finished */
    }
    free(reports);
    return NULL;
}

/* ---- the first stage writes the run's files ---- */

/* The share of the time (evaluation and checkpoints excluded) a stage was not computing. */
static double idle_fraction(double busy, double wall, double eval) { return 1.0 - busy / (wall - eval); }

static void print_report(const worker *w, const stage_report *rep, double tokens_per_s) {
    const run_shared *sh = w->sh;
    printf("pipeline %s, %d stage(s) on %s, %d GEMM thread(s) each: %.0f tok/s\n", nb_pipe_kind_name(sh->sc->kind),
           sh->P, nb_transport_name((nb_transport_kind)sh->o->transport), sh->threads, tokens_per_s);
    for (int i = 0; i < sh->P; i++) {
        const nb_stage *st = &sh->model->stages[i];
        printf("  stage %d: blocks %d..%d%s%s\n", i, st->first_block, st->first_block + st->n_blocks - 1,
               st->has_embed ? ", embedding" : "", st->has_head ? ", head and loss" : "");
    }
    for (int i = 0; i < sh->P; i++) {
        double idle = idle_fraction(rep[i].busy, rep[i].wall, rep[i].eval);
        double steady = idle_fraction(rep[i].steady_busy, rep[i].steady_wall, rep[i].steady_eval);
        printf("  stage %d: busy %.2f s, idle %.1f%% (steady state, steps %d..%d: %.1f%%), %d activation slot(s), "
               "%.1f MiB\n", i, rep[i].busy, 100 * idle, sh->steady_from + 1, sh->steady_to, 100 * steady, (int)rep[i].slots,
               rep[i].bytes / 1048576.0);
    }
}

/* The measured costs as a `nobubble schedule` command, to project the run to other depths. */
static void print_costs(const worker *w, const stage_report *rep) {
    const run_shared *sh = w->sh;
    printf("  measured costs (ms): nobubble schedule --kind %s --stages %d --microbatches %d",
           nb_pipe_kind_name(sh->sc->kind), sh->P, sh->sc->n_micro);
    const char *flags[3] = {"--forward-cost", "--backward-cost", "--update-cost"};
    for (int op = 0; op < 3; op++) {
        printf(" %s ", flags[op]);
        for (int i = 0; i < sh->P; i++) {
            const double *v = op == 0 ? &rep[i].forward : op == 1 ? &rep[i].backward : &rep[i].update;
            printf("%s%.3f", i ? "," : "", 1e3 * *v);
        }
    }
    printf("\n");
}

static void summary_extra(const worker *w, const stage_report *rep, char *buf, size_t size) {
    const run_shared *sh = w->sh;
    size_t n = (size_t)snprintf(buf, size, "\"pipeline\": {\"kind\": \"%s\", \"transport\": \"%s\", "
                                "\"threads_per_stage\": %d, \"steady_steps\": [%d, %d], \"stages\": [",
                                nb_pipe_kind_name(sh->sc->kind), nb_transport_name((nb_transport_kind)sh->o->transport),
                                sh->threads, sh->steady_from + 1, sh->steady_to);
    for (int i = 0; i < sh->P && n < size; i++)
        n += (size_t)snprintf(buf + n, size - n,
                              "%s{\"busy_s\": %.6f, \"eval_s\": %.6f, \"wall_s\": %.6f, \"idle_fraction\": %.6f, "
                              "\"steady_idle_fraction\": %.6f, \"memory_bytes\": %.0f, \"forward_s\": %.6g, "
                              "\"backward_s\": %.6g, \"update_s\": %.6g}",
                              i ? ", " : "", rep[i].busy, rep[i].eval, rep[i].wall,
                              idle_fraction(rep[i].busy, rep[i].wall, rep[i].eval),
                              idle_fraction(rep[i].steady_busy, rep[i].steady_wall, rep[i].steady_eval), rep[i].bytes,
                              rep[i].forward, rep[i].backward, rep[i].update);
    if (n < size) snprintf(buf + n, size - n, "]}");
}

/* The first stage, after update t: the progress line and the metrics line of step t (a failed write
 * stops the run). */
static int report_step(worker *w, int t) {
    const run_shared *sh = w->sh;
    const double tokens_per_step = (double)sh->o->batch * sh->T * sh->M;
    const double dt = w->step_time[t] - (t ? w->step_time[t - 1] : 0);
    const step_stats *s = &w->stats[t];
    const float lr = nb_schedule_lr(&sh->sched, t);
    if (!sh->o->quiet && (t == sh->S - 1 || t % sh->o->log_every == 0 || !isnan(w->val_loss[t]))) {
        printf("step %5d/%d | loss %.4f | lr %.3e | %6.0f tok/s", t + 1, sh->S, s->loss, lr,
               dt > 0 ? tokens_per_step / dt : 0);
        if (!isnan(w->val_loss[t])) printf(" | val %.4f", w->val_loss[t]);
        printf("\n");
        fflush(stdout);
    }
    if (w->metrics) {
        train_metrics m = {t, s->loss, lr, tokens_per_step * (t + 1), w->step_time[t], dt > 0 ? tokens_per_step / dt : 0,
                           sqrt(s->update_sq), (int)s->tau, sqrt(s->version_sq),
                           sh->o->clip > 0 ? w->grad_norms[t] : NAN, w->val_loss[t]};
        return train_write_metrics(w->metrics, sh->o->out_dir, &m);
    }
    return 0;
}

static int finish(worker *w, stage_report *reports) {
    run_shared *sh = w->sh;
    const nb_train_options *o = sh->o;
    for (int i = 1; i < sh->P; i++) {
        if (nb_link_recv(w->link, i, tag(TAG_DONE, 0), &reports[i], sizeof reports[i])) return -1;
        if (o->transport == NB_TRANSPORT_MPI) {
            nb_stage *st = &sh->model->stages[i];
            if (nb_model_alloc_stage(sh->model, i) ||
                nb_link_recv(w->link, i, tag(TAG_PARAMS, 0), st->params, sizeof(float) * st->n_params))
                return -1;
        }
    }
    if (w->stopped) {
        w->stopped = STOP_REPORTED;
        if (o->save_dir) return nb_fail("stopped on request after step %d; resume with --resume %s", w->end, sh->last_saved);
        return nb_fail("stopped on request after step %d (no --save-dir: nothing saved)", w->end);
    }
    nb_model_sync_tied_copy(sh->model);
    nb_train_result *res = w->res;
    const int ran = sh->S - sh->start;
    const double train_s = ran > 0 ? w->step_time[sh->S - 1] : 0;
    res->steps = sh->S;
    res->final_train_loss = ran > 0 ? w->stats[sh->S - 1].loss : NAN;
    res->final_val_loss = ran > 0 ? w->val_loss[sh->S - 1] : NAN;
    res->seconds = train_s;
    res->tokens_per_s = train_s > 0 ? (double)o->batch * sh->T * sh->M * ran / train_s : 0;
    res->weights_hash = nb_model_weights_hash(sh->model);
    res->primary = 1;
    if (!o->quiet) {
        print_report(w, reports, res->tokens_per_s);
        print_costs(w, reports);
        fflush(stdout);
    }
    if (w->metrics && (ferror(w->metrics) || fflush(w->metrics))) return nb_fail("%s/metrics.jsonl: write failed", o->out_dir);
    if (o->out_dir) {
        char extra[8192];
        summary_extra(w, reports, extra, sizeof extra);
        if (train_write_summary(o, res, sh->T, extra)) return -1;
    }
    if (o->export_dir && nb_export_hf(sh->model, o->export_dir)) return -1;
    return 0;
}

/* ---- setting up a run ---- */

static int check_pipeline_options(const nb_train_options *o) {
    nb_pipe_kind kind = (nb_pipe_kind)o->pipeline;
    if ((unsigned)kind > NB_PIPE_2BW) return nb_fail("--pipeline %d: expected one of %s", o->pipeline, NB_PIPE_KINDS);
    nb_delay_options want = o->delay;
    nb_delay_parse(nb_pipe_delay_name(kind), &want);
    if (o->delay.mode != want.mode)
        return nb_fail("--pipeline %s runs with --delay %s (its weight versions), not --delay %s", nb_pipe_kind_name(kind),
                       nb_delay_mode_name(want.mode), nb_delay_mode_name(o->delay.mode));
    if (kind == NB_PIPE_PIPEDREAM && o->microbatches != 1)
        return nb_fail("--pipeline pipedream updates after every micro-batch: expected --microbatches 1, got %d "
                       "(each update's batch is --batch sequences)", o->microbatches);
    if (kind == NB_PIPE_GPIPE && (o->delay.sync_start || o->delay.sync_cooldown || o->delay.ef || o->delay.taylor > 0))
        return nb_fail("--pipeline gpipe is synchronous: --sync-start, --sync-cooldown, --ef and --taylor do not apply");
    if (o->transport != NB_TRANSPORT_THREADS && o->transport != NB_TRANSPORT_MPI)
        return nb_fail("--transport %d: expected one of %s", o->transport, NB_TRANSPORT_KINDS);
    if (o->threads_per_stage < 0) return nb_fail("--threads-per-stage %d: expected >= 0 (0: cores / stages)", o->threads_per_stage);
    if (!(o->peer_timeout >= 0 && o->peer_timeout <= 1e6))
        return nb_fail("--peer-timeout %g: expected seconds in [0, 1e6] (0: wait for ever)", (double)o->peer_timeout);
    return 0;
}

/* The schedule: GPipe as generated; the stream kinds with each step's version from the delay
 * options (synchronous start and cooldown make some steps flush). */
static int make_schedule(const nb_train_options *o, nb_pipe_schedule *sc) {
    nb_pipe_kind kind = (nb_pipe_kind)o->pipeline;
    const int P = o->stages, S = o->steps * (kind == NB_PIPE_PIPEDREAM ? o->microbatches : 1);
    if (kind == NB_PIPE_GPIPE) return nb_pipe_generate(sc, kind, P, o->microbatches, o->steps) || nb_pipe_validate(sc);
    int *versions = malloc(sizeof(int) * (size_t)S * P);
    if (!versions) return nb_fail("out of memory");
    for (int t = 0; t < S; t++)
        for (int s = 0; s < P; s++) {
            int v = t - nb_delay_tau(&o->delay, s, P, t, S);
            versions[(size_t)t * P + s] = v > 0 ? v : 0;  /* versions before 0 are w_0 */
        }
    int rc = nb_pipe_generate_versions(sc, kind, P, o->microbatches, S, versions);
    free(versions);
    return rc || nb_pipe_validate(sc);
}

static int process_cpus(run_shared *sh) {
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set)) return 1;
    int n = CPU_COUNT(&set);
    if (!(sh->cpus = malloc(sizeof(int) * (size_t)(n ? n : 1)))) return 1;
    for (int c = 0, k = 0; c < CPU_SETSIZE && k < n; c++)
        if (CPU_ISSET(c, &set)) sh->cpus[k++] = c;
    sh->n_cpus = n;
    return n;
}

/* Threads: every worker set up here, then its share of the checkpoint (if any) loaded. */
static int setup_and_resume(run_shared *sh, worker *ws) {
    for (int i = 0; i < sh->P; i++)
        if (worker_setup(&ws[i])) return -1;
    if (!sh->o->resume_dir) return 0;
    double t = nb_now();
    for (int i = 0; i < sh->P; i++)
        if (resume_stage(&ws[i])) return -1;
    report_resume(sh, nb_now() - t);
    return 0;
}

static int run_threads(run_shared *sh, worker *ws) {
    if (train_lock_run(sh->o, sh->locks) || setup_and_resume(sh, ws)) return -1;
    nb_hub *hub = nb_hub_create(sh->P);
    pthread_t *tids = calloc((size_t)sh->P, sizeof *tids);
    int rc = 0, started = 0;
    if (!hub || !tids) {
        nb_hub_free(hub);
        free(tids);
        return nb_fail("out of memory");
    }
    /* The workers start with the stop signals blocked (they run the GEMMs; a signal is taken by
     * the CLI's signal thread, or a handler on this thread, which only waits: util/signals.h). */
    sigset_t old;
    nb_signals_block(&old);
    for (; started < sh->P; started++) {
        ws[started].link = nb_hub_link(hub, started);
        nb_link_set_timeout(ws[started].link, sh->o->peer_timeout);
        if (pthread_create(&tids[started], NULL, worker_main, &ws[started])) {
            nb_link_fail(ws[started].link, "could not start its thread");
            rc = nb_fail("could not start the thread of stage %d", started);
            break;
        }
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    for (int i = 0; i < started; i++) pthread_join(tids[i], NULL);
    const char *failure = nb_hub_failure(hub);
    if (failure && !rc) rc = nb_fail("%s", failure);
    if (!rc && ws[0].failed) rc = nb_fail("%s", ws[0].error);  /* stopped on request */
    nb_hub_free(hub);
    free(tids);
    return rc;
}

static int run_mpi(run_shared *sh, worker *ws) {
    nb_link *link;
    if (nb_mpi_link(&link, sh->P)) return -1;
    int s = nb_link_stage(link);
    worker *w = &ws[s];
    w->link = link;
    nb_link_set_timeout(link, sh->o->peer_timeout);
    nb_model_keep_only(sh->model, s);  /* this process holds its own stage only */
    worker_main(w);
    int rc = w->failed ? nb_fail("%s", w->error) : 0;
    nb_link_close(link);
    return rc;
}

int train_pipeline(const nb_train_options *o, nb_train_result *res) {
    const int T = o->seq_len ? o->seq_len : o->model.context;
    memset(res, 0, sizeof *res);
    res->final_val_loss = NAN;
    if (nb_config_validate(&o->model) || train_check_options(o, T) || check_pipeline_options(o)) return -1;
    const int S = o->steps * (o->pipeline == NB_PIPE_PIPEDREAM ? o->microbatches : 1);
    if (nb_delay_validate(&o->delay, S, o->stages)) return -1;
    if (o->transport == NB_TRANSPORT_MPI && !nb_mpi_available())
        return nb_fail("--transport mpi: this nobubble was built without MPI (install libopenmpi-dev and rebuild)");
    nb_model model;
    nb_pipe_schedule sc;
    memset(&sc, 0, sizeof sc);
    /* Without --split the stages are balanced by their FLOPs: the last also runs the head. */
    int balanced[1024];
    const int *split = o->split;
    if (!split && o->stages <= 1024) {
        if (nb_config_balanced_split(&o->model, T, o->stages, balanced)) return -1;
        split = balanced;
    }
    if (nb_model_create(&model, &o->model, o->stages, split)) return -1;
    run_shared sh = {.o = o, .sc = &sc, .model = &model, .T = T, .P = o->stages,
                     .M = o->pipeline == NB_PIPE_PIPEDREAM ? 1 : o->microbatches, .S = S, .threads = 1,
                     .sched = o->schedule};
    sh.sched.total_steps = S;
    nb_fs_lock_init(&sh.locks[0]);
    nb_fs_lock_init(&sh.locks[1]);
    sh.steady_from = S / 2;
    sh.steady_to = S - 1 > sh.steady_from ? S - 1 : S;
    int n_cpus = process_cpus(&sh);
    if (o->transport == NB_TRANSPORT_MPI) {
        /* A rank bound by mpirun owns the CPUs it may run on; an unbound one (all of the machine's
         * CPUs) shares them with the other ranks of its node. */
        const char *local = getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
        int per_node = local && atoi(local) > 0 ? atoi(local) : 1;
        long online = sysconf(_SC_NPROCESSORS_ONLN);
        int share = n_cpus >= online ? n_cpus / per_node : n_cpus;
        sh.threads = o->threads_per_stage ? o->threads_per_stage : share;
    } else {
        sh.threads = o->threads_per_stage ? o->threads_per_stage : n_cpus / o->stages;
        sh.pin = 1;
    }
    if (sh.threads < 1) sh.threads = 1;
    worker *ws = calloc((size_t)o->stages, sizeof *ws);
    int rc = -1;
    if (!ws) {
        nb_fail("out of memory");
        goto done;
    }
    if (make_schedule(o, &sc)) goto done;
    nb_model_init(&model, o->seed);
    for (int i = 0; i < o->stages; i++)
        ws[i] = (worker){.sh = &sh, .s = i, .sc = &sc, .end = S, .st = &model.stages[i], .res = res};
    if (o->transport == NB_TRANSPORT_MPI) {
        rc = run_mpi(&sh, ws);
    } else {
        rc = run_threads(&sh, ws);
    }
done:
    for (int i = 0; ws && i < o->stages; i++) worker_free(&ws[i]);
    train_unlock_run(sh.locks);
    free(ws);
    free(sh.cpus);
    nb_pipe_free(&sc);
    nb_model_free(&model);
    return rc;
}
