/* The layers on the guarded device (backend/guarded.h): the CPU's functions on the mirrors of its addresses,
 * so that a stage there computes the CPU's bits. */
#include "backend/guarded.h"
#include "layers/ops.h"

#define CPU nb_layer_ops_cpu()
#define RF(p) ((float *)nb_guarded_host(be, (p)))
#define RB(p) ((nb_bf16 *)nb_guarded_host(be, (p)))
#define RI(p) ((int *)nb_guarded_host(be, (p)))

static void l_embedding_forward(const nb_backend *be, float *out, const int *tokens, const float *table, int N, int d) {
    CPU->embedding_forward(nb_guarded_inner(be), RF(out), RI(tokens), RF(table), N, d);
}
static void l_embedding_backward(const nb_backend *be, float *dtable, const float *dout, const int *tokens, int N,
                                 int d) {
    CPU->embedding_backward(nb_guarded_inner(be), RF(dtable), RF(dout), RI(tokens), N, d);
}
static void l_rmsnorm_forward(const nb_backend *be, float *out, float *rstd, const float *x, const float *gain, int N,
                              int d, float eps) {
    CPU->rmsnorm_forward(nb_guarded_inner(be), RF(out), RF(rstd), RF(x), RF(gain), N, d, eps);
}
static void l_rmsnorm_backward(const nb_backend *be, float *dx, float *dgain, const float *dout, const float *x,
                               const float *gain, const float *rstd, int N, int d) {
    CPU->rmsnorm_backward(nb_guarded_inner(be), RF(dx), RF(dgain), RF(dout), RF(x), RF(gain), RF(rstd), N, d);
}
static void l_rope_forward(const nb_backend *be, float *x, int B, int T, int stride, int n_rot, int hd,
                           const float *cos_t, const float *sin_t) {
    CPU->rope_forward(nb_guarded_inner(be), RF(x), B, T, stride, n_rot, hd, RF(cos_t), RF(sin_t));
}
static void l_rope_backward(const nb_backend *be, float *dx, int B, int T, int stride, int n_rot, int hd,
                            const float *cos_t, const float *sin_t) {
    CPU->rope_backward(nb_guarded_inner(be), RF(dx), B, T, stride, n_rot, hd, RF(cos_t), RF(sin_t));
}
static int l_attention_forward(const nb_backend *be, float *out, nb_bf16 *out16, float *lse, const float *qkv, int B,
                               int T, int H, int Hkv, int hd, int bf16) {
    return CPU->attention_forward(nb_guarded_inner(be), RF(out), RB(out16), RF(lse), RF(qkv), B, T, H, Hkv, hd, bf16);
}
static int l_attention_backward(const nb_backend *be, float *dqkv, const float *dout, const float *out,
                                const float *lse, const float *qkv, int B, int T, int H, int Hkv, int hd, int bf16) {
    return CPU->attention_backward(nb_guarded_inner(be), RF(dqkv), RF(dout), RF(out), RF(lse), RF(qkv), B, T, H, Hkv, hd,
                                   bf16);
}
static void l_swiglu_forward(const nb_backend *be, float *h, const float *gu, int N, int F) {
    CPU->swiglu_forward(nb_guarded_inner(be), RF(h), RF(gu), N, F);
}
static void l_swiglu_backward(const nb_backend *be, float *dgu, const float *dh, const float *gu, int N, int F) {
    CPU->swiglu_backward(nb_guarded_inner(be), RF(dgu), RF(dh), RF(gu), N, F);
}
static double l_cross_entropy_forward(const nb_backend *be, float *lse, const float *logits, const int *targets, int N,
                                      int V) {
    return CPU->cross_entropy_forward(nb_guarded_inner(be), RF(lse), RF(logits), RI(targets), N, V);
}
static void l_cross_entropy_backward(const nb_backend *be, float *logits, const float *lse, const int *targets, int N,
                                     int V, float scale, int n_mean) {
    CPU->cross_entropy_backward(nb_guarded_inner(be), RF(logits), RF(lse), RI(targets), N, V, scale, n_mean);
}

