/* The CPU's table of the layers (ops.h): each entry calls the layers.h function of its name on host memory
 * (the backend is the products', passed on where the function takes it). */
#include "layers/ops.h"
#include "layers/layers.h"
#include "layers/moe.h"
#include "backend/bf16.h"

static void cpu_embedding_forward(const nb_backend *be, float *out, const int *tokens, const float *table, int N, int d) {
    (void)be;
    embedding_forward(out, tokens, table, N, d);
}
static void cpu_embedding_backward(const nb_backend *be, float *dtable, const float *dout, const int *tokens, int N,
                                   int d) {
    (void)be;
    embedding_backward(dtable, dout, tokens, N, d);
}
static void cpu_rmsnorm_forward(const nb_backend *be, float *out, float *rstd, const float *x, const float *gain, int N,
                                int d, float eps) {
    (void)be;
    rmsnorm_forward(out, rstd, x, gain, N, d, eps);
}
static void cpu_rmsnorm_backward(const nb_backend *be, float *dx, float *dgain, const float *dout, const float *x,
                                 const float *gain, const float *rstd, int N, int d) {
    (void)be;
    rmsnorm_backward(dx, dgain, dout, x, gain, rstd, N, d);
}
static void cpu_rope_forward(const nb_backend *be, float *x, int B, int T, int stride, int n_rot_heads, int hd,
                             const float *cos_t, const float *sin_t) {
    (void)be;
    rope_forward(x, B, T, stride, n_rot_heads, hd, cos_t, sin_t);
}
static void cpu_rope_backward(const nb_backend *be, float *dx, int B, int T, int stride, int n_rot_heads, int hd,
                              const float *cos_t, const float *sin_t) {
    (void)be;
    rope_backward(dx, B, T, stride, n_rot_heads, hd, cos_t, sin_t);
}
static void cpu_swiglu_forward(const nb_backend *be, float *h, const float *gu, int N, int F) {
    (void)be;
    swiglu_forward(h, gu, N, F);
}
static void cpu_swiglu_backward(const nb_backend *be, float *dgu, const float *dh, const float *gu, int N, int F) {
    (void)be;
    swiglu_backward(dgu, dh, gu, N, F);
}
static double cpu_cross_entropy_forward(const nb_backend *be, float *lse, const float *logits, const int *targets, int N,
                                        int V) {
    (void)be;
    return cross_entropy_forward(lse, logits, targets, N, V);
}
static void cpu_cross_entropy_backward(const nb_backend *be, float *logits, const float *lse, const int *targets, int N,
                                       int V, float scale, int n_mean) {
    (void)be;
    cross_entropy_backward(logits, lse, targets, N, V, scale, n_mean);
}

static void cpu_bf16_cast(const nb_backend *be, nb_bf16 *dst, const float *src, size_t n) {
    (void)be;
    nb_bf16_cast(dst, src, n);
}
static void cpu_bf16_round(const nb_backend *be, float *x, size_t n) {
    (void)be;
    nb_bf16_round(x, n);
}
static void cpu_bf16_widen(const nb_backend *be, float *dst, const nb_bf16 *src, size_t n) {
    (void)be;
    nb_bf16_widen(dst, src, n);
}
static void cpu_rmsnorm_forward_bf16(const nb_backend *be, nb_bf16 *out, float *rstd, const float *x, const float *gain, int N, int d, float eps) {
    (void)be;
    rmsnorm_forward_bf16(out, rstd, x, gain, N, d, eps);
}
static void cpu_rope_forward_bf16(const nb_backend *be, float *x, nb_bf16 *x16, int B, int T, int stride, int n_rot_heads, int hd, const float *cos_t, const float *sin_t) {
    (void)be;
    rope_forward_bf16(x, x16, B, T, stride, n_rot_heads, hd, cos_t, sin_t);
}
static void cpu_rope_backward_cast_bf16(const nb_backend *be, nb_bf16 *dx16, const float *dx, int B, int T, int stride, int n_rot_heads, int hd, const float *cos_t, const float *sin_t) {
    (void)be;
    rope_backward_cast_bf16(dx16, dx, B, T, stride, n_rot_heads, hd, cos_t, sin_t);
}
static void cpu_swiglu_forward_cast_bf16(const nb_backend *be, nb_bf16 *h, nb_bf16 *gu16, const float *gu, int N, int F) {
    (void)be;
    swiglu_forward_cast_bf16(h, gu16, gu, N, F);
}
static void cpu_swiglu_backward_bf16_cast(const nb_backend *be, nb_bf16 *dgu16, const float *dh, const nb_bf16 *gu, int N, int F) {
    (void)be;
    swiglu_backward_bf16_cast(dgu16, dh, gu, N, F);
}
static void cpu_cross_entropy_grad_bf16(const nb_backend *be, nb_bf16 *dlogits, const float *logits, const float *lse, const int *targets, int N, int V, int n_mean) {
    (void)be;
    cross_entropy_grad_bf16(dlogits, logits, lse, targets, N, V, n_mean);
}
static double cpu_cross_entropy_forward_grad_bf16(const nb_backend *be, float *lse, nb_bf16 *dlogits, const float *logits, const int *targets, int N, int V, int n_mean) {
    (void)be;
    return cross_entropy_forward_grad_bf16(lse, dlogits, logits, targets, N, V, n_mean);
}

