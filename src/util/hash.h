/* Internal: the hashes every part shares. FNV-1a 64 (the weights hash printed by runs, the loader's
 * fingerprint stored in checkpoints, the tokenizer's merge table, report ids), splitmix64 (the data
 * order, the model's initialization through nb_rng), SHA-256 (prepare's manifest) and CRC-32C (the
 * framing of TensorBoard's event files). */
#ifndef NB_UTIL_HASH_H
#define NB_UTIL_HASH_H
#include <stddef.h>
#include <stdint.h>

/* FNV-1a 64 over n bytes, continuing from h (start with NB_FNV_INIT). */
#define NB_FNV_INIT 0xcbf29ce484222325ULL
uint64_t nb_fnv1a(uint64_t h, const void *data, size_t n);

/* splitmix64's finalizer: an invertible avalanche of 64 bits. */
static inline uint64_t nb_mix64(uint64_t x) {
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
    return x ^ (x >> 31);
}
/* splitmix64: advances *state by the golden gamma and returns the mixed value. */
uint64_t nb_splitmix64(uint64_t *state);

/* CRC-32C (Castagnoli, reflected polynomial 0x82F63B78, as iSCSI and TFRecord use) of n bytes,
 * continuing from crc (start with 0): nb_crc32c(0, "123456789", 9) = 0xE3069283. No Debian library
 * packages it for C (google's crc32c is not in Debian 12), so it is a short table here. */
uint32_t nb_crc32c(uint32_t crc, const void *data, size_t n);

void nb_sha256(const void *data, size_t n, uint8_t out[32]);
void nb_sha256_hex(const void *data, size_t n, char hex[65]);   /* lower-case, NUL-terminated */
#endif