static void l_bf16_cast(const nb_backend *be, nb_bf16 *dst, const float *src, size_t n) {
    CPU->bf16_cast(nb_guarded_inner(be), RB(dst), RF(src), n);
}
static void l_bf16_round(const nb_backend *be, float *x, size_t n) {
    CPU->bf16_round(nb_guarded_inner(be), RF(x), n);
}
static void l_bf16_widen(const nb_backend *be, float *dst, const nb_bf16 *src, size_t n) {
    CPU->bf16_widen(nb_guarded_inner(be), RF(dst), RB(src), n);
}
static void l_rmsnorm_forward_bf16(const nb_backend *be, nb_bf16 *out, float *rstd, const float *x, const float *gain, int N, int d, float eps) {
    CPU->rmsnorm_forward_bf16(nb_guarded_inner(be), RB(out), RF(rstd), RF(x), RF(gain), N, d, eps);
}
static void l_rope_forward_bf16(const nb_backend *be, float *x, nb_bf16 *x16, int B, int T, int stride, int n_rot_heads, int hd, const float *cos_t, const float *sin_t) {
    CPU->rope_forward_bf16(nb_guarded_inner(be), RF(x), RB(x16), B, T, stride, n_rot_heads, hd, RF(cos_t), RF(sin_t));
}
static void l_rope_backward_cast_bf16(const nb_backend *be, nb_bf16 *dx16, const float *dx, int B, int T, int stride, int n_rot_heads, int hd, const float *cos_t, const float *sin_t) {
    CPU->rope_backward_cast_bf16(nb_guarded_inner(be), RB(dx16), RF(dx), B, T, stride, n_rot_heads, hd, RF(cos_t), RF(sin_t));
}
static void l_swiglu_forward_cast_bf16(const nb_backend *be, nb_bf16 *h, nb_bf16 *gu16, const float *gu, int N, int F) {
    CPU->swiglu_forward_cast_bf16(nb_guarded_inner(be), RB(h), RB(gu16), RF(gu), N, F);
}
static void l_swiglu_backward_bf16_cast(const nb_backend *be, nb_bf16 *dgu16, const float *dh, const nb_bf16 *gu, int N, int F) {
    CPU->swiglu_backward_bf16_cast(nb_guarded_inner(be), RB(dgu16), RF(dh), RB(gu), N, F);
}
static void l_cross_entropy_grad_bf16(const nb_backend *be, nb_bf16 *dlogits, const float *logits, const float *lse, const int *targets, int N, int V, int n_mean) {
    CPU->cross_entropy_grad_bf16(nb_guarded_inner(be), RB(dlogits), RF(logits), RF(lse), RI(targets), N, V, n_mean);
}
static double l_cross_entropy_forward_grad_bf16(const nb_backend *be, float *lse, nb_bf16 *dlogits, const float *logits, const int *targets, int N, int V, int n_mean) {
    return CPU->cross_entropy_forward_grad_bf16(nb_guarded_inner(be), RF(lse), RB(dlogits), RF(logits), RI(targets), N, V, n_mean);
}

static void l_moe_route(const nb_backend *be, float *probs, int *top, float *weight, int N, int E, int k) {
    CPU->moe_route(nb_guarded_inner(be), RF(probs), RI(top), RF(weight), N, E, k);
}
static void l_moe_group(const nb_backend *be, int *count, int *start, int *row_token, int *slot_row, const int *top,
                        int N, int E, int k, int row_align) {
    CPU->moe_group(nb_guarded_inner(be), RI(count), RI(start), RI(row_token), RI(slot_row), RI(top), N, E, k, row_align);
}
static void l_moe_gather(const nb_backend *be, void *xg, const void *x, const int *row_token, const int *start, int E,
                         size_t max_rows, size_t row_bytes) {
    CPU->moe_gather(nb_guarded_inner(be), nb_guarded_host(be, xg), nb_guarded_host(be, x), RI(row_token), RI(start), E,
                    max_rows, row_bytes);
}
static double l_moe_balance(const nb_backend *be, float *load, const float *probs, const int *count, int N, int E,
                            int k) {
    return CPU->moe_balance(nb_guarded_inner(be), RF(load), RF(probs), RI(count), N, E, k);
}
static void l_moe_add_rows(const nb_backend *be, float *out, const float *rows, const float *weight,
                           const int *slot_row, int N, int k, int d) {
    CPU->moe_add_rows(nb_guarded_inner(be), RF(out), RF(rows), RF(weight), RI(slot_row), N, k, d);
}
static void l_moe_route_backward(const nb_backend *be, float *dy, float *dp, const float *dout, const float *y,
                                 const float *probs, const int *top, const float *weight, const int *slot_row, int N,
                                 int E, int k, int d) {
    CPU->moe_route_backward(nb_guarded_inner(be), RF(dy), RF(dp), RF(dout), RF(y), RF(probs), RI(top), RF(weight),
                            RI(slot_row), N, E, k, d);
}
static void l_moe_softmax_backward(const nb_backend *be, float *dp, const float *probs, const int *count,
                                   float aux_grad, int N, int E) {
    CPU->moe_softmax_backward(nb_guarded_inner(be), RF(dp), RF(probs), RI(count), aux_grad, N, E);
}

static const nb_layer_ops guarded_layers = {
    .embedding_forward = l_embedding_forward,
    .embedding_backward = l_embedding_backward,
    .rmsnorm_forward = l_rmsnorm_forward,
    .rmsnorm_backward = l_rmsnorm_backward,
    .rope_forward = l_rope_forward,
    .rope_backward = l_rope_backward,
    .attention_forward = l_attention_forward,
    .attention_backward = l_attention_backward,
    .swiglu_forward = l_swiglu_forward,
    .swiglu_backward = l_swiglu_backward,
    .cross_entropy_forward = l_cross_entropy_forward,
    .cross_entropy_backward = l_cross_entropy_backward,
    .bf16_cast = l_bf16_cast,
    .bf16_round = l_bf16_round,
    .bf16_widen = l_bf16_widen,
    .rmsnorm_forward_bf16 = l_rmsnorm_forward_bf16,
    .rope_forward_bf16 = l_rope_forward_bf16,
    .rope_backward_cast_bf16 = l_rope_backward_cast_bf16,
    .swiglu_forward_cast_bf16 = l_swiglu_forward_cast_bf16,
    .swiglu_backward_bf16_cast = l_swiglu_backward_bf16_cast,
    .cross_entropy_grad_bf16 = l_cross_entropy_grad_bf16,
    .cross_entropy_forward_grad_bf16 = l_cross_entropy_forward_grad_bf16,
    .moe_route = l_moe_route,
    .moe_group = l_moe_group,
    .moe_gather = l_moe_gather,
    .moe_balance = l_moe_balance,
    .moe_add_rows = l_moe_add_rows,
    .moe_route_backward = l_moe_route_backward,
    .moe_softmax_backward = l_moe_softmax_backward,
};

const nb_layer_ops *nb_layer_ops_guarded(void) { return &guarded_layers; }
