/* Internal: the executor. Every run, with or without --pipeline, is the lowered lists of its schedule
 * (include/nobubble/pipeline.h, "Lowering") run by endpoints over a link: stages 0 .. P-1 compute,
 * endpoint P, the coordinator, keeps the books. A driver runs one endpoint's list (a pipeline's worker
 * thread or MPI rank), or several in turn (the one-process run drives every endpoint over a hub from
 * one thread; an MPI rank 0 drives stage 0 and the coordinator). Each endpoint is a flat loop over its
 * actions: a SEND or RECV moves the bytes of the buffer its message kind names (exec_buffer), every
 * other action is the role's (worker.c for the stages, coordinator.c). docs/executor.md. */
#ifndef NB_TRAIN_EXEC_H
#define NB_TRAIN_EXEC_H
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include "nobubble/data.h"
#include "nobubble/pipeline.h"
#include "nobubble/runtime.h"
#include "nobubble/train.h"
#include "util/fs.h"

#include "train/run/run.h"

#define EXEC_UNPROVEN_MAX 64   /* unproven checkpoints remembered for the message (older ones drop out) */

/* What a run's endpoints share in this process. Read-only while the lists run, but for last_saved. */
typedef struct {
    const nb_train_options *o;
    nb_model *model;
    const nb_backend *backend;  /* every stage's (nb_stage.backend), opened by nb_train from --gemm */
    nb_pipe_schedule sc;     /* the schedule of the whole run (interleaved: its virtual stages, nb_pipe_virtualize) */
    nb_pipe_schedule isc;    /* interleaved: the schedule of its workers (sc is made from it; a cut is too) */
    int workers;             /* threads of stage endpoints: P, or an interleaved run's P of P x chunks endpoints */
    nb_low_options low_opt;  /* how it is lowered (a stop lowers its cut the same way) */
    unsigned char *eval_at, *save_at;  /* per step of sc */
    nb_low_schedule low;     /* sc lowered */
    int T, P, M, S;          /* sequence length, stages, micro-batches per step (of sc: this replica's), steps of sc */
    /* --data-parallel D (docs/data-parallel.md): the step's micro-batches over every replica (step_micro: each
     * backward takes 1 / step_micro of its loss), split into D contiguous groups, one per replica, whose sums
     * are added in replica order. Where the replicas are MPI ranks, sc holds this rank's replica's group
     * (M = step_micro / D, groups 1, replica its own); in one process, sc holds every group (M = step_micro,
     * groups D, replica 0), computed in turn. */
    int D, groups, replica, step_micro;
    int start;               /* the first step this run runs (after --resume) */
    nb_schedule sched;       /* the learning rate over the S steps */
    int single_driver;       /* one thread drives every endpoint (the one-process run) */
    int threads;             /* GEMM threads per driver */
    int steady_from, steady_to;  /* the steady-state window of steps [from, to): a pipeline's report */
    train_folders folders;   /* --save-dir's and --out's locks (train_lock_run), held by the coordinator's process */
    pthread_mutex_t saved_mu;  /* guards the four below */
    char last_saved[4200];   /* the newest complete checkpoint ("" when none), named if the run fails */
    char good[4200];         /* the newest checkpoint proven good ("" when none), for a divergence's message */
    int unproven[EXEC_UNPROVEN_MAX], n_unproven;  /* steps saved after it, oldest first */
    nb_memory_estimate mem;  /* this process's estimated memory and what was available (summary.json) */
} exec_run;

/* The newest complete checkpoint, copied (a save that fails names it; the coordinator writes it). */
void exec_last_saved(exec_run *run, char *buf, size_t size);
/* The checkpoint of step `step` (dir) is complete: the newest, not proven yet. */
void exec_checkpoint_saved(exec_run *run, const char *dir, int step);
/* The checkpoint a run resumed from: the newest, and counted as good (the run was started from it). */
void exec_checkpoint_resumed(exec_run *run, const char *dir);
/* Weights of version `version` proved finite (--keep's proof): the newest checkpoint at or before it is good. */
void exec_checkpoint_proven(exec_run *run, int version);
/* A copy of the good and unproven checkpoints, for train_diverged. */
void exec_checkpoints(exec_run *run, train_checkpoints *out);

enum { EXEC_MOE_BLOCKS = 256 };
/* What a stage tells the coordinator after its update t. */
typedef struct {
    double update_sq, version_sq;  /* the update's and the version distance's squared norms */
    double loss;                   /* the mean over the step's micro-batches (the last stage) */
    double grad_norm;              /* before clipping, over all stages (with --clip) */
    double grad_sq;                /* this stage's gradients' sum of squares, before clipping: the
                                      coordinator sums them into the logged global norm, --clip or not */
    double tau;                    /* the delay of the version the step ran on */
    double aside;                  /* seconds so far spent evaluating and saving, not training */
    double taylor_sq, taylor_grad_sq;  /* with --taylor: the correction's and the raw gradient's squared norms */
    double update;                 /* seconds of the step's GRADS and APPLY (nb_step_time.update) */
    /* A mixture of experts: this stage's MoE blocks' load-balancing losses summed, and each block's largest
     * and smallest expert load (the share of the assignments), each a mean over the step's micro-batches;
     * loads of the stage's first EXEC_MOE_BLOCKS MoE blocks. */
    double aux;
    int moe_blocks;
    float load_max[EXEC_MOE_BLOCKS], load_min[EXEC_MOE_BLOCKS];
} exec_stats;

