/* The stage role of the executor: one pipeline stage's weights, optimizer, weight versions and
 * activation slots, and what each of its lowered actions does. A stage computes; it never decides:
 * progress, metrics, checkpoints' completion and the end of the run are the coordinator's.
 * Weight stashing: a forward and its backward run on the version their action names, held by the
 * stage's nb_stash; the update of step t is the same on every stage (tied sum, Taylor, global
 * clipping, optimizer, error feedback), so that any split and any schedule with the same versions
 * end on bitwise the same weights. nb_evaluate (`nobubble eval`) is the role's evaluation outside a run. */
#define _GNU_SOURCE
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "model/stage.h"
#include "runtime/link.h"
#include "train/exec/exec.h"
#include "train/run/run.h"
#include "train/run/state.h"
#include "util/alloc.h"
#include "util/clock.h"
#include "util/error.h"

/* A stage's clocks at one moment: wall time, computing, and evaluating or saving so far. */
/* The time spent in one kind of action and how many of them ran: the report's mean per action. */
typedef struct {
    double seconds;
    long count;
} op_timer;

/* The clocks at a moment: the time, the busy and aside seconds so far, and the forward, backward and
 * update timers (the steady window's costs are the differences between its two marks). */
typedef struct {
    double t, busy, aside;
    op_timer ops[3];
} mark;

typedef struct {
    exec_run *run;
    int s;
    nb_stage *st;
    nb_acts **slots, *eval_slot;
    int *slot_mb, n_slots, freed_slot;  /* freed_slot: the slot of the backward that ran last */
    nb_wgrad **wgrads;                  /* a split backward (ZB-H1): per slot, its micro-batch's weight gradients
                                           recorded by B for W (NULL when the schedule does not split) */
    nb_optimizer *opt;
    nb_stash *stash;
    float *d, *x_in, *dout, *tied_buf;  /* the stage's memory (a device's where it is placed on one) */
    void *staging;                      /* a stage on a device: the host's copy of what a message carries */
    size_t staging_bytes;
    double *norms;                      /* the squared gradient norms of every stage, this step */
    nb_loader *train, *val;
    int *tokens, *targets;
    uint64_t *step_pos;                 /* first stage: the loader's position at the start of each step */
    int updates;
    double eval_sum;
    /* The step's forward sums so far, what the sum over replicas adds besides the gradient: SUM_LOSS (the
     * last stage's losses), SUM_AUX (the MoE blocks' load-balancing losses), then from SUM_LOADS each MoE
     * block's expert loads (moe_blocks x n_experts). */
    double *sums;
    int n_sums, moe_blocks;
    float *load;  /* a MoE stage's one block's expert loads, read from the stage's memory (n_experts) */
    /* --data-parallel in one process (run->groups > 1): the step's groups of micro-batches so far, their
     * gradients (and a whole tied model's head part) and forward sums added in group order (fold) */
    float *group_grads, *group_tied;
    double *group_sums;
    exec_eval eval_msg;
    exec_stats stats;
    exec_saved saved;
    exec_report report;
    int end_msg, committed;
    double t0, busy, aside;
    double reduce_s;                    /* the seconds of this step's REDUCE, for its STATS */
    /* --dp-bucket-mib (replicas as MPI ranks, train_dp_buckets): the gradient's sum over the replicas in
     * buckets, each started during the step's last whole backward once its values are final (bucket_hook).
     * Bucket k holds grads[plan[k] .. plan[k - 1]) (plan[-1]: n_params); next_bucket: those started this step */
    size_t *plan;
    nb_link_bucket **buckets;           /* bucket k in flight, NULL once summed (or not started) */
    int n_plan, next_bucket;
    long buckets_started, buckets_early;  /* over the run: started in a backward, and summed before REDUCE */
    double reduce_total, bucket_wait;   /* over the run: REDUCE's seconds, and those spent finishing buckets */
    mark steady_start, steady_end;      /* the clocks at the steady window's ends (run->steady_from, steady_to) */
    op_timer forward_time, backward_time, update_time;  /* update_time: GRADS and APPLY, counted per APPLY */
} stage_role;

enum { SUM_LOSS, SUM_AUX, SUM_LOADS };

/* What a stage reads besides messages follows from what it holds: the embedding's stage reads the
 * tokens (and records where each step starts in them, for checkpoints), the head's stage the targets;
 * each runs its own loader with the same seed, so no tokens travel. */
static int reads_tokens(const stage_role *w) { return w->st->has_embed; }
static int reads_targets(const stage_role *w) { return w->st->has_head; }
/* With a tied embedding split over stages, the embedding's stage adds the head's gradient it receives. */
static int takes_head_grad(const stage_role *w) {
    return w->run->o->model.tied && w->st->has_embed && !w->st->has_head;
}
static size_t act_bytes(const stage_role *w) {
    return sizeof(float) * (size_t)w->run->o->batch * w->run->T * w->run->o->model.d_model;
}
static size_t embed_numel(const stage_role *w) {
    return (size_t)w->run->o->model.vocab_size * w->run->o->model.d_model;
}
static float *embedding(const stage_role *w, float *base) { return base + w->st->tensors[0].offset; }
/* The last stage's copy of a tied embedding: its last tensor. */
static float *tied_copy(const stage_role *w, float *base) {
    return base + w->st->tensors[w->st->n_tensors - 1].offset;
}
/* A stage placed on a device (--device cuda, guarded): its arrays are the backend's memory, which the
 * executor reaches only through the backend's calls (docs/gpu.md). */
static int on_device(const stage_role *w) { return nb_stage_on_device(w->st); }
static const nb_backend *memory(const stage_role *w) { return w->st->backend; }
static float *stage_floats(const stage_role *w, size_t n, const char *what) {
    return nb_stage_alloc(w->st, sizeof(float) * n, what);
}
static mark mark_now(const stage_role *w) {
    return (mark){nb_now(), w->busy, w->aside, {w->forward_time, w->backward_time, w->update_time}};
}

static void count_op(stage_role *w, op_timer *timer, double seconds) {
    w->busy += seconds;
    timer->seconds += seconds;
    timer->count++;
}
static double mean_time(const op_timer *timer) { return timer->count ? timer->seconds / timer->count : 0; }
/* The mean over the steady window (what a projection of the steady step needs: the first steps' page
 * faults and cold caches left out), else over the whole run (a run too short to have one). */
static double steady_mean(const op_timer *start, const op_timer *end, const op_timer *all) {
    const long n = end->count - start->count;
    return n > 0 ? (end->seconds - start->seconds) / n : mean_time(all);
}

