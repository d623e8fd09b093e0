/* Hugging Face tokenizer.json: nobubble's encoder against the ids of Hugging Face's tokenizers
 * package (tests/fixtures/tokenizers/, made by tools/reference/hf_tokenizers.py) for GPT-2's and
 * Llama 3's pre-tokenizers, special tokens written in the text included (as ids, and as plain text);
 * hand-computed files for what the fixtures cannot show (ignore_merges, the string form of merges); refusals naming the file and the field; nobubble's regex form of its
 * own pre-tokenizer against the hand-written one; save and load keeping the ids. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "check.h"
#include "nobubble/data.h"
#include "data/bpe_internal.h"
#include "data/regex.h"

static char dir[256];

static int hex_value(char c) {
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* encode(text) == want and decode(want) == text */
static int encodes_to(nb_tokenizer *t, const char *text, size_t n, const uint32_t *want, size_t n_want) {
    uint32_t *ids = malloc((n + 1) * sizeof *ids);
    int *iv = malloc((n_want + 1) * sizeof *iv);
    char *back = malloc(n + 1);
    size_t m = nb_tokenizer_encode(t, text, n, ids);
    int ok = m == n_want && (m == 0 || !memcmp(ids, want, m * sizeof *ids));
    for (size_t i = 0; i < n_want; i++) iv[i] = (int)want[i];
    ok &= nb_tokenizer_decode(t, iv, n_want, back, n + 1) == n && (n == 0 || !memcmp(back, text, n));
    free(ids); free(iv); free(back);
    return ok;
}

/* Every line of a .ids fixture: HEX<TAB>ids; returns the number of lines checked. */
static int check_fixture(nb_tokenizer *t, const char *ids_path, const char *name) {
    FILE *f = fopen(ids_path, "r");
    CHECK(f != NULL, "%s: cannot open %s", name, ids_path);
    if (!f) return 0;
    char line[8192];
    int lines = 0;
    while (fgets(line, sizeof line, f)) {
        char *tab = strchr(line, '\t');
        if (!tab) continue;
        char text[4096];
        size_t n = 0;
        for (char *p = line; p + 1 < tab; p += 2) text[n++] = (char)(hex_value(p[0]) * 16 + hex_value(p[1]));
        uint32_t want[4096];
        size_t nw = 0;
        for (char *p = tab + 1, *end; nw < 4096; p = end) {
            unsigned long v = strtoul(p, &end, 10);
            if (end == p) break;
            want[nw++] = (uint32_t)v;
        }
        CHECK(encodes_to(t, text, n, want, nw), "%s: line %d (\"%.*s\"): encode differs from tokenizers' ids or decode "
              "from the text", name, lines + 1, (int)n, text);
        lines++;
    }
    fclose(f);
    return lines;
}

static void test_fixtures(void) {
    static const struct { const char *name; int vocab, eot; } kinds[] = {
        {"gpt2", 600, 0},     /* <|endoftext|> */
        {"llama3", 600, 1},   /* <|end_of_text|> (id 0 is <|begin_of_text|>) */
    };
    for (int k = 0; k < 2; k++) {
        char path[256], ids[256], saved[512];
        snprintf(path, sizeof path, "tests/fixtures/tokenizers/%s.json", kinds[k].name);
        snprintf(ids, sizeof ids, "tests/fixtures/tokenizers/%s.ids", kinds[k].name);
        nb_tokenizer *t = NULL;
        int r = nb_tokenizer_load(&t, path);
        CHECK(r == 0, "load %s: %s", path, r ? nb_last_error() : "");
        if (!t) continue;
        CHECK(nb_tokenizer_vocab_size(t) == kinds[k].vocab && nb_tokenizer_eot(t) == kinds[k].eot,
              "%s: %d tokens (want %d), end-of-text %d (want %d)", kinds[k].name, nb_tokenizer_vocab_size(t),
              kinds[k].vocab, nb_tokenizer_eot(t), kinds[k].eot);
        CHECK(check_fixture(t, ids, kinds[k].name) == 22, "%s: 22 test strings", kinds[k].name);
        /* special tokens spelled in the text: their ids as tokenizers' encode gives them, then (as text) the
         * ids of tokenizers' encode_special_tokens */
        char special[256];
        snprintf(special, sizeof special, "tests/fixtures/tokenizers/%s_special.ids", kinds[k].name);
        CHECK(check_fixture(t, special, kinds[k].name) == 14, "%s: 14 strings with special tokens", kinds[k].name);
        nb_tokenizer_special_as_text(t, 1);
        snprintf(special, sizeof special, "tests/fixtures/tokenizers/%s_special_text.ids", kinds[k].name);
        CHECK(check_fixture(t, special, kinds[k].name) == 14, "%s: 14 strings, special tokens as text", kinds[k].name);
        nb_tokenizer_special_as_text(t, 0);
        /* nobubble's own writing of the same tokenizer reads back with the same ids */
        snprintf(saved, sizeof saved, "%s/%s.json", dir, kinds[k].name);
        nb_tokenizer *u = NULL;
        r = nb_tokenizer_save(t, saved) || nb_tokenizer_load(&u, saved);
        CHECK(r == 0, "%s: save and load: %s", kinds[k].name, r ? nb_last_error() : "");
        if (u) CHECK(check_fixture(u, ids, kinds[k].name) == 22, "%s: saved and loaded again", kinds[k].name);
        nb_tokenizer_free(u);
        nb_tokenizer_free(t);
    }
}

