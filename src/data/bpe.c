/* Byte-level BPE: pre-tokenizer, training on word types, encoding with a word cache,
 * decoding, and nobubble's own tokenizer file. Tokens may have any ids (Hugging Face's files,
 * bpe_hf.c); nobubble's own have the bytes first, then the merges, then the end-of-text token.
 * The rules are in docs/data.md. */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "util/json.h"
#include "util/fs.h"
#include "util/hash.h"
#include "util/clock.h"
#include "nobubble/data.h"
#include "util/error.h"
#include "data/bpe_internal.h"
#include "data/regex.h"

#define FORMAT_NAME "nobubble-bpe"
#define FORMAT_VERSION 1
#define PRETOKENIZER_NAME "nobubble-gpt2-bytes-v1"

/* ------------------------------------------------------------ pre-tokenizer */
enum { C_WS, C_L, C_N, C_P };
/* Letters: ASCII letters and every byte >= 0x80 (so UTF-8 text in any script forms words);
 * digits: 0-9; whitespace: space \t \n \v \f \r; everything else is punctuation. */
static const unsigned char CLS[256] = {
    C_P, C_P, C_P, C_P, C_P, C_P, C_P, C_P, C_P, C_WS, C_WS, C_WS, C_WS, C_WS, C_P, C_P,
    C_P, C_P, C_P, C_P, C_P, C_P, C_P, C_P, C_P, C_P, C_P, C_P, C_P, C_P, C_P, C_P,
    C_WS, C_P, C_P, C_P, C_P, C_P, C_P, C_P, C_P, C_P, C_P, C_P, C_P, C_P, C_P, C_P,
    C_N, C_N, C_N, C_N, C_N, C_N, C_N, C_N, C_N, C_N, C_P, C_P, C_P, C_P, C_P, C_P,
    C_P, C_L, C_L, C_L, C_L, C_L, C_L, C_L, C_L, C_L, C_L, C_L, C_L, C_L, C_L, C_L,
    C_L, C_L, C_L, C_L, C_L, C_L, C_L, C_L, C_L, C_L, C_L, C_P, C_P, C_P, C_P, C_P,
    C_P, C_L, C_L, C_L, C_L, C_L, C_L, C_L, C_L, C_L, C_L, C_L, C_L, C_L, C_L, C_L,
    C_L, C_L, C_L, C_L, C_L, C_L, C_L, C_L, C_L, C_L, C_L, C_P, C_P, C_P, C_P, C_P,
#define L16 C_L, C_L, C_L, C_L, C_L, C_L, C_L, C_L, C_L, C_L, C_L, C_L, C_L, C_L, C_L, C_L
    L16, L16, L16, L16, L16, L16, L16, L16
#undef L16
};

size_t nb_pretokenize_next(const char *text, size_t len, size_t pos) {
    const unsigned char *s = (const unsigned char *)text;
    unsigned char c = s[pos];
    size_t end;
    if (c == '\'' && pos + 1 < len) { /* contractions 's 't 'm 'd 're 've 'll, not followed by a letter */
        unsigned char a = s[pos + 1];
        size_t k = 0;
        if (a == 's' || a == 't' || a == 'm' || a == 'd') k = 2;
        else if (pos + 2 < len && ((a == 'r' && s[pos + 2] == 'e') || (a == 'v' && s[pos + 2] == 'e') ||
                                   (a == 'l' && s[pos + 2] == 'l')))
            k = 3;
        if (k && (pos + k == len || CLS[s[pos + k]] != C_L)) { end = pos + k; goto done; }
    }
    int cl = CLS[c];
    if (cl == C_WS) {
        size_t j = pos + 1;
        while (j < len && CLS[s[j]] == C_WS) j++;
        if (j == len) end = j;                  /* trailing whitespace: one piece */
        else if (j - pos >= 2) end = j - 1;     /* leave the last one for the next word */
        else if (c != ' ') end = j;             /* a lone \n etc. before a word */
        else {                                  /* " word": the space joins the run after it */
            int c2 = CLS[s[j]];
            end = j + 1;
            while (end < len && CLS[s[end]] == c2) end++;
        }
    } else {
        end = pos + 1;
        while (end < len && CLS[s[end]] == cl) end++;
    }
done:
    if (end - pos > NB_PRETOKEN_MAX_BYTES) end = pos + NB_PRETOKEN_MAX_BYTES;
    return end;
}

/* ------------------------------------------------------------ string -> dense id map */
typedef struct {
    uint32_t *slots;  /* id + 1, 0 = empty */
    size_t mask;
    uint64_t *hash;
    uint32_t *off, *len;
    size_t n, idcap;
    nb_buf arena;
} strmap;

static uint64_t str_hash(const char *s, size_t n) {
    uint64_t h = nb_fnv1a(NB_FNV_INIT, s, n);
    return h ^ (h >> 29);
}

static void strmap_free(strmap *m) {
    free(m->slots); free(m->hash); free(m->off); free(m->len);
    nb_buf_free(&m->arena);
    memset(m, 0, sizeof *m);
}

static int strmap_grow(strmap *m) {
    size_t cap = m->mask ? (m->mask + 1) * 2 : 1024;
    uint32_t *slots = calloc(cap, sizeof *slots);
    if (!slots) return nb_fail("out of memory");
    for (size_t id = 0; id < m->n; id++) {
        size_t k = m->hash[id] & (cap - 1);
        while (slots[k]) k = (k + 1) & (cap - 1);
        slots[k] = (uint32_t)id + 1;
    }
    free(m->slots);
    m->slots = slots;
    m->mask = cap - 1;
    return 0;
}