/* A divergence's message gets the checkpoints to resume from once the run has stopped (nb_train). */
static int diverged(stage_role *w, int step, const char *what, double value) {
    (void)w;
    return train_diverged(step, what, value);
}

static const float *weights_of(stage_role *w, int version) {
    const float *p = nb_stash_version(w->stash, w->st->params, version, w->updates);
    if (!p) nb_fail("stage %d: weight version %d is not held after %d updates", w->s, version, w->updates);
    return p;
}

static int find_slot(const stage_role *w, int mb) {
    for (int i = 0; i < w->n_slots; i++)
        if (w->slot_mb[i] == mb) return i;
    return -1;
}

/* A forward's load-balancing losses and expert loads, added to the step's (the loads from the stage's memory: a
 * device's copied back). */
static void add_moe_stats(stage_role *w, const nb_acts *a) {
    const int E = w->st->cfg.n_experts;
    float *load = w->load;
    w->sums[SUM_AUX] += nb_acts_aux_loss(a);
    for (int l = 0, j = 0; l < w->st->n_blocks; l++) {
        const float *kept = nb_acts_expert_load(a, l);
        if (!kept) continue;
        nb_backend_to_host(w->st->backend, load, kept, sizeof(float) * (size_t)E);
        for (int e = 0; e < E; e++) w->sums[SUM_LOADS + (size_t)j * E + e] += load[e];
        j++;
    }
}

/* The step's MoE statistics into its STATS message (means over its micro-batches, every replica's), the
 * sums reset. */
static void moe_stats(stage_role *w) {
    const int E = w->st->cfg.n_experts, M = w->run->step_micro;
    w->stats.aux = w->sums[SUM_AUX] / M;
    w->stats.moe_blocks = w->moe_blocks;
    for (int j = 0; j < w->moe_blocks && j < EXEC_MOE_BLOCKS; j++) {
        const double *load = w->sums + SUM_LOADS + (size_t)j * E;
        double hi = load[0], lo = load[0];
        for (int e = 1; e < E; e++) hi = load[e] > hi ? load[e] : hi, lo = load[e] < lo ? load[e] : lo;
        w->stats.load_max[j] = (float)(hi / M);
        w->stats.load_min[j] = (float)(lo / M);
    }
    memset(w->sums + SUM_AUX, 0, sizeof(double) * (size_t)(w->n_sums - SUM_AUX));
}

/* Test hook: NB_PIPELINE_FAULT=STAGE:STEP makes that stage fail (or, with :kill, die by SIGKILL; with
 * :stall, stop by SIGSTOP, as a hung process) at the start of that step's update, so that tests can
 * check that the others stop; under --data-parallel, every replica's, or NB_PIPELINE_FAULT_REPLICA's only. */
static int injected_fault(const stage_role *w, int step) {
    const char *spec = getenv("NB_PIPELINE_FAULT"), *replica = getenv("NB_PIPELINE_FAULT_REPLICA");
    int fs = -1, ft = -1;
    char how[16] = "";
    if (!spec || sscanf(spec, "%d:%d:%15s", &fs, &ft, how) < 2 || fs != w->s || ft != step) return 0;
    if (replica && *replica && atoi(replica) != w->run->replica) return 0;
    if (!strcmp(how, "kill")) raise(SIGKILL);
    if (!strcmp(how, "stall")) {
        raise(SIGSTOP);
        return 0;  /* continued: as if it had been slow */
    }
    return nb_fail("injected fault (NB_PIPELINE_FAULT=%s)", spec);
}

/* The values the sum over replicas adds: the gradient, a whole tied model's head part (summed into the
 * embedding's at GRADS), the forward sums. */
typedef struct {
    void *values, *group;  /* this step's (or group's) values; the earlier groups' sum (one process) */
    size_t n, bytes;       /* how many, of how many bytes each */
    int stage_memory;      /* 1: the stage's memory (a device's where it is placed), 0: the host's records */
} summed;

enum { SUMMED_GRADS, SUMMED_TIED, SUMMED_FORWARD, SUMMED_PARTS };
static void summed_parts(const stage_role *w, summed part[SUMMED_PARTS]) {
    const nb_stage *st = w->st;
    part[SUMMED_GRADS] = (summed){st->grads, w->group_grads, st->n_params, sizeof(float), 1};
    part[SUMMED_TIED] = (summed){st->tied_head_grad, w->group_tied, st->tied_head_grad ? embed_numel(w) : 0,
                                 sizeof(float), 1};
    part[SUMMED_FORWARD] = (summed){w->sums, w->group_sums, (size_t)w->n_sums, sizeof(double), 0};
}

/* acc += x, dst = x, and x = 0 for a part's values, in the memory they are in: the stage's (through its backend
 * where it is a device's; its addition is float, the same bits as the host's loop), or the host's. */
static void add_part(const stage_role *w, const summed *p, void *acc, const void *x) {
    if (p->stage_memory && on_device(w)) nb_backend_add(memory(w), acc, x, p->n);
    else nb_link_add_values(acc, x, p->n, p->bytes);
}
static void copy_part(const stage_role *w, const summed *p, void *dst, const void *x) {
    if (p->stage_memory) nb_stage_copy(w->st, dst, x, p->n * p->bytes);
    else memcpy(dst, x, p->n * p->bytes);
}
static void zero_part(const stage_role *w, const summed *p, void *x) {
    if (p->stage_memory) nb_stage_zero(w->st, x, p->n * p->bytes);
    else memset(x, 0, p->n * p->bytes);
}

/* One process computing the replicas' groups in turn: group g's values end, added to the earlier groups'
 * sum (the first group's copied, as a replica's own values are: nb_link_replica_sum), and start again from
 * zero for the next group. The last group's are added at REDUCE. `forward`: the forward sums, at the
 * forward of the group's last micro-batch; else the gradients, at its backward. */
static void fold(stage_role *w, int g, int forward) {
    summed part[SUMMED_PARTS];
    summed_parts(w, part);
    for (int i = forward ? SUMMED_FORWARD : SUMMED_GRADS; i <= (forward ? SUMMED_FORWARD : SUMMED_TIED); i++) {
        if (!part[i].n) continue;
        if (g == 0) copy_part(w, &part[i], part[i].group, part[i].values);
        else add_part(w, &part[i], part[i].group, part[i].values);
        zero_part(w, &part[i], part[i].values);
    }
}

/* Where the step's micro-batch `mb` ends a group that one process folds (its index), or -1. */
static int group_ends(const stage_role *w, int mb) {
    const exec_run *run = w->run;
    if (run->groups == 1) return -1;
    const int j = mb % run->M, m = run->M / run->groups;
    return j % m == m - 1 && j / m < run->groups - 1 ? j / m : -1;
}

