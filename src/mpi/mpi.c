/* The MPI transport (libnobubble-mpi; nb_mpi_register in include/nobubble/mpi.h): one rank per pipeline
 * worker of MPI_COMM_WORLD (per worker of each replica under data parallelism: rank = replica x workers +
 * worker), where a worker holds one pipeline stage, or several (an interleaved pipeline's virtual stages:
 * stage s on worker s mod workers), and any endpoints beyond the stages (the coordinator) on rank 0, all
 * of a rank's endpoints driven by one thread. A send to an endpoint of another rank copies the bytes and starts an
 * MPI_Isend, so that it never waits for the receiver (two neighbours sending each other large
 * activations and gradients would otherwise deadlock in MPI's rendezvous protocol); finished sends are
 * reaped on later calls and at close. A send to an endpoint of this process goes to that endpoint's
 * queue and never touches MPI (a self-send of a large message would wait for a receive that the one
 * thread can only post afterwards). A failure aborts the job: mpirun then stops every rank, so that
 * none waits forever.
 *
 * Its own library so that a program linking nobubble without MPI loads no MPI library: the core
 * (src/runtime/mpi.c) calls it through the table nb_mpi_register hands over. */
#include "nobubble/mpi.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "runtime/link.h"
#include "runtime/queue.h"
#include "util/clock.h"
#include "util/error.h"

#ifdef NB_HAVE_MPI
#include <mpi.h>

typedef struct pending {
    struct pending *next;
    MPI_Request req;
    unsigned char data[];
} pending;

/* What the links of one process share: where each endpoint lives, the queues of this process's
 * endpoints, the sends MPI has not finished with, and how many links are still open. Stage e (e <
 * n_stages) lives on rank replica x workers + e mod workers (its replica's: the rank's own), with local
 * index e / workers there; an extra endpoint e lives on rank 0, with local index chunks + e - n_stages. */
typedef struct {
    int rank, n_stages, on_rank0;  /* on_rank0: endpoints rank 0 hosts, chunks + the extra ones */
    int workers, chunks;           /* ranks per replica; stages per rank (n_stages = workers x chunks) */
    int replica, replicas;         /* this rank's replica of the pipeline, and how many there are */
    MPI_Comm stage_comm;           /* the ranks of this rank's worker, ranked by replica (replicas > 1) */
    nb_queue *queues;              /* by local index */
    pending *sends;
    int open;
} mpi_proc;

static int started;

static int rank_of(const mpi_proc *p, int e) { return e < p->n_stages ? p->replica * p->workers + e % p->workers : 0; }
static int local_index(const mpi_proc *p, int e) { return e < p->n_stages ? e / p->workers : p->chunks + e - p->n_stages; }
/* The world rank of stage s (< n_stages) of replica q. */
static int replica_rank(const mpi_proc *p, int q, int s) { return q * p->workers + s % p->workers; }

/* The MPI tag of a message: the (sender, receiver) pair of local indices above the link's tag, so
 * that a rank's endpoints are told apart on both ends. With one endpoint per rank it is the link's tag. */
static int wire_tag(const mpi_proc *p, int from, int to, int tag) {
    return (local_index(p, from) * p->on_rank0 + local_index(p, to)) * NB_LINK_TAGS + tag;
}

/* Frees the sends MPI has finished with; with wait, waits for all of them. */
static void reap(mpi_proc *m, int wait) {
    pending **p = &m->sends;
    while (*p) {
        int done = 0;
        if (wait) MPI_Wait(&(*p)->req, MPI_STATUS_IGNORE), done = 1;
        else MPI_Test(&(*p)->req, &done, MPI_STATUS_IGNORE);
        if (done) {
            pending *gone = *p;
            *p = gone->next;
            free(gone);
        } else {
            p = &(*p)->next;
        }
    }
}

