/* The MPI transport with a coordinator endpoint, run by tests/link_mpi.sh as
 * `mpirun -np P link_mpi P` (and the refusals of a wrong world size and of tags beyond MPI_TAG_UB;
 * Open MPI's is 2^31 - 1, so 60 extra endpoints exceed it): rank 0 drives endpoint 0 and the coordinator (endpoint P) with polls, as the executor will; every
 * rank runs its endpoints' part of the protocol of tests/support/link_script.c (which test_link
 * also runs on the threads hub), then again with 2P stages placed 2 per rank (nb_mpi_links_placed: an
 * interleaved pipeline's virtual stages, stage k on rank k mod P). A failed check calls nb_link_fail, which
 * aborts the whole job.
 * `link_mpi --available` exits 77 (skipped) when nobubble was built without MPI. Before nb_mpi_register
 * the core has no MPI transport and says so, naming nb_mpi_register. Then the ranks as P replicas of one stage:
 * the sum over replicas in buckets (nb_link_bucket_*) between whole sums, finished out of order, gives the
 * bits of the sum in replica order, ((x_0 + x_1) + x_2) + ..., which values chosen so that another order
 * rounds otherwise tell apart. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "check.h"
#include "link_script.h"
#include "nobubble/common.h"
#include "nobubble/mpi.h"
#include "nobubble/runtime.h"
#include "runtime/link.h"

/* Rank 0's local endpoints: a poll before the send is 0 and after it 1; a receive of a local
 * message that was never sent fails at once instead of waiting for ever. */
static void check_local(nb_link *zero, nb_link *coord, int P) {
    int x = 11, y = 0;
    CHECK(nb_link_poll(coord, 0, 100) == 0, "local poll before the send: 0");
    CHECK(nb_link_recv(coord, 0, 100, &y, sizeof y) != 0 && strstr(nb_last_error(), "wait for ever"),
          "a local receive of a message never sent fails at once (%s)", nb_last_error());
    CHECK(nb_link_send(zero, P, 100, &x, sizeof x) == 0 && nb_link_poll(coord, 0, 100) == 1, "local poll after: 1");
    CHECK(nb_link_poll(zero, P, 100) == 0, "the sender's own queue: 0");
    CHECK(nb_link_recv(coord, 0, 100, &y, sizeof y) == 0 && y == 11, "the local message is received");
}

static int run(int P) {
    nb_link *links[2] = {0};
    int n = 0;
    CHECK(nb_mpi_links(links, &n, P + 1, P + 2) != 0 && strstr(nb_last_error(), "expected one process per stage"),
          "a world size other than the stages is refused (%s)", nb_last_error());
    CHECK(nb_mpi_links(links, &n, P, P + 60) != 0 && strstr(nb_last_error(), "MPI_TAG_UB") && n == 0,
          "endpoint pairs whose tags exceed MPI_TAG_UB are refused (%s)", nb_last_error());
    if (nb_mpi_links(links, &n, P, P + 1)) {
        fprintf(stderr, "link_mpi: %s\n", nb_last_error());
        return 1;
    }
    const int rank = nb_link_stage(links[0]);
    CHECK(n == (rank == 0 ? 2 : 1), "rank %d has %d links", rank, n);
    CHECK(nb_link_count(links[0]) == P + 1 && (n == 1 || nb_link_stage(links[1]) == P), "endpoints and count");
    if (n == 2) check_local(links[0], links[1], P);
    static ls_endpoint eps[2];
    for (int i = 0; i < n; i++) {
        nb_link_set_timeout(links[i], 60);
        eps[i].link = links[i];
        ls_protocol(&eps[i], nb_link_stage(links[i]), P);
    }
    CHECK(ls_run(eps, n, 60) == 0, "rank %d: the protocol (%s)", rank, nb_last_error());
    if (check_failed) {
        check_summary();
        nb_link_fail(links[0], "a check failed");
    }
    for (int i = 0; i < n; i++) nb_link_close(links[i]);
    return 0;
}

/* 2P stages on P ranks (stage k on rank k mod P), the coordinator (endpoint 2P) on rank 0: each rank's
 * links are its stages in order, then rank 0's coordinator; the protocol over all 2P + 1 endpoints, whose
 * messages between a rank's own stages (k and k + P) stay in its queue. */
static void run_placed(int P) {
    nb_link *links[3] = {0};
    int n = 0;
    CHECK(nb_mpi_links_placed(links, &n, 2 * P + 1, 2 * P + 2, 1, P) != 0 && strstr(nb_last_error(), "divides"),
          "stages that are not a multiple of the ranks are refused (%s)", nb_last_error());
    if (nb_mpi_links_placed(links, &n, 2 * P, 2 * P + 1, 1, P)) {
        CHECK(0, "placed links: %s", nb_last_error());
        return;
    }
    const int rank = nb_link_stage(links[0]);
    CHECK(rank < P && n == (rank == 0 ? 3 : 2) && nb_link_stage(links[1]) == rank + P &&
              (n == 2 || nb_link_stage(links[2]) == 2 * P) && nb_link_count(links[0]) == 2 * P + 1,
          "rank %d holds stages %d and %d (and the coordinator on rank 0): %d links", rank, rank, rank + P, n);
    static ls_endpoint eps[3];
    for (int i = 0; i < n; i++) {
        nb_link_set_timeout(links[i], 60);
        eps[i].link = links[i];
        ls_protocol(&eps[i], nb_link_stage(links[i]), 2 * P);
    }
    CHECK(ls_run(eps, n, 60) == 0, "rank %d: the protocol over 2 stages per rank (%s)", rank, nb_last_error());
    if (check_failed) nb_link_fail(links[0], "a check failed");
    for (int i = 0; i < n; i++) nb_link_close(links[i]);
}

