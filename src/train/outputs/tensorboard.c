/* TensorBoard event files (tensorboard.h). The formats are public: TFRecord's framing
 * (tensorflow/core/lib/io/record_writer) and the Event, Summary and Summary.Value messages of
 * tensorflow/core/util/event.proto and summary.proto, of which only these fields are written:
 *   Event:  1 wall_time (double), 2 step (int64), 3 file_version (string), 5 summary (Summary)
 *   Summary: 1 value (repeated Value);  Value: 1 tag (string), 2 simple_value (float) */
#define _POSIX_C_SOURCE 200809L
#include "train/outputs/tensorboard.h"
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "util/error.h"
#include "util/fs.h"
#include "util/hash.h"

/* TFRecord masks its CRCs so that a CRC of bytes that hold CRCs stays well-behaved. */
uint32_t train_tb_masked_crc(const void *data, size_t n) {
    const uint32_t crc = nb_crc32c(0, data, n);
    return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

/* ---- protobuf, the few wire types used: varint (0), 64-bit (1), length-delimited (2), 32-bit (5) ---- */

typedef struct {
    unsigned char *p;
    size_t n, size;
    int full;
} pb;

static void put_byte(pb *b, unsigned char c) {
    if (b->n < b->size) b->p[b->n++] = c;
    else b->full = 1;
}

static void put_varint(pb *b, uint64_t v) {
    for (; v >= 0x80; v >>= 7) put_byte(b, (unsigned char)(v | 0x80));
    put_byte(b, (unsigned char)v);
}

static void put_le(pb *b, uint64_t v, int bytes) {
    for (int i = 0; i < bytes; i++) put_byte(b, (unsigned char)(v >> (8 * i)));
}

static void put_key(pb *b, int field, int wire) { put_varint(b, (uint64_t)(field << 3 | wire)); }

static void put_bytes(pb *b, int field, const void *data, size_t n) {
    put_key(b, field, 2);
    put_varint(b, n);
    for (size_t i = 0; i < n; i++) put_byte(b, ((const unsigned char *)data)[i]);
}

/* Summary.Value {tag, simple_value}, as its own message's bytes. */
static size_t value_bytes(unsigned char *buf, size_t size, const train_tb_scalar *s) {
    pb v = {buf, 0, size, 0};
    put_bytes(&v, 1, s->tag, strlen(s->tag));
    uint32_t bits;
    memcpy(&bits, &s->value, 4);
    put_key(&v, 2, 5);
    put_le(&v, bits, 4);
    return v.full ? 0 : v.n;
}

size_t train_tb_event(unsigned char *buf, size_t size, double wall_time, int64_t step, const char *version,
                      const train_tb_scalar *scalars, int n) {
    pb e = {buf, 0, size, 0};
    uint64_t bits;
    memcpy(&bits, &wall_time, 8);
    put_key(&e, 1, 1);
    put_le(&e, bits, 8);
    put_key(&e, 2, 0);
    put_varint(&e, (uint64_t)step);
    if (version) put_bytes(&e, 3, version, strlen(version));
    if (n > 0) {
        unsigned char summary[8192], value[512];
        pb s = {summary, 0, sizeof summary, 0};
        for (int i = 0; i < n; i++) {
            size_t k = value_bytes(value, sizeof value, &scalars[i]);
            if (!k) return 0;
            put_bytes(&s, 1, value, k);
        }
        if (s.full) return 0;
        put_bytes(&e, 5, summary, s.n);
    }
    return e.full ? 0 : e.n;
}

/* ---- the file ---- */

static double wall_clock(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* One TFRecord: length (8 bytes, little-endian), its masked CRC, the data, the data's masked CRC. */
static int write_record(train_tb *tb, const unsigned char *data, size_t n) {
    pb head = {(unsigned char[12]){0}, 0, 12, 0};
    put_le(&head, n, 8);
    put_le(&head, train_tb_masked_crc(head.p, 8), 4);
    unsigned char tail[4];
    const uint32_t crc = train_tb_masked_crc(data, n);
    for (int i = 0; i < 4; i++) tail[i] = (unsigned char)(crc >> (8 * i));
    errno = 0;
    if (fwrite(head.p, 1, 12, tb->f) != 12 || fwrite(data, 1, n, tb->f) != n || fwrite(tail, 1, 4, tb->f) != 4 ||
        fflush(tb->f))
        return nb_fail("%s: cannot write: %s; the run stops here", tb->path, errno ? strerror(errno) : "write error");
    return 0;
}

int train_tb_open(train_tb *tb, const char *dir) {
    memset(tb, 0, sizeof *tb);
    if (nb_fs_mkdirs(dir, "--tensorboard")) return -1;
    char host[256] = "localhost";
    if (gethostname(host, sizeof host - 1)) strcpy(host, "localhost");
    snprintf(tb->path, sizeof tb->path, "%s/events.out.tfevents.%ld.%s.%ld.nobubble", dir, (long)time(NULL), host,
             (long)getpid());
    /* O_EXCL: a new file or none, never another run's. */
    const int fd = open(tb->path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0 || !(tb->f = fdopen(fd, "wb"))) {
        nb_fail("%s: cannot create: %s", tb->path, strerror(errno));
        if (fd >= 0) close(fd);
        return -1;
    }
    unsigned char buf[256];
    const size_t n = train_tb_event(buf, sizeof buf, wall_clock(), 0, "brain.Event:2", NULL, 0);
    return write_record(tb, buf, n);
}

int train_tb_write(train_tb *tb, int64_t step, const train_tb_scalar *scalars, int n) {
    unsigned char buf[16384];
    const size_t k = train_tb_event(buf, sizeof buf, wall_clock(), step, NULL, scalars, n);
    if (!k) return nb_fail("%s: step %lld: the event does not fit in %zu bytes", tb->path, (long long)step, sizeof buf);
    return write_record(tb, buf, k);
}

int train_tb_close(train_tb *tb) {
    if (!tb->f) return 0;
    errno = 0;
    const int bad = fclose(tb->f) != 0;
    tb->f = NULL;
    return bad ? nb_fail("%s: cannot write: %s", tb->path, errno ? strerror(errno) : "write error") : 0;
}