static int send_remote(nb_link *l, int rank, int to, int tag, const void *buf, size_t bytes) {
    mpi_proc *m = l->impl;
    if (bytes > (size_t)0x7fffffff) return nb_fail("stage %d: a message of %zu bytes is too large for MPI", l->stage, bytes);
    pending *p = malloc(sizeof *p + bytes);
    if (!p) return nb_fail("stage %d: out of memory sending %zu bytes to stage %d", l->stage, bytes, to);
    if (bytes) memcpy(p->data, buf, bytes);
    if (MPI_Isend(p->data, (int)bytes, MPI_BYTE, rank, wire_tag(m, l->stage, to, tag), MPI_COMM_WORLD,
                  &p->req) != MPI_SUCCESS) {
        free(p);
        return nb_fail("stage %d: MPI_Isend to stage %d failed", l->stage, to);
    }
    p->next = m->sends;
    m->sends = p;
    return 0;
}

/* A message from an extra endpoint (the coordinator) to stage s goes to stage s of every replica. */
static int mpi_send(nb_link *l, int to, int tag, const void *buf, size_t bytes) {
    mpi_proc *m = l->impl;
    reap(m, 0);
    const int copies = l->stage >= m->n_stages && to < m->n_stages ? m->replicas : 1;
    for (int q = 0; q < copies; q++) {
        const int rank = copies > 1 ? q * m->workers + to % m->workers : rank_of(m, to);
        if (rank != m->rank) {
            if (send_remote(l, rank, to, tag, buf, bytes)) return -1;
            continue;
        }
        nb_msg *msg = nb_msg_new(l->stage, l->stage, to, tag, buf, bytes);
        if (!msg) return -1;
        nb_queue_push(&m->queues[local_index(m, to)], msg);
    }
    return 0;
}

/* MPI_Probe with the link's timeout: a rank that stalled (SIGSTOP, a hung file system) is no failure
 * to MPI, and would hold this one for ever. It polls, as Open MPI's blocking probe does too; once a
 * wait has lasted a few milliseconds (a stage idle anyway), it sleeps 50 us between polls. */
static int probe(nb_link *l, MPI_Comm comm, int rank, int wire, MPI_Status *st) {
    if (l->timeout_s <= 0) return MPI_Probe(rank, wire, comm, st) == MPI_SUCCESS ? 0 : -1;
    const double start = nb_now();
    for (;;) {
        int arrived = 0;
        if (MPI_Iprobe(rank, wire, comm, &arrived, st) != MPI_SUCCESS) return -1;
        if (arrived) return 0;
        const double waited = nb_now() - start;
        if (waited > l->timeout_s) return 1;
        if (waited > 0.005) nanosleep(&(struct timespec){0, 50000}, NULL);
    }
}

static int recv_remote(nb_link *l, int from, int tag, void *buf, size_t bytes) {
    mpi_proc *m = l->impl;
    const int rank = rank_of(m, from), wire = wire_tag(m, from, l->stage, tag);
    MPI_Status st;
    int rc = probe(l, MPI_COMM_WORLD, rank, wire, &st);
    if (rc > 0) return nb_link_timed_out(l, from, tag);
    if (rc) return nb_fail("stage %d: MPI_Probe for stage %d failed", l->stage, from);
    int count = 0;
    MPI_Get_count(&st, MPI_BYTE, &count);
    if ((size_t)count != bytes)
        return nb_fail("stage %d: message from stage %d (tag %d) has %d bytes, expected %zu", l->stage, from, tag,
                       count, bytes);
    if (MPI_Recv(buf, count, MPI_BYTE, rank, wire, MPI_COMM_WORLD, MPI_STATUS_IGNORE) != MPI_SUCCESS)
        return nb_fail("stage %d: MPI_Recv from stage %d failed", l->stage, from);
    return 0;
}

/* A message between two endpoints of this process is there or never comes: one thread drives both,
 * so waiting for it would wait for ever. */
static int mpi_recv(nb_link *l, int from, int tag, void *buf, size_t bytes) {
    mpi_proc *m = l->impl;
    reap(m, 0);
    if (rank_of(m, from) != m->rank) return recv_remote(l, from, tag, buf, bytes);
    nb_msg *msg = nb_queue_take(&m->queues[local_index(m, l->stage)], from, tag);
    if (!msg)
        return nb_fail("stage %d: no message from stage %d (tag %d), which this process drives too: it has not been "
                       "sent, and waiting for it would wait for ever", l->stage, from, tag);
    return nb_msg_deliver(msg, l->stage, buf, bytes);
}

