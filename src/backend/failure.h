/* Private to src/backend: a backend's record of its first failure since the last check. A product has
 * no error path of its own (a device's queued work has none either: its error is read at the next
 * synchronization), so an implementation keeps the failure here and nb_backend_check returns it. */
#ifndef NB_BACKEND_FAILURE_H
#define NB_BACKEND_FAILURE_H
#include <pthread.h>
#include <stdatomic.h>

typedef struct {
    atomic_int failed;
    pthread_mutex_t lock;
    char message[512];
} nb_failure;

void nb_failure_init(nb_failure *f);
void nb_failure_destroy(nb_failure *f);
/* Keeps the calling thread's last error (nb_fail's) as the failure, unless one is kept already. */
void nb_failure_keep(nb_failure *f);
/* 0 when nothing is kept; otherwise -1 with nb_fail of the kept message, and the record cleared. */
int nb_failure_take(nb_failure *f);
#endif
