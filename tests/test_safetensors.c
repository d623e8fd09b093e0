/* safetensors and the Hugging Face export: bytes against the format (docs/checkpoints.md), round trips,
 * every rejection of a damaged file, export/import across stage splits (tied and untied),
 * config.json, and atomic writes. */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "check.h"
#include "checkpoint/checksum.h"
#include "util/json.h"
#include "util/clock.h"
#include "nobubble/checkpoint.h"

static char dir[256];

static char *pathf(const char *name) {
    static char p[8][512];
    static int k;
    k = (k + 1) % 8;
    snprintf(p[k], sizeof p[k], "%s/%s", dir, name);
    return p[k];
}

/* entries of a folder other than . and .. */
static int count_entries(const char *d) {
    DIR *dd = opendir(d);
    if (!dd) return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(dd))) if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) n++;
    closedir(dd);
    return n;
}

static void rm_rf(const char *d) {
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", d);
    check_run(cmd);
}

/* A hand-made file: u64 length (header_len, or the real length when -1), the header, the data. */
#define REAL_LEN (~0ULL)
static void write_raw(const char *name, const char *header, unsigned long long header_len, const void *data, size_t n) {
    FILE *f = fopen(pathf(name), "wb");
    unsigned long long N = header_len == REAL_LEN ? strlen(header) : header_len;
    unsigned char len8[8];
    for (int b = 0; b < 8; b++) len8[b] = (unsigned char)(N >> (8 * b));
    fwrite(len8, 1, 8, f);
    fwrite(header, 1, strlen(header), f);
    if (n) fwrite(data, 1, n, f);
    fclose(f);
}

static void expect_reject(const char *name, const char *what) {
    nb_st_file f;
    int r = nb_st_open(pathf(name), &f);
    CHECK(r == -1, "%s: opened a bad file (%s)", name, what);
    if (r == 0) { nb_st_close(&f); return; }
    const char *e = nb_last_error();
    CHECK(strstr(e, pathf(name)) != NULL, "%s: error does not name the file: %s", name, e);
    CHECK(strstr(e, what) != NULL, "%s: error does not say '%s': %s", name, what, e);
}

/* ------------------------------------------------------------ the spec, byte by byte */
static void test_spec_bytes(void) {
    float a[2] = {1.0f, -2.0f};
    nb_st_tensor t = {"a", 1, {2}, a};
    CHECK(nb_st_write(pathf("spec.safetensors"), &t, 1, NULL, 0) == 0, "write: %s", nb_last_error());
    size_t n;
    unsigned char *p = check_slurp(pathf("spec.safetensors"), &n);
    /* JSON: 182 bytes by hand (the tensor's checksum is Python xxhash's XXH3 of the 8 tensor bytes, the
     * header's its XXH3 of the header's canonical form: `python3 tools/reference/checksums.py --vectors`),
     * padded with 2 spaces to 184; then 8 tensor bytes: 200 in all */
    const char *json = "{\"__metadata__\":{\"format\":\"pt\",\"nobubble.checksum:a\":\"xxh3:28a0ba9c345d3723\","
                       "\"nobubble.header_checksum\":\"xxh3:597fe6d5e60d29e6\"},"
                       "\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}";
    CHECK(strlen(json) == 182, "hand-computed JSON length");
    CHECK(p && n == 200, "file size %zu, expected 8 + 184 + 8 = 200", n);
    if (!p || n != 200) { free(p); return; }
    unsigned char len8[8] = {184, 0, 0, 0, 0, 0, 0, 0};
    CHECK(memcmp(p, len8, 8) == 0, "header length field is not 184 little-endian");
    CHECK(memcmp(p + 8, json, 182) == 0, "header JSON differs: %.184s", (const char *)p + 8);
    CHECK(memcmp(p + 8 + 182, "  ", 2) == 0, "padding is not 2 spaces");
    /* 1.0f = 0x3F800000, -2.0f = 0xC0000000, little-endian */
    unsigned char data[8] = {0x00, 0x00, 0x80, 0x3F, 0x00, 0x00, 0x00, 0xC0};
    CHECK(memcmp(p + 192, data, 8) == 0, "tensor bytes differ");
    nb_json root;
    CHECK(nb_json_parse((const char *)p + 8, 184, &root, "spec header") == 0, "header does not parse: %s", nb_last_error());
    const nb_json *ta = nb_json_get(&root, "a"), *md = nb_json_get(&root, "__metadata__");
    CHECK(md && nb_json_get(md, "format") && !strcmp(nb_json_get(md, "format")->str, "pt"), "__metadata__.format != pt");
    const nb_json *off = ta ? nb_json_get(ta, "data_offsets") : NULL;
    CHECK(off && off->n == 2 && off->items[0].i == 0 && off->items[1].i == 8, "data_offsets != [0, 8]");
    nb_json_free(&root);
    free(p);

    /* every header is padded to 8, with extra metadata and several tensors; offsets follow order */
    float b[6] = {1, 2, 3, 4, 5, 6}, c[1] = {7};
    nb_st_tensor ts[3] = {{"b", 2, {2, 3}, b}, {"s", 0, {0}, c}, {"e", 1, {0}, NULL}};
    const char *meta[4] = {"producer", "nobubble \"x\"", "step", "12"};
    CHECK(nb_st_write(pathf("meta.safetensors"), ts, 3, meta, 2) == 0, "write with metadata: %s", nb_last_error());
    p = check_slurp(pathf("meta.safetensors"), &n);
    unsigned long long N = 0;
    for (int i = 0; i < 8; i++) N |= (unsigned long long)p[i] << (8 * i);
    CHECK(N % 8 == 0 && n == 8 + N + 28, "header length %llu not a multiple of 8 or size %zu wrong", N, n);
    CHECK(nb_json_parse((const char *)p + 8, N, &root, "meta header") == 0, "meta header parse: %s", nb_last_error());
    const nb_json *ob = nb_json_get(&root, "b"), *os = nb_json_get(&root, "s");
    md = nb_json_get(&root, "__metadata__");
    /* format, the two given, a checksum per tensor, the header's */
    CHECK(md && md->n == 7 && !strcmp(nb_json_get(md, "producer")->str, "nobubble \"x\""), "metadata not written");
    CHECK(ob && nb_json_get(ob, "data_offsets")->items[1].i == 24, "b offsets");
    CHECK(os && nb_json_get(os, "shape")->n == 0 && nb_json_get(os, "data_offsets")->items[0].i == 24 &&
              nb_json_get(os, "data_offsets")->items[1].i == 28, "scalar offsets");
    CHECK(memcmp(p + 8 + N, b, 24) == 0 && memcmp(p + 8 + N + 24, c, 4) == 0, "meta file data bytes");
    nb_json_free(&root);
    free(p);
    nb_st_file f;
    CHECK(nb_st_open(pathf("meta.safetensors"), &f) == 0, "open meta: %s", nb_last_error());
    if (f.fd >= 0) {
        CHECK(nb_st_meta(&f, "format") && !strcmp(nb_st_meta(&f, "format"), "pt"), "meta format");
        CHECK(nb_st_meta(&f, "step") && !strcmp(nb_st_meta(&f, "step"), "12"), "meta step");
        CHECK(f.n == 3 && nb_st_find(&f, "e") && nb_st_find(&f, "e")->numel == 0, "empty tensor listed");
        nb_st_close(&f);
    }
    /* writer refusals */
    nb_st_tensor dup[2] = {{"x", 1, {1}, c}, {"x", 1, {1}, c}};
    CHECK(nb_st_write(pathf("dup.safetensors"), dup, 2, NULL, 0) == -1 && strstr(nb_last_error(), "twice"), "duplicate written");
    nb_st_tensor five = {"x", 5, {1, 1, 1, 1}, c};
    CHECK(nb_st_write(pathf("dup.safetensors"), &five, 1, NULL, 0) == -1, "5-D written");
    const char *fmt[2] = {"format", "np"};
    CHECK(nb_st_write(pathf("dup.safetensors"), &t, 1, fmt, 1) == -1, "metadata format overridden");
    const char *sum[2] = {"nobubble.checksum:a", "xxh3:0000000000000000"};
    CHECK(nb_st_write(pathf("dup.safetensors"), &t, 1, sum, 1) == -1 && strstr(nb_last_error(), "reserved"),
          "a checksum key given by the caller was written");
    const char *hsum[2] = {"nobubble.header_checksum", "xxh3:0000000000000000"};
    CHECK(nb_st_write(pathf("dup.safetensors"), &t, 1, hsum, 1) == -1 && strstr(nb_last_error(), "reserved"),
          "the header's checksum key given by the caller was written");
    /* the writer parses its header with nb_st_open's parser (for the header's checksum): an empty tensor with a
     * dimension past the JSON reader's integers (19 digits), which nb_st_open would refuse, is not written */
    nb_st_tensor huge = {"x", 2, {0, (int64_t)1 << 62}, c};
    CHECK(nb_st_write(pathf("dup.safetensors"), &huge, 1, NULL, 0) == -1 && strstr(nb_last_error(), "shape entry 1"),
          "a header that nb_st_open refuses was written: %s", nb_last_error());
    CHECK(access(pathf("dup.safetensors"), F_OK) != 0, "a refused write left a file");
}

