/* The mixture-of-experts feed-forward block: moe.h has the rule. */
#include "layers/moe.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "layers/layers.h"
#include "layers/ops.h"
#include "util/alloc.h"
#include "util/error.h"

int moe_check(const moe_dims *m) {
    if (m->E < 1 || m->E > MOE_MAX_E) return nb_fail("n_experts = %d: expected 1 to %d", m->E, MOE_MAX_E);
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
 * rounded up to one (the extra rows zero; moe_group's row_align): oneDNN makes a primitive per product shape, and an
 * expert's row count changes every step; rounded, the shapes repeat and the primitives are reused instead of made
 * anew (about 190 a step on moe-tiny otherwise, which cost more than the products). Zero rows add exact zeros to the
 * weight gradients' sums. So the grouped rows are at most: */
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
    moe_state *s = nb_calloc(1, sizeof *s, "a MoE block's state");  /* the host's: its arrays are be's */
    if (!s) return NULL;
    const size_t kept = moe_state_bytes(m);
    void *memory = nb_backend_alloc(be, kept + moe_scratch_bytes(m), "a MoE block's activations");
    if (!memory) {
        free(s);
        return NULL;
    }
    moe_state_bind(s, m, memory);
    moe_scratch_bind(s, (char *)memory + kept);  /* kept is a multiple of 64 */
    return s;
}

void moe_state_free(const nb_backend *be, moe_state *s) {
    if (!s) return;
    nb_backend_free(be, s->memory);
    free(s);
}

/* ---- the passes, on the backend's memory through its layer table ---- */

/* Each expert's row count and first row where the host reads them (a device's memory: copied back, so a pass
 * waits here for the routing, to size each expert's products). They are checked before any product is sized by
 * them: a copy that failed (the backend records why) leaves zeros, which hold no token's rows. 0, or -1 with
 * nb_fail. */
static int host_counts(const nb_backend *be, const moe_state *s, int *count, int *start) {
    const moe_dims m = s->m;
    memset(count, 0, sizeof(int) * (size_t)m.E);
    memset(start, 0, sizeof(int) * ((size_t)m.E + 1));
    nb_backend_to_host(be, count, s->count, sizeof(int) * (size_t)m.E);
    nb_backend_to_host(be, start, s->start, sizeof(int) * ((size_t)m.E + 1));
    long rows = 0;
    int ok = start[0] == 0 && (size_t)start[m.E] <= max_rows(&m);
    for (int e = 0; ok && e < m.E; e++) {
        ok = count[e] >= 0 && start[e + 1] >= start[e] + count[e];
        rows += count[e];
    }
    if (ok && rows == (long)m.N * m.k) return 0;
    return nb_fail("MoE block: the experts' row counts read from the %s backend do not add up to its %d tokens x %d "
                   "experts (a failed copy or grouping)", be->name, m.N, m.k);
}

/* From the router's logits in s->probs: the probabilities, each token's experts and weights, the grouping, and
 * the grouped rows' inputs xg (rows of row_bytes) gathered from x; count and start on the host. */
static int route_tokens(const nb_backend *be, moe_state *s, void *xg, const void *x, size_t row_bytes, int *count,
                        int *start) {
    const nb_layer_ops *L = nb_layers_of(be);
    const moe_dims m = s->m;
    const double t0 = nb_routing_begin();
    L->moe_route(be, s->probs, s->top, s->weight, m.N, m.E, m.k);
    L->moe_group(be, s->count, s->start, s->row_token, s->slot_row, s->top, m.N, m.E, m.k, m.bf16 ? MOE_ROW_ALIGN : 1);
    L->moe_gather(be, xg, x, s->row_token, s->start, m.E, max_rows(&m), row_bytes);
    const int rc = host_counts(be, s, count, start);
    nb_routing_end(t0);
    return rc;
}

/* out += each token's experts' outputs (s->y) weighted; then the balance statistics. */
static void combine(const nb_backend *be, moe_state *s, float *out, float *load) {
    const nb_layer_ops *L = nb_layers_of(be);
    const moe_dims m = s->m;
    const double t0 = nb_routing_begin();
    L->moe_add_rows(be, out, s->y, s->weight, s->slot_row, m.N, m.k, m.d);
    s->aux = L->moe_balance(be, load, s->probs, s->count, m.N, m.E, m.k);
    nb_routing_end(t0);
}

int moe_forward(const nb_backend *be, moe_state *s, float *out, const float *x, const float *w_router,
                const float *w_gu, const float *w_down, float *load) {
    const nb_layer_ops *L = nb_layers_of(be);
    const moe_dims m = s->m;
    const size_t d = (size_t)m.d, F = (size_t)m.F;
    int count[MOE_MAX_E], start[MOE_MAX_E + 1];
    linear_forward(be, s->probs, 0.0f, x, w_router, m.N, m.d, m.E);
    if (route_tokens(be, s, s->xg, x, sizeof(float) * d, count, start)) return -1;
    for (int e = 0; e < m.E; e++) {
        const int n = count[e];
        if (!n) continue;
        const size_t r0 = (size_t)start[e];
        linear_forward(be, s->gu + r0 * 2 * F, 0.0f, s->xg + r0 * d, w_gu + (size_t)e * 2 * F * d, n, m.d, 2 * m.F);
        L->swiglu_forward(be, s->h + r0 * F, s->gu + r0 * 2 * F, n, m.F);
        linear_forward(be, s->y + r0 * d, 0.0f, s->h + r0 * F, w_down + (size_t)e * d * F, n, m.F, m.d);
    }
    combine(be, s, out, load);
    return 0;
}

int moe_forward_bf16(const nb_backend *be, moe_state *s, float *out, const nb_bf16 *x, const nb_bf16 *w_router,
                     const nb_bf16 *w_gu, const nb_bf16 *w_down, float *load) {
    const nb_layer_ops *L = nb_layers_of(be);
    const moe_dims m = s->m;
    const size_t d = (size_t)m.d, F = (size_t)m.F;
    int count[MOE_MAX_E], start[MOE_MAX_E + 1];
    linear_forward_bf16(be, s->probs, 0.0f, x, w_router, m.N, m.d, m.E);
    if (route_tokens(be, s, s->xg16, x, sizeof(nb_bf16) * d, count, start)) return -1;
    for (int e = 0; e < m.E; e++) {
        const int n = start[e + 1] - start[e];  /* rounded up: its last rows are zeros */
        if (!n) continue;
        const size_t r0 = (size_t)start[e];
        /* gate|up in float32 in the backward's dgu (free until then), kept as bf16 with SwiGLU's output */
        linear_forward_bf16(be, s->dgu, 0.0f, s->xg16 + r0 * d, w_gu + (size_t)e * 2 * F * d, n, m.d, 2 * m.F);
        L->swiglu_forward_cast_bf16(be, s->h16 + r0 * F, s->gu16 + r0 * 2 * F, s->dgu, n, m.F);
        linear_forward_bf16(be, s->y + r0 * d, 0.0f, s->h16 + r0 * F, w_down + (size_t)e * d * F, n, m.F, m.d);
    }
    combine(be, s, out, load);
    return 0;
}

/* dy = w dout for every row, and dp: the router's gradient through the renormalized weights (the aux loss's
 * part added by softmax_backward); count and start on the host. */
static int route_backward(const nb_backend *be, moe_state *s, const float *dout, int *count, int *start) {
    const moe_dims m = s->m;
    const double t0 = nb_routing_begin();
    nb_layers_of(be)->moe_route_backward(be, s->dy, s->dp, dout, s->y, s->probs, s->top, s->weight, s->slot_row, m.N,
                                         m.E, m.k, m.d);
    const int rc = host_counts(be, s, count, start);
    nb_routing_end(t0);
    return rc;
}

static void softmax_backward(const nb_backend *be, moe_state *s, float aux_grad) {
    const double t0 = nb_routing_begin();
    nb_layers_of(be)->moe_softmax_backward(be, s->dp, s->probs, s->count, aux_grad, s->m.N, s->m.E);
    nb_routing_end(t0);
}

/* dx += each grouped row's input gradient. */
static void add_input_rows(const nb_backend *be, moe_state *s, float *dx) {
    const double t0 = nb_routing_begin();
    nb_layers_of(be)->moe_add_rows(be, dx, s->dxg, NULL, s->slot_row, s->m.N, s->m.k, s->m.d);
    nb_routing_end(t0);
}

int moe_backward(const nb_backend *be, moe_state *s, float *dx, float *g_router, float *g_gu, float *g_down,
                 const float *dout, float aux_grad, const float *x, const float *w_router, const float *w_gu,
                 const float *w_down) {
    const nb_layer_ops *L = nb_layers_of(be);
    const moe_dims m = s->m;
    const size_t d = (size_t)m.d, F = (size_t)m.F;
    int count[MOE_MAX_E], start[MOE_MAX_E + 1];
    if (route_backward(be, s, dout, count, start)) return -1;
    for (int e = 0; e < m.E; e++) {
        const int n = count[e];
        if (!n) continue;
        const size_t r0 = (size_t)start[e];
        float *dh = s->dh + r0 * F, *dgu = s->dgu + r0 * 2 * F;
        linear_backward_to(be, s->sink, dh, g_down + (size_t)e * d * F, s->dy + r0 * d, s->h + r0 * F,
                           w_down + (size_t)e * d * F, n, m.F, m.d);
        L->swiglu_backward(be, dgu, dh, s->gu + r0 * 2 * F, n, m.F);
        linear_backward_to(be, s->sink, s->dxg + r0 * d, g_gu + (size_t)e * 2 * F * d, dgu, s->xg + r0 * d,
                           w_gu + (size_t)e * 2 * F * d, n, m.d, 2 * m.F);
    }
    softmax_backward(be, s, aux_grad);
    linear_backward_to(be, s->sink, dx, g_router, s->dp, x, w_router, m.N, m.d, m.E);
    add_input_rows(be, s, dx);
    return 0;
}

int moe_backward_bf16(const nb_backend *be, moe_state *s, float *dx, float *g_router, float *g_gu, float *g_down,
                      const float *dout, float aux_grad, const nb_bf16 *x, const nb_bf16 *w_router,
                      const nb_bf16 *w_gu, const nb_bf16 *w_down) {
    const nb_layer_ops *L = nb_layers_of(be);
    const moe_dims m = s->m;
    const size_t d = (size_t)m.d, F = (size_t)m.F;
    int count[MOE_MAX_E], start[MOE_MAX_E + 1];
    if (route_backward(be, s, dout, count, start)) return -1;
    for (int e = 0; e < m.E; e++) {  /* one expert at a time: its casts share op16 */
        const int n = start[e + 1] - start[e];
        if (!n) continue;
        const size_t r0 = (size_t)start[e];
        /* no token's rows */
        nb_backend_zero(be, s->dy + (r0 + (size_t)count[e]) * d, sizeof(float) * (size_t)(n - count[e]) * d);
        float *dh = s->dh + r0 * F;
        linear_backward_bf16_to(be, s->sink, dh, g_down + (size_t)e * d * F, s->dy + r0 * d, s->h16 + r0 * F,
                                w_down + (size_t)e * d * F, n, m.F, m.d, s->op16);
        L->swiglu_backward_bf16_cast(be, s->op16, dh, s->gu16 + r0 * 2 * F, n, m.F);  /* dgu straight to its bf16 operand */
        linear_backward_bf16_cast_to(be, s->sink, s->dxg + r0 * d, g_gu + (size_t)e * 2 * F * d, 1.0f, s->op16,
                                     s->xg16 + r0 * d, w_gu + (size_t)e * 2 * F * d, n, m.d, 2 * m.F);
    }
    softmax_backward(be, s, aux_grad);
    linear_backward_bf16_to(be, s->sink, dx, g_router, s->dp, x, w_router, m.N, m.d, m.E, s->op16);
    add_input_rows(be, s, dx);
    return 0;
}
