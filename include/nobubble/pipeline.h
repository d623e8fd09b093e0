/* Pipeline schedules as pure data (GPipe, 1F1B, PipeDream, PipeDream-2BW, and the schedule-only
 * interleaved 1F1B and ZB-H1), their validator and a simulator with per-stage costs (the schedule's
 * lowering, simulated). See docs/schedules.md.
 *
 * A schedule has P stages (workers); per stage an ordered list of actions (forward or backward of one
 * micro-batch, or the optimizer update). Micro-batches are numbered globally: micro-batch j
 * belongs to optimizer step j / M. Sends and receives are derived: the forward of j at stage s
 * sends its activations to s + 1, the backward of j at stage s sends its gradient to s - 1.
 * With v model chunks per stage (interleaved 1F1B), chunk c of stage s is virtual stage c * P + s and
 * the messages run between virtual stages (the last stage's chunk c sends to stage 0's chunk c + 1).
 * A backward is either one action or split (ZB-H1) into its input gradient (B, what the stage
 * upstream waits for) and its weight gradient (W, which only the stage's own update waits for).
 * Version v of a stage's weights is the weights after v updates of that stage; every action
 * records the version it uses, and the versions follow exactly the delays of src/delay/delay.c
 * (sync for GPipe, 1F1B, interleaved and ZB-H1, tau 1 for 2BW, tau = P - 1 - s for PipeDream). */
#ifndef NOBUBBLE_PIPELINE_H
#define NOBUBBLE_PIPELINE_H
#include <stddef.h>
#include "nobubble/common.h"

/* SEQUENTIAL is the one-process run's order (nb_pipe_generate_sequential): no overlap between stages.
 * INTERLEAVED (interleaved 1F1B, v model chunks per stage) and ZBH1 (zero-bubble H1, the backward split)
 * are schedules only: generated, lowered, validated and simulated, not executed by the trainer yet
 * (nb_pipe_kind_check_executed). The pipelines come first: their values are --pipeline's names. */
typedef enum {
    NB_PIPE_GPIPE,
    NB_PIPE_1F1B,
    NB_PIPE_PIPEDREAM,
    NB_PIPE_2BW,
    NB_PIPE_INTERLEAVED,
    NB_PIPE_ZBH1,
    NB_PIPE_SEQUENTIAL
} nb_pipe_kind;

/* BACKWARD is the whole backward of a micro-batch; BACKWARD_INPUT (B) and BACKWARD_WEIGHT (W) are its
 * two halves when it is split: B computes the gradient of the stage's input (sent upstream), W the
 * gradient of its weights (accumulated for the update), after B. */
typedef enum { NB_PIPE_FORWARD, NB_PIPE_BACKWARD, NB_PIPE_UPDATE, NB_PIPE_BACKWARD_INPUT, NB_PIPE_BACKWARD_WEIGHT } nb_pipe_op;

typedef struct {
    nb_pipe_op op;
    int mb;       /* global micro-batch index (forward/backward); -1 for an update */
    int step;     /* optimizer step the action belongs to (mb / n_micro; for an update, the step it ends) */
    int version;  /* weight version used: forward/backward run on it; an update reads it and makes version + 1 */
    int chunk;    /* the model chunk of the stage it runs (0 .. n_chunks - 1; virtual stage chunk * P + s);
                     0 for an update, which updates every chunk of the stage */
} nb_pipe_action;

typedef struct {
    nb_pipe_kind kind;   /* decides the version rule the validator checks */
    int n_stages;        /* P */
    int n_micro;         /* micro-batches per optimizer step (1 for PipeDream) */
    int n_steps;         /* optimizer steps (PipeDream: M x S, one per micro-batch) */
    size_t *start;       /* P + 1 offsets: stage s's actions are actions[start[s] .. start[s+1]) */
    nb_pipe_action *actions;
    int *versions;       /* NULL: the kind's delay rule; else [n_steps x n_stages], the version stage s
                            uses for step t at versions[t * n_stages + s] (see nb_pipe_generate_versions) */
    int n_chunks;        /* v: model chunks per stage (interleaved; 1 for every other kind) */
} nb_pipe_schedule;