/* ---- data parallelism's buckets ---- */

int exec_bucket_plan(const size_t *starts, int n_starts, size_t n, size_t bucket, size_t *cuts) {
    int k = 0;
    size_t end = n;
    for (int i = 0; i < n_starts; i++)
        if (starts[i] < end && (end - starts[i] >= bucket || starts[i] == 0)) cuts[k++] = end = starts[i];
    return k;
}

static size_t bucket_end(const stage_role *w, int k) { return k ? w->plan[k - 1] : w->st->n_params; }

/* The buckets started this step whose transfers are done summed into the gradient (wait: every one, waiting
 * within the link's timeout), in any order: each value's sum is the same. On a failure the others are
 * dropped (the run is ending). Returns how many it summed, or -1. */
static int finish_buckets(exec_endpoint *e, int wait) {
    stage_role *w = e->role;
    int summed = 0;
    for (int k = 0; k < w->next_bucket; k++) {
        if (!w->buckets[k]) continue;
        const int rc = nb_link_bucket_finish(e->link, w->buckets[k], w->st->grads + w->plan[k], wait);
        if (rc) w->buckets[k] = NULL;  /* summed, or released by the failure */
        if (rc > 0) summed++;
        if (rc < 0) {
            for (int j = 0; j < w->next_bucket; j++) nb_link_bucket_drop(e->link, w->buckets[j]), w->buckets[j] = NULL;
            return -1;
        }
    }
    return summed;
}

/* nb_stage.grads_done during the step's last whole backward: grads[offset ..) is final, so every planned
 * bucket within it starts (its values sent to the other replicas, theirs received, while the backward goes
 * on); then the transfers in flight move on, and the buckets done are summed. */
static int bucket_hook(void *ctx, size_t offset, size_t n) {
    exec_endpoint *e = ctx;
    stage_role *w = e->role;
    (void)n;
    for (; w->next_bucket < w->n_plan && w->plan[w->next_bucket] >= offset; w->next_bucket++) {
        const int k = w->next_bucket;
        if (nb_link_bucket_start(e->link, w->st->grads + w->plan[k], bucket_end(w, k) - w->plan[k], sizeof(float),
                                 &w->buckets[k]))
            return -1;
        w->buckets_started++;
    }
    const int summed = finish_buckets(e, 0);
    if (summed < 0) return -1;
    w->buckets_early += summed;
    return 0;
}

/* Whether the backward running now (action e->pos) is the stage's last of step t before its REDUCE: no other
 * backward (or half of one) of step t follows first. Its gradient is then final range by range. */
static int last_backward(const exec_endpoint *e, int t) {
    const nb_low_schedule *low = e->low;
    for (size_t i = low->start[e->id] + e->pos + 1; i < low->start[e->id + 1]; i++) {
        const nb_low_action *a = &low->actions[i];
        if (a->step != t) continue;
        if (a->op == NB_LOW_REDUCE) return 1;
        if (a->op == NB_LOW_BACKWARD || a->op == NB_LOW_BACKWARD_INPUT || a->op == NB_LOW_BACKWARD_WEIGHT) return 0;
    }
    return 0;
}

/* The stage's host copy of its device memory's bytes, grown to at least `bytes`. */
static int ensure_staging(stage_role *w, size_t bytes) {
    if (bytes <= w->staging_bytes) return 0;
    free(w->staging);
    w->staging_bytes = 0;
    if (!(w->staging = nb_alloc(bytes, "a stage's host copy of its device's values"))) return -1;
    w->staging_bytes = bytes;
    return 0;
}

/* One part summed over the replicas (ranks) by the link, on the host: a device's values go through the stage's
 * host copy (the whole gradient at once: a device stage has no buckets). */
static int replica_sum(exec_endpoint *e, const summed *p) {
    stage_role *w = e->role;
    if (!(p->stage_memory && on_device(w))) return nb_link_replica_sum(e->link, p->values, p->n, p->bytes);
    const size_t bytes = p->n * p->bytes;
    if (ensure_staging(w, bytes)) return -1;
    nb_backend_to_host(memory(w), w->staging, p->values, bytes);
    if (nb_link_replica_sum(e->link, w->staging, p->n, p->bytes)) return -1;
    nb_backend_from_host(memory(w), p->values, w->staging, bytes);
    return 0;
}

/* REDUCE(t): the step's values summed over the replicas in replica order: by the transport where the
 * replicas are ranks, else the last group's added to the earlier groups' sum (x_g + (x_0 + ... + x_{g-1})
 * is (x_0 + ... + x_{g-1}) + x_g: an addition is commutative). The gradient, loss and statistics are then
 * the run's, the same on every replica. */
static int reduce(exec_endpoint *e, int t) {
    stage_role *w = e->role;
    if (injected_fault(w, t)) return -1;
    summed part[SUMMED_PARTS];
    summed_parts(w, part);
    const double t0 = nb_now();
    /* the buckets started in the backward, then the gradient no bucket holds (all of it without buckets) */
    if (finish_buckets(e, 1) < 0) return -1;
    const double waited = nb_now() - t0;
    if (w->next_bucket) part[SUMMED_GRADS].n = w->plan[w->next_bucket - 1];
    w->next_bucket = 0;
    for (int i = 0; i < SUMMED_PARTS; i++) {
        if (!part[i].n) continue;
        if (w->run->groups > 1) add_part(w, &part[i], part[i].values, part[i].group);
        else if (replica_sum(e, &part[i])) return -1;
    }
    const double took = nb_now() - t0;
    w->update_time.seconds += took;
    w->busy += took;
    w->reduce_s += took;
    w->reduce_total += took;
    w->bucket_wait += waited;
    return 0;
}

/* The micro-batch of a forward, read from the stage's loader, which is at the step's start at its first
 * micro-batch (the position a checkpoint records). A replica of several (MPI ranks) takes its contiguous
 * group of the step's micro-batches: it skips the groups of the replicas before it, reads its own, then
 * skips those after it, so that every replica's loader is at the next step's start again. */
static int read_batch(stage_role *w, const nb_low_action *a) {
    const exec_run *run = w->run;
    const int j = a->mb % run->M, ahead = run->groups == 1 && run->D > 1;
    if (j == 0) {
        const uint64_t start = nb_loader_position(w->train);
        if (reads_tokens(w)) w->step_pos[a->step] = start;
        if (ahead && nb_loader_seek(w->train, start + (uint64_t)run->replica * run->M)) return -1;
    }
    if (nb_loader_next(w->train, w->tokens, w->targets)) return -1;
    if (ahead && j == run->M - 1 &&
        nb_loader_seek(w->train, nb_loader_position(w->train) + (uint64_t)(run->D - 1 - run->replica) * run->M))
        return -1;
    return 0;
}

