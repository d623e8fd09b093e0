/* Paired statistics over a sweep's runs (docs/experiments.md, "Paired gaps"): runs that differ only
 * in delay or mitigation share seed and data order, so gaps and recoveries are taken seed by seed. */
#include <math.h>
#include <string.h>
#include "report/report.h"

const char *nbx_seed_of(const nbx_report *r, const nbx_rrow *row) {
    return r->seed_axis >= 0 ? row->labels[r->seed_axis] : "";
}

double nbx_final_of(const nbx_report *r, int panel, int curve, const char *seed) {
    for (int i = 0; i < r->n_rows; i++) {
        const nbx_rrow *row = &r->rows[i];
        if (row->done && row->panel == panel && row->curve == curve && !strcmp(nbx_seed_of(r, row), seed))
            return row->run.final_val_loss;
    }
    return NAN;
}

int nbx_paired_gaps(const nbx_report *r, int p, int c, int base, double *gaps, nb_buf *unpaired) {
    int n = 0;
    for (int s = 0; s < r->seeds.n; s++) {
        double x = nbx_final_of(r, p, c, r->seeds.v[s]), y = nbx_final_of(r, p, base, r->seeds.v[s]);
        if (!isnan(x) && !isnan(y)) gaps[n++] = x - y;
        else if ((!isnan(x) || !isnan(y)) && unpaired &&
                 (nb_buf_printf(unpaired, "%sseed ", unpaired->n ? ", " : "") || nbx_html(unpaired, r->seeds.v[s]) ||
                  nb_buf_printf(unpaired, " (") || nbx_html(unpaired, r->curves.v[isnan(x) ? base : c]) ||
                  nb_buf_printf(unpaired, " only)")))
            return -1;
    }
    return n;
}

const nbx_run *nbx_first_run(const nbx_report *r, int p, int c) {
    for (int i = 0; i < r->n_rows; i++)
        if (r->rows[i].done && r->rows[i].panel == p && r->rows[i].curve == c) return &r->rows[i].run;
    return NULL;
}

int nbx_sync_curve(const nbx_report *r, int p) {
    for (int c = 0; c < r->curves.n; c++) {
        const nbx_run *x = nbx_first_run(r, p, c);
        if (x && nbx_run_is_sync(x)) return c;
    }
    return -1;
}

int nbx_plain_curve(const nbx_report *r, int p, const nbx_run *like) {
    for (int c = 0; c < r->curves.n; c++) {
        const nbx_run *x = nbx_first_run(r, p, c);
        if (x && nbx_run_is_plain_async(x) && !strcmp(x->delay_mode, like->delay_mode) && x->tau == like->tau) return c;
    }
    return -1;
}

/* Error feedback's (any mitigation's) recovery seed by seed: 1 - gap_mitigated / gap_plain, over
 * the seeds that have all three runs. */
static int paired_recoveries(const nbx_report *r, int p, int c, int plain, int sync, double *rec) {
    int n = 0;
    for (int s = 0; s < r->seeds.n; s++) {
        double base = nbx_final_of(r, p, sync, r->seeds.v[s]), gap = nbx_final_of(r, p, plain, r->seeds.v[s]) - base;
        double gap_m = nbx_final_of(r, p, c, r->seeds.v[s]) - base;
        if (!isnan(gap) && !isnan(gap_m) && gap != 0) rec[n++] = 1 - gap_m / gap;
    }
    return n;
}

int nbx_recovery_cell(nb_buf *b, const nbx_report *r, int p, int c, double *scratch) {
    const nbx_run *x = nbx_first_run(r, p, c);
    int sync = nbx_sync_curve(r, p);
    int plain = x && sync >= 0 && !nbx_run_is_sync(x) && !nbx_run_is_plain_async(x) ? nbx_plain_curve(r, p, x) : -1;
    if (plain < 0) return nb_buf_printf(b, "<td>&mdash;</td>");
    int n = nbx_paired_gaps(r, p, plain, sync, scratch, NULL);
    nbx_paired g = nbx_paired_stats(scratch, n < 0 ? 0 : n);
    if (g.n == 0) return nb_buf_printf(b, "<td>&mdash;</td>");
    if (g.within_noise) return nb_buf_printf(b, "<td>n/a: gap within noise</td>");
    if (!(g.mean > 0)) return nb_buf_printf(b, "<td>n/a: no gap</td>");
    nbx_paired rec = nbx_paired_stats(scratch, paired_recoveries(r, p, c, plain, sync, scratch));
    if (rec.n == 0) return nb_buf_printf(b, "<td>&mdash;</td>");
    if (rec.n == 1) return nb_buf_printf(b, "<td>%.1f%% (1 pair, no interval)</td>", 100 * rec.mean);
    return nb_buf_printf(b, "<td>%.1f%% [%.1f%%, %.1f%%]</td>", 100 * rec.mean, 100 * (rec.mean - rec.half),
                         100 * (rec.mean + rec.half));
}