/* Returns the id of s (adding it when absent; *added says so), or -1 when out of memory. */
static int64_t strmap_get(strmap *m, const char *s, size_t n, int add, int *added) {
    if (added) *added = 0;
    if (!m->mask && (!add || strmap_grow(m))) return -1;
    uint64_t h = str_hash(s, n);
    size_t k = h & m->mask;
    while (m->slots[k]) {
        uint32_t id = m->slots[k] - 1;
        if (m->hash[id] == h && m->len[id] == n && !memcmp(m->arena.p + m->off[id], s, n)) return id;
        k = (k + 1) & m->mask;
    }
    if (!add) return -1;
    if (m->n == m->idcap) {
        size_t nc = m->idcap ? m->idcap * 2 : 1024;
        uint64_t *hh = realloc(m->hash, nc * sizeof *hh);
        if (hh) m->hash = hh;
        uint32_t *oo = realloc(m->off, nc * sizeof *oo);
        if (oo) m->off = oo;
        uint32_t *ll = realloc(m->len, nc * sizeof *ll);
        if (ll) m->len = ll;
        if (!hh || !oo || !ll) return nb_fail("out of memory");
        m->idcap = nc;
    }
    if (m->arena.n + n >= UINT32_MAX) return nb_fail("too many distinct words");
    size_t id = m->n++;
    m->hash[id] = h;
    m->off[id] = (uint32_t)m->arena.n;
    m->len[id] = (uint32_t)n;
    if (nb_buf_put(&m->arena, s, n)) return -1;
    m->slots[k] = (uint32_t)id + 1;
    if (added) *added = 1;
    if (m->n * 2 > m->mask + 1 && strmap_grow(m)) return -1;
    return (int64_t)id;
}

/* ------------------------------------------------------------ the tokenizer */
struct nb_tokenizer {
    int vocab_size, n_merges, eot;
    int native;                  /* nobubble's layout (bytes, merges 256 + k, EOT last) and pre-tokenizer */
    int ignore_merges;
    uint32_t byte_id[256];       /* the token of each single byte */
    uint32_t *merges;            /* 3 per merge, in priority order: left, right, result */
    uint32_t *tok_off, *tok_len; /* per id */
    char *tok_bytes;
    uint8_t *special;            /* per id */
    uint64_t *mkey;              /* merge lookup: (left << 32 | right) -> priority */
    uint32_t *mval;
    size_t mmask;
    strmap whole;                /* ignore_merges: a token's bytes -> index into whole_id */
    uint32_t *whole_id;
    nb_regex *re;                /* the pre-tokenizer when not native */
    char *pattern;
    /* special tokens written in the text (nb_tokenizer_encode): ids by length, longest first */
    int *special_ids, n_special;
    uint8_t special_first[256];  /* 1 for a byte that starts some special token */
    int specials_as_text;        /* nb_tokenizer_special_as_text */
    /* encode cache: word -> ids */
    strmap cache;
    uint32_t *cache_off, *cache_n;
    size_t cache_cap;
    uint32_t *cache_ids;
    size_t cache_ids_n, cache_ids_cap;
};

#define MKEY_EMPTY UINT64_MAX
static inline uint64_t pair_key(uint32_t a, uint32_t b) { return (uint64_t)a << 32 | b; }
static inline size_t pair_slot(uint64_t key, size_t mask) {
    return (size_t)((key * 0x9E3779B97F4A7C15ULL) >> 20) & mask;
}

/* The priority of merge (a, b), UINT32_MAX when there is none. */
static inline uint32_t merge_lookup(const nb_tokenizer *t, uint32_t a, uint32_t b) {
    uint64_t key = pair_key(a, b);
    size_t k = pair_slot(key, t->mmask);
    for (;;) {
        uint64_t v = t->mkey[k];
        if (v == key) return t->mval[k];
        if (v == MKEY_EMPTY) return UINT32_MAX;
        k = (k + 1) & t->mmask;
    }
}

void nb_tokenizer_free(nb_tokenizer *t) {
    if (!t) return;
    free(t->merges); free(t->tok_off); free(t->tok_len); free(t->tok_bytes); free(t->special);
    free(t->mkey); free(t->mval);
    strmap_free(&t->whole); free(t->whole_id);
    nb_regex_free(t->re); free(t->pattern);
    strmap_free(&t->cache);
    free(t->cache_off); free(t->cache_n); free(t->cache_ids);
    free(t->special_ids);
    free(t);
}

/* The special tokens that text can spell (a non-empty content), longest first, and their first bytes. */
typedef struct { uint32_t len; int id; } special_key;
static int longest_first(const void *a, const void *b) {
    const special_key *x = a, *y = b;
    return x->len != y->len ? (x->len < y->len ? 1 : -1) : (x->id > y->id) - (x->id < y->id);
}

static int build_specials(nb_tokenizer *t) {
    int n = 0;
    for (int id = 0; id < t->vocab_size; id++) n += t->special[id] && t->tok_len[id] > 0;
    special_key *keys = malloc(sizeof *keys * (size_t)(n ? n : 1));
    t->special_ids = malloc(sizeof(int) * (size_t)(n ? n : 1));
    if (!keys || !t->special_ids) {
        free(keys);
        return nb_fail("out of memory");
    }
    for (int id = 0; id < t->vocab_size; id++)
        if (t->special[id] && t->tok_len[id] > 0) {
            keys[t->n_special++] = (special_key){t->tok_len[id], id};
            t->special_first[(unsigned char)t->tok_bytes[t->tok_off[id]]] = 1;
        }
    qsort(keys, (size_t)t->n_special, sizeof *keys, longest_first);
    for (int k = 0; k < t->n_special; k++) t->special_ids[k] = keys[k].id;
    free(keys);
    return 0;
}

