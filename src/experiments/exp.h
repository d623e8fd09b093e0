/* Internal helpers of the experiments part: string lists, reading a run's files, the results
 * table, SVG line charts, HTML escaping. Prefixed nbx_. */
#ifndef NB_EXPERIMENTS_EXP_H
#define NB_EXPERIMENTS_EXP_H
#include <stddef.h>
#include <stdio.h>
#include "util/json.h"

/* A growable list of malloc'ed strings; line is where it came from in a grid file. */
typedef struct { char **v; int n, cap, line; } nbx_strv;
int nbx_strv_push(nbx_strv *s, const char *text, size_t len);
void nbx_strv_free(nbx_strv *s);

/* Splits text at blanks; "..." and '...' group (a double-quoted part may escape \" and \\).
 * On an unbalanced quote returns -1 and writes why to err. */
int nbx_tokenize(const char *text, nbx_strv *out, char *err, size_t err_size);
/* Appends arg to b quoted for a POSIX shell when it needs quoting. */
int nbx_shell_quote(nb_buf *b, const char *arg);
/* Appends s with &, <, >, " escaped for HTML. */
int nbx_html(nb_buf *b, const char *s);

/* What one finished run left behind: its metrics (one entry per line of metrics.jsonl; val_loss
 * NAN where a line has none) and its summary. */
typedef struct {
    int n;
    double *step, *train_loss, *tokens, *time_s, *val_loss;
    double final_train_loss, final_val_loss, best_val_loss, seconds, tokens_per_s;
    char delay_mode[16], optimizer[16];
    int tau, ef, sync_start, sync_cooldown;
    double taylor;
    double params;          /* the model's parameter count from summary.json's model; NAN without one */
} nbx_run;
/* Reads dir/summary.json and dir/metrics.jsonl; errors name the file (and line). */
int nbx_run_read(const char *dir, nbx_run *r);
void nbx_run_free(nbx_run *r);
/* The one-run report: dir holds summary.json and metrics.jsonl (train --out); out_path gets the page. */
int nbx_report_run(const char *dir, const char *out_path);
/* A synchronous run: no delay at any step (sync, or fixed:0). */
int nbx_run_is_sync(const nbx_run *r);
/* Delayed with no mitigation: no EF, no Taylor, no synchronous start or cooldown. */
int nbx_run_is_plain_async(const nbx_run *r);

/* The columns of results.csv after the point name and the axes. */
#define NBX_RESULT_COLUMNS "final_train_loss,final_val_loss,best_val_loss,tokens,seconds,status,exit_status"

/* One line of a chart: n points (x, y); NAN y values break the line. color: palette index. lo, hi
 * (NULL: none): each point's interval, drawn as a vertical bar. */
typedef struct { const char *name; int n; const double *x, *y; int color; const double *lo, *hi; } nbx_series;
/* An SVG line chart (640 x 360) with axes, ticks, a legend and a title, appended to b. */
int nbx_svg_chart(nb_buf *b, const char *id, const char *cls, const char *title, const char *xlabel,
                  const char *ylabel, const nbx_series *s, int n_series);
/* The same with logarithmic axes where log_x / log_y: points with a value <= 0 there are left out. */
int nbx_svg_chart_log(nb_buf *b, const char *id, const char *cls, const char *title, const char *xlabel,
                      const char *ylabel, const nbx_series *s, int n_series, int log_x, int log_y);
#endif
