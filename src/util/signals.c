/* The stop signals taken by one thread with sigwait(): see signals.h. */
#include "util/signals.h"
#include <pthread.h>
#include <string.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif
#include "util/error.h"

static nb_signal_fn callback;

static void stop_set(sigset_t *set) {
    sigemptyset(set);
    sigaddset(set, SIGINT);
    sigaddset(set, SIGTERM);
    sigaddset(set, SIGUSR1);
}

static void *signal_thread(void *arg) {
    (void)arg;
#ifdef __linux__
    prctl(PR_SET_NAME, NB_SIGNAL_THREAD_NAME, 0, 0, 0);
#endif
    sigset_t set;
    stop_set(&set);
    for (int count = 0;;) {
        int sig;
        if (sigwait(&set, &sig)) continue;
        callback(sig, ++count);
    }
    return NULL;
}

void nb_signals_block(sigset_t *old) {
    sigset_t set;
    stop_set(&set);
    pthread_sigmask(SIG_BLOCK, &set, old);
}

int nb_signals_start(nb_signal_fn on_signal) {
    if (callback) return nb_fail("the signal thread is already running");
    sigset_t old;
    nb_signals_block(&old);
    callback = on_signal;
    pthread_attr_t attr;
    pthread_t tid;
    int e = pthread_attr_init(&attr);
    if (!e) {
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        e = pthread_create(&tid, &attr, signal_thread, NULL);
        pthread_attr_destroy(&attr);
    }
    if (e) {
        callback = NULL;
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        return nb_fail("cannot start the signal thread: %s", strerror(e));
    }
    return 0;
}

void nb_signals_child_reset(void) {
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    static const int sigs[] = {SIGINT, SIGTERM, SIGUSR1, SIGXFSZ, SIGPIPE};
    for (unsigned i = 0; i < sizeof sigs / sizeof sigs[0]; i++) sigaction(sigs[i], &dfl, NULL);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
}
