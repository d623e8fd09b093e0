/* The extrapolation table of the scaling section (docs/experiments.md, "Tuned rates and scaling"): the
 * log-log line of the slope table (ln mean gap = c0 + c1 ln tokens over the lengths, ordinary least
 * squares by GSL) read at the longest fitted length's tokens T, at 10 T and at 100 T, each with the
 * 95% confidence interval of the line's mean there, and the tokens where the line falls to the
 * noise floor (the synchronous runs' seed-to-seed standard deviation, itself with a chi-square
 * interval), with an interval that carries the line's uncertainty and the floor's. Then the caveats
 * that apply to the rows fitted. */
#include <gsl/gsl_fit.h>
#include <math.h>
#include "report/extrap.h"
#include "report/fits.h"

/* t: the 95% t quantile of the line's intervals; tj: the 97.5% one of the crossing, whose interval
 * joins the line's band and the floor's interval at 97.5% each (Bonferroni: both hold together with
 * probability at least 95%). */
typedef struct { double c0, c1, cov00, cov01, cov11, sumsq, t, tj; } loglog_fit;

/* ------------------------------------------------------------ cells */
/* A token count too large for a double reads as such rather than "inf". */
static int tokens_text(nb_buf *b, double v) {
    return isfinite(v) ? nb_buf_printf(b, "%.3g", v) : nb_buf_printf(b, "&gt; 1e308");
}

/* A gap: four decimals, or three significant digits far from the losses' scale (an interval's end
 * far out, 1.2e-05 or 3.9e+05, rather than 0.0000). */
static int gap_text(nb_buf *b, double v) {
    return nb_buf_printf(b, v >= 1e-3 && v < 1e3 ? "%.4f" : "%.3g", v);
}

/* The fitted gap at tokens T, exp(c0 + c1 ln T), with exp of the mean response's 95% interval
 * (se = s sqrt(1/n + (ln T - mean)^2 / Sxx), GSL's estimate error). */
static int gap_cell(nb_buf *b, const loglog_fit *f, double tokens) {
    double y, se;
    gsl_fit_linear_est(log(tokens), f->c0, f->c1, f->cov00, f->cov01, f->cov11, &y, &se);
    return nb_buf_printf(b, "<td>") || gap_text(b, exp(y)) || nb_buf_printf(b, " [") || gap_text(b, exp(y - f->t * se)) ||
           nb_buf_printf(b, ", ") || gap_text(b, exp(y + f->t * se)) || nb_buf_printf(b, "]</td>");
}

/* The floor with its 95% chi-square interval: with 3 runs (2 degrees of freedom) it spans a factor of
 * 12, which the crossing's interval must carry. */
static int floor_cell(nb_buf *b, const nbx_extrap_in *in) {
    if (in->floor_runs < 2)
        return nb_buf_printf(b, "<td>n/a: %d synchronous run%s</td>", in->floor_runs, in->floor_runs == 1 ? "" : "s");
    double lo, hi;
    nbx_sd_interval(in->floor_sd, in->floor_runs, 0.95, &lo, &hi);
    return nb_buf_printf(b, "<td>%.4f [%.4f, %.4f] (%d runs)</td>", in->floor_sd, lo, hi, in->floor_runs);
}

/* The confidence band (quantile tj) holds level L at the x where (c0 + c1 x - L)^2 <= tj^2 var(x),
 * var(x) = cov00 + 2 x cov01 + x^2 cov11: a quadratic A x^2 + B x + C <= 0. With A = c1^2 - tj^2
 * cov11 > 0 (the slope's own interval excludes zero) the x form a bounded interval between its roots
 * (the discriminant is then >= 0 in exact arithmetic; an exact fit, s = 0, gives a double root, which
 * rounding may push below 0); otherwise the set is unbounded and no interval is given. Returns 1
 * with [lo, hi] in tokens, 0 when unbounded. */
static int crossing_interval(const loglog_fit *f, double level, double *lo, double *hi) {
    double t2 = f->tj * f->tj, d = f->c0 - level;
    double A = f->c1 * f->c1 - t2 * f->cov11, B = 2 * (f->c1 * d - t2 * f->cov01), C = d * d - t2 * f->cov00;
    if (!(A > 0)) return 0;
    double disc = fmax(B * B - 4 * A * C, 0);
    double q = -0.5 * (B + copysign(sqrt(disc), B));  /* the roots without cancellation */
    double r1 = q / A, r2 = q != 0 ? C / q : r1;
    *lo = exp(fmin(r1, r2));
    *hi = exp(fmax(r1, r2));
    return 1;
}