/* "gpipe", "1f1b", "pipedream", "2bw", "interleaved", "zbh1" (or "sequential"); an unknown name fails with
 * the pipelines listed. */
int nb_pipe_kind_parse(const char *text, nb_pipe_kind *out);
const char *nb_pipe_kind_name(nb_pipe_kind kind);
/* The i-th pipeline's name (gpipe, 1f1b, pipedream, 2bw, interleaved, zbh1: not the sequential order),
 * NULL past the last: --pipeline's values (the settings table's enum row). */
const char *nb_pipe_kind_names(int i);
/* The pipelines' names as a list for messages, "gpipe, 1f1b, pipedream, 2bw, interleaved, zbh1", into buf. */
void nb_pipe_kind_list(char *buf, size_t size);
/* 0 when the trainer executes schedules of this kind; else -1 with "--pipeline KIND: schedules only, not
 * executed yet; use nobubble schedule" (interleaved, zbh1). */
int nb_pipe_kind_check_executed(nb_pipe_kind kind);

/* The --delay of the one-process run with the same weight versions: "sync" (gpipe, 1f1b, interleaved,
 * zbh1), "2bw", "pipedream". */
const char *nb_pipe_delay_name(nb_pipe_kind kind);
/* The weight version stage s uses for the micro-batches of optimizer step t (the delay rule):
 * GPipe/1F1B/interleaved/ZB-H1 t; 2BW max(t - 1, 0); PipeDream max(t - (P - 1 - s), 0) (a step is a micro-batch). */
int nb_pipe_version_rule(nb_pipe_kind kind, int n_stages, int stage, int step);

/* Builds the schedule of `kind` for P stages, M micro-batches per step and S steps. PipeDream
 * updates after every micro-batch: it gets M x S micro-batches, stored as n_micro = 1 and
 * n_steps = M x S. 1F1B, 2BW and ZB-H1 need M >= P; interleaved needs M a multiple of P (and has
 * 2 chunks: nb_pipe_generate_ex gives another v). Fails (nb_last_error) on bad sizes. */
int nb_pipe_generate(nb_pipe_schedule *out, nb_pipe_kind kind, int n_stages, int n_micro, int n_steps);
/* What nb_pipe_generate_ex takes beyond the sizes; all zero is nb_pipe_generate's choice. */
typedef struct {
    int n_chunks;  /* interleaved: v, model chunks (virtual stages) per stage, >= 1 (0: 2); other kinds: 0 or 1 */
} nb_pipe_gen_options;
/* nb_pipe_generate with options (NULL: the defaults). */
int nb_pipe_generate_ex(nb_pipe_schedule *out, nb_pipe_kind kind, int n_stages, int n_micro, int n_steps,
                        const nb_pipe_gen_options *options);
/* A stream schedule (1F1B order, no flush of its own) whose step t runs on stage s's version
 * versions[t * P + s] (0 <= version <= t; it may step back, as PipeDream's
 * does after a synchronous start), copied into the schedule: a
 * forward waits, and the stage drains its backwards and updates, until its version exists. This
 * is how synchronous start and cooldown switch a 2BW or PipeDream pipeline between flushing
 * (version t) and not flushing. kind must be 1F1B, 2BW or PipeDream (for PipeDream, M = 1). */
int nb_pipe_generate_versions(nb_pipe_schedule *out, nb_pipe_kind kind, int n_stages, int n_micro, int n_steps,
                              const int *versions);
/* An interleaved schedule (P workers, v chunks) as the pipeline of V = P x v stages it computes: stage
 * k = c P + s lists worker s's actions on chunk c in the worker's order (chunk 0), and an update of every
 * step (each virtual stage updates its own part). kind stays NB_PIPE_INTERLEAVED, n_chunks 1. Run as a
 * V-stage pipeline whose worker s drives stages s, s + P, ... on one thread, it computes exactly what
 * the one-process run split into V stages computes. Fails on a schedule without chunks. */
int nb_pipe_virtualize(const nb_pipe_schedule *interleaved, nb_pipe_schedule *out);
/* The version stage s uses for step t: the schedule's table, or the kind's rule. */
int nb_pipe_step_version(const nb_pipe_schedule *s, int stage, int step);
/* The schedule of full's first n_steps steps, each on the same versions, that ends there (its
 * last steps drain instead of streaming into the next): what a run stopped early runs. */