/* The validation loss, from the last stage after an evaluation, with that stage's seconds aside so far
 * (the evaluation's included), so that the step it follows is timed without it: a STATS message is sent
 * before the evaluation that follows its update. */
typedef struct {
    double loss, aside;
    double router_staleness;  /* a MoE model in one stage under a delay: the first batch's (worker.c); else NAN */
} exec_eval;

/* What a stage reports at the end (a pipeline's per-stage table and summary). */
typedef struct {
    double busy, aside, wall;                        /* seconds: computing, evaluating/saving, in all */
    double steady_busy, steady_wall, steady_aside;   /* over the steady-state window */
    double bytes, slots;                             /* memory held, activation slots */
    double forward, backward, update;                /* mean seconds of each kind of action, over the steady
                                                        window (the whole run when it has none) */
    /* data parallelism over MPI: REDUCE's seconds over the run, those of them spent finishing the buckets
     * started in backwards (waiting for their transfers), the buckets started in backwards, and those of them
     * summed before their REDUCE (their transfers done while the backward ran) */
    double reduce, bucket_wait, buckets, buckets_early;
} exec_report;

/* A stage's part of a checkpoint, as it tells the coordinator. */
typedef struct {
    int failed;
    char error[1024];
} exec_saved;

typedef struct exec_endpoint exec_endpoint;
struct exec_endpoint {
    exec_run *run;
    int id;                       /* 0 .. P-1: a stage; P: the coordinator */
    nb_link *link;
    const nb_low_schedule *low;   /* the lists it follows: the run's, or its own cut after a stop */
    nb_low_schedule cut;
    size_t pos;                   /* the running action's index in its list */
    int end;                      /* the steps the run ends after (END moves it) */
    /* the role: what a SEND/RECV of a kind moves, and every other action */
    int (*buffer)(exec_endpoint *e, const nb_low_action *a, void **data, size_t *bytes);
    int (*act)(exec_endpoint *e, const nb_low_action *a);
    int (*received)(exec_endpoint *e, const nb_low_action *a);  /* after a RECV (NULL: nothing) */
    void *role;
};

/* The message tag of a lowered SEND/RECV: its kind and index (indices wrap at 2^16, far more than are
 * ever in flight between two endpoints). */
int exec_tag(const nb_low_action *a);
/* Switches e to the run cut after `end` steps (a stop on request), which must agree with what it has
 * run so far. */
int exec_switch_end(exec_endpoint *e, int end);
/* The smallest end after step t that every endpoint can still switch to when the decision of step t
 * reaches it (docs/executor.md, "Stopping"), or run->S when none. */
int exec_stop_end(exec_run *run, int t);
/* Runs the endpoints' lists to their ends. One endpoint: in order, receives waiting. Several: in turn,
 * each as far as its messages allow; when none can go on, waits for a message (or fails as a deadlock
 * when every endpoint of the run is here). Fails at the first failing action (after nb_link_fail). */
int exec_drive(exec_endpoint **eps, int n, int all_local);
/* One step of a plan: the endpoint (an index into eps) whose compute action (forward, backward or either
 * half of a split one) runs next, and which of that endpoint's compute actions it is (0, 1, ...). */
typedef struct {
    int endpoint;
    long ordinal;
} exec_plan_step;
/* exec_drive for one worker that holds several endpoints (an interleaved worker's virtual stages): their
 * compute actions in the plan's order (the worker's schedule), every other action as soon as its messages
 * allow. Should the planned endpoint wait for a message no other endpoint anywhere can send before
 * the compute, another endpoint's compute may run first (the results are the same, only the order
 * differs): *unplanned counts those computes (0 when the worker kept its schedule's order). */
int exec_drive_planned(exec_endpoint **eps, int n, const exec_plan_step *plan, size_t plan_n, long *unplanned);

/* Data parallelism's buckets (worker.c): the gradient's n values cut into buckets of about `bucket` values along
 * the ranges a whole backward makes final (starts: where the final part starts after each, descending to 0, as
 * nb_stage_grad_ranges lists them). A bucket ends where the one before it starts (the first at n) and starts at
 * the first of starts that gives it at least `bucket` values, or at 0. Each bucket's start, in order, into cuts
 * (room for n_starts); returns how many. */
int exec_bucket_plan(const size_t *starts, int n_starts, size_t n, size_t bucket, size_t *cuts);

/* The roles (worker.c, coordinator.c): set up an endpoint, free it. */
int exec_stage_init(exec_endpoint *e, exec_run *run, int stage);
int exec_stage_resume(exec_endpoint *e);
void exec_stage_free(exec_endpoint *e);
/* The bytes of the stage's older weight versions and error-feedback buffer. */
size_t exec_stage_stash_bytes(const exec_endpoint *e);
/* One process holds every stage (save_whole): the whole checkpoint after step t, in the one-file layout. */
int exec_stages_save_whole(exec_run *run, exec_endpoint **stages, const char *dir, int t);
/* stages: every stage's endpoint when they share this process (NULL on MPI). */
int exec_coordinator_init(exec_endpoint *e, exec_run *run, exec_endpoint **stages, nb_train_result *res);
void exec_coordinator_free(exec_endpoint *e);
#endif
