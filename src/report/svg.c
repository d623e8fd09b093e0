/* SVG line charts for the report: fixed size, axes with round ticks, one path per series (a NAN
 * breaks it), a legend on the right. No scripts, no external resources. */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "report/report.h"

#define W 640.0
#define H 360.0
#define LEFT 64.0
#define RIGHT 170.0   /* room for the legend */
#define TOP 34.0
#define BOTTOM 46.0

static const char *const palette[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd",
                                      "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};

/* An axis: [lo, hi] in plotted units (log10 of the value on a log axis), ticks every step (linear). */
typedef struct { double lo, hi, step; int decimals, log; } scale;

/* A value in plotted units: log10 on a log axis, where a value <= 0 has no place (NAN). */
static double plotted(int log_axis, double v) {
    if (!log_axis) return v;
    return v > 0 ? log10(v) : NAN;
}

/* Round ticks: a step of 1, 2 or 5 x 10^k giving about 5 intervals over [lo, hi]. */
static scale make_scale(double lo, double hi) {
    if (!(hi > lo)) {
        double pad = fabs(lo) > 0 ? fabs(lo) * 0.05 : 0.5;
        lo -= pad;
        hi += pad;
    }
    double raw = (hi - lo) / 5, mag = pow(10, floor(log10(raw))), f = raw / mag;
    double step = (f < 1.5 ? 1 : f < 3 ? 2 : f < 7 ? 5 : 10) * mag;
    scale s = {floor(lo / step) * step, ceil(hi / step) * step, step, 0, 0};
    int d = (int)-floor(log10(step) + 1e-9);
    s.decimals = d > 0 ? d : 0;
    return s;
}

/* A log axis from the largest 1, 2 or 5 x 10^k at or below lo to the smallest at or above hi
 * (lo, hi in log10 units). */
static double nice_log(double v, int up) {
    static const double m[] = {1, 2, 5, 10};
    double k = floor(v + 1e-12), best = up ? k + 1 : k;
    for (int i = 0; i < 4; i++) {
        double c = k + log10(m[i]);
        if (up ? c >= v - 1e-12 && c < best : c <= v + 1e-12 && c > best) best = c;
    }
    return best;
}

static scale make_log_scale(double lo, double hi) {
    scale s = {nice_log(lo, 0), nice_log(hi, 1), 0, 0, 1};
    if (!(s.hi > s.lo)) s.hi = s.lo + 1;
    return s;
}

static double px(const scale *s, double v) { return LEFT + (v - s->lo) / (s->hi - s->lo) * (W - LEFT - RIGHT); }
static double py(const scale *s, double v) { return H - BOTTOM - (v - s->lo) / (s->hi - s->lo) * (H - TOP - BOTTOM); }

/* The range of the points (and of their intervals) in plotted units. */
static int data_range(const nbx_series *s, int n, int log_x, int log_y, double *xlo, double *xhi, double *ylo,
                      double *yhi) {
    int any = 0;
    *xlo = *ylo = INFINITY;
    *xhi = *yhi = -INFINITY;
    for (int k = 0; k < n; k++)
        for (int i = 0; i < s[k].n; i++) {
            double x = plotted(log_x, s[k].x[i]), y = plotted(log_y, s[k].y[i]);
            if (!isfinite(x) || !isfinite(y)) continue;
            any = 1;
            *xlo = fmin(*xlo, x); *xhi = fmax(*xhi, x);
            *ylo = fmin(*ylo, y); *yhi = fmax(*yhi, y);
            double lo = s[k].lo ? plotted(log_y, s[k].lo[i]) : NAN, hi = s[k].hi ? plotted(log_y, s[k].hi[i]) : NAN;
            if (isfinite(lo)) *ylo = fmin(*ylo, lo);
            if (isfinite(hi)) *yhi = fmax(*yhi, hi);
        }
    return any;
}

/* The tick marks of an axis: their positions (plotted units) and labels. A log axis gets 1, 2, 5 x
 * 10^k over up to two decades, powers of ten beyond. */
enum { MAX_TICKS = 64 };
static int ticks(const scale *s, double *at, char (*label)[32]) {
    int n = 0;
    if (!s->log) {
        for (double v = s->lo; v <= s->hi + s->step * 1e-6 && n < MAX_TICKS; v += s->step, n++) {
            at[n] = v;
            snprintf(label[n], 32, "%.*f", s->decimals, v);
        }
        return n;
    }
    static const double m[] = {1, 2, 5};
    const int per_decade = s->hi - s->lo <= 2 + 1e-9 ? 3 : 1;
    for (double k = floor(s->lo); k <= s->hi && n < MAX_TICKS; k++)
        for (int i = 0; i < per_decade && n < MAX_TICKS; i++) {
            double v = k + log10(m[i]);
            if (v < s->lo - 1e-9 || v > s->hi + 1e-9) continue;
            at[n] = v;
            snprintf(label[n++], 32, "%g", m[i] * pow(10, k));
        }
    return n;
}

static int axes(nb_buf *b, const scale *x, const scale *y, const char *xlabel, const char *ylabel) {
    int rc = 0;
    double at[MAX_TICKS];
    char label[MAX_TICKS][32];
    for (int i = 0, n = ticks(y, at, label); i < n && !rc; i++)
        rc = nb_buf_printf(b, "<line class=\"grid\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>"
                               "<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\" text-anchor=\"end\">%s</text>\n",
                             LEFT, py(y, at[i]), W - RIGHT, py(y, at[i]), LEFT - 5, py(y, at[i]) + 4, label[i]);
    for (int i = 0, n = ticks(x, at, label); i < n && !rc; i++)
        rc = nb_buf_printf(b, "<line class=\"grid\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#eee\"/>"
                               "<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\" text-anchor=\"middle\">%s</text>\n",
                             px(x, at[i]), TOP, px(x, at[i]), H - BOTTOM, px(x, at[i]), H - BOTTOM + 15, label[i]);
    if (!rc) rc = nb_buf_printf(b, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"none\" stroke=\"#333\"/>\n",
                                 LEFT, TOP, W - LEFT - RIGHT, H - TOP - BOTTOM);
    if (!rc) rc = nb_buf_printf(b, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"12\" text-anchor=\"middle\">", (LEFT + W - RIGHT) / 2, H - 8);
    if (!rc) rc = nbx_html(b, xlabel) || nb_buf_printf(b, "</text>\n");
    if (!rc) rc = nb_buf_printf(b, "<text x=\"14\" y=\"%.1f\" font-size=\"12\" text-anchor=\"middle\" "
                                    "transform=\"rotate(-90 14 %.1f)\">", (TOP + H - BOTTOM) / 2, (TOP + H - BOTTOM) / 2);
    if (!rc) rc = nbx_html(b, ylabel) || nb_buf_printf(b, "</text>\n");
    return rc;
}

/* The interval of point i as a vertical bar; an end at or below 0 on a log axis is drawn at the
 * axis's bottom (the bar then runs off the chart's scale, as such an interval does). */
static int interval(nb_buf *b, const nbx_series *s, int i, const scale *x, const scale *y, const char *color) {
    if (!s->lo || !s->hi || !isfinite(s->lo[i]) || !isfinite(s->hi[i])) return 0;
    double lo = plotted(y->log, s->lo[i]), hi = plotted(y->log, s->hi[i]);
    if (!isfinite(hi)) return 0;
    if (!isfinite(lo)) lo = y->lo;
    return nb_buf_printf(b, "<line class=\"interval\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\"/>",
                         px(x, plotted(x->log, s->x[i])), py(y, lo), px(x, plotted(x->log, s->x[i])), py(y, hi), color);
}

/* One series as a path (a NAN or infinite point starts a new piece) with a dot per point. */
static int series(nb_buf *b, const nbx_series *s, const scale *x, const scale *y, int k) {
    const char *color = palette[s->color % (int)(sizeof palette / sizeof palette[0])];
    if (nb_buf_printf(b, "<path class=\"series\" data-series=\"") || nbx_html(b, s->name) ||
        nb_buf_printf(b, "\" fill=\"none\" stroke=\"%s\" stroke-width=\"1.8\" d=\"", color))
        return -1;
    int pen = 0;
    for (int i = 0; i < s->n; i++) {
        double xv = plotted(x->log, s->x[i]), yv = plotted(y->log, s->y[i]);
        if (!isfinite(xv) || !isfinite(yv)) { pen = 0; continue; }
        if (nb_buf_printf(b, "%c%.1f %.1f ", pen ? 'L' : 'M', px(x, xv), py(y, yv))) return -1;
        pen = 1;
    }
    if (nb_buf_printf(b, "\"/>\n")) return -1;
    for (int i = 0; i < s->n && s->n <= 60; i++) {
        double xv = plotted(x->log, s->x[i]), yv = plotted(y->log, s->y[i]);
        if (isfinite(xv) && isfinite(yv) &&
            nb_buf_printf(b, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"2.2\" fill=\"%s\"/>", px(x, xv), py(y, yv), color))
            return -1;
        if (isfinite(xv) && isfinite(yv) && interval(b, s, i, x, y, color)) return -1;
    }
    double ly = TOP + 8 + 16 * k;
    if (nb_buf_printf(b, "\n<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" stroke-width=\"2.5\"/>"
                          "<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\">", W - RIGHT + 10, ly, W - RIGHT + 28, ly, color,
                       W - RIGHT + 33, ly + 4))
        return -1;
    return nbx_html(b, s->name) || nb_buf_printf(b, "</text>\n");
}

int nbx_svg_chart(nb_buf *b, const char *id, const char *cls, const char *title, const char *xlabel,
                  const char *ylabel, const nbx_series *s, int n_series) {
    return nbx_svg_chart_log(b, id, cls, title, xlabel, ylabel, s, n_series, 0, 0);
}

int nbx_svg_chart_log(nb_buf *b, const char *id, const char *cls, const char *title, const char *xlabel,
                      const char *ylabel, const nbx_series *s, int n_series, int log_x, int log_y) {
    if (nb_buf_printf(b, "<svg xmlns=\"http://www.w3.org/2000/svg\" id=\"") || nbx_html(b, id) ||
        nb_buf_printf(b, "\" class=\"chart %s\" width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" "
                          "font-family=\"sans-serif\">\n<title>", cls, W, H, W, H) ||
        nbx_html(b, title) || nb_buf_printf(b, "</title>\n<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n"
                                                "<text x=\"%.1f\" y=\"20\" font-size=\"14\" font-weight=\"bold\">", LEFT) ||
        nbx_html(b, title) || nb_buf_printf(b, "</text>\n"))
        return -1;
    double xlo, xhi, ylo, yhi;
    if (!data_range(s, n_series, log_x, log_y, &xlo, &xhi, &ylo, &yhi))
        return nb_buf_printf(b, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"13\">no data</text>\n</svg>\n", LEFT, H / 2);
    scale x = log_x ? make_log_scale(xlo, xhi) : make_scale(xlo, xhi);
    scale y = log_y ? make_log_scale(ylo, yhi) : make_scale(ylo, yhi);
    if (axes(b, &x, &y, xlabel, ylabel)) return -1;
    for (int k = 0; k < n_series; k++)
        if (series(b, &s[k], &x, &y, k)) return -1;
    return nb_buf_printf(b, "</svg>\n");
}

/* ------------------------------------------------------------ HTML text */
int nbx_html(nb_buf *b, const char *s) {
    for (; *s; s++) {
        int r;
        switch (*s) {
        case '&': r = nb_buf_printf(b, "&amp;"); break;
        case '<': r = nb_buf_printf(b, "&lt;"); break;
        case '>': r = nb_buf_printf(b, "&gt;"); break;
        case '"': r = nb_buf_printf(b, "&quot;"); break;
        default: r = nb_buf_put(b, s, 1);
        }
        if (r) return -1;
    }
    return 0;
}