/* ------------------------------------------------------------ round trip */
static void test_roundtrip(void) {
    float w[2 * 3], g[5], s4[2 * 1 * 3 * 2], sc[1] = {-0.0f};
    for (int i = 0; i < 6; i++) w[i] = (float)i * 0.37f - 1.0f;
    for (int i = 0; i < 5; i++) g[i] = 1.0f / (float)(i + 1);
    for (int i = 0; i < 12; i++) s4[i] = ldexpf(1.0f, i - 140);   /* subnormals too */
    nb_st_tensor t[4] = {{"model.w", 2, {2, 3}, w}, {"g", 1, {5}, g}, {"four.d", 4, {2, 1, 3, 2}, s4}, {"scalar", 0, {0}, sc}};
    CHECK(nb_st_write(pathf("rt.safetensors"), t, 4, NULL, 0) == 0, "write: %s", nb_last_error());
    nb_st_file f;
    if (nb_st_open(pathf("rt.safetensors"), &f)) {
        CHECK(0, "open: %s", nb_last_error());
        return;
    }
    CHECK(f.n == 4, "%d tensors, expected 4", f.n);
    for (int i = 0; i < 4 && f.n == 4; i++) {
        const nb_st_entry *e = &f.entries[i];
        CHECK(!strcmp(e->name, t[i].name) && e->dtype == NB_ST_F32 && e->ndim == t[i].ndim, "entry %d", i);
        size_t numel = 1;
        for (int d = 0; d < t[i].ndim; d++) {
            CHECK(e->shape[d] == t[i].shape[d], "%s dim %d", t[i].name, d);
            numel *= (size_t)t[i].shape[d];
        }
        float out[16];
        CHECK(nb_st_read_f32(&f, t[i].name, out, numel) == 0, "read %s: %s", t[i].name, nb_last_error());
        CHECK(memcmp(out, t[i].data, numel * 4) == 0, "%s bytes differ", t[i].name);
    }
    float out[16];
    CHECK(nb_st_read_f32(&f, "g", out, 4) == -1 && strstr(nb_last_error(), "5 elements"), "wrong count accepted");
    CHECK(nb_st_read_f32(&f, "nope", out, 1) == -1 && strstr(nb_last_error(), "'nope'"), "missing tensor read");
    nb_st_close(&f);
}

/* ------------------------------------------------------------ 16-bit dtypes */
static void test_half(void) {
    /* BF16: 1.0 = 0x3F80, -3.0 = 0xC040; F16: 1.0 = 0x3C00, -2.0 = 0xC000, 2^-24 = 0x0001,
     * inf = 0x7C00, 0x3555 = 0.333251953125, 65504 = 0x7BFF */
    unsigned char d[16] = {0x80, 0x3F, 0x40, 0xC0, 0x00, 0x3C, 0x00, 0xC0, 0x01, 0x00, 0x00, 0x7C, 0x55, 0x35, 0xFF, 0x7B};
    write_raw("half.safetensors",
              "{\"b\":{\"dtype\":\"BF16\",\"shape\":[2],\"data_offsets\":[0,4]},"
              "\"h\":{\"dtype\":\"F16\",\"shape\":[2,3],\"data_offsets\":[4,16]}}",
              -1, d, 16);
    nb_st_file f;
    if (nb_st_open(pathf("half.safetensors"), &f)) {
        CHECK(0, "open half: %s", nb_last_error());
        return;
    }
    float b[2], h[6];
    CHECK(nb_st_read_f32(&f, "b", b, 2) == 0 && b[0] == 1.0f && b[1] == -3.0f, "BF16 values %g %g", b[0], b[1]);
    CHECK(nb_st_read_f32(&f, "h", h, 6) == 0, "read F16: %s", nb_last_error());
    CHECK(h[0] == 1.0f && h[1] == -2.0f && h[2] == ldexpf(1.0f, -24) && isinf(h[3]) && h[3] > 0 &&
              h[4] == 0.333251953125f && h[5] == 65504.0f,
          "F16 values %g %g %g %g %g %g", h[0], h[1], h[2], h[3], h[4], h[5]);
    nb_st_close(&f);
}

