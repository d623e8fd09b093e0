/* The mixture-of-experts feed-forward block: moe.h has the rule. */
#include "layers/moe.h"
#include <math.h>
#include <string.h>
#include "util/fastmath.h"
#include "layers/layers.h"
#include "util/error.h"

int moe_check(const moe_dims *m) {
    if (m->E < 1) return nb_fail("n_experts = %d: expected at least 1", m->E);
    if (m->k < 1 || m->k > m->E || m->k > MOE_MAX_K)
        return nb_fail("experts_per_token = %d: expected 1 to n_experts (%d), at most %d", m->k, m->E, MOE_MAX_K);
    if (m->N < 1 || m->d < 1 || m->F < 1) return nb_fail("MoE block of %d tokens, width %d, expert width %d: expected >= 1",
                                                          m->N, m->d, m->F);
    return 0;
}

/* Carves n items of `size` bytes, 64-byte aligned, from *at (NULL base: only counts). */
static void *carve(char *base, size_t *at, size_t n, size_t size) {
    void *p = base ? base + *at : NULL;
    *at += (n * size + 63) / 64 * 64;
    return p;
}

/* Under bf16 each expert's rows start at a multiple of MOE_ROW_ALIGN (moe.h) and its products run on its row count
 * rounded up to one (the extra rows zero): oneDNN makes a primitive per product shape, and an expert's
 * row count changes every step; rounded, the shapes repeat and the primitives are reused instead of made
 * anew (about 190 a step on moe-tiny otherwise, which cost more than the products). Zero rows add exact
 * zeros to the weight gradients' sums. */
static int rows_of(const moe_dims *m, int count) {
    return m->bf16 ? (count + MOE_ROW_ALIGN - 1) / MOE_ROW_ALIGN * MOE_ROW_ALIGN : count;
}

/* Grouped rows at most. */
static size_t max_rows(const moe_dims *m) {
    return (size_t)m->N * (size_t)m->k + (m->bf16 ? (size_t)m->E * (MOE_ROW_ALIGN - 1) : 0);
}

/* The arrays a backward reads (kept from the forward). */
static size_t layout(moe_state *s, char *base) {
    const moe_dims m = s->m;
    const size_t N = (size_t)m.N, E = (size_t)m.E, d = (size_t)m.d, F = (size_t)m.F, R = max_rows(&m);
    const size_t f32 = !m.bf16, b16 = !f32;  /* which copy of the grouped rows is kept */
    size_t at = 0;
    s->probs = carve(base, &at, N * E, sizeof(float));
    s->top = carve(base, &at, N * (size_t)m.k, sizeof(int));
    s->weight = carve(base, &at, N * (size_t)m.k, sizeof(float));
    s->count = carve(base, &at, E, sizeof(int));
    s->start = carve(base, &at, E + 1, sizeof(int));
    s->row_token = carve(base, &at, R, sizeof(int));
    s->slot_row = carve(base, &at, N * (size_t)m.k, sizeof(int));
    s->xg = f32 ? carve(base, &at, R * d, sizeof(float)) : NULL;
    s->gu = f32 ? carve(base, &at, R * 2 * F, sizeof(float)) : NULL;
    s->h = f32 ? carve(base, &at, R * F, sizeof(float)) : NULL;
    s->xg16 = b16 ? carve(base, &at, R * d, sizeof(nb_bf16)) : NULL;
    s->gu16 = b16 ? carve(base, &at, R * 2 * F, sizeof(nb_bf16)) : NULL;
    s->h16 = b16 ? carve(base, &at, R * F, sizeof(nb_bf16)) : NULL;
    s->y = carve(base, &at, R * d, sizeof(float));
    return at;
}

