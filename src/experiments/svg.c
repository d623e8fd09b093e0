/* SVG line charts for the report: fixed size, axes with round ticks, one path per series (a NAN
 * breaks it), a legend on the right. No scripts, no external resources. */
#include <math.h>
#include <string.h>
#include "experiments/exp.h"

#define W 640.0
#define H 360.0
#define LEFT 64.0
#define RIGHT 170.0   /* room for the legend */
#define TOP 34.0
#define BOTTOM 46.0

static const char *const palette[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd",
                                      "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};

typedef struct { double lo, hi, step; int decimals; } scale;

/* Round ticks: a step of 1, 2 or 5 x 10^k giving about 5 intervals over [lo, hi]. */
static scale make_scale(double lo, double hi) {
    if (!(hi > lo)) {
        double pad = fabs(lo) > 0 ? fabs(lo) * 0.05 : 0.5;
        lo -= pad;
        hi += pad;
    }
    double raw = (hi - lo) / 5, mag = pow(10, floor(log10(raw))), f = raw / mag;
    double step = (f < 1.5 ? 1 : f < 3 ? 2 : f < 7 ? 5 : 10) * mag;
    scale s = {floor(lo / step) * step, ceil(hi / step) * step, step, 0};
    int d = (int)-floor(log10(step) + 1e-9);
    s.decimals = d > 0 ? d : 0;
    return s;
}

static double px(const scale *s, double v) { return LEFT + (v - s->lo) / (s->hi - s->lo) * (W - LEFT - RIGHT); }
static double py(const scale *s, double v) { return H - BOTTOM - (v - s->lo) / (s->hi - s->lo) * (H - TOP - BOTTOM); }

static int data_range(const nbx_series *s, int n, double *xlo, double *xhi, double *ylo, double *yhi) {
    int any = 0;
    *xlo = *ylo = INFINITY;
    *xhi = *yhi = -INFINITY;
    for (int k = 0; k < n; k++)
        for (int i = 0; i < s[k].n; i++) {
            if (!isfinite(s[k].x[i]) || !isfinite(s[k].y[i])) continue;
            any = 1;
            *xlo = fmin(*xlo, s[k].x[i]); *xhi = fmax(*xhi, s[k].x[i]);
            *ylo = fmin(*ylo, s[k].y[i]); *yhi = fmax(*yhi, s[k].y[i]);
        }
    return any;
}

static int axes(nb_buf *b, const scale *x, const scale *y, const char *xlabel, const char *ylabel) {
    int rc = 0;
    for (double v = y->lo; v <= y->hi + y->step * 1e-6 && !rc; v += y->step)
        rc = nb_buf_printf(b, "<line class=\"grid\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>"
                               "<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\" text-anchor=\"end\">%.*f</text>\n",
                             LEFT, py(y, v), W - RIGHT, py(y, v), LEFT - 5, py(y, v) + 4, y->decimals, v);
    for (double v = x->lo; v <= x->hi + x->step * 1e-6 && !rc; v += x->step)
        rc = nb_buf_printf(b, "<line class=\"grid\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#eee\"/>"
                               "<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\" text-anchor=\"middle\">%.*f</text>\n",
                             px(x, v), TOP, px(x, v), H - BOTTOM, px(x, v), H - BOTTOM + 15, x->decimals, v);
    if (!rc) rc = nb_buf_printf(b, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"none\" stroke=\"#333\"/>\n",
                                 LEFT, TOP, W - LEFT - RIGHT, H - TOP - BOTTOM);
    if (!rc) rc = nb_buf_printf(b, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"12\" text-anchor=\"middle\">", (LEFT + W - RIGHT) / 2, H - 8);
    if (!rc) rc = nbx_html(b, xlabel) || nb_buf_printf(b, "</text>\n");
    if (!rc) rc = nb_buf_printf(b, "<text x=\"14\" y=\"%.1f\" font-size=\"12\" text-anchor=\"middle\" "
                                    "transform=\"rotate(-90 14 %.1f)\">", (TOP + H - BOTTOM) / 2, (TOP + H - BOTTOM) / 2);
    if (!rc) rc = nbx_html(b, ylabel) || nb_buf_printf(b, "</text>\n");
    return rc;
}

/* One series as a path (a NAN or infinite point starts a new piece) with a dot per point. */
static int series(nb_buf *b, const nbx_series *s, const scale *x, const scale *y, int k) {
    const char *color = palette[s->color % (int)(sizeof palette / sizeof palette[0])];
    if (nb_buf_printf(b, "<path class=\"series\" data-series=\"") || nbx_html(b, s->name) ||
        nb_buf_printf(b, "\" fill=\"none\" stroke=\"%s\" stroke-width=\"1.8\" d=\"", color))
        return -1;
    int pen = 0;
    for (int i = 0; i < s->n; i++) {
        if (!isfinite(s->x[i]) || !isfinite(s->y[i])) { pen = 0; continue; }
        if (nb_buf_printf(b, "%c%.1f %.1f ", pen ? 'L' : 'M', px(x, s->x[i]), py(y, s->y[i]))) return -1;
        pen = 1;
    }
    if (nb_buf_printf(b, "\"/>\n")) return -1;
    for (int i = 0; i < s->n && s->n <= 60; i++)
        if (isfinite(s->x[i]) && isfinite(s->y[i]) &&
            nb_buf_printf(b, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"2.2\" fill=\"%s\"/>", px(x, s->x[i]), py(y, s->y[i]), color))
            return -1;
    double ly = TOP + 8 + 16 * k;
    if (nb_buf_printf(b, "\n<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" stroke-width=\"2.5\"/>"
                          "<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\">", W - RIGHT + 10, ly, W - RIGHT + 28, ly, color,
                       W - RIGHT + 33, ly + 4))
        return -1;
    return nbx_html(b, s->name) || nb_buf_printf(b, "</text>\n");
}

int nbx_svg_chart(nb_buf *b, const char *id, const char *cls, const char *title, const char *xlabel,
                  const char *ylabel, const nbx_series *s, int n_series) {
    if (nb_buf_printf(b, "<svg xmlns=\"http://www.w3.org/2000/svg\" id=\"") || nbx_html(b, id) ||
        nb_buf_printf(b, "\" class=\"chart %s\" width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" "
                          "font-family=\"sans-serif\">\n<title>", cls, W, H, W, H) ||
        nbx_html(b, title) || nb_buf_printf(b, "</title>\n<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n"
                                                "<text x=\"%.1f\" y=\"20\" font-size=\"14\" font-weight=\"bold\">", LEFT) ||
        nbx_html(b, title) || nb_buf_printf(b, "</text>\n"))
        return -1;
    double xlo, xhi, ylo, yhi;
    if (!data_range(s, n_series, &xlo, &xhi, &ylo, &yhi))
        return nb_buf_printf(b, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"13\">no data</text>\n</svg>\n", LEFT, H / 2);
    scale x = make_scale(xlo, xhi), y = make_scale(ylo, yhi);
    if (axes(b, &x, &y, xlabel, ylabel)) return -1;
    for (int k = 0; k < n_series; k++)
        if (series(b, &s[k], &x, &y, k)) return -1;
    return nb_buf_printf(b, "</svg>\n");
}
