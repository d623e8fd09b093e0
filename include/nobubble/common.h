/* nobubble: things every part shares: error reporting and the library version. */
#ifndef NOBUBBLE_COMMON_H
#define NOBUBBLE_COMMON_H

#define NB_VERSION "0.1.0"

/* Every fallible library call returns 0 on success and -1 on failure, after recording a
 * message (naming the file, flag or value and what was expected) that this returns.
 * The message is per thread. */
const char *nb_last_error(void);

#endif