int nb_pipe_truncate(const nb_pipe_schedule *full, int n_steps, nb_pipe_schedule *out);
/* How many leading actions stage's lists in a and b have in common: a worker may switch from a to b
 * while it has run fewer. */
size_t nb_pipe_common_prefix(const nb_pipe_schedule *a, const nb_pipe_schedule *b, int stage);
/* An empty schedule with room for the given number of actions per stage (counts[s]), of one chunk per
 * stage (set n_chunks after it for more); the caller fills actions (tests build hand-made schedules
 * this way). */
int nb_pipe_alloc(nb_pipe_schedule *out, nb_pipe_kind kind, int n_stages, int n_micro, int n_steps,
                  const size_t *counts);
void nb_pipe_free(nb_pipe_schedule *s);
size_t nb_pipe_n_actions(const nb_pipe_schedule *s);

/* 0 when the schedule is sound: actions well formed (chunks in 0 .. n_chunks - 1); every micro-batch
 * forwarded exactly once per stage and chunk and backwarded exactly once (one BACKWARD, or a
 * BACKWARD_INPUT then a BACKWARD_WEIGHT), forward first; a chunk's forward after the same micro-batch's
 * forward of the chunk before on the stage, its backward (or B) after the backward (or B) of the chunk
 * after (the virtual stages upstream and downstream on the same worker); the weight gradients (BACKWARD,
 * W) of each chunk in increasing micro-batch order (the accumulation order of the single-process run);
 * forward and backward of a micro-batch on the same version, the one the delay rule gives; updates in
 * step order, each after all of its step's weight gradients, and a step's backwards between update
 * t - 1 and update t; and its lowering (no tied, clip, evaluation or saving) passes nb_low_validate:
 * no version used before the updates made it, no deadlock (which also keeps a B after the B of the
 * virtual stage downstream on another worker). Otherwise -1 with a message naming the stage, the action index and the problem
 * ("schedule: ..."), or the lowered check's ("lowered: ...", action indices in the lowered lists;
 * a deadlock names the cycle of waits). */
int nb_pipe_validate(const nb_pipe_schedule *s);

/* Per-stage costs (arrays of n_stages): forward, backward (> 0) and update (>= 0) durations,
 * and the communication latency between neighbours (>= 0). The backward is the sum of its input
 * gradient (B) and its weight gradient (W): backward_weight[s] is W's share, 0 < W < backward (NULL:
 * half the backward), and B costs the rest. The costs are a whole stage's: with v chunks each chunk's
 * forward, backward, B and W cost the stage's / v (the update is one per stage). */
typedef struct {
    const double *forward, *backward, *update;
    double comm;
    const double *backward_weight;
} nb_pipe_costs;

typedef struct {
    int n_stages;
    double makespan;
    double bubble_fraction;       /* total idle / (P x makespan) */
    double steady_idle_fraction;  /* idle / time over the last half of the steps (see docs) */
    int steady_from_step;         /* the first step of that window */
    double *busy, *idle;          /* per stage; idle = makespan - busy */
    int *peak_activations;        /* per stage: most (micro-batch, chunk) forwards done whose backward (its W
                                     when split) is not */
    double *peak_activation_mbs;  /* the same in micro-batches of the whole stage: peak_activations / v */
    int *peak_versions;           /* per stage: most weight versions held at once */
    double *t_start, *t_finish;   /* per action, indexed like schedule->actions */
} nb_pipe_sim;

/* Validates and simulates. The simulation is the schedule's lowering (no tied, clip, evaluation or
 * saving) run by nb_low_simulate with latency = comm and every other message and the coordinator
 * free: each action starts when its stage is free and its input has arrived (forward of j at s:
 * forward of j at s - 1 finished + comm; backward of j at s: backward of j at s + 1 finished + comm,
 * or at the last stage its own forward finished; with chunks, between virtual stages; a W: when the
 * stage is free; an update: when the stage is free; in the one-process order, a stage's next step
 * also waits for every stage's update, the END it receives).
 * O(actions) time and memory. Free the result with nb_pipe_sim_free. */
