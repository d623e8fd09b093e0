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
#include "report/extrap.h"
#include "report/fits.h"
#include "report/report.h"
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
    int size_axis;                  /* an axis named size (or model): the gap against model size */
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
    const nbx_paired m = nbx_paired_stats(t->scratch, n);   /* the one mean and sd of the report */
    return nb_buf_printf(b, "<td>%.4f &plusmn; %.4f (%d)</td>", m.mean, m.sd, n);
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
    const nbx_paired m = nbx_paired_stats(t->scratch, s.finished);
    s.mean = m.mean, s.sd = m.sd;
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

/* ------------------------------------------------------------ one mean per length */
/* The lengths of (series, curve c), one value each: the mean paired gap over seeds at the length's
 * tuned rate (or at one rate, fixed_means), with its tokens. Every fit takes these, never the seeds
 * as points: a length's seeds are the noise of its mean, not more lengths (as points they narrow the
 * slope's interval about sqrt(seeds)-fold and take the seeds' spread for the spread about the line).
 * The log-log line needs a mean > 0: a length whose mean is <= 0 is left out of that line alone, and
 * named; the power law and the differences keep every length. */
typedef struct {
    int n, tuned;                   /* lengths with a pair, ascending; tuned: at each length's pick */
    int *group, *rate;              /* each length's group and rate index */
    double *tokens, *mean;          /* the synchronous runs' mean tokens; the mean gap */
    nbx_paired *gap;                /* the paired gap's mean, sd and interval */
    double *x, *y;                  /* ln tokens and ln mean gap of the lengths in the log fit */
    int n_log, first, last;         /* lengths in the log fit; groups of its shortest and longest, -1 none */
    int *seed_lengths, seeds_shared;/* per seed, the lengths it has a pair at; a seed at two or more */
    int edge;                       /* a tuned rate of the log fit at its grid's edge */
    double params;                  /* the model's parameters; NAN unknown, -1 when lengths differ */
    nb_buf lengths_text;            /* the log fit's lengths: "300 steps at lr 2e-3, 1000 steps at lr 1e-3 (grid edge)" */
    nb_buf left_out;                /* "; left out, mean gap &le; 0: 10000 steps at lr 8e-3 (-0.0075 [-0.0418, +0.0268])" */
    nb_buf why;                     /* non-empty: no log fit, and why (with left_out) */
} length_means;

static void free_means(length_means *m) {
    free(m->group);
    free(m->rate);
    free(m->tokens);
    free(m->mean);
    free(m->gap);
    free(m->x);
    free(m->y);
    free(m->seed_lengths);
    nb_buf_free(&m->lengths_text);
    nb_buf_free(&m->left_out);
    nb_buf_free(&m->why);
}

static int means_new(const tuning *t, int n_len, int tuned, length_means *m) {
    size_t cap = (size_t)n_len + 1;
    *m = (length_means){.tuned = tuned, .group = malloc(sizeof(int) * cap), .rate = malloc(sizeof(int) * cap),
                        .tokens = malloc(sizeof(double) * cap), .mean = malloc(sizeof(double) * cap),
                        .gap = malloc(sizeof(nbx_paired) * cap), .x = malloc(sizeof(double) * cap),
                        .y = malloc(sizeof(double) * cap), .seed_lengths = calloc((size_t)t->r->seeds.n + 1, sizeof(int)),
                        .first = -1, .last = -1, .params = NAN};
    if (m->group && m->rate && m->tokens && m->mean && m->gap && m->x && m->y && m->seed_lengths) return 0;
    free_means(m);
    *m = (length_means){0};  /* the caller frees it again */
    return nb_fail("out of memory");
}

/* "300 steps at lr 2e-3" */
static int length_label(nb_buf *b, const tuning *t, int gi, int ri) {
    const tgroup *g = &t->g[gi];
    return nbx_html(b, g->steps) || nb_buf_printf(b, " steps at lr ") ||
           nbx_html(b, row_of_panel(t->r, g->panel[ri])->labels[t->lr_axis]);
}

/* The log fit's bookkeeping for the extrapolation and its caveats: lengths, model size, edges. */
static int note_length(const tuning *t, length_means *m, int gi, int ri) {
    const tgroup *g = &t->g[gi];
    const nbx_run *run = nbx_first_run(t->r, g->panel[ri], t->sync);
    double params = run ? run->params : NAN;
    int edge = ri == 0 || ri == g->n_rates - 1;
    if (m->n_log == 0 || isnan(params)) m->params = params;
    else if (!isnan(m->params) && params != m->params) m->params = -1;
    m->edge |= m->tuned && edge;
    m->last = gi;
    if (m->first < 0) m->first = gi;
    return nb_buf_printf(&m->lengths_text, "%s", m->n_log ? ", " : "") || length_label(&m->lengths_text, t, gi, ri) ||
           nb_buf_printf(&m->lengths_text, "%s", m->tuned && edge ? " (grid edge)" : "");
}

