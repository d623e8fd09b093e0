/* Internal: nbh64, the checksum nobubble stores for each tensor of the safetensors files it writes
 * (docs/checkpoints.md gives the definition). A streaming form, so that bytes can be hashed chunk by
 * chunk while they are still in cache (the reader) or converted to little-endian (the writer on a
 * big-endian host); nb_st_checksum in checkpoint.h hashes one buffer. */
#ifndef NB_CHECKPOINT_CHECKSUM_H
#define NB_CHECKPOINT_CHECKSUM_H
#include <stddef.h>
#include <stdint.h>

typedef struct {
    uint64_t lane[4];
    uint64_t n;                /* bytes hashed so far */
    unsigned char pending[32]; /* bytes of an incomplete 32-byte block */
    size_t n_pending;
} nbh64;

void nbh64_init(nbh64 *h);
void nbh64_update(nbh64 *h, const void *bytes, size_t n);
uint64_t nbh64_final(const nbh64 *h);
#endif
