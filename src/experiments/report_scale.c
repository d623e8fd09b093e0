/* The tuning and scaling sections of a sweep's report (docs/experiments.md, "Tuned rates and
 * scaling"). With an axis named `lr`: every combination of the other axes but seed and delay (a
 * tuning group, e.g. steps=300, optimizer=adamw) gets the rate whose synchronous runs have the best
 * mean final validation loss (the paper's procedure: rates tuned for the synchronous run), a table
 * of every rate's losses and paired gaps, and the gap against the rate. With an axis named `steps`
 * too: per the remaining axes (a series, e.g. optimizer=adamw), the paired gap at each length's
 * tuned rate against training tokens, the slope of log(gap) on log(tokens), and that line
 * extrapolated with its caveats (extrap.c, on the points gathered here). */
#include <gsl/gsl_fit.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "experiments/extrap.h"
#include "experiments/report.h"
#include "util/decimal.h"
#include "util/error.h"

typedef struct {
    char *title, *key;       /* "steps=300, optimizer=adamw"; for ids "300-adamw" */
    char *series;            /* the title without the steps axis ("optimizer=adamw"; "all runs") */
    const char *steps;       /* the steps label (NULL without a steps axis) */
    double steps_value;
    int n_rates;
    int *panel;              /* the panel of each rate, rates in ascending order */
    double *rate;            /* the rates' values (their order in the grid when one is not a number) */
    int pick;                /* the tuned rate's index; -1: none, why says so */
    char why[200];
} tgroup;

typedef struct {
    const nbx_report *r;
    int lr_axis, steps_axis, sync;  /* sync: the synchronous curve, -1 when no run is synchronous */
    tgroup *g;
    int n_groups;
    nbx_strv series;                /* distinct series titles, in the grid's order */
    double *scratch, *scratch2;     /* r->seeds.n + 1 values each */
} tuning;

/* The synchronous runs of one panel: planned (rows of results.csv), finished with a validation
 * loss, failed (a rate that diverges), and the finished ones' mean and sample standard deviation. */
typedef struct { int planned, done, finished, failed; double mean, sd; } sync_cell;

/* ------------------------------------------------------------ small helpers */
static int axis_named(const nbx_report *r, const char *name) {
    for (int a = 0; a < r->n_axes; a++)
        if (!strcmp(r->axes[a], name)) return a;
    return -1;
}

/* A label's number; NAN when it is not one. */
static double label_value(const char *s) {
    char *end;
    double v = strtod(s, &end);
    return nb_is_decimal(s, 0) && end != s && !*end && isfinite(v) ? v : NAN;
}

static const nbx_rrow *row_of_panel(const nbx_report *r, int p) {
    for (int i = 0; i < r->n_rows; i++)
        if (r->rows[i].panel == p) return &r->rows[i];
    return NULL;
}

/* The labels of a row's axes other than seed, the curves, lr and `skip` (-1: none) as a title
 * ("a=x, b=y") or as a key for ids ("x-y"). */
static int describe(const tuning *t, const nbx_rrow *row, int skip, int as_key, nb_buf *out) {
    const nbx_report *r = t->r;
    for (int a = 0; a < r->n_axes; a++) {
        if (a == r->seed_axis || a == r->curve_axis || a == t->lr_axis || a == skip) continue;
        int rc = as_key ? nb_buf_printf(out, "%s%s", out->n ? "-" : "", row->labels[a])
                        : nb_buf_printf(out, "%s%s=%s", out->n ? ", " : "", r->axes[a], row->labels[a]);
        if (rc) return -1;
    }
    if (!out->n) return nb_buf_printf(out, as_key ? "all" : "all runs");
    return 0;
}

static int mean_sd(const double *x, int n, double *mean, double *sd) {
    double s = 0, q = 0;
    for (int i = 0; i < n; i++) s += x[i];
    *mean = n ? s / n : NAN;
    for (int i = 0; i < n; i++) q += (x[i] - *mean) * (x[i] - *mean);
    *sd = n > 1 ? sqrt(q / (n - 1)) : 0;
    return n;
}

/* Mean +- sample sd of curve c's final validation losses in panel p ("not run" when the grid has no
 * such point, "not finished" when none is done). */
static int loss_cell(nb_buf *b, const tuning *t, int p, int c) {
    const nbx_report *r = t->r;
    int planned = 0, n = 0;
    for (int i = 0; i < r->n_rows; i++) {
        const nbx_rrow *row = &r->rows[i];
        if (row->panel != p || row->curve != c) continue;
        planned++;
        if (row->done && !isnan(row->run.final_val_loss)) t->scratch[n++] = row->run.final_val_loss;
    }
    if (!planned) return nb_buf_printf(b, "<td>not run</td>");
    if (!n) return nb_buf_printf(b, "<td>not finished</td>");
    double mean, sd;
    mean_sd(t->scratch, n, &mean, &sd);
    return nb_buf_printf(b, "<td>%.4f &plusmn; %.4f (%d)</td>", mean, sd, n);
}

