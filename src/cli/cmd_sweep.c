/* nobubble sweep: runs every point of a grid file as a `nobubble train` child process, J at a
 * time, skipping points already complete, and writes DIR/results.csv. See docs/experiments.md. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cli/args.h"
#include "cli/commands.h"
#include "cli/positional.h"
#include "nobubble/experiments.h"
#include "nobubble/train.h"
#include "util/signals.h"

static const char usage[] =
    "usage: nobubble sweep GRID_FILE --out DIR [--jobs J] [--save-every N [--keep K]] [--dry-run] [--quiet]\n"
    "Runs each point of the grid as `nobubble train <fixed flags> <point flags> --out DIR/runs/<point> --quiet`,\n"
    "J at a time (each with OMP_NUM_THREADS = cores / J), then writes DIR/results.csv. Points already complete\n"
    "with the same command are skipped, so running the same command again continues an interrupted sweep.\n"
    "With --save-every N each point also saves checkpoints (--save-dir DIR/runs/<point>/checkpoints --save-every N\n"
    "--keep K), an interrupted point resumes from its newest usable one instead of starting over, and a completed\n"
    "point's checkpoints are removed (add --export to the grid to keep its model). --save-every is not part of a\n"
    "point's command: changing it reruns nothing. Grid format and presets: docs/experiments.md, experiments/.";

/* Ctrl-C or SIGTERM (or SIGUSR1): the sweep terminates its children and writes the results it
 * has; a second signal kills the children at once instead of after the grace time. Called on the
 * signal thread (util/signals.h), never in signal context. */
static void on_signal(int sig, int count) {
    (void)sig;
    (void)count;
    nb_sweep_request_stop();
}

/* Collects the checkpoint folders passed over into a "FOLDER: why; ..." list. */
typedef struct {
    char *text;
    size_t size;
} passed_over;

static void note_passed_over(void *ctx, const char *folder, const char *why) {
    passed_over *p = ctx;
    size_t n = strlen(p->text);
    if (n + 1 < p->size) snprintf(p->text + n, p->size - n, "%s%s: %s", n ? "; " : "", folder, why);
}

/* The sweep's way to find a point's checkpoint: train's, reading every tensor against its checksum,
 * so that a corrupt newest checkpoint is passed over instead of failing the resumed point. */
static int find_checkpoint(const char *save_dir, char *path, size_t size, long *step, char *skipped,
                           size_t skipped_size) {
    passed_over p = {skipped, skipped_size};
    if (skipped_size) skipped[0] = 0;
    return nb_train_latest_checkpoint(save_dir, 1, path, size, step, note_passed_over, &p);
}

/* Each point's command as its command.txt will hold it: quoted for a shell, so that a line pasted runs it. */
static int print_points(const nb_grid *g) {
    for (int i = 0; i < nb_grid_n_points(g); i++) {
        char *cmd = nb_grid_point_command(g, i);
        if (!cmd) return -1;
        printf("%s: nobubble %s", nb_grid_point_name(g, i), cmd);
        free(cmd);
    }
    return 0;
}

static int run(const nb_grid *g, const char *out, int jobs, int quiet, int save_every, int keep) {
    /* Before any thread exists; the children start with the default mask (nb_signals_child_reset). */
    if (nb_signals_start(on_signal)) {
        fprintf(stderr, "nobubble sweep: %s\n", nb_last_error());
        return 1;
    }
    nb_sweep_options o = {"/proc/self/exe", out, jobs, quiet, save_every, keep, find_checkpoint};
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
    int jobs = 1, dry_run = 0, quiet = 0, save_every = 0, keep = -1;   /* -1: not given (2) */
    const cli_option opts[] = {
        {"--out", OPT_STR, &out, "DIR    DIR/runs/<point>/, DIR/results.csv (required)"},
        {"--jobs", OPT_INT, &jobs, "J      points run at once (1) " CLI_RANGE(1, 256)},
        {"--save-every", OPT_INT, &save_every,
         "N      each point saves a checkpoint every N steps and resumes from it (off) " CLI_RANGE(1, 100000000)},
        {"--keep", OPT_INT, &keep, "K      with --save-every: checkpoints kept per point (2; 0: all) " CLI_RANGE(0, 1000000)},
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
    if (keep >= 0 && !save_every) {
        fprintf(stderr, "nobubble sweep: --keep needs --save-every\n");
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
    if (dry_run && (rc = print_points(g) ? 1 : 0)) fprintf(stderr, "nobubble sweep: out of memory\n");
    if (!dry_run) rc = run(g, out, jobs, quiet, save_every, keep < 0 ? 2 : keep);
    nb_grid_free(g);
    return rc;
}