/* The token table: every id's bytes, which ids are special, and the byte tokens. */
static int build_tokens(nb_tokenizer *t, const nb_bpe_spec *s, const char *path) {
    size_t V = (size_t)s->vocab_size, total = 1;
    for (size_t id = 0; id < V; id++) total += s->len[id];
    t->tok_off = malloc(V * sizeof *t->tok_off);
    t->tok_len = malloc(V * sizeof *t->tok_len);
    t->special = calloc(V, 1);
    t->tok_bytes = malloc(total);
    if (!t->tok_off || !t->tok_len || !t->special || !t->tok_bytes) return nb_fail("out of memory");
    if (total > UINT32_MAX) return nb_fail("tokenizer %s: tokens too long in total", path);
    size_t off = 0;
    for (int b = 0; b < 256; b++) t->byte_id[b] = UINT32_MAX;
    for (size_t id = 0; id < V; id++) {
        t->tok_off[id] = (uint32_t)off;
        t->tok_len[id] = (uint32_t)s->len[id];
        memcpy(t->tok_bytes + off, s->bytes + s->off[id], s->len[id]);
        off += s->len[id];
        t->special[id] = s->special ? s->special[id] : 0;
        if (s->len[id] == 1 && !t->special[id]) t->byte_id[(unsigned char)s->bytes[s->off[id]]] = (uint32_t)id;
    }
    for (int b = 0; b < 256; b++)
        if (t->byte_id[b] == UINT32_MAX)
            return nb_fail("tokenizer %s: no token for the byte 0x%02x (a byte-level BPE has one for each of the 256 "
                           "bytes)", path, b);
    if (s->eot < 0 || (size_t)s->eot >= V || !t->special[s->eot])
        return nb_fail("tokenizer %s: the end-of-text id %d is not a special token", path, s->eot);
    return 0;
}

/* The merge table: (left, right) -> priority; each result must be left's bytes then right's. */
static int build_merges(nb_tokenizer *t, const nb_bpe_spec *s, const char *path) {
    size_t n = (size_t)s->n_merges, mcap = 1024;
    while (mcap < 2 * n + 2) mcap *= 2;
    t->mmask = mcap - 1;
    t->merges = malloc((3 * n + 1) * sizeof *t->merges);
    t->mkey = malloc(mcap * sizeof *t->mkey);
    t->mval = malloc(mcap * sizeof *t->mval);
    if (!t->merges || !t->mkey || !t->mval) return nb_fail("out of memory");
    for (size_t k = 0; k < mcap; k++) t->mkey[k] = MKEY_EMPTY;
    if (n) memcpy(t->merges, s->merges, 3 * n * sizeof *t->merges);
    for (size_t k = 0; k < n; k++) {
        uint32_t a = s->merges[3 * k], b = s->merges[3 * k + 1], r = s->merges[3 * k + 2];
        if (a >= (uint32_t)s->vocab_size || b >= (uint32_t)s->vocab_size || r >= (uint32_t)s->vocab_size ||
            t->special[a] || t->special[b] || t->special[r] || t->tok_len[r] != t->tok_len[a] + t->tok_len[b] ||
            memcmp(t->tok_bytes + t->tok_off[r], t->tok_bytes + t->tok_off[a], t->tok_len[a]) ||
            memcmp(t->tok_bytes + t->tok_off[r] + t->tok_len[a], t->tok_bytes + t->tok_off[b], t->tok_len[b]))
            return nb_fail("tokenizer %s: merge %zu (%u, %u -> %u) does not join two tokens into a third", path, k, a, b,
                           r);
        uint64_t key = pair_key(a, b);
        size_t slot = pair_slot(key, t->mmask);
        while (t->mkey[slot] != MKEY_EMPTY && t->mkey[slot] != key) slot = (slot + 1) & t->mmask;
        if (t->mkey[slot] == key)
            return nb_fail("tokenizer %s: merge %zu (%u, %u) repeats merge %u", path, k, a, b, t->mval[slot]);
        t->mkey[slot] = key;
        t->mval[slot] = (uint32_t)k;
    }
    return 0;
}

/* ignore_merges: every ordinary token findable by its bytes. */
static int build_whole(nb_tokenizer *t) {
    t->whole_id = malloc(((size_t)t->vocab_size + 1) * sizeof *t->whole_id);
    if (!t->whole_id) return nb_fail("out of memory");
    for (int id = 0; id < t->vocab_size; id++) {
        if (t->special[id] || !t->tok_len[id]) continue;
        int added;
        int64_t k = strmap_get(&t->whole, t->tok_bytes + t->tok_off[id], t->tok_len[id], 1, &added);
        if (k < 0) return -1;
        if (added) t->whole_id[k] = (uint32_t)id;
    }
    return 0;
}

int nb_bpe_build(nb_tokenizer **out, const nb_bpe_spec *s, const char *path) {
    *out = NULL;
    if (s->vocab_size < NB_TOKENIZER_MIN_VOCAB || s->vocab_size > NB_TOKENIZER_MAX_VOCAB || s->n_merges < 0)
        return nb_fail("tokenizer %s: %d tokens is out of range (%d to %d)", path, s->vocab_size,
                       NB_TOKENIZER_MIN_VOCAB, NB_TOKENIZER_MAX_VOCAB);
    nb_tokenizer *t = calloc(1, sizeof *t);
    if (!t) return nb_fail("out of memory");
    t->vocab_size = s->vocab_size;
    t->n_merges = s->n_merges;
    t->eot = s->eot;
    t->ignore_merges = s->ignore_merges;
    int r = build_tokens(t, s, path);
    if (!r) r = build_specials(t);
    if (!r) r = build_merges(t, s, path);
    if (!r && t->ignore_merges) r = build_whole(t);
    if (!r && s->pattern) {
        t->pattern = strdup(s->pattern);
        r = !t->pattern ? nb_fail("out of memory") : nb_regex_compile(&t->re, s->pattern, path);
    }
    if (r) { nb_tokenizer_free(t); return -1; }
    *out = t;
    return 0;
}