static sync_cell sync_of(const tuning *t, int p) {
    const nbx_report *r = t->r;
    sync_cell s = {0, 0, 0, 0, NAN, 0};
    for (int i = 0; i < r->n_rows && t->sync >= 0; i++) {
        const nbx_rrow *row = &r->rows[i];
        if (row->panel != p || row->curve != t->sync) continue;
        s.planned++;
        s.failed += !strcmp(row->status, "failed");
        s.done += row->done;
        if (row->done && !isnan(row->run.final_val_loss)) t->scratch[s.finished++] = row->run.final_val_loss;
    }
    mean_sd(t->scratch, s.finished, &s.mean, &s.sd);
    return s;
}

/* The paired gap of curve c to sync in panel p as "+0.0123 [+0.0050, +0.0196]" (with "within
 * noise" when the interval covers zero); one pair has no interval. The pairs' gaps stay in
 * t->scratch[0..n) until the next call. */
static nbx_paired gap_of(const tuning *t, int p, int c) {
    int n = t->sync >= 0 ? nbx_paired_gaps(t->r, p, c, t->sync, t->scratch, NULL) : 0;
    return nbx_paired_stats(t->scratch, n < 0 ? 0 : n);
}

static int gap_text(nb_buf *b, nbx_paired g) {
    if (g.n == 0) return nb_buf_printf(b, "&mdash;");
    if (g.n == 1) return nb_buf_printf(b, "%+.4f (1 pair, no interval)", g.mean);
    return nb_buf_printf(b, "%+.4f [%+.4f, %+.4f]%s", g.mean, g.mean - g.half, g.mean + g.half,
                         g.within_noise ? " within noise" : "");
}

/* ------------------------------------------------------------ groups and their picks */
static int find_group(const tuning *t, const char *title) {
    for (int k = 0; k < t->n_groups; k++)
        if (!strcmp(t->g[k].title, title)) return k;
    return -1;
}

static int new_group(tuning *t, const nbx_rrow *row, nb_buf *title) {
    tgroup *g = &t->g[t->n_groups++];
    nb_buf key = {0}, series = {0};
    g->title = title->p;
    *title = (nb_buf){0};
    g->pick = -1;
    g->steps = t->steps_axis >= 0 ? row->labels[t->steps_axis] : NULL;
    g->steps_value = g->steps ? label_value(g->steps) : NAN;
    int rc = describe(t, row, -1, 1, &key) || describe(t, row, t->steps_axis, 0, &series);
    for (int k = 0; !rc && k < t->n_groups - 1; k++)  /* keys could repeat when labels hold '-' */
        if (!strcmp(t->g[k].key, key.p)) rc = nb_buf_printf(&key, "-%d", t->n_groups);
    g->key = key.p;
    g->series = series.p;
    int known = 0;
    for (int k = 0; !rc && k < t->series.n; k++) known |= !strcmp(t->series.v[k], series.p);
    if (!rc && !known) rc = nbx_strv_push(&t->series, series.p, series.n);
    g->panel = malloc(sizeof(int) * (size_t)(t->r->panel_keys.n + 1));
    g->rate = malloc(sizeof(double) * (size_t)(t->r->panel_keys.n + 1));
    if (!rc && (!g->panel || !g->rate)) rc = nb_fail("out of memory");
    return rc;
}

/* Rates ascending (insertion sort: a handful); grid order when a label is not a number. */
static void sort_rates(tgroup *g) {
    int numeric = 1;
    for (int i = 0; i < g->n_rates; i++) numeric &= !isnan(g->rate[i]);
    for (int i = 0; i < g->n_rates; i++) {
        if (!numeric) { g->rate[i] = i; continue; }
        for (int j = i; j > 0 && g->rate[j] < g->rate[j - 1]; j--) {
            double v = g->rate[j]; g->rate[j] = g->rate[j - 1]; g->rate[j - 1] = v;
            int p = g->panel[j]; g->panel[j] = g->panel[j - 1]; g->panel[j - 1] = p;
        }
    }
}

static int make_groups(tuning *t) {
    const nbx_report *r = t->r;
    if (!(t->g = calloc((size_t)r->panel_keys.n + 1, sizeof *t->g))) return nb_fail("out of memory");
    for (int p = 0; p < r->panel_keys.n; p++) {
        const nbx_rrow *row = row_of_panel(r, p);
        nb_buf title = {0};
        if (!row) continue;
        if (describe(t, row, -1, 0, &title)) return -1;
        int k = find_group(t, title.p);
        if (k < 0 && new_group(t, row, &title)) { nb_buf_free(&title); return -1; }
        nb_buf_free(&title);
        tgroup *g = &t->g[k < 0 ? t->n_groups - 1 : k];
        g->panel[g->n_rates] = p;
        g->rate[g->n_rates++] = label_value(row->labels[t->lr_axis]);
    }
    for (int k = 0; k < t->n_groups; k++) sort_rates(&t->g[k]);
    return 0;
}

/* The tuned rate: every synchronous run of the group has ended (a failed one, a diverging rate, rules
 * its rate out), then the lowest mean final validation loss over seeds. */
static void pick(tuning *t, tgroup *g) {
    int planned = 0, ended = 0;
    for (int i = 0; i < g->n_rates; i++) {
        sync_cell s = sync_of(t, g->panel[i]);
        planned += s.planned;
        ended += s.done + s.failed;
        if (s.finished && s.finished == s.planned && (g->pick < 0 || s.mean < sync_of(t, g->panel[g->pick]).mean)) g->pick = i;
    }
    if (t->sync < 0) snprintf(g->why, sizeof g->why, "no synchronous run finished");
    else if (ended < planned)
        snprintf(g->why, sizeof g->why, "not tuned yet: %d of %d synchronous runs ended", ended, planned);
    else if (g->pick < 0) snprintf(g->why, sizeof g->why, "no rate has every synchronous run finished with a validation loss");
    else return;
    g->pick = -1;
}

