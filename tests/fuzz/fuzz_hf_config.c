/* Fuzz target: a Hugging Face config.json (nb_hf_read_config, and through it nb_config_validate) on
 * arbitrary bytes. A configuration it accepts must survive the round trip through the config.json text
 * nobubble writes (else abort, which the fuzzer reports), and is counted. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "fuzz_input.h"
#include "nobubble/checkpoint.h"

static volatile size_t sink;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fuzz_write(data, size, "config.json");
    nb_config c, back;
    if (nb_hf_read_config(fuzz_dir(), &c)) return 0;
    sink = nb_config_param_count(&c);
    char *text = nb_hf_config_json(&c);
    if (!text) return 0;
    fuzz_write((const uint8_t *)text, strlen(text), "config.json");
    free(text);
    int same = !nb_hf_read_config(fuzz_dir(), &back) && back.vocab_size == c.vocab_size && back.d_model == c.d_model &&
               back.n_layers == c.n_layers && back.n_heads == c.n_heads && back.n_kv_heads == c.n_kv_heads &&
               back.d_ffn == c.d_ffn && back.context == c.context && back.rope_theta == c.rope_theta &&
               back.norm_eps == c.norm_eps && back.tied == c.tied;
    if (!same) {
        fprintf(stderr, "fuzz_hf_config: an accepted configuration does not read back from its own config.json: %s\n",
                nb_last_error());
        abort();
    }
    return 0;
}
