/* The byte-level BPE: pre-tokenizer pieces, merges computed by hand, encode against a naive
 * reference, decode(encode(x)) == x on random bytes, UTF-8 and the Bible, the JSON file. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "check.h"
#include "nobubble/data.h"

static char dir[256];

static nb_tokenizer *train1(const char *text, int vocab) {
    const char *docs[1] = {text};
    size_t lens[1] = {strlen(text)};
    nb_tokenizer *t = NULL;
    if (nb_tokenizer_train(&t, docs, lens, 1, vocab, 0)) return NULL;
    return t;
}

static int roundtrip(nb_tokenizer *t, const char *s, size_t n) {
    uint32_t *ids = malloc((n + 1) * sizeof *ids);
    size_t m = nb_tokenizer_encode(t, s, n, ids);
    int *iv = malloc((m + 1) * sizeof *iv);
    int ok = m <= n;
    for (size_t i = 0; i < m; i++) {
        iv[i] = (int)ids[i];
        ok &= ids[i] <= (uint32_t)nb_tokenizer_eot(t);
    }
    char *back = malloc(n + 1);
    size_t k = nb_tokenizer_decode(t, iv, m, back, n + 1);
    ok &= k == n && (n == 0 || memcmp(back, s, n) == 0);
    free(ids); free(iv); free(back);
    return ok;
}

static void test_pretokenizer(void) {
    const char *s = "Hello world, it's 2024!\n\n  foo'said don't  \t";
    const char *want[] = {"Hello", " world", ",", " it", "'s", " 2024", "!", "\n\n ", " foo", "'", "said",
                          " don", "'t", "  \t"};
    size_t n = strlen(s), pos = 0, k = 0, nw = sizeof want / sizeof want[0];
    while (pos < n && k < nw) {
        size_t e = nb_pretokenize_next(s, n, pos);
        CHECK(e - pos == strlen(want[k]) && !memcmp(s + pos, want[k], e - pos), "piece %zu: got '%.*s', want '%s'",
              k, (int)(e - pos), s + pos, want[k]);
        pos = e;
        k++;
    }
    CHECK(pos == n && k == nw, "pieces: %zu of %zu, stopped at %zu of %zu", k, nw, pos, n);
    /* "\nword": a lone newline is its own piece; runs are cut at NB_PRETOKEN_MAX_BYTES */
    CHECK(nb_pretokenize_next("\nword", 5, 0) == 1, "lone newline");
    char longw[600];
    memset(longw, 'x', sizeof longw);
    CHECK(nb_pretokenize_next(longw, sizeof longw, 0) == NB_PRETOKEN_MAX_BYTES, "long word cut");
    /* UTF-8 letters stay in the word */
    const char *u = " caf\xc3\xa9s!";
    CHECK(nb_pretokenize_next(u, strlen(u), 0) == 7, "UTF-8 bytes count as letters");
}

/* Worked by hand in docs/data.md: "hug hug hug pug pun".
 * words: "hug" x1, " hug" x2, " pug" x1, " pun" x1
 * pairs: (u,g)=4 (h,u)=3 ( ,h)=2 ( ,p)=2 (p,u)=2 (u,n)=1       -> merge 0: u g   = 256
 * then:  (h,ug)=3 ( ,h)=2 ( ,p)=2 (p,ug)=1 (p,u)=1 (u,n)=1       -> merge 1: h ug  = 257
 * then:  ( ,hug)=2 ( ,p)=2 ... : tie at 2, same left id 32, right 'p'=112 < 257 -> merge 2: " p" = 258
 * then:  ( ,hug)=2, every other pair once                        -> merge 3: " hug" = 259
 * then every pair occurs once: no fifth merge. */
