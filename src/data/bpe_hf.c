/* Hugging Face's tokenizer.json for byte-level BPE (GPT-2's and Llama 3's kind): the reader, which
 * refuses by name every field whose meaning nobubble does not implement, and the writer. What is
 * supported is in docs/data.md ("Hugging Face tokenizers"). */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include <string.h>
#include "data/bpe_internal.h"
#include "util/error.h"

/* ------------------------------------------------------------ the byte-level alphabet */
/* GPT-2's map from bytes to printable characters: printable Latin-1 bytes stand for themselves,
 * the other 68 take code points 256, 257, ... in byte order. */
static void byte_alphabet(uint32_t cp_of[256]) {
    uint32_t next = 256;
    for (int b = 0; b < 256; b++) {
        int printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
        cp_of[b] = printable ? (uint32_t)b : next++;
    }
}

static void put_utf8(uint32_t cp, char *out, size_t *n) {
    if (cp < 0x80) { out[(*n)++] = (char)cp; return; }
    out[(*n)++] = (char)(0xC0 | cp >> 6);   /* every code point of the alphabet is below 0x800 */
    out[(*n)++] = (char)(0x80 | (cp & 0x3F));
}

/* A byte-level string (UTF-8 of alphabet characters) into its bytes, written to out (room for
 * n bytes); returns the number of bytes, or -1 when a character is not in the alphabet. */
static long from_byte_level(const char *s, size_t n, const int byte_of[324], char *out) {
    size_t k = 0;
    for (size_t i = 0; i < n;) {
        unsigned char c = (unsigned char)s[i];
        uint32_t cp;
        if (c < 0x80) { cp = c; i++; }
        else if ((c & 0xE0) == 0xC0 && i + 1 < n && ((unsigned char)s[i + 1] & 0xC0) == 0x80) {
            cp = (uint32_t)(c & 0x1F) << 6 | ((unsigned char)s[i + 1] & 0x3F);
            i += 2;
        } else return -1;
        if (cp >= 324 || byte_of[cp] < 0) return -1;
        out[k++] = (char)byte_of[cp];
    }
    return (long)k;
}

/* ------------------------------------------------------------ reading: the parts around the model */
static int is_type(const nb_json *j, const char *type) {
    const nb_json *t = j && j->type == NB_JOBJ ? nb_json_get(j, "type") : NULL;
    return t && t->type == NB_JSTR && !strcmp(t->str, type);
}

static const char *type_of(const nb_json *j) {
    const nb_json *t = j && j->type == NB_JOBJ ? nb_json_get(j, "type") : NULL;
    return t && t->type == NB_JSTR ? t->str : "(no type)";
}

static int is_null(const nb_json *j) { return !j || j->type == NB_JNULL; }

/* A boolean field; absent or null means dflt. -1 when it is something else. */
static int get_bool(const nb_json *obj, const char *key, int dflt) {
    const nb_json *j = nb_json_get(obj, key);
    if (is_null(j)) return dflt;
    return j->type == NB_JBOOL ? j->b : -1;
}

static int byte_level_ok(const nb_json *bl, int use_regex, const char *where, const char *path) {
    if (get_bool(bl, "add_prefix_space", 0) != 0)
        return nb_fail("tokenizer %s: %s.add_prefix_space must be false (nobubble does not add a space before the "
                       "text)", path, where);
    if (get_bool(bl, "use_regex", 1) != use_regex)
        return nb_fail("tokenizer %s: %s.use_regex must be %s here", path, where, use_regex ? "true" : "false");
    return 0;
}