static int mpi_poll(nb_link *l, int from, int tag) {
    mpi_proc *m = l->impl;
    reap(m, 0);  /* a driver that only polls while it waits still frees finished sends */
    if (rank_of(m, from) == m->rank) return nb_queue_find(&m->queues[local_index(m, l->stage)], from, tag) != NULL;
    int arrived = 0;
    if (MPI_Iprobe(rank_of(m, from), wire_tag(m, from, l->stage, tag), MPI_COMM_WORLD, &arrived,
                   MPI_STATUS_IGNORE) != MPI_SUCCESS)
        return nb_fail("stage %d: MPI_Iprobe for stage %d failed", l->stage, from);
    return arrived != 0;
}

static void mpi_fail(nb_link *l, const char *why) {
    const mpi_proc *m = l->impl;
    if (m->replicas > 1)
        fprintf(stderr, "nobubble: stage %d of replica %d (rank %d) failed: %s\n", l->stage, m->replica, m->rank, why);
    else
        fprintf(stderr, "nobubble: stage %d failed: %s\n", l->stage, why);
    fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 3);
}

static void proc_free(mpi_proc *m) {
    for (int i = 0; i < m->on_rank0; i++) nb_queue_clear(&m->queues[i]);
    if (m->stage_comm != MPI_COMM_NULL) MPI_Comm_free(&m->stage_comm);
    free(m->queues);
    free(m);
}

/* The process's sends are waited for when its last link closes: until then another of its links may
 * still send, and their order does not matter to the receivers. */
static void mpi_close(nb_link *l) {
    mpi_proc *m = l->impl;
    free(l);
    if (--m->open > 0) {
        reap(m, 0);
        return;
    }
    reap(m, 1);
    proc_free(m);
}

/* ---- the sum over the replicas of a stage (nb_link_replica_sum) ----
 * Every rank sends its values to every other replica of its stage over the stage's communicator, then adds
 * the D vectors in replica order, its own in its place: every rank adds the same numbers in the same order,
 * so all end on the same bits (an all-gather and a local sum; MPI_Allreduce's order is its implementation's,
 * and may differ between ranks). A vector travels in pieces of at most SUM_PIECE bytes (MPI counts are ints),
 * each piece one message of tag sum_tag: between two ranks they arrive in the order sent. */
enum { SUM_PIECE = 1 << 30 };

/* The MPI tag of every message of the sums over replicas, buckets' included (on the worker's communicator):
 * the stage's local index on its rank, so that an interleaved worker's virtual stages sum apart. */
static int sum_tag(const nb_link *l) { return local_index(l->impl, l->stage); }

/* A wait for replica q's values that outlasted the link's timeout. */
static int no_values(const nb_link *l, int q) {
    const mpi_proc *m = l->impl;
    return nb_fail("stage %d of replica %d: no values from replica %d (rank %d) for %g s, in the sum of the step's "
                   "gradients over the replicas: that rank has stalled or died, or is slower than --peer-timeout "
                   "allows", l->stage, m->replica, q, replica_rank(m, q, l->stage), l->timeout_s);
}

static size_t pieces(size_t bytes) { return bytes ? (bytes + SUM_PIECE - 1) / SUM_PIECE : 0; }
static int piece_len(size_t bytes, size_t k) {
    const size_t left = bytes - k * SUM_PIECE;
    return (int)(left < SUM_PIECE ? left : SUM_PIECE);
}

/* Replica q's vector of `bytes` into buf. */
static int sum_recv(nb_link *l, int q, void *buf, size_t bytes) {
    mpi_proc *m = l->impl;
    for (size_t k = 0; k < pieces(bytes); k++) {
        MPI_Status st;
        int rc = probe(l, m->stage_comm, q, sum_tag(l), &st), count = 0;
        if (rc > 0) return no_values(l, q);
        if (rc) return nb_fail("stage %d of replica %d: MPI_Probe for replica %d failed", l->stage, m->replica, q);
        MPI_Get_count(&st, MPI_BYTE, &count);
        if (count != piece_len(bytes, k))
            return nb_fail("stage %d of replica %d: replica %d sent %d bytes of its sum's piece %zu, expected %d (do the "
                           "replicas run the same model and settings?)", l->stage, m->replica, q, count, k,
                           piece_len(bytes, k));
        if (MPI_Recv((unsigned char *)buf + k * SUM_PIECE, count, MPI_BYTE, q, sum_tag(l), m->stage_comm,
                     MPI_STATUS_IGNORE) != MPI_SUCCESS)
            return nb_fail("stage %d of replica %d: MPI_Recv from replica %d failed", l->stage, m->replica, q);
    }
    return 0;
}