/* ------------------------------------------------------------ the tuning table and charts */
static int tuning_header(nb_buf *b, const tuning *t) {
    const nbx_report *r = t->r;
    int rc = nb_buf_printf(b, "<table id=\"tuning-table\"><tr><th>group</th><th>lr</th><th>");
    rc = rc || nbx_html(b, t->sync >= 0 ? r->curves.v[t->sync] : "sync") ||
         nb_buf_printf(b, " final val loss (runs)</th>");
    for (int c = 0; c < r->curves.n && !rc; c++) {
        if (c == t->sync) continue;
        rc = nb_buf_printf(b, "<th>") || nbx_html(b, r->curves.v[c]) || nb_buf_printf(b, " final val loss (runs)</th><th>") ||
             nbx_html(b, r->curves.v[c]) || nb_buf_printf(b, " - sync: paired gap [95%% interval]</th>");
    }
    return rc || nb_buf_printf(b, "<th>tuned rate</th></tr>\n");
}

static int pick_cell(nb_buf *b, const tgroup *g, int i) {
    if (g->pick < 0) return nb_buf_printf(b, "<td>no pick: %s</td>", g->why);
    if (g->pick != i) return nb_buf_printf(b, "<td></td>");
    if (g->n_rates == 1) return nb_buf_printf(b, "<td>tuned; edge: extend the grid (the only rate)</td>");
    if (i == 0) return nb_buf_printf(b, "<td>tuned; edge: extend the grid (the lowest rate)</td>");
    if (i == g->n_rates - 1) return nb_buf_printf(b, "<td>tuned; edge: extend the grid (the highest rate)</td>");
    return nb_buf_printf(b, "<td>tuned</td>");
}

static int tuning_row(nb_buf *b, const tuning *t, const tgroup *g, int i) {
    const nbx_report *r = t->r;
    int p = g->panel[i];
    int rc = nb_buf_printf(b, "<tr><td>") || nbx_html(b, g->title) || nb_buf_printf(b, "</td><td>") ||
             nbx_html(b, row_of_panel(r, p)->labels[t->lr_axis]) || nb_buf_printf(b, "</td>");
    rc = rc || (t->sync >= 0 ? loss_cell(b, t, p, t->sync) : nb_buf_printf(b, "<td>&mdash;</td>"));
    for (int c = 0; c < r->curves.n && !rc; c++) {
        if (c == t->sync) continue;
        rc = loss_cell(b, t, p, c) || nb_buf_printf(b, "<td>") || gap_text(b, gap_of(t, p, c)) || nb_buf_printf(b, "</td>");
    }
    return rc || pick_cell(b, g, i) || nb_buf_printf(b, "</tr>\n");
}

/* The gap against the rate, one line per delayed curve, its 95% intervals as bars. */
static int gap_lr_chart(nb_buf *b, const tuning *t, const tgroup *g) {
    const nbx_report *r = t->r;
    int n_delayed = r->curves.n - (t->sync >= 0), k = 0, rc = 0, numeric = 1;
    double *v = malloc(sizeof(double) * (size_t)(4 * g->n_rates * n_delayed + 1));
    nbx_series *s = malloc(sizeof *s * (size_t)(n_delayed + 1));
    if (!v || !s) { free(v); free(s); return nb_fail("out of memory"); }
    for (int i = 0; i < g->n_rates; i++) numeric &= g->rate[i] > 0;
    for (int c = 0; c < r->curves.n; c++) {
        if (c == t->sync) continue;
        double *x = v + (size_t)4 * g->n_rates * k, *y = x + g->n_rates, *lo = y + g->n_rates, *hi = lo + g->n_rates;
        for (int i = 0; i < g->n_rates; i++) {
            nbx_paired gp = gap_of(t, g->panel[i], c);
            x[i] = g->rate[i];
            y[i] = gp.mean;
            lo[i] = gp.mean - gp.half;
            hi[i] = gp.mean + gp.half;
        }
        s[k] = (nbx_series){r->curves.v[c], g->n_rates, x, y, c, lo, hi};
        k++;
    }
    char id[512], title[512];
    snprintf(id, sizeof id, "gaplr-%s", g->key);
    snprintf(title, sizeof title, "%s: gap to sync against the rate", g->title);
    rc = nbx_svg_chart_log(b, id, "gaplr-chart", title, numeric ? "learning rate (log)" : "learning rate (grid order)",
                           "final val loss gap to sync", s, k, numeric, 0);
    free(v);
    free(s);
    return rc;
}

