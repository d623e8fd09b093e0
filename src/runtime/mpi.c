/* MPI in the core: whether a launcher started this process and how many it started (from its
 * environment, without MPI itself), and the door to the MPI transport, which lives in its own library
 * (src/mpi/, libnobubble-mpi) so that the core loads no MPI library: nb_mpi_register there hands its
 * table to nb_mpi_set_transport here. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "runtime/link.h"
#include "util/error.h"

int nb_mpi_launched(void) {
    return getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMI_SIZE") || getenv("PMIX_RANK");
}

int nb_mpi_world_size(void) {
    static const char *const vars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        const char *v = getenv(vars[i]);
        if (!v) continue;
        char *end;
        long n = strtol(v, &end, 10);
        return end != v && !*end && n >= 1 && n <= 1000000 ? (int)n : -1;
    }
    return nb_mpi_launched() ? -1 : 0;
}

static const nb_mpi_transport *transport;  /* set once, before any run, by nb_mpi_register */

void nb_mpi_set_transport(const nb_mpi_transport *t) { transport = t; }

int nb_mpi_available(void) { return transport != NULL; }

int nb_mpi_links_placed(nb_link **links, int *n_links, int n_stages, int n_endpoints, int replicas, int workers) {
    *n_links = 0;
    if (!transport) return nb_fail("--transport mpi: %s", NB_MPI_MISSING);
    if (transport->links(links, n_links, n_stages, n_endpoints, replicas, workers))
        return nb_fail("%s", transport->last_error());
    return 0;
}

int nb_mpi_links_replicated(nb_link **links, int *n_links, int n_stages, int n_endpoints, int replicas) {
    return nb_mpi_links_placed(links, n_links, n_stages, n_endpoints, replicas, n_stages);
}

int nb_mpi_links(nb_link **links, int *n_links, int n_stages, int n_endpoints) {
    return nb_mpi_links_replicated(links, n_links, n_stages, n_endpoints, 1);
}

void nb_mpi_finish(void) {
    if (transport) transport->finish();
}

int nb_mpi_barrier(void) {
    if (!transport || !transport->barrier) return nb_fail("--transport mpi: %s", NB_MPI_MISSING);
    if (transport->barrier()) return nb_fail("%s", transport->last_error());
    return 0;
}
