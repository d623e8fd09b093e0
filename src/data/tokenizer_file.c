/* The tokenizer file: Hugging Face's tokenizer.json (written, and read) or nobubble's own earlier
 * format (read, so that data folders and checkpoints made before stay usable). */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "data/bpe_internal.h"
#include "util/error.h"
#include "util/fs.h"
#include "util/hash.h"

int nb_tokenizer_load(nb_tokenizer **out, const char *path) {
    *out = NULL;
    char *text;
    size_t n;
    if (nb_fs_read_file(path, &text, &n, "tokenizer")) return -1;
    nb_json root;
    char what[512];
    snprintf(what, sizeof what, "tokenizer %s", path);
    int r = nb_json_parse(text, n, &root, what);
    free(text);
    if (r) return -1;
    if (root.type == NB_JOBJ && nb_json_get(&root, "format")) r = nb_bpe_load_native(out, &root, path);
    else if (root.type == NB_JOBJ && nb_json_get(&root, "model")) r = nb_bpe_load_hf(out, &root, path);
    else r = nb_fail("tokenizer %s: neither a Hugging Face tokenizer.json (no \"model\") nor a nobubble tokenizer (no "
                     "\"format\")", path);
    nb_json_free(&root);
    return r;
}

int nb_tokenizer_save(const nb_tokenizer *t, const char *path) {
    nb_buf b = {0};
    int r = nb_bpe_serialize_hf(t, &b);
    if (!r) r = nb_fs_write_atomic(path, b.p, b.n);
    nb_buf_free(&b);
    return r;
}

int nb_tokenizer_hash(const nb_tokenizer *t, char hex[65]) {
    nb_buf b = {0};
    int r = nb_bpe_serialize_hf(t, &b);
    if (!r) nb_sha256_hex(b.p, b.n, hex);
    nb_buf_free(&b);
    return r;
}

/* transformers' AutoTokenizer reads tokenizer_config.json to learn the tokenizer's class and its
 * special tokens; without it, a folder whose config.json says "llama" would get Llama's
 * SentencePiece tokenizer class. */
int nb_tokenizer_save_config(const nb_tokenizer *t, const char *dir) {
    size_t n;
    const char *eot = nb_tokenizer_token_bytes(t, nb_tokenizer_eot(t), &n);
    nb_buf b = {0};
    int r = nb_buf_printf(&b, "{\n  \"tokenizer_class\": \"PreTrainedTokenizerFast\",\n  \"bos_token\": ");
    if (!r) r = nb_buf_json_str(&b, eot, n);
    if (!r) r = nb_buf_printf(&b, ",\n  \"eos_token\": ");
    if (!r) r = nb_buf_json_str(&b, eot, n);
    if (!r) r = nb_buf_printf(&b, ",\n  \"unk_token\": null,\n  \"add_bos_token\": false,\n  \"add_eos_token\": false,\n"
                                  "  \"clean_up_tokenization_spaces\": false\n}\n");
    char *path = malloc(strlen(dir) + sizeof "/tokenizer_config.json");
    if (!path && !r) r = nb_fail("out of memory");
    if (!r) {
        sprintf(path, "%s/tokenizer_config.json", dir);
        r = nb_fs_write_atomic(path, b.p, b.n);
    }
    free(path);
    nb_buf_free(&b);
    return r;
}