/* What a pass needs only while it runs. */
static size_t layout_scratch(moe_state *s, char *base) {
    const moe_dims m = s->m;
    const size_t N = (size_t)m.N, E = (size_t)m.E, d = (size_t)m.d, F = (size_t)m.F, R = max_rows(&m);
    const size_t widest = d > 2 * F ? d : 2 * F, op = R * widest > N * E ? R * widest : N * E;
    size_t at = 0;
    s->dy = carve(base, &at, R * d, sizeof(float));
    s->dh = carve(base, &at, R * F, sizeof(float));
    s->dgu = carve(base, &at, R * 2 * F, sizeof(float));
    s->dxg = carve(base, &at, R * d, sizeof(float));
    s->dp = carve(base, &at, N * E, sizeof(float));
    s->op16 = m.bf16 ? carve(base, &at, op, sizeof(nb_bf16)) : NULL;
    return at;
}

size_t moe_state_bytes(const moe_dims *m) {
    moe_state s = {.m = *m};
    return layout(&s, NULL);
}

size_t moe_scratch_bytes(const moe_dims *m) {
    moe_state s = {.m = *m};
    return layout_scratch(&s, NULL);
}

void moe_state_bind(moe_state *s, const moe_dims *m, void *memory) {
    s->m = *m;
    s->memory = memory;
    layout(s, memory);
}

void moe_scratch_bind(moe_state *s, void *scratch) { layout_scratch(s, scratch); }

moe_state *moe_state_create(const nb_backend *be, const moe_dims *m) {
    if (moe_check(m)) return NULL;
    moe_state *s = nb_backend_alloc(be, sizeof *s, "a MoE block's state");
    if (!s) return NULL;
    const size_t kept = moe_state_bytes(m);
    void *memory = nb_backend_alloc(be, kept + moe_scratch_bytes(m), "a MoE block's activations");
    if (!memory) {
        nb_backend_free(be, s);
        return NULL;
    }
    moe_state_bind(s, m, memory);
    moe_scratch_bind(s, (char *)memory + kept);  /* kept is a multiple of 64 */
    return s;
}

void moe_state_free(const nb_backend *be, moe_state *s) {
    if (!s) return;
    nb_backend_free(be, s->memory);
    nb_backend_free(be, s);
}

/* probs = softmax(probs) row by row, in fp32. */
static void softmax_rows(float *p, int N, int E) {
#pragma omp parallel for schedule(static)
    for (int t = 0; t < N; t++) {
        float *z = p + (size_t)t * E, mx = z[0], sum = 0.0f;
        for (int e = 1; e < E; e++) mx = z[e] > mx ? z[e] : mx;
        for (int e = 0; e < E; e++) sum += (z[e] = nb_expf(z[e] - mx));
        for (int e = 0; e < E; e++) z[e] /= sum;
    }
}

/* Each token's k experts (largest p first, ties to the lower index) and their renormalized weights. */
static void route(moe_state *s) {
    const moe_dims m = s->m;
#pragma omp parallel for schedule(static)
    for (int t = 0; t < m.N; t++) {
        const float *p = s->probs + (size_t)t * m.E;
        int *top = s->top + (size_t)t * m.k;
        float *w = s->weight + (size_t)t * m.k, sum = 0.0f;
        for (int j = 0; j < m.k; j++) {
            int best = -1;
            for (int e = 0; e < m.E; e++) {
                int taken = 0;
                for (int i = 0; i < j; i++) taken |= top[i] == e;
                if (!taken && (best < 0 || p[e] > p[best])) best = e;
            }
            top[j] = best;
            sum += p[best];
        }
        for (int j = 0; j < m.k; j++) w[j] = p[top[j]] / sum;
    }
}

/* Rows grouped by expert, each expert's rows in token order (a serial scan: the same for any thread count);
 * under bf16 an expert's rows past its count (rows_of) belong to no token (row_token -1). */
