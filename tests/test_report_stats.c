/* The report's paired statistics (src/report/stats.c, report.c): Student's t quantiles
 * against published table values; mean, standard deviation and 95% interval of hand-computed
 * gaps; and a report of a hand-made sweep folder whose gaps, intervals, "within noise" verdicts,
 * unpaired seed and per-seed recovery were computed by hand (below). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "check.h"
#include "report/fits.h"
#include "report/stats.h"
#include "nobubble/common.h"
#include "report/report.h"

static void test_quantiles(void) {
    /* t_{0.975, df} from a t table (e.g. NIST/SEMATECH e-Handbook, table 1.4.2.7.3.3). */
    const struct { int df; double t; } table[] = {
        {1, 12.706205}, {2, 4.302653}, {3, 3.182446}, {4, 2.776445}, {10, 2.228139}, {30, 2.042272},
    };
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
        double got = nbx_t975(table[i].df);
        CHECK(fabs(got - table[i].t) <= 1e-6, "t_{0.975,%d} = %.6f, expected %.6f", table[i].df, got, table[i].t);
    }
}

static void test_paired_stats(void) {
    const double gaps[3] = {0.1, 0.2, 0.3};
    nbx_paired s = nbx_paired_stats(gaps, 3);
    /* mean 0.2, sd sqrt((0.01 + 0 + 0.01) / 2) = 0.1, half-width 4.302653 x 0.1 / sqrt(3) = 0.248414 */
    CHECK(s.n == 3 && fabs(s.mean - 0.2) < 1e-12 && fabs(s.sd - 0.1) < 1e-12, "mean %.6g sd %.6g", s.mean, s.sd);
    CHECK(fabs(s.half - 4.302653 * 0.1 / sqrt(3.0)) < 1e-7, "half-width %.9f, expected %.9f", s.half,
          4.302653 * 0.1 / sqrt(3.0));
    CHECK(s.within_noise, "0.2 +- 0.248 covers zero: within noise");
    const double tight[3] = {0.2, 0.21, 0.19};  /* sd 0.01, half 0.0248: [0.175, 0.225] */
    s = nbx_paired_stats(tight, 3);
    CHECK(!s.within_noise && fabs(s.half - 4.302653 * 0.01 / sqrt(3.0)) < 1e-7, "tight gaps: not within noise");
    const double neg[5] = {-0.3, -0.1, -0.2, -0.25, -0.15};  /* mean -0.2, sd 0.0790569, t_{.975,4} */
    s = nbx_paired_stats(neg, 5);
    CHECK(fabs(s.half - 2.776445 * sqrt(0.025 / 4) / sqrt(5.0)) < 1e-7 && !s.within_noise,
          "five negative gaps: half %.9f", s.half);
    s = nbx_paired_stats(gaps, 1);
    CHECK(s.n == 1 && s.mean == 0.1 && isnan(s.half) && !s.within_noise, "one pair: no interval, never within noise");
    s = nbx_paired_stats(gaps, 0);
    CHECK(s.n == 0 && isnan(s.mean), "no pairs: mean NAN");
}