static int tuning_section(nb_buf *b, const tuning *t) {
    int rc = nb_buf_printf(b, "<h2 id=\"tuning\">Learning-rate tuning</h2>\n<p class=\"note\">Per group (every "
                              "combination of the axes other than lr, seed and the curves), the tuned rate is the one "
                              "whose synchronous runs have the lowest mean final validation loss over seeds (rates "
                              "tuned for the synchronous run, as the paper did); it is chosen once every synchronous "
                              "run of the group has ended, and a rate with a failed (diverged) synchronous run is "
                              "never chosen. A tuned rate at either end of the group's rates is marked &ldquo;edge: "
                              "extend the grid&rdquo;: the best rate may lie beyond it. Losses: mean &plusmn; sample "
                              "standard deviation (runs). Gaps are paired per seed, with a 95%% t interval, as in the "
                              "gap table.</p>\n");
    rc = rc || tuning_header(b, t);
    for (int k = 0; k < t->n_groups && !rc; k++)
        for (int i = 0; i < t->g[k].n_rates && !rc; i++) rc = tuning_row(b, t, &t->g[k], i);
    rc = rc || nb_buf_printf(b, "</table>\n");
    for (int k = 0; k < t->n_groups && !rc; k++) rc = gap_lr_chart(b, t, &t->g[k]);
    return rc;
}

/* ------------------------------------------------------------ scaling */
/* The groups of a series, by length ascending (grid order when a length is not a number). */
static int lengths_of(const tuning *t, const char *series, int *out) {
    int n = 0;
    for (int k = 0; k < t->n_groups; k++)
        if (!strcmp(t->g[k].series, series)) out[n++] = k;
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && t->g[out[j]].steps_value < t->g[out[j - 1]].steps_value; j--) {
            int x = out[j]; out[j] = out[j - 1]; out[j - 1] = x;
        }
    return n;
}

/* The training tokens of the synchronous run of (panel, seed) (its last metrics line); NAN if none. */
static double tokens_of(const tuning *t, int p, const char *seed) {
    const nbx_report *r = t->r;
    for (int i = 0; i < r->n_rows; i++) {
        const nbx_rrow *row = &r->rows[i];
        if (row->done && row->panel == p && row->curve == t->sync && !strcmp(nbx_seed_of(r, row), seed))
            return row->run.tokens[row->run.n - 1];
    }
    return NAN;
}

static double mean_tokens(const tuning *t, int p) {
    double sum = 0;
    int n = 0;
    for (int s = 0; s < t->r->seeds.n; s++) {
        double x = tokens_of(t, p, t->r->seeds.v[s]);
        if (!isnan(x)) { sum += x; n++; }
    }
    return n ? sum / n : NAN;
}

static int scaling_rows(nb_buf *b, const tuning *t, const tgroup *g) {
    const nbx_report *r = t->r;
    int rc = 0;
    if (g->pick < 0)
        return nb_buf_printf(b, "<tr><td>") || nbx_html(b, g->series) || nb_buf_printf(b, "</td><td>") ||
               nbx_html(b, g->steps) || nb_buf_printf(b, "</td><td colspan=\"8\">%s</td></tr>\n", g->why);
    int p = g->panel[g->pick];
    for (int c = 0; c < r->curves.n && !rc; c++) {
        if (c == t->sync) continue;
        rc = nb_buf_printf(b, "<tr><td>") || nbx_html(b, g->series) || nb_buf_printf(b, "</td><td>") ||
             nbx_html(b, g->steps) || nb_buf_printf(b, "</td><td>%.0f</td><td>", mean_tokens(t, p)) ||
             nbx_html(b, row_of_panel(r, p)->labels[t->lr_axis]) || nb_buf_printf(b, "</td><td>") ||
             nbx_html(b, r->curves.v[c]) || nb_buf_printf(b, "</td>");
        nbx_paired gp = gap_of(t, p, c);
        if (!rc && gp.n == 0) {
            rc = nb_buf_printf(b, "<td colspan=\"4\">not run at the tuned rate</td></tr>\n");
            continue;
        }
        rc = rc || nb_buf_printf(b, "<td>%+.4f</td>", gp.mean);
        if (gp.n > 1)
            rc = rc || nb_buf_printf(b, "<td>[%+.4f, %+.4f]%s</td>", gp.mean - gp.half, gp.mean + gp.half,
                                     gp.within_noise ? " within noise" : "");
        else rc = rc || nb_buf_printf(b, "<td>n/a: 1 pair</td>");
        rc = rc || nb_buf_printf(b, "<td>%d</td>", gp.n) || nbx_recovery_cell(b, r, p, c, t->scratch2) ||
             nb_buf_printf(b, "</tr>\n");
    }
    return rc;
}

/* The points of the slope and extrapolation tables of (series, curve c): one per (length, seed) pair
 * at the lengths' tuned rates, x = ln(tokens_s), y = ln(gap_s); why says why no line is fitted.
 * A gap <= 0 has no logarithm. When its length's paired gap is within noise (the interval covers
 * zero), the length is left out, since its gaps are noise around a value too small to resolve
 * (typically the longest length, where the study wants to see the gap vanish); left_out names it
 * with its gap, so that the tables say what the fit omits. A gap <= 0 at a length whose gap is
 * resolved stops the fit. */
typedef struct {
    double *x, *y;
    int n, lengths, first, last;  /* first, last: the groups of the shortest and longest lengths with a point */
    int seeds_shared, edge;       /* a seed at two lengths or more; a tuned rate at its grid's edge */
    int n_left;                   /* lengths left out, their gap within noise */
    double params;                /* the model's parameters; NAN unknown, -1 when lengths differ */
    nb_buf why, lengths_text;     /* lengths_text: "300 steps at lr 2e-3, 1000 steps at lr 1e-3 (grid edge)" */
    nb_buf left_out;              /* "; left out, within noise: 10000 steps at lr 8e-3 (+0.0075 [-0.0418, +0.0568])" */
} fit_points;