/* The replica of peer slot i (every replica but this rank's, in order). */
static int peer_replica(const mpi_proc *m, int i) { return i + (i >= m->replica); }

/* The sends of this rank's vector, np pieces to each other replica in order (req[slot x np + k]), finished
 * (taken by every other replica) within the link's timeout; one that outlasts it names the first replica that
 * has not taken them. */
static int sum_sent(nb_link *l, MPI_Request *req, int n, size_t np) {
    const double start = nb_now();
    for (;;) {
        int done = 0;
        if (MPI_Testall(n, req, &done, MPI_STATUSES_IGNORE) != MPI_SUCCESS)
            return nb_fail("stage %d: MPI_Testall failed in the sum over replicas", l->stage);
        if (done) return 0;
        const double waited = nb_now() - start;
        if (l->timeout_s > 0 && waited > l->timeout_s) {
            const mpi_proc *m = l->impl;
            int i = 0;
            for (; i < n - 1; i++)
                if (MPI_Test(&req[i], &done, MPI_STATUS_IGNORE) != MPI_SUCCESS || !done) break;
            const int q = peer_replica(m, i / (int)(np ? np : 1));
            return nb_fail("stage %d of replica %d: its values not taken by replica %d (rank %d) for %g s, in the sum of "
                           "the step's gradients over the replicas: that rank has stalled or died, or is slower than "
                           "--peer-timeout allows", l->stage, m->replica, q, replica_rank(m, q, l->stage), l->timeout_s);
        }
        if (waited > 0.005) nanosleep(&(struct timespec){0, 50000}, NULL);
    }
}

/* After a failed sum: whether every posted send (or a bucket's receive) has finished, so that its buffer may
 * be freed. Those that have not (a replica that died or stalled never takes them) are released to MPI, which
 * frees each request once it completes, and their buffer is then left to the process: the run is ending with
 * this error, and a buffer MPI may still read (or write) must not be freed. */
static int sends_finished(MPI_Request *req, int n) {
    int done = 0;
    if (MPI_Testall(n, req, &done, MPI_STATUSES_IGNORE) == MPI_SUCCESS && done) return 1;
    for (int i = 0; i < n; i++)
        if (req[i] != MPI_REQUEST_NULL) MPI_Request_free(&req[i]);
    return 0;
}

static int mpi_replica_sum(nb_link *l, void *buf, size_t n, size_t value_bytes) {
    mpi_proc *m = l->impl;
    const int D = m->replicas, r = m->replica;
    const size_t bytes = n * value_bytes, np = pieces(bytes);
    if (!bytes) return 0;
    unsigned char *mine = malloc(bytes), *theirs = malloc(bytes);
    MPI_Request *req = calloc((size_t)(D - 1) * np + 1, sizeof *req);
    int rc = 0, posted = 0;
    if (!mine || !theirs || !req)
        rc = nb_fail("stage %d: out of memory for the sum over replicas (2 x %zu bytes)", l->stage, bytes);
    if (!rc) memcpy(mine, buf, bytes);
    for (int q = 0; !rc && q < D; q++)
        for (size_t k = 0; q != r && !rc && k < np; k++)
            if (MPI_Isend(mine + k * SUM_PIECE, piece_len(bytes, k), MPI_BYTE, q, sum_tag(l), m->stage_comm,
                          &req[posted++]) != MPI_SUCCESS)
                rc = nb_fail("stage %d of replica %d: MPI_Isend to replica %d failed", l->stage, r, q);
    /* x_0 + x_1 + ... in replica order, the rank's own x_r in its place */
    for (int q = 0; !rc && q < D; q++) {
        const void *x = mine;
        if (q != r) {
            if ((rc = sum_recv(l, q, theirs, bytes))) break;
            x = theirs;
        }
        if (q == 0) memcpy(buf, x, bytes);
        else nb_link_add_values(buf, x, n, value_bytes);
    }
    if (!rc) rc = sum_sent(l, req, posted, np);
    if (rc && !sends_finished(req, posted)) mine = NULL;  /* still being read by MPI: see sends_finished */
    free(mine);
    free(theirs);
    free(req);
    return rc;
}

