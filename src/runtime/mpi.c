/* The MPI transport: one rank per stage of MPI_COMM_WORLD. A send copies the bytes and starts an
 * MPI_Isend, so that it never waits for the receiver (two neighbours sending each other large
 * activations and gradients would otherwise deadlock in MPI's rendezvous protocol); finished
 * sends are reaped on later calls and at close. A failure aborts the job: mpirun then stops every
 * rank, so that none waits forever. Without MPI at build time every entry point says so. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "runtime/link.h"
#include "util/clock.h"
#include "util/error.h"

int nb_mpi_launched(void) {
    return getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMI_SIZE") || getenv("PMIX_RANK");
}

#ifdef NB_HAVE_MPI
#include <mpi.h>

typedef struct pending {
    struct pending *next;
    MPI_Request req;
    unsigned char data[];
} pending;

typedef struct {
    pending *sends;
} mpi_link;

static int started;

/* Frees the sends MPI has finished with; with wait, waits for all of them. */
static void reap(mpi_link *m, int wait) {
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

static int mpi_send(nb_link *l, int to, int tag, const void *buf, size_t bytes) {
    mpi_link *m = l->impl;
    reap(m, 0);
    if (bytes > (size_t)0x7fffffff) return nb_fail("stage %d: a message of %zu bytes is too large for MPI", l->stage, bytes);
    pending *p = malloc(sizeof *p + bytes);
    if (!p) return nb_fail("stage %d: out of memory sending %zu bytes to stage %d", l->stage, bytes, to);
    if (bytes) memcpy(p->data, buf, bytes);
    if (MPI_Isend(p->data, (int)bytes, MPI_BYTE, to, tag, MPI_COMM_WORLD, &p->req) != MPI_SUCCESS) {
        free(p);
        return nb_fail("stage %d: MPI_Isend to stage %d failed", l->stage, to);
    }
    p->next = m->sends;
    m->sends = p;
    return 0;
}


/* MPI_Probe with the link's timeout: a rank that stalled (SIGSTOP, a hung file system) is no failure
 * to MPI, and would hold this one for ever. It polls, as Open MPI's blocking probe does too; once a
 * wait has lasted a few milliseconds (a stage idle anyway), it sleeps 50 us between polls. */
static int probe(nb_link *l, int from, int tag, MPI_Status *st) {
    if (l->timeout_s <= 0) return MPI_Probe(from, tag, MPI_COMM_WORLD, st) == MPI_SUCCESS ? 0 : -1;
    const double start = nb_now();
    for (;;) {
        int arrived = 0;
        if (MPI_Iprobe(from, tag, MPI_COMM_WORLD, &arrived, st) != MPI_SUCCESS) return -1;
        if (arrived) return 0;
        const double waited = nb_now() - start;
        if (waited > l->timeout_s) return 1;
        if (waited > 0.005) nanosleep(&(struct timespec){0, 50000}, NULL);
    }
}

static int mpi_recv(nb_link *l, int from, int tag, void *buf, size_t bytes) {
    mpi_link *m = l->impl;
    reap(m, 0);
    MPI_Status st;
    int rc = probe(l, from, tag, &st);
    if (rc > 0) return nb_link_timed_out(l, from, tag);
    if (rc) return nb_fail("stage %d: MPI_Probe for stage %d failed", l->stage, from);
    int count = 0;
    MPI_Get_count(&st, MPI_BYTE, &count);
    if ((size_t)count != bytes)
        return nb_fail("stage %d: message from stage %d (tag %d) has %d bytes, expected %zu", l->stage, from, tag,
                       count, bytes);
    if (MPI_Recv(buf, count, MPI_BYTE, from, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE) != MPI_SUCCESS)
        return nb_fail("stage %d: MPI_Recv from stage %d failed", l->stage, from);
    return 0;
}

static int mpi_poll(nb_link *l, int from, int tag) {
    int arrived = 0;
    if (MPI_Iprobe(from, tag, MPI_COMM_WORLD, &arrived, MPI_STATUS_IGNORE) != MPI_SUCCESS)
        return nb_fail("stage %d: MPI_Iprobe for stage %d failed", l->stage, from);
    return arrived != 0;
}

static void mpi_fail(nb_link *l, const char *why) {
    fprintf(stderr, "nobubble: stage %d failed: %s\n", l->stage, why);
    fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 3);
}

static void mpi_close(nb_link *l) {
    mpi_link *m = l->impl;
    reap(m, 1);
    free(m);
    free(l);
}

static const nb_link_ops mpi_ops = {mpi_send, mpi_recv, mpi_poll, mpi_fail, mpi_close};

int nb_mpi_available(void) { return 1; }

int nb_mpi_link(nb_link **out, int n_stages) {
    *out = NULL;
    if (!started) {
        int already = 0;
        MPI_Initialized(&already);
        if (!already && MPI_Init(NULL, NULL) != MPI_SUCCESS) return nb_fail("MPI_Init failed");
        started = 1;
    }
    int rank = 0, size = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size != n_stages)
        return nb_fail("--stages %d with %d MPI processes: expected one process per stage (mpirun -np %d)", n_stages,
                       size, n_stages);
    nb_link *l = malloc(sizeof *l);
    mpi_link *m = calloc(1, sizeof *m);
    if (!l || !m) {
        free(l);
        free(m);
        return nb_fail("out of memory");
    }
    *l = (nb_link){&mpi_ops, rank, size, m, 0};
    *out = l;
    return 0;
}

void nb_mpi_finish(void) {
    int finalized = 0;
    if (!started) return;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Finalize();
}
#else
int nb_mpi_available(void) { return 0; }

int nb_mpi_link(nb_link **out, int n_stages) {
    (void)n_stages;
    *out = NULL;
    return nb_fail("--transport mpi: this nobubble was built without MPI (install libopenmpi-dev and rebuild)");
}

void nb_mpi_finish(void) {}
#endif
