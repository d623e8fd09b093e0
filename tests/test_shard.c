/* Token shards: header bytes against the llm.c format spec, rejection of damaged files,
 * hand-made llm.c uint16/uint32 files, atomic writes. */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "check.h"
#include "nobubble/data.h"

static char dir[256];

static char *pathf(const char *name) {
    static char p[4][512];
    static int k;
    k = (k + 1) % 4;
    snprintf(p[k], sizeof p[k], "%s/%s", dir, name);
    return p[k];
}

/* little-endian int32 written by hand, independently of the library */
static void le32(unsigned char *p, long v) {
    unsigned long u = (unsigned long)v;
    p[0] = u & 255; p[1] = (u >> 8) & 255; p[2] = (u >> 16) & 255; p[3] = (u >> 24) & 255;
}

static void write_raw(const char *path, long magic, long version, long count, const void *payload, size_t bytes) {
    unsigned char h[1024] = {0};
    le32(h, magic); le32(h + 4, version); le32(h + 8, count);
    FILE *f = fopen(path, "wb");
    fwrite(h, 1, sizeof h, f);
    if (bytes) fwrite(payload, 1, bytes, f);
    fclose(f);
}

static int count_entries(void) {
    DIR *d = opendir(dir);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d))) if (e->d_name[0] != '.') n++;
    closedir(d);
    return n;
}

static void expect_reject(const char *name, const char *what) {
    nb_shard s;
    int r = nb_shard_open(pathf(name), &s);
    CHECK(r == -1, "%s: opened a bad shard (%s)", name, what);
    if (r == 0) { nb_shard_close(&s); return; }
    const char *e = nb_last_error();
    CHECK(strstr(e, name) != NULL, "%s: error does not name the file: %s", name, e);
    CHECK(strstr(e, what) != NULL, "%s: error does not say '%s': %s", name, what, e);
}

static void test_header_u16(void) {
    uint32_t tok[5] = {0, 1, 258, 50256, 4095};
    CHECK(nb_shard_write(pathf("a.bin"), tok, 5, 50257) == 0, "write: %s", nb_last_error());
    size_t n;
    unsigned char *p = check_slurp(pathf("a.bin"), &n);
    CHECK(p && n == 1024 + 5 * 2, "uint16 shard size %zu, expected 1034", n);
    if (!p || n != 1034) { free(p); return; }
    /* 20240520 = 0x0134D888, little-endian; version 1; count 5 */
    unsigned char want[12] = {0x88, 0xD8, 0x34, 0x01, 1, 0, 0, 0, 5, 0, 0, 0};
    CHECK(memcmp(p, want, 12) == 0, "uint16 header bytes differ from the spec");
    int zeros = 1;
    for (int i = 12; i < 1024; i++) zeros &= p[i] == 0;
    CHECK(zeros, "header entries 3..255 must be 0");
    for (int i = 0; i < 5; i++)
        CHECK(p[1024 + 2 * i] == (tok[i] & 255) && p[1025 + 2 * i] == tok[i] >> 8, "token %d bytes", i);
    free(p);
    nb_shard s;
    CHECK(nb_shard_open(pathf("a.bin"), &s) == 0, "open: %s", nb_last_error());
    CHECK(s.token_bytes == 2 && s.n_tokens == 5 && s.magic == 20240520 && s.version == 1, "fields");
    for (int i = 0; i < 5; i++) CHECK(nb_shard_token(&s, (size_t)i) == tok[i], "token %d", i);
    CHECK(nb_shard_max_token(&s) == 50256, "max token");
    nb_shard_close(&s);
}

static void test_header_u32(void) {
    uint32_t tok[4] = {70000, 3, 65536, 16777215};
    CHECK(nb_shard_write(pathf("b.bin"), tok, 4, 16777216) == 0, "write: %s", nb_last_error());
    size_t n;
    unsigned char *p = check_slurp(pathf("b.bin"), &n);
    CHECK(p && n == 1024 + 4 * 4, "uint32 shard size %zu, expected 1040", n);
    if (!p || n != 1040) { free(p); return; }
    /* 20240801 = 0x0134D9A1; version 7 */
    unsigned char want[12] = {0xA1, 0xD9, 0x34, 0x01, 7, 0, 0, 0, 4, 0, 0, 0};
    CHECK(memcmp(p, want, 12) == 0, "uint32 header bytes differ from the spec");
    for (int i = 0; i < 4; i++) {
        uint32_t v = p[1024 + 4 * i] | p[1025 + 4 * i] << 8 | p[1026 + 4 * i] << 16 | (uint32_t)p[1027 + 4 * i] << 24;
        CHECK(v == tok[i], "uint32 token %d = %u", i, v);
    }
    free(p);
    /* the width switches exactly above 65536 */
    uint32_t t2[1] = {65535};
    nb_shard s;
    CHECK(nb_shard_write(pathf("c.bin"), t2, 1, 65536) == 0 && nb_shard_open(pathf("c.bin"), &s) == 0, "65536");
    CHECK(s.token_bytes == 2, "vocab 65536 must be written as uint16");
    nb_shard_close(&s);
    CHECK(nb_shard_write(pathf("c.bin"), t2, 1, 65537) == 0 && nb_shard_open(pathf("c.bin"), &s) == 0, "65537");
    CHECK(s.token_bytes == 4 && nb_shard_token(&s, 0) == 65535, "vocab 65537 must be written as uint32");
    nb_shard_close(&s);
}