int nb_pipe_simulate(const nb_pipe_schedule *s, const nb_pipe_costs *costs, nb_pipe_sim *out);

void nb_pipe_sim_free(nb_pipe_sim *sim);

/* ---- Lowering: every message made explicit (docs/executor.md) ----
 * A run is executed as per-endpoint lists of low-level actions: endpoints 0 .. P-1 are the stages,
 * endpoint P is the coordinator (statistics, progress and metrics lines, evaluation results,
 * checkpoint commit, stop decisions, the summary), which computes nothing. nb_pipe_lower turns a
 * schedule (forward, backward, update, with weight versions) into these lists; every message a
 * run exchanges is a SEND in one list and its RECV in another, so the validator sees all of them
 * and the simulator costs them. The executor (src/train/exec) runs the lists as they are: a worker is a
 * flat loop over its actions.
 *
 * The lowered update of step t on stage s, in list order:
 *   [replicas]          REDUCE(t): the step's gradient summed over the stage's data-parallel replicas
 *   [tied split, last]  SEND TIED_GRAD(t) -> 0        [tied split, first] RECV TIED_GRAD(t) <- P-1
 *   GRADS(t)            the gradient complete: the tied sum (first stage), Taylor; its squared norm
 *   [clip]              SEND NORM(t) -> every other stage in stage order, then RECV NORM(t) <- each, in order
 *   APPLY(t)            global clipping, divergence checks, the optimizer's step, the delay's apply
 *   [tied split, first] SEND TIED_W(t + 1) -> P-1     (the last stage receives it right before it
 *                       next reads its current weights: RECV TIED_W(v) <- 0)
 *   SEND STATS(t) -> coordinator
 *   [eval after t]      per validation batch b: [s > 0] RECV EVAL_ACT(b) <- s-1, EVAL(b),
 *                       [s < P-1] SEND EVAL_ACT(b) -> s+1; the last stage then SEND EVAL_LOSS(t) -> coordinator
 *   [t >= from + lag]   RECV END(t - lag) <- coordinator: the number of steps the run ends after
 *   [save after t]      SAVE(t) (this stage's part), SEND SAVED(t) -> coordinator
 *                       (save_whole: SEND SAVED(t), then RECV COMMITTED(t) <- coordinator)
 * and a forward / backward of micro-batch j: [s > 0] RECV ACT(j) <- s-1, FORWARD(j),
 * [s < P-1] SEND ACT(j) -> s+1; [s < P-1] RECV GRAD(j) <- s+1, BACKWARD(j), [s > 0] SEND GRAD(j) -> s-1.
 * A split backward: its B as the backward above (BACKWARD_INPUT(j) between the GRADs), its W alone
 * (BACKWARD_WEIGHT(j), no message). With v chunks the neighbours are the virtual stages': chunk c of
 * stage 0 (c > 0) receives from chunk c - 1 of stage P-1 and the last stage's chunk c < v-1 sends to
 * stage 0; the messages carry the chunk of the virtual stage upstream of the boundary they cross
 * (`chunk`), and P = 1 sends none (the chunks follow each other on the one stage). Evaluation through
 * chunks is not lowered (nb_pipe_lower refuses it).
 * At the end of a stage's list: [tied split, last] its pending RECV TIED_W, SEND DONE -> coordinator,
 * [gather_params, s > 0] SEND PARAMS -> coordinator.
 * The coordinator, per step t: RECV STATS(t) <- 0 .. P-1, [eval] RECV EVAL_LOSS(t) <- P-1, REPORT(t),
 * [some stage receives END(t)] DECIDE(t) and SEND END(t) -> 0 .. P-1, [save] RECV SAVED(t) <- 0 .. P-1,
 * COMMIT(t) ([save_whole] SEND COMMITTED(t) -> 0 .. P-1); at the end RECV DONE <- 0 .. P-1,
 * [gather_params] RECV PARAMS <- 1 .. P-1, FINISH. */
