/* nobubble: the runtime's transport. Endpoints exchange messages (activations, their gradients,
 * the tied embedding, small statistics) through links: a link is one endpoint's end of a
 * transport. Endpoints 0..P-1 are the pipeline stages; a run may have more (endpoint P: the
 * coordinator, which computes nothing). The messages below say "stage S" for any endpoint S. Two
 * implementations share the interface: threads in one process (a hub of mailboxes) and MPI
 * processes (one rank per stage; extra endpoints live on rank 0). The training code above it is
 * the same for both (the executor, src/train/exec/exec.c).
 *
 * Semantics, on both transports:
 * - a message is addressed by (source endpoint, tag); receives match exactly that pair, so messages
 *   of different tags may be taken in any order, and two of the same pair arrive in send order;
 * - send never waits for the receiver (the bytes are copied or queued): a schedule that the
 *   simulator runs without deadlock runs without deadlock here;
 * - when a stage fails it calls nb_link_fail: every other stage's pending and future receive
 *   returns -1 with a message naming the failed stage (threads), or the whole MPI job is
 *   aborted with the message (MPI), so that no stage waits forever;
 * - links belong to no thread: one thread may drive several endpoints (the one-process run drives
 *   all of a hub's; an MPI rank 0 drives its stage and the coordinator) by polling each for what
 *   it needs next and receiving only what is there. A receive of a message not yet sent by another
 *   endpoint of the same thread would wait for ever (threads: until the timeout; MPI: it fails at
 *   once, since both endpoints are in one process). nb_last_error() is per thread: the driving
 *   thread reads the failures of all its links. */
#ifndef NOBUBBLE_RUNTIME_H
#define NOBUBBLE_RUNTIME_H
#include <stddef.h>

typedef enum { NB_TRANSPORT_THREADS, NB_TRANSPORT_MPI } nb_transport_kind;
int nb_transport_parse(const char *text, nb_transport_kind *out);
const char *nb_transport_name(nb_transport_kind kind);
/* The i-th transport's name, NULL past the last (the settings table's enum row). */
const char *nb_transport_names(int i);
/* The transports' names as a list for messages, "threads, mpi", into buf. */
void nb_transport_list(char *buf, size_t size);

typedef struct nb_link nb_link;
int nb_link_stage(const nb_link *l);
int nb_link_count(const nb_link *l);
/* Data parallelism (docs/data-parallel.md): how many replicas of the pipeline the run has (1 on threads) and
 * which one this link's endpoint belongs to (0 .. replicas - 1). Messages go between the endpoints of one
 * replica; the coordinator (an extra endpoint, on replica 0) reaches every replica's stage s when it sends
 * to stage s. */
int nb_link_replicas(const nb_link *l);
int nb_link_replica(const nb_link *l);
/* Every replica of this link's stage calls it with the same n: afterwards each buf holds the sum of the
 * replicas' n values (value_bytes 4: float, 8: double), added element by element in replica order,
 * ((x_0 + x_1) + x_2) + ..., so that every replica holds the same bits whatever the ranks' placement (an
 * MPI_Allreduce's order is its implementation's). A wait longer than the link's timeout fails, naming the
 * replica waited for. With one replica it does nothing. */
int nb_link_replica_sum(nb_link *l, void *buf, size_t n, size_t value_bytes);
/* Copies bytes to endpoint `to` under `tag` (0 <= tag < 2^20). */
int nb_link_send(nb_link *l, int to, int tag, const void *buf, size_t bytes);
/* Waits for the message (from, tag) and copies it into buf, which must be exactly its size. */
int nb_link_recv(nb_link *l, int from, int tag, void *buf, size_t bytes);
/* 1 when the message (from, tag) is waiting, so that nb_link_recv of it would not wait; 0 when not
 * (yet); -1 when the run has failed (threads: another endpoint called nb_link_fail; nb_last_error()
 * names it, "stage S failed: ..."; a failure outranks a waiting message) or the transport did.
 * Never waits. */
int nb_link_poll(nb_link *l, int from, int tag);
/* A receive that waits more than `seconds` for its message fails, naming the stage it waited for, so
 * that a peer that stalled (stopped, hung on a file system) or vanished without taking the job down
 * cannot hold the others for ever (0, the default: no limit). */
void nb_link_set_timeout(nb_link *l, double seconds);
/* This endpoint failed with `message`: the others stop (see above). */
void nb_link_fail(nb_link *l, const char *message);
/* Releases this endpoint's end (on MPI, the process's last link to close waits for its sends to be
 * delivered). */