/* The pre-tokenizer as one regex: GPT-2's ByteLevel, or Llama 3's Split + ByteLevel. */
static int read_pretokenizer(const nb_json *root, const char *path, const char **pattern) {
    const nb_json *pre = nb_json_get(root, "pre_tokenizer");
    if (is_type(pre, "ByteLevel")) {
        *pattern = NB_GPT2_REGEX;
        return byte_level_ok(pre, 1, "pre_tokenizer", path);
    }
    const nb_json *seq = is_type(pre, "Sequence") ? nb_json_get(pre, "pretokenizers") : NULL;
    if (!seq || seq->type != NB_JARR || seq->n != 2 || !is_type(&seq->items[0], "Split") ||
        !is_type(&seq->items[1], "ByteLevel"))
        return nb_fail("tokenizer %s: pre_tokenizer of type %s is not supported (nobubble reads ByteLevel, or a "
                       "Sequence of Split then ByteLevel)", path, is_null(pre) ? "null" : type_of(pre));
    const nb_json *split = &seq->items[0], *pat = nb_json_get(split, "pattern");
    const nb_json *re = pat && pat->type == NB_JOBJ ? nb_json_get(pat, "Regex") : NULL;
    const nb_json *behavior = nb_json_get(split, "behavior");
    if (!re || re->type != NB_JSTR || strlen(re->str) != re->str_len)
        return nb_fail("tokenizer %s: pre_tokenizer.pretokenizers[0].pattern must be {\"Regex\": \"...\"} (a String "
                       "pattern is not supported)", path);
    if (!behavior || behavior->type != NB_JSTR || strcmp(behavior->str, "Isolated"))
        return nb_fail("tokenizer %s: pre_tokenizer.pretokenizers[0].behavior must be \"Isolated\" (the others are "
                       "not supported)", path);
    if (get_bool(split, "invert", 0) != 0)
        return nb_fail("tokenizer %s: pre_tokenizer.pretokenizers[0].invert must be false", path);
    *pattern = re->str;
    return byte_level_ok(&seq->items[1], 0, "pre_tokenizer.pretokenizers[1]", path);
}

/* Everything but the model and the pre-tokenizer: refused unless it does not change the ids. */
static int read_surroundings(const nb_json *root, const char *path) {
    const nb_json *norm = nb_json_get(root, "normalizer"), *dec = nb_json_get(root, "decoder");
    const nb_json *post = nb_json_get(root, "post_processor");
    if (!is_null(norm))
        return nb_fail("tokenizer %s: normalizer %s is not supported (nobubble reads tokenizers without a "
                       "normalizer)", path, type_of(norm));
    if (!is_null(dec) && !is_type(dec, "ByteLevel"))
        return nb_fail("tokenizer %s: decoder %s is not supported (only ByteLevel)", path, type_of(dec));
    /* A post-processor only adds special tokens around an encoding (nobubble never does: documents
     * are separated by the end-of-text token) or computes offsets. Llama 3's is a Sequence of both. */
    const nb_json *steps = is_type(post, "Sequence") ? nb_json_get(post, "processors") : NULL;
    size_t n = steps && steps->type == NB_JARR ? steps->n : 1;
    for (size_t i = 0; i < n && !is_null(post); i++) {
        const nb_json *p = steps && steps->type == NB_JARR ? &steps->items[i] : post;
        if (!is_type(p, "ByteLevel") && !is_type(p, "TemplateProcessing"))
            return nb_fail("tokenizer %s: post_processor %s is not supported (only ByteLevel, TemplateProcessing or a "
                           "Sequence of them)", path, type_of(p));
    }
    return 0;
}

static int read_model_options(const nb_json *model, const char *path, int *ignore_merges) {
    if (!model || model->type != NB_JOBJ) return nb_fail("tokenizer %s: \"model\" missing or not an object", path);
    const nb_json *type = nb_json_get(model, "type"), *dropout = nb_json_get(model, "dropout");
    if (type && !is_type(model, "BPE"))
        return nb_fail("tokenizer %s: model.type %s is not supported (only BPE; not Unigram, WordPiece or "
                       "WordLevel)", path, type_of(model));
    if (!is_null(dropout) && !(dropout->type == NB_JNUM && dropout->num == 0))
        return nb_fail("tokenizer %s: model.dropout must be null (BPE dropout is not supported)", path);
    if (get_bool(model, "byte_fallback", 0) != 0)
        return nb_fail("tokenizer %s: model.byte_fallback must be false (SentencePiece-style byte fallback is not "
                       "supported)", path);
    static const char *const affixes[] = {"continuing_subword_prefix", "end_of_word_suffix"};
    for (int i = 0; i < 2; i++) {
        const nb_json *a = nb_json_get(model, affixes[i]);
        if (!is_null(a) && !(a->type == NB_JSTR && a->str_len == 0))
            return nb_fail("tokenizer %s: model.%s must be null (not supported)", path, affixes[i]);
    }
    *ignore_merges = get_bool(model, "ignore_merges", 0);
    if (*ignore_merges < 0) return nb_fail("tokenizer %s: model.ignore_merges must be true or false", path);
    return 0;
}

/* ------------------------------------------------------------ reading: the vocabulary */
typedef struct { const char *s; size_t n; int id; } name_t;
typedef struct {
    int V;
    char *bytes;            /* every token's bytes */
    size_t *off, *len;
    uint8_t *special, *defined;
    const char **names;     /* per id: its string in model.vocab (NULL for an added token only) */
    name_t *sorted;         /* model.vocab sorted by string, for the merges' look-ups */
    int n_sorted;
} vocab_t;