static void group(moe_state *s) {
    const moe_dims m = s->m;
    memset(s->count, 0, sizeof(int) * (size_t)m.E);
    for (size_t r = 0; r < (size_t)m.N * m.k; r++) s->count[s->top[r]]++;
    s->start[0] = 0;
    for (int e = 0; e < m.E; e++) {
        s->start[e + 1] = s->start[e] + rows_of(&m, s->count[e]);
        for (int r = s->start[e] + s->count[e]; r < s->start[e + 1]; r++) s->row_token[r] = -1;
    }
    int *next = (int *)s->dp;  /* dp is free until the backward: a cursor per expert */
    for (int e = 0; e < m.E; e++) next[e] = s->start[e];
    for (int t = 0; t < m.N; t++)
        for (int j = 0; j < m.k; j++) {
            const int row = next[s->top[(size_t)t * m.k + j]]++;
            s->row_token[row] = t;
            s->slot_row[(size_t)t * m.k + j] = row;
        }
}

/* Each grouped row's copy of its token's input (rows of row_bytes: float or bf16), zeros in a row of no
 * token. */
static void gather_rows(void *xg, const void *x, const int *row_token, int R, size_t row_bytes) {
#pragma omp parallel for schedule(static)
    for (int r = 0; r < R; r++) {
        char *dst = (char *)xg + (size_t)r * row_bytes;
        if (row_token[r] < 0) memset(dst, 0, row_bytes);
        else memcpy(dst, (const char *)x + (size_t)row_token[r] * row_bytes, row_bytes);
    }
}

/* The load-balancing loss and each expert's share of the assignments. */
static void balance(moe_state *s, float *load) {
    const moe_dims m = s->m;
    double aux = 0.0;
    for (int e = 0; e < m.E; e++) {
        double P = 0.0;
        for (int t = 0; t < m.N; t++) P += s->probs[(size_t)t * m.E + e];
        aux += ((double)s->count[e] / m.N) * (P / m.N);
        if (load) load[e] = (float)((double)s->count[e] / ((double)m.N * m.k));
    }
    s->aux = m.E * aux;
}

/* From the router's logits in s->probs: the probabilities, each token's experts and weights, the grouping,
 * and the grouped rows' inputs xg (rows of row_bytes) gathered from x. */
static void route_tokens(moe_state *s, void *xg, const void *x, size_t row_bytes) {
    const double t0 = nb_routing_begin();
    softmax_rows(s->probs, s->m.N, s->m.E);
    route(s);
    group(s);
    gather_rows(xg, x, s->row_token, s->start[s->m.E], row_bytes);
    nb_routing_end(t0);
}

/* out[t] += each of token t's grouped rows (d wide), times its weight where `weighted`, in slot order. */
static void add_rows(const moe_state *s, float *out, const float *rows, int weighted) {
    const moe_dims m = s->m;
    const size_t d = (size_t)m.d;
    const double t0 = nb_routing_begin();
#pragma omp parallel for schedule(static)
    for (int t = 0; t < m.N; t++)
        for (int j = 0; j < m.k; j++) {
            const float w = weighted ? s->weight[(size_t)t * m.k + j] : 1.0f;  /* 1 x g is g exactly */
            const float *r = rows + (size_t)s->slot_row[(size_t)t * m.k + j] * d;
            float *o = out + (size_t)t * d;
            for (size_t i = 0; i < d; i++) o[i] += w * r[i];
        }
    nb_routing_end(t0);
}

/* out += each token's experts' outputs (s->y) weighted; then the balance statistics. */
static void combine(moe_state *s, float *out, float *load) {
    add_rows(s, out, s->y, 1);
    const double t0 = nb_routing_begin();
    balance(s, load);
    nb_routing_end(t0);
}

