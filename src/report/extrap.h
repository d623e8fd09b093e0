/* Internal: the scaling section's extrapolation table and its caveats (docs/experiments.md, "Tuned
 * rates and scaling"). report_scale.c gathers each series' and delayed curve's mean gap per length;
 * this file fits ln(mean gap) on ln(tokens), extrapolates with confidence intervals and writes the
 * table's rows, then the caveats that apply to the rows it fitted. */
#ifndef NB_REPORT_EXTRAP_H
#define NB_REPORT_EXTRAP_H
#include "report/report.h"

/* One row's input: the slope table's points of a (series, curve). */
typedef struct {
    const char *series, *curve;
    const double *x, *y;        /* ln(tokens), ln(mean gap) of each tuned length with a mean gap > 0 */
    int n;                      /* how many */
    const char *why;            /* non-empty: the slope is not fitted, and why (the slope table's words) */
    const char *last_steps;     /* the longest fitted length's steps label */
    double t_first, t_last;     /* mean tokens at the shortest and the longest fitted lengths */
    const char *lengths_text;   /* HTML: "300 steps at lr 2e-3, 1000 steps at lr 1e-3 (grid edge)", then any left out */
    double floor_sd;            /* sample sd of the synchronous final val losses at the longest length */
    int floor_runs;             /* how many */
    int seeds_shared;           /* a seed has pairs at two lengths or more */
    int edge;                   /* a fitted length's tuned rate is at its grid's edge */
    double params;              /* the model's parameter count; NAN when unknown, -1 when the lengths differ */
} nbx_extrap_in;

/* What the caveats need from the rows fitted so far (zero-initialize; nbx_extrap_notes_free). */
typedef struct {
    nb_buf fits;                /* one <li> per fitted row: its lengths, span and reach */
    int rows, seeds_shared, edge, params_unknown, params_seen;
    double params_lo, params_hi, t_max;
} nbx_extrap_notes;

/* The table's opening and header row. */
int nbx_extrap_header(nb_buf *b);
/* One row: the extrapolated gaps and the noise floor's crossing, or the reason there are none. */
int nbx_extrap_row(nb_buf *b, nbx_extrap_notes *notes, const nbx_extrap_in *in);
/* Closes the table, then the caveats (<ul id="extrapolation-caveats">) when a row was fitted. */
int nbx_extrap_footer(nb_buf *b, const nbx_extrap_notes *notes);
void nbx_extrap_notes_free(nbx_extrap_notes *notes);
#endif
