/* Internal: a small, seeded, reproducible random generator (splitmix64 stream, util/hash.h). */
#ifndef NB_UTIL_RNG_H
#define NB_UTIL_RNG_H
#include <stddef.h>
#include <stdint.h>

typedef struct { uint64_t state; } nb_rng;

/* A generator keyed by a seed and a name: the same pair always gives the same stream. */
nb_rng nb_rng_keyed(uint64_t seed, const char *key);
uint64_t nb_rng_u64(nb_rng *r);
/* Uniform in [0, 1) with 53 bits. */
double nb_rng_uniform(nb_rng *r);
/* Standard normal (Box-Muller, one value per call). */
double nb_rng_normal(nb_rng *r);
#endif
