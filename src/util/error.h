/* Internal: recording the message behind nb_last_error(). */
#ifndef NB_UTIL_ERROR_H
#define NB_UTIL_ERROR_H
#include "nobubble/common.h"

/* Records a printf-style message and returns -1, so that callers can write
 * `return nb_fail("...", ...);`. */
int nb_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
#endif