/* ------------------------------------------------------------ checksums */
/* nbh64 as docs/checkpoints.md defines it, word by word with no streaming or blocks: the reference
 * nb_st_checksum is checked against. */
static uint64_t ref_mix(uint64_t x) {
    x = (x ^ (x >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    x = (x ^ (x >> 27)) * UINT64_C(0x94D049BB133111EB);
    return x ^ (x >> 31);
}

static uint64_t ref_nbh64(const unsigned char *b, size_t n) {
    const uint64_t G = UINT64_C(0x9E3779B97F4A7C15);
    uint64_t lane[4] = {G, 2 * G, 3 * G, 4 * G}, h = n;
    for (size_t j = 0; 8 * j < n; j++) {
        uint64_t w = 0;
        for (size_t k = 0; k < 8 && 8 * j + k < n; k++) w |= (uint64_t)b[8 * j + k] << (8 * k);
        uint64_t x = (lane[j % 4] ^ w) * G;
        lane[j % 4] = x ^ (x >> 29);
    }
    for (int i = 0; i < 4; i++) h = ref_mix(h ^ lane[i]);
    return h;
}

static void test_checksum_values(void) {
    unsigned char b[300];
    for (int i = 0; i < 300; i++) b[i] = (unsigned char)i;
    /* from `python3 tools/reference/checksums.py --vectors` (Python's xxhash): XXH3 of the first k of the
     * bytes 0, 1, 2, ..., across the sizes where XXH3 changes its method (0, 1-3, 4-8, 9-16, 17-128,
     * 129-240, more) */
    static const struct { size_t k; uint64_t want; } xxh3[] = {
        {0, UINT64_C(0x2d06800538d394c2)},   {1, UINT64_C(0xc44bdff4074eecdb)},   {3, UINT64_C(0x5f4299fc161c9cbb)},
        {4, UINT64_C(0x60dab036a58211f2)},   {8, UINT64_C(0x3a1c2d7c85af88f8)},   {16, UINT64_C(0x8355e3a6f61770db)},
        {17, UINT64_C(0x9ef341a99de37328)},  {128, UINT64_C(0x85c6174c7ff4c46b)}, {129, UINT64_C(0xec7642b431ba3e5a)},
        {240, UINT64_C(0x375a384d957fe865)}, {241, UINT64_C(0x02e8cd95421c6d02)}, {256, UINT64_C(0x9408a4433b952d71)}};
    for (size_t v = 0; v < sizeof xxh3 / sizeof xxh3[0]; v++)
        CHECK(nb_st_checksum(b, xxh3[v].k) == xxh3[v].want, "XXH3 of %zu bytes: %016llx, python says %016llx",
              xxh3[v].k, (unsigned long long)nb_st_checksum(b, xxh3[v].k), (unsigned long long)xxh3[v].want);
    /* from `python3 tools/reference/nbh64.py --vectors`: nbh64, which older files hold */
    static const struct { size_t k; uint64_t want; } vec[] = {
        {0, UINT64_C(0xaaffdc6c8cf7420b)},  {1, UINT64_C(0x90422c49d61d2439)},  {7, UINT64_C(0x523f454400269fbe)},
        {8, UINT64_C(0xef69074d4080fbeb)},  {31, UINT64_C(0xb7dfe298f250a2e5)}, {32, UINT64_C(0x6cfec7851e10fbf5)},
        {33, UINT64_C(0x8753b1118af4f0ac)}, {100, UINT64_C(0xe4807bbd52e2127e)}};
    for (size_t v = 0; v < sizeof vec / sizeof vec[0]; v++)
        CHECK(nbh64_of(b, vec[v].k) == vec[v].want, "nbh64 of %zu bytes: %016llx, python says %016llx", vec[v].k,
              (unsigned long long)nbh64_of(b, vec[v].k), (unsigned long long)vec[v].want);
    uint64_t x = 12345;
    for (int i = 0; i < 300; i++) b[i] = (unsigned char)((x = x * 6364136223846793005ULL + 1442695040888963407ULL) >> 56);
    int same = 1, streamed = 1;
    for (size_t n = 0; n <= 300; n++) {
        same &= nbh64_of(b, n) == ref_nbh64(b, n);
        for (int algo = NB_ST_XXH3; algo <= NB_ST_NBH64; algo++) {
            nb_sum h;   /* the same bytes in pieces of 1 to 37 bytes */
            nb_sum_init(&h, (nb_st_algo)algo);
            for (size_t at = 0, piece = n % 37 + 1; at < n; at += piece) nb_sum_update(&h, b + at, n - at < piece ? n - at : piece);
            streamed &= nb_sum_final(&h) == (algo == NB_ST_XXH3 ? nb_st_checksum(b, n) : nbh64_of(b, n));
        }
    }
    CHECK(same, "nbh64 differs from the word-by-word reference");
    CHECK(streamed, "the checksum in pieces differs from the one of the whole");
    uint64_t whole = nbh64_of(b, 100);
    int changed = 1;   /* every flipped bit changes nbh64 (each step is invertible) */
    for (int bit = 0; bit < 800; bit++) {
        b[bit / 8] ^= (unsigned char)(1 << bit % 8);
        changed &= nbh64_of(b, 100) != whole;
        b[bit / 8] ^= (unsigned char)(1 << bit % 8);
    }
    CHECK(changed, "a flipped bit left the checksum as it was");
}

/* The two fixtures of tests/fixtures/checksums/, written by tools/reference/checksums.py (Python's
 * xxhash for XXH3, nbh64.py for the older files): both read and verify, and a flipped byte in a copy
 * of either is caught naming the algorithm its header names. */
static void test_checksum_fixtures(void) {
    static const float w[5] = {0.5f, -1.25f, 3.0f, 1e-3f, -7.5f}, bias[3] = {2.0f, -0.0f, 0.125f};
    static const char *names[2] = {"tiny_xxh3", "tiny_nbh64"}, *algo[2] = {"xxh3:", "nbh64:"};
    for (int k = 0; k < 2; k++) {
        char path[256];
        snprintf(path, sizeof path, "tests/fixtures/checksums/%s.safetensors", names[k]);
        nb_st_file f;
        if (nb_st_open(path, &f)) {
            CHECK(0, "open %s: %s", path, nb_last_error());
            continue;
        }
        const nb_st_entry *e = nb_st_find(&f, "w");
        CHECK(e && e->has_checksum && e->checksum_algo == (k ? NB_ST_NBH64 : NB_ST_XXH3), "%s: algorithm not %s", path, algo[k]);
        float ow[5], ob[3];
        CHECK(nb_st_read_f32(&f, "w", ow, 5) == 0 && !memcmp(ow, w, sizeof w), "%s: w: %s", path, nb_last_error());
        CHECK(nb_st_read_f32(&f, "b", ob, 3) == 0 && !memcmp(ob, bias, sizeof bias), "%s: b: %s", path, nb_last_error());
        if (!k) CHECK(e && e->checksum == UINT64_C(0xc58270ced52e45d3), "%s: w's checksum is not python's", path);
        nb_st_close(&f);
        size_t n;
        unsigned char *raw = check_slurp(path, &n);
        char copy[64];
        snprintf(copy, sizeof copy, "%s_flipped.safetensors", names[k]);
        FILE *out = raw ? fopen(pathf(copy), "wb") : NULL;
        if (out) {
            raw[n - 1] ^= 0x01;   /* the last byte of b */
            fwrite(raw, 1, n, out);
            fclose(out);
        }
        free(raw);
        CHECK(nb_st_open(pathf(copy), &f) == 0, "open %s: %s", copy, nb_last_error());
        if (f.fd < 0) continue;
        CHECK(nb_st_read_f32(&f, "b", ob, 3) == -1 && strstr(nb_last_error(), "checksum mismatch") &&
                  strstr(nb_last_error(), algo[k]),
              "%s: a flipped byte was read or the error does not name %s: %s", copy, algo[k], nb_last_error());
        nb_st_close(&f);
    }
}

/* Writes a copy of path (into the test's folder, as name) with the first occurrence of `from` in its header
 * replaced by `to` (the same length); 0 when done. */
static int copy_with(const char *path, const char *name, const char *from, const char *to) {
    size_t n;
    unsigned char *raw = check_slurp(path, &n);
    const size_t len = strlen(from);
    unsigned char *at = NULL;
    for (size_t i = 0; raw && !at && i + len <= n; i++)
        if (!memcmp(raw + i, from, len)) at = raw + i;
    FILE *out = at ? fopen(pathf(name), "wb") : NULL;
    if (out) {
        memcpy(at, to, strlen(to));
        fwrite(raw, 1, n, out);
        fclose(out);
    }
    free(raw);
    return out ? 0 : -1;
}

/* The header's checksum: the fixture that Python wrote with one (tools/reference/checksums.py, its own
 * canonical form and xxhash) opens; a value, a key or an entry changed so that the header still parses is
 * refused naming the header's checksum; the older fixtures, without one, open as before. */
static void test_header_checksum(void) {
    const char *path = "tests/fixtures/checksums/tiny_header.safetensors";
    nb_st_file f;
    CHECK(nb_st_open(path, &f) == 0, "open %s: %s", path, nb_last_error());
    if (f.fd >= 0) {
        CHECK(nb_st_meta(&f, "run.lr") && !strcmp(nb_st_meta(&f, "run.lr"), "0.004") && nb_st_meta(&f, "note") &&
                  !strcmp(nb_st_meta(&f, "note"), "caf\xc3\xa9 \"q\""), "%s: metadata", path);
        nb_st_close(&f);
    }
    static const char *const edits[][3] = {
        {"lr_changed", "\"0.004\"", "\"0.005\""},             /* a value that still parses */
        {"key_changed", "\"next_step\"", "\"next_stop\""},     /* a key */
        {"escaped_changed", "\\\"q\\\"", "\\\"r\\\""},     /* a character inside an escaped value */
        {"sum_changed", "0fe3474af84f3421", "0fe3474af84f3420"},  /* the header's checksum itself */
    };
    for (size_t k = 0; k < sizeof edits / sizeof edits[0]; k++) {
        char name[64];
        snprintf(name, sizeof name, "header_%s.safetensors", edits[k][0]);
        if (copy_with(path, name, edits[k][1], edits[k][2])) {
            CHECK(0, "%s: the fixture has no %s", path, edits[k][1]);
            continue;
        }
        int r = nb_st_open(pathf(name), &f);
        if (!r) nb_st_close(&f);
        CHECK(r == -1 && strstr(nb_last_error(), pathf(name)) && strstr(nb_last_error(), "header checksum mismatch"),
              "%s: opened, or the error does not name the header's checksum: %s", name, r ? nb_last_error() : "(opened)");
    }
    /* an entry changed so that every other check passes: a [2, 3] tensor read as [3, 2] */
    float b6[6] = {1, 2, 3, 4, 5, 6};
    nb_st_tensor t = {"m", 2, {2, 3}, b6};
    CHECK(nb_st_write(pathf("header_shape.safetensors"), &t, 1, NULL, 0) == 0, "write: %s", nb_last_error());
    CHECK(copy_with(pathf("header_shape.safetensors"), "header_shape_changed.safetensors", "[2,3]", "[3,2]") == 0,
          "copy");
    CHECK(nb_st_open(pathf("header_shape_changed.safetensors"), &f) == -1 &&
              strstr(nb_last_error(), "header checksum mismatch"), "a shape changed to [3, 2]: %s", nb_last_error());
    CHECK(nb_st_open(pathf("header_shape.safetensors"), &f) == 0, "the file as written: %s", nb_last_error());
    if (f.fd >= 0) nb_st_close(&f);
    CHECK(copy_with(path, "header_bad_value.safetensors", "xxh3:0fe3", "xxh4:0fe3") == 0, "copy");
    CHECK(nb_st_open(pathf("header_bad_value.safetensors"), &f) == -1 &&
              strstr(nb_last_error(), "nobubble.header_checksum") && strstr(nb_last_error(), "is not a checksum"),
          "a header checksum that names no algorithm: %s", nb_last_error());
}

static void flip_byte(const char *path, long at) {
    FILE *f = fopen(path, "r+b");
    if (!f) return;
    fseek(f, at, SEEK_SET);
    int c = fgetc(f);
    fseek(f, at, SEEK_SET);
    fputc(c ^ 0x10, f);
    fclose(f);
}

/* Reads tensor name of path (n values) after flipping the byte `at` of its data; 0 when read. */
static int read_flipped(const char *name, const char *tensor, size_t n, long at) {
    nb_st_file f;
    if (nb_st_open(pathf(name), &f)) {
        CHECK(0, "open %s: %s", name, nb_last_error());
        return -1;
    }
    const nb_st_entry *e = nb_st_find(&f, tensor);
    if (at >= 0 && e) flip_byte(pathf(name), (long)(f.data_start + e->begin) + at);
    float *out = malloc(sizeof(float) * (n ? n : 1));
    int r = nb_st_read_f32(&f, tensor, out, n);
    free(out);
    nb_st_close(&f);
    return r;
}

static void expect_mismatch(const char *name, const char *tensor, const char *what) {
    const char *e = nb_last_error();
    char want[300];
    snprintf(want, sizeof want, "%s: tensor '%s': data checksum mismatch", pathf(name), tensor);
    CHECK(strstr(e, want) && strstr(e, "the file is corrupt"), "%s: the error does not name file and tensor: %s", what, e);
}

static void test_checksum_file(void) {
    enum { BIG = 300000 };   /* 1.2 MB: read in two pieces */
    float small[3] = {1, 2, 3}, *big = malloc(sizeof(float) * BIG);
    for (int i = 0; i < BIG; i++) big[i] = (float)i * 0.25f;
    nb_st_tensor t[3] = {{"small", 1, {3}, small}, {"big", 1, {BIG}, big}, {"empty", 1, {0}, NULL}};
    const char *names[3] = {"sum.safetensors", "sum_small.safetensors", "sum_big.safetensors"};
    for (int i = 0; i < 3; i++) CHECK(nb_st_write(pathf(names[i]), t, 3, NULL, 0) == 0, "write: %s", nb_last_error());
    free(big);
    CHECK(!read_flipped(names[0], "small", 3, -1) && !read_flipped(names[0], "big", BIG, -1) &&
              !read_flipped(names[0], "empty", 0, -1), "an intact file: %s", nb_last_error());
    CHECK(read_flipped(names[1], "small", 3, 5) == -1, "a flipped byte in 'small' was read");
    expect_mismatch(names[1], "small", "small");
    CHECK(read_flipped(names[1], "big", BIG, -1) == 0, "the intact tensor next to it: %s", nb_last_error());
    CHECK(read_flipped(names[2], "big", BIG, 1100000) == -1, "a flipped byte in the second piece of 'big' was read");
    expect_mismatch(names[2], "big", "big");

    /* no checksums (files from Hugging Face): read as before, a flipped byte unnoticed */
    float a[2] = {1.0f, -2.0f};
    write_raw("nosum.safetensors", "{\"__metadata__\":{\"format\":\"pt\"},\"a\":{\"dtype\":\"F32\",\"shape\":[2],"
              "\"data_offsets\":[0,8]}}", REAL_LEN, a, 8);
    CHECK(read_flipped("nosum.safetensors", "a", 2, 1) == 0, "a file without checksums: %s", nb_last_error());
    /* a BF16 tensor with a checksum of its 2-byte values (the 16-bit reader hashes too) */
    unsigned char h16[4] = {0x80, 0x3F, 0x40, 0xC0};
    char header[300];
    snprintf(header, sizeof header, "{\"__metadata__\":{\"nobubble.checksum:b\":\"xxh3:%016llx\"},"
             "\"b\":{\"dtype\":\"BF16\",\"shape\":[2],\"data_offsets\":[0,4]}}", (unsigned long long)nb_st_checksum(h16, 4));
    write_raw("sum16.safetensors", header, REAL_LEN, h16, 4);
    CHECK(read_flipped("sum16.safetensors", "b", 2, -1) == 0, "BF16 with its checksum: %s", nb_last_error());
    CHECK(read_flipped("sum16.safetensors", "b", 2, 3) == -1, "a flipped BF16 byte was read");
    expect_mismatch("sum16.safetensors", "b", "BF16");
    /* a checksum for no tensor (a flipped bit in its key's name), checksums for some tensors only, and a
     * malformed one: refused */
    write_raw("orphan.safetensors", "{\"__metadata__\":{\"nobubble.checksum:x\":\"?\"},"
              "\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", REAL_LEN, a, 8);
    expect_reject("orphan.safetensors", "metadata 'nobubble.checksum:x' is the checksum of a tensor 'x' the file does not hold");
    snprintf(header, sizeof header, "{\"__metadata__\":{\"nobubble.checksum:a\":\"xxh3:%016llx\"},"
             "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
             "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
             (unsigned long long)nb_st_checksum(a, 4));
    write_raw("partsum.safetensors", header, REAL_LEN, a, 8);
    expect_reject("partsum.safetensors", "tensor 'b' has no checksum while 1 other tensor(s) have one");
    write_raw("badsum.safetensors", "{\"__metadata__\":{\"nobubble.checksum:a\":\"xxh3:12345\"},"
              "\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", REAL_LEN, a, 8);
    expect_reject("badsum.safetensors", "metadata 'nobubble.checksum:a' = 'xxh3:12345' is not a checksum");
    write_raw("md5sum.safetensors", "{\"__metadata__\":{\"nobubble.checksum:a\":\"md5:0123456789abcdef\"},"
              "\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", REAL_LEN, a, 8);
    expect_reject("md5sum.safetensors", "expected 'xxh3:' or 'nbh64:'");
}

/* ------------------------------------------------------------ rejections */
static void test_reject(void) {
    unsigned char z[64] = {0};
    const char *ok1 = "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}";
    write_raw("good.safetensors", ok1, REAL_LEN, z, 8);
    nb_st_file f;
    CHECK(nb_st_open(pathf("good.safetensors"), &f) == 0, "the control file is refused: %s", nb_last_error());
    if (f.fd >= 0) nb_st_close(&f);

    FILE *s = fopen(pathf("short.safetensors"), "wb");
    fwrite("abc", 1, 3, s);
    fclose(s);
    expect_reject("short.safetensors", "shorter than the 8-byte header length");
    write_raw("hlen_past.safetensors", ok1, strlen(ok1) + 9, z, 8);
    expect_reject("hlen_past.safetensors", "runs past the end of the file");
    write_raw("hlen_huge.safetensors", ok1, 100000001ULL, z, 8);
    expect_reject("hlen_huge.safetensors", "over the 100 MB limit");
    /* a sparse file big enough to hold the header: the 100 MB limit itself must refuse it */
    write_raw("hlen_big.safetensors", ok1, 100000001ULL, z, 8);
    CHECK(truncate(pathf("hlen_big.safetensors"), 8 + 100000001LL + 8) == 0, "truncate");
    expect_reject("hlen_big.safetensors", "over the 100 MB limit");
    unlink(pathf("hlen_big.safetensors"));
    write_raw("hlen_max.safetensors", ok1, 0xFFFFFFFFFFFFFFFEULL, z, 8);
    expect_reject("hlen_max.safetensors", "over the 100 MB limit");
    write_raw("badjson.safetensors", "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}", REAL_LEN, z, 8);
    expect_reject("badjson.safetensors", "invalid JSON");
    write_raw("notobj.safetensors", "[1,2]", REAL_LEN, NULL, 0);
    expect_reject("notobj.safetensors", "not a JSON object");
    write_raw("overlap.safetensors",
              "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
              "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}", REAL_LEN, z, 12);
    expect_reject("overlap.safetensors", "overlap");
    write_raw("gap.safetensors",
              "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
              "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]}}", REAL_LEN, z, 12);
    expect_reject("gap.safetensors", "gap");
    write_raw("gap_start.safetensors", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", REAL_LEN, z, 8);
    expect_reject("gap_start.safetensors", "gap");
    write_raw("trailing.safetensors", ok1, REAL_LEN, z, 12);
    expect_reject("trailing.safetensors", "after the last tensor");
    write_raw("pastfile.safetensors", ok1, REAL_LEN, z, 4);
    expect_reject("pastfile.safetensors", "run past the end of the file");
    write_raw("count.safetensors", "{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", REAL_LEN, z, 8);
    expect_reject("count.safetensors", "dtype F32 x shape needs 12");
    write_raw("count16.safetensors", "{\"a\":{\"dtype\":\"BF16\",\"shape\":[2,2],\"data_offsets\":[0,16]}}", REAL_LEN, z, 16);
    expect_reject("count16.safetensors", "dtype BF16 x shape needs 8");
    write_raw("dupname.safetensors",
              "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
              "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", REAL_LEN, z, 8);
    expect_reject("dupname.safetensors", "duplicate name 'a'");
    write_raw("dtype.safetensors", "{\"a\":{\"dtype\":\"I64\",\"shape\":[1],\"data_offsets\":[0,8]}}", REAL_LEN, z, 8);
    expect_reject("dtype.safetensors", "unsupported dtype 'I64'");
    write_raw("negshape.safetensors", "{\"a\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,4]}}", REAL_LEN, z, 4);
    expect_reject("negshape.safetensors", "shape entry 0");
    write_raw("backwards.safetensors", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,0]}}", REAL_LEN, z, 4);
    expect_reject("backwards.safetensors", "before begin");
    write_raw("nooffs.safetensors", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1]}}", REAL_LEN, z, 4);
    expect_reject("nooffs.safetensors", "data_offsets must be");
    write_raw("meta.bad.safetensors", "{\"__metadata__\":{\"format\":1}}", REAL_LEN, NULL, 0);
    expect_reject("meta.bad.safetensors", "__metadata__");
    expect_reject("absent.safetensors", "cannot open");
}

