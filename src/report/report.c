/* The report of a sweep: one self-contained HTML page (inline SVG, no scripts, no network); a run's
 * folder (summary.json, no results.csv) gets report_run.c's page instead.
 *
 * Roles of the grid's axes (docs/experiments.md): the axis named `seed` is averaged over; the
 * axis named `delay` (else the last other axis) gives the curves overlaid in a chart; every
 * combination of the remaining axes is a panel (one chart each, e.g. one per optimizer). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>
#include "report/report.h"
#include "util/error.h"
#include "util/fs.h"
#include "util/hash.h"

typedef nbx_rrow rrow;
typedef nbx_report report;

/* One (panel, curve) cell: its runs' final validation losses over seeds, and the mean curve. */
typedef struct {
    int n_runs, n_final;
    double mean, sd, best_mean;
    int n_points;
    double *step, *val, *time;   /* mean over the runs that have each step */
} cell;

/* ------------------------------------------------------------ reading results.csv */
static int split(char *line, char **fields, int max) {
    int n = 0;
    for (char *p = line;; ) {
        if (n == max) return -1;
        fields[n++] = p;
        char *c = strchr(p, ',');
        if (!c) break;
        *c = 0;
        p = c + 1;
    }
    return n;
}

#define MAX_FIELDS 128
static int read_header(report *r, char *line, const char *path) {
    char *f[MAX_FIELDS];
    int n = split(line, f, MAX_FIELDS), first_result = -1;
    for (int i = 0; i < n && first_result < 0; i++)
        if (!strcmp(f[i], "final_train_loss")) first_result = i;
    if (n < 0 || strcmp(f[0], "point") || first_result < 1 || n - first_result != 7)
        return nb_fail("%s:1: expected the header point,AXIS...,%s (a results table written by nobubble sweep)",
                       path, NBX_RESULT_COLUMNS);
    r->n_axes = first_result - 1;
    if (!(r->axes = malloc(sizeof(char *) * (size_t)(r->n_axes + 1)))) return nb_fail("out of memory");
    for (int a = 0; a < r->n_axes; a++) r->axes[a] = f[1 + a];
    return 0;
}

static int read_row(report *r, char *line, const char *path, int lineno) {
    char *f[MAX_FIELDS];
    int want = r->n_axes + 8, n = split(line, f, MAX_FIELDS);
    if (n != want) return nb_fail("%s:%d: %d fields, expected %d like the header", path, lineno, n, want);
    /* a point twice would count its run twice in every mean and interval */
    for (int i = 0; i < r->n_rows; i++)
        if (!strcmp(r->rows[i].point, f[0]))
            return nb_fail("%s:%d: point '%s' is listed twice (a results table has one row per point)", path, lineno, f[0]);
    rrow *row = &r->rows[r->n_rows];
    memset(row, 0, sizeof *row);
    row->point = f[0];
    row->labels = malloc(sizeof(char *) * (size_t)(r->n_axes + 1));
    if (!row->labels) return nb_fail("out of memory");
    for (int a = 0; a < r->n_axes; a++) row->labels[a] = f[1 + a];
    row->status = f[1 + r->n_axes + 5];
    r->n_rows++;
    /* Any other status would drop a finished run from every mean without a word. */
    static const char *const statuses[] = {"done", "failed", "interrupted", "not_run"};
    int known = 0;
    for (size_t k = 0; k < sizeof statuses / sizeof *statuses; k++) known |= !strcmp(row->status, statuses[k]);
    if (!known)
        return nb_fail("%s:%d: point '%s': status '%s', expected done, failed, interrupted or not_run", path, lineno,
                       row->point, row->status);
    /* The point's folder is its labels joined by '_' (the sweep's naming): a row whose labels say otherwise
     * would put one run's files in another configuration's cell. */
    nb_buf name = {0};
    int rc = 0;
    for (int a = 0; a < r->n_axes && !rc; a++) rc = nb_buf_printf(&name, "%s%s", a ? "_" : "", row->labels[a]);
    if (!rc && r->n_axes == 0) rc = nb_buf_printf(&name, "run");
    if (rc) { nb_buf_free(&name); return nb_fail("out of memory"); }
    if (strcmp(name.p, row->point)) {
        nb_fail("%s:%d: point '%s' has the labels of '%s' (a point is named by its labels joined by '_')", path,
                lineno, row->point, name.p);
        nb_buf_free(&name);
        return -1;
    }
    nb_buf_free(&name);
    row->done = !strcmp(row->status, "done");
    if (!row->done) return 0;
    if (strchr(row->point, '/') || !strcmp(row->point, "..") || !strcmp(row->point, "."))
        return nb_fail("%s:%d: point '%s' is not a folder name", path, lineno, row->point);
    char dir[4400];
    snprintf(dir, sizeof dir, "%s/runs/%s", r->dir, row->point);
    if (nbx_run_read(dir, &row->run)) return -1;
    return 0;
}