static void test_llmc_files(void) {
    /* hand-made files as llm.c's fineweb.py writes them */
    unsigned char u16[6] = {0x50, 0xC4, 0x01, 0x00, 0xFF, 0xFF}; /* 50256, 1, 65535 */
    write_raw(pathf("llmc_u16.bin"), 20240520, 1, 3, u16, sizeof u16);
    nb_shard s;
    CHECK(nb_shard_open(pathf("llmc_u16.bin"), &s) == 0, "llm.c uint16: %s", nb_last_error());
    CHECK(s.n_tokens == 3 && nb_shard_token(&s, 0) == 50256 && nb_shard_token(&s, 1) == 1 &&
          nb_shard_token(&s, 2) == 65535, "llm.c uint16 tokens");
    nb_shard_close(&s);
    unsigned char u32[8] = {0x01, 0x00, 0x02, 0x00, 0x10, 0x32, 0x54, 0x76}; /* 131073, 0x76543210 */
    write_raw(pathf("llmc_u32.bin"), 20240801, 7, 2, u32, sizeof u32);
    CHECK(nb_shard_open(pathf("llmc_u32.bin"), &s) == 0, "llm.c uint32: %s", nb_last_error());
    CHECK(s.n_tokens == 2 && nb_shard_token(&s, 0) == 131073 && nb_shard_token(&s, 1) == 0x76543210u,
          "llm.c uint32 tokens");
    nb_shard_close(&s);
    write_raw(pathf("empty_ok.bin"), 20240520, 1, 0, NULL, 0);
    CHECK(nb_shard_open(pathf("empty_ok.bin"), &s) == 0 && s.n_tokens == 0, "a header-only shard is valid");
    nb_shard_close(&s);
}

static void test_rejections(void) {
    unsigned char pay[20] = {0};
    write_raw(pathf("magic.bin"), 20240521, 1, 2, pay, 4);
    expect_reject("magic.bin", "wrong magic");
    write_raw(pathf("version.bin"), 20240520, 7, 2, pay, 4);
    expect_reject("version.bin", "wrong version");
    write_raw(pathf("version32.bin"), 20240801, 1, 2, pay, 8);
    expect_reject("version32.bin", "wrong version");
    write_raw(pathf("trunc.bin"), 20240520, 1, 10, pay, 5);
    expect_reject("trunc.bin", "truncated");
    write_raw(pathf("trunc32.bin"), 20240801, 7, 3, pay, 11); /* uint32 needs 12 */
    expect_reject("trunc32.bin", "truncated");
    write_raw(pathf("long.bin"), 20240520, 1, 2, pay, 6);
    expect_reject("long.bin", "too long");
    write_raw(pathf("neg.bin"), 20240520, 1, -1, pay, 0);
    expect_reject("neg.bin", "negative");
    FILE *f = fopen(pathf("short.bin"), "wb");
    fwrite(pay, 1, 20, f);
    fclose(f);
    expect_reject("short.bin", "truncated");
    nb_shard s;
    CHECK(nb_shard_open(pathf("missing.bin"), &s) == -1 && strstr(nb_last_error(), "missing.bin"), "missing file");
}

static void test_write_errors(void) {
    int before = count_entries();
    uint32_t tok[3] = {1, 2, 300};
    CHECK(nb_shard_write(pathf("bad.bin"), tok, 3, 300) == -1, "token 300 with vocab 300 must fail");
    CHECK(strstr(nb_last_error(), "300") != NULL, "error names the token: %s", nb_last_error());
    CHECK(count_entries() == before, "a failed write leaves nothing behind");
    CHECK(access(pathf("bad.bin"), F_OK) != 0, "no bad.bin");
    /* overwriting replaces the file whole */
    uint32_t a[3] = {1, 2, 3}, b[1] = {9};
    nb_shard_write(pathf("over.bin"), a, 3, 10);
    nb_shard_write(pathf("over.bin"), b, 1, 10);
    nb_shard s;
    CHECK(nb_shard_open(pathf("over.bin"), &s) == 0 && s.n_tokens == 1 && nb_shard_token(&s, 0) == 9, "overwrite");
    nb_shard_close(&s);
    CHECK(count_entries() == before + 1, "no temporary files left after writes");
}

int main(void) {
    snprintf(dir, sizeof dir, "/tmp/nb_test_shard_XXXXXX");
    if (!mkdtemp(dir)) { perror("mkdtemp"); return 1; }
    test_header_u16();
    test_header_u32();
    test_llmc_files();
    test_rejections();
    test_write_errors();
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    check_run(cmd);
    return check_summary();
}