static void free_points(fit_points *f) {
    free(f->x);
    free(f->y);
    nb_buf_free(&f->why);
    nb_buf_free(&f->lengths_text);
    nb_buf_free(&f->left_out);
}

/* Leaves a length out of f when one of its gaps is <= 0 and its paired gap is within noise (a single
 * pair has no interval and stays in); returns 1 when it did, -1 on error. */
static int leave_out(const tuning *t, const tgroup *g, int c, fit_points *f) {
    int p = g->panel[g->pick], nonpositive = 0;
    nbx_paired gp = gap_of(t, p, c);  /* leaves the pairs' gaps in t->scratch[0..gp.n) */
    for (int i = 0; i < gp.n; i++) nonpositive |= !(t->scratch[i] > 0);
    if (!nonpositive || gp.n < 2 || !gp.within_noise) return 0;
    f->n_left++;
    int rc = nb_buf_printf(&f->left_out, "%s", f->left_out.n ? ", " : "; left out, within noise: ") ||
             nbx_html(&f->left_out, g->steps) || nb_buf_printf(&f->left_out, " steps at lr ") ||
             nbx_html(&f->left_out, row_of_panel(t->r, p)->labels[t->lr_axis]) ||
             nb_buf_printf(&f->left_out, " (%+.4f [%+.4f, %+.4f])", gp.mean, gp.mean - gp.half, gp.mean + gp.half);
    return rc ? -1 : 1;
}

/* The "; left out, within noise: ..." suffix of f's cells, or "" when no length was left out. */
static const char *left_suffix(const fit_points *f) { return f->left_out.n ? f->left_out.p : ""; }

/* A length's seeds become points, unless leave_out takes the length out; the first gap <= 0 of
 * a length kept (in length and seed order) says why there is no fit, since it has no logarithm. */
static int length_points(const tuning *t, const tgroup *g, int c, fit_points *f, int *seed_lengths) {
    const nbx_report *r = t->r;
    int p = g->panel[g->pick], here = 0, rc = leave_out(t, g, c, f);
    if (rc) return rc < 0 ? -1 : 0;
    for (int s = 0; s < r->seeds.n && !rc; s++) {
        double gap = nbx_final_of(r, p, c, r->seeds.v[s]) - nbx_final_of(r, p, t->sync, r->seeds.v[s]);
        if (isnan(gap)) continue;
        if (!(gap > 0) && !f->why.n)
            rc = nb_buf_printf(&f->why, "not fitted: the gap is %+.4f &le; 0 at steps=", gap) || nbx_html(&f->why, g->steps) ||
                 nb_buf_printf(&f->why, ", seed ") || nbx_html(&f->why, r->seeds.v[s]) ||
                 nb_buf_printf(&f->why, " (no logarithm)");
        f->x[f->n] = log(tokens_of(t, p, r->seeds.v[s]));
        f->y[f->n++] = gap > 0 ? log(gap) : NAN;
        f->seeds_shared |= ++seed_lengths[s] > 1;
        here = 1;
    }
    return rc ? -1 : here;
}

static void note_length(const tuning *t, const tgroup *g, fit_points *f) {
    const nbx_run *run = nbx_first_run(t->r, g->panel[g->pick], t->sync);
    double params = run ? run->params : NAN;
    if (f->lengths == 0 || isnan(params)) f->params = params;
    else if (!isnan(f->params) && params != f->params) f->params = -1;
    f->edge |= g->pick == 0 || g->pick == g->n_rates - 1;
    f->last = (int)(g - t->g);
    if (!f->lengths++) f->first = f->last;
}

/* An empty f with room for a point per (length, seed) of n_len lengths, and *seed_lengths, a zeroed count
 * per seed of the lengths it has a point at (length_points); free it, and f with free_points. */
static int points_new(const tuning *t, int n_len, fit_points *f, int **seed_lengths) {
    const int cap = n_len * t->r->seeds.n + 1;
    *seed_lengths = calloc((size_t)t->r->seeds.n + 1, sizeof(int));
    *f = (fit_points){.x = malloc(sizeof(double) * (size_t)cap), .y = malloc(sizeof(double) * (size_t)cap),
                      .first = -1, .last = -1, .params = NAN};
    if (f->x && f->y && *seed_lengths) return 0;
    free(*seed_lengths);
    return nb_fail("out of memory");
}

