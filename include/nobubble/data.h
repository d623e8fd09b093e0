/* nobubble: data. Token shards (the llm.c format), a byte-level BPE tokenizer, the
 * `prepare` pipeline and the batch loader the trainer reads from.
 * Every fallible call returns 0 on success and -1 on failure with a message for
 * nb_last_error() (see common.h). docs/data.md describes the formats and the rules. */
#ifndef NOBUBBLE_DATA_H
#define NOBUBBLE_DATA_H
#include <stddef.h>
#include <stdint.h>
#include "nobubble/common.h"

/* ---------------------------------------------------------------- token shards */
/* A 1024-byte header of 256 little-endian int32: [0] magic, [1] version, [2] token count,
 * then the tokens: magic 20240520 / version 1 = uint16 tokens, 20240801 / 7 = uint32. */
#define NB_SHARD_MAGIC_U16 20240520
#define NB_SHARD_VERSION_U16 1
#define NB_SHARD_MAGIC_U32 20240801
#define NB_SHARD_VERSION_U32 7
#define NB_SHARD_HEADER_BYTES 1024

typedef struct {
    char *path;              /* copy of the path it was opened from */
    int magic, version;      /* as read from the header */
    int token_bytes;         /* 2 or 4 */
    size_t n_tokens;         /* header [2], checked against the file size */
    const uint8_t *payload;  /* the tokens (memory-mapped, read-only) */
    void *map_;              /* private */
    size_t map_len_;         /* private */
} nb_shard;

/* Opens and validates a shard (magic, version, size = 1024 + n * token_bytes). The error
 * names the file and what is wrong: wrong magic, wrong version, truncated, too long. */