static void test_hand_merges(void) {
    nb_tokenizer *t = train1("hug hug hug pug pun", 261);
    CHECK(t != NULL, "train: %s", nb_last_error());
    if (!t) return;
    uint32_t want[4][2] = {{'u', 'g'}, {'h', 256}, {' ', 'p'}, {' ', 257}};
    CHECK(nb_tokenizer_n_merges(t) == 4 && nb_tokenizer_vocab_size(t) == 261 && nb_tokenizer_eot(t) == 260,
          "sizes");
    for (int k = 0; k < 4; k++) {
        uint32_t a = 0, b = 0;
        nb_tokenizer_merge(t, k, &a, &b);
        CHECK(a == want[k][0] && b == want[k][1], "merge %d: got (%u, %u), want (%u, %u)", k, a, b, want[k][0],
              want[k][1]);
    }
    size_t len;
    const char *tb = nb_tokenizer_token_bytes(t, 259, &len);
    CHECK(tb && len == 4 && !memcmp(tb, " hug", 4), "token 259 = ' hug'");
    tb = nb_tokenizer_token_bytes(t, 260, &len);
    CHECK(tb && len == strlen(NB_EOT_TEXT) && !memcmp(tb, NB_EOT_TEXT, len), "EOT text");
    uint32_t ids[16];
    size_t m = nb_tokenizer_encode(t, "hug pug hugs", 12, ids);
    uint32_t want_ids[] = {257, 258, 256, 259, 's'};
    CHECK(m == 5 && !memcmp(ids, want_ids, sizeof want_ids), "encode 'hug pug hugs' (%zu ids)", m);
    nb_tokenizer_free(t);
    /* one more merge than the data supports */
    CHECK(train1("hug hug hug pug pun", 262) == NULL && strstr(nb_last_error(), "too large"),
          "vocab 262 must be too large: %s", nb_last_error());
    CHECK(train1("hug hug hug pug pun", 256) == NULL && strstr(nb_last_error(), "too small"), "vocab 256 too small");
    /* overlapping pair: "aaaa" x2 -> (a,a) counted 3 per word but merged twice per word */
    t = train1("aaaa aaaa", 258);
    CHECK(t != NULL, "aaaa: %s", nb_last_error());
    if (t) {
        uint32_t a, b;
        nb_tokenizer_merge(t, 0, &a, &b);
        CHECK(a == 'a' && b == 'a', "aaaa merge 0");
        m = nb_tokenizer_encode(t, "aaaaa", 5, ids);
        CHECK(m == 3 && ids[0] == 256 && ids[1] == 256 && ids[2] == 'a', "aaaaa -> [aa, aa, a]");
        nb_tokenizer_free(t);
    }
}

/* Reference encoder: apply the merges in order to each pre-token, left to right. */
static size_t naive_encode(const nb_tokenizer *t, const char *s, size_t n, uint32_t *out) {
    size_t pos = 0, total = 0;
    while (pos < n) {
        size_t e = nb_pretokenize_next(s, n, pos), m = e - pos;
        uint32_t *w = out + total;
        for (size_t i = 0; i < m; i++) w[i] = (unsigned char)s[pos + i];
        for (int k = 0; k < nb_tokenizer_n_merges(t); k++) {
            uint32_t a, b;
            nb_tokenizer_merge(t, k, &a, &b);
            size_t r = 0;
            for (size_t j = 0; j < m;) {
                if (j + 1 < m && w[j] == a && w[j + 1] == b) { w[r++] = 256 + (uint32_t)k; j += 2; }
                else w[r++] = w[j++];
            }
            m = r;
        }
        total += m;
        pos = e;
    }
    return total;
}

static uint64_t rng = 12345;
static uint32_t rnd(void) {
    rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
    return (uint32_t)(rng >> 33);
}

static char *random_text(size_t n, const char *alphabet) {
    char *s = malloc(n + 1);
    size_t a = strlen(alphabet);
    for (size_t i = 0; i < n; i++) s[i] = alphabet[rnd() % a];
    s[n] = 0;
    return s;
}


/* Reference trainer: recounts every pair over all pre-tokens at each step (slow, obviously
 * right) and picks the most frequent pair, ties to the smallest left id, then right id. */
static int naive_train(const char *text, size_t n, int n_merges, uint32_t *merges) {
    size_t cap = n + 1, nt = 0, nw = 0;
    uint32_t *tok = malloc(cap * sizeof *tok);
    size_t *ws = malloc((n + 2) * sizeof *ws), *wl = malloc((n + 2) * sizeof *wl);
    for (size_t pos = 0; pos < n;) {
        size_t e = nb_pretokenize_next(text, n, pos);
        ws[nw] = nt;
        wl[nw++] = e - pos;
        for (size_t i = pos; i < e; i++) tok[nt++] = (unsigned char)text[i];
        pos = e;
    }
    int V = 256 + n_merges;
    long *cnt = malloc((size_t)V * V * sizeof *cnt);
    int k;
    for (k = 0; k < n_merges; k++) {
        memset(cnt, 0, (size_t)V * V * sizeof *cnt);
        for (size_t w = 0; w < nw; w++)
            for (size_t j = 0; j + 1 < wl[w]; j++) cnt[(size_t)tok[ws[w] + j] * V + tok[ws[w] + j + 1]]++;
        long best = 1;
        size_t bi = 0;
        for (size_t i = 0; i < (size_t)V * V; i++)
            if (cnt[i] > best) { best = cnt[i]; bi = i; }
        if (best < 2) break;
        uint32_t a = (uint32_t)(bi / V), b = (uint32_t)(bi % V), x = 256 + (uint32_t)k;
        merges[2 * k] = a;
        merges[2 * k + 1] = b;
        for (size_t w = 0; w < nw; w++) {
            uint32_t *t = tok + ws[w];
            size_t r = 0;
            for (size_t j = 0; j < wl[w];) {
                if (j + 1 < wl[w] && t[j] == a && t[j + 1] == b) { t[r++] = x; j += 2; }
                else t[r++] = t[j++];
            }
            wl[w] = r;
        }
    }
    free(tok); free(ws); free(wl); free(cnt);
    return k;
}

