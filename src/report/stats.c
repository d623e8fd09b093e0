/* The report's statistics: mean, sample standard deviation and a 95% interval from Student's t
 * distribution (n - 1 degrees of freedom); the quantiles (t, and chi-square for a standard
 * deviation's interval) from GSL, in this file alone. */
#include <gsl/gsl_cdf.h>
#include <math.h>
#include "report/stats.h"

double nbx_t_quantile(double p, double df) { return gsl_cdf_tdist_Pinv(p, df); }

double nbx_t975(int df) { return nbx_t_quantile(0.975, (double)df); }

void nbx_sd_interval(double sd, int n, double level, double *lo, double *hi) {
    double df = n - 1, tail = (1 - level) / 2;
    *lo = sd * sqrt(df / gsl_cdf_chisq_Pinv(1 - tail, df));
    *hi = sd * sqrt(df / gsl_cdf_chisq_Pinv(tail, df));
}

nbx_paired nbx_paired_stats(const double *x, int n) {
    nbx_paired s = {.n = n, .mean = NAN, .sd = 0, .half = NAN, .within_noise = 0};
    if (n < 1) return s;
    double sum = 0, sq = 0;
    for (int i = 0; i < n; i++) sum += x[i];
    s.mean = sum / n;
    if (n < 2) return s;
    for (int i = 0; i < n; i++) sq += (x[i] - s.mean) * (x[i] - s.mean);
    s.sd = sqrt(sq / (n - 1));
    s.half = nbx_t975(n - 1) * s.sd / sqrt((double)n);
    s.within_noise = s.mean - s.half <= 0 && 0 <= s.mean + s.half;
    return s;
}