/* The scaling section's fits over per-length means (fits.c), in closed form. */
static void test_fits(void) {
    /* An sd of 3 values: chi-square with 2 df has the quantile -2 ln(1 - p). */
    double lo, hi;
    nbx_sd_interval(0.01, 3, 0.95, &lo, &hi);
    CHECK(fabs(lo - 0.01 * sqrt(2 / (-2 * log(0.025)))) < 1e-12 && fabs(hi - 0.01 * sqrt(2 / (-2 * log(0.975)))) < 1e-12,
          "sd interval [%.9f, %.9f]", lo, hi);
    /* Welch with equal spreads and sizes: df = 2 (n - 1) = 4, half = t_{0.975,4} sqrt(2 sd^2 / n). */
    const double a[3] = {0.1, 0.2, 0.3}, b[3] = {0.3, 0.4, 0.5};
    nbx_welch w = nbx_welch_diff(nbx_paired_stats(a, 3), nbx_paired_stats(b, 3));
    CHECK(fabs(w.diff - 0.2) < 1e-12 && fabs(w.df - 4) < 1e-9 && fabs(w.half - 2.776445 * sqrt(2 * 0.01 / 3)) < 1e-6,
          "welch %.6f +- %.6f, df %.6f", w.diff, w.half, w.df);
    w = nbx_welch_diff(nbx_paired_stats(a, 1), nbx_paired_stats(b, 3));
    CHECK(isnan(w.half), "one value on a side: no interval");
    /* An exact power law is recovered with an interval of zero width; a sign change runs off the search. */
    const double tokens[3] = {1e3, 1e4, 1e5}, gap[3] = {0.1, 0.1 * pow(10, -0.5), 0.01}, mixed[2] = {0.1, -0.05};
    nbx_power p = nbx_power_fit(tokens, gap, 3);
    CHECK(fabs(p.b + 0.5) < 1e-7 && fabs(p.lo + 0.5) < 1e-7 && fabs(p.hi + 0.5) < 1e-7 && !p.off && !p.lo_open && !p.hi_open,
          "power law b %.9f [%.9f, %.9f]", p.b, p.lo, p.hi);
    p = nbx_power_fit(tokens, mixed, 2);
    CHECK(p.off == -1 && isnan(p.b), "a positive then a negative mean: the exponent runs past -%g", NBX_POWER_B_MAX);
    /* Flat means but one: the profile stays below its threshold far out on one side. */
    const double flat[3] = {0.1, 0.1, 0.02};
    p = nbx_power_fit(tokens, flat, 3);
    CHECK(!p.off && p.lo_open, "a poorly determined exponent has an open end: b %.3f [%.3f, %.3f]", p.b, p.lo, p.hi);
}

/* ---- a hand-made sweep folder ---- */
static void write_file(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    CHECK(f != NULL, "write %s", path);
    if (!f) return;
    fputs(text, f);
    fclose(f);
}

static void add_run(const char *dir, FILE *csv, const char *opt, const char *delay, int seed, double loss) {
    char point[64], path[512], text[1024];
    snprintf(point, sizeof point, "%s_%s_%d", opt, delay, seed);
    snprintf(path, sizeof path, "%s/runs/%s", dir, point);
    mkdir(path, 0755);
    int ef = strstr(delay, "ef") != NULL, sync = !strcmp(delay, "sync");
    snprintf(text, sizeof text,
             "{\"final_train_loss\": %.4f, \"final_val_loss\": %.4f, \"seconds\": 1.0, \"run\": {\"optimizer\": \"%s\"}, "
             "\"delay\": {\"mode\": \"%s\", \"tau\": %d, \"ef\": %s, \"taylor\": 0, \"sync_start\": 0, "
             "\"sync_cooldown\": 0}}\n", loss, loss, opt, sync ? "sync" : "2bw", sync ? 0 : 1, ef ? "true" : "false");
    snprintf(path, sizeof path, "%s/runs/%s/summary.json", dir, point);
    write_file(path, text);
    snprintf(text, sizeof text, "{\"step\": 9, \"train_loss\": %.4f, \"tokens\": 100, \"time_s\": 1.0, \"val_loss\": %.4f}\n",
             loss, loss);
    snprintf(path, sizeof path, "%s/runs/%s/metrics.jsonl", dir, point);
    write_file(path, text);
    fprintf(csv, "%s,%s,%s,%d,%.4f,%.4f,%.4f,100,1.0,done,0\n", point, opt, delay, seed, loss, loss, loss);
}

static void expect_row(const char *html, const char *what, const char *row) {
    CHECK(html && strstr(html, row), "%s: the gap table has\n  %s", what, row);
}