int nb_shard_open(const char *path, nb_shard *s);
void nb_shard_close(nb_shard *s);
/* Token i as uint32 whatever the storage width (i < n_tokens, unchecked). */
static inline uint32_t nb_shard_token(const nb_shard *s, size_t i) {
    const uint8_t *p = s->payload + i * (size_t)s->token_bytes;
    if (s->token_bytes == 2) return (uint32_t)p[0] | (uint32_t)p[1] << 8;
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
/* Largest token id in the shard (0 for an empty shard). */
uint32_t nb_shard_max_token(const nb_shard *s);
/* Writes n tokens (each < vocab_size, else an error) as uint16 when vocab_size <= 65536,
 * else uint32; atomically: a temporary name in the same folder, fsync, rename. */
int nb_shard_write(const char *path, const uint32_t *tokens, size_t n, int vocab_size);

/* ---------------------------------------------------------------- BPE tokenizer */
/* Byte-level BPE. nobubble's own (trained) tokenizers: ids 0..255 are the bytes, id 256 + k is
 * merge k, the last id (vocab_size - 1) is the end-of-text token "<|endoftext|>". One read from a
 * Hugging Face tokenizer.json (GPT-2's or Llama 3's kind, docs/data.md) keeps that file's ids. */
typedef struct nb_tokenizer nb_tokenizer;

#define NB_EOT_TEXT "<|endoftext|>"
#define NB_TOKENIZER_MIN_VOCAB 257      /* 256 bytes + end-of-text */
#define NB_TOKENIZER_MAX_VOCAB 16777216
#define NB_PRETOKEN_MAX_BYTES 256        /* longer pre-tokens are cut into pieces of this size */

/* The pre-tokenizer: returns the end of the pre-token that starts at text[pos]
 * (pos < len; the result is > pos). Words never cross pre-token boundaries. */
size_t nb_pretokenize_next(const char *text, size_t len, size_t pos);

/* Learns vocab_size - 257 merges from n_docs documents (pre-token types counted with their
 * frequencies; each step merges the most frequent adjacent pair, ties going to the smallest
 * left id, then the smallest right id; a pair must occur at least twice). Fails when the data
 * cannot supply that many merges. verbose: progress lines on stderr. */
int nb_tokenizer_train(nb_tokenizer **out, const char *const *docs, const size_t *lens,
                       size_t n_docs, int vocab_size, int verbose);
/* Builds a tokenizer from a merge list: merges[2k], merges[2k+1] are the left and right ids of
 * merge k (each < 256 + k); vocab_size = 256 + n_merges + 1. */
int nb_tokenizer_from_merges(nb_tokenizer **out, const uint32_t *merges, int n_merges);
/* Reads a Hugging Face tokenizer.json or nobubble's earlier own format; refuses, naming the file
 * and the field, what it does not implement. */
int nb_tokenizer_load(nb_tokenizer **out, const char *path);
/* Writes Hugging Face's tokenizer.json (docs/data.md) atomically. */
int nb_tokenizer_save(const nb_tokenizer *t, const char *path);
/* Writes DIR/tokenizer_config.json, which transformers' AutoTokenizer reads beside tokenizer.json. */
int nb_tokenizer_save_config(const nb_tokenizer *t, const char *dir);
/* SHA-256 (64 hex digits + NUL) of the exact bytes nb_tokenizer_save writes. */
int nb_tokenizer_hash(const nb_tokenizer *t, char hex[65]);
void nb_tokenizer_free(nb_tokenizer *t);

int nb_tokenizer_vocab_size(const nb_tokenizer *t);
int nb_tokenizer_eot(const nb_tokenizer *t);   /* nobubble's own: vocab_size - 1 */
int nb_tokenizer_n_merges(const nb_tokenizer *t);
/* Left and right ids of merge k (0 <= k < n_merges), which made id 256 + k in nobubble's own. */
int nb_tokenizer_merge(const nb_tokenizer *t, int k, uint32_t *left, uint32_t *right);
/* The bytes of one token (a special token's are its text, e.g. "<|endoftext|>"; an id no token
 * has, possible in a Hugging Face file, has none); NULL for an id out of range. */
const char *nb_tokenizer_token_bytes(const nb_tokenizer *t, int id, size_t *len);

/* Encodes len bytes into out, which must have room for len ids (a token is at least one
 * byte); returns the number of ids, or NB_ENCODE_FAILED with the error recorded (nb_last_error)
 * when a Hugging Face pre-tokenizer's regex cannot be matched (PCRE2's limits, e.g. on a very
 * long run of whitespace): nobubble refuses rather than split the text differently from Hugging
 * Face. A special token spelled in the text ("<|endoftext|>") becomes its id, as Hugging Face's
 * tokenizers encode (the leftmost, the longest there; the text between encoded as usual), unless
 * nb_tokenizer_special_as_text made them ordinary text. Uses a per-tokenizer cache: not safe to call
 * on one tokenizer from several threads at once. */
#define NB_ENCODE_FAILED ((size_t)-1)
size_t nb_tokenizer_encode(nb_tokenizer *t, const char *text, size_t len, uint32_t *out);
/* as_text 1: special tokens spelled in the text are encoded as the ordinary text they are (their ids
 * never come out of nb_tokenizer_encode); 0 (the default): as their ids. */
void nb_tokenizer_special_as_text(nb_tokenizer *t, int as_text);
/* Decodes n ids into out (at most cap bytes, not NUL-terminated) and returns the number of
 * bytes the full decoding takes (like snprintf); ids out of range decode to nothing. */
size_t nb_tokenizer_decode(const nb_tokenizer *t, const int *ids, size_t n, char *out, size_t cap);

/* ---------------------------------------------------------------- prepare */
typedef struct {
    const char *const *inputs;  /* text or JSON Lines files, each plain, gzip or zstd (told by its first bytes);
                                   n_inputs == 0: the corpus below */
    int n_inputs;
    const char *format;         /* "text" (documents: paragraphs), "jsonl" (one per line: its text_field) or
                                   NULL / "auto": jsonl for names ending .jsonl or .ndjson (before .gz, .zst) */
    const char *text_field;     /* the JSON Lines member that holds a document's text (NULL: "text") */
    int skip_bad_lines;         /* skip (and count) JSON Lines that are not an object with that string member,
                                   instead of stopping at the first */
    int special_as_text;        /* a special token written in the text ("<|endoftext|>") is its id, as Hugging
                                   Face's tokenizers encode it (0), or ordinary text (1): nb_tokenizer_special_as_text */
    const char *corpus;         /* without inputs: "bible" (bible-kjv, the default), "gcide" (dict-gcide) or
                                   "bible+gcide" (both, the Bible's documents first); NULL: "bible" */
    const char *gcide_path;     /* the GCIDE database (NULL: NB_GCIDE_PATH) */
    const char *out_dir;        /* output folder (must not exist unless force) */
    const char *tokenizer;      /* reuse this tokenizer file instead of training (or NULL) */
    const char *name;           /* shard file prefix (NULL: the corpus, "bible-gcide" for both, or the first
                                   input's stem) */
    int vocab_size;             /* when training (default 4096) */
    double val_fraction;        /* share of documents for validation, 0 <= f < 1 (default 0.05) */
    uint64_t seed;              /* picks the validation documents */
    size_t shard_tokens;        /* max tokens per shard (0: 100,000,000) */
    int force;                  /* replace an existing output folder made by prepare */
    int verbose;                /* progress lines on stderr */
} nb_prepare_opts;

typedef struct {
    size_t train_tokens, val_tokens, train_docs, val_docs, input_bytes;
    int train_shards, val_shards;
    double seconds_tokenizer, seconds_total;
} nb_prepare_stats;

void nb_prepare_defaults(nb_prepare_opts *o);
/* Tokenizes documents into DIR/<name>_train_NNNNNN.bin, DIR/<name>_val_NNNNNN.bin,
 * DIR/tokenizer.json and DIR/manifest.json. Everything is written into a temporary sibling
 * folder that is renamed into place at the end: on failure nothing is left behind. */
int nb_prepare(const nb_prepare_opts *o, nb_prepare_stats *stats);
/* The default corpus as documents (one per chapter) from Debian's bible-kjv package:
 * *text holds them back to back, doc_off[i]..doc_off[i+1] is document i (n_docs + 1 offsets).
 * Free text and doc_off with free(). */
int nb_bible_documents(char **text, size_t **doc_off, size_t *n_docs);
/* Debian's dict-gcide database (dictzip, read with zlib). */
#define NB_GCIDE_PATH "/usr/share/dictd/gcide.dict.dz"
/* GCIDE as documents, one per dictionary entry, markup stripped to plain text (docs/data.md), in
 * the same form as nb_bible_documents. path NULL: NB_GCIDE_PATH. A missing file is an error that
 * names it and the package to install. */
int nb_gcide_documents(const char *path, char **text, size_t **doc_off, size_t *n_docs);
/* The same from the inflated text of such a database (n bytes, not NUL-terminated). */
int nb_gcide_parse(const char *raw, size_t n, char **text, size_t **doc_off, size_t *n_docs);
/* "bible", "gcide" or "bible+gcide"; the error names --corpus and the valid values. */
int nb_corpus_check(const char *corpus);

/* ---------------------------------------------------------------- loader */
/* The shards matching a glob, in sorted name order, read as one token stream of N tokens.
 * Window w is tokens [w*T, w*T + T] (T + 1 tokens, consecutive windows share one token);
 * there are W = (N - 1) / T of them. Each epoch visits a permutation of the windows (the
 * identity for seed 0, else a Fisher-Yates shuffle seeded by seed and the epoch); batch s of
 * the epoch is permutation entries [s*B*n_ranks + rank*B, ... + B), so ranks never overlap;
 * leftover windows at the end of an epoch are skipped. */
typedef struct nb_loader nb_loader;
/* pattern: a glob of shard files; B sequences of T tokens per batch; tokens >= vocab_size are
 * an error naming the shard; seed: deterministic shuffling of the order of windows (seed 0 =
 * sequential); rank/n_ranks: data-parallel split without overlap (use 0/1). */
int nb_loader_open(nb_loader **out, const char *pattern, int B, int T, int vocab_size, uint64_t seed,
                   int rank, int n_ranks);
/* Whether any shard matches pattern: 0, or -1 with "loader: no shard files match 'PATTERN'" and, when
 * the pattern's folder is missing, "(no folder DIR)". Cheap (a glob): nb_train checks its patterns with it
 * before it builds the model. */
int nb_loader_check_pattern(const char *pattern);
/* Next batch: inputs[B*T], targets[B*T] (targets = inputs shifted by one token); wraps to a
 * new epoch at the end. */
int nb_loader_next(nb_loader *l, int *inputs, int *targets);
void nb_loader_reset(nb_loader *l);               /* back to the start (a fixed validation set) */
size_t nb_loader_total_tokens(const nb_loader *l);
size_t nb_loader_batches_per_epoch(const nb_loader *l);
/* Exact position = number of batches returned since position 0 (epoch * batches_per_epoch +
 * batch in epoch); seek restores it for the same pattern, B, T, seed, rank and n_ranks. */
uint64_t nb_loader_position(const nb_loader *l);
int nb_loader_seek(nb_loader *l, uint64_t position);
void nb_loader_free(nb_loader *l);
/* Extra: */
uint64_t nb_loader_epoch(const nb_loader *l);
size_t nb_loader_n_shards(const nb_loader *l);
/* Hash of the shard names and sizes, B, T, seed, rank and n_ranks: store it with a position
 * and compare on resume to detect a changed data set or layout. */
uint64_t nb_loader_fingerprint(const nb_loader *l);
/* The window index (into the token stream) of batch row b (0 <= b < B) of the NEXT batch. */
uint64_t nb_loader_peek_window(const nb_loader *l, int b);

#endif