static int read_results(report *r) {
    char path[4200];
    size_t n;
    snprintf(path, sizeof path, "%s/results.csv", r->dir);
    if (access(path, F_OK))
        return nb_fail("%s: no results.csv (a sweep's folder) and no summary.json (a run's folder, train --out): "
                       "nothing to report", r->dir);
    if (nb_fs_read_file(path, &r->csv, &n, "results table")) return -1;
    int lines = 1;
    for (size_t i = 0; i < n; i++) lines += r->csv[i] == '\n';
    if (!(r->rows = calloc((size_t)lines, sizeof *r->rows))) return nb_fail("out of memory");
    int lineno = 1;
    for (char *p = r->csv; *p; lineno++) {
        char *nl = strchr(p, '\n');
        if (nl) *nl = 0;
        int rc = *p == 0 ? 0 : lineno == 1 ? read_header(r, p, path) : read_row(r, p, path, lineno);
        if (rc) return -1;
        if (!nl) break;
        p = nl + 1;
    }
    if (!r->axes) return nb_fail("%s: empty (expected a results table written by nobubble sweep)", path);
    return 0;
}

/* ------------------------------------------------------------ roles, panels and curves */
static int index_of(const nbx_strv *s, const char *text) {
    for (int i = 0; i < s->n; i++)
        if (!strcmp(s->v[i], text)) return i;
    return -1;
}

/* The index of text in s, adding it when absent. */
static int intern(nbx_strv *s, const char *text) {
    int i = index_of(s, text);
    if (i >= 0) return i;
    return nbx_strv_push(s, text, strlen(text)) ? -1 : s->n - 1;
}

static void assign_roles(report *r) {
    r->seed_axis = r->curve_axis = -1;
    for (int a = 0; a < r->n_axes; a++) {
        if (!strcmp(r->axes[a], "seed")) r->seed_axis = a;
        if (!strcmp(r->axes[a], "delay")) r->curve_axis = a;
    }
    for (int a = r->n_axes - 1; a >= 0 && r->curve_axis < 0; a--)
        if (a != r->seed_axis) r->curve_axis = a;
}

static int group_rows(report *r) {
    for (int i = 0; i < r->n_rows; i++) {
        rrow *row = &r->rows[i];
        nb_buf key = {0}, title = {0};
        int rc = 0;
        for (int a = 0; a < r->n_axes && !rc; a++) {
            if (a == r->seed_axis || a == r->curve_axis) continue;
            rc = nb_buf_printf(&key, "%s%s", key.n ? "-" : "", row->labels[a]) ||
                 nb_buf_printf(&title, "%s%s=%s", title.n ? ", " : "", r->axes[a], row->labels[a]);
        }
        if (!rc && !key.n) rc = nb_buf_printf(&key, "all") || nb_buf_printf(&title, "all runs");
        if (!rc) {
            /* Titles name the axes, so they are unique; keys (for ids) could repeat when labels
             * hold '-': a repeated key gets the panel's number. */
            row->panel = intern(&r->panel_titles, title.p);
            if (row->panel == r->panel_keys.n) {
                if (index_of(&r->panel_keys, key.p) >= 0) rc = nb_buf_printf(&key, "-%d", row->panel + 1);
                if (!rc) rc = nbx_strv_push(&r->panel_keys, key.p, key.n);
            }
            row->curve = intern(&r->curves, r->curve_axis >= 0 ? row->labels[r->curve_axis] : "run");
            if (row->done && intern(&r->seeds, nbx_seed_of(r, row)) < 0) rc = -1;
        }
        nb_buf_free(&key);
        nb_buf_free(&title);
        if (rc || row->panel < 0 || row->curve < 0) return -1;
    }
    return 0;
}

