/* nobubble: experiments. A grid file describes a set of training runs (points); a sweep runs
 * each point as a `nobubble train` child process, J at a time, resumably, and writes a results
 * table. The report that draws them (`nobubble report`) is the command line's, not the library's:
 * src/report/report.h. See docs/experiments.md. */
#ifndef NOBUBBLE_EXPERIMENTS_H
#define NOBUBBLE_EXPERIMENTS_H
#include <stddef.h>
#include "nobubble/common.h"

/* ------------------------------------------------------------ grid files */
typedef struct nb_grid nb_grid;

/* Parses a grid file; errors name the file and line and what was expected. */
int nb_grid_load(nb_grid **g, const char *path);
/* The same from text already in memory; what names it in errors. */
int nb_grid_parse(nb_grid **g, const char *text, const char *what);
void nb_grid_free(nb_grid *g);

int nb_grid_n_axes(const nb_grid *g);
const char *nb_grid_axis_name(const nb_grid *g, int axis);
/* Points are the cross product of the axes, the last axis varying fastest. */
int nb_grid_n_points(const nb_grid *g);
/* The point's folder name: its labels joined by '_' ("run" when there are no axes). */
const char *nb_grid_point_name(const nb_grid *g, int point);
const char *nb_grid_point_label(const nb_grid *g, int point, int axis);
/* The point's `nobubble train` arguments (fixed flags, then each axis value's, then every
 * matching `when` line's, {NAME} replaced by the point's label on axis NAME). Owned by g. */
const char *const *nb_grid_point_args(const nb_grid *g, int point, int *argc);
/* The point's command as one line, "train ARG ...\n", each argument quoted for a POSIX shell where it needs
 * it: what the point's command.txt holds and `sweep --dry-run` prints. malloc'ed; NULL on failure. */
char *nb_grid_point_command(const nb_grid *g, int point);
/* The grid file's text as read. */
const char *nb_grid_text(const nb_grid *g);

/* ------------------------------------------------------------ sweeps */
/* The newest checkpoint of save folder save_dir that a resume can load: 1 with its folder in path and
 * its step in *step, 0 when there is none; each newer one passed over is described in skipped
 * ("FOLDER: why; ..."). The sweep cannot read checkpoints itself (experiments uses only util), so the
 * caller gives it one (the CLI: train's nb_train_latest_checkpoint, verifying checksums). */
typedef int (*nb_sweep_checkpoint_fn)(const char *save_dir, char *path, size_t size, long *step, char *skipped,
                                      size_t skipped_size);

typedef struct {
    const char *exe;      /* the nobubble binary each point runs (`exe train ...`) */
    const char *out_dir;  /* DIR: DIR/runs/<point>/, DIR/results.csv, DIR/grid.txt, DIR/sweep.log */
    int jobs;             /* points run at once (>= 1); each child gets OMP_NUM_THREADS = max(1, cores / jobs) */
    int quiet;            /* no progress lines */
    /* > 0: every point also gets --save-dir DIR/runs/<point>/checkpoints --save-every N --keep keep, and
     * a point interrupted with a usable checkpoint resumes from it (find_checkpoint, required then);
     * a point that completes has its checkpoints removed. 0: neither (as before). Not part of a
     * point's command.txt, so a point's identity does not depend on it. */
    int save_every;
    int keep;             /* --keep of each point (0: all) */
    nb_sweep_checkpoint_fn find_checkpoint;
} nb_sweep_options;

typedef struct {
    int done;         /* points with a complete run (run now or before) */
    int ran;          /* of those, run by this sweep */
    int failed;       /* points whose run exited non-zero */
    int interrupted;  /* points stopped or never started because of a stop request */
} nb_sweep_result;

/* Runs every point not already complete, then writes DIR/results.csv. Returns -1 only when the
 * sweep itself cannot go on (a folder it cannot write, a fork that fails); failed points are
 * counted in r->failed. */
int nb_sweep_run(const nb_grid *g, const nb_sweep_options *o, nb_sweep_result *r);
/* Asks a running sweep to stop: children are terminated (SIGTERM, SIGKILL after a grace time; a
 * second call: SIGKILL at once), the sweep returns with the unfinished points counted as
 * interrupted. Thread-safe and async-signal-safe (the CLI calls it from its signal thread). */
void nb_sweep_request_stop(void);

#endif