static void cpu_moe_route(const nb_backend *be, float *probs, int *top, float *weight, int N, int E, int k) {
    (void)be;
    moe_route(probs, top, weight, N, E, k);
}
static void cpu_moe_group(const nb_backend *be, int *count, int *start, int *row_token, int *slot_row, const int *top,
                          int N, int E, int k, int row_align) {
    (void)be;
    moe_group(count, start, row_token, slot_row, top, N, E, k, row_align);
}
static void cpu_moe_gather(const nb_backend *be, void *xg, const void *x, const int *row_token, const int *start, int E,
                           size_t max_rows, size_t row_bytes) {
    (void)be, (void)max_rows;
    moe_gather(xg, x, row_token, start, E, row_bytes);
}
static double cpu_moe_balance(const nb_backend *be, float *load, const float *probs, const int *count, int N, int E,
                              int k) {
    (void)be;
    return moe_balance(load, probs, count, N, E, k);
}
static void cpu_moe_add_rows(const nb_backend *be, float *out, const float *rows, const float *weight,
                             const int *slot_row, int N, int k, int d) {
    (void)be;
    moe_add_rows(out, rows, weight, slot_row, N, k, d);
}
static void cpu_moe_route_backward(const nb_backend *be, float *dy, float *dp, const float *dout, const float *y,
                                   const float *probs, const int *top, const float *weight, const int *slot_row, int N,
                                   int E, int k, int d) {
    (void)be;
    moe_route_backward(dy, dp, dout, y, probs, top, weight, slot_row, N, E, k, d);
}
static void cpu_moe_softmax_backward(const nb_backend *be, float *dp, const float *probs, const int *count,
                                     float aux_grad, int N, int E) {
    (void)be;
    moe_softmax_backward(dp, probs, count, aux_grad, N, E);
}

static const nb_layer_ops cpu_layers = {
    .embedding_forward = cpu_embedding_forward,
    .embedding_backward = cpu_embedding_backward,
    .rmsnorm_forward = cpu_rmsnorm_forward,
    .rmsnorm_backward = cpu_rmsnorm_backward,
    .rope_forward = cpu_rope_forward,
    .rope_backward = cpu_rope_backward,
    .attention_forward = attention_forward,
    .attention_backward = attention_backward,
    .swiglu_forward = cpu_swiglu_forward,
    .swiglu_backward = cpu_swiglu_backward,
    .cross_entropy_forward = cpu_cross_entropy_forward,
    .cross_entropy_backward = cpu_cross_entropy_backward,
    .bf16_cast = cpu_bf16_cast,
    .bf16_round = cpu_bf16_round,
    .bf16_widen = cpu_bf16_widen,
    .rmsnorm_forward_bf16 = cpu_rmsnorm_forward_bf16,
    .rope_forward_bf16 = cpu_rope_forward_bf16,
    .rope_backward_cast_bf16 = cpu_rope_backward_cast_bf16,
    .swiglu_forward_cast_bf16 = cpu_swiglu_forward_cast_bf16,
    .swiglu_backward_bf16_cast = cpu_swiglu_backward_bf16_cast,
    .cross_entropy_grad_bf16 = cpu_cross_entropy_grad_bf16,
    .cross_entropy_forward_grad_bf16 = cpu_cross_entropy_forward_grad_bf16,
    .moe_route = cpu_moe_route,
    .moe_group = cpu_moe_group,
    .moe_gather = cpu_moe_gather,
    .moe_balance = cpu_moe_balance,
    .moe_add_rows = cpu_moe_add_rows,
    .moe_route_backward = cpu_moe_route_backward,
    .moe_softmax_backward = cpu_moe_softmax_backward,
};

const nb_layer_ops *nb_layer_ops_cpu(void) { return &cpu_layers; }

