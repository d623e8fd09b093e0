/* The cost of the tensor checksums (XXH3): the hash alone on a 100 MB buffer, against memcpy of the
 * same bytes (the memory's speed), and a 100 MB tensor loaded from a safetensors file in the page
 * cache with its checksum checked and without. Medians of 5, one core.
 * Usage: bench_checksum [DIR]   (DIR for the 100 MB file; default /tmp) */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "nobubble/checkpoint.h"
#include "util/clock.h"

#define BYTES (100u * 1000 * 1000)
#define REPS 5


static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *t) {
    qsort(t, REPS, sizeof *t, cmp_double);
    return t[REPS / 2];
}

/* Seconds (median) to load the tensor of f, checking its checksum or not. */
static double load_seconds(nb_st_file *f, float *out, int checked) {
    double t[REPS];
    f->entries[0].has_checksum = checked;
    for (int r = 0; r < REPS; r++) {
        double t0 = nb_now();
        if (nb_st_read_f32(f, "x", out, BYTES / 4)) { fprintf(stderr, "%s\n", nb_last_error()); exit(1); }
        t[r] = nb_now() - t0;
    }
    f->entries[0].has_checksum = 1;
    return median(t);
}

int main(int argc, char **argv) {
    float *x = malloc(BYTES), *y = malloc(BYTES);
    if (!x || !y) return 1;
    for (size_t i = 0; i < BYTES / 4; i++) x[i] = (float)i * 1e-3f;
    memset(y, 1, BYTES);
    double th[REPS], tm[REPS];
    volatile uint64_t sink = 0;
    for (int r = 0; r < REPS; r++) {
        double t0 = nb_now();
        sink ^= nb_st_checksum(x, BYTES);
        th[r] = nb_now() - t0;
        t0 = nb_now();
        memcpy(y, x, BYTES);
        tm[r] = nb_now() - t0;
    }
    printf("XXH3 of %u MB: %.2f GB/s (memcpy: %.2f GB/s), median of %d\n", BYTES / 1000000, BYTES / median(th) / 1e9,
           BYTES / median(tm) / 1e9, REPS);
    char path[4096];
    snprintf(path, sizeof path, "%s/bench_checksum.safetensors", argc > 1 ? argv[1] : "/tmp");
    nb_st_tensor t = {"x", 1, {BYTES / 4}, x};
    nb_st_file f;
    if (nb_st_write(path, &t, 1, NULL, 0) || nb_st_open(path, &f)) { fprintf(stderr, "%s\n", nb_last_error()); return 1; }
    double with = load_seconds(&f, y, 1), without = load_seconds(&f, y, 0);
    printf("load of a %u MB tensor (page cache): %.1f ms checked, %.1f ms unchecked (%+.0f%%)\n", BYTES / 1000000,
           with * 1e3, without * 1e3, 100 * (with / without - 1));
    nb_st_close(&f);
    unlink(path);
    free(x);
    free(y);
    return (int)(sink & 0);
}