void moe_forward(const nb_backend *be, moe_state *s, float *out, const float *x, const float *w_router,
                 const float *w_gu, const float *w_down, float *load) {
    const moe_dims m = s->m;
    const size_t d = (size_t)m.d, F = (size_t)m.F;
    linear_forward(be, s->probs, 0.0f, x, w_router, m.N, m.d, m.E);
    route_tokens(s, s->xg, x, sizeof(float) * d);
    for (int e = 0; e < m.E; e++) {
        const int n = s->count[e];
        if (!n) continue;
        const size_t r0 = (size_t)s->start[e];
        linear_forward(be, s->gu + r0 * 2 * F, 0.0f, s->xg + r0 * d, w_gu + (size_t)e * 2 * F * d, n, m.d, 2 * m.F);
        swiglu_forward(s->h + r0 * F, s->gu + r0 * 2 * F, n, m.F);
        linear_forward(be, s->y + r0 * d, 0.0f, s->h + r0 * F, w_down + (size_t)e * d * F, n, m.F, m.d);
    }
    combine(s, out, load);
}

void moe_forward_bf16(const nb_backend *be, moe_state *s, float *out, const nb_bf16 *x, const nb_bf16 *w_router,
                      const nb_bf16 *w_gu, const nb_bf16 *w_down, float *load) {
    const moe_dims m = s->m;
    const size_t d = (size_t)m.d, F = (size_t)m.F;
    linear_forward_bf16(be, s->probs, 0.0f, x, w_router, m.N, m.d, m.E);
    route_tokens(s, s->xg16, x, sizeof(nb_bf16) * d);
    for (int e = 0; e < m.E; e++) {
        const int n = s->start[e + 1] - s->start[e];  /* rounded up: its last rows are zeros */
        if (!n) continue;
        const size_t r0 = (size_t)s->start[e];
        /* gate|up in float32 in the backward's dgu (free until then), kept as bf16 with SwiGLU's output */
        linear_forward_bf16(be, s->dgu, 0.0f, s->xg16 + r0 * d, w_gu + (size_t)e * 2 * F * d, n, m.d, 2 * m.F);
        swiglu_forward_cast_bf16(s->h16 + r0 * F, s->gu16 + r0 * 2 * F, s->dgu, n, m.F);
        linear_forward_bf16(be, s->y + r0 * d, 0.0f, s->h16 + r0 * F, w_down + (size_t)e * d * F, n, m.F, m.d);
    }
    combine(s, out, load);
}

/* dy = w dout for every row, and dp: the router's gradient through the renormalized weights (the aux
 * loss's part added by the caller). dw_j = dout . y_j; w_j = p_j / S gives
 * dp_i = (dw_i - sum_j w_j dw_j) / S for the chosen i. */
static void route_backward(moe_state *s, const float *dout) {
    const moe_dims m = s->m;
    const size_t d = (size_t)m.d;
    const double t0 = nb_routing_begin();
#pragma omp parallel for schedule(static)
    for (int t = 0; t < m.N; t++) {
        const float *g = dout + (size_t)t * d, *p = s->probs + (size_t)t * m.E;
        float *dp = s->dp + (size_t)t * m.E, dw[MOE_MAX_K], sum = 0.0f, wdw = 0.0f;
        memset(dp, 0, sizeof(float) * (size_t)m.E);
        for (int j = 0; j < m.k; j++) {
            const size_t row = (size_t)s->slot_row[(size_t)t * m.k + j];
            const float w = s->weight[(size_t)t * m.k + j], *y = s->y + row * d;
            float *dy = s->dy + row * d, dot = 0.0f;
            for (size_t i = 0; i < d; i++) {
                dy[i] = w * g[i];
                dot += g[i] * y[i];
            }
            dw[j] = dot;
            sum += p[s->top[(size_t)t * m.k + j]];
            wdw += w * dot;
        }
        for (int j = 0; j < m.k; j++) dp[s->top[(size_t)t * m.k + j]] = (dw[j] - wdw) / sum;
    }
    nb_routing_end(t0);
}

/* dp += the aux loss's part (d aux / d p_te = E f_e / N), then through the softmax: dz = p (dp - sum p dp),
 * in place. */
