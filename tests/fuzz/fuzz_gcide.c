/* Fuzz target: the GCIDE reader (nb_gcide_documents: zlib inflating gzip/dictzip or plain text, then
 * the entry split and markup stripping) on arbitrary bytes, then every document it returns. */
#include <stdlib.h>
#include "fuzz_input.h"
#include "nobubble/data.h"

static volatile size_t sink;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *text;
    size_t *off, n;
    if (nb_gcide_documents(fuzz_write(data, size, "in.dict.dz"), &text, &off, &n)) return 0;
    size_t sum = 0;
    for (size_t i = 0; i < n; i++) sum += (size_t)(unsigned char)text[off[i]] + off[i + 1] - off[i];
    sink = sum;   /* keeps the reads */
    free(text);
    free(off);
    return 0;
}
