/* Internal: the layers of the model, one forward/backward pair each, on float32 rows.
 * Shapes use N = B*T rows (token positions). Backward functions that say "+=" accumulate,
 * so that gradients of several micro-batches (and the residual stream) simply add up.
 * Every function is deterministic: the same inputs give bitwise the same outputs for any
 * number of threads (parallel loops never split a reduction). The layers with matrix products take `be`,
 * the stage's backend (backend/backend.h), which runs them and records their failures; the stage checks
 * it after each forward and backward. */
#ifndef NB_LAYERS_H
#define NB_LAYERS_H
#include <stddef.h>
#include "backend/backend.h"

/* out[n] = table[tokens[n]] */
void embedding_forward(float *out, const int *tokens, const float *table, int N, int d);
/* dtable[tokens[n]] += dout[n], in order of n */
void embedding_backward(float *dtable, const float *dout, const int *tokens, int N, int d);

/* out = x / sqrt(mean(x^2) + eps) * gain, row by row; rstd[n] keeps 1/sqrt(mean + eps). */
void rmsnorm_forward(float *out, float *rstd, const float *x, const float *gain, int N, int d, float eps);
/* The same, out cast to bf16 in the same pass (a product's operand under bf16). */
void rmsnorm_forward_bf16(nb_bf16 *out, float *rstd, const float *x, const float *gain, int N, int d, float eps);
/* dx += d(out)/dx^T dout; dgain += sum_n dout * x * rstd */
void rmsnorm_backward(float *dx, float *dgain, const float *dout, const float *x, const float *gain,
                      const float *rstd, int N, int d);

/* y[N,out] = x[N,in] w^T + beta * y, with w stored (out, in) like torch.nn.Linear */
void linear_forward(const nb_backend *be, float *y, float beta, const float *x, const float *w, int N, int in, int out);
/* dx[N,in] = dy w (+ dx if dx_beta = 1), dw += dy^T x */
void linear_backward(const nb_backend *be, float *dx, float dx_beta, float *dw, const float *dy, const float *x, const float *w,
                     int N, int in, int out);

/* The same two products with bf16 operands (docs/rules.md, section 5): x and w already cast (an
 * activation kept in bf16, a weight version cast once); dy is cast here into dy_scratch (N x out
 * values). Outputs and the accumulated dw stay float32. */
void linear_forward_bf16(const nb_backend *be, float *y, float beta, const nb_bf16 *x, const nb_bf16 *w, int N, int in, int out);
void linear_backward_bf16(const nb_backend *be, float *dx, float dx_beta, float *dw, const float *dy, const nb_bf16 *x, const nb_bf16 *w,
                          int N, int in, int out, nb_bf16 *dy_scratch);
/* The same two products on a dy already cast to bf16, both scaled by alpha: dx = alpha dy w (+ dx),
 * dw += alpha dy^T x (the loss's gradient, cast once in forward, scaled by the backward's loss scale). */
void linear_backward_bf16_cast(const nb_backend *be, float *dx, float dx_beta, float *dw, float alpha, const nb_bf16 *dy16,
                               const nb_bf16 *x, const nb_bf16 *w, int N, int in, int out);

/* A split backward (zero-bubble schedules): the weight-gradient product of a linear layer, dw += dy^T x
 * (bf16: dw += alpha dy16^T x16), handed to a sink instead of computed, for the caller to run later on the
 * same values (model/stage.c records them, with copies of dy; x stays in the activation slot). The
 * *_to functions below compute dx (with dx_beta 0) and give the other product to k, or with k NULL
 * compute both, as their plain twins do. */
typedef struct nb_wgrad_sink {
    void (*product)(struct nb_wgrad_sink *k, float *dw, const float *dy, const float *x, int N, int in, int out);
    void (*product16)(struct nb_wgrad_sink *k, float *dw, float alpha, const nb_bf16 *dy16, const nb_bf16 *x16, int N,
                      int in, int out);
} nb_wgrad_sink;
void linear_backward_to(const nb_backend *be, nb_wgrad_sink *k, float *dx, float *dw, const float *dy, const float *x,
                        const float *w, int N, int in, int out);
void linear_backward_bf16_to(const nb_backend *be, nb_wgrad_sink *k, float *dx, float *dw, const float *dy,
                             const nb_bf16 *x, const nb_bf16 *w, int N, int in, int out, nb_bf16 *dy_scratch);
void linear_backward_bf16_cast_to(const nb_backend *be, nb_wgrad_sink *k, float *dx, float *dw, float alpha,
                                  const nb_bf16 *dy16, const nb_bf16 *x, const nb_bf16 *w, int N, int in, int out);

/* Rotary embedding in place on the first n_rot_heads heads (q heads then k heads) of each row
 * of width stride; rows are B sequences of T positions. Pairs dimension i with i + hd/2
 * (Hugging Face's rotate_half). cos/sin: [T_max][hd/2]. */
void rope_forward(float *x, int B, int T, int stride, int n_rot_heads, int hd, const float *cos_t,
                  const float *sin_t);