/* ------------------------------------------------------------ Hugging Face export / import */
static nb_config small_config(int tied) {
    nb_config c = {.vocab_size = 64, .d_model = 32, .n_layers = 3, .n_heads = 4, .n_kv_heads = 2, .d_ffn = 48,
                   .context = 16, .rope_theta = 10000.0, .norm_eps = 1e-5, .tied = tied};
    return c;
}

static int tied_copy_matches(const nb_model *m) {
    if (!m->cfg.tied || m->n_stages == 1) return 1;
    const nb_stage *first = &m->stages[0], *last = &m->stages[m->n_stages - 1];
    const nb_tensor *cp = &last->tensors[last->n_tensors - 1];
    return cp->tied_copy && !memcmp(last->params + cp->offset, first->params + first->tensors[0].offset,
                                    sizeof(float) * cp->numel);
}

static void test_export_import(void) {
    for (int tied = 0; tied <= 1; tied++)
        for (int from = 1; from <= 3; from += 2)
            for (int to = 1; to <= 3; to += 2) {
                nb_config c = small_config(tied);
                nb_model a, b;
                if (nb_model_create(&a, &c, from, NULL, NULL) || nb_model_create(&b, &c, to, NULL, NULL)) {
                    CHECK(0, "create: %s", nb_last_error());
                    return;
                }
                nb_model_init(&a, 1234);
                nb_model_init(&b, 99);
                CHECK(nb_model_weights_hash(&a) != nb_model_weights_hash(&b), "seeds give equal weights");
                char sub[64];
                snprintf(sub, sizeof sub, "hf_t%d_%d_%d/deeper", tied, from, to);
                CHECK(nb_export_hf(&a, pathf(sub)) == 0, "export: %s", nb_last_error());
                /* scribble on b's tied copy to see it refilled */
                if (tied && to > 1) b.stages[to - 1].params[b.stages[to - 1].tensors[b.stages[to - 1].n_tensors - 1].offset] = 42.0f;
                CHECK(nb_import_hf(&b, pathf(sub)) == 0, "import: %s", nb_last_error());
                CHECK(nb_model_weights_hash(&a) == nb_model_weights_hash(&b),
                      "tied %d, %d -> %d stages: weights differ after import", tied, from, to);
                CHECK(tied_copy_matches(&b), "tied %d, %d -> %d: tied copy not filled", tied, from, to);
                /* the file: HF names, (out, in) shapes, lm_head only when untied */
                char stp[600];
                snprintf(stp, sizeof stp, "%s/model.safetensors", pathf(sub));
                nb_st_file f;
                if (nb_st_open(stp, &f) == 0) {
                    int want_n = 1 + 9 * c.n_layers + 1 + !tied;
                    CHECK(f.n == want_n, "%d tensors in the export, expected %d", f.n, want_n);
                    CHECK((nb_st_find(&f, "lm_head.weight") != NULL) == !tied, "lm_head.weight presence wrong (tied %d)", tied);
                    const nb_st_entry *q = nb_st_find(&f, "model.layers.2.self_attn.k_proj.weight");
                    CHECK(q && q->ndim == 2 && q->shape[0] == 16 && q->shape[1] == 32, "k_proj shape (16, 32)");
                    const nb_st_entry *dn = nb_st_find(&f, "model.layers.0.mlp.down_proj.weight");
                    CHECK(dn && dn->shape[0] == 32 && dn->shape[1] == 48, "down_proj shape (32, 48)");
                    CHECK(nb_st_find(&f, "model.norm.weight") && nb_st_find(&f, "model.embed_tokens.weight"), "names");
                    CHECK(!strcmp(f.entries[0].name, "model.embed_tokens.weight"), "first tensor is the embedding");
                    CHECK(nb_st_meta(&f, "format") && !strcmp(nb_st_meta(&f, "format"), "pt"), "format pt");
                    nb_st_close(&f);
                } else {
                    CHECK(0, "reopen export: %s", nb_last_error());
                }
                nb_model_free(&a);
                nb_model_free(&b);
            }
}

