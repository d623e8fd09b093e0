/* Internal: checking a numeric field against its nb_range (common.h), and an enum's names, each written
 * once by the part that owns them and read here for parsing and for the lists that messages show. */
#ifndef NB_UTIL_RANGE_H
#define NB_UTIL_RANGE_H
#include <stddef.h>
#include "nobubble/common.h"

/* Whether x lies in r (NaN never does). */
int nb_range_holds(const nb_range *r, double x);
/* What a message says was expected: "an integer from 1 to 100", "a number in [0, 1)". */
void nb_range_expected(const nb_range *r, char *buf, size_t size);
/* The row of table (ended by a row without a flag) for the field at offset; NULL when none. */
const nb_range *nb_range_at(const nb_range *table, size_t offset);
/* Checks the field of one row in the struct at base; the error names the flag, the value and the range:
 * "--beta1 1: out of range, expected a number in [0, 1)". */
int nb_range_check(const nb_range *r, const void *base);

/* An enum's names: names(v) for v = 0, 1, ... until NULL (nb_optimizer_names, nb_transport_names, ...). */
typedef const char *(*nb_names_fn)(int value);
/* The value named text, or -1. */
int nb_names_find(nb_names_fn names, const char *text);
/* The value named text into *out; else fails listing the names: "--optimizer 'adam': expected one of sgd, ...". */
int nb_names_parse(nb_names_fn names, const char *flag, const char *text, int *out);
/* The names joined by sep ("gpipe, 1f1b, pipedream, 2bw"), cut at size. */
void nb_names_join(nb_names_fn names, const char *sep, char *buf, size_t size);
#endif