/* ---- the same sum in buckets (nb_link_bucket_start, _finish, _drop) ----
 * A bucket posts its receives from every other replica of the stage, then its sends to them (MPI_Irecv,
 * MPI_Isend, in pieces as above, of sum_tag), at once, so that MPI moves them while the caller computes; each
 * later call tests them (Open MPI progresses transfers inside its calls). Its own values are copied, so the
 * sends never read the caller's memory. Between two ranks the messages of one tag are matched in the order
 * they were posted, by receives and probes alike: every replica posting the same buckets and sums in the same
 * order pairs them right, whenever each arrives. */
struct nb_link_bucket {
    size_t n, value_bytes, bytes, np;  /* values, their size, their bytes, pieces per replica */
    int peers;                         /* the other replicas: D - 1 */
    unsigned char *mine, *theirs;      /* its own values; the others', replica q's at (q - (q > r)) x bytes */
    MPI_Request *recv, *send;          /* peers x np each, replica after replica */
};

/* Releases b; buffers MPI may still use are left to the process (see sends_finished). */
static void mpi_bucket_drop(nb_link *l, nb_link_bucket *b) {
    (void)l;
    const int n = b->peers * (int)b->np;
    if (b->send && !sends_finished(b->send, n)) b->mine = NULL;
    if (b->recv && !sends_finished(b->recv, n)) b->theirs = NULL;
    free(b->mine);
    free(b->theirs);
    free(b->recv);
    free(b->send);
    free(b);
}

static int mpi_bucket_start(nb_link *l, const void *values, size_t n, size_t value_bytes, nb_link_bucket **out) {
    mpi_proc *m = l->impl;
    const int D = m->replicas, r = m->replica;
    const size_t bytes = n * value_bytes, np = pieces(bytes), reqs = (size_t)(D - 1) * np;
    nb_link_bucket *b = calloc(1, sizeof *b);
    if (!b) return nb_fail("stage %d: out of memory for a bucket of the sum over replicas", l->stage);
    *b = (nb_link_bucket){n, value_bytes, bytes, np, D - 1, malloc(bytes + 1), malloc((size_t)(D - 1) * bytes + 1),
                          malloc(sizeof(MPI_Request) * (reqs + 1)), malloc(sizeof(MPI_Request) * (reqs + 1))};
    if (!b->mine || !b->theirs || !b->recv || !b->send) {
        free(b->recv), free(b->send), b->recv = b->send = NULL;  /* nothing posted */
        mpi_bucket_drop(l, b);
        return nb_fail("stage %d: out of memory for a bucket of the sum over replicas (%d x %zu bytes)", l->stage, D,
                       bytes);
    }
    for (size_t i = 0; i < reqs; i++) b->recv[i] = b->send[i] = MPI_REQUEST_NULL;
    if (bytes) memcpy(b->mine, values, bytes);
    int rc = 0;
    for (int i = 0; !rc && i < D - 1; i++)
        for (size_t k = 0; !rc && k < np; k++)
            if (MPI_Irecv(b->theirs + (size_t)i * bytes + k * SUM_PIECE, piece_len(bytes, k), MPI_BYTE,
                          peer_replica(m, i), sum_tag(l), m->stage_comm, &b->recv[(size_t)i * np + k]) != MPI_SUCCESS)
                rc = nb_fail("stage %d of replica %d: MPI_Irecv from replica %d failed", l->stage, r, peer_replica(m, i));
    for (int i = 0; !rc && i < D - 1; i++)
        for (size_t k = 0; !rc && k < np; k++)
            if (MPI_Isend(b->mine + k * SUM_PIECE, piece_len(bytes, k), MPI_BYTE, peer_replica(m, i), sum_tag(l),
                          m->stage_comm, &b->send[(size_t)i * np + k]) != MPI_SUCCESS)
                rc = nb_fail("stage %d of replica %d: MPI_Isend to replica %d failed", l->stage, r, peer_replica(m, i));
    if (rc) {
        mpi_bucket_drop(l, b);
        return -1;
    }
    *out = b;
    return 0;
}

