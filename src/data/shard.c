/* Token shards in the llm.c format (docs/data.md states it). */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include "util/fs.h"
#include "nobubble/data.h"
#include "util/error.h"

static int32_t rd_i32(const uint8_t *p) {
    return (int32_t)((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24);
}

int nb_shard_open(const char *path, nb_shard *s) {
    memset(s, 0, sizeof *s);
    struct stat st;
    int fd = nb_fs_open_regular(path, "shard", &st);
    if (fd < 0) return -1;
    size_t size = (size_t)st.st_size;
    if (size < NB_SHARD_HEADER_BYTES) {
        close(fd);
        return nb_fail("shard %s: truncated: %zu bytes, shorter than the %d-byte header", path, size,
                       NB_SHARD_HEADER_BYTES);
    }
    void *map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
    int e = errno;
    close(fd);
    if (map == MAP_FAILED) return nb_fail("shard %s: mmap failed: %s", path, strerror(e));
    const uint8_t *h = map;
    int32_t magic = rd_i32(h), version = rd_i32(h + 4), count = rd_i32(h + 8);
    int tb = 0;
    if (magic == NB_SHARD_MAGIC_U16) {
        if (version != NB_SHARD_VERSION_U16) {
            munmap(map, size);
            return nb_fail("shard %s: wrong version %d for magic %d (expected %d: uint16 tokens)", path, version,
                           magic, NB_SHARD_VERSION_U16);
        }
        tb = 2;
    } else if (magic == NB_SHARD_MAGIC_U32) {
        if (version != NB_SHARD_VERSION_U32) {
            munmap(map, size);
            return nb_fail("shard %s: wrong version %d for magic %d (expected %d: uint32 tokens)", path, version,
                           magic, NB_SHARD_VERSION_U32);
        }
        tb = 4;
    } else {
        munmap(map, size);
        return nb_fail("shard %s: wrong magic %d (expected %d for uint16 tokens or %d for uint32 tokens)", path,
                       magic, NB_SHARD_MAGIC_U16, NB_SHARD_MAGIC_U32);
    }
    if (count < 0) {
        munmap(map, size);
        return nb_fail("shard %s: negative token count %d in the header", path, count);
    }
    size_t want = NB_SHARD_HEADER_BYTES + (size_t)count * (size_t)tb;
    if (size != want) {
        munmap(map, size);
        if (size < want)
            return nb_fail("shard %s: truncated: the header says %d tokens (%zu bytes) but the file has %zu bytes",
                           path, count, want, size);
        return nb_fail("shard %s: too long: the header says %d tokens (%zu bytes) but the file has %zu bytes "
                       "(token count mismatch)", path, count, want, size);
    }
    s->path = strdup(path);
    if (!s->path) {
        munmap(map, size);
        return nb_fail("out of memory");
    }
    s->magic = magic;
    s->version = version;
    s->token_bytes = tb;
    s->n_tokens = (size_t)count;
    s->payload = h + NB_SHARD_HEADER_BYTES;
    s->map_ = map;
    s->map_len_ = size;
    return 0;
}

void nb_shard_close(nb_shard *s) {
    if (!s) return;
    if (s->map_) munmap(s->map_, s->map_len_);
    free(s->path);
    memset(s, 0, sizeof *s);
}

uint32_t nb_shard_max_token(const nb_shard *s) {
    uint32_t m = 0;
    if (s->token_bytes == 2) {
        const uint8_t *p = s->payload;
        uint16_t mm = 0;
        for (size_t i = 0; i < s->n_tokens; i++) {
            uint16_t v = (uint16_t)(p[2 * i] | p[2 * i + 1] << 8);
            mm = v > mm ? v : mm;
        }
        m = mm;
    } else {
        for (size_t i = 0; i < s->n_tokens; i++) {
            uint32_t v = nb_shard_token(s, i);
            m = v > m ? v : m;
        }
    }
    return m;
}

int nb_shard_write(const char *path, const uint32_t *tokens, size_t n, int vocab_size) {
    if (vocab_size < 1) return nb_fail("shard %s: vocabulary size %d is not positive", path, vocab_size);
    if (n > (size_t)INT32_MAX)
        return nb_fail("shard %s: %zu tokens do not fit one shard (at most %d)", path, n, INT32_MAX);
    for (size_t i = 0; i < n; i++)
        if (tokens[i] >= (uint32_t)vocab_size)
            return nb_fail("shard %s: token %u at position %zu is >= the vocabulary size %d", path, tokens[i], i,
                           vocab_size);
    int u16 = vocab_size <= 65536;
    uint8_t header[NB_SHARD_HEADER_BYTES] = {0};
    int32_t hv[3] = {u16 ? NB_SHARD_MAGIC_U16 : NB_SHARD_MAGIC_U32, u16 ? NB_SHARD_VERSION_U16 : NB_SHARD_VERSION_U32,
                     (int32_t)n};
    for (int k = 0; k < 3; k++)
        for (int b = 0; b < 4; b++) header[4 * k + b] = (uint8_t)((uint32_t)hv[k] >> (8 * b));
    nb_afile a;
    if (nb_afile_open(&a, path)) return -1;
    int bad = fwrite(header, 1, sizeof header, a.f) != sizeof header;
    uint8_t buf[1 << 16];
    size_t tb = u16 ? 2 : 4, per = sizeof buf / tb;
    for (size_t i = 0; i < n && !bad; i += per) {
        size_t m = n - i < per ? n - i : per;
        for (size_t j = 0; j < m; j++)
            for (size_t b = 0; b < tb; b++) buf[j * tb + b] = (uint8_t)(tokens[i + j] >> (8 * b));
        bad = fwrite(buf, tb, m, a.f) != m;
    }
    if (bad) {
        nb_fail("shard %s: write failed: %s", path, strerror(errno));
        nb_afile_abort(&a);
        return -1;
    }
    return nb_afile_commit(&a);
}