/* ------------------------------------------------------------ cells */
typedef struct { double step, val, time; } vpoint;
static int cmp_vpoint(const void *a, const void *b) {
    double x = ((const vpoint *)a)->step, y = ((const vpoint *)b)->step;
    return (x > y) - (x < y);
}

/* The mean validation curve (and mean time at each step) over the cell's runs. */
static int mean_curve(const report *r, int panel, int curve, cell *c) {
    int total = 0;
    for (int i = 0; i < r->n_rows; i++)
        if (r->rows[i].done && r->rows[i].panel == panel && r->rows[i].curve == curve) total += r->rows[i].run.n;
    vpoint *v = malloc(sizeof *v * (size_t)(total + 1));
    c->step = malloc(sizeof(double) * (size_t)(total + 1));
    c->val = malloc(sizeof(double) * (size_t)(total + 1));
    c->time = malloc(sizeof(double) * (size_t)(total + 1));
    if (!v || !c->step || !c->val || !c->time) { free(v); return nb_fail("out of memory"); }
    int n = 0;
    for (int i = 0; i < r->n_rows; i++) {
        const rrow *row = &r->rows[i];
        if (!row->done || row->panel != panel || row->curve != curve) continue;
        for (int k = 0; k < row->run.n; k++)
            if (!isnan(row->run.val_loss[k])) v[n++] = (vpoint){row->run.step[k], row->run.val_loss[k], row->run.time_s[k]};
    }
    qsort(v, (size_t)n, sizeof *v, cmp_vpoint);
    for (int i = 0; i < n;) {
        int j = i;
        double sv = 0, st = 0;
        for (; j < n && v[j].step == v[i].step; j++) { sv += v[j].val; st += v[j].time; }
        c->step[c->n_points] = v[i].step;
        c->val[c->n_points] = sv / (j - i);
        c->time[c->n_points++] = st / (j - i);
        i = j;
    }
    free(v);
    return 0;
}

/* The cell's final and best losses over its finished runs (in the rows' order), their mean and sample
 * standard deviation from nbx_paired_stats, the report's one implementation. */
static int make_cell(const report *r, int panel, int curve, cell *c) {
    memset(c, 0, sizeof *c);
    double *finals = malloc(sizeof(double) * (size_t)(r->n_rows + 1));
    double *bests = malloc(sizeof(double) * (size_t)(r->n_rows + 1));
    int n_best = 0;
    if (!finals || !bests) {
        free(finals);
        free(bests);
        return nb_fail("out of memory");
    }
    for (int i = 0; i < r->n_rows; i++) {
        const rrow *row = &r->rows[i];
        if (!row->done || row->panel != panel || row->curve != curve) continue;
        c->n_runs++;
        if (!isnan(row->run.final_val_loss)) finals[c->n_final++] = row->run.final_val_loss;
        if (!isnan(row->run.best_val_loss)) bests[n_best++] = row->run.best_val_loss;
    }
    const nbx_paired f = nbx_paired_stats(finals, c->n_final);
    c->mean = f.mean;
    c->sd = f.sd;   /* sample standard deviation over seeds; 0 with fewer than 2 */
    c->best_mean = nbx_paired_stats(bests, n_best).mean;
    free(finals);
    free(bests);
    return mean_curve(r, panel, curve, c);
}

