/* Muon on matrix tensors: m = mu m + (1-mu) g; G = nesterov ? (1-mu) g + mu m : m;
 * X = G/(||G||_F + 1e-7) on the wide orientation (transposed when rows > cols); ns_steps times
 * A = X X^T, B = b A + c A A, X = a X + B X with (a, b, c) = (3.4445, -4.7750, 2.0315);
 * transposed back; d = lr sqrt(max(1, rows/cols)) X + lr wd w. The products go through nb_gemm. */
#include <math.h>
#include <string.h>
#include "backend/gemm.h"
#include "optim/rules.h"

static const float NS_A = 3.4445f, NS_B = -4.7750f, NS_C = 2.0315f;

/* X (r x k, r <= k) <- its Newton-Schulz orthogonalization, using scratch Xn (r x k), A and B (r x r). */
static void newton_schulz(float *X, float *Xn, float *A, float *B, int r, int k, int steps) {
    for (int s = 0; s < steps; s++) {
        nb_gemm(0, 1, r, r, k, 1.0f, X, k, X, k, 0.0f, A, r);          /* A = X X^T */
        for (size_t i = 0; i < (size_t)r * r; i++) B[i] = NS_B * A[i];
        nb_gemm(0, 0, r, r, r, NS_C, A, r, A, r, 1.0f, B, r);            /* B = b A + c A A */
        for (size_t i = 0; i < (size_t)r * k; i++) Xn[i] = NS_A * X[i];
        nb_gemm(0, 0, r, k, r, 1.0f, B, r, X, k, 1.0f, Xn, k);           /* X = a X + B X */
        memcpy(X, Xn, sizeof(float) * (size_t)r * k);
    }
}

/* Muon's momentum and its Newton-Schulz orthogonalization O (the sheet's X, before the lr and shape
 * scale), shared by Muon and NorMuon. Advances m (ts->buf[0]); returns O in the weight's own
 * orientation (rows x cols, as stored) in scratch f[0], valid until the next rule step on this scratch. */
const float *muon_orthogonalize(tensor_state *ts, const rule_ctx *c, const float *g) {
    const nb_tensor *t = ts->t;
    const float mu = c->p->momentum;
    const int rows = t->shape[0], cols = t->shape[1], tall = rows > cols;
    const int r = tall ? cols : rows, k = tall ? rows : cols;
    const size_t n = t->numel;
    float *m = ts->buf[0], *G = c->s->f[0], *X = c->s->f[1];
    double sq = 0.0;
    for (size_t i = 0; i < n; i++) {
        m[i] = mu * m[i] + (1.0f - mu) * g[i];
        G[i] = c->p->nesterov ? (1.0f - mu) * g[i] + mu * m[i] : m[i];
        sq += (double)G[i] * G[i];
    }
    const float inv = (float)(1.0 / (sqrt(sq) + 1e-7));
    if (tall) {
        for (int i = 0; i < rows; i++)
            for (int j = 0; j < cols; j++) X[(size_t)j * rows + i] = G[(size_t)i * cols + j] * inv;
    } else {
        for (size_t i = 0; i < n; i++) X[i] = G[i] * inv;
    }
    newton_schulz(X, c->s->f[2], c->s->f[3], c->s->f[3] + (size_t)r * r, r, k, c->p->ns_steps);
    float *O = G;  /* G is no longer needed: O takes its place, transposed back when tall */
    if (tall) {
        for (int i = 0; i < rows; i++)
            for (int j = 0; j < cols; j++) O[(size_t)i * cols + j] = X[(size_t)j * rows + i];
    } else {
        memcpy(O, X, sizeof(float) * n);
    }
    return O;
}

/* lr sqrt(max(1, rows/cols)): Muon's and NorMuon's scale of an orthogonalized step. */
float muon_shape_scale(const nb_tensor *t, float lr) {
    return lr * sqrtf(fmaxf(1.0f, (float)t->shape[0] / (float)t->shape[1]));
}

void muon_step(tensor_state *ts, const rule_ctx *c, const float *g, const float *w, float *d) {
    const float *O = muon_orthogonalize(ts, c, g);
    const float scale = muon_shape_scale(ts->t, c->lr), lr = c->lr, wd = decay_of(ts->t, c->p);
    for (size_t i = 0; i < ts->t->numel; i++) d[i] = scale * O[i] + lr * wd * w[i];
    ts->count++;
}
