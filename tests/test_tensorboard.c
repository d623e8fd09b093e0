/* The pieces of --tensorboard's event files and of the progress line, against hand-computed values:
 * CRC-32C against the standard check vectors (RFC 3720 B.4 and the catalogue's "123456789"), TFRecord's
 * mask by its formula, Event protobufs byte by byte (event.proto / summary.proto field numbers and wire
 * types), the event file framing read back, and durations as the progress line prints them. That
 * TensorBoard itself reads the files is tools/ci/tensorboard_check.sh's (CI). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <glob.h>
#include <unistd.h>
#include "check.h"
#include "train/outputs/tensorboard.h"
#include "nobubble/common.h"
#include "util/clock.h"
#include "util/hash.h"

static void test_crc32c(void) {
    unsigned char zeros[32] = {0}, ones[32], up[32], down[32];
    for (int i = 0; i < 32; i++) ones[i] = 0xFF, up[i] = (unsigned char)i, down[i] = (unsigned char)(31 - i);
    CHECK(nb_crc32c(0, "123456789", 9) == 0xE3069283u, "crc32c(123456789) = %08x", nb_crc32c(0, "123456789", 9));
    CHECK(nb_crc32c(0, zeros, 32) == 0x8A9136AAu, "crc32c(32 zeros) = %08x", nb_crc32c(0, zeros, 32));
    CHECK(nb_crc32c(0, ones, 32) == 0x62A8AB43u, "crc32c(32 x FF) = %08x", nb_crc32c(0, ones, 32));
    CHECK(nb_crc32c(0, up, 32) == 0x46DD794Eu, "crc32c(0..31) = %08x", nb_crc32c(0, up, 32));
    CHECK(nb_crc32c(0, down, 32) == 0x113FDB5Cu, "crc32c(31..0) = %08x", nb_crc32c(0, down, 32));
    CHECK(nb_crc32c(nb_crc32c(0, "1234", 4), "56789", 5) == 0xE3069283u, "crc32c continued in two pieces");
    /* the mask: rotate right by 15, add 0xa282ead8 (mod 2^32): 0xE3069283 -> 0xC78AB0E5 */
    const uint32_t c = 0xE3069283u, want = ((c >> 15) | (c << 17)) + 0xa282ead8u;
    CHECK(train_tb_masked_crc("123456789", 9) == want && want == 0xC78AB0E5u, "masked crc %08x",
          train_tb_masked_crc("123456789", 9));
}

static void test_event_bytes(void) {
    unsigned char buf[256];
    /* wall_time 1.5 (field 1, 64-bit: 0x3FF8000000000000), step 3 (field 2, varint), summary (field 5)
     * holding one value (field 1) {tag "a" (field 1), simple_value 2.0f (field 2, 32-bit: 0x40000000)} */
    const unsigned char want[] = {0x09, 0, 0, 0, 0, 0, 0, 0xF8, 0x3F, 0x10, 0x03, 0x2a, 0x0a,
                                  0x0a, 0x08, 0x0a, 0x01, 'a', 0x15, 0x00, 0x00, 0x00, 0x40};
    const train_tb_scalar a = {"a", 2.0f};
    size_t n = train_tb_event(buf, sizeof buf, 1.5, 3, NULL, &a, 1);
    CHECK(n == sizeof want && !memcmp(buf, want, n), "scalar event: %zu bytes, expected %zu", n, sizeof want);
    /* the file version (field 3, string) at step 0; step 300 as the varint AC 02 */
    const unsigned char ver[] = {0x09, 0, 0, 0, 0, 0, 0, 0, 0, 0x10, 0x00, 0x1a, 13, 'b', 'r', 'a', 'i', 'n',
                                 '.', 'E', 'v', 'e', 'n', 't', ':', '2'};
    n = train_tb_event(buf, sizeof buf, 0.0, 0, "brain.Event:2", NULL, 0);
    CHECK(n == sizeof ver && !memcmp(buf, ver, n), "version event: %zu bytes, expected %zu", n, sizeof ver);
    n = train_tb_event(buf, sizeof buf, 0.0, 300, NULL, NULL, 0);
    CHECK(n == 12 && buf[9] == 0x10 && buf[10] == 0xAC && buf[11] == 0x02, "step 300 is not the varint AC 02");
    CHECK(train_tb_event(buf, 10, 1.5, 3, NULL, &a, 1) == 0, "an event larger than the buffer was not refused");
}

