/* nobubble tokenize: a tokenizer's ids of a text, and the text of ids, for checks and scripts. The
 * text comes from --text or standard input (all of it, as bytes); ids are printed on one line, separated
 * by spaces. With --decode, standard input (or --text) holds ids separated by whitespace and their text
 * is written out, byte for byte. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cli/args.h"
#include "cli/commands.h"
#include "nobubble/data.h"
#include "util/error.h"
#include "util/json.h"

static const char usage[] =
    "usage: nobubble tokenize (--data DIR | --tokenizer FILE) [--text TEXT] [--decode] [--special-tokens id|text]\n"
    "Prints the ids of a text (--text, else all of standard input) on one line, separated by spaces; with\n"
    "--decode reads ids (separated by whitespace) and writes their text. The tokenizer is DIR/tokenizer.json\n"
    "(a folder made by prepare, or a Hugging Face folder) or FILE.";

/* All of standard input. */
static int read_stdin(nb_buf *b) {
    char chunk[65536];
    size_t got;
    while ((got = fread(chunk, 1, sizeof chunk, stdin)) > 0)
        if (nb_buf_put(b, chunk, got)) return -1;
    if (ferror(stdin)) return nb_fail("standard input: %s", strerror(errno));
    return nb_buf_reserve(b, 1);
}

static int encode(nb_tokenizer *t, const char *text, size_t n) {
    uint32_t *ids = malloc((n + 1) * sizeof *ids);
    if (!ids) return nb_fail("out of memory for %zu bytes' ids", n);
    const size_t m = nb_tokenizer_encode(t, text, n, ids);
    if (m == NB_ENCODE_FAILED) {
        free(ids);
        return -1;
    }
    for (size_t i = 0; i < m; i++) printf(i ? " %u" : "%u", ids[i]);
    printf("\n");
    free(ids);
    return 0;
}

/* Whitespace-separated ids, each a decimal from 0 to vocab - 1. */
static int decode(const nb_tokenizer *t, const char *text) {
    const int vocab = nb_tokenizer_vocab_size(t);
    size_t n = 0, cap = 1024;
    int *ids = malloc(cap * sizeof *ids);
    const char *p = text;
    int rc = ids ? 0 : nb_fail("out of memory");
    while (!rc) {
        while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r') p++;
        if (!*p) break;
        char *end;
        errno = 0;
        const long v = strtol(p, &end, 10);
        if (end == p || errno || v < 0 || v >= vocab || (*end && !strchr(" \t\r\n", *end))) {
            const int len = (int)strcspn(p, " \t\r\n");
            rc = nb_fail("id %zu, '%.*s': expected a whole number from 0 to %d (the tokenizer's %d ids)", n + 1,
                         len > 40 ? 40 : len, p, vocab - 1, vocab);
            break;
        }
        if (n == cap) {
            int *g = realloc(ids, (cap *= 2) * sizeof *ids);
            if (!g) { rc = nb_fail("out of memory"); break; }
            ids = g;
        }
        ids[n++] = (int)v;
        p = end;
    }
    if (!rc) {
        const size_t bytes = nb_tokenizer_decode(t, ids, n, NULL, 0);
        char *out = malloc(bytes + 1);
        if (!out) rc = nb_fail("out of memory");
        else {
            nb_tokenizer_decode(t, ids, n, out, bytes);
            fwrite(out, 1, bytes, stdout);
            free(out);
        }
    }
    free(ids);
    return rc;
}

int cmd_tokenize(int argc, char **argv) {
    const char *data = NULL, *file = NULL, *text = NULL, *special = "id";
    int as_decode = 0;
    const cli_option opts[] = {
        {"--data", OPT_STR, &data, "DIR    a data folder (or Hugging Face folder) holding tokenizer.json"},
        {"--tokenizer", OPT_STR, &file, "FILE   a tokenizer.json"},
        {"--text", OPT_STR, &text, "TEXT   the input (default: all of standard input)"},
        {"--decode", OPT_FLAG, &as_decode, "       read ids, write their text"},
        {"--special-tokens", OPT_STR, &special, "M      id: a special token written in the text is its id (default, as "
                                                 "Hugging Face); text: ordinary text"},
    };
    const int n_opts = (int)(sizeof opts / sizeof opts[0]);
    int rc = cli_parse(usage, argc, argv, opts, n_opts);
    if (rc) return rc > 0 ? 0 : 2;
    if (!data == !file) {
        fprintf(stderr, "nobubble tokenize: give --data DIR or --tokenizer FILE (one of them)\n");
        return 2;
    }
    if (strcmp(special, "id") && strcmp(special, "text")) {
        fprintf(stderr, "nobubble tokenize: --special-tokens %s: expected id or text\n", special);
        return 2;
    }
    char path[4200];
    snprintf(path, sizeof path, "%s%s", data ? data : file, data ? "/tokenizer.json" : "");
    nb_tokenizer *t = NULL;
    if (nb_tokenizer_load(&t, path)) {
        fprintf(stderr, "nobubble tokenize: %s %s: %s\n", data ? "--data" : "--tokenizer", data ? data : file,
                nb_last_error());
        return 1;
    }
    nb_tokenizer_special_as_text(t, !strcmp(special, "text"));
    nb_buf in = {0};
    rc = text ? 0 : read_stdin(&in);
    const char *src = text ? text : in.p ? in.p : "";
    const size_t n = text ? strlen(text) : in.n;
    if (!rc) rc = as_decode ? decode(t, src) : encode(t, src, n);
    if (rc) fprintf(stderr, "nobubble tokenize: %s\n", nb_last_error());
    nb_buf_free(&in);
    nb_tokenizer_free(t);
    return rc ? 1 : 0;
}
