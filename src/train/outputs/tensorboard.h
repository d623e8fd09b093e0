/* Internal: the run's metrics as TensorBoard event files (--tensorboard DIR; docs/monitoring.md):
 * DIR/events.out.tfevents.<seconds>.<host>.<pid>.nobubble, a new file for each run (a resumed run too),
 * never one that exists. Each record is TFRecord framing (length, masked CRC-32C of the length, the
 * bytes, masked CRC-32C of the bytes) around an Event protobuf: first the file version, then per step
 * one Event whose Summary holds simple (float) scalar values. The coordinator is the one writer. */
#ifndef NB_TRAIN_TENSORBOARD_H
#define NB_TRAIN_TENSORBOARD_H
#include <stdint.h>
#include <stdio.h>

typedef struct {
    FILE *f;
    char path[4400];
} train_tb;

/* One scalar: its tag (e.g. "train/loss") and value. */
typedef struct {
    const char *tag;
    float value;
} train_tb_scalar;

/* Creates DIR (mkdir -p) and a new event file in it with the file-version record. */
int train_tb_open(train_tb *tb, const char *dir);
/* One Event at `step` with the n scalars, flushed (TensorBoard reads a file while it grows); a failed
 * write is an error naming the file. */
int train_tb_write(train_tb *tb, int64_t step, const train_tb_scalar *scalars, int n);
int train_tb_close(train_tb *tb);

/* The record framing and the protobuf encoding, exposed for the tests. */
uint32_t train_tb_masked_crc(const void *data, size_t n);
/* An Event's bytes into buf (size bytes); the length, or 0 when it does not fit. scalars NULL and
 * n 0 with version non-NULL: the file-version event. */
size_t train_tb_event(unsigned char *buf, size_t size, double wall_time, int64_t step, const char *version,
                      const train_tb_scalar *scalars, int n);
#endif
