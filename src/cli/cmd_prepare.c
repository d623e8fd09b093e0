/* nobubble prepare: text files (or the bundled default corpus) -> tokenizer + token shards. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cli/commands.h"
#include "nobubble/data.h"
#include "util/decimal.h"

static void prepare_usage(FILE *f) {
    fprintf(f,
            "usage: nobubble prepare [--input FILE... | --corpus bible|gcide|bible+gcide] [--out DIR] [options]\n"
            "\n"
            "Trains (or reuses) a byte-level BPE tokenizer, splits the text into documents, and writes\n"
            "DIR/<name>_train_NNNNNN.bin, DIR/<name>_val_NNNNNN.bin (llm.c token shards),\n"
            "DIR/tokenizer.json and DIR/manifest.json. Without --input it prepares the default corpus,\n"
            "the King James Bible from Debian's bible-kjv package (one document per chapter).\n"
            "\n"
            "  --input FILE...      text or JSON Lines files, each plain, gzip or zstd (told by its first bytes);\n"
            "                       in text, documents are paragraphs separated by blank lines; in JSON\n"
            "                       Lines, each line is an object whose --text-field is one document\n"
            "  --format F           text, jsonl or auto (default: jsonl for names ending .jsonl or .ndjson,\n"
            "                       before .gz or .zst; text otherwise)\n"
            "  --text-field NAME    the JSON Lines member holding a document's text (default text)\n"
            "  --skip-bad-lines     skip and count JSON Lines that are not an object with that string member\n"
            "                       (default: stop at the first, naming its file and line)\n"
            "  --special-tokens M   id (default): a special token written in the text, such as <|endoftext|>,\n"
            "                       is its id, as Hugging Face's tokenizers encode it; text: ordinary text\n"
            "  --corpus NAME        without --input: bible (default), gcide (Debian's dict-gcide, one document\n"
            "                       per dictionary entry) or bible+gcide (both, one tokenizer)\n"
            "  --gcide-file FILE    the GCIDE database (default " NB_GCIDE_PATH ")\n"
            "  --out DIR            output folder (default data/bible, data/gcide or data/bible-gcide without\n"
            "                       --input; required with it)\n"
            "  --vocab N            vocabulary size including the end-of-text token (default 4096, >= 257)\n"
            "  --val-fraction F     share of documents held out for validation, 0 <= F < 1 (default 0.05)\n"
            "  --seed N             picks the validation documents (default 1337)\n"
            "  --tokenizer FILE     reuse this tokenizer.json instead of training one\n"
            "  --name NAME          shard file prefix (default: the corpus, bible-gcide for both, or the first\n"
            "                       input's name)\n"
            "  --shard-tokens N     at most N tokens per shard (default 100000000)\n"
            "  --force              replace DIR if it exists (only a folder made by prepare)\n"
            "  --quiet              no progress lines\n"
            "  -h, --help           this help\n");
}

static int parse_u64(const char *flag, const char *s, unsigned long long *v) {
    char *end;
    errno = 0;
    if (!s || !nb_is_decimal(s, 1) || *s == '-') goto bad;
    *v = strtoull(s, &end, 10);
    if (errno || *end) goto bad;
    return 0;
bad:
    fprintf(stderr, "nobubble prepare: %s needs a non-negative integer, got '%s'\n", flag, s ? s : "");
    return -1;
}

/* The options that take a value (an unknown one at the end of the line is named as unknown, not as
 * missing its value). */
static int takes_value(const char *a) {
    static const char *const with_value[] = {"--corpus", "--format", "--special-tokens", "--text-field", "--gcide-file",
                                             "--out", "--tokenizer", "--name", "--vocab", "--seed", "--shard-tokens",
                                             "--val-fraction"};
    for (size_t k = 0; k < sizeof with_value / sizeof with_value[0]; k++)
        if (!strcmp(a, with_value[k])) return 1;
    return 0;
}