/* Adds group gi at rate index ri to m when curve c has a pair there; a mean <= 0 is named in left_out. */
static int add_length(const tuning *t, length_means *m, int gi, int ri, int c) {
    const nbx_report *r = t->r;
    int p = t->g[gi].panel[ri], k = m->n, rc = 0;
    nbx_paired gp = gap_of(t, p, c);
    if (!gp.n) return 0;
    m->group[k] = gi;
    m->rate[k] = ri;
    m->tokens[k] = mean_tokens(t, p);
    m->mean[k] = gp.mean;
    m->gap[m->n++] = gp;
    for (int s = 0; s < r->seeds.n; s++)
        if (!isnan(nbx_final_of(r, p, c, r->seeds.v[s])) && !isnan(nbx_final_of(r, p, t->sync, r->seeds.v[s])))
            m->seeds_shared |= ++m->seed_lengths[s] > 1;
    if (gp.mean > 0) {
        rc = note_length(t, m, gi, ri);
        m->x[m->n_log] = log(m->tokens[k]);
        m->y[m->n_log++] = log(gp.mean);
        return rc;
    }
    rc = nb_buf_printf(&m->left_out, "%s", m->left_out.n ? ", " : "; left out, mean gap &le; 0 (no logarithm): ") ||
         length_label(&m->left_out, t, gi, ri) || nb_buf_printf(&m->left_out, " (%+.4f", gp.mean);
    if (gp.n > 1) rc = rc || nb_buf_printf(&m->left_out, " [%+.4f, %+.4f]", gp.mean - gp.half, gp.mean + gp.half);
    return rc || nb_buf_printf(&m->left_out, ")");
}

/* The "; left out, ..." suffix of a cell, or "" when the log fit kept every length. */
static const char *left_suffix(const length_means *m) { return m->left_out.n ? m->left_out.p : ""; }

static int same_tokens(const double *x, int n) {
    int same = 1;
    for (int i = 1; i < n; i++) same &= x[i] == x[0];
    return same;
}

/* Why the log fit has no line: fewer than two lengths with a mean > 0, or no spread of tokens. */
static int log_why(length_means *m) {
    if (m->n_log < 2)
        return nb_buf_printf(&m->why, "not fitted: a mean gap &gt; 0 at %d length%s, 2 needed%s", m->n_log,
                             m->n_log == 1 ? "" : "s", left_suffix(m));
    if (same_tokens(m->x, m->n_log)) return nb_buf_printf(&m->why, "not fitted: every length has the same tokens");
    return 0;
}

/* The means of (series, curve c) at each length's tuned rate; a length without a pick adds none. */
static int tuned_means(const tuning *t, const int *len, int n_len, int c, length_means *m) {
    int rc = means_new(t, n_len, 1, m);
    for (int k = 0; k < n_len && !rc; k++)
        if (t->g[len[k]].pick >= 0) rc = add_length(t, m, len[k], t->g[len[k]].pick, c);
    rc = rc || log_why(m);  /* the caveats name the lengths left out after the lengths kept */
    return rc || (m->left_out.n && nb_buf_printf(&m->lengths_text, "%s", m->left_out.p));
}

/* The index of the rate labelled lr in group g; -1 when g has no such rate. */
static int rate_index(const tuning *t, const tgroup *g, const char *lr) {
    for (int i = 0; i < g->n_rates; i++)
        if (!strcmp(row_of_panel(t->r, g->panel[i])->labels[t->lr_axis], lr)) return i;
    return -1;
}

/* The means of (rate lr, curve c) over a series' lengths, whatever each length's pick (a length
 * without that rate adds none). */
static int fixed_means(const tuning *t, const int *len, int n_len, const char *lr, int c, length_means *m) {
    int rc = means_new(t, n_len, 0, m);
    for (int k = 0; k < n_len && !rc; k++) {
        int ri = rate_index(t, &t->g[len[k]], lr);
        if (ri >= 0) rc = add_length(t, m, len[k], ri, c);
    }
    return rc || log_why(m);
}

