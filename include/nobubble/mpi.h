/* nobubble: the MPI transport (--transport mpi: one process per pipeline stage, started by mpirun), in its
 * own library, libnobubble-mpi (pkg-config nobubble-mpi), so that a program that does not use MPI loads
 * no MPI library. A program that does calls nb_mpi_register() once, before nb_train. */
#ifndef NOBUBBLE_MPI_H
#define NOBUBBLE_MPI_H
#include "nobubble/runtime.h"

/* Makes --transport mpi available to this process's runs: 0, or -1 (nb_last_error) when this nobubble was
 * built without MPI. */
int nb_mpi_register(void);
#endif