static int forward(stage_role *w, const nb_low_action *a) {
    const float *wt = weights_of(w, a->version);
    int slot = find_slot(w, -1);
    if (!wt) return -1;
    if (slot < 0) return nb_fail("stage %d: no free activation slot for micro-batch %d", w->s, a->mb);
    if ((reads_tokens(w) || reads_targets(w)) && read_batch(w, a)) return -1;
    double t = nb_now();
    float loss = 0;
    if (nb_stage_forward(w->st, wt, a->version, w->slots[slot], w->tokens, w->x_in, w->targets, &loss)) return -1;
    count_op(w, &w->forward_time, nb_now() - t);
    w->slot_mb[slot] = a->mb;
    if (reads_targets(w)) w->sums[SUM_LOSS] += loss;
    add_moe_stats(w, w->slots[slot]);
    const int g = group_ends(w, a->mb);
    if (g >= 0) fold(w, g, 1);
    return 0;
}

/* BACKWARD (whole) and BACKWARD_INPUT (B of a split one, which keeps the slot for its W). The step's last
 * whole backward starts the buckets of the sum over replicas as its ranges become final. */
static int backward(exec_endpoint *e, const nb_low_action *a) {
    stage_role *w = e->role;
    const float *wt = weights_of(w, a->version);
    int slot = find_slot(w, a->mb);
    const int split = a->op == NB_LOW_BACKWARD_INPUT;
    if (!wt) return -1;
    if (slot < 0) return nb_fail("stage %d: backward of micro-batch %d, which has no activations", w->s, a->mb);
    if (split && !w->wgrads) return nb_fail("stage %d: a split backward on a stage set up for whole ones", w->s);
    double t = nb_now();
    /* each micro-batch's share of the step's loss: 1 / the step's micro-batches over every replica */
    const float *dout = reads_targets(w) ? NULL : w->dout;
    const float scale = 1.0f / w->run->step_micro;
    const int bucketed = !split && w->n_plan && last_backward(e, a->step);
    if (bucketed) w->st->grads_done = bucket_hook, w->st->grads_done_ctx = e, w->next_bucket = 0;
    const int rc = split ? nb_stage_backward_input(w->st, wt, a->version, w->slots[slot], dout, scale, w->wgrads[slot])
                         : nb_stage_backward(w->st, wt, a->version, w->slots[slot], dout, scale);
    w->st->grads_done = NULL, w->st->grads_done_ctx = NULL;
    if (rc) return -1;
    count_op(w, &w->backward_time, nb_now() - t);
    w->freed_slot = slot;  /* its input gradient is what GRAD sends */
    if (split) return 0;
    w->slot_mb[slot] = -1;
    const int g = group_ends(w, a->mb);
    if (g >= 0) fold(w, g, 0);
    return 0;
}

/* BACKWARD_WEIGHT: the weight gradients B recorded; the slot is free after it. Its time counts as the
 * backward's (the report's backward is then B + W per micro-batch). */
static int backward_weight(stage_role *w, const nb_low_action *a) {
    int slot = find_slot(w, a->mb);
    if (slot < 0 || !w->wgrads)
        return nb_fail("stage %d: weight gradient of micro-batch %d, which has no input gradient", w->s, a->mb);
    double t = nb_now();
    if (nb_stage_backward_weight(w->st, w->wgrads[slot])) return -1;
    const double took = nb_now() - t;
    w->busy += took;
    w->backward_time.seconds += took;
    w->slot_mb[slot] = -1;
    return 0;
}

/* Taylor's size against the gradient's (the metric taylor_ratio): both squared norms of this stage,
 * the gradient's before the correction, tied copies left out as the gradient norm leaves them. */
static void taylor_norms(stage_role *w, int t) {
    const nb_stage *st = w->st;
    w->stats.taylor_grad_sq = nb_grad_sum_squares(memory(w), st->grads, st->tensors, st->n_tensors);
    for (int i = 0; i < st->n_tensors; i++)
        if (!st->tensors[i].tied_copy)
            w->stats.taylor_sq += nb_stash_taylor_sq(w->stash, st->grads, st->params, t, st->tensors[i].offset,
                                                     st->tensors[i].numel);
}

/* The gradient of step t complete: the tied embedding's head part added to the embedding's (held by
 * this stage, or received from the last), in the order of the one-stage sum; Taylor; its squared norm. */
static int grads(stage_role *w, int t) {
    if (w->run->D == 1 && injected_fault(w, t)) return -1;  /* else at REDUCE, where the update starts */
    nb_stage *st = w->st;
    const double t0 = nb_now();
    memset(&w->stats, 0, sizeof w->stats);
    w->stats.tau = nb_stash_tau(w->stash, t);
    w->stats.update = w->reduce_s;
    w->reduce_s = 0;
    moe_stats(w);
    if (reads_targets(w)) {
        w->stats.loss = w->sums[SUM_LOSS] / w->run->step_micro;
        w->sums[SUM_LOSS] = 0;
        if (!isfinite(w->stats.loss)) return diverged(w, t, "training loss", w->stats.loss);
    }
    nb_stage_sum_tied_grad(st, takes_head_grad(w) ? w->tied_buf : NULL);
    if (w->run->o->delay.taylor > 0) taylor_norms(w, t);
    nb_stash_taylor(w->stash, st->grads, st->params, t);
    w->norms[w->s] = nb_grad_sum_squares(memory(w), st->grads, st->tensors, st->n_tensors);
    const double took = nb_now() - t0;
    w->update_time.seconds += took;
    w->busy += took;
    w->stats.update += took;
    return 0;
}

/* Update t: global clipping by the norms of every stage summed in stage order (each stage sums the same
 * numbers in the same order), the checks that stop a diverging run before anything of it is applied or
 * saved, the optimizer's step, the delay's apply (error feedback). */
