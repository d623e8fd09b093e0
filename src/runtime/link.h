/* Internal: a link is a table of operations and one endpoint's identity (the interface both
 * transports implement; see include/nobubble/runtime.h). */
#ifndef NB_RUNTIME_LINK_H
#define NB_RUNTIME_LINK_H
#include "nobubble/runtime.h"

/* A bucket of the sum over replicas in flight (the transport's). */
typedef struct nb_link_bucket nb_link_bucket;

typedef struct {
    int (*send)(nb_link *l, int to, int tag, const void *buf, size_t bytes);
    int (*recv)(nb_link *l, int from, int tag, void *buf, size_t bytes);
    int (*poll)(nb_link *l, int from, int tag);
    void (*fail)(nb_link *l, const char *message);
    void (*close)(nb_link *l);
    /* nb_link_replica_sum with more than one replica (NULL: a transport without replicas) */
    int (*replica_sum)(nb_link *l, void *buf, size_t n, size_t value_bytes);
    /* nb_link_bucket_start, _finish and _drop with more than one replica (NULL: a transport without replicas) */
    int (*bucket_start)(nb_link *l, const void *values, size_t n, size_t value_bytes, nb_link_bucket **out);
    int (*bucket_finish)(nb_link *l, nb_link_bucket *b, void *buf, int wait);
    void (*bucket_drop)(nb_link *l, nb_link_bucket *b);
} nb_link_ops;

struct nb_link {
    const nb_link_ops *ops;
    int stage, count;
    void *impl;
    double timeout_s;  /* a receive fails after waiting this long (0: it waits for ever) */
    int replica, replicas;  /* data parallelism: this endpoint's replica of its stage, and how many (0 and 1) */
};
/* Link tags are 0 <= tag < NB_LINK_TAGS (transports may encode more above them). */
#define NB_LINK_TAGS (1 << 20)
/* The failure of a receive that waited longer than the link's timeout (nb_fail). */
int nb_link_timed_out(const nb_link *l, int from, int tag);
/* acc[i] += x[i] for n values of value_bytes (4: float, 8: double): the one addition of replicas' sums, which
 * the MPI transport makes over the network and a process that computes the replicas' groups in turn makes
 * in memory (src/train/exec/worker.c), so that both give the same bits. */
void nb_link_add_values(void *acc, const void *x, size_t n, size_t value_bytes);

/* nb_link_replica_sum in buckets, started before the sum is needed so that the transport moves them while the
 * caller computes (data parallelism's overlap of the gradient's sum with the backward: docs/data-parallel.md,
 * "Buckets"). Every replica of the stage starts the same buckets (the same n) in the same order, and calls
 * nb_link_replica_sum in the same places among them: between two replicas the messages of buckets and sums
 * are matched in that order. Finishing may come in any order.
 * - start: copies n values (value_bytes 4 or 8) and starts sending them to every other replica of the stage
 *   and receiving theirs; the caller may change its values at once. *out is NULL with one replica.
 * - finish: the sum of the replicas' values of bucket b into buf (n values), added element by element in
 *   replica order, this replica's own (the values given to start) in its place: the bits nb_link_replica_sum
 *   would give. wait 0: only when every transfer of b is done (1), else 0 and b stays in flight (its
 *   transfers moved on); wait 1: waits, within the link's timeout (failing as nb_link_replica_sum does,
 *   naming the replica), then 1. b is released on 1 and on -1 (a failure). A NULL b is 1 at once.
 * - drop: releases b unsummed (a run that ends before its sum); buffers that the transport may still touch
 *   (a transfer with a replica that stalled or died) are left to the process. */
int nb_link_bucket_start(nb_link *l, const void *values, size_t n, size_t value_bytes, nb_link_bucket **out);
int nb_link_bucket_finish(nb_link *l, nb_link_bucket *b, void *buf, int wait);
void nb_link_bucket_drop(nb_link *l, nb_link_bucket *b);
#endif