static int crossing_cell(nb_buf *b, const loglog_fit *f, const nbx_extrap_in *in) {
    if (in->floor_runs < 2) return nb_buf_printf(b, "<td>n/a: no noise floor</td>");
    if (f->c1 >= 0) return nb_buf_printf(b, "<td>never (slope &ge; 0)</td>");
    if (!(in->floor_sd > 0)) return nb_buf_printf(b, "<td>never (noise floor 0)</td>");
    double level = log(in->floor_sd), f_lo, f_hi, lo, hi, unused;
    int rc = nb_buf_printf(b, "<td>") || tokens_text(b, exp((level - f->c0) / f->c1));
    nbx_sd_interval(in->floor_sd, in->floor_runs, 0.975, &f_lo, &f_hi);
    /* With A > 0 both edges of the band fall with x (their slopes are at most c1 + tj sqrt(cov11) < 0),
     * so the tokens where the band meets some floor in [f_lo, f_hi] run from where its lower edge
     * meets f_hi to where its upper edge meets f_lo: the first root at f_hi, the second at f_lo. */
    if (crossing_interval(f, log(f_hi), &lo, &unused) && crossing_interval(f, log(f_lo), &unused, &hi))
        rc = rc || nb_buf_printf(b, " [") || tokens_text(b, lo) || nb_buf_printf(b, ", ") || tokens_text(b, hi) ||
             nb_buf_printf(b, "]");
    else rc = rc || nb_buf_printf(b, " (no interval: the slope's 97.5%% interval reaches 0)");
    return rc || nb_buf_printf(b, "</td>");
}

/* ------------------------------------------------------------ notes for the caveats */
static int note_fit(nbx_extrap_notes *notes, const nbx_extrap_in *in) {
    double factor = in->t_last / in->t_first, span = log10(factor);
    notes->rows++;
    notes->seeds_shared |= in->seeds_shared;
    notes->edge |= in->edge;
    notes->t_max = fmax(notes->t_max, in->t_last);
    if (isnan(in->params)) notes->params_unknown = 1;
    else if (!notes->params_seen++) notes->params_lo = notes->params_hi = in->params;
    else {
        notes->params_lo = fmin(notes->params_lo, in->params);
        notes->params_hi = fmax(notes->params_hi, in->params);
    }
    nb_buf *f = &notes->fits;
    return nb_buf_printf(f, "<li>") || nbx_html(f, in->series) || nb_buf_printf(f, ", ") || nbx_html(f, in->curve) ||
           nb_buf_printf(f, ": a fit over %d lengths spanning a factor %.3g of tokens (%.0f to %.0f, %.2f decades): ",
                         in->n, factor, in->t_first, in->t_last, span) ||
           nb_buf_printf(f, "%s", in->lengths_text) ||  /* already HTML (report_scale.c) */
           nb_buf_printf(f, "; 100 T lies 2 decades beyond the longest, %.1f times that span.</li>\n", 2 / span);
}

void nbx_extrap_notes_free(nbx_extrap_notes *notes) { nb_buf_free(&notes->fits); }

/* ------------------------------------------------------------ the table */
int nbx_extrap_header(nb_buf *b) {
    return nb_buf_printf(b, "<p class=\"note\">Extrapolation: the slope table's line, ln(mean gap) = a + slope "
                            "ln(tokens), read at the longest fitted length's tokens T, at 10 T and at 100 T (exp of the "
                            "line; the 95%% confidence interval of the line's mean there, t on lengths - 2 degrees of "
                            "freedom, exponentiated), and the tokens where it falls to the noise floor: the sample "
                            "standard deviation of the synchronous runs' final validation loss at T's tuned rate (a "
                            "smaller gap cannot be told from seed noise), with its 95%% interval from the chi-square "
                            "distribution (runs - 1 degrees of freedom). The crossing's interval carries both "
                            "uncertainties: the tokens where the line's confidence band meets a floor inside the "
                            "floor's interval, each at 97.5%% so that both hold together with probability at least "
                            "95%%; it is bounded only when the slope's own 97.5%% interval excludes zero. By hand: "
                            "gap(10 T) = gap(T) &times; 10^slope, and the crossing is T &times; (floor / "
                            "gap(T))^(1/slope). Rows whose slope has no interval are not extrapolated.</p>\n"
                            "<table id=\"extrapolation-table\"><tr><th>series</th><th>curve</th><th>longest length "
                            "(steps)</th><th>its tokens T</th><th>fitted gap at T [95%% interval]</th><th>at 10 T</th>"
                            "<th>at 100 T</th><th>noise floor: sync final val loss sd [95%% interval] (runs)</th>"
                            "<th>tokens where the fitted gap reaches the floor [95%% interval, line and floor]</th></tr>\n");
}

