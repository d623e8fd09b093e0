/* The statistics of the scaling section's fits over a series' lengths (fits.h). Quantiles from
 * stats.c. */
#include <math.h>
#include "report/fits.h"

nbx_welch nbx_welch_diff(nbx_paired from, nbx_paired to) {
    nbx_welch w = {.diff = to.mean - from.mean, .half = NAN, .df = NAN};
    if (from.n < 2 || to.n < 2) return w;
    double v1 = from.sd * from.sd / from.n, v2 = to.sd * to.sd / to.n, se2 = v1 + v2;
    if (!(se2 > 0)) {  /* no spread on either side: the difference is exact, whatever the df */
        w.half = 0;
        w.df = from.n + to.n - 2;
        return w;
    }
    w.df = se2 * se2 / (v1 * v1 / (from.n - 1) + v2 * v2 / (to.n - 1));
    w.half = nbx_t_quantile(0.975, w.df) * sqrt(se2);
    return w;
}

/* ------------------------------------------------------------ the power law */
/* The exponents searched: a grid of this step over [-B_MAX, B_MAX], then refined. RSS(b) can have
 * more than one local minimum when the means change sign; the grid finds the lowest. */
#define POWER_STEP 0.01
#define POWER_GRID ((int)(2 * NBX_POWER_B_MAX / POWER_STEP + 0.5) + 1)

typedef struct { const double *u, *y; int n; } power_data;  /* u: ln tokens less their mean */

static double grid_b(int i) { return -NBX_POWER_B_MAX + i * POWER_STEP; }

/* The least-squares residual sum at exponent b, with a = sum(y x) / sum(x^2) in closed form,
 * x = exp(b u); the residuals are summed directly (not sum y^2 - a sum(y x), which cancels at an
 * exact fit). */
static double rss_at(const power_data *d, double b) {
    double sxy = 0, sxx = 0, r = 0;
    for (int k = 0; k < d->n; k++) {
        double x = exp(b * d->u[k]);
        sxy += x * d->y[k];
        sxx += x * x;
    }
    for (int k = 0; k < d->n; k++) {
        double e = d->y[k] - sxy / sxx * exp(b * d->u[k]);
        r += e * e;
    }
    return r;
}

/* Golden-section search for the minimum of RSS in [lo, hi]. */
static double golden_min(const power_data *d, double lo, double hi) {
    const double g = (sqrt(5.0) - 1) / 2;
    double x1 = hi - g * (hi - lo), x2 = lo + g * (hi - lo), f1 = rss_at(d, x1), f2 = rss_at(d, x2);
    for (int i = 0; i < 200 && hi - lo > 1e-12; i++) {
        if (f1 <= f2) { hi = x2; x2 = x1; f2 = f1; x1 = hi - g * (hi - lo); f1 = rss_at(d, x1); }
        else { lo = x1; x1 = x2; f1 = f2; x2 = lo + g * (hi - lo); f2 = rss_at(d, x2); }
    }
    return (lo + hi) / 2;
}

/* The b where RSS crosses `level` between `in` (below it) and `out` (above), by bisection. */
static double crossing(const power_data *d, double in, double out, double level) {
    for (int i = 0; i < 100 && fabs(out - in) > 1e-12; i++) {
        double mid = (in + out) / 2;
        if (rss_at(d, mid) > level) out = mid;
        else in = mid;
    }
    return (in + out) / 2;
}

/* One end of the profile interval: walking the grid from b (dir -1 down, +1 up) to the first exponent
 * whose RSS exceeds level; *open when none does before the search's edge. */
static double profile_end(const power_data *d, double b, int dir, double level, int *open) {
    int i = (int)floor((b + NBX_POWER_B_MAX) / POWER_STEP) + (dir > 0);
    double inside = b;
    for (; i >= 0 && i < POWER_GRID; i += dir) {
        if (rss_at(d, grid_b(i)) > level) return crossing(d, inside, grid_b(i), level);
        inside = grid_b(i);
    }
    *open = 1;
    return dir * NBX_POWER_B_MAX;
}

nbx_power nbx_power_fit(const double *tokens, const double *gap, int n) {
    nbx_power p = {.b = NAN, .lo = NAN, .hi = NAN};
    double u[n > 0 ? n : 1], mean = 0;
    for (int k = 0; k < n; k++) mean += log(tokens[k]) / n;
    for (int k = 0; k < n; k++) u[k] = log(tokens[k]) - mean;
    power_data d = {u, gap, n};
    if (n < 2) return p;
    int best = 0;
    double best_rss = INFINITY;
    for (int i = 0; i < POWER_GRID; i++) {
        double r = rss_at(&d, grid_b(i));
        if (r < best_rss) { best_rss = r; best = i; }
    }
    if (best == 0 || best == POWER_GRID - 1) {
        p.off = best == 0 ? -1 : 1;
        return p;
    }
    p.b = golden_min(&d, grid_b(best - 1), grid_b(best + 1));
    if (n < 3) return p;
    double t = nbx_t975(n - 2), level = rss_at(&d, p.b) * (1 + t * t / (n - 2));
    p.lo = profile_end(&d, p.b, -1, level, &p.lo_open);
    p.hi = profile_end(&d, p.b, 1, level, &p.hi_open);
    return p;
}
