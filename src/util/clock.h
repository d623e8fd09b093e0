/* Internal: the one monotonic clock (CLOCK_MONOTONIC), for timings, timeouts and deadlines. */
#ifndef NB_UTIL_CLOCK_H
#define NB_UTIL_CLOCK_H
#include <stddef.h>
#include <time.h>

/* Seconds on the monotonic clock (an arbitrary origin: only differences mean anything). */
double nb_now(void);
/* The moment `seconds` from now on the same clock, as pthread_cond_timedwait takes it (a condition
 * variable whose clock is CLOCK_MONOTONIC). */
struct timespec nb_deadline(double seconds);
/* A duration for people: seconds rounded to the nearest whole one, as H:MM:SS, or M:SS under an hour
 * (59.4 -> "0:59", 3599.6 -> "1:00:00"); negative or absurd values (NaN, past 10^9 s) as "0:00". */
void nb_format_duration(double seconds, char *buf, size_t size);
#endif
