/* nobubble sweep: runs every point of a grid file as a `nobubble train` child process, J at a
 * time, skipping points already complete, and writes DIR/results.csv. See docs/experiments.md. */
#include <stdio.h>
#include <string.h>
#include "cli/args.h"
#include "cli/commands.h"
#include "cli/positional.h"
#include "nobubble/experiments.h"
#include "util/signals.h"

static const char usage[] =
    "usage: nobubble sweep GRID_FILE --out DIR [--jobs J] [--dry-run] [--quiet]\n"
    "Runs each point of the grid as `nobubble train <fixed flags> <point flags> --out DIR/runs/<point> --quiet`,\n"
    "J at a time (each with OMP_NUM_THREADS = cores / J), then writes DIR/results.csv. Points already complete\n"
    "with the same command are skipped, so running the same command again continues an interrupted sweep.\n"
    "Grid format and presets: docs/experiments.md, experiments/.";

/* Ctrl-C or SIGTERM (or SIGUSR1): the sweep terminates its children and writes the results it
 * has; a second signal kills the children at once instead of after the grace time. Called on the
 * signal thread (util/signals.h), never in signal context. */
static void on_signal(int sig, int count) {
    (void)sig;
    (void)count;
    nb_sweep_request_stop();
}

static void print_points(const nb_grid *g) {
    for (int i = 0; i < nb_grid_n_points(g); i++) {
        int argc;
        const char *const *args = nb_grid_point_args(g, i, &argc);
        printf("%s: nobubble train", nb_grid_point_name(g, i));
        for (int k = 0; k < argc; k++) printf(strpbrk(args[k], " \t'\"") ? " '%s'" : " %s", args[k]);
        printf("\n");
    }
}

static int run(const nb_grid *g, const char *out, int jobs, int quiet) {
    /* Before any thread exists; the children start with the default mask (nb_signals_child_reset). */
    if (nb_signals_start(on_signal)) {
        fprintf(stderr, "nobubble sweep: %s\n", nb_last_error());
        return 1;
    }
    nb_sweep_options o = {"/proc/self/exe", out, jobs, quiet};
    nb_sweep_result r;
    if (!quiet) printf("sweep: %d points, %d at a time, into %s\n", nb_grid_n_points(g), jobs, out);
    fflush(stdout);
    if (nb_sweep_run(g, &o, &r)) {
        fprintf(stderr, "nobubble sweep: %s\n", nb_last_error());
        return 1;
    }
    printf("sweep: %d of %d points complete (%d run now), %d failed, %d interrupted; wrote %s/results.csv\n", r.done,
           nb_grid_n_points(g), r.ran, r.failed, r.interrupted, out);
    if (r.interrupted) {
        printf("sweep: interrupted; run the same command again to continue\n");
        return 130;
    }
    return r.failed ? 1 : 0;
}

int cmd_sweep(int argc, char **argv) {
    const char *out = NULL, *grid_path = NULL;
    int jobs = 1, dry_run = 0, quiet = 0;
    const cli_option opts[] = {
        {"--out", OPT_STR, &out, "DIR    DIR/runs/<point>/, DIR/results.csv (required)"},
        {"--jobs", OPT_INT, &jobs, "J      points run at once (1) " CLI_RANGE(1, 256)},
        {"--dry-run", OPT_FLAG, &dry_run, "       print each point's name and command, run nothing"},
        {"--quiet", OPT_FLAG, &quiet, "       no progress lines (failures are still printed)"},
    };
    const int n_opts = (int)(sizeof opts / sizeof opts[0]);
    argc = cli_take_positional(argc, argv, opts, n_opts, &grid_path);
    if (argc < 0) return 2;
    int rc = cli_parse(usage, argc, argv, opts, n_opts);
    if (rc) return rc > 0 ? 0 : 2;
    if (!grid_path) {
        fprintf(stderr, "nobubble sweep: GRID_FILE is required (usage: nobubble sweep GRID_FILE --out DIR)\n");
        return 2;
    }
    if (!out && !dry_run) {
        fprintf(stderr, "nobubble sweep: --out DIR is required\n");
        return 2;
    }
    if (jobs < 1 || jobs > 256) {
        fprintf(stderr, "nobubble sweep: --jobs %d: expected 1 to 256\n", jobs);
        return 2;
    }
    nb_grid *g;
    if (nb_grid_load(&g, grid_path)) {
        fprintf(stderr, "nobubble sweep: %s\n", nb_last_error());
        return 2;
    }
    if (dry_run) print_points(g);
    rc = dry_run ? 0 : run(g, out, jobs, quiet);
    nb_grid_free(g);
    return rc;
}
