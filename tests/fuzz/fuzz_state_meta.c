/* Fuzz target: a training state's metadata (train/run/state_meta.c, what train_state_load reads before
 * any buffer: next_step, optimizer_steps, every count:<tensor>, the loader position and the batch shape
 * it rescales from) on arbitrary bytes as state.safetensors. What it accepts must lie in the documented
 * ranges (else abort, which the fuzzer reports). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "fuzz_input.h"
#include "nobubble/checkpoint.h"
#include "nobubble/train.h"
#include "train/run/state_meta.h"

static void violated(const char *what, long long v) {
    fprintf(stderr, "fuzz_state_meta: accepted %s = %lld, outside its range\n", what, v);
    abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fuzz_write(data, size, "state.safetensors");
    nb_st_set set;
    if (nb_st_set_open(fuzz_dir(), "state", &set)) return 0;
    state_meta m;
    if (!state_meta_steps(&set, &m)) {
        if (m.next_step < 0 || m.next_step > NB_TRAIN_MAX_STEPS) violated("next_step", m.next_step);
        if (m.optimizer_steps < 0 || m.optimizer_steps > m.next_step) violated("optimizer_steps", m.optimizer_steps);
        /* every count:<name> the file records, and one per tensor it holds */
        const nb_st_file *f = &set.files[0];
        for (int k = 0; k < f->n_meta; k++) {
            long long c;
            if (strncmp(f->meta_keys[k], "count:", 6)) continue;
            if (!state_meta_count(&set, f->path, &m, f->meta_keys[k] + 6, &c) && (c < 0 || c > m.optimizer_steps))
                violated("count", c);
        }
        for (int i = 0; i < f->n; i++) {
            long long c;
            if (!state_meta_count(&set, f->path, &m, f->entries[i].name, &c) && (c < 0 || c > m.optimizer_steps))
                violated("count", c);
        }
    }
    static const long long shapes[][2] = {{8, 64}, {1, 1}, {65536, 1048576}};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        unsigned long long position;
        if (!state_meta_loader(&set.files[0], shapes[i][0], shapes[i][1], &position) &&
            position > (unsigned long long)STATE_MAX_LOADER_POSITION)
            violated("loader position", (long long)position);
    }
    nb_st_set_close(&set);
    return 0;
}