static nb_tokenizer *load_text(const char *json, const char *name) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    fputs(json, f);
    fclose(f);
    nb_tokenizer *t = NULL;
    nb_tokenizer_load(&t, path);
    return t;
}

/* A hand-made file (free() it): the 256 byte tokens at ids 0..255 (GPT-2's characters), then extra tokens,
 * merges, added tokens and options as given. */
static char *hand_file(const char *extra_vocab, const char *merges, const char *added, const char *model_opts,
                       const char *pre) {
    static char buf[16384];
    int n = snprintf(buf, sizeof buf, "{\"version\": \"1.0\", \"added_tokens\": [%s], \"normalizer\": null, "
                     "\"pre_tokenizer\": %s, \"decoder\": {\"type\": \"ByteLevel\"}, "
                     "\"model\": {\"type\": \"BPE\", %s \"vocab\": {", added, pre, model_opts);
    unsigned next = 256;
    for (int b = 0; b < 256; b++) {
        int printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
        unsigned cp = printable ? (unsigned)b : next++;
        if (cp == '"' || cp == '\\') n += snprintf(buf + n, sizeof buf - (size_t)n, "%s\"\\%c\": %d", b ? ", " : "", (char)cp, b);
        else if (cp < 0x80) n += snprintf(buf + n, sizeof buf - (size_t)n, "%s\"%c\": %d", b ? ", " : "", (char)cp, b);
        else n += snprintf(buf + n, sizeof buf - (size_t)n, "%s\"%c%c\": %d", b ? ", " : "", (char)(0xC0 | cp >> 6),
                           (char)(0x80 | (cp & 0x3F)), b);
    }
    snprintf(buf + n, sizeof buf - (size_t)n, "%s%s}, \"merges\": [%s]}}", *extra_vocab ? ", " : "", extra_vocab, merges);
    return strdup(buf);
}

#define GPT2_PRE "{\"type\": \"ByteLevel\", \"add_prefix_space\": false, \"use_regex\": true}"
#define EOT_ADDED "{\"id\": 300, \"content\": \"<|endoftext|>\", \"special\": true}"

/* Worked by hand: merges "b c" (rank 0) then "ab c" (rank 1, ab from "a b", rank 2).
 * "abc": b c -> [a, bc]; no merge (a, bc) -> ids [97, 257]. With ignore_merges the whole word is
 * the token "abc" (258). "abcab": [a, bc, a, b] -> a b -> [97, 257, 256]. The merges are written
 * as strings ("b c", older files) in one file and as lists in the other. */
static void test_ignore_merges(void) {
    const char *vocab = "\"ab\": 256, \"bc\": 257, \"abc\": 258";
    static const char *merges[2] = {"\"b c\", \"ab c\", \"a b\"", "[\"b\", \"c\"], [\"ab\", \"c\"], [\"a\", \"b\"]"};
    for (int form = 0; form < 2; form++)
        for (int ignore = 0; ignore < 2; ignore++) {
            char *json = hand_file(vocab, merges[form], EOT_ADDED, ignore ? "\"ignore_merges\": true," : "", GPT2_PRE);
            nb_tokenizer *t = load_text(json, "im.json");
            free(json);
            CHECK(t != NULL, "ignore_merges file: %s", nb_last_error());
            if (!t) continue;
            static const uint32_t plain[] = {97, 257}, whole[] = {258}, mixed[] = {97, 257, 256};
            CHECK(encodes_to(t, "abc", 3, ignore ? whole : plain, ignore ? 1 : 2), "abc with ignore_merges %d", ignore);
            CHECK(encodes_to(t, "abcab", 5, mixed, 3), "abcab with ignore_merges %d", ignore);
            CHECK(nb_tokenizer_vocab_size(t) == 301 && nb_tokenizer_eot(t) == 300, "sizes");
            nb_tokenizer_free(t);
        }
}