/* ------------------------------------------------------------ the fits' cells */
/* What an interval excludes: zero below it (the gap shrinks), zero above it (grows), or neither. */
static const char *verdict(double lo, double hi) { return hi < 0 ? "shrinks" : lo > 0 ? "grows" : "not resolved"; }

/* ln(mean gap) on ln(tokens) by ordinary least squares (GSL) over the lengths whose mean is > 0, with
 * a 95% t interval on lengths - 2 degrees of freedom; the lengths left out named. */
static int log_cell(nb_buf *b, const length_means *m) {
    double c0, c1, cov00, cov01, cov11, sumsq;
    if (m->why.n) return nb_buf_printf(b, "<td>%s</td>", m->why.p);
    int n = m->n_log, rc = gsl_fit_linear(m->x, 1, m->y, 1, (size_t)n, &c0, &c1, &cov00, &cov01, &cov11, &sumsq);
    if (n < 3) return rc || nb_buf_printf(b, "<td>%+.3f (2 lengths, no interval)%s</td>", c1, left_suffix(m));
    double half = nbx_t975(n - 2) * sqrt(cov11);
    return rc || nb_buf_printf(b, "<td>%+.3f [%+.3f, %+.3f] %s%s</td>", c1, c1 - half, c1 + half,
                               verdict(c1 - half, c1 + half), left_suffix(m));
}

/* An end of the power law's interval, or how far past the search it reaches. */
static int power_end(nb_buf *b, double v, int open) {
    return open ? nb_buf_printf(b, v < 0 ? "&lt; -%g" : "&gt; +%g", NBX_POWER_B_MAX) : nb_buf_printf(b, "%+.3f", v);
}

/* The exponent of gap = a tokens^b fitted to every length's mean gap (fits.c), its profile interval. */
static int power_cell(nb_buf *b, const length_means *m) {
    if (m->n < 2) return nb_buf_printf(b, "<td>not fitted: %d length, 2 needed</td>", m->n);
    if (same_tokens(m->tokens, m->n)) return nb_buf_printf(b, "<td>not fitted: every length has the same tokens</td>");
    nbx_power p = nbx_power_fit(m->tokens, m->mean, m->n);
    if (p.off)
        return nb_buf_printf(b, "<td>not fitted: the least-squares exponent lies beyond %+g</td>", p.off * NBX_POWER_B_MAX);
    if (m->n < 3) return nb_buf_printf(b, "<td>%+.3f (2 lengths, no interval)</td>", p.b);
    return nb_buf_printf(b, "<td>%+.3f [", p.b) || power_end(b, p.lo, p.lo_open) || nb_buf_printf(b, ", ") ||
           power_end(b, p.hi, p.hi_open) || nb_buf_printf(b, "] %s</td>", verdict(p.lo, p.hi));
}

/* The columns shared by the slope and fixed-rate tables, from the curve on. */
static int fit_cells(nb_buf *b, const tuning *t, int c, const length_means *m) {
    int pairs = 0;
    for (int k = 0; k < m->n; k++) pairs += m->gap[k].n;
    return nb_buf_printf(b, "<td>") || nbx_html(b, t->r->curves.v[c]) ||
           nb_buf_printf(b, "</td><td>%d</td><td>%d</td>", m->n, pairs) || log_cell(b, m) || power_cell(b, m);
}

/* The extrapolation row of (series, curve c) from the log fit's means; the noise floor is the
 * synchronous runs' sd at the longest length's tuned rate. */
static int extrap_row(nb_buf *b, nbx_extrap_notes *notes, const tuning *t, const char *series, int c, const length_means *m) {
    nbx_extrap_in in = {.series = series, .curve = t->r->curves.v[c], .x = m->x, .y = m->y, .n = m->n_log,
                        .why = m->why.p, .lengths_text = m->lengths_text.p,
                        .seeds_shared = m->seeds_shared, .edge = m->edge, .params = m->params};
    if (m->last >= 0) {
        const tgroup *first = &t->g[m->first], *last = &t->g[m->last];
        sync_cell s = sync_of(t, last->panel[last->pick]);
        in.last_steps = last->steps;
        in.t_first = mean_tokens(t, first->panel[first->pick]);
        in.t_last = mean_tokens(t, last->panel[last->pick]);
        in.floor_sd = s.sd;
        in.floor_runs = s.finished;
    }
    return nbx_extrap_row(b, notes, &in);
}

/* ------------------------------------------------------------ the tables, per series and curve */
/* A row (or rows) of a table from the means of (series, curve c) at the tuned rates (lr NULL) or at
 * rate lr. */