static void free_cell(cell *c) {
    free(c->step);
    free(c->val);
    free(c->time);
}

/* ------------------------------------------------------------ the page */
static const char style[] =
    "body{font-family:sans-serif;margin:2em;max-width:1400px;color:#222}"
    "table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}"
    "td:first-child,th:first-child{text-align:left}svg.chart{margin:6px;border:1px solid #eee}"
    "pre{background:#f6f6f6;padding:1em;overflow-x:auto}.note{color:#555;font-size:90%}";

static int charts(nb_buf *b, const report *r, cell *cells, const char *kind) {
    int time = !strcmp(kind, "time");
    for (int p = 0; p < r->panel_keys.n; p++) {
        nbx_series s[64];
        int n = 0;
        for (int c = 0; c < r->curves.n && n < 64; c++) {
            cell *x = &cells[p * r->curves.n + c];
            if (x->n_runs) s[n++] = (nbx_series){r->curves.v[c], x->n_points, time ? x->time : x->step, x->val, c, NULL, NULL};
        }
        char id[256], title[512];
        snprintf(id, sizeof id, "%s-%s", kind, r->panel_keys.v[p]);
        snprintf(title, sizeof title, "%s", r->panel_titles.v[p]);
        if (nbx_svg_chart(b, id, time ? "time-chart" : "val-chart", title, time ? "training time (s)" : "step",
                          "validation loss", s, n))
            return -1;
    }
    return 0;
}

static int number(nb_buf *b, const char *fmt, double v) {
    return isnan(v) ? nb_buf_printf(b, "<td>&mdash;</td>") : nb_buf_printf(b, fmt, v);
}

/* ------------------------------------------------------------ paired gaps */
static int gap_cells(nb_buf *b, const report *r, int p, int c, int sync, double *scratch) {
    nb_buf unpaired = {0};
    int n = sync >= 0 && sync != c ? nbx_paired_gaps(r, p, c, sync, scratch, &unpaired) : 0;
    nbx_paired g = nbx_paired_stats(scratch, n < 0 ? 0 : n);
    int rc = n < 0 || number(b, "<td>%+.4f</td>", g.mean) || number(b, "<td>%.4f</td>", n > 1 ? g.sd : NAN);
    if (n > 1)
        rc = rc || nb_buf_printf(b, "<td>[%+.4f, %+.4f]%s</td>", g.mean - g.half, g.mean + g.half,
                                 g.within_noise ? " within noise" : "");
    else rc = rc || nb_buf_printf(b, n == 1 ? "<td>n/a: 1 pair</td>" : "<td>&mdash;</td>");
    if (sync >= 0 && sync != c)
        rc = rc || nb_buf_printf(b, "<td>%d%s", n, unpaired.n ? "; unpaired: " : "") ||
             (unpaired.n && nb_buf_printf(b, "%s", unpaired.p)) || nb_buf_printf(b, "</td>");
    else rc = rc || nb_buf_printf(b, "<td>&mdash;</td>");
    nb_buf_free(&unpaired);
    return rc;
}

static int gap_row(nb_buf *b, const report *r, int p, const cell *row, int c) {
    const cell *x = &row[c];
    int sync = nbx_sync_curve(r, p), rc = 0;
    double *scratch = malloc(sizeof(double) * (size_t)(r->seeds.n + 1));
    if (!scratch) return nb_fail("out of memory");
    rc |= nb_buf_printf(b, "<tr><td>") || nbx_html(b, r->panel_titles.v[p]) || nb_buf_printf(b, "</td><td>") ||
          nbx_html(b, r->curves.v[c]) || nb_buf_printf(b, "</td><td>%d</td>", x->n_final);
    rc |= isnan(x->mean) ? nb_buf_printf(b, "<td>&mdash;</td>") : nb_buf_printf(b, "<td>%.4f &plusmn; %.4f</td>", x->mean, x->sd);
    rc |= number(b, "<td>%.4f</td>", x->best_mean);
    rc = rc || gap_cells(b, r, p, c, sync, scratch) || nbx_recovery_cell(b, r, p, c, scratch);
    free(scratch);
    return rc || nb_buf_printf(b, "</tr>\n");
}

