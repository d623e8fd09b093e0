/* Internal: a link is a table of operations and one endpoint's identity (the interface both
 * transports implement; see include/nobubble/runtime.h). */
#ifndef NB_RUNTIME_LINK_H
#define NB_RUNTIME_LINK_H
#include "nobubble/runtime.h"

typedef struct {
    int (*send)(nb_link *l, int to, int tag, const void *buf, size_t bytes);
    int (*recv)(nb_link *l, int from, int tag, void *buf, size_t bytes);
    int (*poll)(nb_link *l, int from, int tag);
    void (*fail)(nb_link *l, const char *message);
    void (*close)(nb_link *l);
    /* nb_link_replica_sum with more than one replica (NULL: a transport without replicas) */
    int (*replica_sum)(nb_link *l, void *buf, size_t n, size_t value_bytes);
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
#endif
