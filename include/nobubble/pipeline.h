/* Pipeline schedules as pure data (GPipe, 1F1B, PipeDream, PipeDream-2BW), their validator and
 * a lock-step simulator with per-stage costs. See docs/schedules.md.
 *
 * A schedule has P stages; per stage an ordered list of actions (forward or backward of one
 * micro-batch, or the optimizer update). Micro-batches are numbered globally: micro-batch j
 * belongs to optimizer step j / M. Sends and receives are derived: the forward of j at stage s
 * sends its activations to s + 1, the backward of j at stage s sends its gradient to s - 1.
 * Version v of a stage's weights is the weights after v updates of that stage; every action
 * records the version it uses, and the versions follow exactly the delays of src/delay/delay.c
 * (sync for GPipe and 1F1B, tau 1 for 2BW, tau = P - 1 - s for PipeDream). */
#ifndef NOBUBBLE_PIPELINE_H
#define NOBUBBLE_PIPELINE_H
#include <stddef.h>
#include "nobubble/common.h"

typedef enum { NB_PIPE_GPIPE, NB_PIPE_1F1B, NB_PIPE_PIPEDREAM, NB_PIPE_2BW } nb_pipe_kind;
#define NB_PIPE_KINDS "gpipe, 1f1b, pipedream, 2bw"

typedef enum { NB_PIPE_FORWARD, NB_PIPE_BACKWARD, NB_PIPE_UPDATE } nb_pipe_op;

typedef struct {
    nb_pipe_op op;
    int mb;       /* global micro-batch index (forward/backward); -1 for an update */
    int step;     /* optimizer step the action belongs to (mb / n_micro; for an update, the step it ends) */
    int version;  /* weight version used: forward/backward run on it; an update reads it and makes version + 1 */
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
} nb_pipe_schedule;

/* "gpipe", "1f1b", "pipedream", "2bw"; an unknown name fails with the valid ones listed. */
int nb_pipe_kind_parse(const char *text, nb_pipe_kind *out);
const char *nb_pipe_kind_name(nb_pipe_kind kind);

/* The --delay of the one-process run with the same weight versions: "sync" (gpipe, 1f1b), "2bw",
 * "pipedream". */
const char *nb_pipe_delay_name(nb_pipe_kind kind);
/* The weight version stage s uses for the micro-batches of optimizer step t (the delay rule):
 * GPipe/1F1B t; 2BW max(t - 1, 0); PipeDream max(t - (P - 1 - s), 0) (a step is a micro-batch). */
int nb_pipe_version_rule(nb_pipe_kind kind, int n_stages, int stage, int step);

/* Builds the schedule of `kind` for P stages, M micro-batches per step and S steps. PipeDream
 * updates after every micro-batch: it gets M x S micro-batches, stored as n_micro = 1 and
 * n_steps = M x S. 1F1B and 2BW need M >= P. Fails (nb_last_error) on bad sizes. */
int nb_pipe_generate(nb_pipe_schedule *out, nb_pipe_kind kind, int n_stages, int n_micro, int n_steps);
/* A stream schedule (1F1B order, no flush of its own) whose step t runs on stage s's version
 * versions[t * P + s] (0 <= version <= t; it may step back, as PipeDream's
 * does after a synchronous start), copied into the schedule: a
 * forward waits, and the stage drains its backwards and updates, until its version exists. This
 * is how synchronous start and cooldown switch a 2BW or PipeDream pipeline between flushing
 * (version t) and not flushing. kind must be 1F1B, 2BW or PipeDream (for PipeDream, M = 1). */
int nb_pipe_generate_versions(nb_pipe_schedule *out, nb_pipe_kind kind, int n_stages, int n_micro, int n_steps,
                              const int *versions);
/* The version stage s uses for step t: the schedule's table, or the kind's rule. */
int nb_pipe_step_version(const nb_pipe_schedule *s, int stage, int step);
/* The schedule of full's first n_steps steps, each on the same versions, that ends there (its
 * last steps drain instead of streaming into the next): what a run stopped early runs. */
int nb_pipe_truncate(const nb_pipe_schedule *full, int n_steps, nb_pipe_schedule *out);
/* How many leading actions stage's lists in a and b have in common: a worker may switch from a to b
 * while it has run fewer. */
size_t nb_pipe_common_prefix(const nb_pipe_schedule *a, const nb_pipe_schedule *b, int stage);
/* An empty schedule with room for the given number of actions per stage (counts[s]); the
 * caller fills actions (tests build hand-made schedules this way). */
int nb_pipe_alloc(nb_pipe_schedule *out, nb_pipe_kind kind, int n_stages, int n_micro, int n_steps,
                  const size_t *counts);
void nb_pipe_free(nb_pipe_schedule *s);
size_t nb_pipe_n_actions(const nb_pipe_schedule *s);

/* 0 when the schedule is sound: actions well formed; every micro-batch forwarded and backwarded
 * exactly once per stage, forward first; backwards in increasing micro-batch order (the
 * accumulation order of the single-process run); forward and backward of a micro-batch on the
 * same version, the one the delay rule gives, never above the updates done; updates in step
 * order, each after all of its step's backwards, and a step's backwards between update t - 1
 * and update t; and no deadlock (the dependency simulation completes). Otherwise -1 with a
 * message naming the stage, the action index and the problem (a deadlock names the cycle). */
int nb_pipe_validate(const nb_pipe_schedule *s);

/* Per-stage costs (arrays of n_stages): forward, backward (> 0) and update (>= 0) durations,
 * and the communication latency between neighbours (>= 0). */
typedef struct {
    const double *forward, *backward, *update;
    double comm;
} nb_pipe_costs;

typedef struct {
    int n_stages;
    double makespan;
    double bubble_fraction;       /* total idle / (P x makespan) */
    double steady_idle_fraction;  /* idle / time over the last half of the steps (see docs) */
    int steady_from_step;         /* the first step of that window */
    double *busy, *idle;          /* per stage; idle = makespan - busy */
    int *peak_activations;        /* per stage: most forwards done whose backward is not */
    int *peak_versions;           /* per stage: most weight versions held at once */
    double *t_start, *t_finish;   /* per action, indexed like schedule->actions */
} nb_pipe_sim;

/* Validates and simulates: each action starts when its stage is free and its input has arrived
 * (forward of j at s: forward of j at s - 1 finished + comm; backward of j at s: backward of j at
 * s + 1 finished + comm, or at the last stage its own forward finished; an update: when the
 * stage is free). O(actions) time and memory. Free the result with nb_pipe_sim_free. */
int nb_pipe_simulate(const nb_pipe_schedule *s, const nb_pipe_costs *costs, nb_pipe_sim *out);
void nb_pipe_sim_free(nb_pipe_sim *sim);
#endif