/* Which measurement "final val loss" is, in every table of the page. */
static int measure_note(nb_buf *b, const report *r) {
    if (r->n_done > 0 && r->n_whole == r->n_done)
        return nb_buf_printf(b, "<p class=\"note\" id=\"measure\">The final validation loss of every run is its "
                                "final model on the whole validation split (final_eval.json, written by "
                                "experiments/evaluate_whole.sh), in every table and chart of this page except those of "
                                "the evaluations during training (the curves and the best validation loss).</p>\n");
    if (r->n_whole > 0)
        return nb_buf_printf(b, "<p class=\"note\" id=\"measure\">%d of %d finished runs also have a whole-split "
                                "evaluation (final_eval.json); the tables use the last evaluation during training for "
                                "every run, so that they compare like with like.</p>\n", r->n_whole, r->n_done);
    return 0;
}

static int gap_table(nb_buf *b, const report *r, const cell *cells) {
    if (measure_note(b, r)) return -1;
    if (nb_buf_printf(b, "<h2>Final validation loss and the gap to synchronous training</h2>\n<p class=\"note\">Final "
                          "val loss: mean &plusmn; sample standard deviation over the runs of each cell (seeds). Gaps "
                          "are paired: runs that differ only in delay or mitigation share seed and data order, so the "
                          "gap (this - sync, the panel's synchronous runs) is taken seed by seed; the table gives their "
                          "mean, standard deviation and 95%% interval (Student's t, pairs - 1 degrees of freedom), "
                          "&ldquo;within noise&rdquo; when the interval covers zero. A seed with a run on one side "
                          "only is listed as unpaired and left out. Recovery, for a mitigated delay (error feedback, "
                          "Taylor, synchronous phases): 1 - gap(this) / gap(async) per seed, async being the same "
                          "delay without mitigation, then their mean and 95%% t interval; n/a when the unmitigated gap "
                          "is within noise (or not positive).</p>\n<table id=\"gap-table\"><tr><th>panel</th>"
                          "<th>curve</th><th>runs</th><th>final val loss</th><th>best val loss (mean)</th>"
                          "<th>gap to sync (paired mean)</th><th>gap sd</th><th>gap 95%% interval</th><th>pairs</th>"
                          "<th>recovery (95%% interval)</th></tr>\n"))
        return -1;
    for (int p = 0; p < r->panel_keys.n; p++)
        for (int c = 0; c < r->curves.n; c++)
            if (cells[p * r->curves.n + c].n_runs && gap_row(b, r, p, &cells[p * r->curves.n], c)) return -1;
    return nb_buf_printf(b, "</table>\n");
}

static int runs_table(nb_buf *b, const report *r) {
    if (nb_buf_printf(b, "<h2>Runs</h2>\n<table id=\"runs-table\"><tr><th>point</th>")) return -1;
    for (int a = 0; a < r->n_axes; a++)
        if (nb_buf_printf(b, "<th>") || nbx_html(b, r->axes[a]) || nb_buf_printf(b, "</th>")) return -1;
    if (nb_buf_printf(b, "<th>status</th><th>final train loss</th><th>final val loss</th><th>best val loss</th>"
                          "<th>tokens</th><th>seconds</th></tr>\n"))
        return -1;
    for (int i = 0; i < r->n_rows; i++) {
        const rrow *row = &r->rows[i];
        int rc = nb_buf_printf(b, "<tr><td>") || nbx_html(b, row->point) || nb_buf_printf(b, "</td>");
        for (int a = 0; a < r->n_axes && !rc; a++)
            rc = nb_buf_printf(b, "<td>") || nbx_html(b, row->labels[a]) || nb_buf_printf(b, "</td>");
        rc = rc || nb_buf_printf(b, "<td>") || nbx_html(b, row->status) || nb_buf_printf(b, "</td>");
        if (row->done)
            rc = rc || number(b, "<td>%.4f</td>", row->run.final_train_loss) || number(b, "<td>%.4f</td>", row->run.final_val_loss) ||
                 number(b, "<td>%.4f</td>", row->run.best_val_loss) || number(b, "<td>%.0f</td>", row->run.tokens[row->run.n - 1]) ||
                 number(b, "<td>%.3f</td>", row->run.seconds);
        else rc = rc || nb_buf_printf(b, "<td></td><td></td><td></td><td></td><td></td>");
        if (rc || nb_buf_printf(b, "</tr>\n")) return -1;
    }
    return nb_buf_printf(b, "</table>\n");
}