/* the export does not depend on the split */
static void test_same_file(void) {
    for (int tied = 0; tied <= 1; tied++) {
        char a[600], b[600];
        snprintf(a, sizeof a, "%s/hf_t%d_1_1/deeper/model.safetensors", dir, tied);
        snprintf(b, sizeof b, "%s/hf_t%d_3_1/deeper/model.safetensors", dir, tied);
        size_t na = 0, nb = 0;
        unsigned char *pa = check_slurp(a, &na), *pb = check_slurp(b, &nb);
        CHECK(pa && pb && na == nb && !memcmp(pa, pb, na), "tied %d: 1- and 3-stage exports differ", tied);
        free(pa);
        free(pb);
    }
}

static void test_config_json(void) {
    for (int tied = 0; tied <= 1; tied++) {
        nb_config c = small_config(tied);
        nb_model m;
        if (nb_model_create(&m, &c, 1, NULL, NULL)) return;
        nb_model_init(&m, 5);
        char sub[32];
        snprintf(sub, sizeof sub, "cfg%d", tied);
        CHECK(nb_export_hf(&m, pathf(sub)) == 0, "export: %s", nb_last_error());
        nb_model_free(&m);
        char p[600];
        snprintf(p, sizeof p, "%s/config.json", pathf(sub));
        size_t n;
        unsigned char *text = check_slurp(p, &n);
        nb_json root;
        if (!text || nb_json_parse((char *)text, n, &root, "config.json")) {
            CHECK(0, "config.json missing or bad: %s", nb_last_error());
            free(text);
            continue;
        }
        const nb_json *v = nb_json_get(&root, "architectures");
        CHECK(v && v->type == NB_JARR && v->n == 1 && !strcmp(v->items[0].str, "LlamaForCausalLM"), "architectures");
        struct { const char *k; long long want; } ints[] = {
            {"vocab_size", 64}, {"hidden_size", 32}, {"intermediate_size", 48}, {"num_hidden_layers", 3},
            {"num_attention_heads", 4}, {"num_key_value_heads", 2}, {"max_position_embeddings", 16},
            {"head_dim", 8}, {"eos_token_id", 63}};
        for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++) {
            v = nb_json_get(&root, ints[i].k);
            CHECK(v && v->is_int && v->i == ints[i].want, "config.json %s != %lld", ints[i].k, ints[i].want);
        }
        v = nb_json_get(&root, "rms_norm_eps");
        CHECK(v && v->num == 1e-5, "rms_norm_eps");
        v = nb_json_get(&root, "rope_theta");
        CHECK(v && v->num == 10000.0, "rope_theta");
        v = nb_json_get(&root, "tie_word_embeddings");
        CHECK(v && v->type == NB_JBOOL && v->b == tied, "tie_word_embeddings");
        struct { const char *k, *want; } strs[] = {{"model_type", "llama"}, {"hidden_act", "silu"}, {"torch_dtype", "float32"}};
        for (size_t i = 0; i < 3; i++) {
            v = nb_json_get(&root, strs[i].k);
            CHECK(v && v->type == NB_JSTR && !strcmp(v->str, strs[i].want), "config.json %s", strs[i].k);
        }
        v = nb_json_get(&root, "attention_bias");
        CHECK(v && v->type == NB_JBOOL && !v->b, "attention_bias false");
        v = nb_json_get(&root, "mlp_bias");
        CHECK(v && v->type == NB_JBOOL && !v->b, "mlp_bias false");
        nb_json_free(&root);
        free(text);
    }
}