static int contains(const unsigned char *p, size_t n, const char *s) {
    const size_t k = strlen(s);
    for (size_t i = 0; i + k <= n; i++)
        if (!memcmp(p + i, s, k)) return 1;
    return 0;
}

/* A file written through train_tb_open/write/close: two records, each framed as TFRecord says. */
static void test_file_framing(void) {
    char dir[] = "/tmp/nb_tb_XXXXXX";
    if (!mkdtemp(dir)) {
        CHECK(0, "mkdtemp");
        return;
    }
    char sub[64];
    snprintf(sub, sizeof sub, "%s/new/tb", dir);
    train_tb tb;
    const train_tb_scalar s[2] = {{"train/loss", 3.25f}, {"val/loss", 4.5f}};
    CHECK(train_tb_open(&tb, sub) == 0 && train_tb_write(&tb, 7, s, 2) == 0 && train_tb_close(&tb) == 0,
          "write: %s", nb_last_error());
    char pattern[128];
    snprintf(pattern, sizeof pattern, "%s/events.out.tfevents.*", sub);
    glob_t g;
    CHECK(glob(pattern, 0, NULL, &g) == 0 && g.gl_pathc == 1, "one events.out.tfevents.* file in the folder");
    size_t n = 0;
    unsigned char *p = g.gl_pathc == 1 ? check_slurp(g.gl_pathv[0], &n) : NULL;
    size_t at = 0;
    int records = 0, framed = 1;
    while (p && at + 12 <= n) {
        uint64_t len = 0;
        uint32_t lcrc = 0, dcrc = 0;
        for (int i = 0; i < 8; i++) len |= (uint64_t)p[at + i] << (8 * i);
        for (int i = 0; i < 4; i++) lcrc |= (uint32_t)p[at + 8 + i] << (8 * i);
        if (at + 16 + len > n) { framed = 0; break; }
        for (int i = 0; i < 4; i++) dcrc |= (uint32_t)p[at + 12 + len + i] << (8 * i);
        framed &= lcrc == train_tb_masked_crc(p + at, 8) && dcrc == train_tb_masked_crc(p + at + 12, len);
        at += 16 + len, records++;
    }
    CHECK(framed && records == 2 && at == n, "%d records, framing %s, %zu of %zu bytes", records, framed ? "ok" : "bad", at, n);
    /* the second record: an Event at step 7 whose summary holds both tags */
    CHECK(p && contains(p, n, "train/loss") && contains(p, n, "val/loss"), "the tags are not in the file");
    free(p);
    if (g.gl_pathc) globfree(&g);
    CHECK(train_tb_open(&tb, "/proc/nb_no_such/tb") == -1 && strstr(nb_last_error(), "--tensorboard"),
          "an unwritable folder: %s", nb_last_error());
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    check_run(cmd);
}

static void test_durations(void) {
    static const struct { double s; const char *want; } cases[] = {
        {0, "0:00"}, {0.49, "0:00"}, {0.5, "0:01"}, {59.4, "0:59"}, {59.6, "1:00"}, {61, "1:01"},
        {3599.4, "59:59"}, {3599.6, "1:00:00"}, {3661, "1:01:01"}, {86400 + 5, "24:00:05"}, {-3, "0:00"}, {1e12, "0:00"}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char buf[32];
        nb_format_duration(cases[i].s, buf, sizeof buf);
        CHECK(!strcmp(buf, cases[i].want), "%g s: '%s', expected '%s'", cases[i].s, buf, cases[i].want);
    }
}

int main(void) {
    test_crc32c();
    test_event_bytes();
    test_file_framing();
    test_durations();
    return check_summary();
}