typedef int (*means_fn)(nb_buf *b, const tuning *t, const char *series, const char *lr, int c, const length_means *m,
                        void *ctx);

/* fn on every series' delayed curves at the tuned rates. */
static int each_tuned(nb_buf *b, const tuning *t, int *len, means_fn fn, void *ctx) {
    int rc = 0;
    for (int si = 0; si < t->series.n && !rc; si++) {
        int n = lengths_of(t, t->series.v[si], len);
        for (int c = 0; c < t->r->curves.n && !rc; c++) {
            if (c == t->sync) continue;
            length_means m;
            rc = tuned_means(t, len, n, c, &m) || fn(b, t, t->series.v[si], NULL, c, &m, ctx);
            free_means(&m);
        }
    }
    return rc;
}

/* The rates a series' lengths ran, in the order first met. */
static int series_rates(const tuning *t, const int *len, int n_len, nbx_strv *rates) {
    int rc = 0;
    for (int k = 0; k < n_len && !rc; k++)
        for (int i = 0; i < t->g[len[k]].n_rates && !rc; i++) {
            const char *lr = row_of_panel(t->r, t->g[len[k]].panel[i])->labels[t->lr_axis];
            int seen = 0;
            for (int j = 0; j < rates->n; j++) seen |= !strcmp(rates->v[j], lr);
            if (!seen) rc = nbx_strv_push(rates, lr, strlen(lr));
        }
    return rc;
}

/* fn on every series' rates and delayed curves with pairs at two lengths or more at that rate. */
static int each_fixed(nb_buf *b, const tuning *t, int *len, means_fn fn, void *ctx) {
    int rc = 0;
    for (int si = 0; si < t->series.n && !rc; si++) {
        int n = lengths_of(t, t->series.v[si], len);
        nbx_strv rates = {0};
        rc = series_rates(t, len, n, &rates);
        for (int j = 0; j < rates.n && !rc; j++)
            for (int c = 0; c < t->r->curves.n && !rc; c++) {
                if (c == t->sync) continue;
                length_means m;
                rc = fixed_means(t, len, n, rates.v[j], c, &m) ||
                     (m.n >= 2 && fn(b, t, t->series.v[si], rates.v[j], c, &m, ctx));
                free_means(&m);
            }
        nbx_strv_free(&rates);
    }
    return rc;
}

/* A row of the slope table (lr NULL) or of the fixed-rate table. */
static int fit_row(nb_buf *b, const tuning *t, const char *series, const char *lr, int c, const length_means *m,
                   void *ctx) {
    (void)ctx;
    int rc = nb_buf_printf(b, "<tr><td>") || nbx_html(b, series) || nb_buf_printf(b, "</td>");
    if (lr) rc = rc || nb_buf_printf(b, "<td>") || nbx_html(b, lr) || nb_buf_printf(b, "</td>");
    return rc || fit_cells(b, t, c, m) || nb_buf_printf(b, "</tr>\n");
}

static int extrap_fn(nb_buf *b, const tuning *t, const char *series, const char *lr, int c, const length_means *m,
                     void *notes) {
    (void)lr;
    return extrap_row(b, notes, t, series, c, m);
}

/* The rate label of length k of m. */
static const char *rate_label(const tuning *t, const length_means *m, int k) {
    return row_of_panel(t->r, t->g[m->group[k]].panel[m->rate[k]])->labels[t->lr_axis];
}

/* The change of the mean gap from each length of m to the next, with a 95% Welch interval: the two
 * lengths' runs are different runs, so nothing pairs them (a seed label shared across lengths is
 * the same initialization, not the same run). */
static int difference_rows(nb_buf *b, const tuning *t, const char *series, const char *lr, int c, const length_means *m,
                           void *ctx) {
    (void)ctx;
    int rc = 0;
    for (int k = 1; k < m->n && !rc; k++) {
        nbx_welch w = nbx_welch_diff(m->gap[k - 1], m->gap[k]);
        rc = nb_buf_printf(b, "<tr><td>") || nbx_html(b, series) || nb_buf_printf(b, "</td><td>") ||
             nbx_html(b, t->r->curves.v[c]) || nb_buf_printf(b, "</td><td>");
        if (lr) rc = rc || nbx_html(b, lr);
        else rc = rc || nbx_html(b, rate_label(t, m, k - 1)) || nb_buf_printf(b, " &rarr; ") ||
                 nbx_html(b, rate_label(t, m, k)) || nb_buf_printf(b, " (tuned)");
        rc = rc || nb_buf_printf(b, "</td><td>") || nbx_html(b, t->g[m->group[k - 1]].steps) ||
             nb_buf_printf(b, " &rarr; ") || nbx_html(b, t->g[m->group[k]].steps) ||
             nb_buf_printf(b, "</td><td>%+.4f &rarr; %+.4f</td>", m->mean[k - 1], m->mean[k]);
        if (isnan(w.half)) rc = rc || nb_buf_printf(b, "<td>%+.4f (one pair at a length: no interval)</td><td>&mdash;</td>", w.diff);
        else rc = rc || nb_buf_printf(b, "<td>%+.4f [%+.4f, %+.4f] %s</td><td>%.1f</td>", w.diff, w.diff - w.half,
                                      w.diff + w.half, verdict(w.diff - w.half, w.diff + w.half), w.df);
        rc = rc || nb_buf_printf(b, "</tr>\n");
    }
    return rc;
}

