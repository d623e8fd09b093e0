/* nobubble: things every part shares: error reporting, the library version, and the ranges of numeric
 * settings. */
#ifndef NOBUBBLE_COMMON_H
#define NOBUBBLE_COMMON_H
#include <stddef.h>

#define NB_VERSION "0.1.0"

/* Every fallible library call returns 0 on success and -1 on failure, after recording a
 * message (naming the file, flag or value and what was expected) that this returns.
 * The message is per thread. Pointer arguments must not be NULL unless the function's comment says
 * what NULL means (a flag without a value, "none", the default): what is checked and refused is what a
 * caller can get wrong by value (ranges, names, files, sizes), not a missing object (the *_free and
 * *_close functions take NULL and do nothing). */
const char *nb_last_error(void);

/* The valid values of a numeric field, written once by the part that owns the field (optim.h's
 * hyperparameters, delay.h's mitigations) in a table of such rows: the part's own check and the settings
 * table (train.h), which parses, shows and documents the flag, read the same row. */
typedef struct nb_range {
    const char *flag;        /* "--beta1": messages name the field by its flag; NULL ends a table */
    size_t offset;           /* offsetof the field in the part's struct */
    int integer;             /* an int field (else a float) */
    double min, max;
    int min_open, max_open;  /* 1: that end is excluded ("[0, 1)") */
} nb_range;
/* The upper bound of rates and scales that have no natural one: far past any useful value, it only keeps
 * infinities and typos such as 1e30 out. */
#define NB_RANGE_HUGE 1e9

#endif
