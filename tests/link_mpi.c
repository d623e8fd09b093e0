/* The MPI transport with a coordinator endpoint, run by tests/link_mpi.sh as
 * `mpirun -np P link_mpi P` (and the refusals of a wrong world size and of tags beyond MPI_TAG_UB;
 * Open MPI's is 2^31 - 1, so 60 extra endpoints exceed it): rank 0 drives endpoint 0 and the coordinator (endpoint P) with polls, as the executor will; every
 * rank runs its endpoints' part of the protocol of tests/support/link_script.c (which test_link
 * also runs on the threads hub), then again with 2P stages placed 2 per rank (nb_mpi_links_placed: an
 * interleaved pipeline's virtual stages, stage k on rank k mod P). A failed check calls nb_link_fail, which
 * aborts the whole job.
 * `link_mpi --available` exits 77 (skipped) when nobubble was built without MPI. Before nb_mpi_register
 * the core has no MPI transport and says so, naming nb_mpi_register. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "check.h"
#include "link_script.h"
#include "nobubble/common.h"
#include "nobubble/mpi.h"
#include "nobubble/runtime.h"

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
    nb_mpi_finish();
    printf("rank %s: ", getenv("OMPI_COMM_WORLD_RANK") ? getenv("OMPI_COMM_WORLD_RANK") : "?");
    return rc || check_summary();
}
