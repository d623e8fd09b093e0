/* Fuzz target: the safetensors reader (nb_st_open) on arbitrary bytes, then every tensor it accepts
 * read as float32 (F16/BF16 widening included) and its metadata looked up. */
#include <stdlib.h>
#include "fuzz_input.h"
#include "nobubble/checkpoint.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    nb_st_file f;
    if (nb_st_open(fuzz_write(data, size, "in.safetensors"), &f)) return 0;
    for (int i = 0; i < f.n; i++) {
        const nb_st_entry *e = &f.entries[i];
        float *out = malloc(sizeof(float) * (e->numel ? e->numel : 1));   /* numel <= file size: validated */
        if (out && nb_st_find(&f, e->name) == e) nb_st_read_f32(&f, e->name, out, e->numel);
        free(out);
    }
    nb_st_meta(&f, "format");
    nb_st_close(&f);
    return 0;
}