typedef enum {
    NB_MSG_ACT,        /* s -> s+1: the activations of micro-batch `index` (chunks: also P-1 -> 0) */
    NB_MSG_GRAD,       /* s+1 -> s: their gradient (chunks: also 0 -> P-1) */
    NB_MSG_TIED_GRAD,  /* last -> first: the head's part of the tied embedding's gradient, step `index` */
    NB_MSG_TIED_W,     /* first -> last: the embedding after `index` updates (the head's version `index`) */
    NB_MSG_NORM,       /* stage -> stage: its squared gradient norm of step `index` (global clipping) */
    NB_MSG_STATS,      /* stage -> coordinator: what step `index` measured on the stage */
    NB_MSG_EVAL_ACT,   /* s -> s+1: the activations of validation batch `index` */
    NB_MSG_EVAL_LOSS,  /* last -> coordinator: the validation loss after step `index` */
    NB_MSG_SAVED,      /* stage -> coordinator: its checkpoint part after step `index` written (or why not) */
    NB_MSG_COMMITTED,  /* coordinator -> stage: the checkpoint after step `index` is complete (save_whole) */
    NB_MSG_END,        /* coordinator -> stage: decided after step `index`: the steps the run ends after */
    NB_MSG_DONE,       /* stage -> coordinator: the stage's report at the end */
    NB_MSG_PARAMS,     /* stage -> coordinator: its final weights (gather_params) */
    NB_MSG_KINDS
} nb_msg_kind;

typedef enum {
    NB_LOW_SEND,      /* msg to peer, index */
    NB_LOW_RECV,      /* msg from peer, index */
    NB_LOW_FORWARD,   /* micro-batch mb of step, on weight version `version` */
    NB_LOW_BACKWARD,  /* the same */
    NB_LOW_GRADS,     /* step: the gradient complete (tied sum, Taylor), its squared norm */
    NB_LOW_APPLY,     /* step: clip, check, optimizer step, delay apply (makes version step + 1) */
    NB_LOW_EVAL,      /* validation batch `index` forward on the current weights, after step */
    NB_LOW_SAVE,      /* this stage's checkpoint part after step */
    NB_LOW_REPORT,    /* coordinator: step's progress and metrics lines */
    NB_LOW_DECIDE,    /* coordinator: after step, the steps the run ends after (a stop request moves it) */
    NB_LOW_COMMIT,    /* coordinator: the checkpoint after step completed (or the save failed) */
    NB_LOW_FINISH,    /* coordinator: results, summary, export */
    NB_LOW_BACKWARD_INPUT,   /* a split backward's input gradient (B): as FORWARD */
    NB_LOW_BACKWARD_WEIGHT,  /* its weight gradient (W): as FORWARD */
    NB_LOW_REDUCE,    /* step: the gradient (and the forward's loss sums) summed over the data-parallel
                         replicas, in replica order (nb_low_options.replicas) */
    NB_LOW_OPS
} nb_low_op;

typedef struct {
    nb_low_op op;
    nb_msg_kind msg;  /* SEND, RECV */
    int peer;         /* SEND, RECV: the other endpoint (0 .. P; P is the coordinator) */
    int index;        /* SEND, RECV: the message's index (see nb_msg_kind); EVAL: the validation batch */
    int step;         /* the optimizer step the action belongs to (-1 for the end's actions) */
    int mb, version;  /* FORWARD, BACKWARD, BACKWARD_INPUT, BACKWARD_WEIGHT (else -1) */
    int chunk;        /* those: the stage's model chunk; ACT, GRAD: the chunk upstream of the boundary; else 0 */
} nb_low_action;

typedef struct {
    int tied;                     /* the model ties embedding and head: with P > 1, the tied messages */
    int clip;                     /* global-norm clipping: the NORM exchange */
    int eval_batches;             /* validation batches per evaluation (0: no validation data) */
    const unsigned char *eval_at; /* [full run's steps]: evaluate after step t (NULL: never) */
    const unsigned char *save_at; /* [full run's steps]: save after step t (NULL: never) */
    int save_final;               /* also save after the schedule's last step (a run with --save-dir) */
    int save_whole;               /* one process holds every stage: the coordinator writes the whole
                                     checkpoint at COMMIT while the stages wait (COMMITTED) */
    int from_step;                /* a resumed run starts here: actions of earlier steps are left out */
    int gather_params;            /* stages 1 .. P-1 send their final weights to the coordinator (MPI) */
    int replicas;                 /* data parallelism: with more than 1, each update starts with REDUCE (the
                                     lists are every replica's; the sum is the transport's, not a message of
                                     these lists: the simulator gives it nb_low_costs.reduce) */
} nb_low_options;