/* Llama 3's post_processor, a Sequence of ByteLevel and TemplateProcessing, is read (and not applied). */
static void test_llama3_post_processor(void) {
    char *json = hand_file("", "", EOT_ADDED, "", GPT2_PRE);
    const char *tail = "\"decoder\": {\"type\": \"ByteLevel\"},";
    char *at = strstr(json, tail), *full = malloc(strlen(json) + 256);
    if (!at || !full) { CHECK(0, "hand file"); free(json); free(full); return; }
    sprintf(full, "%.*s\"post_processor\": {\"type\": \"Sequence\", \"processors\": [{\"type\": \"ByteLevel\"}, "
            "{\"type\": \"TemplateProcessing\", \"single\": []}]}, %s", (int)(at - json), json, at);
    nb_tokenizer *t = load_text(full, "post.json");
    static const uint32_t want[] = {'h', 'i'};
    CHECK(t && encodes_to(t, "hi", 2, want, 2), "a Sequence post-processor: %s", t ? "" : nb_last_error());
    nb_tokenizer_free(t);
    free(json);
    free(full);
}

static void test_refusals(void) {
    const char *split = "{\"type\": \"Sequence\", \"pretokenizers\": [{\"type\": \"Split\", \"pattern\": {\"Regex\": \"a*\"}, "
                        "\"behavior\": \"Isolated\", \"invert\": false}, {\"type\": \"ByteLevel\", \"use_regex\": false}]}";
    const char *split_str = "{\"type\": \"Sequence\", \"pretokenizers\": [{\"type\": \"Split\", \"pattern\": {\"String\": \" \"}, "
                            "\"behavior\": \"Isolated\", \"invert\": false}, {\"type\": \"ByteLevel\", \"use_regex\": false}]}";
    const char *removed = "{\"type\": \"Sequence\", \"pretokenizers\": [{\"type\": \"Split\", \"pattern\": {\"Regex\": \" \"}, "
                          "\"behavior\": \"Removed\", \"invert\": false}, {\"type\": \"ByteLevel\", \"use_regex\": false}]}";
    struct { const char *json, *want; } cases[] = {
        {hand_file("", "", EOT_ADDED, "", "{\"type\": \"ByteLevel\", \"add_prefix_space\": true}"),
         "pre_tokenizer.add_prefix_space must be false"},
        {hand_file("", "", EOT_ADDED, "", "{\"type\": \"Whitespace\"}"), "pre_tokenizer of type Whitespace is not supported"},
        {hand_file("", "", EOT_ADDED, "", "null"), "pre_tokenizer of type null"},
        {hand_file("", "", EOT_ADDED, "", split), "can match the empty string"},
        {hand_file("", "", EOT_ADDED, "", split_str), "pretokenizers[0].pattern must be {\"Regex\""},
        {hand_file("", "", EOT_ADDED, "", removed), "pretokenizers[0].behavior must be \"Isolated\""},
        {hand_file("", "", EOT_ADDED, "\"byte_fallback\": true,", GPT2_PRE), "model.byte_fallback must be false"},
        {hand_file("", "", EOT_ADDED, "\"continuing_subword_prefix\": \"##\",", GPT2_PRE),
         "model.continuing_subword_prefix must be null"},
        {hand_file("", "", EOT_ADDED, "\"dropout\": 0.1,", GPT2_PRE), "model.dropout must be null"},
        {hand_file("", "", "", "", GPT2_PRE), "added_tokens has no end-of-text token"},
        {hand_file("", "", "{\"id\": 300, \"content\": \"<|endoftext|>\", \"special\": false}", "", GPT2_PRE),
         "added_tokens[0] (\"<|endoftext|>\") is not special"},
        {hand_file("", "", "{\"id\": 5, \"content\": \"<|endoftext|>\", \"special\": true}", "", GPT2_PRE),
         "has the id 5 of another token"},
        {hand_file("", "", "{\"id\": 300, \"content\": \"<|endoftext|>\", \"special\": true, \"lstrip\": true}", "",
                   GPT2_PRE),
         "(\"<|endoftext|>\") has \"lstrip\": true, which nobubble does not support"},
        {hand_file("", "", "{\"id\": 300, \"content\": \"<|endoftext|>\", \"special\": true, \"single_word\": true}",
                   "", GPT2_PRE),
         "has \"single_word\": true"},
        {hand_file("", "\"a b\"", EOT_ADDED, "", GPT2_PRE), "model.merges[0] (\"a\" + \"b\"): the joined token is not"},
        {hand_file("", "\"a b c\"", EOT_ADDED, "", GPT2_PRE), "model.merges[0] (\"a b c\") must be two tokens"},
        {hand_file("\"ab\": 256, \"AB\": 256", "", EOT_ADDED, "", GPT2_PRE), "model.vocab gives the id 256 to both"},
        {hand_file("\"a b\": 256", "", EOT_ADDED, "", GPT2_PRE), "model.vocab[\"a b\"] is not a byte-level token"},
        {hand_file("\"far\": 16000000", "", EOT_ADDED, "", GPT2_PRE), "ids go up to 16000000 but the file has only 258 tokens"},
        {"{\"model\": {\"type\": \"Unigram\", \"vocab\": []}}", "model.type Unigram is not supported"},
        {"{\"model\": {\"type\": \"WordPiece\", \"vocab\": {}}}", "model.type WordPiece is not supported"},
        {"{\"normalizer\": {\"type\": \"NFC\"}, \"pre_tokenizer\": " GPT2_PRE ", \"model\": {\"type\": \"BPE\", "
         "\"vocab\": {}, \"merges\": []}}", "normalizer NFC is not supported"},
        {"{\"pre_tokenizer\": " GPT2_PRE ", \"decoder\": {\"type\": \"Metaspace\"}, \"model\": {\"type\": \"BPE\", "
         "\"vocab\": {}, \"merges\": []}}", "decoder Metaspace is not supported"},
        {"{\"pre_tokenizer\": " GPT2_PRE ", \"added_tokens\": [" EOT_ADDED "], \"model\": {\"type\": \"BPE\", "
         "\"vocab\": {\"a\": 0}, \"merges\": []}}", "no token for the byte 0x00"},
        {"{\"pre_tokenizer\": " GPT2_PRE ", \"post_processor\": {\"type\": \"Sequence\", \"processors\": [{\"type\": "
         "\"ByteLevel\"}, {\"type\": \"BertProcessing\"}]}, \"model\": {\"type\": \"BPE\", \"vocab\": {}, \"merges\": []}}",
         "post_processor BertProcessing is not supported"},
        {"{\"hello\": 1}", "neither a Hugging Face tokenizer.json"},
    };
    int n_hand = 19;   /* the first cases come from hand_file */
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        nb_tokenizer *t = load_text(cases[i].json, "refuse.json");
        CHECK(!t && strstr(nb_last_error(), cases[i].want) && strstr(nb_last_error(), "refuse.json"),
              "case %zu must be refused with '%s': %s", i, cases[i].want, t ? "loaded" : nb_last_error());
        nb_tokenizer_free(t);
        if ((int)i < n_hand) free((char *)cases[i].json);
    }
}

