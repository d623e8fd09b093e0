/* The tensor checksums (checksum.h): XXH3 through libxxhash, and nbh64 for the files written before.
 *
 * nbh64: a 64-bit hash of a byte string, fast enough (several GB/s) to check every tensor a
 * checkpoint loads. Four lanes, each a chain of xor-multiply-xorshift rounds over 8-byte
 * little-endian words, so that the four multiplications of a 32-byte block run in parallel; the
 * lanes and the length are combined at the end. Every step is invertible in the lane and the word,
 * so a change confined to one 8-byte word (any flipped byte) always changes the hash. */
#include <string.h>
#include "nobubble/checkpoint.h"
#include "checkpoint/checksum.h"
#include "util/hash.h"

#define GOLDEN UINT64_C(0x9E3779B97F4A7C15)

/* Bytes as a little-endian word, whatever the host's order: the hash is of the file's bytes. */
static uint64_t load_le64(const unsigned char *p) {
    return (uint64_t)p[0] | (uint64_t)p[1] << 8 | (uint64_t)p[2] << 16 | (uint64_t)p[3] << 24 |
           (uint64_t)p[4] << 32 | (uint64_t)p[5] << 40 | (uint64_t)p[6] << 48 | (uint64_t)p[7] << 56;
}

static uint64_t round64(uint64_t lane, uint64_t word) {
    lane = (lane ^ word) * GOLDEN;
    return lane ^ (lane >> 29);
}

void nbh64_init(nbh64 *h) {
    memset(h, 0, sizeof *h);
    for (int i = 0; i < 4; i++) h->lane[i] = (uint64_t)(i + 1) * GOLDEN;
}

static void blocks(uint64_t lane[4], const unsigned char *p, size_t n_blocks) {
    uint64_t a = lane[0], b = lane[1], c = lane[2], d = lane[3];
    for (size_t k = 0; k < n_blocks; k++, p += 32) {
        a = round64(a, load_le64(p));
        b = round64(b, load_le64(p + 8));
        c = round64(c, load_le64(p + 16));
        d = round64(d, load_le64(p + 24));
    }
    lane[0] = a, lane[1] = b, lane[2] = c, lane[3] = d;
}

void nbh64_update(nbh64 *h, const void *bytes, size_t n) {
    const unsigned char *p = bytes;
    if (!n) return;   /* bytes may then be NULL, which memcpy may not be given */
    h->n += n;
    if (h->n_pending) {
        size_t take = 32 - h->n_pending < n ? 32 - h->n_pending : n;
        memcpy(h->pending + h->n_pending, p, take);
        h->n_pending += take, p += take, n -= take;
        if (h->n_pending < 32) return;
        blocks(h->lane, h->pending, 1);
        h->n_pending = 0;
    }
    blocks(h->lane, p, n / 32);
    memcpy(h->pending, p + n / 32 * 32, n % 32);
    h->n_pending = n % 32;
}

/* The last (incomplete) block: its words go on to lanes 0, 1, ..., the last one padded with zeros
 * (the length, hashed too, tells the padding from zero bytes). */
uint64_t nbh64_final(const nbh64 *h) {
    uint64_t lane[4] = {h->lane[0], h->lane[1], h->lane[2], h->lane[3]};
    unsigned char last[32] = {0};
    memcpy(last, h->pending, h->n_pending);
    for (size_t j = 0; j * 8 < h->n_pending; j++) lane[j] = round64(lane[j], load_le64(last + 8 * j));
    uint64_t x = h->n;
    for (int i = 0; i < 4; i++) x = nb_mix64(x ^ lane[i]);
    return x;
}

uint64_t nbh64_of(const void *bytes, size_t n) {
    nbh64 h;
    nbh64_init(&h);
    nbh64_update(&h, bytes, n);
    return nbh64_final(&h);
}

uint64_t nb_st_checksum(const void *bytes, size_t n) { return XXH3_64bits(bytes, n); }

void nb_sum_init(nb_sum *s, nb_st_algo algo) {
    s->algo = algo;
    if (algo == NB_ST_NBH64) nbh64_init(&s->old);
    else XXH3_64bits_reset(&s->xxh3);
}

void nb_sum_update(nb_sum *s, const void *bytes, size_t n) {
    if (s->algo == NB_ST_NBH64) nbh64_update(&s->old, bytes, n);
    else if (n) XXH3_64bits_update(&s->xxh3, bytes, n);
}

uint64_t nb_sum_final(const nb_sum *s) {
    return s->algo == NB_ST_NBH64 ? nbh64_final(&s->old) : XXH3_64bits_digest(&s->xxh3);
}