typedef struct {
    int n_stages;                 /* P; the coordinator is endpoint P */
    int n_steps;                  /* the schedule's steps */
    int end_lag;                  /* a stage receives END(u - end_lag) at its update u */
    int n_chunks;                 /* v, model chunks per stage (0 is read as 1) */
    size_t *start;                /* P + 2 offsets: endpoint e's actions are actions[start[e] .. start[e+1]) */
    nb_low_action *actions;
} nb_low_schedule;

/* The sequential order of a one-process run: per step, each micro-batch forward through every
 * stage and back, then every stage's update; stage s uses versions[t * P + s] for step t (copied;
 * 0 <= version <= t). Any P, M >= 1. Its lowered lists, driven by one worker, compute exactly what
 * a pipeline with the same versions computes. */
int nb_pipe_generate_sequential(nb_pipe_schedule *out, int n_stages, int n_micro, int n_steps, const int *versions);
/* The most micro-batches of stage `stage` in flight (forward done, backward not yet; ZB-H1: its W not
 * yet) in the generators' schedules of this kind, P stages, M micro-batches per step and n_steps steps
 * (any versions): the activation slots it holds. Closed forms, so that a memory estimate needs no
 * schedule; -1 for interleaved, whose peak depends on its chunks. */
int nb_pipe_peak_in_flight(nb_pipe_kind kind, int n_stages, int n_micro, int n_steps, int stage);
/* The same counted in a schedule: the most (micro-batch, chunk) forwards of `stage` in flight (done, their
 * backward, or W when split, not yet), at least 1: the activation slots the stage's worker makes. */
int nb_pipe_stage_peak(const nb_pipe_schedule *s, int stage);

int nb_pipe_lower(const nb_pipe_schedule *s, const nb_low_options *o, nb_low_schedule *out);
void nb_low_free(nb_low_schedule *l);
/* How many leading actions endpoint e's lists in a and b have in common. */
size_t nb_low_common_prefix(const nb_low_schedule *a, const nb_low_schedule *b, int endpoint);
/* The index in endpoint e's list of the first action with this op, step and (SEND/RECV) msg and
 * index, or (size_t)-1. */
size_t nb_low_find(const nb_low_schedule *l, int endpoint, nb_low_op op, nb_msg_kind msg, int step, int index);
const char *nb_msg_kind_name(nb_msg_kind kind);
const char *nb_low_op_name(nb_low_op op);
/* 0 when the lowered lists are sound: every SEND has exactly one matching RECV (same kind and
 * index, from its sender) and the reverse, peers in range and never the endpoint itself, and the
 * lists run to their ends without deadlock when sends never wait (a receive waits for its send).
 * Otherwise -1 with a message naming the endpoint, the action index and the problem (an unmatched
 * message, or for a deadlock every endpoint's blocked receive). */
int nb_low_validate(const nb_low_schedule *l);
/* An action as the validator's messages and `nobubble schedule --lowered` write it, e.g.
 * "RECV GRAD(7) <- stage 2", "FORWARD mb 7 (step 1, version 0)", "APPLY(3)"; endpoint n_stages is
 * "coordinator". Returns buf. */
char *nb_low_action_text(const nb_low_action *a, int n_stages, char *buf, size_t size);
/* "stage e", or "coordinator" for e = n_stages. Returns buf. */
char *nb_low_endpoint_text(int e, int n_stages, char *buf, size_t size);

/* Costs of a lowered run (docs/schedules.md, "The lowered form"). Per-stage arrays have n_stages
 * entries, NULL meaning 0; every cost is finite and >= 0. */
