/* Internal: the checksums nobubble stores for each tensor of the safetensors files it writes
 * (docs/checkpoints.md). Files written now carry XXH3 (64-bit, seed 0, Debian's libxxhash), which any
 * xxhash tool can verify; files written before carry nbh64, nobubble's own hash, and still verify.
 * A streaming form, so that bytes can be hashed chunk by chunk while they are still in cache (the
 * reader) or converted to little-endian (the writer on a big-endian host); nb_st_checksum in
 * checkpoint.h hashes one buffer with XXH3. */
#ifndef NB_CHECKPOINT_CHECKSUM_H
#define NB_CHECKPOINT_CHECKSUM_H
#include <stddef.h>
#include <stdint.h>
#include "nobubble/checkpoint.h"
#define XXH_STATIC_LINKING_ONLY   /* XXH3_state_t on the stack: no allocation that could fail */
#include <xxhash.h>

typedef struct {
    uint64_t lane[4];
    uint64_t n;                /* bytes hashed so far */
    unsigned char pending[32]; /* bytes of an incomplete 32-byte block */
    size_t n_pending;
} nbh64;

void nbh64_init(nbh64 *h);
void nbh64_update(nbh64 *h, const void *bytes, size_t n);
uint64_t nbh64_final(const nbh64 *h);
/* nbh64 of one buffer: what files written before XXH3 hold. */
uint64_t nbh64_of(const void *bytes, size_t n);

/* Either algorithm behind one streaming interface (the reader verifies what the file names). */
typedef struct {
    nb_st_algo algo;
    nbh64 old;
    XXH3_state_t xxh3;
} nb_sum;

void nb_sum_init(nb_sum *s, nb_st_algo algo);
void nb_sum_update(nb_sum *s, const void *bytes, size_t n);
uint64_t nb_sum_final(const nb_sum *s);
#endif