static void vocab_free(vocab_t *v) {
    free(v->bytes); free(v->off); free(v->len); free(v->special); free(v->defined);
    free(v->names); free(v->sorted);
}

static int id_in_range(const nb_json *j, int64_t *id) {
    if (!j || j->type != NB_JNUM || !j->is_int || j->i < 0 || j->i >= NB_TOKENIZER_MAX_VOCAB) return 0;
    *id = j->i;
    return 1;
}

static int cmp_str(const char *a, size_t la, const char *b, size_t lb) {
    int c = memcmp(a, b, la < lb ? la : lb);
    return c ? c : (la > lb) - (la < lb);
}

static int cmp_names(const void *x, const void *y) {
    const name_t *a = x, *b = y;
    return cmp_str(a->s, a->n, b->s, b->n);
}

/* The id of the model.vocab string s (n bytes), or -1. */
static int find_name(const vocab_t *v, const char *s, size_t n) {
    int lo = 0, hi = v->n_sorted;
    while (lo < hi) {
        int mid = (lo + hi) / 2, c = cmp_str(v->sorted[mid].s, v->sorted[mid].n, s, n);
        if (!c) return v->sorted[mid].id;
        if (c < 0) lo = mid + 1; else hi = mid;
    }
    return -1;
}

static int vocab_alloc(vocab_t *v, const nb_json *vocab, const nb_json *added, const char *path) {
    int64_t max_id = -1, id;
    size_t total = 1;
    for (size_t i = 0; i < vocab->n; i++) {
        if (!id_in_range(&vocab->items[i], &id))
            return nb_fail("tokenizer %s: model.vocab[\"%s\"] must be an id from 0 to %d", path, vocab->keys[i],
                           NB_TOKENIZER_MAX_VOCAB - 1);
        if (id > max_id) max_id = id;
        total += strlen(vocab->keys[i]);
    }
    for (size_t i = 0; i < added->n; i++) {
        const nb_json *a = &added->items[i], *content = nb_json_get(a, "content");
        if (a->type != NB_JOBJ || !id_in_range(nb_json_get(a, "id"), &id) || !content || content->type != NB_JSTR)
            return nb_fail("tokenizer %s: added_tokens[%zu] must have an \"id\" from 0 to %d and a \"content\" string",
                           path, i, NB_TOKENIZER_MAX_VOCAB - 1);
        if (id > max_id) max_id = id;
        total += content->str_len;
    }
    /* Real vocabularies number their tokens densely (a few unused ids at most); an id far beyond the
     * token count would size every per-id array by it (16M ids: hundreds of MB for a tiny file).
     * Small files (tests, toy vocabularies) may leave up to 65536 ids unused. */
    const int64_t tokens = (int64_t)vocab->n + (int64_t)added->n;
    if (max_id + 1 > 2 * tokens + 65536)
        return nb_fail("tokenizer %s: ids go up to %lld but the file has only %lld tokens: expected ids numbered "
                       "from 0 with at most half of them (or 65536) unused", path, (long long)max_id, (long long)tokens);
    v->V = (int)max_id + 1;
    size_t V = (size_t)v->V + 1;
    v->bytes = malloc(total);
    v->off = calloc(V, sizeof *v->off);
    v->len = calloc(V, sizeof *v->len);
    v->special = calloc(V, 1);
    v->defined = calloc(V, 1);
    v->names = calloc(V, sizeof *v->names);
    v->sorted = malloc((vocab->n + 1) * sizeof *v->sorted);
    if (!v->bytes || !v->off || !v->len || !v->special || !v->defined || !v->names || !v->sorted)
        return nb_fail("out of memory");
    return 0;
}