static void softmax_backward(moe_state *s, float aux_grad) {
    const moe_dims m = s->m;
    const double t0 = nb_routing_begin();
#pragma omp parallel for schedule(static)
    for (int t = 0; t < m.N; t++) {
        const float *p = s->probs + (size_t)t * m.E;
        float *dp = s->dp + (size_t)t * m.E, dot = 0.0f;
        for (int e = 0; e < m.E; e++) {
            dp[e] += aux_grad * (float)((double)m.E * s->count[e] / ((double)m.N * m.N));
            dot += p[e] * dp[e];
        }
        for (int e = 0; e < m.E; e++) dp[e] = p[e] * (dp[e] - dot);
    }
    nb_routing_end(t0);
}

void moe_backward(const nb_backend *be, moe_state *s, float *dx, float *g_router, float *g_gu, float *g_down,
                  const float *dout, float aux_grad, const float *x, const float *w_router, const float *w_gu,
                  const float *w_down) {
    const moe_dims m = s->m;
    const size_t d = (size_t)m.d, F = (size_t)m.F;
    route_backward(s, dout);
    for (int e = 0; e < m.E; e++) {
        const int n = s->count[e];
        if (!n) continue;
        const size_t r0 = (size_t)s->start[e];
        float *dh = s->dh + r0 * F, *dgu = s->dgu + r0 * 2 * F;
        linear_backward_to(be, s->sink, dh, g_down + (size_t)e * d * F, s->dy + r0 * d, s->h + r0 * F,
                           w_down + (size_t)e * d * F, n, m.F, m.d);
        swiglu_backward(dgu, dh, s->gu + r0 * 2 * F, n, m.F);
        linear_backward_to(be, s->sink, s->dxg + r0 * d, g_gu + (size_t)e * 2 * F * d, dgu, s->xg + r0 * d,
                           w_gu + (size_t)e * 2 * F * d, n, m.d, 2 * m.F);
    }
    softmax_backward(s, aux_grad);
    linear_backward_to(be, s->sink, dx, g_router, s->dp, x, w_router, m.N, m.d, m.E);
    add_rows(s, dx, s->dxg, 0);  /* dx += each grouped row's input gradient */
}

void moe_backward_bf16(const nb_backend *be, moe_state *s, float *dx, float *g_router, float *g_gu, float *g_down,
                       const float *dout, float aux_grad, const nb_bf16 *x, const nb_bf16 *w_router,
                       const nb_bf16 *w_gu, const nb_bf16 *w_down) {
    const moe_dims m = s->m;
    const size_t d = (size_t)m.d, F = (size_t)m.F;
    route_backward(s, dout);
    for (int e = 0; e < m.E; e++) {  /* one expert at a time: its casts share op16 */
        const int n = s->start[e + 1] - s->start[e];
        if (!n) continue;
        const size_t r0 = (size_t)s->start[e];
        memset(s->dy + (r0 + (size_t)s->count[e]) * d, 0, sizeof(float) * (size_t)(n - s->count[e]) * d);  /* no token's rows */
        float *dh = s->dh + r0 * F;
        linear_backward_bf16_to(be, s->sink, dh, g_down + (size_t)e * d * F, s->dy + r0 * d, s->h16 + r0 * F,
                                w_down + (size_t)e * d * F, n, m.F, m.d, s->op16);
        swiglu_backward_bf16_cast(s->op16, dh, s->gu16 + r0 * 2 * F, n, m.F);  /* dgu straight to its bf16 operand */
        linear_backward_bf16_cast_to(be, s->sink, s->dxg + r0 * d, g_gu + (size_t)e * 2 * F * d, 1.0f, s->op16,
                                     s->xg16 + r0 * d, w_gu + (size_t)e * 2 * F * d, n, m.d, 2 * m.F);
    }
    softmax_backward(s, aux_grad);
    linear_backward_bf16_to(be, s->sink, dx, g_router, s->dp, x, w_router, m.N, m.d, m.E, s->op16);
    add_rows(s, dx, s->dxg, 0);  /* dx += each grouped row's input gradient */
}
