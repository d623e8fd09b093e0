/* util/signals: the stop signals taken by one thread, never by a handler.
 * 1. After nb_signals_start the calling thread, and a thread it creates later, block SIGINT,
 *    SIGTERM and SIGUSR1; a process-directed signal reaches the callback, on another thread,
 *    with the count of stop signals so far.
 * 2. nb_signals_block gives back the previous mask.
 * 3. A forked child after nb_signals_child_reset has an empty mask and the default dispositions
 *    (what a sweep's children must start with: a mask survives exec). */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "check.h"
#include "util/signals.h"

static atomic_int calls, last_sig, last_count;
static pthread_t main_thread;
static atomic_int on_main_thread;

static void on_signal(int sig, int count) {
    atomic_store(&last_sig, sig);
    atomic_store(&last_count, count);
    if (pthread_equal(pthread_self(), main_thread)) atomic_store(&on_main_thread, 1);
    atomic_fetch_add(&calls, 1);
}

static int blocks_stop_signals(void) {
    sigset_t now;
    pthread_sigmask(SIG_BLOCK, NULL, &now);
    return sigismember(&now, SIGINT) == 1 && sigismember(&now, SIGTERM) == 1 && sigismember(&now, SIGUSR1) == 1;
}

static void *thread_mask(void *arg) {
    *(int *)arg = blocks_stop_signals();
    return NULL;
}

/* Waits up to 5 s for the callback's n-th call. */
static int wait_calls(int n) {
    for (int i = 0; i < 500 && atomic_load(&calls) < n; i++) {
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    return atomic_load(&calls) >= n;
}

int main(void) {
    main_thread = pthread_self();
    CHECK(!blocks_stop_signals(), "the stop signals are not blocked at first");
    CHECK(nb_signals_start(on_signal) == 0, "nb_signals_start");
    CHECK(blocks_stop_signals(), "the calling thread blocks the stop signals");
    CHECK(nb_signals_start(on_signal) != 0, "a second nb_signals_start is refused");

    pthread_t t;
    int blocked = 0;
    CHECK(pthread_create(&t, NULL, thread_mask, &blocked) == 0 && pthread_join(t, NULL) == 0, "a thread");
    CHECK(blocked, "a thread created later blocks the stop signals too");

    kill(getpid(), SIGUSR1);
    CHECK(wait_calls(1) && last_sig == SIGUSR1 && last_count == 1, "SIGUSR1: callback %d, sig %d, count %d",
          atomic_load(&calls), atomic_load(&last_sig), atomic_load(&last_count));
    kill(getpid(), SIGTERM);
    CHECK(wait_calls(2) && last_sig == SIGTERM && last_count == 2, "SIGTERM: callback %d, sig %d, count %d",
          atomic_load(&calls), atomic_load(&last_sig), atomic_load(&last_count));
    CHECK(!atomic_load(&on_main_thread), "the callback runs on the signal thread");

    sigset_t before, old, now;
    pthread_sigmask(SIG_BLOCK, NULL, &before);
    sigset_t none;
    sigemptyset(&none);
    pthread_sigmask(SIG_SETMASK, &none, NULL);
    nb_signals_block(&old);
    CHECK(blocks_stop_signals() && !sigismember(&old, SIGTERM), "nb_signals_block gives the previous mask");
    pthread_sigmask(SIG_SETMASK, &before, &now);

    pid_t pid = fork();
    if (pid == 0) {
        signal(SIGXFSZ, SIG_IGN);
        nb_signals_child_reset();
        sigset_t m;
        sigprocmask(SIG_BLOCK, NULL, &m);
        int bad = sigismember(&m, SIGINT) || sigismember(&m, SIGTERM) || sigismember(&m, SIGUSR1);
        struct sigaction sa;
        sigaction(SIGXFSZ, NULL, &sa);
        bad |= sa.sa_handler != SIG_DFL;
        _exit(bad ? 1 : 0);
    }
    int status = 0;
    CHECK(pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0,
          "a child after nb_signals_child_reset: empty mask, default dispositions (status %d)", status);
    return check_summary();
}