static void test_against_naive_trainer(void) {
    for (int rep = 0; rep < 3; rep++) {
        const char *alpha[3] = {"aab ", "abcab  \n.,", "the cat sat on a mat, and then the rat ate it.\n"};
        char *text = random_text(rep == 2 ? 6000 : 3000, alpha[rep]);
        size_t n = strlen(text);
        int want_merges = 150;
        uint32_t *ref = malloc(2 * (size_t)want_merges * sizeof *ref);
        int got = naive_train(text, n, want_merges, ref);
        nb_tokenizer *t = train1(text, 257 + got);
        CHECK(t != NULL, "rep %d: train %d merges: %s", rep, got, nb_last_error());
        int same = t != NULL;
        for (int k = 0; k < got && t; k++) {
            uint32_t a, b;
            nb_tokenizer_merge(t, k, &a, &b);
            if (a != ref[2 * k] || b != ref[2 * k + 1]) {
                same = 0;
                CHECK(0, "rep %d merge %d: (%u, %u), reference (%u, %u)", rep, k, a, b, ref[2 * k], ref[2 * k + 1]);
                break;
            }
        }
        CHECK(same, "rep %d: %d merges equal the reference trainer's", rep, got);
        /* the reference ran out of pairs seen twice: one more merge must be refused */
        if (got < want_merges) CHECK(train1(text, 258 + got) == NULL, "rep %d: vocab %d must be too large", rep, 258 + got);
        nb_tokenizer_free(t);
        free(ref);
        free(text);
    }
}

static void test_encode_matches_reference(void) {
    char *train = random_text(20000, "aabbbcd  e\n,.'");
    nb_tokenizer *t = train1(train, 600);
    CHECK(t != NULL, "train: %s", nb_last_error());
    if (!t) { free(train); return; }
    char *text = random_text(5000, "aabbbcd  e\n,.'xs");
    uint32_t *a = malloc(5000 * sizeof *a), *b = malloc(5000 * sizeof *b);
    size_t na = nb_tokenizer_encode(t, text, 5000, a), nb2 = naive_encode(t, text, 5000, b);
    CHECK(na == nb2 && !memcmp(a, b, na * sizeof *a), "encode differs from applying the merges in order");
    CHECK(na < 4500, "BPE compresses the text (%zu ids for 5000 bytes)", na);
    /* the cache gives the same ids the second time */
    size_t na2 = nb_tokenizer_encode(t, text, 5000, b);
    CHECK(na2 == na && !memcmp(a, b, na * sizeof *a), "second encode (cached) differs");
    /* determinism */
    nb_tokenizer *t2 = train1(train, 600);
    char h1[65], h2[65];
    nb_tokenizer_hash(t, h1);
    nb_tokenizer_hash(t2, h2);
    CHECK(!strcmp(h1, h2), "training twice gives different tokenizers");
    nb_tokenizer_free(t2);
    free(a); free(b); free(text); free(train);
    nb_tokenizer_free(t);
}