int nb_tokenizer_from_merges(nb_tokenizer **out, const uint32_t *merges, int n_merges) {
    *out = NULL;
    if (n_merges < 0 || (size_t)n_merges + 257 > NB_TOKENIZER_MAX_VOCAB)
        return nb_fail("tokenizer: %d merges is out of range (0 to %d)", n_merges, NB_TOKENIZER_MAX_VOCAB - 257);
    size_t V = 256 + (size_t)n_merges + 1, eot = V - 1;
    size_t *off = malloc(V * sizeof *off), *len = malloc(V * sizeof *len);
    uint32_t *m3 = malloc((3 * (size_t)n_merges + 1) * sizeof *m3);
    uint8_t *special = calloc(V, 1);
    char *bytes = NULL;
    int r = 0;
    if (!off || !len || !m3 || !special) { r = nb_fail("out of memory"); goto done; }
    for (size_t i = 0; i < 256; i++) len[i] = 1;
    size_t total = 256 + sizeof NB_EOT_TEXT;
    for (int k = 0; k < n_merges && !r; k++) {
        uint32_t a = merges[2 * k], b = merges[2 * k + 1], id = 256 + (uint32_t)k;
        if (a >= id || b >= id) {
            r = nb_fail("tokenizer: merge %d (%u, %u) refers to an id not yet defined (must be < %u)", k, a, b, id);
            break;
        }
        /* Merges join tokens inside one pre-token, so no token is longer than a pre-token; without this
         * bound a few self-merges in a tiny file would make the token bytes below exponentially large. */
        uint64_t l = (uint64_t)len[a] + len[b];
        if (l > NB_PRETOKEN_MAX_BYTES)
            r = nb_fail("tokenizer: merge %d (%u, %u) makes a token of %llu bytes, longer than a pre-token can be "
                        "(%d bytes)", k, a, b, (unsigned long long)l, NB_PRETOKEN_MAX_BYTES);
        len[id] = (size_t)l;
        total += l;
        m3[3 * k] = a; m3[3 * k + 1] = b; m3[3 * k + 2] = id;
    }
    if (r || !(bytes = malloc(total))) { r = r ? r : nb_fail("out of memory"); goto done; }
    size_t o = 0;
    for (size_t i = 0; i < 256; i++) { off[i] = o; bytes[o++] = (char)i; }
    for (int k = 0; k < n_merges; k++) {
        size_t a = merges[2 * k], b = merges[2 * k + 1], id = 256 + (size_t)k;
        off[id] = o;
        memcpy(bytes + o, bytes + off[a], len[a]);
        memcpy(bytes + o + len[a], bytes + off[b], len[b]);
        o += len[id];
    }
    off[eot] = o;
    len[eot] = strlen(NB_EOT_TEXT);
    memcpy(bytes + o, NB_EOT_TEXT, len[eot]);
    special[eot] = 1;
    nb_bpe_spec s = {.vocab_size = (int)V, .bytes = bytes, .off = off, .len = len, .special = special,
                     .merges = m3, .n_merges = n_merges, .eot = (int)eot};
    r = nb_bpe_build(out, &s, "built from merges");
    if (!r) (*out)->native = 1;
done:
    free(off); free(len); free(m3); free(special); free(bytes);
    return r;
}

int nb_tokenizer_vocab_size(const nb_tokenizer *t) { return t->vocab_size; }
int nb_tokenizer_eot(const nb_tokenizer *t) { return t->eot; }
int nb_tokenizer_n_merges(const nb_tokenizer *t) { return t->n_merges; }
int nb_bpe_is_native(const nb_tokenizer *t) { return t->native; }
const char *nb_bpe_pattern(const nb_tokenizer *t) { return t->native ? NB_NATIVE_REGEX : t->pattern; }
int nb_bpe_ignore_merges(const nb_tokenizer *t) { return t->ignore_merges; }
int nb_bpe_is_special(const nb_tokenizer *t, int id) { return id >= 0 && id < t->vocab_size && t->special[id]; }
uint32_t nb_bpe_merge_result(const nb_tokenizer *t, int k) { return t->merges[3 * k + 2]; }

int nb_tokenizer_merge(const nb_tokenizer *t, int k, uint32_t *left, uint32_t *right) {
    if (k < 0 || k >= t->n_merges) return nb_fail("tokenizer: merge %d out of range (%d merges)", k, t->n_merges);
    *left = t->merges[3 * k];
    *right = t->merges[3 * k + 1];
    return 0;
}

const char *nb_tokenizer_token_bytes(const nb_tokenizer *t, int id, size_t *len) {
    if (id < 0 || id >= t->vocab_size) { if (len) *len = 0; return NULL; }
    if (len) *len = t->tok_len[id];
    return t->tok_bytes + t->tok_off[id];
}

/* ------------------------------------------------------------ encode / decode */
/* Merges the pair with the highest priority (the earliest merge), all its occurrences left to
 * right, until no adjacent pair has a merge: the same result as applying the merges in order. */
