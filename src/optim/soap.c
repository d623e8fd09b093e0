/* SOAP on matrix tensors (docs/rules.md, with the project's conventions in docs/optimizers.md):
 * keep L = b2 L + (1-b2) G G^T and R = b2 R + (1-b2) G^T G and their eigenbases QL, QR; run
 * AdamW on G' = QL^T G QR with moments in that basis, and map the step back with QL (.) QR^T.
 * The first step computes L, R and a full eigen-decomposition and returns d = 0. Afterwards L
 * and R are updated after each step, and every precond_every steps the bases are refreshed by
 * one power iteration and a QR: Q <- qr(L Q). A side larger than max_precond_dim keeps the
 * identity. Eigenvectors and QR are made canonical (largest entry positive; diag(R) > 0). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "backend/backend.h"
#include "optim/rules.h"
#include "util/alloc.h"
#include "util/linalg.h"

/* buffers: 0 m, 1 v, 2 L, 3 R, 4 QL, 5 QR (L, QL absent when the left side is not preconditioned) */
enum { M_, V_, L_, R_, QL_, QR_ };

/* Whether a side is preconditioned: its buffers exist (a side longer than max_precond_dim has none). */
static int has_left(const tensor_state *ts) { return ts->buf_len[L_] > 0; }
static int has_right(const tensor_state *ts) { return ts->buf_len[R_] > 0; }

/* Q <- eigenvectors of S (n x n float), through double. */
static int eigenbasis(const float *S, float *Q, int n, double *a, double *q) {
    double *w = nb_alloc(sizeof(double) * (size_t)n, "SOAP's eigenvalues");
    if (!w) return -1;
    for (size_t i = 0; i < (size_t)n * n; i++) a[i] = S[i];
    int rc = nb_sym_eig(n, a, q, w);
    for (size_t i = 0; i < (size_t)n * n && !rc; i++) Q[i] = (float)q[i];
    free(w);
    return rc;
}

/* Q <- qr(S Q), through double. tmp: n x n floats. */
static int refresh(const nb_backend *be, const float *S, float *Q, int n, float *tmp, double *a, double *q) {
    nb_gemm(be, 0, 0, n, n, n, 1.0f, S, n, Q, n, 0.0f, tmp, n);
    for (size_t i = 0; i < (size_t)n * n; i++) a[i] = tmp[i];
    if (nb_qr_q(n, a, q)) return -1;
    for (size_t i = 0; i < (size_t)n * n; i++) Q[i] = (float)q[i];
    return 0;
}

/* L = beta L + (1-beta) G G^T and/or R = beta R + (1-beta) G^T G (beta = 0 at the first step). */
static void accumulate(const nb_backend *be, tensor_state *ts, const float *G, int rows, int cols, float beta, float b2) {
    if (has_left(ts)) nb_gemm(be, 0, 1, rows, rows, cols, 1.0f - b2, G, cols, G, cols, beta, ts->buf[L_], rows);
    if (has_right(ts)) nb_gemm(be, 1, 0, cols, cols, rows, 1.0f - b2, G, cols, G, cols, beta, ts->buf[R_], cols);
}

static int soap_step(tensor_state *ts, const rule_ctx *c, const float *g, const float *w, float *d) {
    const nb_tensor *t = ts->t;
    const int rows = t->shape[0], cols = t->shape[1];
    const size_t n = t->numel;
    const float b1 = c->p->beta1, b2 = c->p->beta2, eps = c->p->eps, lr = c->lr, wd = decay_of(t, c->p);
    float *P = c->s->f[SCRATCH_MATRIX], *T = c->s->f[SCRATCH_MATRIX_OR_PRECOND];
    double *da = c->s->d[SCRATCH_EIG_A], *dq = c->s->d[SCRATCH_EIG_Q];
    const nb_backend *be = c->be;
    if (c->step == 0) {
        accumulate(c->be, ts, g, rows, cols, 0.0f, b2);
        if (has_left(ts) && eigenbasis(ts->buf[L_], ts->buf[QL_], rows, da, dq)) return -1;
        if (has_right(ts) && eigenbasis(ts->buf[R_], ts->buf[QR_], cols, da, dq)) return -1;
        memset(d, 0, sizeof(float) * n);
        return 0;
    }
    /* G' = QL^T G QR */
    const float *src = g;
    if (has_left(ts)) {
        nb_gemm(be, 1, 0, rows, cols, rows, 1.0f, ts->buf[QL_], rows, src, cols, 0.0f, T, cols);
        src = T;
    }
    if (has_right(ts)) nb_gemm(be, 0, 0, rows, cols, cols, 1.0f, src, cols, ts->buf[QR_], cols, 0.0f, P, cols);
    else memcpy(P, src, sizeof(float) * n);
    /* AdamW in the eigenbasis; N overwrites P */
    const float c1 = 1.0f - (float)pow(b1, (double)(ts->count + 1));
    const float c2 = 1.0f - (float)pow(b2, (double)(ts->count + 1));
    float *m = ts->buf[M_], *v = ts->buf[V_];
#pragma omp parallel for simd schedule(static) if (n > PAR_MIN)
    for (size_t i = 0; i < n; i++) {
        m[i] = b1 * m[i] + (1.0f - b1) * P[i];
        v[i] = b2 * v[i] + (1.0f - b2) * P[i] * P[i];
        P[i] = (m[i] / c1) / (sqrtf(v[i] / c2) + eps);
    }
    ts->count++;
    /* back: QL N QR^T */
    src = P;
    if (has_left(ts)) {
        nb_gemm(be, 0, 0, rows, cols, rows, 1.0f, ts->buf[QL_], rows, src, cols, 0.0f, T, cols);
        src = T;
    }
    float *back = src == T ? P : T;
    if (has_right(ts)) nb_gemm(be, 0, 1, rows, cols, cols, 1.0f, src, cols, ts->buf[QR_], cols, 0.0f, back, cols);
    else back = (float *)src;
    for (size_t i = 0; i < n; i++) d[i] = lr * back[i] + lr * wd * w[i];
    /* then the preconditioner statistics, and a refresh of the bases */
    accumulate(c->be, ts, g, rows, cols, b2, b2);
    if (c->step % c->p->precond_every == 0) {
        if (has_left(ts) && refresh(c->be, ts->buf[L_], ts->buf[QL_], rows, T, da, dq)) return -1;
        if (has_right(ts) && refresh(c->be, ts->buf[R_], ts->buf[QR_], cols, T, da, dq)) return -1;
    }
    return 0;
}

/* In the order of the enum above: the moments, then each side's statistics and eigenbasis. */
const nb_optim_rule soap_rule = {
    .step = soap_step,
    .buffers = {{"m", STATE_PER_VALUE}, {"v", STATE_PER_VALUE}, {"L", STATE_PRECOND_LEFT}, {"R", STATE_PRECOND_RIGHT},
                {"QL", STATE_PRECOND_LEFT}, {"QR", STATE_PRECOND_RIGHT}},
    .matrices_only = 1,
    .per_matrix = 1,
};