static void test_roundtrips(void) {
    char *train = random_text(30000, "the quick brown fox jumps over lazy dog   \n\n.,;'\"");
    nb_tokenizer *t = train1(train, 512);
    free(train);
    CHECK(t != NULL, "train: %s", nb_last_error());
    if (!t) return;
    CHECK(roundtrip(t, "", 0), "empty string");
    for (int rep = 0; rep < 200; rep++) {
        size_t n = rnd() % 3000;
        char *s = malloc(n + 1);
        int mode = rep % 4;
        for (size_t i = 0; i < n; i++) {
            uint32_t r = rnd();
            s[i] = (char)(mode == 0 ? (int)(r & 255) : mode == 1 ? " \t\n\r\v\f"[r % 6] : mode == 2 ? "ab '\n\x80\xff"[r % 7] : "the fox "[r % 8]);
        }
        CHECK(roundtrip(t, s, n), "random bytes round trip (rep %d, mode %d, %zu bytes)", rep, mode, n);
        free(s);
    }
    const char *utf8[] = {"Grüße aus Köln — ça va? naïve café", "日本語のテキストです。東京都", "Привет, мир! 123",
                          "emoji 😀🎉 and math ∑∫√ ", "mixed\r\nlines\n\n\n  indented\ttabs", "<|endoftext|> is plain text here"};
    for (size_t i = 0; i < sizeof utf8 / sizeof utf8[0]; i++)
        CHECK(roundtrip(t, utf8[i], strlen(utf8[i])), "UTF-8 round trip: %s", utf8[i]);
    /* the EOT text in the input: its id, as Hugging Face's tokenizers encode it (between ordinary text,
     * the longest special token at the leftmost place); as bytes when special tokens are plain text */
    uint32_t ids[64];
    const char *with_eot = "ab" NB_EOT_TEXT NB_EOT_TEXT "<|endoftext|";
    size_t m = nb_tokenizer_encode(t, with_eot, strlen(with_eot), ids);
    const uint32_t eot32 = (uint32_t)nb_tokenizer_eot(t);
    int n_eot = 0, first_eot = -1;
    for (size_t i = 0; i < m; i++)
        if (ids[i] == eot32) n_eot++, first_eot = first_eot < 0 ? (int)i : first_eot;
    uint32_t ab[4];
    const size_t n_ab = nb_tokenizer_encode(t, "ab", 2, ab);
    CHECK(n_eot == 2 && first_eot == (int)n_ab && ids[n_ab + 1] == eot32 && !memcmp(ids, ab, n_ab * sizeof *ids),
          "the EOT text is the EOT id, twice, after \"ab\"'s ids and not for the unfinished third (%d found, first at %d)",
          n_eot, first_eot);
    nb_tokenizer_special_as_text(t, 1);
    m = nb_tokenizer_encode(t, with_eot, strlen(with_eot), ids);
    n_eot = 0;
    for (size_t i = 0; i < m; i++) n_eot += ids[i] == eot32;
    CHECK(m > 0 && n_eot == 0 && roundtrip(t, with_eot, strlen(with_eot)), "as text, the EOT text is bytes, never the id");
    nb_tokenizer_special_as_text(t, 0);
    int eot = nb_tokenizer_eot(t);
    char buf[64];
    size_t k = nb_tokenizer_decode(t, &eot, 1, buf, sizeof buf);
    CHECK(k == strlen(NB_EOT_TEXT) && !memcmp(buf, NB_EOT_TEXT, k), "EOT decodes to its text");
    /* decode with a short buffer reports the full size */
    int two[2] = {'a', 'b'};
    CHECK(nb_tokenizer_decode(t, two, 2, buf, 1) == 2 && buf[0] == 'a', "decode truncation");
    nb_tokenizer_free(t);
}