/* Tests b's receives, each finished one's size checked: the first replica whose values have not all arrived,
 * or D when all have; -1 on failure. */
static int bucket_arrived(nb_link *l, nb_link_bucket *b) {
    const mpi_proc *m = l->impl;
    int waiting = m->replicas;
    for (size_t i = 0; i < (size_t)b->peers * b->np; i++) {
        if (b->recv[i] == MPI_REQUEST_NULL) continue;
        const int q = peer_replica(m, (int)(i / b->np));
        MPI_Status st;
        int done = 0, count = 0;
        if (MPI_Test(&b->recv[i], &done, &st) != MPI_SUCCESS)
            return nb_fail("stage %d of replica %d: MPI_Test of a receive from replica %d failed", l->stage,
                           m->replica, q);
        if (!done) {
            waiting = q < waiting ? q : waiting;
            continue;
        }
        MPI_Get_count(&st, MPI_BYTE, &count);
        if (count != piece_len(b->bytes, i % b->np))
            return nb_fail("stage %d of replica %d: replica %d sent %d bytes of a bucket's piece %zu, expected %d (do "
                           "the replicas run the same model and settings?)", l->stage, m->replica, q, count,
                           i % b->np, piece_len(b->bytes, i % b->np));
    }
    return waiting;
}

static int mpi_bucket_finish(nb_link *l, nb_link_bucket *b, void *buf, int wait) {
    const mpi_proc *m = l->impl;
    const int D = m->replicas, r = m->replica, n_req = b->peers * (int)b->np;
    const double start = nb_now();
    int rc = 0;
    for (;;) {
        const int q = bucket_arrived(l, b);
        int sent = 0;
        if (q < 0) {
            rc = -1;
            break;
        }
        if (q == D && MPI_Testall(n_req, b->send, &sent, MPI_STATUSES_IGNORE) != MPI_SUCCESS) {
            rc = nb_fail("stage %d: MPI_Testall failed in the sum over replicas", l->stage);
            break;
        }
        if (q == D && (sent || wait)) break;
        if (!wait) return 0;
        const double waited = nb_now() - start;
        if (l->timeout_s > 0 && waited > l->timeout_s) {
            rc = no_values(l, q);
            break;
        }
        if (waited > 0.005) nanosleep(&(struct timespec){0, 50000}, NULL);
    }
    /* x_0 + x_1 + ... in replica order, the rank's own x_r in its place, as mpi_replica_sum adds them */
    for (int q = 0; !rc && b->bytes && q < D; q++) {
        const unsigned char *x = q == r ? b->mine : b->theirs + (size_t)(q - (q > r)) * b->bytes;
        if (q == 0) memcpy(buf, x, b->bytes);
        else nb_link_add_values(buf, x, b->n, b->value_bytes);
    }
    if (!rc && wait) rc = sum_sent(l, b->send, n_req, b->np);
    mpi_bucket_drop(l, b);
    return rc ? -1 : 1;
}

static const nb_link_ops mpi_ops = {mpi_send,        mpi_recv,         mpi_poll,        mpi_fail,      mpi_close,
                                    mpi_replica_sum, mpi_bucket_start, mpi_bucket_finish, mpi_bucket_drop};

static int mpi_start(void) {
    if (started) return 0;
    int already = 0;
    MPI_Initialized(&already);
    if (!already && MPI_Init(NULL, NULL) != MPI_SUCCESS) return nb_fail("MPI_Init failed");
    started = 1;
    return 0;
}

/* The wire tags of n endpoints (see wire_tag) must fit the MPI implementation's MPI_TAG_UB. */
static int check_tags(int on_rank0, int n_endpoints) {
    int *ub = NULL, found = 0;
    MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &ub, &found);
    const long long need = (long long)on_rank0 * on_rank0 * NB_LINK_TAGS - 1, have = found ? *ub : 32767;
    if (need > have)
        return nb_fail("%d endpoints over MPI need tags up to %lld, but this MPI's MPI_TAG_UB is %lld", n_endpoints,
                       need, have);
    return 0;
}

