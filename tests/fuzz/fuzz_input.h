/* Fuzz inputs as files: the readers under test take paths, so each input is written to a file in a
 * scratch folder of this process (removed at exit). Also the entry point every target defines. */
#ifndef NB_FUZZ_INPUT_H
#define NB_FUZZ_INPUT_H
#include <stddef.h>
#include <stdint.h>

/* The libFuzzer entry point: libFuzzer calls it, and so does regress_main.c for each corpus file. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
/* The scratch folder (created on first use). */
const char *fuzz_dir(void);
/* Writes data into fuzz_dir()/name and returns that path (static storage, valid until the next call). */
const char *fuzz_write(const uint8_t *data, size_t size, const char *name);
#endif