static void test_file(void) {
    nb_tokenizer *t = train1("hug hug hug pug pun hug pug", 261);
    if (!t) { CHECK(0, "train: %s", nb_last_error()); return; }
    char path[512], bad[512];
    snprintf(path, sizeof path, "%s/tok.json", dir);
    CHECK(nb_tokenizer_save(t, path) == 0, "save: %s", nb_last_error());
    nb_tokenizer *u = NULL;
    CHECK(nb_tokenizer_load(&u, path) == 0, "load: %s", nb_last_error());
    if (u) {
        char h1[65], h2[65];
        nb_tokenizer_hash(t, h1);
        nb_tokenizer_hash(u, h2);
        CHECK(!strcmp(h1, h2) && nb_tokenizer_vocab_size(u) == 261, "load(save(t)) == t");
        nb_tokenizer_free(u);
    }
    /* a hand-written file: merges as [left, right] */
    const char *good = "{\"format\": \"nobubble-bpe\", \"version\": 1, \"pretokenizer\": \"nobubble-gpt2-bytes-v1\", "
                       "\"vocab_size\": 259, \"eot\": {\"id\": 258, \"text\": \"<|endoftext|>\"}, "
                       "\"merges\": [[104, 105], [256, 115]]}";
    snprintf(bad, sizeof bad, "%s/hand.json", dir);
    FILE *f = fopen(bad, "w");
    fputs(good, f);
    fclose(f);
    CHECK(nb_tokenizer_load(&u, bad) == 0, "hand-written file: %s", nb_last_error());
    if (u) {
        uint32_t ids[8];
        size_t m = nb_tokenizer_encode(u, "his!", 4, ids);
        CHECK(m == 2 && ids[0] == 257 && ids[1] == '!', "hand-written merges encode 'his!' as [his, !]");
        nb_tokenizer_free(u);
    }
    const char *broken[][2] = {
        {"{\"format\": \"other\"}", "format"},
        {"{\"format\": \"nobubble-bpe\", \"version\": 2}", "version"},
        {"{\"format\": \"nobubble-bpe\", \"version\": 1, \"pretokenizer\": \"nobubble-gpt2-bytes-v1\", \"vocab_size\": 300, "
         "\"eot\": {\"id\": 299}, \"merges\": [[1, 2]]}", "does not match"},
        {"{\"format\": \"nobubble-bpe\", \"version\": 1, \"pretokenizer\": \"nobubble-gpt2-bytes-v1\", \"vocab_size\": 258, "
         "\"eot\": {\"id\": 257}, \"merges\": [[1, 256]]}", "merge 0"},
        {"{\"format\": \"nobubble-bpe\", \"version\": 1, \"pretokenizer\": \"nobubble-gpt2-bytes-v1\", \"vocab_size\": 259, "
         "\"eot\": {\"id\": 258}, \"merges\": [[1, 2], [1, 2]]}", "repeats"},
        {"{\"format\": \"nobubble-bpe\", \"merges\": [1, 2", "invalid JSON"},
        /* found by fuzzing: each merge doubling the last token made 28 merges (520 bytes) allocate 1 GB */
        {"{\"format\": \"nobubble-bpe\", \"version\": 1, \"pretokenizer\": \"nobubble-gpt2-bytes-v1\", \"vocab_size\": 266, "
         "\"eot\": {\"id\": 265}, \"merges\": [[97, 97], [256, 256], [257, 257], [258, 258], [259, 259], [260, 260], "
         "[261, 261], [262, 262], [263, 263]]}", "merge 8 (263, 263) makes a token of 512 bytes, longer than a pre-token"},
    };
    for (size_t i = 0; i < sizeof broken / sizeof broken[0]; i++) {
        f = fopen(bad, "w");
        fputs(broken[i][0], f);
        fclose(f);
        u = NULL;
        int r = nb_tokenizer_load(&u, bad);
        CHECK(r == -1 && strstr(nb_last_error(), broken[i][1]) && strstr(nb_last_error(), "hand.json"),
              "broken file %zu must fail with '%s': %s", i, broken[i][1], r ? nb_last_error() : "loaded");
        nb_tokenizer_free(u);
    }
    nb_tokenizer_free(t);
}

static void test_bible(void) {
    char *text;
    size_t *off, nd;
    if (nb_bible_documents(&text, &off, &nd)) {
        printf("SKIP bible round trip: %s\n", nb_last_error());
        return;
    }
    size_t n = off[nd];
    CHECK(nd == 1189, "the KJV has 1189 chapters, got %zu documents", nd);
    CHECK(n > 4000000 && n < 4300000, "bible text is %zu bytes (about 4.1 MB expected)", n);
    CHECK(!strncmp(text, "In the beginning God created the heaven and the earth.\n", 55), "Genesis 1:1 first");
    const char **dp = malloc(nd * sizeof *dp);
    size_t *dl = malloc(nd * sizeof *dl);
    for (size_t i = 0; i < nd; i++) { dp[i] = text + off[i]; dl[i] = off[i + 1] - off[i]; }
    nb_tokenizer *t = NULL;
    CHECK(nb_tokenizer_train(&t, dp, dl, nd, 1024, 0) == 0, "bible train: %s", nb_last_error());
    if (t) {
        CHECK(roundtrip(t, text, n), "bible round trip");
        nb_tokenizer_free(t);
    }
    free(dp); free(dl); free(text); free(off);
}

int main(void) {
    snprintf(dir, sizeof dir, "/tmp/nb_test_tok_XXXXXX");
    if (!mkdtemp(dir)) { perror("mkdtemp"); return 1; }
    test_pretokenizer();
    test_hand_merges();
    test_against_naive_trainer();
    test_encode_matches_reference();
    test_roundtrips();
    test_file();
    test_bible();
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    check_run(cmd);
    return check_summary();
}