static int read_vocab(vocab_t *v, const nb_json *root, const char *path) {
    const nb_json *model = nb_json_get(root, "model");
    const nb_json *vocab = nb_json_get(model, "vocab"), *added = nb_json_get(root, "added_tokens");
    static const nb_json no_added = {.type = NB_JARR};
    if (!vocab || vocab->type != NB_JOBJ) return nb_fail("tokenizer %s: model.vocab missing or not an object", path);
    if (is_null(added)) added = &no_added;
    if (added->type != NB_JARR) return nb_fail("tokenizer %s: added_tokens must be a list", path);
    if (vocab_alloc(v, vocab, added, path)) return -1;
    uint32_t cp_of[256];
    int byte_of[324];
    byte_alphabet(cp_of);
    for (int c = 0; c < 324; c++) byte_of[c] = -1;
    for (int b = 0; b < 256; b++) byte_of[cp_of[b]] = b;
    size_t o = 0;
    for (size_t i = 0; i < vocab->n; i++) {
        int id = (int)vocab->items[i].i;
        const char *name = vocab->keys[i];
        size_t n = strlen(name);
        if (v->defined[id])
            return nb_fail("tokenizer %s: model.vocab gives the id %d to both \"%s\" and \"%s\"", path, id,
                           v->names[id], name);
        long k = from_byte_level(name, n, byte_of, v->bytes + o);
        if (k <= 0)
            return nb_fail("tokenizer %s: model.vocab[\"%s\"] is not a byte-level token (each character must stand "
                           "for a byte, as ByteLevel writes them)", path, name);
        v->defined[id] = 1;
        v->names[id] = name;
        v->off[id] = o;
        v->len[id] = (size_t)k;
        o += (size_t)k;
        v->sorted[v->n_sorted++] = (name_t){name, n, id};
    }
    for (size_t i = 0; i < added->n; i++) {
        const nb_json *a = &added->items[i], *content = nb_json_get(a, "content");
        int id = (int)nb_json_get(a, "id")->i;
        if (get_bool(a, "special", 0) != 1)
            return nb_fail("tokenizer %s: added_tokens[%zu] (\"%s\") is not special: nobubble handles special added "
                           "tokens only", path, i, content->str);
        /* A special token in the text is found exactly as written (nb_tokenizer_encode); these would make
         * Hugging Face's encoder take the whitespace around it, or only a whole word, too. */
        static const char *const unsupported[] = {"lstrip", "rstrip", "single_word"};
        for (int f = 0; f < 3; f++)
            if (get_bool(a, unsupported[f], 0) == 1)
                return nb_fail("tokenizer %s: added_tokens[%zu] (\"%s\") has \"%s\": true, which nobubble does not "
                               "support (it matches a special token exactly as written)", path, i, content->str,
                               unsupported[f]);
        if (v->special[id] || (v->defined[id] && (v->len[id] != content->str_len ||
                                                  memcmp(v->bytes + v->off[id], content->str, content->str_len))))
            return nb_fail("tokenizer %s: added_tokens[%zu] (\"%s\") has the id %d of another token", path, i,
                           content->str, id);
        if (!v->defined[id]) {
            memcpy(v->bytes + o, content->str, content->str_len);
            v->off[id] = o;
            v->len[id] = content->str_len;
            o += content->str_len;
        }
        v->defined[id] = v->special[id] = 1;
    }
    qsort(v->sorted, (size_t)v->n_sorted, sizeof *v->sorted, cmp_names);
    return 0;
}

/* One merge, "left right" (older files) or ["left", "right"] (newer ones), into ids. */
static int read_merge(const vocab_t *v, const nb_json *m, size_t k, uint32_t out[3], const char *path) {
    const char *left, *right;
    size_t ll, rl;
    if (m->type == NB_JSTR) {
        const char *space = memchr(m->str, ' ', m->str_len);
        if (!space || memchr(space + 1, ' ', m->str_len - (size_t)(space + 1 - m->str)))
            return nb_fail("tokenizer %s: model.merges[%zu] (\"%s\") must be two tokens separated by one space", path,
                           k, m->str);
        left = m->str, ll = (size_t)(space - m->str), right = space + 1, rl = m->str_len - ll - 1;
    } else if (m->type == NB_JARR && m->n == 2 && m->items[0].type == NB_JSTR && m->items[1].type == NB_JSTR) {
        left = m->items[0].str, ll = m->items[0].str_len, right = m->items[1].str, rl = m->items[1].str_len;
    } else {
        return nb_fail("tokenizer %s: model.merges[%zu] must be \"left right\" or [\"left\", \"right\"]", path, k);
    }
    char *joined = malloc(ll + rl + 1);
    if (!joined) return nb_fail("out of memory");
    memcpy(joined, left, ll);
    memcpy(joined + ll, right, rl);
    int a = find_name(v, left, ll), b = find_name(v, right, rl), r = find_name(v, joined, ll + rl);
    free(joined);
    if (a < 0 || b < 0 || r < 0)
        return nb_fail("tokenizer %s: model.merges[%zu] (\"%.*s\" + \"%.*s\"): %s is not in model.vocab", path, k,
                       (int)ll, left, (int)rl, right, a < 0 ? "the left token" : b < 0 ? "the right token" : "the joined token");
    out[0] = (uint32_t)a, out[1] = (uint32_t)b, out[2] = (uint32_t)r;
    return 0;
}

