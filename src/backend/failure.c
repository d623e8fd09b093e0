/* A backend's failure record (failure.h). */
#include "backend/failure.h"
#include <stdio.h>
#include "util/error.h"

void nb_failure_init(nb_failure *f) {
    atomic_store(&f->failed, 0);
    pthread_mutex_init(&f->lock, NULL);
    f->message[0] = 0;
}

void nb_failure_destroy(nb_failure *f) { pthread_mutex_destroy(&f->lock); }

void nb_failure_keep(nb_failure *f) {
    pthread_mutex_lock(&f->lock);
    if (!atomic_load(&f->failed)) {
        snprintf(f->message, sizeof f->message, "%s", nb_last_error());
        atomic_store(&f->failed, 1);
    }
    pthread_mutex_unlock(&f->lock);
}

int nb_failure_take(nb_failure *f) {
    if (!atomic_load(&f->failed)) return 0;
    pthread_mutex_lock(&f->lock);
    nb_fail("%s", f->message);
    atomic_store(&f->failed, 0);
    pthread_mutex_unlock(&f->lock);
    return -1;
}