/* Each delayed curve's mean gap at the tuned rate of groups gi[0..n) against gx[0..n) (a log axis), with
 * 95% intervals as bars, the gap on a linear axis: the gaps that decide a claim lie near 0 or below it,
 * where a log axis has no place for them. */
static int gap_chart(nb_buf *b, const tuning *t, const int *gi, const double *gx, int n, const char *id,
                     const char *cls, const char *title, const char *xlabel) {
    const nbx_report *r = t->r;
    int n_delayed = r->curves.n - (t->sync >= 0), k = 0;
    double *v = malloc(sizeof(double) * (size_t)(4 * n * n_delayed + 1));
    nbx_series *s = malloc(sizeof *s * (size_t)(n_delayed + 1));
    if (!v || !s) { free(v); free(s); return nb_fail("out of memory"); }
    for (int c = 0; c < r->curves.n; c++) {
        if (c == t->sync) continue;
        double *x = v + (size_t)4 * n * k, *y = x + n, *lo = y + n, *hi = lo + n;
        for (int i = 0; i < n; i++) {
            const tgroup *g = &t->g[gi[i]];
            nbx_paired gp = g->pick >= 0 ? gap_of(t, g->panel[g->pick], c) : nbx_paired_stats(NULL, 0);
            x[i] = gx[i];
            y[i] = gp.mean;
            lo[i] = gp.mean - gp.half;
            hi[i] = gp.mean + gp.half;
        }
        s[k] = (nbx_series){r->curves.v[c], n, x, y, c, lo, hi};
        k++;
    }
    int rc = nbx_svg_chart_log(b, id, cls, title, xlabel, "final val loss gap", s, k, 1, 0);
    free(v);
    free(s);
    return rc;
}

/* The mean gap of each delayed curve at each tuned length against tokens. */
static int scaling_chart(nb_buf *b, const tuning *t, int si, const int *len, int n_len) {
    double *tokens = malloc(sizeof(double) * (size_t)(n_len + 1));
    if (!tokens) return nb_fail("out of memory");
    for (int i = 0; i < n_len; i++) {
        const tgroup *g = &t->g[len[i]];
        tokens[i] = g->pick >= 0 ? mean_tokens(t, g->panel[g->pick]) : NAN;
    }
    char id[64], title[512];
    snprintf(id, sizeof id, "scaling-%d", si + 1);
    snprintf(title, sizeof title, "%s: gap to sync at the tuned rate", t->series.v[si]);
    int rc = gap_chart(b, t, len, tokens, n_len, id, "scaling-chart", title, "training tokens (log)");
    free(tokens);
    return rc;
}


/* The slope table, then the extrapolation table from the same log fits, with its caveats. */
static int slope_tables(nb_buf *b, const tuning *t, int *len) {
    nbx_extrap_notes notes = {0};
    int rc = nb_buf_printf(b, "<table id=\"slope-table\"><tr><th>series</th><th>curve</th><th>lengths</th><th>pairs</th>"
                              "<th>ln(mean gap) on ln(tokens): slope [95%% interval]</th><th>power law on the mean gaps, "
                              "gap = a tokens^b: b [95%% profile interval]</th></tr>\n") ||
             each_tuned(b, t, len, fit_row, NULL) || nb_buf_printf(b, "</table>\n") || nbx_extrap_header(b) ||
             each_tuned(b, t, len, extrap_fn, &notes) || nbx_extrap_footer(b, &notes);
    nbx_extrap_notes_free(&notes);
    return rc;
}

