/* Fuzz target: the tokenizer file (nb_tokenizer_load: nobubble's earlier format and Hugging Face's
 * tokenizer.json) on arbitrary bytes. A tokenizer it accepts must keep the properties every real one
 * has (else abort, which the fuzzer reports): for nobubble's own, no token longer than a pre-token (so
 * that loading stays linear in the file; a Hugging Face file spells out every token's bytes, so it is
 * linear anyway), and for every one decode(encode(text)) == text for a text holding every byte, no
 * special token among the ids; it is also saved to text and hashed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "fuzz_input.h"
#include "nobubble/data.h"
#include "data/bpe_internal.h"

static void expect(int ok, const char *what) {
    if (ok) return;
    fprintf(stderr, "fuzz_tokenizer: %s\n", what);
    abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    nb_tokenizer *t;
    if (nb_tokenizer_load(&t, fuzz_write(data, size, "tokenizer.json"))) return 0;
    for (int id = 0; id < nb_tokenizer_vocab_size(t) - 1 && nb_bpe_is_native(t); id++) {
        size_t len = 0;
        expect(nb_tokenizer_token_bytes(t, id, &len) && len >= 1 && len <= NB_PRETOKEN_MAX_BYTES,
               "a token longer than a pre-token");
    }
    char text[256 + 60];
    for (int i = 0; i < 256; i++) text[i] = (char)i;
    memcpy(text + 256, "In the beginning God created the heaven and the earth.  \n\n ", 60);
    uint32_t ids[sizeof text];
    int as_int[sizeof text];
    size_t n = nb_tokenizer_encode(t, text, sizeof text, ids);
    if (n == NB_ENCODE_FAILED) {   /* a regex past PCRE2's limits: refused with a message, which is fine */
        nb_tokenizer_free(t);
        return 0;
    }
    for (size_t i = 0; i < n; i++) {
        as_int[i] = (int)ids[i];
        expect(ids[i] < (uint32_t)nb_tokenizer_vocab_size(t) && !nb_bpe_is_special(t, (int)ids[i]),
               "encode made an id out of range or a special token");
    }
    char back[sizeof text];
    size_t len = nb_tokenizer_decode(t, as_int, n, back, sizeof back);
    expect(len == sizeof text && !memcmp(back, text, sizeof text), "decode(encode(text)) differs from text");
    char hex[65];
    nb_tokenizer_hash(t, hex);
    nb_buf saved = {0};
    nb_bpe_serialize_hf(t, &saved);
    nb_buf_free(&saved);
    nb_tokenizer_free(t);
    return 0;
}
