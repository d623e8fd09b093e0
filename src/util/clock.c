/* The monotonic clock (see clock.h). */
#define _POSIX_C_SOURCE 200809L
#include "util/clock.h"
#include <math.h>
#include <stdio.h>

double nb_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

struct timespec nb_deadline(double seconds) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    double whole = floor(seconds);
    ts.tv_sec += (time_t)whole;
    ts.tv_nsec += (long)((seconds - whole) * 1e9);
    if (ts.tv_nsec >= 1000000000L) ts.tv_sec++, ts.tv_nsec -= 1000000000L;
    return ts;
}

void nb_format_duration(double seconds, char *buf, size_t size) {
    const long s = seconds > 0 && seconds < 1e9 ? (long)(seconds + 0.5) : 0;
    if (s >= 3600) snprintf(buf, size, "%ld:%02ld:%02ld", s / 3600, s / 60 % 60, s % 60);
    else snprintf(buf, size, "%ld:%02ld", s / 60, s % 60);
}