static mpi_proc *proc_new(int rank, int n_stages, int workers, int on_rank0, int replicas) {
    mpi_proc *m = malloc(sizeof *m);
    nb_queue *queues = calloc((size_t)on_rank0, sizeof *queues);
    if (!m || !queues) {
        free(m);
        free(queues);
        nb_fail("out of memory");
        return NULL;
    }
    *m = (mpi_proc){rank, n_stages, on_rank0, workers, n_stages / workers, rank / workers, replicas, MPI_COMM_NULL,
                    queues, NULL, 0};
    /* The ranks of one worker, ranked by replica: the sums over replicas (collective over the world). */
    if (replicas > 1 && MPI_Comm_split(MPI_COMM_WORLD, rank % workers, m->replica, &m->stage_comm) != MPI_SUCCESS) {
        nb_fail("MPI_Comm_split by stage failed");
        free(queues);
        free(m);
        return NULL;
    }
    return m;
}

/* Endpoint number of this rank's link i (see runtime.h): its stages in order, then rank 0's extra ones. */
static int endpoint_of(const mpi_proc *m, int i) {
    return i < m->chunks ? i * m->workers + m->rank % m->workers : m->n_stages + i - m->chunks;
}

static int make_links(mpi_proc *m, nb_link **links, int n, int n_endpoints) {
    for (int i = 0; i < n; i++) {
        if (!(links[i] = malloc(sizeof *links[i]))) {
            while (i-- > 0) free(links[i]);
            proc_free(m);
            return nb_fail("out of memory");
        }
        *links[i] = (nb_link){&mpi_ops, endpoint_of(m, i), n_endpoints, m, 0, m->replica, m->replicas};
    }
    m->open = n;
    return 0;
}

static int mpi_links(nb_link **links, int *n_links, int n_stages, int n_endpoints, int replicas, int workers) {
    *n_links = 0;
    if (n_stages < 1 || n_endpoints < n_stages || n_endpoints - n_stages > 1000)
        return nb_fail("MPI links for %d stages and %d endpoints: expected 1 <= stages <= endpoints <= stages + 1000",
                       n_stages, n_endpoints);
    if (workers < 1 || n_stages % workers)
        return nb_fail("MPI links for %d stages on %d ranks per replica: expected a rank count that divides the "
                       "stages", n_stages, workers);
    if (replicas < 1 || replicas > 1000000 / workers)
        return nb_fail("MPI links for %d replicas of %d ranks: expected 1 to %d replicas", replicas, workers,
                       1000000 / workers);
    if (mpi_start()) return -1;
    int rank = 0, size = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (replicas == 1 && size != workers)
        return nb_fail("--stages %d with %d MPI processes: expected one process per stage (mpirun -np %d)", workers,
                       size, workers);
    if (size != workers * replicas)
        return nb_fail("--stages %d x --data-parallel %d with %d MPI processes: expected one process per stage of each "
                       "replica (mpirun -np %d)", workers, replicas, size, workers * replicas);
    const int chunks = n_stages / workers, on_rank0 = chunks + n_endpoints - n_stages;
    if (check_tags(on_rank0, n_endpoints)) return -1;
    mpi_proc *m = proc_new(rank, n_stages, workers, on_rank0, replicas);
    const int n = rank == 0 ? on_rank0 : chunks;
    if (!m || make_links(m, links, n, n_endpoints)) return -1;
    *n_links = n;
    return 0;
}

static void mpi_finish(void) {
    int finalized = 0;
    if (!started) return;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Finalize();
}

/* This library's own error text (it may hold its own copy of the error record: the core copies it). */
static const char *mpi_last_error(void) { return nb_last_error(); }

static int mpi_barrier(void) {
    return MPI_Barrier(MPI_COMM_WORLD) == MPI_SUCCESS ? 0 : nb_fail("MPI_Barrier failed");
}

static const nb_mpi_transport transport = {mpi_links, mpi_finish, mpi_last_error, mpi_barrier};

int nb_mpi_register(void) {
    nb_mpi_set_transport(&transport);
    return 0;
}
#else
int nb_mpi_register(void) {
    return nb_fail("nb_mpi_register: this nobubble was built without MPI (install libopenmpi-dev and rebuild)");
}
#endif