/* Replica q's value i: for 3 replicas and more, (x_0 + x_1) + x_2 = 1 + i where (x_2 + x_1) + x_0 = 0. */
static float value_of(int q, int i) {
    const float big = 1e8f * (float)(1 + i % 3);
    return q == 0 ? big : q == 1 ? -big : 1.0f + (float)i + (float)(q - 2) * 0.25f;
}

static int same_floats(const float *a, const float *b, int n) { return memcmp(a, b, sizeof(float) * (size_t)n) == 0; }

/* The P ranks as P replicas of one stage: two buckets started, a whole sum between them and after, the second
 * bucket finished first (waiting), the first by polls; every sum the replica-order sum's bits. */
static int run_replicas(int P) {
    nb_link *links[2] = {0};
    int n = 0;
    if (nb_mpi_links_replicated(links, &n, 1, 1, P)) {
        fprintf(stderr, "link_mpi: replicas: %s\n", nb_last_error());
        return 1;
    }
    nb_link *l = links[0];
    nb_link_set_timeout(l, 60);
    const int r = nb_link_replica(l);
    enum { NA = 3000, NB = 7, NC = 5 };
    float a[NA], b[NB], c[NC], want_a[NA], want_b[NB], want_c[NC];
    for (int i = 0; i < NA; i++) a[i] = value_of(r, i), want_a[i] = value_of(0, i);
    for (int i = 0; i < NB; i++) b[i] = value_of(r, 100 + i), want_b[i] = value_of(0, 100 + i);
    for (int i = 0; i < NC; i++) c[i] = value_of(r, 200 + i), want_c[i] = value_of(0, 200 + i);
    for (int q = 1; q < P; q++) {
        for (int i = 0; i < NA; i++) want_a[i] += value_of(q, i);
        for (int i = 0; i < NB; i++) want_b[i] += value_of(q, 100 + i);
        for (int i = 0; i < NC; i++) want_c[i] += value_of(q, 200 + i);
    }
    nb_link_bucket *ba = NULL, *bb = NULL;
    CHECK(nb_link_bucket_start(l, a, NA, sizeof(float), &ba) == 0 && ba, "bucket a started: %s", nb_last_error());
    for (int i = 0; i < NA; i++) a[i] = -7.0f;  /* the bucket sends its own copy */
    CHECK(nb_link_replica_sum(l, c, NC, sizeof(float)) == 0 && same_floats(c, want_c, NC),
          "a whole sum between buckets: replica order's bits");
    CHECK(nb_link_bucket_start(l, b, NB, sizeof(float), &bb) == 0 && bb, "bucket b started: %s", nb_last_error());
    for (int i = 0; i < NC; i++) c[i] = value_of(r, 200 + i);
    CHECK(nb_link_replica_sum(l, c, NC, sizeof(float)) == 0 && same_floats(c, want_c, NC), "a whole sum after them");
    CHECK(nb_link_bucket_finish(l, bb, b, 1) == 1 && same_floats(b, want_b, NB), "bucket b (waited): replica order");
    int done = 0;
    for (long k = 0; k < 100000000 && !done; k++) done = nb_link_bucket_finish(l, ba, a, 0);
    CHECK(done == 1 && same_floats(a, want_a, NA), "bucket a (polled): replica order, its own values as started");
    if (P >= 3) CHECK(want_a[0] == 1.0f && want_a[1] == 2.0f, "the values tell the order: %g %g", want_a[0], want_a[1]);
    if (check_failed) nb_link_fail(l, "a check failed");
    nb_link_close(l);
    printf("replicas, rank %d: ", r);
    return check_summary();
}

int main(int argc, char **argv) {
    /* Before the transport is registered, the core has none and says how to get it. */
    nb_link *none[2];
    int n_none = 1;
    if (nb_mpi_available() || nb_mpi_links(none, &n_none, 2, 3) == 0 || n_none != 0 ||
        !strstr(nb_last_error(), "nb_mpi_register")) {
        fprintf(stderr, "link_mpi: without nb_mpi_register the core must have no MPI transport (%s)\n", nb_last_error());
        return 1;
    }
    if (nb_mpi_register()) return argc == 2 && !strcmp(argv[1], "--available") ? 77 : 1;
    if (argc == 2 && !strcmp(argv[1], "--available")) return nb_mpi_available() ? 0 : 77;
    const int P = argc == 2 ? atoi(argv[1]) : 0;
    if (P < 2) {
        fprintf(stderr, "usage: mpirun -np P link_mpi P (P >= 2) | link_mpi --available\n");
        return 2;
    }
    int rc = run(P);
    if (!rc) run_placed(P);
    printf("rank %s: ", getenv("OMPI_COMM_WORLD_RANK") ? getenv("OMPI_COMM_WORLD_RANK") : "?");
    rc = check_summary() || rc;
    rc = run_replicas(P) || rc;
    nb_mpi_finish();
    return rc;
}
