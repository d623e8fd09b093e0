/* Fuzz target: prepare's input reader on arbitrary bytes (src/data/input.c): nb_input_read (plain, or
 * gzip or zstd told by the first bytes) and then nb_jsonl_documents, stopping at a bad line and skipping
 * bad lines. Whatever it accepts must be consistent, else abort: the text NUL-terminated, every document
 * non-empty and inside the text, one after another, and documents plus skipped lines no more than the
 * input's lines. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "data/input.h"
#include "fuzz_input.h"

static void violated(const char *what) {
    fprintf(stderr, "fuzz_jsonl: %s\n", what);
    abort();
}

static void documents(const nb_buf *raw, int skip_bad) {
    nb_buf text = {0};
    size_t *offs = NULL, n_docs = 0, bad = 0, lines = 1;
    if (nb_jsonl_documents("in.jsonl", raw->p ? raw->p : "", raw->n, "text", skip_bad, &text, &offs, &n_docs, &bad)) {
        nb_buf_free(&text);
        return;
    }
    for (size_t i = 0; i < raw->n; i++) lines += raw->p[i] == '\n';
    if (n_docs + bad > lines) violated("more documents and skipped lines than lines");
    if (!skip_bad && bad) violated("a bad line counted without skip_bad");
    if (offs[0] != 0) violated("the first document does not start the text");
    for (size_t k = 0; k < n_docs; k++)
        if (offs[k + 1] <= offs[k]) violated("an empty or backward document");
    if (offs[n_docs] != text.n) violated("the documents do not end the text");
    free(offs);
    nb_buf_free(&text);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    nb_buf raw = {0};
    const char *compression = NULL;
    if (nb_input_read(fuzz_write(data, size, "in.jsonl"), "fuzz", (size_t)1 << 24, &raw, &compression)) {
        nb_buf_free(&raw);  /* what was read before the failure is the caller's to free */
        return 0;
    }
    if (!compression || (raw.n && raw.p[raw.n] != 0)) violated("no compression named, or the text is not NUL-terminated");
    if (raw.n > (size_t)1 << 24) violated("more than the bound decompressed");
    documents(&raw, 0);
    documents(&raw, 1);
    nb_buf_free(&raw);
    return 0;
}
