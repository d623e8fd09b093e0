/* nobubble: the runtime's transport. Pipeline stages exchange messages (activations, their
 * gradients, the tied embedding, small statistics) through a link: one stage's end of a
 * transport. Two implementations share the interface: threads in one process (a hub of
 * mailboxes) and MPI processes (one rank per stage). The training code above it is the same for
 * both (src/train/pipeline.c).
 *
 * Semantics, on both transports:
 * - a message is addressed by (source stage, tag); receives match exactly that pair, so messages
 *   of different tags may be taken in any order, and two of the same pair arrive in send order;
 * - send never waits for the receiver (the bytes are copied or queued): a schedule that the
 *   simulator runs without deadlock runs without deadlock here;
 * - when a stage fails it calls nb_link_fail: every other stage's pending and future receive
 *   returns -1 with a message naming the failed stage (threads), or the whole MPI job is
 *   aborted with the message (MPI), so that no stage waits forever. */
#ifndef NOBUBBLE_RUNTIME_H
#define NOBUBBLE_RUNTIME_H
#include <stddef.h>

typedef enum { NB_TRANSPORT_THREADS, NB_TRANSPORT_MPI } nb_transport_kind;
#define NB_TRANSPORT_KINDS "threads, mpi"
int nb_transport_parse(const char *text, nb_transport_kind *out);
const char *nb_transport_name(nb_transport_kind kind);

typedef struct nb_link nb_link;
int nb_link_stage(const nb_link *l);
int nb_link_count(const nb_link *l);
/* Copies bytes to stage `to` under `tag` (0 <= tag < 2^20). */
int nb_link_send(nb_link *l, int to, int tag, const void *buf, size_t bytes);
/* Waits for the message (from, tag) and copies it into buf, which must be exactly its size. */
int nb_link_recv(nb_link *l, int from, int tag, void *buf, size_t bytes);
/* A receive that waits more than `seconds` for its message fails, naming the stage it waited for, so
 * that a peer that stalled (stopped, hung on a file system) or vanished without taking the job down
 * cannot hold the others for ever (0, the default: no limit). */
void nb_link_set_timeout(nb_link *l, double seconds);
/* This stage failed with `message`: the other stages stop (see above). */
void nb_link_fail(nb_link *l, const char *message);
/* Releases this stage's end (waits for its sends to be delivered on MPI). */
void nb_link_close(nb_link *l);

/* Threads: a hub for n stages and its links, one per worker thread. */
typedef struct nb_hub nb_hub;
nb_hub *nb_hub_create(int n_stages);
nb_link *nb_hub_link(nb_hub *h, int stage);
/* The first failure's message ("stage S failed: ..."), or NULL. */
const char *nb_hub_failure(nb_hub *h);
void nb_hub_free(nb_hub *h);

/* MPI: initializes MPI (once per process) and returns this rank's link; fails when nobubble was
 * built without MPI or when the world size is not n_stages. */
int nb_mpi_available(void);
int nb_mpi_link(nb_link **out, int n_stages);
/* MPI_Finalize, after the links are closed (no-op without MPI or when it was never started). */
void nb_mpi_finish(void);
/* Whether this process was started by an MPI launcher (mpirun sets its rank variables). */
int nb_mpi_launched(void);
#endif
