#include "util/rng.h"
#include <math.h>
#include <string.h>
#include "util/hash.h"

nb_rng nb_rng_keyed(uint64_t seed, const char *key) {
    nb_rng r = {nb_fnv1a(NB_FNV_INIT ^ (seed * 0x9e3779b97f4a7c15ULL), key, strlen(key))};
    return r;
}

uint64_t nb_rng_u64(nb_rng *r) { return nb_splitmix64(&r->state); }

double nb_rng_uniform(nb_rng *r) { return (double)(nb_rng_u64(r) >> 11) * 0x1.0p-53; }

double nb_rng_normal(nb_rng *r) {
    double u1 = nb_rng_uniform(r), u2 = nb_rng_uniform(r);
    if (u1 < 1e-300) u1 = 1e-300;  /* log(0) guard */
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586476925 * u2);
}
