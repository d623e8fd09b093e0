/* Muon on matrix tensors: m = mu m + (1-mu) g; G = nesterov ? (1-mu) g + mu m : m;
 * X = G/(||G||_F + 1e-7) on the wide orientation (transposed when rows > cols); ns_steps times
 * A = X X^T, B = b A + c A A, X = a X + B X with (a, b, c) = (3.4445, -4.7750, 2.0315);
 * transposed back; d = lr sqrt(max(1, rows/cols)) X + lr wd w.
 *
 * How it is computed (the same products, cheaper): a tall X (rows > cols) is never transposed: its
 * iteration is A = X^T X, X = a X + X B, which is the wide one transposed. X X^T and A A (A is
 * symmetric) are symmetric products, so nb_syrk computes only their upper triangle (row panels: 5/8
 * of a GEMM's flops at r = 512); a is added to B's diagonal so that X = (a I + B) X is one GEMM; X and
 * its successor swap buffers instead of being copied. Under bf16 (nb_optimizer_set_precision) the three
 * products take bf16 operands (X, A and a I + B rounded to bf16) and accumulate in fp32; b A, the
 * diagonal and X stay fp32. */
#include <math.h>
#include <string.h>
#include "backend/backend.h"
#include "optim/rules.h"

static const float NS_A = MUON_NS_A, NS_B = MUON_NS_B, NS_C = MUON_NS_C;

/* One matrix of the iteration: X is rows x cols as stored; r = min(rows, cols) is the side of A and B. */
typedef struct {
    const nb_backend *be;
    int rows, cols, r, tall;
    int bf16;
    nb_bf16 *hx, *hs;  /* bf16 copies of X (rows x cols) and of an r x r block, under bf16 */
} ns_matrix;

/* A = X X^T (wide) or X^T X (tall). */
static void ns_gram(const ns_matrix *m, const float *X, float *A) {
    const int k = m->tall ? m->rows : m->cols;
    if (!m->bf16) {
        nb_syrk(m->be, m->tall, m->r, k, 1.0f, X, m->cols, 0.0f, A, m->r);
        return;
    }
    nb_bf16_cast(m->hx, X, (size_t)m->rows * m->cols);
    nb_syrk_bf16(m->be, m->tall, m->r, k, 1.0f, m->hx, m->cols, 0.0f, A, m->r);
}

/* B = a I + b A + c A A (A A = A A^T: A is symmetric). */
static void ns_polynomial(const ns_matrix *m, const float *A, float *B) {
    const int r = m->r;
    memcpy(B, A, sizeof(float) * (size_t)r * r);
    if (m->bf16) {
        nb_bf16_cast(m->hs, A, (size_t)r * r);
        nb_syrk_bf16(m->be, 0, r, r, NS_C, m->hs, r, NS_B, B, r);
    } else {
        nb_syrk(m->be, 0, r, r, NS_C, A, r, NS_B, B, r);
    }
    for (int i = 0; i < r; i++) B[(size_t)i * r + i] += NS_A;
}

/* Xn = B X (wide) or X B (tall). Under bf16, X's bf16 copy is the one ns_gram made. */
static void ns_apply(const ns_matrix *m, const float *B, const float *X, float *Xn) {
    const int rows = m->rows, cols = m->cols, r = m->r;
    if (!m->bf16) {
        if (m->tall) nb_gemm(m->be, 0, 0, rows, cols, r, 1.0f, X, cols, B, r, 0.0f, Xn, cols);
        else nb_gemm(m->be, 0, 0, rows, cols, r, 1.0f, B, r, X, cols, 0.0f, Xn, cols);
        return;
    }
    nb_bf16_cast(m->hs, B, (size_t)r * r);
    if (m->tall) nb_gemm_bf16(m->be, 0, 0, rows, cols, r, 1.0f, m->hx, cols, m->hs, r, 0.0f, Xn, cols);
    else nb_gemm_bf16(m->be, 0, 0, rows, cols, r, 1.0f, m->hs, r, m->hx, cols, 0.0f, Xn, cols);
}

/* X's Newton-Schulz orthogonalization, using Xn (the size of X) and A, B (r x r each) as scratch;
 * returns the buffer holding the result (X or Xn). */
static float *newton_schulz(const ns_matrix *m, float *X, float *Xn, float *A, float *B, int steps) {
    for (int s = 0; s < steps; s++) {
        ns_gram(m, X, A);
        ns_polynomial(m, A, B);
        ns_apply(m, B, X, Xn);
        float *next = Xn;
        Xn = X;
        X = next;
    }
    return X;
}

/* Muon's momentum and its Newton-Schulz orthogonalization O (the sheet's X, before the lr and shape
 * scale), shared by Muon and NorMuon. Advances m (ts->buf[0]); returns O in the weight's own
 * orientation (rows x cols, as stored) in scratch SCRATCH_MATRIX or SCRATCH_NEXT_MATRIX, valid until
 * the next rule step on this scratch. */
const float *muon_orthogonalize(tensor_state *ts, const rule_ctx *c, const float *g) {
    const nb_tensor *t = ts->t;
    const float mu = c->p->momentum;
    const int rows = t->shape[0], cols = t->shape[1], tall = rows > cols, r = tall ? cols : rows;
    const size_t n = t->numel;
    float *m = ts->buf[0], *X = c->s->f[SCRATCH_MATRIX];
    double sq = 0.0;
    for (size_t i = 0; i < n; i++) {
        m[i] = mu * m[i] + (1.0f - mu) * g[i];
        X[i] = c->p->nesterov ? (1.0f - mu) * g[i] + mu * m[i] : m[i];
        sq += (double)X[i] * X[i];
    }
    const float inv = (float)(1.0 / (sqrt(sq) + 1e-7));
    for (size_t i = 0; i < n; i++) X[i] *= inv;
    const ns_matrix mat = {c->be, rows, cols, r, tall, c->bf16, c->s->h, c->s->h + n};
    float *A = c->s->f[SCRATCH_GRAM], *B = A + (size_t)r * r;
    return newton_schulz(&mat, X, c->s->f[SCRATCH_NEXT_MATRIX], A, B, c->p->ns_steps);
}

/* lr sqrt(max(1, rows/cols)): Muon's and NorMuon's scale of an orthogonalized step. */
float muon_shape_scale(const nb_tensor *t, float lr) {
    return lr * sqrtf(fmaxf(1.0f, (float)t->shape[0] / (float)t->shape[1]));
}

static int muon_step(tensor_state *ts, const rule_ctx *c, const float *g, const float *w, float *d) {
    const float *O = muon_orthogonalize(ts, c, g);
    const float scale = muon_shape_scale(ts->t, c->lr), lr = c->lr, wd = decay_of(ts->t, c->p);
    for (size_t i = 0; i < ts->t->numel; i++) d[i] = scale * O[i] + lr * wd * w[i];
    ts->count++;
    return 0;
}

const nb_optim_rule muon_rule = {
    .step = muon_step, .buffers = {{"m", STATE_PER_VALUE}}, .matrices_only = 1, .per_matrix = 1,
};