static int apply(stage_role *w, int t) {
    exec_run *run = w->run;
    const nb_train_options *o = run->o;
    nb_stage *st = w->st;
    const double t0 = nb_now();
    double sq = 0;
    for (int i = 0; i < run->P; i++) sq += o->clip > 0 || i == w->s ? w->norms[i] : 0;
    const double norm = sqrt(sq);
    if (!isfinite(norm)) return diverged(w, t, "the gradient norm", norm);
    if (o->clip > 0 && norm > o->clip) nb_scale(memory(w), st->grads, st->n_params, (float)(o->clip / norm));
    w->stats.grad_norm = norm;
    w->stats.grad_sq = w->norms[w->s];
    const float lr = nb_schedule_lr(&run->sched, t);
    const float aux_lr = o->aux_lr * (lr / o->schedule.lr);
    if (w->stats.tau > 0) {
        const float *old = weights_of(w, t > (int)w->stats.tau ? t - (int)w->stats.tau : 0);
        if (!old) return -1;
        w->stats.version_sq = nb_distance_sq(memory(w), st->params, old, st->tensors, st->n_tensors);
    }
    if (nb_optimizer_step(w->opt, st->grads, st->params, lr, aux_lr, w->d)) return -1;
    nb_stash_apply(w->stash, st->params, w->d, t);
    w->stats.update_sq = nb_grad_sum_squares(memory(w), w->d, st->tensors, st->n_tensors);
    if (!isfinite(w->stats.update_sq)) return diverged(w, t, "the update's norm", sqrt(w->stats.update_sq));
    nb_stage_zero(st, st->grads, sizeof(float) * st->n_params);
    w->updates++;
    const double took = nb_now() - t0;
    count_op(w, &w->update_time, took);
    w->stats.update += took;
    w->stats.aside = w->aside;
    if (t == run->steady_from - 1) w->steady_start = mark_now(w);
    if (t == run->steady_to - 1) w->steady_end = mark_now(w);
    return 0;
}

/* One validation micro-batch forward on the stage's current weights (their version number: version):
 * the batch read from val where the stage reads tokens or targets, x_in (the previous stage's
 * activations) elsewhere; its loss (the last stage's) added to *sum. The run's EVAL and nb_evaluate. */
static int eval_batch(const nb_stage *st, long version, nb_acts *slot, nb_loader *val, int *tokens, int *targets,
                      const float *x_in, double *sum) {
    float loss = 0;
    if ((st->has_embed || st->has_head) && nb_loader_next(val, tokens, targets)) return -1;
    if (nb_stage_forward(st, st->params, version, slot, tokens, x_in, targets, &loss)) return -1;
    *sum += loss;
    return 0;
}

/* Each MoE block's choices of the slot's last forward (N x k), copied to the host into choices[l] (allocated;
 * NULL for a dense block): 0, or -1 with nb_fail. */
static int copy_choices(const nb_stage *st, const nb_acts *slot, int N, int **choices) {
    const size_t bytes = sizeof(int) * (size_t)N * st->cfg.experts_per_token;
    for (int l = 0; l < st->n_blocks; l++) {
        const int *choice = nb_acts_expert_choice(slot, l);
        if (!choice) continue;
        if (!(choices[l] = nb_calloc(1, bytes, "the router's choices"))) return -1;
        nb_backend_to_host(st->backend, choices[l], choice, bytes);
    }
    return 0;
}

/* The router's staleness (docs/moe.md): the share of (token, MoE block) pairs of the batch whose set of
 * chosen experts differs between two forwards, `before` and `after` (n_blocks arrays of N x k choices, NULL for
 * a dense block). */
static double choice_changes(const nb_stage *st, int *const *before, int *const *after, int N) {
    const int k = st->cfg.experts_per_token;
    long changed = 0, pairs = 0;
    for (int l = 0; l < st->n_blocks; l++) {
        const int *now = after[l];
        if (!now) continue;
        for (int t = 0; t < N; t++, pairs++) {
            int same = 1;
            for (int j = 0; j < k && same; j++) {
                int found = 0;
                for (int i = 0; i < k; i++) found |= before[l][(size_t)t * k + i] == now[(size_t)t * k + j];
                same = found;
            }
            changed += !same;
        }
    }
    return pairs ? (double)changed / pairs : NAN;
}

/* A MoE model held whole by one stage, under a delay at the coming step: the first validation batch is
 * routed first with the weights that step's gradient will be taken at (tau steps old), then with the
 * current ones; router_staleness is the share of (token, block) pairs whose experts differ. The batch is
 * read once; the second forward is the evaluation's. NAN (not measured) elsewhere. */
static int eval_first_batch(stage_role *w, double *staleness) {
    const nb_stage *st = w->st;
    const int tau = nb_stash_tau(w->stash, w->updates), N = w->run->o->batch * w->run->T;
    *staleness = NAN;
    if (!(st->cfg.n_experts > 0 && st->has_embed && st->has_head && tau > 0 && w->updates >= tau))
        return eval_batch(st, w->updates, w->eval_slot, w->val, w->tokens, w->targets, w->x_in, &w->eval_sum);
    const float *old = weights_of(w, w->updates - tau);
    int **before = nb_calloc((size_t)st->n_blocks, sizeof *before, "the router's earlier choices");
    int **after = nb_calloc((size_t)st->n_blocks, sizeof *after, "the router's choices");
    int rc = !old || !before || !after || nb_loader_next(w->val, w->tokens, w->targets) ||
             nb_stage_forward(st, old, w->updates - tau, w->eval_slot, w->tokens, NULL, w->targets, NULL) ||
             copy_choices(st, w->eval_slot, N, before);
    float loss = 0;
    if (!rc && !(rc = nb_stage_forward(st, st->params, w->updates, w->eval_slot, w->tokens, NULL, w->targets, &loss)) &&
        !(rc = copy_choices(st, w->eval_slot, N, after))) {
        w->eval_sum += loss;
        *staleness = choice_changes(st, before, after, N);
    }
    for (int l = 0; l < st->n_blocks; l++) {
        if (before) free(before[l]);
        if (after) free(after[l]);
    }
    free(before);
    free(after);
    return rc ? -1 : 0;
}

/* Validation batch b after step t on the current weights. */
static int eval(stage_role *w, const nb_low_action *a) {
    const double t0 = nb_now();
    if (a->index == 0) {
        if (w->val) nb_loader_reset(w->val);
        w->eval_sum = 0;
        if (eval_first_batch(w, &w->eval_msg.router_staleness)) return -1;
    } else if (eval_batch(w->st, w->updates, w->eval_slot, w->val, w->tokens, w->targets, w->x_in, &w->eval_sum)) {
        return -1;
    }
    w->aside += nb_now() - t0;
    w->eval_msg.loss = w->eval_sum / w->run->o->eval_batches;
    w->eval_msg.aside = w->aside;
    return 0;
}

/* The run's evaluation outside a run: a model of one stage (as `nobubble eval` loads it) on its
 * current weights, batch after batch as EVAL computes them, so that eval measures what training
 * reports. */