int cmd_prepare(int argc, char **argv) {
    nb_prepare_opts o;
    nb_prepare_defaults(&o);
    const char **inputs = calloc((size_t)argc + 1, sizeof *inputs);
    if (!inputs) return 1;
    int n_inputs = 0, saw_input = 0, rc = 2;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *val = i + 1 < argc ? argv[i + 1] : NULL;
        unsigned long long u;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            prepare_usage(stdout);
            free(inputs);
            return 0;
        } else if (!strcmp(a, "--input")) {
            saw_input = 1;
            while (i + 1 < argc && strncmp(argv[i + 1], "--", 2) != 0) inputs[n_inputs++] = argv[++i];
        } else if (!strcmp(a, "--force")) {
            o.force = 1;
        } else if (!strcmp(a, "--quiet")) {
            o.verbose = 0;
        } else if (!strcmp(a, "--skip-bad-lines")) {
            o.skip_bad_lines = 1;
        } else if (!val) {
            if (takes_value(a)) fprintf(stderr, "nobubble prepare: %s needs a value (see --help)\n", a);
            else fprintf(stderr, "nobubble prepare: unknown option '%s' (see --help)\n", a);
            goto out;
        } else if (!strcmp(a, "--corpus")) {
            o.corpus = argv[++i];
            if (nb_corpus_check(o.corpus)) {
                fprintf(stderr, "nobubble prepare: %s\n", nb_last_error());
                goto out;
            }
        } else if (!strcmp(a, "--format")) {
            o.format = argv[++i];
            if (strcmp(o.format, "text") && strcmp(o.format, "jsonl") && strcmp(o.format, "auto")) {
                fprintf(stderr, "nobubble prepare: --format %s: expected text, jsonl or auto\n", o.format);
                goto out;
            }
        } else if (!strcmp(a, "--special-tokens")) {
            const char *m = argv[++i];
            if (strcmp(m, "id") && strcmp(m, "text")) {
                fprintf(stderr, "nobubble prepare: --special-tokens %s: expected id or text\n", m);
                goto out;
            }
            o.special_as_text = !strcmp(m, "text");
        } else if (!strcmp(a, "--text-field")) {
            o.text_field = argv[++i];
            if (!*o.text_field) {
                fprintf(stderr, "nobubble prepare: --text-field: expected a member's name, not an empty one\n");
                goto out;
            }
        } else if (!strcmp(a, "--gcide-file")) {
            o.gcide_path = argv[++i];
        } else if (!strcmp(a, "--out")) {
            o.out_dir = argv[++i];
        } else if (!strcmp(a, "--tokenizer")) {
            o.tokenizer = argv[++i];
        } else if (!strcmp(a, "--name")) {
            o.name = argv[++i];
        } else if (!strcmp(a, "--vocab")) {
            if (parse_u64(a, argv[++i], &u)) goto out;
            if (u > NB_TOKENIZER_MAX_VOCAB) {
                fprintf(stderr, "nobubble prepare: --vocab %llu is too large (at most %d)\n", u, NB_TOKENIZER_MAX_VOCAB);
                goto out;
            }
            o.vocab_size = (int)u;
        } else if (!strcmp(a, "--seed")) {
            if (parse_u64(a, argv[++i], &u)) goto out;
            o.seed = u;
        } else if (!strcmp(a, "--shard-tokens")) {
            if (parse_u64(a, argv[++i], &u)) goto out;
            if (u == 0) { fprintf(stderr, "nobubble prepare: --shard-tokens must be positive\n"); goto out; }
            o.shard_tokens = (size_t)u;
        } else if (!strcmp(a, "--val-fraction")) {
            char *end;
            o.val_fraction = strtod(argv[++i], &end);
            if (!nb_is_decimal(argv[i], 0) || *end || end == argv[i]) {
                fprintf(stderr, "nobubble prepare: --val-fraction needs a decimal number, got '%s'\n", argv[i]);
                goto out;
            }
        } else {
            fprintf(stderr, "nobubble prepare: unknown option '%s' (see --help)\n", a);
            goto out;
        }
    }
    if (saw_input && n_inputs == 0) {
        fprintf(stderr, "nobubble prepare: --input needs at least one FILE\n");
        goto out;
    }
    if (n_inputs && o.corpus) {
        fprintf(stderr, "nobubble prepare: --corpus %s and --input: give one of them\n", o.corpus);
        goto out;
    }
    if (o.gcide_path && (n_inputs || !o.corpus || !strstr(o.corpus, "gcide"))) {
        fprintf(stderr, "nobubble prepare: --gcide-file %s goes with --corpus gcide or bible+gcide (it reads nothing "
                "here)\n", o.gcide_path);
        goto out;
    }
    if (!o.out_dir) {
        if (n_inputs) {
            fprintf(stderr, "nobubble prepare: --out DIR is required with --input\n");
            goto out;
        }
        o.out_dir = !o.corpus || !strcmp(o.corpus, "bible") ? "data/bible"
                    : !strcmp(o.corpus, "gcide")             ? "data/gcide"
                                                             : "data/bible-gcide";
    }
    o.inputs = inputs;
    o.n_inputs = n_inputs;
    if (o.verbose)
        fprintf(stderr, "prepare: %s%s -> %s\n", n_inputs ? "input files" : "corpus ", n_inputs ? "" : o.corpus ? o.corpus : "bible",
                o.out_dir);
    nb_prepare_stats st;
    if (nb_prepare(&o, &st)) {
        fprintf(stderr, "nobubble prepare: %s\n", nb_last_error());
        rc = 1;
        goto out;
    }
    printf("prepared %s: %.2f MB of text; train %zu tokens in %d shard(s) (%zu documents), val %zu tokens in %d "
           "shard(s) (%zu documents); %.2fs (tokenizer %.2fs)\n",
           o.out_dir, st.input_bytes / 1e6, st.train_tokens, st.train_shards, st.train_docs, st.val_tokens,
           st.val_shards, st.val_docs, st.seconds_total, st.seconds_tokenizer);
    rc = 0;
out:
    free(inputs);
    return rc;
}
