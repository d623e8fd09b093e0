/* Internal: the stop signals (SIGINT, SIGTERM, SIGUSR1) received by one thread, not a handler.
 *
 * A handler runs on whatever thread the kernel picks, on that thread's stack, just below its stack
 * pointer: inside oneDNN's JIT GEMM, which keeps data below the stack pointer, the signal frame
 * overwrote it and corrupted the heap (docs/checkpoints.md, RELIABILITY.md). So no code runs in
 * signal context at all: the stop signals are blocked in every thread and one thread takes them
 * with sigwait() and calls back in ordinary thread context. */
#ifndef NB_UTIL_SIGNALS_H
#define NB_UTIL_SIGNALS_H
#include <signal.h>

/* The name of the thread that receives the stop signals (/proc/PID/task/TID/comm). */
#define NB_SIGNAL_THREAD_NAME "nb-signals"

/* Called on the signal thread for each stop signal received: sig, and how many stop signals the
 * process has received so far, this one included (1 for the first). */
typedef void (*nb_signal_fn)(int sig, int count);

/* Blocks SIGINT, SIGTERM and SIGUSR1 in the calling thread and starts the signal thread. Call it
 * from the main thread before any other thread exists (OpenMP, oneDNN, MPI, pipeline workers):
 * threads inherit their creator's mask, so then no thread but the signal thread ever takes them.
 * Once per process; -1 (with nb_fail) when the thread cannot be started (the mask is restored). */
int nb_signals_start(nb_signal_fn on_signal);

/* Blocks the stop signals in the calling thread, the previous mask into *old (for a library that
 * creates threads: block, create, restore with pthread_sigmask(SIG_SETMASK, old, NULL)). */
void nb_signals_block(sigset_t *old);

/* For a child between fork() and exec(): the empty mask and default dispositions of the stop
 * signals, SIGXFSZ and SIGPIPE, so that the program it runs starts as from a shell. Only
 * async-signal-safe calls. */
void nb_signals_child_reset(void);
#endif