int nb_evaluate(nb_model *m, nb_acts *acts, nb_loader *val, int batches, int *inputs, int *targets, double *loss) {
    if (m->n_stages != 1)
        return nb_fail("nb_evaluate: a model of %d stages: expected one (a split model is evaluated by its run)",
                       m->n_stages);
    double sum = 0;
    nb_loader_reset(val);
    for (int b = 0; b < batches; b++)
        if (eval_batch(&m->stages[0], NB_VERSION_NONE, acts, val, inputs, targets, NULL, &sum)) return -1;
    *loss = sum / batches;
    return 0;
}

/* This stage's share of the run's state as the checkpoint code sees it (arrays indexed by stage; entry
 * s only): its optimizer and weight versions, and its loader if it has one. */
static void own_parts(const stage_role *w, train_parts *p, nb_optimizer **opt, nb_stash **stash) {
    memset(opt, 0, sizeof(*opt) * (size_t)w->run->P);
    memset(stash, 0, sizeof(*stash) * (size_t)w->run->P);
    opt[w->s] = w->opt;
    stash[w->s] = w->stash;
    *p = (train_parts){w->run->model, opt, stash, w->train};
}

/* No checkpoint of non-finite weights, ever (train_diverged names step t). */
static int weights_finite(const stage_role *w, int t) {
    const double sq = nb_grad_sum_squares(memory(w), w->st->params, w->st->tensors, w->st->n_tensors);
    return isfinite(sq) ? 0 : train_diverged(t, "the weights' sum of squares", sq);
}

/* The first stage's loader has read ahead into the next step: a checkpoint holds its position at the
 * start of the step after `t`. Returns the position to go back to. */
static uint64_t loader_to_boundary(stage_role *w, int t, int *rc) {
    const uint64_t now = w->train ? nb_loader_position(w->train) : 0;
    if (reads_tokens(w)) {
        const uint64_t b = t + 1 < w->run->S && w->step_pos[t + 1] != UINT64_MAX ? w->step_pos[t + 1] : now;
        if (nb_loader_seek(w->train, b)) *rc = -1;
    }
    return now;
}

/* This stage's part of the checkpoint after update t; a failure is told to the coordinator, which
 * fails the run naming the newest complete checkpoint. */
static int save(stage_role *w, int t) {
    const nb_train_options *o = w->run->o;
    const double t0 = nb_now();
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/step_%06d", o->save_dir, t + 1);
    memset(&w->saved, 0, sizeof w->saved);
    int rc = weights_finite(w, t);
    if (!rc) {
        nb_optimizer *opt[NB_TRAIN_MAX_STAGES];
        nb_stash *stash[NB_TRAIN_MAX_STAGES];
        train_parts parts;
        own_parts(w, &parts, opt, stash);
        const uint64_t now = loader_to_boundary(w, t, &rc);
        rc = rc || train_state_save_part(dir, &parts, w->s, t + 1, o);
        if (reads_tokens(w) && nb_loader_seek(w->train, now)) rc = -1;
    }
    if (rc) {
        w->saved.failed = 1;
        snprintf(w->saved.error, sizeof w->saved.error, "stage %d: %s", w->s, nb_last_error());
    }
    w->aside += nb_now() - t0;
    return 0;
}

int exec_stages_save_whole(exec_run *run, exec_endpoint **stages, const char *dir, int t) {
    const int P = run->P;
    nb_optimizer *opt[NB_TRAIN_MAX_STAGES];
    nb_stash *stash[NB_TRAIN_MAX_STAGES];
    for (int s = 0; s < P; s++) {
        const stage_role *w = stages[s]->role;
        if (weights_finite(w, t)) return -1;
        opt[s] = w->opt;
        stash[s] = w->stash;
    }
    stage_role *first = stages[0]->role;
    int rc = 0;
    const uint64_t now = loader_to_boundary(first, t, &rc);
    train_parts parts = {run->model, opt, stash, first->train};
    rc = rc || train_state_save(dir, &parts, t + 1, run->o);
    if (nb_loader_seek(first->train, now)) rc = -1;
    return rc;
}

static double stage_bytes(const stage_role *w) {
    const exec_run *run = w->run;
    double b = 2.0 * sizeof(float) * w->st->n_params + nb_stash_bytes(w->stash) + sizeof(float) * w->st->n_params;
    for (int i = 0; i < nb_optimizer_state_count(w->opt); i++) {
        const char *name;
        float *data;
        size_t n;
        if (!nb_optimizer_state(w->opt, i, &name, &data, &n)) b += sizeof(float) * (double)n;
    }
    b += (double)(w->n_slots + (w->eval_slot ? 1 : 0)) * nb_acts_bytes(w->st, run->o->batch, run->T) + 2.0 * act_bytes(w);
    b += (double)nb_stage_scratch_bytes(w->st, run->o->batch, run->T);  /* once per stage, whatever the slots */
    return b;
}

static void make_report(stage_role *w) {
    const double now = nb_now();
    const mark end = w->steady_end.t > 0 ? w->steady_end : mark_now(w), *start = &w->steady_start;
    exec_report r = {w->busy, w->aside, now - w->t0, end.busy - start->busy, end.t - start->t,
                     end.aside - start->aside, stage_bytes(w), w->n_slots, 0, 0, 0, 0, 0, 0, 0};
    r.forward = steady_mean(&start->ops[0], &end.ops[0], &w->forward_time);
    r.backward = steady_mean(&start->ops[1], &end.ops[1], &w->backward_time);
    r.update = steady_mean(&start->ops[2], &end.ops[2], &w->update_time);
    r.reduce = w->reduce_total;
    r.bucket_wait = w->bucket_wait;
    r.buckets = (double)w->buckets_started;
    r.buckets_early = (double)w->buckets_early;
    w->report = r;
}

static int stage_act(exec_endpoint *e, const nb_low_action *a) {
    stage_role *w = e->role;
    switch (a->op) {
    case NB_LOW_FORWARD: return forward(w, a);
    case NB_LOW_BACKWARD:
    case NB_LOW_BACKWARD_INPUT: return backward(e, a);
    case NB_LOW_BACKWARD_WEIGHT: return backward_weight(w, a);
    case NB_LOW_GRADS: return grads(w, a->step);
    case NB_LOW_APPLY: return apply(w, a->step);
    case NB_LOW_EVAL: return eval(w, a);
    case NB_LOW_SAVE: return w->run->replica > 0 ? 0 : save(w, a->step);  /* replica 0 writes the part */
    case NB_LOW_REDUCE: return reduce(e, a->step);
    default: return nb_fail("stage %d: action %s is the coordinator's", w->s, nb_low_op_name(a->op));
    }
}