/* Pipeline timelines (`nobubble schedule --svg`) a run folder holds as schedule.svg, each
 * distinct picture once. */
static int schedules(nb_buf *b, const report *r) {
    uint64_t seen[256];
    int n_seen = 0;
    for (int i = 0; i < r->n_rows && n_seen < 256; i++) {
        char path[4400], *svg;
        size_t n;
        snprintf(path, sizeof path, "%s/runs/%s/schedule.svg", r->dir, r->rows[i].point);
        if (!r->rows[i].done || access(path, R_OK) || nb_fs_read_file(path, &svg, &n, NULL)) continue;
        uint64_t h = nb_fnv1a(NB_FNV_INIT, svg, n);
        int dup = 0;
        for (int k = 0; k < n_seen; k++) dup |= seen[k] == h;
        const char *start = strstr(svg, "<svg");
        int rc = 0;
        if (!dup && start) {
            rc = (!n_seen && nb_buf_printf(b, "<h2 id=\"schedules\">Pipeline schedules</h2>\n")) ||
                 nb_buf_printf(b, "<figure class=\"schedule\">%s<figcaption>", start) || nbx_html(b, r->rows[i].point) ||
                 nb_buf_printf(b, "</figcaption></figure>\n");
            seen[n_seen++] = h;
        }
        free(svg);
        if (rc) return -1;
    }
    return 0;
}

static int grid_text(nb_buf *b, const report *r) {
    char path[4200], *text;
    size_t n;
    snprintf(path, sizeof path, "%s/grid.txt", r->dir);
    if (access(path, R_OK) || nb_fs_read_file(path, &text, &n, NULL)) return 0;
    int rc = nb_buf_printf(b, "<h2>The grid</h2>\n<pre id=\"grid\">") || nbx_html(b, text) || nb_buf_printf(b, "</pre>\n");
    free(text);
    return rc;
}

