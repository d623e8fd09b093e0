/* The report of one run (`nobubble report RUN_DIR`, a folder `train --out` wrote): one self-contained
 * HTML page like a sweep's, from RUN_DIR/summary.json and RUN_DIR/metrics.jsonl: a table of the run's
 * results, the training and validation loss against step and against training time, and the summary
 * itself. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "report/report.h"
#include "util/error.h"
#include "util/fs.h"

static const char run_style[] =
    "body{font-family:sans-serif;margin:2em;max-width:1400px;color:#222}"
    "table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}"
    "td:first-child,th:first-child{text-align:left}svg.chart{margin:6px;border:1px solid #eee}"
    "pre{background:#f6f6f6;padding:1em;overflow-x:auto}.note{color:#555;font-size:90%}";

/* The validation points only (metrics lines carry one at evaluations): x and val of those lines. */
typedef struct {
    int n;
    double *step, *time, *val;
} val_points;

static int collect_val(const nbx_run *r, val_points *v) {
    memset(v, 0, sizeof *v);
    v->step = malloc(sizeof(double) * (size_t)(r->n + 1));
    v->time = malloc(sizeof(double) * (size_t)(r->n + 1));
    v->val = malloc(sizeof(double) * (size_t)(r->n + 1));
    if (!v->step || !v->time || !v->val) return nb_fail("out of memory");
    for (int i = 0; i < r->n; i++)
        if (!isnan(r->val_loss[i])) {
            v->step[v->n] = r->step[i], v->time[v->n] = r->time_s[i], v->val[v->n] = r->val_loss[i];
            v->n++;
        }
    return 0;
}

static void free_val(val_points *v) {
    free(v->step);
    free(v->time);
    free(v->val);
}

static int cell(nb_buf *b, const char *fmt, double v) {
    return isnan(v) ? nb_buf_printf(b, "<td>&mdash;</td>") : nb_buf_printf(b, fmt, v);
}

static int results_table(nb_buf *b, const nbx_run *r) {
    int rc = nb_buf_printf(b, "<table id=\"run-table\"><tr><th>optimizer</th><th>delay</th><th>ef</th>"
                              "<th>steps</th><th>final train loss</th><th>final val loss</th><th>best val loss</th>"
                              "<th>tokens</th><th>seconds</th><th>tokens/s</th></tr>\n<tr><td>") ||
             nbx_html(b, r->optimizer) || nb_buf_printf(b, "</td><td>") || nbx_html(b, r->delay_mode) ||
             nb_buf_printf(b, "</td><td>%s</td><td>%.0f</td>", r->ef ? "yes" : "no", r->step[r->n - 1]);
    rc = rc || cell(b, "<td>%.4f</td>", r->final_train_loss) || cell(b, "<td>%.4f</td>", r->final_val_loss) ||
         cell(b, "<td>%.4f</td>", r->best_val_loss) || cell(b, "<td>%.0f</td>", r->tokens[r->n - 1]) ||
         cell(b, "<td>%.3f</td>", r->seconds) || cell(b, "<td>%.1f</td>", r->tokens_per_s);
    return rc || nb_buf_printf(b, "</tr>\n</table>\n");
}

/* Training loss at every step and validation loss at every evaluation, against step or time. */
static int loss_chart(nb_buf *b, const nbx_run *r, const val_points *v, int time) {
    nbx_series s[2] = {{"train", r->n, time ? r->time_s : r->step, r->train_loss, 0, NULL, NULL},
                       {"validation", v->n, time ? v->time : v->step, v->val, 1, NULL, NULL}};
    return nbx_svg_chart(b, time ? "run-time" : "run-loss", time ? "chart time-chart" : "chart loss-chart",
                         time ? "loss against training time" : "loss against step",
                         time ? "training time (s)" : "step", "loss", s, v->n ? 2 : 1);
}

static int summary_text(nb_buf *b, const char *dir) {
    char path[4200], *text;
    size_t n;
    snprintf(path, sizeof path, "%s/summary.json", dir);
    if (nb_fs_read_file(path, &text, &n, "run summary")) return -1;
    int rc = nb_buf_printf(b, "<h2>Summary</h2>\n<pre id=\"summary\">") || nbx_html(b, text) || nb_buf_printf(b, "</pre>\n");
    free(text);
    return rc;
}

static int run_page(nb_buf *b, const char *dir, const nbx_run *r, const val_points *v) {
    int rc = nb_buf_printf(b, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>nobubble run: ") ||
             nbx_html(b, dir) || nb_buf_printf(b, "</title><style>%s</style></head><body>\n<h1>nobubble run: ", run_style) ||
             nbx_html(b, dir) ||
             nb_buf_printf(b, "</h1>\n<p>%d metrics lines, %d evaluations.</p>\n", r->n, v->n);
    rc = rc || results_table(b, r);
    rc = rc || nb_buf_printf(b, "<h2>Loss</h2>\n<p class=\"note\">Training loss of every step (metrics.jsonl), "
                                 "validation loss at every evaluation.</p>\n") ||
         loss_chart(b, r, v, 0);
    rc = rc || nb_buf_printf(b, "<h2>Loss against training time</h2>\n<p class=\"note\">Time is the run's "
                                 "cumulative step time (time_s of metrics.jsonl, evaluation excluded).</p>\n") ||
         loss_chart(b, r, v, 1);
    rc = rc || summary_text(b, dir);
    return rc || nb_buf_printf(b, "</body></html>\n");
}

int nbx_report_run(const char *dir, const char *out_path) {
    nbx_run r;
    if (nbx_run_read(dir, &r)) return -1;
    val_points v;
    nb_buf b = {0};
    int rc = r.n ? collect_val(&r, &v) : nb_fail("%s/metrics.jsonl: no lines (the run did no step)", dir);
    if (!rc) rc = run_page(&b, dir, &r, &v);
    if (!rc) rc = nb_fs_write_atomic(out_path, b.p, b.n);
    if (r.n) free_val(&v);
    nb_buf_free(&b);
    nbx_run_free(&r);
    return rc;
}
