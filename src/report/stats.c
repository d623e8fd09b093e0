/* Paired statistics: mean, sample standard deviation and a 95% interval from Student's t
 * distribution (n - 1 degrees of freedom), the quantile from GSL. */
#include <gsl/gsl_cdf.h>
#include <math.h>
#include "report/stats.h"

double nbx_t975(int df) { return gsl_cdf_tdist_Pinv(0.975, (double)df); }

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