static int collect_points(const tuning *t, const int *len, int n_len, int c, fit_points *f) {
    const nbx_report *r = t->r;
    int rc = 0, *seed_lengths;
    if (points_new(t, n_len, f, &seed_lengths)) return -1;
    for (int k = 0; k < n_len && !rc; k++) {
        const tgroup *g = &t->g[len[k]];
        if (g->pick < 0) continue;
        int here = length_points(t, g, c, f, seed_lengths);
        if (here < 0) rc = -1;
        else if (here)
            rc = nb_buf_printf(&f->lengths_text, "%s", f->lengths ? ", " : "") || nbx_html(&f->lengths_text, g->steps) ||
                 nb_buf_printf(&f->lengths_text, " steps at lr ") ||
                 nbx_html(&f->lengths_text, row_of_panel(r, g->panel[g->pick])->labels[t->lr_axis]) ||
                 nb_buf_printf(&f->lengths_text, "%s", g->pick == 0 || g->pick == g->n_rates - 1 ? " (grid edge)" : "");
        if (here > 0) note_length(t, g, f);
    }
    free(seed_lengths);
    int same_tokens = 1;
    for (int i = 1; i < f->n; i++) same_tokens &= f->x[i] == f->x[0];
    rc = rc || (!f->why.n && f->lengths < 2 &&
                nb_buf_printf(&f->why, "not fitted: gaps at %d tuned length%s, 2 needed%s", f->lengths,
                              f->lengths == 1 ? "" : "s", left_suffix(f)));
    rc = rc || (f->n_left && nb_buf_printf(&f->lengths_text, "%s", left_suffix(f)));
    return rc || (!f->why.n && same_tokens && nb_buf_printf(&f->why, "not fitted: every length has the same tokens"));
}

/* The slope of ln(gap_s) on ln(tokens_s) over every (length, seed) pair of f (ordinary least squares,
 * GSL), with its 95% t interval (points - 2 degrees of freedom): the cells from the curve on. */
static int slope_cells(nb_buf *b, const tuning *t, int c, const fit_points *f) {
    int n = f->n;
    int rc = nb_buf_printf(b, "<td>") || nbx_html(b, t->r->curves.v[c]) ||
             nb_buf_printf(b, "</td><td>%d</td><td>%d</td>", f->lengths, n);
    double c0, c1, cov00, cov01, cov11, sumsq;
    if (!rc && f->why.n) rc = nb_buf_printf(b, "<td colspan=\"2\">%s</td>", f->why.p);
    else if (!rc && n < 3)
        rc = gsl_fit_linear(f->x, 1, f->y, 1, (size_t)n, &c0, &c1, &cov00, &cov01, &cov11, &sumsq) ||
             nb_buf_printf(b, "<td>%+.3f</td><td>n/a: %d points, no interval%s</td>", c1, n, left_suffix(f));
    else if (!rc) {
        rc = gsl_fit_linear(f->x, 1, f->y, 1, (size_t)n, &c0, &c1, &cov00, &cov01, &cov11, &sumsq);
        double half = nbx_t975(n - 2) * sqrt(cov11);
        rc = rc || nb_buf_printf(b, "<td>%+.3f</td><td>[%+.3f, %+.3f] %s%s</td>", c1, c1 - half, c1 + half,
                                 c1 + half < 0   ? "shrinks"
                                 : c1 - half > 0 ? "grows"
                                                 : "no trend resolved",
                                 left_suffix(f));
    }
    return rc;
}

/* A row of the slope table: the points at the lengths' tuned rates. */
static int slope_row(nb_buf *b, const tuning *t, const char *series, int c, const fit_points *f) {
    return nb_buf_printf(b, "<tr><td>") || nbx_html(b, series) || nb_buf_printf(b, "</td>") ||
           slope_cells(b, t, c, f) || nb_buf_printf(b, "</tr>\n");
}

/* The extrapolation row of (series, curve c) from the slope table's points; the noise floor is the
 * synchronous runs' sd at the longest length's tuned rate. */
static int extrap_row(nb_buf *b, nbx_extrap_notes *notes, const tuning *t, const char *series, int c, const fit_points *f) {
    nbx_extrap_in in = {.series = series, .curve = t->r->curves.v[c], .x = f->x, .y = f->y, .n = f->n,
                        .lengths = f->lengths, .why = f->why.p, .lengths_text = f->lengths_text.p,
                        .seeds_shared = f->seeds_shared, .edge = f->edge, .params = f->params};
    if (f->last >= 0) {
        const tgroup *first = &t->g[f->first], *last = &t->g[f->last];
        sync_cell s = sync_of(t, last->panel[last->pick]);
        in.last_steps = last->steps;
        in.t_first = mean_tokens(t, first->panel[first->pick]);
        in.t_last = mean_tokens(t, last->panel[last->pick]);
        in.floor_sd = s.sd;
        in.floor_runs = s.finished;
    }
    return nbx_extrap_row(b, notes, &in);
}

/* The mean gap of each delayed curve at each tuned length against tokens, log-log, with intervals. */
static int scaling_chart(nb_buf *b, const tuning *t, int si, const int *len, int n_len) {
    const nbx_report *r = t->r;
    int n_delayed = r->curves.n - (t->sync >= 0), k = 0;
    double *v = malloc(sizeof(double) * (size_t)(4 * n_len * n_delayed + 1));
    nbx_series *s = malloc(sizeof *s * (size_t)(n_delayed + 1));
    if (!v || !s) { free(v); free(s); return nb_fail("out of memory"); }
    for (int c = 0; c < r->curves.n; c++) {
        if (c == t->sync) continue;
        double *x = v + (size_t)4 * n_len * k, *y = x + n_len, *lo = y + n_len, *hi = lo + n_len;
        for (int i = 0; i < n_len; i++) {
            const tgroup *g = &t->g[len[i]];
            nbx_paired gp = g->pick >= 0 ? gap_of(t, g->panel[g->pick], c) : nbx_paired_stats(NULL, 0);
            x[i] = g->pick >= 0 ? mean_tokens(t, g->panel[g->pick]) : NAN;
            y[i] = gp.mean;
            lo[i] = gp.mean - gp.half;
            hi[i] = gp.mean + gp.half;
        }
        s[k] = (nbx_series){r->curves.v[c], n_len, x, y, c, lo, hi};
        k++;
    }
    char id[64], title[512];
    snprintf(id, sizeof id, "scaling-%d", si + 1);
    snprintf(title, sizeof title, "%s: gap to sync at the tuned rate", t->series.v[si]);
    int rc = nbx_svg_chart_log(b, id, "scaling-chart", title, "training tokens (log)", "final val loss gap (log)", s, k, 1, 1);
    free(v);
    free(s);
    return rc;
}