/* What a message of each kind carries from or into this stage. */
static int stage_data(exec_endpoint *e, const nb_low_action *a, void **data, size_t *bytes) {
    stage_role *w = e->role;
    const int out = a->op == NB_LOW_SEND;
    nb_stage *st = w->st;
    const size_t embed = sizeof(float) * embed_numel(w);
    int slot;
    switch (a->msg) {
    case NB_MSG_ACT:
        if (!out) return *data = w->x_in, *bytes = act_bytes(w), 0;
        if ((slot = find_slot(w, a->index)) < 0)
            return nb_fail("stage %d: no activations of micro-batch %d to send", w->s, a->index);
        return *data = (void *)nb_acts_output(w->slots[slot]), *bytes = act_bytes(w), 0;
    case NB_MSG_GRAD:
        if (!out) return *data = w->dout, *bytes = act_bytes(w), 0;
        return *data = (void *)nb_acts_input_grad(w->slots[w->freed_slot]), *bytes = act_bytes(w), 0;
    case NB_MSG_TIED_GRAD: return *data = out ? tied_copy(w, st->grads) : w->tied_buf, *bytes = embed, 0;
    case NB_MSG_TIED_W: return *data = out ? embedding(w, st->params) : tied_copy(w, st->params), *bytes = embed, 0;
    case NB_MSG_NORM: return *data = &w->norms[out ? w->s : a->peer], *bytes = sizeof(double), 0;
    case NB_MSG_STATS: return *data = &w->stats, *bytes = sizeof w->stats, 0;
    case NB_MSG_EVAL_ACT:
        return *data = out ? (void *)nb_acts_output(w->eval_slot) : w->x_in, *bytes = act_bytes(w), 0;
    case NB_MSG_EVAL_LOSS: return *data = &w->eval_msg, *bytes = sizeof w->eval_msg, 0;
    case NB_MSG_SAVED: return *data = &w->saved, *bytes = sizeof w->saved, 0;
    case NB_MSG_COMMITTED: return *data = &w->committed, *bytes = sizeof w->committed, 0;
    case NB_MSG_END: return *data = &w->end_msg, *bytes = sizeof w->end_msg, 0;
    case NB_MSG_DONE:
        make_report(w);
        return *data = &w->report, *bytes = sizeof w->report, 0;
    case NB_MSG_PARAMS: return *data = st->params, *bytes = sizeof(float) * st->n_params, 0;
    default: return nb_fail("stage %d: message kind %d", w->s, (int)a->msg);
    }
}

/* Whether a message's bytes are the stage's memory (activations, gradients, weights) rather than the host's
 * records (statistics, losses, replies). */
static int carries_memory(nb_msg_kind kind) {
    return kind == NB_MSG_ACT || kind == NB_MSG_GRAD || kind == NB_MSG_TIED_GRAD || kind == NB_MSG_TIED_W ||
           kind == NB_MSG_EVAL_ACT || kind == NB_MSG_PARAMS;
}

/* A stage on a device sends and receives through a host copy: what it sends is copied out of the device's
 * memory first, what it receives is copied in once it has arrived (stage_received). The link is
 * synchronous (a send returns once its bytes are taken), so one copy serves every message in turn. */
static int stage_buffer(exec_endpoint *e, const nb_low_action *a, void **data, size_t *bytes) {
    stage_role *w = e->role;
    if (stage_data(e, a, data, bytes)) return -1;
    if (!on_device(w) || !carries_memory(a->msg)) return 0;
    if (ensure_staging(w, *bytes)) return -1;
    if (a->op == NB_LOW_SEND) nb_backend_to_host(memory(w), w->staging, *data, *bytes);
    *data = w->staging;
    return 0;
}

static int stage_received(exec_endpoint *e, const nb_low_action *a) {
    stage_role *w = e->role;
    if (on_device(w) && carries_memory(a->msg)) {
        void *data;
        size_t bytes;
        if (stage_data(e, a, &data, &bytes)) return -1;
        nb_backend_from_host(memory(w), data, w->staging, bytes);
        if (nb_backend_check(memory(w))) return -1;
    }
    if (a->msg == NB_MSG_END) return exec_switch_end(e, w->end_msg);
    if (a->msg == NB_MSG_COMMITTED && !w->committed) return nb_fail("stage %d: checkpoint after step %d failed", w->s, a->step + 1);
    return 0;
}

/* ---- setting up ---- */

static int stage_alloc(stage_role *w) {
    const exec_run *run = w->run;
    const nb_train_options *o = run->o;
    nb_stage *st = w->st;
    const size_t BT = (size_t)o->batch * run->T;
    w->n_slots = nb_pipe_stage_peak(&run->sc, w->s);
    w->slots = nb_calloc((size_t)w->n_slots, sizeof *w->slots, "a stage's table of activation slots");
    w->slot_mb = nb_calloc((size_t)w->n_slots, sizeof(int), "a stage's table of activation slots");
    w->d = stage_floats(w, st->n_params, "a stage's update");
    w->x_in = stage_floats(w, act_bytes(w) / sizeof(float), "a stage's received activations");
    w->dout = stage_floats(w, act_bytes(w) / sizeof(float), "a stage's received gradient");
    w->tokens = nb_calloc(BT, sizeof(int), "a micro-batch's tokens");
    w->targets = nb_calloc(BT, sizeof(int), "a micro-batch's targets");
    w->norms = nb_calloc((size_t)run->P, sizeof(double), "the stages' gradient norms");
    if (takes_head_grad(w)) w->tied_buf = stage_floats(w, embed_numel(w), "the tied head's gradient");
    for (int l = 0; l < st->n_blocks; l++) w->moe_blocks += nb_config_block_is_moe(&st->cfg, st->first_block + l);
    w->n_sums = SUM_LOADS + w->moe_blocks * st->cfg.n_experts;
    if (!(w->sums = nb_calloc((size_t)w->n_sums, sizeof(double), "a stage's loss and expert loads")) ||
        (w->moe_blocks && !(w->load = nb_calloc((size_t)st->cfg.n_experts, sizeof(float), "a block's expert loads"))))
        return -1;
    if (run->groups > 1) {  /* one process computes the replicas' groups in turn */
        if (!(w->group_grads = stage_floats(w, st->n_params, "the sum of a step's groups' gradients")) ||
            !(w->group_sums = nb_calloc((size_t)w->n_sums, sizeof(double), "the sum of a step's groups' losses")) ||
            (st->tied_head_grad &&
             !(w->group_tied = stage_floats(w, embed_numel(w), "the sum of a step's groups' head gradients"))))
            return -1;
    }
    if (reads_tokens(w) && (w->step_pos = nb_calloc((size_t)run->S, sizeof(uint64_t), "the loader's step positions")))
        for (int t = 0; t < run->S; t++) w->step_pos[t] = UINT64_MAX;
    if (!w->slots || !w->slot_mb || !w->d || !w->x_in || !w->dout || !w->tokens || !w->targets || !w->norms ||
        (takes_head_grad(w) && !w->tied_buf) || (reads_tokens(w) && !w->step_pos))
        return -1;  /* the allocation that failed said what; exec_stage_free releases the others */
    for (int i = 0; i < w->n_slots; i++) {
        w->slot_mb[i] = -1;
        if (!(w->slots[i] = nb_acts_create(st, o->batch, run->T))) return -1;
    }
    if (run->sc.kind == NB_PIPE_ZBH1) {  /* a split backward: what each slot's B leaves for its W */
        if (!(w->wgrads = nb_calloc((size_t)w->n_slots, sizeof *w->wgrads, "a stage's split backwards")))
            return -1;
        for (int i = 0; i < w->n_slots; i++)
            if (!(w->wgrads[i] = nb_wgrad_create())) return -1;
    }
    return 0;
}

