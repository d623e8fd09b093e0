#include "util/error.h"
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static _Thread_local char last_error[1024];

const char *nb_last_error(void) { return last_error[0] ? last_error : "no error recorded"; }

/* Formats into a scratch buffer first, then copies: an argument may be nb_last_error() itself
 * (`nb_fail("%s: %s", path, nb_last_error())`), which formatting straight into last_error would
 * overwrite while it is being read. */
int nb_fail(const char *fmt, ...) {
    char scratch[sizeof last_error];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(scratch, sizeof scratch, fmt, ap);
    va_end(ap);
    memcpy(last_error, scratch, sizeof last_error);
    return -1;
}