/* The slope table, then the extrapolation table on the same points, with its caveats. */
static int slope_tables(nb_buf *b, const tuning *t, int *len) {
    const nbx_report *r = t->r;
    int n_rows = 0, rc = 0;
    fit_points *f = calloc((size_t)(t->series.n * r->curves.n + 1), sizeof *f);
    if (!f) return nb_fail("out of memory");
    for (int si = 0; si < t->series.n && !rc; si++) {
        int n = lengths_of(t, t->series.v[si], len);
        for (int c = 0; c < r->curves.n && !rc; c++)
            if (c != t->sync) rc = collect_points(t, len, n, c, &f[n_rows++]) || slope_row(b, t, t->series.v[si], c, &f[n_rows - 1]);
    }
    nbx_extrap_notes notes = {0};
    rc = rc || nb_buf_printf(b, "</table>\n") || nbx_extrap_header(b);
    for (int si = 0, k = 0; si < t->series.n && !rc; si++)
        for (int c = 0; c < r->curves.n && !rc; c++)
            if (c != t->sync) rc = extrap_row(b, &notes, t, t->series.v[si], c, &f[k++]);
    rc = rc || nbx_extrap_footer(b, &notes);
    nbx_extrap_notes_free(&notes);
    for (int k = 0; k < n_rows; k++) free_points(&f[k]);
    free(f);
    return rc;
}

/* ------------------------------------------------------------ the gap at one rate across lengths */
/* The index of the rate labelled lr in group g; -1 when g has no such rate. */
static int rate_index(const tuning *t, const tgroup *g, const char *lr) {
    for (int i = 0; i < g->n_rates; i++)
        if (!strcmp(row_of_panel(t->r, g->panel[i])->labels[t->lr_axis], lr)) return i;
    return -1;
}

/* The points of (rate lr, curve c) over a series' lengths: as collect_points, but at one rate,
 * whatever each length's pick (a length without that rate adds none). */
static int fixed_points(const tuning *t, const int *len, int n_len, const char *lr, int c, fit_points *f) {
    int rc = 0, *seed_lengths;
    if (points_new(t, n_len, f, &seed_lengths)) return -1;
    for (int k = 0; k < n_len && !rc; k++) {
        tgroup g = t->g[len[k]];  /* a copy whose pick is the rate asked for */
        if ((g.pick = rate_index(t, &g, lr)) < 0) continue;
        int here = length_points(t, &g, c, f, seed_lengths);
        if (here < 0) rc = -1;
        else f->lengths += here;
    }
    free(seed_lengths);
    return rc || (!f->why.n && f->lengths < 2 && f->lengths + f->n_left >= 2 &&
                  nb_buf_printf(&f->why, "not fitted: gaps at %d length%s, 2 needed%s", f->lengths,
                                f->lengths == 1 ? "" : "s", left_suffix(f)));
}

/* Per series, every rate run at two lengths or more and every delayed curve: the slope of the
 * (length, seed) gaps at that one rate. */
static int fixed_rate_rows(nb_buf *b, const tuning *t, const char *series, const int *len, int n_len) {
    const nbx_report *r = t->r;
    nbx_strv rates = {0};
    int rc = 0;
    for (int k = 0; k < n_len && !rc; k++)
        for (int i = 0; i < t->g[len[k]].n_rates && !rc; i++) {
            const char *lr = row_of_panel(r, t->g[len[k]].panel[i])->labels[t->lr_axis];
            int seen = 0;
            for (int j = 0; j < rates.n; j++) seen |= !strcmp(rates.v[j], lr);
            if (!seen) rc = nbx_strv_push(&rates, lr, strlen(lr));
        }
    for (int j = 0; j < rates.n && !rc; j++)
        for (int c = 0; c < r->curves.n && !rc; c++) {
            if (c == t->sync) continue;
            fit_points f;
            rc = fixed_points(t, len, n_len, rates.v[j], c, &f);
            if (!rc && f.lengths + f.n_left >= 2)
                rc = nb_buf_printf(b, "<tr><td>") || nbx_html(b, series) || nb_buf_printf(b, "</td><td>") ||
                     nbx_html(b, rates.v[j]) || nb_buf_printf(b, "</td>") || slope_cells(b, t, c, &f) ||
                     nb_buf_printf(b, "</tr>\n");
            free_points(&f);
        }
    nbx_strv_free(&rates);
    return rc;
}