typedef struct {
    const double *forward, *backward;  /* FORWARD, BACKWARD */
    const double *update;              /* APPLY (GRADS costs 0: the update's time is the optimizer's) */
    const double *eval;                /* one EVAL (a validation batch's forward) */
    double save;                       /* SAVE, on every stage */
    double action;                     /* every SEND and every coordinator action (REPORT .. FINISH) */
    double latency;                    /* a message between stages: from its send's finish to its arrival */
    double coordinator_latency;        /* the same for a message to or from the coordinator */
    double bytes_per_second;           /* link bandwidth; 0: bytes take no time */
    double bytes[NB_MSG_KINDS];        /* the size of one message of each kind */
    const double *backward_input, *backward_weight;  /* BACKWARD_INPUT, BACKWARD_WEIGHT (a split backward) */
    const double *reduce;              /* REDUCE: the gradient's sum over the data-parallel replicas (every
                                          replica runs the same lists at the same costs, so the sum's time
                                          is the one cost of the action; nb_proj_allreduce_seconds) */
} nb_low_costs;

typedef struct {
    int n_endpoints;                   /* P + 1: the stages, then the coordinator */
    double makespan;
    double *busy, *idle;               /* per endpoint; idle = makespan - busy */
    double *t_start, *t_finish;        /* per action, indexed like l->actions */
    long long msg_count[NB_MSG_KINDS]; /* messages of each kind */
    double msg_bytes[NB_MSG_KINDS];    /* and their bytes */
    size_t *match;                     /* per action: a SEND's RECV, a RECV's SEND (global indices); else -1 */
} nb_low_sim;

/* Validates (nb_low_validate) and simulates the lists: each action starts when its endpoint is free
 * and, for a RECV, its message has arrived: its bytes leave on the sender's link (one per endpoint,
 * shared by its messages in list order) once the SEND has finished and the link is free, and arrive
 * the latency later; a RECV itself takes no time. nb_pipe_simulate is this simulator run on a schedule's plain lowering.
 * O(actions) time and memory.
 * Free the result with nb_low_sim_free. */
int nb_low_simulate(const nb_low_schedule *l, const nb_low_costs *costs, nb_low_sim *out);
void nb_low_sim_free(nb_low_sim *sim);

/* A schedule's costs in their lowered form (what nb_pipe_simulate runs, and `schedule --lowered`): the
 * per-action FORWARD, BACKWARD, BACKWARD_INPUT and BACKWARD_WEIGHT costs, each the stage's / n_chunks,
 * in buf (4 x n_stages doubles), the update and the latency (comm) as given, everything else 0. -1
 * naming a cost out of range (forward and backward > 0, 0 < backward_weight < backward, update and
 * comm >= 0, all finite). */
int nb_pipe_action_costs(const nb_pipe_schedule *s, const nb_pipe_costs *costs, double *buf, nb_low_costs *out);
/* ---- Projection: a pipeline's step time, idle time and memory on a cluster (docs/projection.md) ----
 * The simulator above run on costs that come from a model's shape and a device's measured rates, with a
 * network model: the activations and their gradients cross each stage boundary as one message of
 * latency + bytes / bandwidth, and the data-parallel replicas sum each stage's gradient by a ring
 * all-reduce (nb_proj_allreduce_seconds) at the start of every update, not overlapped with the backward
 * (as nobubble's REDUCE runs). */

/* A dense decoder (Llama: attention with grouped key/value heads, SwiGLU). */
typedef struct {
    int n_layers, d_model, d_ffn, n_heads, n_kv_heads, vocab, seq;
    int tied;  /* the head is the embedding's transpose (one matrix, not two) */
} nb_proj_shape;

/* What a device and its network achieve. */
typedef struct {
    double flops_per_second;          /* a forward's products, achieved (not peak) */
    double backward_ratio;            /* a backward's time over its forward's (2: twice the products) */
    double weight_share;              /* the weight gradient's (W's) share of a backward, 0 < share < 1 */
    double update_seconds_per_param;  /* the optimizer's step, per parameter of the stage */
    double act_bytes;                 /* bytes per activation value on the wire (2: bf16) */
    double grad_bytes;                /* bytes per gradient value summed across replicas (4: fp32) */
    double state_bytes_per_param;     /* weights, gradient and optimizer state per parameter held (16:
                                         fp32 weights, gradient, AdamW's two moments) */
    double version_bytes_per_param;   /* a stashed weight version (4: fp32) */
    double latency;                   /* seconds per message, and per hop of the ring */
    double bytes_per_second;          /* a link's bandwidth (> 0) */
} nb_proj_device;