static size_t encode_word(const nb_tokenizer *t, const unsigned char *w, size_t n, uint32_t *out) {
    if (t->ignore_merges) {
        int64_t k = strmap_get((strmap *)&t->whole, (const char *)w, n, 0, NULL);
        if (k >= 0) { out[0] = t->whole_id[k]; return 1; }
    }
    for (size_t i = 0; i < n; i++) out[i] = t->byte_id[w[i]];
    size_t m = n;
    while (m >= 2) {
        uint32_t best = UINT32_MAX;
        for (size_t j = 0; j + 1 < m; j++) {
            uint32_t rank = merge_lookup(t, out[j], out[j + 1]);
            if (rank < best) best = rank;
        }
        if (best == UINT32_MAX) break;
        uint32_t A = t->merges[3 * best], B = t->merges[3 * best + 1], R = t->merges[3 * best + 2];
        size_t r = 0;
        for (size_t j = 0; j < m;) {
            if (j + 1 < m && out[j] == A && out[j + 1] == B) { out[r++] = R; j += 2; }
            else out[r++] = out[j++];
        }
        m = r;
    }
    return m;
}

#define CACHE_MAX_WORDS (1u << 20)

static void cache_clear(nb_tokenizer *t) {
    strmap_free(&t->cache);
    t->cache_ids_n = 0;
}

static size_t next_piece(const nb_tokenizer *t, const char *text, size_t len, size_t pos) {
    return t->re ? nb_regex_next(t->re, text, len, pos) : nb_pretokenize_next(text, len, pos);
}

/* The text as ordinary bytes: pre-tokenized, each piece merged. */
static size_t encode_plain(nb_tokenizer *t, const char *text, size_t len, uint32_t *out) {
    size_t n = 0, pos = 0;
    while (pos < len) {
        size_t end = next_piece(t, text, len, pos);
        if (end == NB_REGEX_FAILED) return NB_ENCODE_FAILED;
        size_t wl = end - pos;
        const char *w = text + pos;
        pos = end;
        if (wl == 1) { out[n++] = t->byte_id[(unsigned char)w[0]]; continue; }
        int added;
        if (t->cache.n >= CACHE_MAX_WORDS) cache_clear(t);
        int64_t id = strmap_get(&t->cache, w, wl, 1, &added);
        if (id < 0) { /* out of memory for the cache: encode without it */
            n += encode_word(t, (const unsigned char *)w, wl, out + n);
            continue;
        }
        if (!added) {
            memcpy(out + n, t->cache_ids + t->cache_off[id], t->cache_n[id] * sizeof *out);
            n += t->cache_n[id];
            continue;
        }
        size_t m = encode_word(t, (const unsigned char *)w, wl, out + n);
        int ok = 1;
        if ((size_t)id >= t->cache_cap) {
            size_t nc = t->cache_cap ? t->cache_cap * 2 : 4096;
            uint32_t *o = realloc(t->cache_off, nc * sizeof *o);
            if (o) t->cache_off = o;
            uint32_t *c = realloc(t->cache_n, nc * sizeof *c);
            if (c) t->cache_n = c;
            if (o && c) t->cache_cap = nc; else ok = 0;
        }
        if (ok && t->cache_ids_n + m > t->cache_ids_cap) {
            size_t nc = t->cache_ids_cap ? t->cache_ids_cap * 2 : 65536;
            while (nc < t->cache_ids_n + m) nc *= 2;
            uint32_t *p = realloc(t->cache_ids, nc * sizeof *p);
            if (p) { t->cache_ids = p; t->cache_ids_cap = nc; } else ok = 0;
        }
        if (!ok) { cache_clear(t); n += m; continue; }
        t->cache_off[id] = (uint32_t)t->cache_ids_n;
        t->cache_n[id] = (uint32_t)m;
        memcpy(t->cache_ids + t->cache_ids_n, out + n, m * sizeof *out);
        t->cache_ids_n += m;
        n += m;
    }
    return n;
}

/* The special token spelled at text[i] (the longest of them), or -1. */
static int special_at(const nb_tokenizer *t, const char *text, size_t len, size_t i) {
    for (int k = 0; k < t->n_special; k++) {
        const int id = t->special_ids[k];
        const size_t l = t->tok_len[id];
        if (l <= len - i && !memcmp(text + i, t->tok_bytes + t->tok_off[id], l)) return id;
    }
    return -1;
}

/* As Hugging Face's tokenizers do: the text is cut at every special token it spells (the leftmost,
 * the longest there), each one becomes its id and the text between is encoded as ordinary text. */
size_t nb_tokenizer_encode(nb_tokenizer *t, const char *text, size_t len, uint32_t *out) {
    if (t->specials_as_text || t->n_special == 0) return encode_plain(t, text, len, out);
    size_t n = 0, from = 0;
    for (size_t i = 0; i < len; i++) {
        if (!t->special_first[(unsigned char)text[i]]) continue;
        const int id = special_at(t, text, len, i);
        if (id < 0) continue;
        const size_t m = encode_plain(t, text + from, i - from, out + n);
        if (m == NB_ENCODE_FAILED) return m;
        n += m;
        out[n++] = (uint32_t)id;
        from = i + t->tok_len[id];
        i = from - 1;
    }
    const size_t m = encode_plain(t, text + from, len - from, out + n);
    return m == NB_ENCODE_FAILED ? m : n + m;
}

void nb_tokenizer_special_as_text(nb_tokenizer *t, int as_text) { t->specials_as_text = as_text != 0; }