/* NB_NATIVE_REGEX (what a Hugging Face loader runs for nobubble's tokenizers) cuts text into the
 * same pieces as the hand-written pre-tokenizer, on valid UTF-8 with pieces under the cap. */
static void check_same_pieces(nb_regex *re, const char *s, size_t n, const char *what) {
    size_t pos = 0, pieces = 0;
    int same = 1;
    while (pos < n && same) {
        size_t a = nb_pretokenize_next(s, n, pos), b = nb_regex_next(re, s, n, pos);
        if (a != b) {
            same = 0;
            CHECK(0, "%s: at byte %zu the pre-tokenizer ends the piece at %zu, the regex at %zu (\"%.*s\")", what, pos,
                  a, b, (int)(a > b ? a - pos : b - pos), s + pos);
        }
        pos = a;
        pieces++;
    }
    if (same) CHECK(1, "%s: %zu pieces alike", what, pieces);
}

/* A regex that PCRE2 cannot finish within its match limit (nested alternatives on a long run of "a"
 * with no "c": exponential backtracking) is refused with the error named, never split some other way
 * (the old code made the rest of the text one piece). Short text with the same file still encodes. */
static void test_regex_limit(void) {
    const char *pre = "{\"type\": \"Sequence\", \"pretokenizers\": [{\"type\": \"Split\", \"pattern\": {\"Regex\": "
                      "\"(a|aa)+c|[^a]|a\"}, \"behavior\": \"Isolated\", \"invert\": false}, {\"type\": \"ByteLevel\", "
                      "\"use_regex\": false}]}";
    char *json = hand_file("", "", EOT_ADDED, "", pre);
    nb_tokenizer *t = load_text(json, "limit.json");
    free(json);
    CHECK(t != NULL, "a Split regex tokenizer: %s", t ? "" : nb_last_error());
    if (!t) return;
    static const uint32_t short_ids[] = {'a', 'a', 'b'};
    CHECK(encodes_to(t, "aab", 3, short_ids, 3), "a short text encodes");
    char text[64];
    memset(text, 'a', sizeof text);
    uint32_t ids[sizeof text];
    size_t n = nb_tokenizer_encode(t, text, sizeof text, ids);
    CHECK(n == NB_ENCODE_FAILED, "64 a's: expected a refusal, got %zu ids", n);
    CHECK(strstr(nb_last_error(), "pre-tokenizer's regex failed at byte 0 of a 64-byte text") &&
              strstr(nb_last_error(), "limit"), "the error names the regex, the place and PCRE2's limit: %s", nb_last_error());
    nb_tokenizer_free(t);
}

