#include "util/error.h"
#include <stdarg.h>
#include <stdio.h>

static _Thread_local char last_error[1024];

const char *nb_last_error(void) { return last_error[0] ? last_error : "no error recorded"; }

int nb_fail(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    return -1;
}