size_t nb_tokenizer_decode(const nb_tokenizer *t, const int *ids, size_t n, char *out, size_t cap) {
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= t->vocab_size) continue;
        size_t l = t->tok_len[ids[i]];
        if (total < cap) memcpy(out + total, t->tok_bytes + t->tok_off[ids[i]], total + l <= cap ? l : cap - total);
        total += l;
    }
    return total;
}
/* ------------------------------------------------------------ training */
typedef struct { int64_t count; uint32_t a, b; } heap_item;
typedef struct {
    uint32_t a, b;
    int64_t count;
    uint32_t *where;  /* words holding the pair (may repeat, may be stale) */
    uint32_t nw, cw;
    uint32_t stamp;
} pair_t;

typedef struct {
    /* words */
    size_t n_words;
    uint32_t *woff, *wlen, *wstamp;
    int64_t *wfreq;
    uint32_t *toks;
    /* pairs */
    pair_t *pairs;
    size_t n_pairs, cap_pairs;
    uint32_t *pslots;
    size_t pmask;
    /* heap */
    heap_item *heap;
    size_t n_heap, cap_heap;
    uint32_t *touched;
    size_t n_touched, cap_touched;
} trainer;

static inline int heap_better(const heap_item *x, const heap_item *y) {
    if (x->count != y->count) return x->count > y->count;
    if (x->a != y->a) return x->a < y->a;
    return x->b < y->b;
}

static int heap_push(trainer *tr, int64_t count, uint32_t a, uint32_t b) {
    if (tr->n_heap == tr->cap_heap) {
        size_t nc = tr->cap_heap ? tr->cap_heap * 2 : 4096;
        heap_item *h = realloc(tr->heap, nc * sizeof *h);
        if (!h) return nb_fail("out of memory");
        tr->heap = h;
        tr->cap_heap = nc;
    }
    size_t i = tr->n_heap++;
    heap_item it = {count, a, b};
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!heap_better(&it, &tr->heap[p])) break;
        tr->heap[i] = tr->heap[p];
        i = p;
    }
    tr->heap[i] = it;
    return 0;
}

static heap_item heap_pop(trainer *tr) {
    heap_item top = tr->heap[0], last = tr->heap[--tr->n_heap];
    size_t i = 0, n = tr->n_heap;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && heap_better(&tr->heap[c + 1], &tr->heap[c])) c++;
        if (!heap_better(&tr->heap[c], &last)) break;
        tr->heap[i] = tr->heap[c];
        i = c;
    }
    if (n) tr->heap[i] = last;
    return top;
}

static int pairs_grow(trainer *tr) {
    size_t cap = tr->pmask ? (tr->pmask + 1) * 2 : 1 << 16;
    uint32_t *slots = calloc(cap, sizeof *slots);
    if (!slots) return nb_fail("out of memory");
    for (size_t i = 0; i < tr->n_pairs; i++) {
        size_t k = pair_slot(pair_key(tr->pairs[i].a, tr->pairs[i].b), cap - 1);
        while (slots[k]) k = (k + 1) & (cap - 1);
        slots[k] = (uint32_t)i + 1;
    }
    free(tr->pslots);
    tr->pslots = slots;
    tr->pmask = cap - 1;
    return 0;
}

/* Index of pair (a, b), added with count 0 when absent; -1 when out of memory. */
static int64_t pair_get(trainer *tr, uint32_t a, uint32_t b) {
    uint64_t key = pair_key(a, b);
    size_t k = pair_slot(key, tr->pmask);
    while (tr->pslots[k]) {
        pair_t *p = &tr->pairs[tr->pslots[k] - 1];
        if (p->a == a && p->b == b) return tr->pslots[k] - 1;
        k = (k + 1) & tr->pmask;
    }
    if (tr->n_pairs == tr->cap_pairs) {
        size_t nc = tr->cap_pairs ? tr->cap_pairs * 2 : 1 << 15;
        pair_t *np = realloc(tr->pairs, nc * sizeof *np);
        if (!np) return nb_fail("out of memory");
        tr->pairs = np;
        tr->cap_pairs = nc;
    }
    size_t i = tr->n_pairs++;
    memset(&tr->pairs[i], 0, sizeof tr->pairs[i]);
    tr->pairs[i].a = a;
    tr->pairs[i].b = b;
    tr->pslots[k] = (uint32_t)i + 1;
    if (tr->n_pairs * 2 > tr->pmask + 1 && pairs_grow(tr)) return -1;
    return (int64_t)i;
}

static int where_add(pair_t *p, uint32_t w) {
    if (p->nw && p->where[p->nw - 1] == w) return 0;
    if (p->nw == p->cw) {
        uint32_t nc = p->cw ? p->cw * 2 : 4;
        uint32_t *nw = realloc(p->where, nc * sizeof *nw);
        if (!nw) return nb_fail("out of memory");
        p->where = nw;
        p->cw = nc;
    }
    p->where[p->nw++] = w;
    return 0;
}

static void trainer_free(trainer *tr) {
    for (size_t i = 0; i < tr->n_pairs; i++) free(tr->pairs[i].where);
    free(tr->pairs); free(tr->pslots); free(tr->heap); free(tr->touched);
    free(tr->woff); free(tr->wlen); free(tr->wstamp); free(tr->wfreq); free(tr->toks);
}

