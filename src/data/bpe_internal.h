/* Internal to data: the tokenizer's builder and the pieces the two file formats share
 * (bpe.c: the model, nobubble's own format; bpe_hf.c: Hugging Face's tokenizer.json;
 * tokenizer_file.c: which of the two a file is). */
#ifndef NB_DATA_BPE_INTERNAL_H
#define NB_DATA_BPE_INTERNAL_H
#include <stdint.h>
#include "nobubble/data.h"
#include "util/json.h"

/* nobubble's own pre-tokenizer (nb_pretokenize_next) as a regular expression, the form a Hugging
 * Face Split pre-tokenizer takes. Equal on valid UTF-8 except for pieces longer than
 * NB_PRETOKEN_MAX_BYTES, which nobubble cuts and the regex does not. */
#define NB_NATIVE_REGEX                                                                               \
    "'(?:[stmd]|re|ve|ll)(?![A-Za-z\\x{80}-\\x{10FFFF}])|[\\x{09}-\\x{0D} ]+\\z|[\\x{09}-\\x{0D} ]+(?=[\\x{09}-\\x{0D} ])" \
    "|[\\x{09}-\\x{0D}]| (?:[A-Za-z\\x{80}-\\x{10FFFF}]+|[0-9]+|[^A-Za-z0-9\\x{09}-\\x{0D} \\x{80}-\\x{10FFFF}]+)"  \
    "|[A-Za-z\\x{80}-\\x{10FFFF}]+|[0-9]+|[^A-Za-z0-9\\x{09}-\\x{0D} \\x{80}-\\x{10FFFF}]+"

/* GPT-2's pre-tokenizer regex (what Hugging Face's ByteLevel pre-tokenizer uses with use_regex). */
#define NB_GPT2_REGEX "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+"

/* A tokenizer described by its tokens and merges, ids in any order (Hugging Face's layout). */
typedef struct {
    int vocab_size;
    const char *bytes;             /* the tokens' bytes, one after another */
    const size_t *off, *len;       /* per id; len 0: an id no token has */
    const uint8_t *special;        /* per id: 1 for a special token (decoded, never produced by encode) */
    const uint32_t *merges;        /* 3 per merge, in priority order: left id, right id, result id */
    int n_merges;
    int eot;                       /* the end-of-text token: a special token */
    const char *pattern;           /* the pre-tokenizer regex (PCRE2 syntax, UTF-8) */
    int ignore_merges;             /* a pre-token that is a whole token is that token */
} nb_bpe_spec;

/* Builds a tokenizer from spec; errors name path (the file it came from) and the field. */
int nb_bpe_build(nb_tokenizer **out, const nb_bpe_spec *spec, const char *path);

/* What the Hugging Face writer needs to know beyond the public accessors. */
int nb_bpe_is_native(const nb_tokenizer *t);        /* nobubble's layout and pre-tokenizer */
const char *nb_bpe_pattern(const nb_tokenizer *t);  /* NB_NATIVE_REGEX for a native one */
int nb_bpe_ignore_merges(const nb_tokenizer *t);
int nb_bpe_is_special(const nb_tokenizer *t, int id);
uint32_t nb_bpe_merge_result(const nb_tokenizer *t, int k);

/* nobubble's own format (written before Hugging Face's): the parsed file (root) into a tokenizer. */
int nb_bpe_load_native(nb_tokenizer **out, const nb_json *root, const char *path);

/* Hugging Face's tokenizer.json: the parsed file into a tokenizer; a tokenizer into its text. */
int nb_bpe_load_hf(nb_tokenizer **out, const nb_json *root, const char *path);
int nb_bpe_serialize_hf(const nb_tokenizer *t, nb_buf *b);
#endif
