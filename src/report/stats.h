/* Internal: paired statistics of a sweep's gaps (docs/experiments.md, "Paired gaps"). Runs that
 * differ only in delay or mitigation share seed and data order, so their differences are taken
 * seed by seed and summarized with a t interval. */
#ifndef NB_REPORT_STATS_H
#define NB_REPORT_STATS_H

/* The 0.975 quantile of Student's t distribution with df >= 1 degrees of freedom (GSL). */
double nbx_t975(int df);

typedef struct {
    int n;              /* values summarized */
    double mean, sd;    /* sd: sample standard deviation (n - 1); 0 when n < 2 */
    double half;        /* half-width of the 95% interval, t975(n-1) sd / sqrt(n); NAN when n < 2 */
    int within_noise;   /* the interval covers zero (never when n < 2: there is no interval) */
} nbx_paired;

/* Mean, standard deviation and 95% t interval of x[0..n); n = 0 gives mean NAN. */
nbx_paired nbx_paired_stats(const double *x, int n);
#endif
