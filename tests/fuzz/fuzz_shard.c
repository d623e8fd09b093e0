/* Fuzz target: the llm.c token shard reader (nb_shard_open) on arbitrary bytes, then every token of a
 * shard it accepts. */
#include "fuzz_input.h"
#include "nobubble/data.h"

static volatile uint32_t sink;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    nb_shard s;
    if (nb_shard_open(fuzz_write(data, size, "in.bin"), &s)) return 0;
    uint32_t max = nb_shard_max_token(&s), sum = 0;
    for (size_t i = 0; i < s.n_tokens; i++) sum += nb_shard_token(&s, i);
    nb_shard_close(&s);
    sink = max + sum;   /* keeps the reads */
    return 0;
}
