/* Internal to data: the text that prepare reads. A file's bytes, decompressed when they are gzip
 * (also dictzip, GCIDE's format) or zstd, told by their first bytes rather than by the name; and the
 * documents of a JSON Lines file. */
#ifndef NB_DATA_INPUT_H
#define NB_DATA_INPUT_H
#include <stddef.h>
#include "util/json.h"

/* The file's bytes into out (appended; NUL-terminated), decompressed; *compression (may be NULL)
 * gets "gzip", "zstd" or "none". max_bytes > 0 bounds what the file may decompress to. Errors name
 * `what` and the path: a file that cannot be read, a corrupt or truncated compressed stream; out->n is
 * then as it was, and out's memory still the caller's to free. */
int nb_input_read(const char *path, const char *what, size_t max_bytes, nb_buf *out, const char **compression);

/* "jsonl" when the name, after a .gz, .zst or .zstd suffix, ends in .jsonl or .ndjson; else "text". */
const char *nb_input_format_of(const char *path);

/* The documents of JSON Lines text (data, n bytes; path names it in errors): one JSON object per line,
 * the document being its string member `field`. Blank lines are skipped, and so are documents whose
 * text is empty. A line that is not a JSON object, lacks the member or holds something else than a
 * string is an error naming the file, the line and what was wrong; with skip_bad it is skipped and
 * counted in *bad instead. The documents' text goes into text (appended, one after another), and
 * (*offs)[k] .. (*offs)[k + 1] delimits document k of *n_docs ((*offs) has n_docs + 1 entries; free it). */
int nb_jsonl_documents(const char *path, const char *data, size_t n, const char *field, int skip_bad, nb_buf *text,
                       size_t **offs, size_t *n_docs, size_t *bad);
#endif