static void test_import_errors(void) {
    nb_config c = small_config(0);
    nb_model m;
    if (nb_model_create(&m, &c, 1, NULL, NULL)) return;
    nb_model_init(&m, 3);
    CHECK(nb_export_hf(&m, pathf("bad")) == 0, "export: %s", nb_last_error());
    uint64_t h0 = nb_model_weights_hash(&m);
    const nb_stage *s = &m.stages[0];
    nb_st_tensor *t = calloc((size_t)s->n_tensors, sizeof *t);
    for (int i = 0; i < s->n_tensors; i++) {
        t[i].name = s->tensors[i].name;
        t[i].ndim = s->tensors[i].ndim;
        t[i].shape[0] = s->tensors[i].shape[0];
        t[i].shape[1] = s->tensors[i].shape[1];
        t[i].data = s->params + s->tensors[i].offset;
    }
    nb_model other;
    nb_model_create(&other, &c, 3, NULL, NULL);
    nb_model_init(&other, 77);
    uint64_t h1 = nb_model_weights_hash(&other);
    /* a missing tensor: drop model.layers.1.mlp.up_proj.weight (index 1 + 9 + 7) */
    nb_st_tensor *u = calloc((size_t)s->n_tensors, sizeof *u);
    int k = 0;
    for (int i = 0; i < s->n_tensors; i++)
        if (i != 17) u[k++] = t[i];
    CHECK(!strcmp(t[17].name, "model.layers.1.mlp.up_proj.weight"), "index 17 is %s", t[17].name);
    CHECK(nb_st_write(pathf("bad/model.safetensors"), u, k, NULL, 0) == 0, "write: %s", nb_last_error());
    CHECK(nb_import_hf(&other, pathf("bad")) == -1 && strstr(nb_last_error(), "missing tensor 'model.layers.1.mlp.up_proj.weight'"),
          "missing tensor: %s", nb_last_error());
    CHECK(nb_model_weights_hash(&other) == h1, "a failed import changed the model");
    /* a shape mismatch: o_proj of block 2 written transposed (its a square here, so use gate_proj) */
    memcpy(u, t, sizeof *t * (size_t)s->n_tensors);
    int g = 1 + 9 * 2 + 6;
    CHECK(!strcmp(t[g].name, "model.layers.2.mlp.gate_proj.weight"), "index %d is %s", g, t[g].name);
    u[g].shape[0] = t[g].shape[1];
    u[g].shape[1] = t[g].shape[0];
    CHECK(nb_st_write(pathf("bad/model.safetensors"), u, s->n_tensors, NULL, 0) == 0, "write: %s", nb_last_error());
    CHECK(nb_import_hf(&other, pathf("bad")) == -1 &&
              strstr(nb_last_error(), "'model.layers.2.mlp.gate_proj.weight' has shape [32, 48], the model expects [48, 32]"),
          "shape mismatch: %s", nb_last_error());
    /* an unexpected tensor */
    float extra[1] = {0};
    memcpy(u, t, sizeof *t * (size_t)s->n_tensors);
    nb_st_tensor *v = calloc((size_t)s->n_tensors + 1, sizeof *v);
    memcpy(v, t, sizeof *t * (size_t)s->n_tensors);
    v[s->n_tensors] = (nb_st_tensor){"model.layers.9.extra.weight", 1, {1}, extra};
    CHECK(nb_st_write(pathf("bad/model.safetensors"), v, s->n_tensors + 1, NULL, 0) == 0, "write: %s", nb_last_error());
    CHECK(nb_import_hf(&other, pathf("bad")) == -1 && strstr(nb_last_error(), "unexpected tensor 'model.layers.9.extra.weight'"),
          "unexpected tensor: %s", nb_last_error());
    CHECK(nb_model_weights_hash(&other) == h1, "a failed import changed the model");
    /* a configuration mismatch names the field */
    nb_config c2 = c;
    c2.d_ffn = 64;
    nb_model wide;
    nb_model_create(&wide, &c2, 1, NULL, NULL);
    CHECK(nb_import_hf(&wide, pathf("cfg0")) == -1 && strstr(nb_last_error(), "\"intermediate_size\" is 48"),
          "config mismatch: %s", nb_last_error());
    nb_model_free(&wide);
    nb_config c3 = c;
    c3.tied = 1;
    nb_model_create(&wide, &c3, 1, NULL, NULL);
    CHECK(nb_import_hf(&wide, pathf("cfg0")) == -1 && strstr(nb_last_error(), "tie_word_embeddings"),
          "tie mismatch: %s", nb_last_error());
    nb_model_free(&wide);
    CHECK(nb_import_hf(&other, pathf("no_such_dir")) == -1 && strstr(nb_last_error(), "no_such_dir/config.json"),
          "missing folder: %s", nb_last_error());
    /* and the good file still imports */
    CHECK(nb_export_hf(&m, pathf("bad")) == 0, "re-export: %s", nb_last_error());
    CHECK(nb_import_hf(&other, pathf("bad")) == 0 && nb_model_weights_hash(&other) == h0, "re-import: %s", nb_last_error());
    free(t);
    free(u);
    free(v);
    nb_model_free(&other);
    nb_model_free(&m);
}