/* --dp-bucket-mib: the stage's buckets, from the ranges its backward makes final (exec_bucket_plan). */
static int plan_buckets(stage_role *w) {
    const nb_stage *st = w->st;
    const size_t most = (size_t)st->n_blocks + 2;
    size_t *starts = nb_calloc(most, sizeof *starts, "a stage's gradient ranges");
    w->plan = nb_calloc(most, sizeof *w->plan, "a stage's buckets");
    w->buckets = nb_calloc(most, sizeof *w->buckets, "a stage's buckets");
    if (!starts || !w->plan || !w->buckets) {
        free(starts);
        return -1;
    }
    const double floats = w->run->o->dp_bucket_mib * 1048576.0 / sizeof(float);
    w->n_plan = exec_bucket_plan(starts, nb_stage_grad_ranges(st, starts), st->n_params,
                                 floats < 1 ? 1 : (size_t)floats, w->plan);
    free(starts);
    return 0;
}

int exec_stage_init(exec_endpoint *e, exec_run *run, int s) {
    const nb_train_options *o = run->o;
    stage_role *w = nb_calloc(1, sizeof *w, "a stage's state");
    if (!w) return -1;
    *e = (exec_endpoint){.run = run, .id = s, .low = &run->low, .end = run->S, .buffer = stage_buffer,
                         .act = stage_act, .received = stage_received, .role = w};
    w->run = run;
    w->s = s;
    w->st = &run->model->stages[s];
    /* bf16: the versions its forwards and backwards use (tau_max + 1), and the current one for evaluation. */
    if (nb_stage_set_precision(w->st, o->precision, nb_delay_tau_max(&o->delay, s, run->P) + 2)) return -1;
    /* buckets start sums of the device's gradient during the backward: not there yet (the whole sum at REDUCE) */
    if (stage_alloc(w) || (train_dp_buckets(o) && !on_device(w) && plan_buckets(w))) return -1;
    if (o->val_pattern && !(w->eval_slot = nb_acts_create(w->st, o->batch, run->T))) return -1;
    if (nb_optimizer_create(&w->opt, &o->optim, w->st->tensors, w->st->n_tensors, w->st->n_params, w->st->backend) ||
        nb_optimizer_set_precision(w->opt, o->precision))
        return -1;
    if (nb_stash_create_on(&w->stash, &o->delay, s, run->P, run->S, w->st->params, w->st->n_params, memory(w)))
        return -1;
    if ((reads_tokens(w) || reads_targets(w)) &&
        nb_loader_open(&w->train, o->train_pattern, o->batch, run->T, o->model.vocab_size, o->data_seed, 0, 1))
        return -1;
    if (o->val_pattern && (reads_tokens(w) || reads_targets(w)) &&
        nb_loader_open(&w->val, o->val_pattern, o->batch, run->T, o->model.vocab_size, 0, 0, 1))
        return -1;
    nb_stage_zero(w->st, w->st->grads, sizeof(float) * w->st->n_params);
    if (w->st->tied_head_grad) nb_stage_zero(w->st, w->st->tied_head_grad, sizeof(float) * embed_numel(w));
    w->t0 = nb_now();
    w->steady_start = mark_now(w);
    return 0;
}

/* Loads this stage's share of the checkpoint --resume names (either layout, any split); the step to
 * run next goes to run->start. */
int exec_stage_resume(exec_endpoint *e) {
    stage_role *w = e->role;
    nb_optimizer *opt[NB_TRAIN_MAX_STAGES];
    nb_stash *stash[NB_TRAIN_MAX_STAGES];
    train_parts parts;
    int start = 0;
    own_parts(w, &parts, opt, stash);
    if (train_state_load_stages(w->run->o->resume_dir, &parts, w->s, w->s, &start, w->run->o)) return -1;
    w->run->start = start;
    w->updates = start;
    return 0;
}

size_t exec_stage_stash_bytes(const exec_endpoint *e) {
    const stage_role *w = e->role;
    return w ? nb_stash_bytes(w->stash) : 0;
}

void exec_stage_free(exec_endpoint *e) {
    stage_role *w = e ? e->role : NULL;
    if (!w) return;
    nb_low_free(&e->cut);
    for (int i = 0; w->wgrads && i < w->n_slots; i++) nb_wgrad_free(w->wgrads[i]);
    free(w->wgrads);
    for (int i = 0; w->slots && i < w->n_slots; i++) nb_acts_free(w->slots[i]);
    nb_acts_free(w->eval_slot);
    free(w->slots);
    free(w->slot_mb);
    nb_optimizer_free(w->opt);
    nb_stash_free(w->stash);
    nb_stage_free(w->st, w->d);
    nb_stage_free(w->st, w->x_in);
    nb_stage_free(w->st, w->dout);
    nb_stage_free(w->st, w->tied_buf);
    free(w->staging);
    free(w->norms);
    free(w->sums);
    free(w->load);
    nb_stage_free(w->st, w->group_grads);
    nb_stage_free(w->st, w->group_tied);
    free(w->group_sums);
    free(w->plan);
    free(w->buckets);  /* (a bucket still in flight, left by a failed run, is left to the process: MPI may use it) */
    if (w->train) nb_loader_free(w->train);
    if (w->val) nb_loader_free(w->val);
    free(w->tokens);
    free(w->targets);
    free(w->step_pos);
    free(w);
    e->role = NULL;
}