static void test_report(void) {
    char dir[] = "/tmp/nb_test_report_XXXXXX", path[512];
    CHECK(mkdtemp(dir) != NULL, "temporary folder");
    snprintf(path, sizeof path, "%s/runs", dir);
    mkdir(path, 0755);
    snprintf(path, sizeof path, "%s/results.csv", dir);
    FILE *csv = fopen(path, "w");
    if (!csv) { CHECK(0, "results.csv"); return; }
    fprintf(csv, "point,optimizer,delay,seed,final_train_loss,final_val_loss,best_val_loss,tokens,seconds,status,exit_status\n");
    /* adamw: gaps 0.1, 0.2, 0.3 (2bw) and 0.05, 0.10, 0.15 (2bw+ef): both within noise. */
    const double a_sync[3] = {4.0, 4.1, 4.2}, a_2bw[3] = {4.1, 4.3, 4.5}, a_ef[3] = {4.05, 4.2, 4.35};
    /* muon: gaps 0.2, 0.21, 0.19 (2bw; seed 4 has a 2bw run only) and 0.05, 0.06, 0.04 (2bw+ef). */
    const double m_sync[3] = {4.0, 4.1, 4.2}, m_2bw[3] = {4.2, 4.31, 4.39}, m_ef[3] = {4.05, 4.16, 4.24};
    for (int s = 0; s < 3; s++) {
        add_run(dir, csv, "adamw", "sync", s + 1, a_sync[s]);
        add_run(dir, csv, "adamw", "2bw", s + 1, a_2bw[s]);
        add_run(dir, csv, "adamw", "2bw+ef", s + 1, a_ef[s]);
        add_run(dir, csv, "muon", "sync", s + 1, m_sync[s]);
        add_run(dir, csv, "muon", "2bw", s + 1, m_2bw[s]);
        add_run(dir, csv, "muon", "2bw+ef", s + 1, m_ef[s]);
    }
    add_run(dir, csv, "muon", "2bw", 4, 4.5);
    fclose(csv);
    char out[600];
    snprintf(out, sizeof out, "%s/report.html", dir);
    int rc = nb_report_write(dir, out);
    CHECK(rc == 0, "report: %s", rc ? nb_last_error() : "");
    size_t n;
    char *html = (char *)check_slurp(out, &n);
    /* mean 0.2, sd 0.1, 0.2 -+ 4.302653 x 0.1 / sqrt(3) = [-0.0484, +0.4484] */
    expect_row(html, "adamw 2bw", "<td>+0.2000</td><td>0.1000</td><td>[-0.0484, +0.4484] within noise</td><td>3</td>");
    /* mean 0.1, sd 0.05, half 0.1242; the plain gap within noise: no recovery */
    expect_row(html, "adamw 2bw+ef",
               "<td>+0.1000</td><td>0.0500</td><td>[-0.0242, +0.2242] within noise</td><td>3</td>"
               "<td>n/a: gap within noise</td>");
    /* mean 0.2, sd 0.01, half 0.0248; seed 4 unpaired */
    expect_row(html, "muon 2bw",
               "<td>+0.2000</td><td>0.0100</td><td>[+0.1752, +0.2248]</td><td>3; unpaired: seed 4 (2bw only)</td>");
    /* recoveries 1 - 0.05/0.2 = 0.75, 1 - 0.06/0.21 = 0.714286, 1 - 0.04/0.19 = 0.789474: mean 0.751253,
     * sd 0.037610, half 4.302653 x 0.037610 / sqrt(3) = 0.093428: [65.8%, 84.5%] */
    expect_row(html, "muon 2bw+ef",
               "<td>+0.0500</td><td>0.0100</td><td>[+0.0252, +0.0748]</td><td>3</td><td>75.1% [65.8%, 84.5%]</td>");
    free(html);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    check_run(cmd);
}

int main(void) {
    test_quantiles();
    test_paired_stats();
    test_fits();
    test_report();
    return check_summary();
}