static int fixed_rate_section(nb_buf *b, const tuning *t, int *len) {
    int rc = nb_buf_printf(b, "<h3 id=\"fixed-rate\">The gap at one rate across lengths</h3>\n<p class=\"note\">The "
                              "slope above follows each length's tuned rate, so a tuned rate that moves between "
                              "lengths moves the gap with it. Here the rate is held: for every rate with pairs at two "
                              "lengths or more, the same fits (one mean gap per length) at that one rate, whether or not "
                              "it is a length's pick.</p>\n<table id=\"fixed-rate-table\"><tr><th>series</th><th>lr</th>"
                              "<th>curve</th><th>lengths</th><th>pairs</th><th>ln(mean gap) on ln(tokens): slope [95%% "
                              "interval]</th><th>power law on the mean gaps: b [95%% profile interval]</th></tr>\n");
    return rc || each_fixed(b, t, len, fit_row, NULL) || nb_buf_printf(b, "</table>\n");
}

static int difference_section(nb_buf *b, const tuning *t, int *len) {
    int rc = nb_buf_printf(b, "<h3 id=\"differences\">The change between consecutive lengths</h3>\n<p class=\"note\">No "
                              "curve assumed: from each length to the next (at the tuned rates, then at each rate held), "
                              "the change of the mean paired gap, with a 95%% Welch interval (the two lengths' runs are "
                              "different runs, not paired by seed; unequal variances, Welch-Satterthwaite degrees of "
                              "freedom): &ldquo;shrinks&rdquo; or &ldquo;grows&rdquo; only when the interval excludes "
                              "zero, else &ldquo;not resolved&rdquo;.</p>\n<table id=\"difference-table\"><tr><th>series"
                              "</th><th>curve</th><th>lr</th><th>steps</th><th>mean gaps</th><th>change [95%% Welch "
                              "interval]</th><th>Welch df</th></tr>\n");
    return rc || each_tuned(b, t, len, difference_rows, NULL) || each_fixed(b, t, len, difference_rows, NULL) ||
           nb_buf_printf(b, "</table>\n");
}