/* The run being projected. */
typedef struct {
    nb_pipe_kind kind;     /* gpipe, 1f1b, 2bw, interleaved or zbh1 */
    int n_stages;          /* P */
    int n_replicas;        /* D */
    int n_micro;           /* M, micro-batches per pipeline per step */
    int micro_batch;       /* sequences per micro-batch */
    int n_chunks;          /* interleaved: v (0: 2) */
} nb_proj_layout;

typedef struct {
    double step_s;              /* steady-state seconds per optimizer step */
    double tokens_per_s;        /* the whole job's: D x M x micro_batch x seq / step_s */
    double idle_fraction;       /* of the stages' time in the steady state */
    double reduce_s;            /* one stage's all-reduce per step (the largest) */
    double memory_bytes;        /* the stage holding the most: state, versions, peak activations */
    double act_message_bytes;   /* one ACT (or GRAD) message */
    int peak_activations;       /* most micro-batches (x chunks / v) in flight on one stage */
    double stage_forward_s[2];  /* the fastest and slowest stage's forward of one micro-batch */
} nb_proj_result;

/* The ring all-reduce of `bytes` over D replicas: 2 (D - 1) messages of bytes / D each, every one
 * paying the latency: 2 (D - 1) (latency + bytes / (D x bandwidth)). 0 for D = 1. */
double nb_proj_allreduce_seconds(double bytes, int n_replicas, double latency, double bytes_per_second);
/* The shape's parameters: those of one block and of the whole model (embedding, blocks, final norm,
 * the head unless tied). */
double nb_proj_block_params(const nb_proj_shape *m);
double nb_proj_params(const nb_proj_shape *m);
/* One sequence's forward products through one block (2 x multiply-adds: the projections, the
 * attention's scores and weighted sum over the causal half, the SwiGLU) and through the head. */
double nb_proj_block_flops(const nb_proj_shape *m);
double nb_proj_head_flops(const nb_proj_shape *m);
/* The blocks of each stage (blocks[P]): the contiguous split that minimizes the slowest stage, the
 * head on the last. -1 when P exceeds the blocks. */
int nb_proj_split(const nb_proj_shape *m, int n_stages, int *blocks);
/* What a simulation takes per stage (arrays of P). */
typedef struct {
    const double *forward, *backward;  /* one micro-batch's, seconds */
    const double *update;              /* the optimizer's step, seconds */
    const double *backward_weight;     /* W's share of backward, seconds (NULL: the device's weight_share) */
    const double *params;              /* parameters held: the all-reduce's values and the state (NULL: 0) */
    const double *act_memory;          /* bytes a micro-batch's activations hold until its backward (NULL: 0) */
    double act_message;                /* bytes of one ACT (and GRAD) message */
} nb_proj_stages;

/* Per-stage costs of `shape` on `dev`, split by nb_proj_split, micro-batches of micro_batch sequences:
 * into the arrays of P (buf holds 5 x P doubles) and the act_message. Activations held per block and
 * sequence: 34 x seq x d_model bytes (16-bit activations without recomputation, the attention's scores
 * not kept: Korthikanti et al. 2022 without its 5 a s^2 term, as with flash attention); the head's
 * float32 logits: 4 x seq x vocab. */
int nb_proj_stage_costs(const nb_proj_shape *m, const nb_proj_device *dev, int n_stages, int micro_batch,
                        double *buf, nb_proj_stages *out);
/* Simulates `layout` with these per-stage costs for 6 steps and measures steps 2..4: the steady state.
 * Fails naming what does not fit (M < P for 1F1B, 2BW and ZB-H1, M not a multiple of P for interleaved,
 * a cost out of range). tokens_per_s needs the sequence length: seq (0: not computed). */
int nb_proj_simulate(const nb_proj_layout *layout, const nb_proj_device *dev, const nb_proj_stages *stages, int seq,
                     nb_proj_result *out);
/* nb_proj_stage_costs then nb_proj_simulate: the projection of one layout of shape m. */
int nb_proj_run(const nb_proj_shape *m, const nb_proj_device *dev, const nb_proj_layout *layout, nb_proj_result *out);
#endif