static void test_native_regex(void) {
    nb_regex *re = NULL;
    CHECK(nb_regex_compile(&re, NB_NATIVE_REGEX, "native") == 0, "compile: %s", nb_last_error());
    if (!re) return;
    const char *samples[] = {
        "Hello world, it's 2024!\n\n  foo'said don't  \t",
        "'s 't 're 've 'll 'd 'm 'x 'sa 'S \"quoted\" 'tis rock'n'roll",
        " caf\xc3\xa9s! na\xc3\xafve \xce\x95\xce\xbd \xe6\x97\xa5\xe6\x9c\xac 12\xe5\xb9\xb4 \xf0\x9f\x98\x80!",
        "a  b   c\t\td\n\ne\r\n f \x0b g \x0c h   ",
        "x1y2z3 abc123 !!! ?? ... (paren) [b] {c} 3.14 -5 +6",
        " \n", "\n ", "  ", "a", "'", " '", "''", "end ",
    };
    for (size_t i = 0; i < sizeof samples / sizeof samples[0]; i++)
        check_same_pieces(re, samples[i], strlen(samples[i]), samples[i]);
    char *text;
    size_t *off, nd;
    if (nb_bible_documents(&text, &off, &nd) == 0) {
        check_same_pieces(re, text, off[nd], "the Bible");
        free(text);
        free(off);
    } else {
        printf("SKIP the Bible: %s\n", nb_last_error());
    }
    nb_regex_free(re);
}

/* nobubble's own tokenizer: saved as Hugging Face's file, read back as nobubble's own (the cut of
 * pieces at NB_PRETOKEN_MAX_BYTES shows it: a regex would not cut), and the old format still loads. */
static void test_native_round_trip(void) {
    char text[1200];
    memset(text, 'a', 600);
    memcpy(text + 600, " ab ab ab ab", 13);
    const char *docs[1] = {text};
    size_t lens[1] = {strlen(text)};
    nb_tokenizer *t = NULL, *u = NULL;
    CHECK(nb_tokenizer_train(&t, docs, lens, 1, 266, 0) == 0, "train: %s", nb_last_error());
    if (!t) return;
    char path[512], h1[65], h2[65];
    snprintf(path, sizeof path, "%s/native.json", dir);
    CHECK(nb_tokenizer_save(t, path) == 0 && nb_tokenizer_load(&u, path) == 0, "save/load: %s", nb_last_error());
    if (u) {
        nb_tokenizer_hash(t, h1);
        nb_tokenizer_hash(u, h2);
        uint32_t a[700], b[700];
        size_t na = nb_tokenizer_encode(t, text, 600, a), nb = nb_tokenizer_encode(u, text, 600, b);
        /* 600 a's: pieces of 256, 256 and 88 bytes, each merged separately */
        CHECK(!strcmp(h1, h2) && na == nb && !memcmp(a, b, na * sizeof *a), "load(save(t)) encodes as t");
        CHECK(nb_bpe_is_native(u), "nobubble's own tokenizer read back from Hugging Face's file is nobubble's own");
        nb_tokenizer_free(u);
    }
    nb_tokenizer_free(t);
}

int main(void) {
    snprintf(dir, sizeof dir, "/tmp/nb_test_tokhf_XXXXXX");
    if (!mkdtemp(dir)) { perror("mkdtemp"); return 1; }
    test_fixtures();
    test_ignore_merges();
    test_llama3_post_processor();
    test_refusals();
    test_native_regex();
    test_regex_limit();
    test_native_round_trip();
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    check_run(cmd);
    return check_summary();
}