static int scaling_section(nb_buf *b, const tuning *t) {
    int *len = malloc(sizeof(int) * (size_t)(t->n_groups + 1)), rc = 0;
    if (!len) return nb_fail("out of memory");
    rc = nb_buf_printf(b, "<h2 id=\"scaling\">Scaling: the gap at each length's tuned rate</h2>\n<p class=\"note\">Per "
                          "series (the axes other than steps, lr, seed and the curves) and length: the paired gap to the "
                          "synchronous runs at that length's tuned rate (the tuning table's pick) against training tokens "
                          "(the synchronous runs' last metrics line), its 95%% t interval, and the recovery of a mitigated "
                          "delay (n/a when the plain delay's gap is within noise). A length whose tuning is not complete "
                          "says so. The fits below take one value per length, its mean paired gap, never the seeds as "
                          "points (a length's seeds are the noise of its mean, not more lengths). The slope is the "
                          "ordinary least-squares fit of ln(mean gap) on ln(tokens), with a 95%% t interval on lengths - 2 "
                          "degrees of freedom: gap ~ tokens^slope. A mean gap &le; 0 has no logarithm: that length is "
                          "left out of this fit, and named. The power law gap = a tokens^b is fitted by least squares to "
                          "the mean gaps themselves, every length kept, and b's 95%% interval is its profile interval "
                          "(the b whose residual sum stays within RSS_min (1 + t&sup2; / (lengths - 2))). The log fit "
                          "weighs each length's relative error alike, the power law its absolute error. "
                          "&ldquo;shrinks&rdquo; or &ldquo;grows&rdquo; only when the interval excludes zero, else "
                          "&ldquo;not resolved&rdquo;. The chart draws each length's mean gap with its interval, the gap on "
                          "a linear axis (a gap within noise or below 0 is drawn like any other).</p>\n"
                          "<table id=\"scaling-table\"><tr><th>series</th><th>steps</th><th>tokens</th><th>tuned lr</th>"
                          "<th>curve</th><th>gap to sync (paired mean)</th><th>gap 95%% interval</th><th>pairs</th>"
                          "<th>recovery (95%% interval)</th></tr>\n");
    for (int si = 0; si < t->series.n && !rc; si++) {
        int n = lengths_of(t, t->series.v[si], len);
        for (int k = 0; k < n && !rc; k++) rc = scaling_rows(b, t, &t->g[len[k]]);
    }
    rc = rc || nb_buf_printf(b, "</table>\n") || slope_tables(b, t, len) || fixed_rate_section(b, t, len) ||
         difference_section(b, t, len);
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

/* ------------------------------------------------------------ the gap against model size */
/* A group's model size: the parameters that summary.json's model gives its finished runs; NAN unknown. */
static double group_params(const tuning *t, const tgroup *g) {
    for (int i = 0; i < g->n_rates; i++) {
        const nbx_run *run = nbx_first_run(t->r, g->panel[i], t->sync);
        if (run && !isnan(run->params)) return run->params;
    }
    return NAN;
}

/* The groups of each size series (a group's title without the size axis), smallest model first (grid
 * order where a size is unknown): order[] holds them series by series, start[s]..start[s+1]. */
typedef struct { nbx_strv series; int *order, *start; double *params; } size_series;

static void free_sizes(size_series *z) {
    nbx_strv_free(&z->series);
    free(z->order);
    free(z->start);
    free(z->params);
}

static int size_series_of(const tuning *t, size_series *z) {
    int n = t->n_groups, rc = 0, k = 0;
    char **title = calloc((size_t)n + 1, sizeof *title);
    *z = (size_series){.order = malloc(sizeof(int) * (size_t)(n + 1)), .start = malloc(sizeof(int) * (size_t)(n + 2)),
                       .params = malloc(sizeof(double) * (size_t)(n + 1))};
    if (!title || !z->order || !z->start || !z->params) rc = nb_fail("out of memory");
    for (int g = 0; g < n && !rc; g++) {
        nb_buf buf = {0};
        rc = describe(t, row_of_panel(t->r, t->g[g].panel[0]), t->size_axis, 0, &buf);
        title[g] = buf.p;
        z->params[g] = group_params(t, &t->g[g]);
        int known = 0;
        for (int i = 0; !rc && i < z->series.n; i++) known |= !strcmp(z->series.v[i], buf.p);
        if (!rc && !known) rc = nbx_strv_push(&z->series, buf.p, buf.n);
    }
    for (int si = 0; si < z->series.n && !rc; si++) {
        z->start[si] = k;
        for (int g = 0; g < n; g++) {
            if (strcmp(title[g], z->series.v[si])) continue;
            int j = k++;  /* insertion by parameters; an unknown size keeps its place after the known ones */
            for (; j > z->start[si] && !isnan(z->params[g]) &&
                   (isnan(z->params[z->order[j - 1]]) || z->params[z->order[j - 1]] > z->params[g]); j--)
                z->order[j] = z->order[j - 1];
            z->order[j] = g;
        }
    }
    if (!rc) z->start[z->series.n] = k;
    for (int g = 0; g < n && title; g++) free(title[g]);
    free(title);
    return rc;
}

static const char *size_verdict(double lo, double hi) {
    return hi < 0 ? "smaller for the larger model" : lo > 0 ? "larger for the larger model" : "not resolved";
}

/* One row per size of a series for delayed curve c: its parameters, tuned rate and paired gap, and the
 * change from the next smaller size with a 95% Welch interval (different models: nothing pairs them;
 * none where a size is unknown or a side has one pair). */
static int size_rows(nb_buf *b, const tuning *t, const size_series *z, int si, int c) {
    int rc = 0;
    nbx_paired prev = {0};
    double prev_params = NAN;
    for (int k = z->start[si]; k < z->start[si + 1] && !rc; k++) {
        const tgroup *g = &t->g[z->order[k]];
        double params = z->params[z->order[k]];
        nbx_paired gp = g->pick >= 0 ? gap_of(t, g->panel[g->pick], c) : (nbx_paired){0};
        rc = nb_buf_printf(b, "<tr><td>") || nbx_html(b, z->series.v[si]) || nb_buf_printf(b, "</td><td>") ||
             nbx_html(b, t->r->curves.v[c]) || nb_buf_printf(b, "</td><td>") ||
             nbx_html(b, row_of_panel(t->r, g->panel[0])->labels[t->size_axis]) ||
             (isnan(params) ? nb_buf_printf(b, "</td><td>unknown</td><td>") : nb_buf_printf(b, "</td><td>%.0f</td><td>", params));
        if (g->pick < 0) rc = rc || nb_buf_printf(b, "no pick: %s", g->why);
        else rc = rc || nbx_html(b, row_of_panel(t->r, g->panel[g->pick])->labels[t->lr_axis]);
        rc = rc || nb_buf_printf(b, "</td><td>") || gap_text(b, gp) || nb_buf_printf(b, "</td><td>");
        if (k == z->start[si] || prev.n < 2 || gp.n < 2 || isnan(params) || isnan(prev_params))
            rc = rc || nb_buf_printf(b, "&mdash;");
        else {
            nbx_welch w = nbx_welch_diff(prev, gp);
            rc = rc || nb_buf_printf(b, "%+.4f [%+.4f, %+.4f] %s", w.diff, w.diff - w.half, w.diff + w.half,
                                     size_verdict(w.diff - w.half, w.diff + w.half));
        }
        rc = rc || nb_buf_printf(b, "</td></tr>\n");
        prev = gp;
        prev_params = params;
    }
    return rc;
}

/* Each delayed curve's mean gap at each size's tuned rate against parameters. */
static int size_chart(nb_buf *b, const tuning *t, const size_series *z, int si) {
    const int *gi = z->order + z->start[si];
    int n = z->start[si + 1] - z->start[si];
    double *params = malloc(sizeof(double) * (size_t)(n + 1));
    if (!params) return nb_fail("out of memory");
    for (int i = 0; i < n; i++) params[i] = z->params[gi[i]];
    char id[64], title[512];
    snprintf(id, sizeof id, "size-%d", si + 1);
    snprintf(title, sizeof title, "%s: gap to sync against model size", z->series.v[si]);
    int rc = gap_chart(b, t, gi, params, n, id, "size-chart", title, "parameters (log)");
    free(params);
    return rc;
}

static int size_section(nb_buf *b, const tuning *t) {
    size_series z;
    int rc = size_series_of(t, &z);
    rc = rc || nb_buf_printf(b, "<h2 id=\"size\">The gap against model size</h2>\n<p class=\"note\">Per series (the "
                                "axes other than %s, lr, seed and the curves) and size, smallest model first (its "
                                "parameters from the runs' summary.json): the paired gap to the synchronous runs at that "
                                "size's tuned rate (the tuning table's pick) with its 95%% t interval, and its change from "
                                "the next smaller size with a 95%% Welch interval (different models: nothing pairs them). "
                                "&ldquo;smaller for the larger model&rdquo; only when that interval lies below zero, "
                                "&ldquo;larger&rdquo; above it, else &ldquo;not resolved&rdquo;. The chart puts the gap "
                                "on a linear axis against parameters on a log axis.</p>\n<table id=\"size-table\"><tr>"
                                "<th>series</th><th>curve</th><th>size</th><th>parameters</th><th>tuned lr</th>"
                                "<th>gap to sync (paired) [95%% interval]</th><th>change from the smaller size [95%% Welch "
                                "interval]</th></tr>\n", t->r->axes[t->size_axis]);
    for (int si = 0; si < z.series.n && !rc; si++)
        for (int c = 0; c < t->r->curves.n && !rc; c++)
            if (c != t->sync) rc = size_rows(b, t, &z, si, c);
    rc = rc || nb_buf_printf(b, "</table>\n");
    for (int si = 0; si < z.series.n && !rc; si++) rc = size_chart(b, t, &z, si);
    free_sizes(&z);
    return rc;
}

int nbx_report_scale(nb_buf *b, const nbx_report *r) {
    tuning t = {.r = r, .lr_axis = axis_named(r, "lr"), .steps_axis = axis_named(r, "steps"), .sync = -1,
                .size_axis = axis_named(r, "size") >= 0 ? axis_named(r, "size") : axis_named(r, "model")};
    if (t.lr_axis < 0) return 0;
    if (t.lr_axis == r->curve_axis || t.lr_axis == r->seed_axis)
        return nb_buf_printf(b, "<p class=\"note\" id=\"tuning\">No tuning table: the rates are this grid's curves (it has "
                                "no axis named delay), so no run is paired with a synchronous one.</p>\n");
    if (t.steps_axis == r->curve_axis || t.steps_axis == r->seed_axis) t.steps_axis = -1;
    if (t.size_axis == r->curve_axis || t.size_axis == r->seed_axis) t.size_axis = -1;
    for (int p = 0; p < r->panel_keys.n && t.sync < 0; p++) t.sync = nbx_sync_curve(r, p);
    t.scratch = malloc(sizeof(double) * (size_t)(r->seeds.n + 1));
    t.scratch2 = malloc(sizeof(double) * (size_t)(r->seeds.n + 1));
    int rc = !t.scratch || !t.scratch2 ? nb_fail("out of memory") : make_groups(&t);
    for (int k = 0; k < t.n_groups && !rc; k++) pick(&t, &t.g[k]);
    rc = rc || tuning_section(b, &t);
    if (!rc && t.steps_axis >= 0) rc = scaling_section(b, &t);
    if (!rc && t.size_axis >= 0) rc = size_section(b, &t);
    free_tuning(&t);
    return rc;
}