void nb_link_close(nb_link *l);

/* Threads: a hub for n endpoints and its links, one per endpoint; any thread may drive any of
 * them, one thread several. */
typedef struct nb_hub nb_hub;
nb_hub *nb_hub_create(int n_stages);
nb_link *nb_hub_link(nb_hub *h, int stage);
/* The first failure's message ("stage S failed: ..."), or NULL. */
const char *nb_hub_failure(nb_hub *h);
void nb_hub_free(nb_hub *h);

/* MPI: the transport lives in its own library, libnobubble-mpi (include/nobubble/mpi.h), so that a
 * program without MPI loads none. Its nb_mpi_register hands the core this table; until then
 * nb_mpi_available() is 0 and nb_mpi_links fails saying so (NB_MPI_MISSING). last_error: the transport's
 * message after a failed call. */
typedef struct {
    int (*links)(nb_link **links, int *n_links, int n_stages, int n_endpoints, int replicas, int workers);
    void (*finish)(void);
    const char *(*last_error)(void);
    int (*barrier)(void);  /* every rank of the world has come here (NULL: the transport has none) */
} nb_mpi_transport;
void nb_mpi_set_transport(const nb_mpi_transport *t);
#define NB_MPI_MISSING                                                                                    \
    "this program has no MPI transport (link libnobubble-mpi, pkg-config nobubble-mpi, and call "        \
    "nb_mpi_register() first; the nobubble command does, when built with MPI: install libopenmpi-dev and " \
    "rebuild)"
/* Whether the MPI transport is registered. */
int nb_mpi_available(void);
/* MPI (initialized once per process; fails when no transport is registered or when the world size
 * is not n_stages): one rank per stage;
 * endpoints n_stages..n_endpoints-1 live on rank 0. On rank 0, links[0] is endpoint 0 and links[1..]
 * are the extra endpoints in order (links must hold 1 + n_endpoints - n_stages); elsewhere links[0]
 * is the rank's stage. *n_links says how many were made. Every link's nb_link_stage() is its
 * endpoint and nb_link_count() is n_endpoints. Messages between two endpoints of one process go
 * through an in-process queue (no MPI; any size); to another rank they go over MPI with the
 * endpoint pair in the MPI tag (fails at once, naming MPI_TAG_UB, when it does not fit). All links
 * of a process must be driven by one thread; nb_link_close each, then nb_mpi_finish once. */
int nb_mpi_links(nb_link **links, int *n_links, int n_stages, int n_endpoints);
/* The same for `replicas` copies of the pipeline (data parallelism): the world is replicas x n_stages ranks,
 * rank = replica x n_stages + stage; the extra endpoints live on rank 0 (replica 0's stage 0). A link's
 * messages go to the stages of its own replica (and to the extra endpoints); a message from an extra endpoint
 * to stage s goes to stage s of every replica. The ranks of one stage share a communicator (MPI_Comm_split by
 * stage) for nb_link_replica_sum. */
int nb_mpi_links_replicated(nb_link **links, int *n_links, int n_stages, int n_endpoints, int replicas);
/* The same with the stages spread over `workers` ranks per replica (an interleaved pipeline's virtual stages;
 * n_stages a multiple of workers): the world is replicas x workers ranks; stage s lives on rank replica x
 * workers + s mod workers. A rank's links are its stages in order (s = w, w + workers, ...), then on rank 0
 * the extra endpoints (links must hold n_stages / workers + n_endpoints - n_stages). The ranks of one worker
 * share the communicator of nb_link_replica_sum; each of its stages sums apart. workers = n_stages is
 * nb_mpi_links_replicated. */
int nb_mpi_links_placed(nb_link **links, int *n_links, int n_stages, int n_endpoints, int replicas, int workers);
/* MPI_Finalize, after the links are closed (no-op without MPI or when it was never started). */
void nb_mpi_finish(void);
/* Waits until every rank of the world has called it (MPI_Barrier), after the links are made; a rank that fails
 * instead ends the world (MPI_Abort, through nb_link_fail), the waiting ones with it. */
int nb_mpi_barrier(void);
/* Whether this process was started by an MPI launcher (mpirun sets its rank variables). */
int nb_mpi_launched(void);
/* The number of processes the MPI launcher started (OMPI_COMM_WORLD_SIZE, else PMI_SIZE): 0 when not
 * launched by one, -1 when launched by one that does not say (or says something that is not a count). */
int nb_mpi_world_size(void);
#endif
