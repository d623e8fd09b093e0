/* Internal: a sweep's results as the report reads them (report.c), shared with the tuning and
 * scaling sections (report_scale.c) and the paired statistics over its runs (pairs.c). */
#ifndef NB_EXPERIMENTS_REPORT_H
#define NB_EXPERIMENTS_REPORT_H
#include "experiments/exp.h"
#include "experiments/stats.h"

typedef struct {
    char *point, **labels, *status;
    int done, panel, curve;
    nbx_run run;
} nbx_rrow;

typedef struct {
    const char *dir;
    char *csv, **axes;        /* axes point into csv */
    int n_axes, seed_axis, curve_axis;
    nbx_rrow *rows; int n_rows;
    nbx_strv panel_keys, panel_titles, curves;
    nbx_strv seeds;           /* the seed axis's labels that finished runs carry */
} nbx_report;

/* A row's seed label; "" without a seed axis (each cell then holds one run, paired as it is). */
const char *nbx_seed_of(const nbx_report *r, const nbx_rrow *row);
/* The final validation loss of the finished run of (panel, curve, seed); NAN when there is none. */
double nbx_final_of(const nbx_report *r, int panel, int curve, const char *seed);
/* gaps[k] = final(curve c) - final(base) seed by seed, over the seeds both have (returns how many,
 * -1 on a failure); a seed only one side has is listed in unpaired ("seed 3 (2bw only)") when it
 * is not NULL, never paired. gaps holds r->seeds.n values. */
int nbx_paired_gaps(const nbx_report *r, int p, int c, int base, double *gaps, nb_buf *unpaired);
/* The panel's synchronous curve, and the plain delayed curve (same delay, no mitigation) that a
 * mitigated run `like` corrects, from the finished runs' summaries; -1 when there is none. */
int nbx_sync_curve(const nbx_report *r, int p);
int nbx_plain_curve(const nbx_report *r, int p, const nbx_run *like);
/* The first finished run of (panel, curve), NULL when none. */
const nbx_run *nbx_first_run(const nbx_report *r, int p, int c);
/* A table cell (<td>...</td>) with curve c's recovery in panel p (docs/experiments.md, "Paired
 * gaps"): per-seed 1 - gap(c) / gap(plain), its mean and 95% t interval; "n/a: gap within noise"
 * or "n/a: no gap" by the plain delay's own gap; a dash for a curve that mitigates nothing. */
int nbx_recovery_cell(nb_buf *b, const nbx_report *r, int p, int c, double *scratch);

/* The tuning and scaling sections (docs/experiments.md, "Tuned rates and scaling"): appended when
 * the grid has an axis named `lr` (and, for scaling, `steps`); nothing otherwise. */
int nbx_report_scale(nb_buf *b, const nbx_report *r);
#endif
