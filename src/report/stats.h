/* Internal: the report's one mean, standard deviation and t interval, and the quantiles every
 * interval of the report takes. Its first use, the paired statistics of a sweep's gaps
 * (docs/experiments.md, "Paired gaps"): runs that differ only in delay or mitigation share seed and
 * data order, so their differences are taken seed by seed and summarized with a t interval. */
#ifndef NB_REPORT_STATS_H
#define NB_REPORT_STATS_H

/* Student's t quantile for any p in (0, 1) and real df > 0 (GSL). */
double nbx_t_quantile(double p, double df);
/* The 0.975 quantile of Student's t distribution with df >= 1 degrees of freedom. */
double nbx_t975(int df);
/* The two-sided interval at `level` (0.95) of a standard deviation sd of n >= 2 values, from the
 * chi-square distribution with n - 1 degrees of freedom (normal values assumed). */
void nbx_sd_interval(double sd, int n, double level, double *lo, double *hi);

typedef struct {
    int n;              /* values summarized */
    double mean, sd;    /* sd: sample standard deviation (n - 1); 0 when n < 2 */
    double half;        /* half-width of the 95% interval, t975(n-1) sd / sqrt(n); NAN when n < 2 */
    int within_noise;   /* the interval covers zero (never when n < 2: there is no interval) */
} nbx_paired;

/* Mean, standard deviation and 95% t interval of x[0..n); n = 0 gives mean NAN. */
nbx_paired nbx_paired_stats(const double *x, int n);
#endif
