/* The report (`nobubble report`, docs/experiments.md): one self-contained HTML page from a sweep's
 * folder or one run's. Not part of the installed library: the static library nb_report, which the
 * binary and the tests that need it link (docs/architecture.md). Below the entry point: the HTML and
 * SVG helpers, and a sweep's results as the report reads them (report.c), shared with the tuning and
 * scaling sections (report_scale.c) and the paired statistics over its runs (pairs.c). */
#ifndef NB_REPORT_REPORT_H
#define NB_REPORT_REPORT_H
#include "experiments/exp.h"
#include "report/stats.h"

/* Reads DIR/results.csv and each run's metrics.jsonl and summary.json, and writes one HTML page
 * (inline SVG charts, tables) to out_path. A folder without results.csv but with summary.json is one
 * run's (train --out): its page has the run's results, its loss curves and its summary. */
int nb_report_write(const char *dir, const char *out_path);
/* The one-run report: dir holds summary.json and metrics.jsonl (train --out); out_path gets the page. */
int nbx_report_run(const char *dir, const char *out_path);

/* Appends s with &, <, >, " escaped for HTML. */
int nbx_html(nb_buf *b, const char *s);
/* One line of a chart: n points (x, y); NAN y values break the line. color: palette index. lo, hi
 * (NULL: none): each point's interval, drawn as a vertical bar. */
typedef struct { const char *name; int n; const double *x, *y; int color; const double *lo, *hi; } nbx_series;
/* An SVG line chart (640 x 360) with axes, ticks, a legend and a title, appended to b. */
int nbx_svg_chart(nb_buf *b, const char *id, const char *cls, const char *title, const char *xlabel,
                  const char *ylabel, const nbx_series *s, int n_series);
/* The same with logarithmic axes where log_x / log_y: points with a value <= 0 there are left out. */
int nbx_svg_chart_log(nb_buf *b, const char *id, const char *cls, const char *title, const char *xlabel,
                      const char *ylabel, const nbx_series *s, int n_series, int log_x, int log_y);

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
    int n_done, n_whole;      /* finished runs, and those with a whole-split evaluation (final_eval.json) */
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