/* The end-of-text token: the first of these special tokens the file has. */
static int find_eot(const vocab_t *v, const char *path) {
    static const char *const names[] = {NB_EOT_TEXT, "<|end_of_text|>", "</s>"};
    for (int i = 0; i < 3; i++)
        for (int id = 0; id < v->V; id++)
            if (v->special[id] && v->len[id] == strlen(names[i]) && !memcmp(v->bytes + v->off[id], names[i], v->len[id]))
                return id;
    return nb_fail("tokenizer %s: added_tokens has no end-of-text token (a special token \"%s\", \"%s\" or \"%s\")",
                   path, names[0], names[1], names[2]);
}

/* A file nobubble wrote for one of its own tokenizers: loaded as that tokenizer (same hash). */
static int is_native_layout(const vocab_t *v, const uint32_t *m3, int n_merges, int eot, const char *pattern,
                            int ignore_merges) {
    if (strcmp(pattern, NB_NATIVE_REGEX) || ignore_merges || v->V != 257 + n_merges || eot != v->V - 1) return 0;
    for (int b = 0; b < 256; b++)
        if (v->len[b] != 1 || (unsigned char)v->bytes[v->off[b]] != b || v->special[b]) return 0;
    for (int k = 0; k < n_merges; k++)
        if (m3[3 * k + 2] != 256 + (uint32_t)k || v->special[256 + k]) return 0;
    return v->len[eot] == strlen(NB_EOT_TEXT) && !memcmp(v->bytes + v->off[eot], NB_EOT_TEXT, v->len[eot]);
}

static int build(nb_tokenizer **out, const vocab_t *v, uint32_t *m3, int n_merges, const char *pattern,
                 int ignore_merges, const char *path) {
    int eot = find_eot(v, path);
    if (eot < 0) return -1;
    if (is_native_layout(v, m3, n_merges, eot, pattern, ignore_merges)) {
        for (int k = 0; k < n_merges; k++) m3[2 * k] = m3[3 * k], m3[2 * k + 1] = m3[3 * k + 1];
        return nb_tokenizer_from_merges(out, m3, n_merges);
    }
    nb_bpe_spec s = {.vocab_size = v->V, .bytes = v->bytes, .off = v->off, .len = v->len, .special = v->special,
                     .merges = m3, .n_merges = n_merges, .eot = eot, .pattern = pattern,
                     .ignore_merges = ignore_merges};
    return nb_bpe_build(out, &s, path);
}

int nb_bpe_load_hf(nb_tokenizer **out, const nb_json *root, const char *path) {
    *out = NULL;
    const char *pattern = NULL;
    int ignore_merges = 0;
    const nb_json *model = nb_json_get(root, "model");
    if (read_model_options(model, path, &ignore_merges) || read_surroundings(root, path) ||
        read_pretokenizer(root, path, &pattern))
        return -1;
    const nb_json *merges = nb_json_get(model, "merges");
    if (!merges || merges->type != NB_JARR || merges->n > NB_TOKENIZER_MAX_VOCAB)
        return nb_fail("tokenizer %s: model.merges missing or not a list", path);
    vocab_t v = {0};
    uint32_t *m3 = malloc((3 * merges->n + 1) * sizeof *m3);
    int r = m3 ? read_vocab(&v, root, path) : nb_fail("out of memory");
    for (size_t k = 0; k < merges->n && !r; k++) r = read_merge(&v, &merges->items[k], k, m3 + 3 * k, path);
    if (!r) r = build(out, &v, m3, (int)merges->n, pattern, ignore_merges, path);
    free(m3);
    vocab_free(&v);
    return r;
}

/* ------------------------------------------------------------ writing */
/* token's bytes as a JSON string of byte-level characters */
static int put_byte_level(nb_buf *b, const char *bytes, size_t n, const uint32_t cp_of[256]) {
    char *s = malloc(2 * n + 1);
    if (!s) return nb_fail("out of memory");
    size_t k = 0;
    for (size_t i = 0; i < n; i++) put_utf8(cp_of[(unsigned char)bytes[i]], s, &k);
    int r = nb_buf_json_str(b, s, k);
    free(s);
    return r;
}