static int page(nb_buf *b, const report *r, cell *cells) {
    int done = 0;
    for (int i = 0; i < r->n_rows; i++) done += r->rows[i].done;
    int rc = nb_buf_printf(b, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>nobubble report: ") ||
             nbx_html(b, r->dir) || nb_buf_printf(b, "</title><style>%s</style></head><body>\n<h1>nobubble report: ", style) ||
             nbx_html(b, r->dir) ||
             nb_buf_printf(b, "</h1>\n<p>%d runs, %d complete. Curves: ", r->n_rows, done) ||
             (r->curve_axis >= 0 ? nbx_html(b, r->axes[r->curve_axis]) : nb_buf_printf(b, "(one per panel)")) ||
             nb_buf_printf(b, "; panels: one per %s; averaged over: %s.</p>\n",
                           r->panel_keys.n > 1 ? "combination of the other axes" : "sweep",
                           r->seed_axis >= 0 ? "seed" : "nothing (no seed axis)");
    rc = rc || nb_buf_printf(b, "<h2>Validation loss</h2>\n<p class=\"note\">Mean over seeds at each evaluation.</p>\n") ||
         charts(b, r, cells, "val");
    rc = rc || gap_table(b, r, cells) || nbx_report_scale(b, r);
    rc = rc || nb_buf_printf(b, "<h2>Validation loss against training time</h2>\n<p class=\"note\">Time is the "
                                 "run's cumulative step time (time_s of metrics.jsonl, evaluation excluded), mean over "
                                 "seeds.</p>\n") ||
         charts(b, r, cells, "time");
    rc = rc || runs_table(b, r) || schedules(b, r) || grid_text(b, r);
    return rc || nb_buf_printf(b, "</body></html>\n");
}

static void free_report(report *r) {
    for (int i = 0; i < r->n_rows; i++) {
        free(r->rows[i].labels);
        nbx_run_free(&r->rows[i].run);
    }
    free(r->rows);
    free(r->axes);
    free(r->csv);
    nbx_strv_free(&r->panel_keys);
    nbx_strv_free(&r->panel_titles);
    nbx_strv_free(&r->curves);
    nbx_strv_free(&r->seeds);
}

/* A sweep's folder has results.csv; a run's (train --out) summary.json and metrics.jsonl. */
static int is_run_folder(const char *dir) {
    char csv[4200], summary[4200];
    snprintf(csv, sizeof csv, "%s/results.csv", dir);
    snprintf(summary, sizeof summary, "%s/summary.json", dir);
    return access(csv, F_OK) && !access(summary, F_OK);
}

/* A study that evaluated every finished run's final model on the whole validation split
 * (experiments/evaluate_whole.sh: final_eval.json) measured its outcome there, not on the last
 * evaluation's few batches: then every table uses it. A folder where only some runs have it keeps the
 * batches for all, so that no table compares one measure with the other; the note says which. */
static void use_whole_split(report *r) {
    for (int i = 0; i < r->n_rows; i++)
        if (r->rows[i].done) {
            r->n_done++;
            r->n_whole += !isnan(r->rows[i].run.whole_split_loss);
        }
    if (r->n_done == 0 || r->n_whole < r->n_done) return;
    for (int i = 0; i < r->n_rows; i++)
        if (r->rows[i].done) r->rows[i].run.final_val_loss = r->rows[i].run.whole_split_loss;
}

/* The page goes to a file of its own: a name ending in .html (so that a slip cannot put it over the
 * results.csv or summary.json it reads), and never in place of a link, a FIFO or a device. */
static int check_out(const char *out_path) {
    const size_t n = strlen(out_path);
    const int html = (n > 5 && !strcasecmp(out_path + n - 5, ".html")) || (n > 4 && !strcasecmp(out_path + n - 4, ".htm"));
    if (!html) return nb_fail("--out %s: expected a file name ending in .html (the page is HTML)", out_path);
    struct stat st;
    if (!lstat(out_path, &st) && !S_ISREG(st.st_mode))
        return nb_fail("--out %s: exists and is not a regular file (a folder, a link, a FIFO or a device): not replaced",
                       out_path);
    return 0;
}

int nb_report_write(const char *dir, const char *out_path) {
    if (check_out(out_path)) return -1;
    if (is_run_folder(dir)) return nbx_report_run(dir, out_path);
    report r;
    memset(&r, 0, sizeof r);
    r.dir = dir;
    int rc = read_results(&r);
    if (!rc) use_whole_split(&r);
    if (!rc) assign_roles(&r);
    if (!rc) rc = group_rows(&r);
    int n_cells = r.panel_keys.n * r.curves.n;
    cell *cells = rc ? NULL : calloc((size_t)n_cells + 1, sizeof *cells);
    if (!rc && !cells) rc = nb_fail("out of memory");
    for (int k = 0; k < n_cells && !rc; k++) rc = make_cell(&r, k / r.curves.n, k % r.curves.n, &cells[k]);
    nb_buf b = {0};
    if (!rc) rc = page(&b, &r, cells);
    if (!rc) rc = nb_fs_write_atomic(out_path, b.p, b.n);
    nb_buf_free(&b);
    for (int k = 0; cells && k < n_cells; k++) free_cell(&cells[k]);
    free(cells);
    free_report(&r);
    return rc;
}
