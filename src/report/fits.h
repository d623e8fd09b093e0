/* Internal: the statistics of the scaling section's fits over a series' lengths (docs/experiments.md,
 * "Tuned rates and scaling"). Every fit takes one value per length, the mean paired gap over its
 * seeds, so that a length's seeds are never counted as independent lengths: a power law fitted to
 * the means themselves (one whose mean is <= 0 included), the change between two lengths' means
 * (Welch). The quantiles, and the interval of a standard deviation (the noise floor), are stats.h's. */
#ifndef NB_REPORT_FITS_H
#define NB_REPORT_FITS_H
#include "report/stats.h"

/* The exponents the power law's search covers: |b| <= NBX_POWER_B_MAX. A gap that changes 10^10-fold
 * over tenfold tokens is no power law a study would report; past it the cells say "< -10". */
#define NBX_POWER_B_MAX 10.0

/* gap_k = a (tokens_k / tokens_ref)^b by least squares on the means (tokens_ref their geometric
 * mean), b found by a search with a in closed form, and b's 95% profile interval: the b whose least
 * squares RSS(b) stays within RSS_min (1 + t^2 / (n - 2)), t = t_{0.975, n-2}. */
typedef struct {
    double b, lo, hi;   /* lo, hi: NAN with fewer than 3 lengths */
    int off;            /* the least-squares b lies at the search's edge (-1 below, +1 above), none inside */
    int lo_open, hi_open; /* the interval reaches the search's edge on that side */
} nbx_power;

nbx_power nbx_power_fit(const double *tokens, const double *gap, int n);

/* to.mean - from.mean with a 95% Welch interval (the lengths' runs are different runs: unpaired,
 * unequal variances, Welch-Satterthwaite degrees of freedom); half NAN when a side has one pair. */
typedef struct { double diff, half, df; } nbx_welch;

nbx_welch nbx_welch_diff(nbx_paired from, nbx_paired to);

#endif