/* rope_forward, then every value of the rows (the rotated heads and the rest of each row, v) rounded to
 * bf16 in the same pass: x keeps the rounded values (attention's operands under bf16) and x16 receives
 * them as bf16 (the slot's copy). Bitwise rope_forward, nb_bf16_round and nb_bf16_cast in turn. */
void rope_forward_bf16(float *x, nb_bf16 *x16, int B, int T, int stride, int n_rot_heads, int hd,
                       const float *cos_t, const float *sin_t);
void rope_backward(float *dx, int B, int T, int stride, int n_rot_heads, int hd, const float *cos_t,
                   const float *sin_t);
/* rope_backward of dx written to dx16 in bf16 (dx unchanged), the rest of each row (dv) cast: bitwise
 * rope_backward then nb_bf16_cast. */
void rope_backward_cast_bf16(nb_bf16 *dx16, const float *dx, int B, int T, int stride, int n_rot_heads, int hd,
                             const float *cos_t, const float *sin_t);

/* Causal grouped-query attention on packed rows qkv[N][(H + 2 Hkv) hd] (q heads, k heads,
 * v heads). Query head h reads kv head h / (H / Hkv). out[N][H hd]; lse[B][H][T] keeps each
 * row's log-sum-exp so that backward recomputes the probabilities instead of storing T x T. */
/* bf16 = 1: the operands of its products (q, k, v, the probabilities, and in backward dout and the
 * score gradients) are rounded to bf16 values before each product, which accumulates in float32;
 * exactly what bf16 GEMMs compute (a product of two bf16 values is exact in float32). The caller
 * rounds q, k and v themselves (in qkv), so that backward sees the same values. */
/* out16 (NULL: none) also receives out cast to bf16, each block as it is computed (the o-projection's operand
 * under bf16): bitwise nb_bf16_cast of out afterwards. */
/* Both return -1 (nb_last_error) when a thread's scratch cannot be allocated; the outputs are then
 * partial. */
int attention_forward(const nb_backend *be, float *out, nb_bf16 *out16, float *lse, const float *qkv, int B, int T, int H,
                      int Hkv, int hd, int bf16);
/* dqkv (overwritten, same packing as qkv) from dout, recomputing probabilities from lse. */
int attention_backward(const nb_backend *be, float *dqkv, const float *dout, const float *out, const float *lse,
                       const float *qkv, int B, int T, int H, int Hkv, int hd, int bf16);

/* gu[N][2F] holds (gate | up); h = silu(gate) * up */
void swiglu_forward(float *h, const float *gu, int N, int F);
/* The same on gate and up kept in bf16 (linear outputs in bf16, as autocast keeps them), h cast to bf16
 * in the same pass. */
void swiglu_forward_bf16(nb_bf16 *h, const nb_bf16 *gu, int N, int F);
/* gu16 = bf16(gu) (gate/up kept in bf16) and h = swiglu_forward_bf16 of those values, in one pass:
 * bitwise nb_bf16_cast then swiglu_forward_bf16. */
void swiglu_forward_cast_bf16(nb_bf16 *h, nb_bf16 *gu16, const float *gu, int N, int F);
/* dgu (overwritten) from dh */
void swiglu_backward(float *dgu, const float *dh, const float *gu, int N, int F);
/* The same on gate and up kept in bf16 (the derivative at the values the forward used), dgu written in
 * bf16 (the gate/up product's bf16 operand): bitwise swiglu_backward on the widened gate/up, then
 * nb_bf16_cast. */
void swiglu_backward_bf16_cast(nb_bf16 *dgu16, const float *dh, const nb_bf16 *gu, int N, int F);

/* Cross-entropy of logits[N][V] against targets, summed over the N rows (in double, in row order, so
 * that sums of consecutive chunks added in order equal the whole sum); lse[N] receives each row's
 * log-sum-exp. The mean loss is the sum over all rows divided by their count. */
double cross_entropy_forward(float *lse, const float *logits, const int *targets, int N, int V);
/* In place: logits becomes scale/n_mean * (softmax(logits) - onehot(target)) for its N rows, where
 * n_mean is the number of rows the mean loss runs over (N, or more when N rows are one chunk). */
void cross_entropy_backward(float *logits, const float *lse, const int *targets, int N, int V, float scale,
                            int n_mean);
/* The loss's gradient of N rows (softmax(logits) - onehot(target)) / n_mean, computed in float32 from the
 * float32 logits and lse and cast to bf16 into dlogits (for the forward pass to keep, under bf16, in
 * place of the logits: the head's backward products read it as their bf16 operand). */
void cross_entropy_grad_bf16(nb_bf16 *dlogits, const float *logits, const float *lse, const int *targets, int N, int V,
                             int n_mean);
/* cross_entropy_forward and cross_entropy_grad_bf16 in one pass over the rows (each row's gradient while the
 * row is in cache): bitwise the two in turn. */
double cross_entropy_forward_grad_bf16(float *lse, nb_bf16 *dlogits, const float *logits, const int *targets, int N,
                                       int V, int n_mean);
#endif
