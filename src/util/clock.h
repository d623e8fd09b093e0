/* Internal: the one monotonic clock (CLOCK_MONOTONIC), for timings, timeouts and deadlines. */
#ifndef NB_UTIL_CLOCK_H
#define NB_UTIL_CLOCK_H
#include <time.h>

/* Seconds on the monotonic clock (an arbitrary origin: only differences mean anything). */
double nb_now(void);
/* The moment `seconds` from now on the same clock, as pthread_cond_timedwait takes it (a condition
 * variable whose clock is CLOCK_MONOTONIC). */
struct timespec nb_deadline(double seconds);
#endif
