/* Internal to src/pipeline: what the lowered lists' validator (lowered_check.c) and their simulator
 * (lowered_sim.c) share, so that both see the same pairing of messages and the same order of events. */
#ifndef NB_PIPELINE_LOWERED_DRY_RUN_H
#define NB_PIPELINE_LOWERED_DRY_RUN_H
#include <stddef.h>
#include "nobubble/pipeline.h"

static inline int lowered_is_message(nb_low_op op) { return op == NB_LOW_SEND || op == NB_LOW_RECV; }

/* The lists' shape and every action's own fields (ops, peers, directions, ranges); -1 with the
 * first problem named. */
int lowered_check_fields(const nb_low_schedule *l);
/* partner[g] (one entry per action) gets, for every SEND and RECV, the global index of its match:
 * the k-th SEND of a message (sender, receiver, kind, index) pairs with its k-th RECV, the order in
 * which a link delivers two messages of the same source and tag. -1 naming the first unmatched one. */
int lowered_pair(const nb_low_schedule *l, size_t *partner);
/* Runs every endpoint's list in order, a RECV waiting until its SEND has run (sends never wait). With
 * costs, t_start and t_finish (per action) get the times; costs NULL only orders the events (and the
 * time arrays may be NULL). -1 on a deadlock naming every stuck endpoint's receive and a cycle. */
int lowered_dry_run(const nb_low_schedule *l, const size_t *partner, const nb_low_costs *costs, double *t_start,
                double *t_finish);
/* The fields checked and the messages paired: *partner (allocated; NULL on failure) is the pairing. */
int lowered_prepare(const nb_low_schedule *l, size_t **partner);
#endif
