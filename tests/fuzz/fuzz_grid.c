/* Fuzz target: the grid-file parser (nb_grid_load, src/experiments/grid.c) on arbitrary bytes. A grid
 * it accepts must expand into 1 to 10000 points, each with a name, a label per axis and a NULL-ended
 * argument list holding neither --out nor --resume (the sweep's own); else abort. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "fuzz_input.h"
#include "nobubble/experiments.h"

static volatile size_t sink;

static void violated(const char *what, const char *detail) {
    fprintf(stderr, "fuzz_grid: an accepted grid %s: %s\n", what, detail ? detail : "(null)");
    abort();
}

static int sweep_flag(const char *a) {
    return (!strncmp(a, "--out", 5) && (!a[5] || a[5] == '=')) || (!strncmp(a, "--resume", 8) && (!a[8] || a[8] == '='));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    nb_grid *g;
    if (nb_grid_load(&g, fuzz_write(data, size, "in.grid"))) return 0;
    int n = nb_grid_n_points(g), axes = nb_grid_n_axes(g);
    if (n < 1 || n > 10000) violated("has a point count out of range", NULL);
    size_t total = strlen(nb_grid_text(g));
    for (int a = 0; a < axes; a++) total += strlen(nb_grid_axis_name(g, a));
    for (int p = 0; p < n; p++) {
        const char *name = nb_grid_point_name(g, p);
        if (!name || !*name) violated("has a point without a name", name);
        total += strlen(name);
        for (int a = 0; a < axes; a++) {
            const char *label = nb_grid_point_label(g, p, a);
            if (!label || !*label) violated("has a point without a label", name);
            total += strlen(label);
        }
        int argc;
        const char *const *argv = nb_grid_point_args(g, p, &argc);
        if (argc < 0 || (argc && !argv) || (argv && argv[argc])) violated("has an argument list not NULL-ended", name);
        for (int i = 0; i < argc; i++) {
            if (!argv[i]) violated("has a NULL argument", name);
            if (sweep_flag(argv[i])) violated("passes the sweep's own flag", argv[i]);
            total += strlen(argv[i]);
        }
    }
    sink = total;
    nb_grid_free(g);
    return 0;
}