static int write_added_tokens(const nb_tokenizer *t, nb_buf *b) {
    int r = nb_buf_printf(b, "  \"added_tokens\": ["), first = 1;
    for (int id = 0; id < nb_tokenizer_vocab_size(t) && !r; id++) {
        if (!nb_bpe_is_special(t, id)) continue;
        size_t n;
        const char *s = nb_tokenizer_token_bytes(t, id, &n);
        r = nb_buf_printf(b, "%s\n    {\"id\": %d, \"content\": ", first ? "" : ",", id);
        if (!r) r = nb_buf_json_str(b, s, n);
        if (!r) r = nb_buf_printf(b, ", \"single_word\": false, \"lstrip\": false, \"rstrip\": false, "
                                     "\"normalized\": false, \"special\": true}");
        first = 0;
    }
    return r ? r : nb_buf_printf(b, "\n  ],\n");
}

static int write_model(const nb_tokenizer *t, nb_buf *b) {
    uint32_t cp_of[256];
    byte_alphabet(cp_of);
    int r = nb_buf_printf(b, "  \"model\": {\n    \"type\": \"BPE\",\n    \"dropout\": null,\n    \"unk_token\": null,\n"
                             "    \"continuing_subword_prefix\": null,\n    \"end_of_word_suffix\": null,\n"
                             "    \"fuse_unk\": false,\n%s    \"vocab\": {",
                          nb_bpe_ignore_merges(t) ? "    \"ignore_merges\": true,\n" : "");
    int first = 1;
    for (int id = 0; id < nb_tokenizer_vocab_size(t) && !r; id++) {
        size_t n;
        const char *s = nb_tokenizer_token_bytes(t, id, &n);
        if (!n) continue;
        r = nb_buf_printf(b, "%s\n      ", first ? "" : ",");
        if (!r) r = put_byte_level(b, s, n, cp_of);
        if (!r) r = nb_buf_printf(b, ": %d", id);
        first = 0;
    }
    if (!r) r = nb_buf_printf(b, "\n    },\n    \"merges\": [");
    for (int k = 0; k < nb_tokenizer_n_merges(t) && !r; k++) {
        uint32_t left, right;
        size_t ln, rn;
        nb_tokenizer_merge(t, k, &left, &right);
        const char *ls = nb_tokenizer_token_bytes(t, (int)left, &ln), *rs = nb_tokenizer_token_bytes(t, (int)right, &rn);
        char *s = malloc(2 * (ln + rn) + 2);
        if (!s) return nb_fail("out of memory");
        size_t m = 0;
        for (size_t i = 0; i < ln; i++) put_utf8(cp_of[(unsigned char)ls[i]], s, &m);
        s[m++] = ' ';
        for (size_t i = 0; i < rn; i++) put_utf8(cp_of[(unsigned char)rs[i]], s, &m);
        r = nb_buf_printf(b, "%s\n      ", k ? "," : "");
        if (!r) r = nb_buf_json_str(b, s, m);
        free(s);
    }
    return r ? r : nb_buf_printf(b, "%s]\n  }\n}\n", nb_tokenizer_n_merges(t) ? "\n    " : "");
}

/* Any tokenizer as Split(regex) then ByteLevel: Llama 3's form, which holds GPT-2's too. Only
 * fields that tokenizers 0.13 (transformers 4.31's) reads are written. */
int nb_bpe_serialize_hf(const nb_tokenizer *t, nb_buf *b) {
    int r = nb_buf_printf(b, "{\n  \"version\": \"1.0\",\n  \"truncation\": null,\n  \"padding\": null,\n");
    if (!r) r = write_added_tokens(t, b);
    if (!r) r = nb_buf_printf(b, "  \"normalizer\": null,\n  \"pre_tokenizer\": {\"type\": \"Sequence\", \"pretokenizers\": [\n"
                                 "    {\"type\": \"Split\", \"pattern\": {\"Regex\": ");
    if (!r) r = nb_buf_json_str(b, nb_bpe_pattern(t), strlen(nb_bpe_pattern(t)));
    if (!r) r = nb_buf_printf(b, "}, \"behavior\": \"Isolated\", \"invert\": false},\n"
                                 "    {\"type\": \"ByteLevel\", \"add_prefix_space\": false, \"trim_offsets\": true, "
                                 "\"use_regex\": false}\n  ]},\n  \"post_processor\": null,\n"
                                 "  \"decoder\": {\"type\": \"ByteLevel\", \"add_prefix_space\": false, "
                                 "\"trim_offsets\": true, \"use_regex\": true},\n");
    if (!r) r = write_model(t, b);
    return r;
}