int nbx_extrap_row(nb_buf *b, nbx_extrap_notes *notes, const nbx_extrap_in *in) {
    int rc = nb_buf_printf(b, "<tr><td>") || nbx_html(b, in->series) || nb_buf_printf(b, "</td><td>") ||
             nbx_html(b, in->curve) || nb_buf_printf(b, "</td>");
    if (rc) return rc;
    if (in->why && *in->why) return nb_buf_printf(b, "<td colspan=\"7\">%s</td></tr>\n", in->why);
    if (in->n < 3)
        return nb_buf_printf(b, "<td colspan=\"7\">not extrapolated: %d lengths, no interval (3 needed)</td></tr>\n", in->n);
    loglog_fit f = {.t = nbx_t975(in->n - 2), .tj = nbx_t_quantile(0.9875, in->n - 2)};
    rc = gsl_fit_linear(in->x, 1, in->y, 1, (size_t)in->n, &f.c0, &f.c1, &f.cov00, &f.cov01, &f.cov11, &f.sumsq) ||
         nb_buf_printf(b, "<td>") || nbx_html(b, in->last_steps) || nb_buf_printf(b, "</td><td>%.0f</td>", in->t_last);
    for (double m = 1; m <= 100 && !rc; m *= 10) rc = gap_cell(b, &f, m * in->t_last);
    return rc || floor_cell(b, in) || crossing_cell(b, &f, in) || nb_buf_printf(b, "</tr>\n") || note_fit(notes, in);
}

/* A parameter count as people read it: 1.38M, 360M, 10B. */
static int count_text(nb_buf *b, double v) {
    if (v >= 1e9) return nb_buf_printf(b, "%.3gB", v / 1e9);
    if (v >= 1e6) return nb_buf_printf(b, "%.3gM", v / 1e6);
    return nb_buf_printf(b, "%.0f", v);
}

/* One model size per fit, with its parameter count where the summaries give it. */
static int size_caveat(nb_buf *b, const nbx_extrap_notes *n, int known) {
    if (!n->params_unknown && n->params_lo < 0) /* a fit whose lengths ran different models */
        return nb_buf_printf(b, "<li>A fit mixes model sizes across its lengths: its line confounds tokens with model "
                                "size.</li>\n");
    int rc = nb_buf_printf(b, "<li>One model size");
    if (known && n->params_lo == n->params_hi)
        rc = rc || nb_buf_printf(b, " (") || count_text(b, n->params_lo) || nb_buf_printf(b, " parameters in every fitted run)");
    else if (known)
        rc = rc || nb_buf_printf(b, " per fit (") || count_text(b, n->params_lo) || nb_buf_printf(b, " to ") ||
             count_text(b, n->params_hi) || nb_buf_printf(b, " parameters)");
    else rc = rc || nb_buf_printf(b, " per fit (the runs' summary.json has no model to count)");
    return rc || nb_buf_printf(b, ": how the gap changes with model size is not measured.</li>\n");
}

static int model_caveats(nb_buf *b, const nbx_extrap_notes *n) {
    int known = !n->params_unknown && n->params_lo > 0;
    int rc = size_caveat(b, n, known) ||
             nb_buf_printf(b, "<li>The paper's scale (hundreds of millions to billions of parameters, billions of tokens) "
                              "is many decades beyond:");
    if (known) rc = rc || nb_buf_printf(b, " 1e8 parameters is %.1f decades above ", log10(1e8 / n->params_hi)) ||
                    count_text(b, n->params_hi) || nb_buf_printf(b, ", and");
    return rc || nb_buf_printf(b, " 1e9 tokens is %.1f decades beyond the longest fitted length's %.0f tokens.</li>\n",
                               log10(1e9 / n->t_max), n->t_max);
}

int nbx_extrap_footer(nb_buf *b, const nbx_extrap_notes *n) {
    int rc = nb_buf_printf(b, "</table>\n");
    if (rc || !n->rows) return rc;
    rc = nb_buf_printf(b, "<p class=\"note\">Caveats of the extrapolation:</p>\n<ul id=\"extrapolation-caveats\">\n%s",
                       n->fits.p);
    if (n->seeds_shared)
        rc = rc || nb_buf_printf(b, "<li>Each fit treats its lengths' mean gaps as independent, although a seed keeps "
                                    "its initialization and data order at every length: a seed's effect on the gap that "
                                    "lasts across lengths makes the intervals too wide or too narrow.</li>\n");
    rc = rc || nb_buf_printf(b, "<li>The rate is tuned anew at each length (the rates above): the extrapolation assumes "
                                "that longer runs, tuned the same way, stay on the fitted line.%s</li>\n",
                             n->edge ? " A rate at its grid's edge may not be the best: a better one may lie beyond."
                                     : "");
    return rc || model_caveats(b, n) || nb_buf_printf(b, "</ul>\n");
}
