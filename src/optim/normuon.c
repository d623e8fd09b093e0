/* NorMuon on matrix tensors: Muon's momentum and Newton-Schulz give O (muon_orthogonalize); then a
 * per-neuron second moment, one float per row of the weight as stored (out x in):
 * r_i = mean_j O_ij^2; s = b2 s + (1-b2) r (from 0, no bias correction); O'_ij = O_ij/(sqrt(s_i) + 1e-10);
 * O'' = O' ||O||_F / (||O'||_F + 1e-10), so the rows are rebalanced without changing the step's norm;
 * d = lr sqrt(max(1, rows/cols)) O'' + lr wd w. b2 is the optimizer's beta2. */
#include <math.h>
#include "optim/rules.h"

#define NORMUON_EPS 1e-10f

/* Advances s from O's rows and writes 1/(sqrt(s_i) + eps) per row into inv; returns
 * ||O||_F / (||O'||_F + eps), with O' = O scaled by inv row by row. */
static float normalize_rows(const float *O, float *s, float *inv, int rows, int cols, float b2) {
    double o_sq = 0.0, scaled_sq = 0.0;
    for (int i = 0; i < rows; i++) {
        double row_sq = 0.0;
        for (int j = 0; j < cols; j++) row_sq += (double)O[(size_t)i * cols + j] * O[(size_t)i * cols + j];
        s[i] = b2 * s[i] + (1.0f - b2) * (float)(row_sq / cols);
        inv[i] = 1.0f / (sqrtf(s[i]) + NORMUON_EPS);
        o_sq += row_sq;
        scaled_sq += row_sq * (double)inv[i] * inv[i];
    }
    return (float)(sqrt(o_sq) / (sqrt(scaled_sq) + NORMUON_EPS));
}

static int normuon_step(tensor_state *ts, const rule_ctx *c, const float *g, const float *w, float *d) {
    const nb_tensor *t = ts->t;
    const int rows = t->shape[0], cols = t->shape[1];
    const float *O = muon_orthogonalize(ts, c, g);
    float *inv = c->s->f[SCRATCH_MATRIX_OR_PRECOND];  /* one float per row; the orthogonalization leaves it free */
    const float norm_ratio = normalize_rows(O, ts->buf[1], inv, rows, cols, c->p->beta2);
    const float scale = muon_shape_scale(t, c->lr), lr = c->lr, wd = decay_of(t, c->p);
    for (int i = 0; i < rows; i++)
        for (int j = 0; j < cols; j++) {
            size_t at = (size_t)i * cols + j;
            d[at] = scale * (O[at] * inv[i] * norm_ratio) + lr * wd * w[at];
        }
    ts->count++;
    return 0;
}

/* Muon's momentum m, and s, one second moment per row. */
const nb_optim_rule normuon_rule = {
    .step = normuon_step,
    .buffers = {{"m", STATE_PER_VALUE}, {"s", STATE_PER_ROW}},
    .matrices_only = 1,
    .per_matrix = 1,
};