/* ------------------------------------------------------------ atomicity */
static void test_atomic(void) {
    float a[3] = {1, 2, 3}, b[3] = {4, 5, 6};
    nb_st_tensor ta = {"x", 1, {3}, a}, tb = {"x", 1, {3}, b};
    const char *nodir = pathf("no/such/folder/x.safetensors");
    CHECK(nb_st_write(nodir, &ta, 1, NULL, 0) == -1, "writing into a missing folder succeeded");
    CHECK(strstr(nb_last_error(), nodir) != NULL, "error does not name the file: %s", nb_last_error());
    CHECK(access(pathf("no"), F_OK) != 0, "a failed write created something");

    check_run("true");
    char sub[512];
    snprintf(sub, sizeof sub, "%s", pathf("atomic"));
    mkdir(sub, 0755);
    char p[600];
    snprintf(p, sizeof p, "%s/w.safetensors", sub);
    CHECK(nb_st_write(p, &ta, 1, NULL, 0) == 0, "write: %s", nb_last_error());
    size_t n1, n2;
    unsigned char *v1 = check_slurp(p, &n1);
    /* refused before any I/O: the old file stays */
    nb_st_tensor bad = {"x", 1, {-3}, b};
    CHECK(nb_st_write(p, &bad, 1, NULL, 0) == -1, "a bad shape was written");
    unsigned char *v2 = check_slurp(p, &n2);
    CHECK(v2 && n1 == n2 && !memcmp(v1, v2, n1), "a refused write changed the existing file");
    free(v2);
    CHECK(count_entries(sub) == 1, "a refused write left %d entries", count_entries(sub));
    /* fails at the rename (the final name is a non-empty folder): temporary removed */
    char isdir[700], inner[800];
    snprintf(isdir, sizeof isdir, "%s/d.safetensors", sub);
    mkdir(isdir, 0755);
    snprintf(inner, sizeof inner, "%s/keep", isdir);
    FILE *kf = fopen(inner, "w");
    fclose(kf);
    CHECK(nb_st_write(isdir, &tb, 1, NULL, 0) == -1 && strstr(nb_last_error(), isdir), "rename onto a folder: %s",
          nb_last_error());
    CHECK(count_entries(sub) == 2, "a failed rename left %d entries (temporary not removed)", count_entries(sub));
    /* success replaces */
    CHECK(nb_st_write(p, &tb, 1, NULL, 0) == 0, "rewrite: %s", nb_last_error());
    v2 = check_slurp(p, &n2);
    CHECK(v2 && n2 == n1 && !memcmp(v2 + n2 - 12, b, 12) && memcmp(v1, v2, n1), "the file was not replaced");
    CHECK(count_entries(sub) == 2, "%d entries after replacing", count_entries(sub));
    free(v1);
    free(v2);
}

