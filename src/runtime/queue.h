/* Internal: a queue of copied messages for one endpoint, matched by (source, tag). The threads hub
 * keeps one per endpoint under its mailbox's lock; the MPI transport keeps one per endpoint of its
 * own process (messages between two endpoints of one process never touch MPI). No locking here:
 * the caller owns it. */
#ifndef NB_RUNTIME_QUEUE_H
#define NB_RUNTIME_QUEUE_H
#include <stddef.h>

typedef struct nb_msg {
    struct nb_msg *next;
    int from, tag;
    size_t bytes;
    unsigned char data[];
} nb_msg;

typedef struct {
    nb_msg *head, *tail;
} nb_queue;

/* A copy of bytes from `from` under `tag`; NULL (nb_fail naming `self`) when out of memory. */
nb_msg *nb_msg_new(int self, int from, int to, int tag, const void *buf, size_t bytes);
void nb_queue_push(nb_queue *q, nb_msg *m);
/* The first message of (from, tag), left in place, or NULL. */
const nb_msg *nb_queue_find(const nb_queue *q, int from, int tag);
/* Unlinks and returns the first message of (from, tag), or NULL. */
nb_msg *nb_queue_take(nb_queue *q, int from, int tag);
/* Copies m into buf, which must be exactly its size (else nb_fail naming endpoint `self`), and frees m. */
int nb_msg_deliver(nb_msg *m, int self, void *buf, size_t bytes);
void nb_queue_clear(nb_queue *q);
#endif