static int fixed_rate_section(nb_buf *b, const tuning *t, int *len) {
    int rc = nb_buf_printf(b, "<h3 id=\"fixed-rate\">The gap at one rate across lengths</h3>\n<p class=\"note\">The "
                              "slope above follows each length's tuned rate, so a tuned rate that moves between "
                              "lengths moves the gap with it. Here the rate is held: for every rate run at two lengths or "
                              "more, the same fit (ln(gap) on ln(tokens) over every (length, seed) pair, 95%% t interval) "
                              "at that one rate, whether or not it is a length's pick.</p>\n<table id=\"fixed-rate-table\">"
                              "<tr><th>series</th><th>lr</th><th>curve</th><th>lengths</th><th>points</th>"
                              "<th>slope of ln(gap) on ln(tokens)</th><th>95%% interval</th></tr>\n");
    for (int si = 0; si < t->series.n && !rc; si++)
        rc = fixed_rate_rows(b, t, t->series.v[si], len, lengths_of(t, t->series.v[si], len));
    return rc || nb_buf_printf(b, "</table>\n");
}

static int scaling_section(nb_buf *b, const tuning *t) {
    int *len = malloc(sizeof(int) * (size_t)(t->n_groups + 1)), rc = 0;
    if (!len) return nb_fail("out of memory");
    rc = nb_buf_printf(b, "<h2 id=\"scaling\">Scaling: the gap at each length's tuned rate</h2>\n<p class=\"note\">Per "
                          "series (the axes other than steps, lr, seed and the curves) and length: the paired gap to the "
                          "synchronous runs at that length's tuned rate (the tuning table's pick) against training tokens "
                          "(the synchronous runs' last metrics line), its 95%% t interval, and the recovery of a mitigated "
                          "delay (n/a when the plain delay's gap is within noise). A length whose tuning is not complete "
                          "says so. The slope is the ordinary least-squares fit of ln(gap) on ln(tokens) over every "
                          "(length, seed) pair's own gap at the tuned rates, with a 95%% t interval on points - 2 "
                          "degrees of freedom: gap ~ tokens^slope, so a negative slope whose interval excludes zero "
                          "means the gap shrinks. Seeds within a length are treated as independent points. A gap &le; 0 "
                          "has no logarithm: when its length's paired gap is within noise, that length is left out of "
                          "the fit and named with its gap (at the longest length this makes the fitted slope less "
                          "steep than the data, not more); otherwise the slope is not fitted (and says where). The chart draws each "
                          "length's mean gap; a mean &le; 0 has no place on the log axis and is left out.</p>\n"
                          "<table id=\"scaling-table\"><tr><th>series</th><th>steps</th><th>tokens</th><th>tuned lr</th>"
                          "<th>curve</th><th>gap to sync (paired mean)</th><th>gap 95%% interval</th><th>pairs</th>"
                          "<th>recovery (95%% interval)</th></tr>\n");
    for (int si = 0; si < t->series.n && !rc; si++) {
        int n = lengths_of(t, t->series.v[si], len);
        for (int k = 0; k < n && !rc; k++) rc = scaling_rows(b, t, &t->g[len[k]]);
    }
    rc = rc || nb_buf_printf(b, "</table>\n<table id=\"slope-table\"><tr><th>series</th><th>curve</th><th>lengths</th>"
                                "<th>points</th><th>slope of ln(gap) on ln(tokens)</th><th>95%% interval</th></tr>\n");
    rc = rc || slope_tables(b, t, len) || fixed_rate_section(b, t, len);
    for (int si = 0; si < t->series.n && !rc; si++) rc = scaling_chart(b, t, si, len, lengths_of(t, t->series.v[si], len));
    free(len);
    return rc;
}

/* ------------------------------------------------------------ entry */
static void free_tuning(tuning *t) {
    for (int k = 0; k < t->n_groups; k++) {
        free(t->g[k].title);
        free(t->g[k].key);
        free(t->g[k].series);
        free(t->g[k].panel);
        free(t->g[k].rate);
    }
    free(t->g);
    free(t->scratch);
    free(t->scratch2);
    nbx_strv_free(&t->series);
}

int nbx_report_scale(nb_buf *b, const nbx_report *r) {
    tuning t = {.r = r, .lr_axis = axis_named(r, "lr"), .steps_axis = axis_named(r, "steps"), .sync = -1};
    if (t.lr_axis < 0) return 0;
    if (t.lr_axis == r->curve_axis || t.lr_axis == r->seed_axis)
        return nb_buf_printf(b, "<p class=\"note\" id=\"tuning\">No tuning table: the rates are this grid's curves (it has "
                                "no axis named delay), so no run is paired with a synchronous one.</p>\n");
    if (t.steps_axis == r->curve_axis || t.steps_axis == r->seed_axis) t.steps_axis = -1;
    for (int p = 0; p < r->panel_keys.n && t.sync < 0; p++) t.sync = nbx_sync_curve(r, p);
    t.scratch = malloc(sizeof(double) * (size_t)(r->seeds.n + 1));
    t.scratch2 = malloc(sizeof(double) * (size_t)(r->seeds.n + 1));
    int rc = !t.scratch || !t.scratch2 ? nb_fail("out of memory") : make_groups(&t);
    for (int k = 0; k < t.n_groups && !rc; k++) pick(&t, &t.g[k]);
    rc = rc || tuning_section(b, &t);
    if (!rc && t.steps_axis >= 0) rc = scaling_section(b, &t);
    free_tuning(&t);
    return rc;
}