/* Applies merge (A, B) -> X to every word holding the pair and updates the pair counts. */
static int apply_merge(trainer *tr, size_t pidx, uint32_t X, uint32_t stamp) {
    uint32_t A = tr->pairs[pidx].a, B = tr->pairs[pidx].b;
    uint32_t *wl = tr->pairs[pidx].where;
    uint32_t nwl = tr->pairs[pidx].nw;
    tr->pairs[pidx].where = NULL;
    tr->pairs[pidx].nw = tr->pairs[pidx].cw = 0;
    tr->n_touched = 0;
    int rc = 0;
    for (uint32_t i = 0; i < nwl && !rc; i++) {
        uint32_t w = wl[i];
        if (tr->wstamp[w] == stamp) continue;
        tr->wstamp[w] = stamp;
        uint32_t *t = tr->toks + tr->woff[w];
        uint32_t len = tr->wlen[w];
        int has = 0;
        for (uint32_t j = 0; j + 1 < len; j++)
            if (t[j] == A && t[j + 1] == B) { has = 1; break; }
        if (!has) continue;
        int64_t f = tr->wfreq[w];
        for (uint32_t j = 0; j + 1 < len; j++) {
            int64_t p = pair_get(tr, t[j], t[j + 1]);
            if (p < 0) { rc = -1; break; }
            tr->pairs[p].count -= f;
        }
        uint32_t r = 0;
        for (uint32_t j = 0; j < len;) {
            if (j + 1 < len && t[j] == A && t[j + 1] == B) { t[r++] = X; j += 2; }
            else t[r++] = t[j++];
        }
        tr->wlen[w] = len = r;
        for (uint32_t j = 0; j + 1 < len && !rc; j++) {
            int64_t p = pair_get(tr, t[j], t[j + 1]);
            if (p < 0) { rc = -1; break; }
            pair_t *pp = &tr->pairs[p];
            pp->count += f;
            if (t[j] != X && t[j + 1] != X) continue;
            if (where_add(pp, w)) { rc = -1; break; }
            if (pp->stamp != stamp) {
                pp->stamp = stamp;
                if (tr->n_touched == tr->cap_touched) {
                    size_t nc = tr->cap_touched ? tr->cap_touched * 2 : 1024;
                    uint32_t *nt = realloc(tr->touched, nc * sizeof *nt);
                    if (!nt) { rc = nb_fail("out of memory"); break; }
                    tr->touched = nt;
                    tr->cap_touched = nc;
                }
                tr->touched[tr->n_touched++] = (uint32_t)p;
            }
        }
    }
    free(wl);
    for (size_t i = 0; i < tr->n_touched && !rc; i++) {
        pair_t *p = &tr->pairs[tr->touched[i]];
        if (p->count > 0) rc = heap_push(tr, p->count, p->a, p->b);
    }
    return rc;
}

int nb_tokenizer_train(nb_tokenizer **out, const char *const *docs, const size_t *lens, size_t n_docs,
                       int vocab_size, int verbose) {
    *out = NULL;
    if (vocab_size < NB_TOKENIZER_MIN_VOCAB)
        return nb_fail("vocabulary size %d is too small: at least %d (256 bytes + the end-of-text token)", vocab_size,
                       NB_TOKENIZER_MIN_VOCAB);
    if (vocab_size > NB_TOKENIZER_MAX_VOCAB)
        return nb_fail("vocabulary size %d is too large (at most %d)", vocab_size, NB_TOKENIZER_MAX_VOCAB);
    int n_merges = vocab_size - NB_TOKENIZER_MIN_VOCAB;
    double t0 = nb_now();
    /* 1. distinct pre-tokens and their counts */
    strmap words = {0};
    int64_t *freq = NULL;
    size_t fcap = 0;
    int rc = 0;
    for (size_t d = 0; d < n_docs && !rc; d++) {
        size_t pos = 0, len = lens[d];
        while (pos < len) {
            size_t end = nb_pretokenize_next(docs[d], len, pos);
            int added;
            int64_t id = strmap_get(&words, docs[d] + pos, end - pos, 1, &added);
            pos = end;
            if (id < 0) { rc = -1; break; }
            if ((size_t)id >= fcap) {
                size_t nc = fcap ? fcap * 2 : 4096;
                int64_t *nf = realloc(freq, nc * sizeof *nf);
                if (!nf) { rc = nb_fail("out of memory"); break; }
                freq = nf;
                fcap = nc;
            }
            if (added) freq[id] = 0;
            freq[id]++;
        }
    }
    trainer tr = {0};
    uint32_t *merges = NULL;
    if (rc) goto done;
    tr.n_words = words.n;
    tr.woff = malloc((words.n + 1) * sizeof *tr.woff);
    tr.wlen = malloc((words.n + 1) * sizeof *tr.wlen);
    tr.wstamp = calloc(words.n + 1, sizeof *tr.wstamp);
    tr.wfreq = freq;
    freq = NULL;
    tr.toks = malloc((words.arena.n + 1) * sizeof *tr.toks);
    merges = malloc(2 * ((size_t)n_merges + 1) * sizeof *merges);
    if (!tr.woff || !tr.wlen || !tr.wstamp || !tr.toks || !merges) { rc = nb_fail("out of memory"); goto done; }
    for (size_t i = 0; i < words.arena.n; i++) tr.toks[i] = (unsigned char)words.arena.p[i];
    for (size_t w = 0; w < words.n; w++) { tr.woff[w] = words.off[w]; tr.wlen[w] = words.len[w]; }
    if (pairs_grow(&tr)) { rc = -1; goto done; }
    /* 2. pair counts over word types */
    for (size_t w = 0; w < tr.n_words && !rc; w++) {
        const uint32_t *t = tr.toks + tr.woff[w];
        for (uint32_t j = 0; j + 1 < tr.wlen[w]; j++) {
            int64_t p = pair_get(&tr, t[j], t[j + 1]);
            if (p < 0 || where_add(&tr.pairs[p], (uint32_t)w)) { rc = -1; break; }
            tr.pairs[p].count += tr.wfreq[w];
        }
    }
    for (size_t i = 0; i < tr.n_pairs && !rc; i++) rc = heap_push(&tr, tr.pairs[i].count, tr.pairs[i].a, tr.pairs[i].b);
    if (rc) goto done;
    if (verbose)
        fprintf(stderr, "tokenizer: %zu distinct words (%zu bytes), %zu pairs; learning %d merges\n", words.n,
                words.arena.n, tr.n_pairs, n_merges);
    /* 3. merges */
    for (int k = 0; k < n_merges; k++) {
        heap_item top;
        int64_t pidx = -1;
        for (;;) {
            if (!tr.n_heap) break;
            top = heap_pop(&tr);
            pidx = pair_get(&tr, top.a, top.b);
            if (pidx < 0) { rc = -1; goto done; }
            if (tr.pairs[pidx].count == top.count) break;
            if (tr.pairs[pidx].count > 0 && heap_push(&tr, tr.pairs[pidx].count, top.a, top.b)) { rc = -1; goto done; }
            pidx = -1;
        }
        if (pidx < 0 || top.count < 2) {
            rc = nb_fail("vocabulary size %d is too large for the data: only %d merges occur at least twice "
                         "(the largest vocabulary this data supports is %d)", vocab_size, k, 256 + k + 1);
            goto done;
        }
        merges[2 * k] = top.a;
        merges[2 * k + 1] = top.b;
        if (apply_merge(&tr, (size_t)pidx, 256 + (uint32_t)k, (uint32_t)k + 1)) { rc = -1; goto done; }
        if (verbose && isatty(2) && ((k + 1) % 256 == 0 || k + 1 == n_merges))
            fprintf(stderr, "\rtokenizer: %d/%d merges  %.1f s", k + 1, n_merges, nb_now() - t0);
    }
    if (verbose) fprintf(stderr, "%stokenizer: %d merges in %.2f s\n", isatty(2) ? "\r" : "", n_merges, nb_now() - t0);
    rc = nb_tokenizer_from_merges(out, merges, n_merges);
done:
    free(freq);
    free(merges);
    strmap_free(&words);
    trainer_free(&tr);
    return rc;
}