/* A header of 200,000 (empty) tensors opens, and every name is found, in well under the minutes that
 * comparing all pairs of names took; a duplicate among them, at the very end, is still found. */
static void test_many_names(void) {
    const int n = 200000;
    nb_buf h = {0};
    int r = nb_buf_put(&h, "{", 1);
    for (int i = 0; i < n && !r; i++)
        r = nb_buf_printf(&h, "%s\"t%d\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[0,0]}", i ? "," : "", i);
    r = r || nb_buf_put(&h, "}", 2);   /* with the NUL, for write_raw */
    CHECK(r == 0, "building the header");
    if (r) return;
    double t0 = nb_now();
    write_raw("many.safetensors", h.p, REAL_LEN, NULL, 0);
    nb_st_file f;
    int ok = nb_st_open(pathf("many.safetensors"), &f) == 0;
    CHECK(ok, "200,000 tensors: %s", nb_last_error());
    int found = 0;
    for (int i = 0; ok && i < n; i += 997) {
        char name[32];
        snprintf(name, sizeof name, "t%d", i);
        const nb_st_entry *e = nb_st_find(&f, name);
        found += e && !strcmp(e->name, name);
    }
    CHECK(found == (n + 996) / 997 && (!ok || nb_st_find(&f, "t200000") == NULL), "names found by nb_st_find: %d", found);
    if (ok) nb_st_close(&f);
    double seconds = nb_now() - t0;
    CHECK(seconds < 20, "opening 200,000 names took %.1f s", seconds);
    h.p[h.n - 2] = ',';   /* a repeated name at the very end */
    h.n--;
    r = nb_buf_printf(&h, "\"t3\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[0,0]}}");
    CHECK(r == 0 && nb_buf_put(&h, "", 1) == 0, "building the header");
    write_raw("many_dup.safetensors", h.p, REAL_LEN, NULL, 0);
    expect_reject("many_dup.safetensors", "duplicate name 't3'");
    nb_buf_free(&h);
}

int main(void) {
    snprintf(dir, sizeof dir, "/tmp/nb_safetensors_XXXXXX");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    test_spec_bytes();
    test_roundtrip();
    test_half();
    test_checksum_values();
    test_checksum_fixtures();
    test_header_checksum();
    test_checksum_file();
    test_reject();
    test_export_import();
    test_same_file();
    test_config_json();
    test_import_errors();
    test_atomic();
    test_many_names();
    rm_rf(dir);
    return check_summary();
}