/* ------------------------------------------------------------ nobubble's own file format */
static int get_int(const nb_json *root, const char *key, int64_t *v, const char *path) {
    const nb_json *j = nb_json_get(root, key);
    if (!j || j->type != NB_JNUM || !j->is_int) return nb_fail("tokenizer %s: \"%s\" missing or not an integer", path, key);
    *v = j->i;
    return 0;
}

int nb_bpe_load_native(nb_tokenizer **out, const nb_json *root, const char *path) {
    *out = NULL;
    uint32_t *merges = NULL;
    const nb_json *fmt = nb_json_get(root, "format"), *pre = nb_json_get(root, "pretokenizer");
    const nb_json *ms = nb_json_get(root, "merges"), *eot = nb_json_get(root, "eot");
    int64_t version = 0, vocab = 0, eot_id = 0;
    int r;
    if (root->type != NB_JOBJ || !fmt || fmt->type != NB_JSTR || strcmp(fmt->str, FORMAT_NAME)) {
        r = nb_fail("tokenizer %s: not a nobubble tokenizer (\"format\" must be \"%s\")", path, FORMAT_NAME);
        goto done;
    }
    if ((r = get_int(root, "version", &version, path))) goto done;
    if (version != FORMAT_VERSION) {
        r = nb_fail("tokenizer %s: unsupported version %lld (expected %d)", path, (long long)version, FORMAT_VERSION);
        goto done;
    }
    if (!pre || pre->type != NB_JSTR || strcmp(pre->str, PRETOKENIZER_NAME)) {
        r = nb_fail("tokenizer %s: unknown pretokenizer (expected \"%s\")", path, PRETOKENIZER_NAME);
        goto done;
    }
    if ((r = get_int(root, "vocab_size", &vocab, path))) goto done;
    if (!ms || ms->type != NB_JARR) { r = nb_fail("tokenizer %s: \"merges\" missing or not a list", path); goto done; }
    if ((int64_t)ms->n + 257 != vocab) {
        r = nb_fail("tokenizer %s: vocab_size %lld does not match %zu merges (expected %zu)", path, (long long)vocab,
                    ms->n, ms->n + 257);
        goto done;
    }
    if (!eot || (r = get_int(eot, "id", &eot_id, path)) || eot_id != vocab - 1) {
        r = nb_fail("tokenizer %s: \"eot\" must be {\"id\": %lld, ...} (the last id)", path, (long long)vocab - 1);
        goto done;
    }
    merges = malloc((2 * ms->n + 1) * sizeof *merges);
    if (!merges) { r = nb_fail("out of memory"); goto done; }
    for (size_t k = 0; k < ms->n; k++) {
        const nb_json *m = &ms->items[k];
        if (m->type != NB_JARR || m->n != 2 || m->items[0].type != NB_JNUM || !m->items[0].is_int ||
            m->items[1].type != NB_JNUM || !m->items[1].is_int || m->items[0].i < 0 || m->items[1].i < 0 ||
            m->items[0].i >= 256 + (int64_t)k || m->items[1].i >= 256 + (int64_t)k) {
            r = nb_fail("tokenizer %s: merge %zu must be [left, right] with ids below %zu", path, k, 256 + k);
            goto done;
        }
        merges[2 * k] = (uint32_t)m->items[0].i;
        merges[2 * k + 1] = (uint32_t)m->items[1].i;
    }
    r = nb_tokenizer_from_merges(out, merges, (int)ms->n);
    if (r) {
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", nb_last_error());
        nb_fail("%s (in %s)", msg, path);
    }
done:
    free(merges);
    return r;
}
