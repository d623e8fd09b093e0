/* Private to src/backend (-DNB_CUDA=ON): the CUDA kernels of the layers that are not matrix products and of
 * the elementwise optimizers (kernels.cu). Each entry point keeps the contract of its CPU function
 * (src/layers/layers.h, the rules of src/optim) on device memory: every pointer is the GPU's, the work is
 * queued on `stream` (0: the default stream) and the call returns at once. 0, or -1 with nb_fail when the
 * arguments are invalid or the launch fails; a failure while the kernel runs shows at the next
 * synchronization (cudaStreamSynchronize), as with any CUDA work.
 *
 * Deterministic: no atomics; every reduction has a fixed order that depends only on the shape, so the same
 * inputs give the same bits every run on the same GPU. Where the CPU function's order is simple (a sum in
 * order of rows), the kernel keeps it; the elementwise arithmetic is the CPU's operation for operation
 * (no contraction into fused multiply-adds, the same exp: util/fastmath.h), so those results are the CPU's
 * bits. The row reductions (RMSNorm's mean of squares and dot product, the log-sum-exp) add in a tree
 * instead of the CPU's vector lanes: within the bounds tests/test_cuda_kernels.c states.
 *
 * Called by the GPU's layer, rule and delay tables (layers/ops_cuda.c, optim/rules_cuda.c,
 * delay/delay_cuda.c) for a stage in the GPU's memory (`--device cuda`; docs/gpu.md). */
#ifndef NB_BACKEND_CUDA_KERNELS_H
#define NB_BACKEND_CUDA_KERNELS_H
#include <stddef.h>
#include <cuda_runtime.h>
#include "backend/bf16.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The delay rules' update of n weights (src/delay/ops.h's nb_delay_apply_host with kind 0, 1, 2 for
 * NB_APPLY_ONLY, NB_APPLY_KEEP, NB_APPLY_EF): the CPU's bits. */
int nbk_delay_apply(int kind, float *keep, float *current, float *d, float *prev, float alpha, int first, size_t n,
                    cudaStream_t stream);
/* Arithmetic on n floats (nb_backend_add, _scale, _sum_squares): dst += src; x *= scale; and the sum of
 * squares of x (y NULL) or of x - y in double, into *out (device memory), in one fixed order (NBK_SQ_PARTS
 * strided partial sums, each a block's tree, then those summed in order by one thread): the same bits on
 * every run, not the CPU's. */
int nbk_add(float *dst, const float *src, size_t n, cudaStream_t stream);
/* backend/bf16.h's nb_bf16_cast, nb_bf16_round and nb_bf16_widen on n values: the CPU's bits (one rounding). */
int nbk_bf16_cast(nb_bf16 *dst, const float *src, size_t n, cudaStream_t stream);
int nbk_bf16_round(float *x, size_t n, cudaStream_t stream);
int nbk_bf16_widen(float *dst, const nb_bf16 *src, size_t n, cudaStream_t stream);
int nbk_scale(float *x, size_t n, float scale, cudaStream_t stream);
enum { NBK_SQ_PARTS = 256 };
/* partial: NBK_SQ_PARTS doubles of device scratch. */
int nbk_sum_squares(const float *x, const float *y, size_t n, double *partial, double *out, cudaStream_t stream);
/* Taylor compensation (src/delay/ops.h's nb_delay_taylor_host): g += lambda g g (current - old), the CPU's bits;
 * and the squared norm of that correction, in double into *out (device memory) in nbk_sum_squares's order
 * (partial: NBK_SQ_PARTS doubles of device scratch). */
int nbk_taylor(float *grads, const float *current, const float *old, float lambda, size_t n, cudaStream_t stream);
int nbk_taylor_sq(const float *grads, const float *current, const float *old, float lambda, size_t n, double *partial,
                  double *out, cudaStream_t stream);
/* A symmetric product's lower triangle copied from its upper one (nb_cpu_mirror_upper), C: N x N, row stride ldc. */
int nbk_mirror_upper(float *C, int N, int ldc, cudaStream_t stream);

/* ---- Layers (src/layers/layers.h; N = B*T rows) ---- */

/* out[n] = table[tokens[n]]; tokens in [0, rows of table). */
int nbk_embedding_forward(float *out, const int *tokens, const float *table, int N, int d, cudaStream_t stream);
/* dtable[tokens[n]] += dout[n], in order of n: one thread per column scans the tokens in order, so each
 * value of dtable receives its additions in the CPU's order (bitwise embedding_backward). */
int nbk_embedding_backward(float *dtable, const float *dout, const int *tokens, int N, int d, cudaStream_t stream);

/* out = x / sqrt(mean(x^2) + eps) * gain, row by row; rstd[n] = 1/sqrt(mean + eps). One block per row. */
int nbk_rmsnorm_forward(float *out, float *rstd, const float *x, const float *gain, int N, int d, float eps,
                        cudaStream_t stream);
/* The same, out cast to bf16 (rmsnorm_forward_bf16). */
int nbk_rmsnorm_forward_bf16(nb_bf16 *out, float *rstd, const float *x, const float *gain, int N, int d, float eps,
                             cudaStream_t stream);
/* dx += d(out)/dx^T dout (one block per row); dgain += sum_n dout * x * rstd, each column's sum in order of
 * rows (bitwise rmsnorm_backward's dgain). */
int nbk_rmsnorm_backward(float *dx, float *dgain, const float *dout, const float *x, const float *gain,
                         const float *rstd, int N, int d, cudaStream_t stream);
/* The same, dgain on every SM (its terms into terms, nbk_rmsnorm_wide_scratch_floats(N, d) floats of device
 * memory, then one chain per column in order of rows): the same bits. Used under NB_CUDA_KERNELS=next until it has
 * run on a GPU (nb_cuda_next_kernels). */
size_t nbk_rmsnorm_wide_scratch_floats(int N, int d);
int nbk_rmsnorm_backward_wide(float *dx, float *dgain, const float *dout, const float *x, const float *gain,
                              const float *rstd, int N, int d, float *terms, cudaStream_t stream);

/* Rotary embedding in place on the first n_rot_heads heads of each row of width stride (B sequences of T
 * rows), pairing i with i + hd/2; cos_t, sin_t: [T][hd/2]. Backward rotates by the opposite angle. */
int nbk_rope_forward(float *x, int B, int T, int stride, int n_rot_heads, int hd, const float *cos_t,
                     const float *sin_t, cudaStream_t stream);
int nbk_rope_backward(float *dx, int B, int T, int stride, int n_rot_heads, int hd, const float *cos_t,
                      const float *sin_t, cudaStream_t stream);
/* rope_forward_bf16: the rotation, then every value of the rows rounded to bf16, kept in x and cast into x16.
 * rope_backward_cast_bf16: the backward rotation of dx written to dx16 in bf16 (dx unchanged), the rest of
 * each row cast. */
int nbk_rope_forward_bf16(float *x, nb_bf16 *x16, int B, int T, int stride, int n_rot_heads, int hd,
                          const float *cos_t, const float *sin_t, cudaStream_t stream);
int nbk_rope_backward_cast_bf16(nb_bf16 *dx16, const float *dx, int B, int T, int stride, int n_rot_heads, int hd,
                                const float *cos_t, const float *sin_t, cudaStream_t stream);

/* gu[N][2F] holds (gate | up); h = silu(gate) * up. Backward: dgu (overwritten) from dh. */
int nbk_swiglu_forward(float *h, const float *gu, int N, int F, cudaStream_t stream);
int nbk_swiglu_backward(float *dgu, const float *dh, const float *gu, int N, int F, cudaStream_t stream);
/* The bf16 forms (layers.h): gate/up kept in bf16 and h cast (swiglu_forward_bf16); gate/up cast into gu16
 * and h from those (swiglu_forward_cast_bf16); dgu written in bf16 from bf16 gate/up (swiglu_backward_bf16_cast). */
int nbk_swiglu_forward_bf16(nb_bf16 *h, const nb_bf16 *gu, int N, int F, cudaStream_t stream);
int nbk_swiglu_forward_cast_bf16(nb_bf16 *h, nb_bf16 *gu16, const float *gu, int N, int F, cudaStream_t stream);
int nbk_swiglu_backward_bf16_cast(nb_bf16 *dgu16, const float *dh, const nb_bf16 *gu, int N, int F,
                                  cudaStream_t stream);

/* lse[n] = log-sum-exp of logits' row n (one block per row); *loss_sum (one double, device memory) = the
 * sum over rows of lse - logits[n][targets[n]], in double, in row order (cross_entropy_forward's return
 * value). */
int nbk_cross_entropy_forward(float *lse, double *loss_sum, const float *logits, const int *targets, int N, int V,
                              cudaStream_t stream);
/* In place: logits = scale/n_mean * (softmax(logits) - onehot(target)), from lse. */
int nbk_cross_entropy_backward(float *logits, const float *lse, const int *targets, int N, int V, float scale,
                               int n_mean, cudaStream_t stream);
/* dlogits = bf16((softmax(logits) - onehot(target)) / n_mean), from lse (cross_entropy_grad_bf16). */
int nbk_cross_entropy_grad_bf16(nb_bf16 *dlogits, const float *logits, const float *lse, const int *targets, int N,
                                int V, int n_mean, cudaStream_t stream);
/* Both in one kernel per row (cross_entropy_forward_grad_bf16): lse, the bf16 gradient from it, and the loss's sum
 * as nbk_cross_entropy_forward's. */
int nbk_cross_entropy_forward_grad_bf16(float *lse, nb_bf16 *dlogits, double *loss_sum, const float *logits,
                                        const int *targets, int N, int V, int n_mean, cudaStream_t stream);

/* Causal grouped-query attention (attention_forward, attention_backward: layers.h) on packed rows
 * qkv[B T][(H + 2 Hkv) hd], flash-style (attention.cu): out[B T][H hd], out16 (NULL: none) its bf16 cast,
 * lse[B][H][T]; bf16 = 1 rounds the probabilities (and in backward the score gradients) to bf16 before they
 * multiply, as the CPU does; the caller rounds q, k, v and dout. Backward overwrites all of dqkv and needs
 * delta: nbk_attention_scratch_floats(B, T, H) floats of device memory. head_dim at most 256. */
int nbk_attention_forward(float *out, nb_bf16 *out16, float *lse, const float *qkv, int B, int T, int H, int Hkv,
                          int hd, int bf16, cudaStream_t stream);
int nbk_attention_backward(float *dqkv, const float *dout, const float *out, const float *lse, const float *qkv, int B,
                           int T, int H, int Hkv, int hd, int bf16, float *delta, cudaStream_t stream);
size_t nbk_attention_scratch_floats(int B, int T, int H);
/* delta[(b H + h) T + t] = dO . O of that row, in order of dimension: backward's first step, shared by both forms. */
int nbk_attention_delta(float *delta, const float *dout, const float *out, int B, int T, int H, int hd,
                        cudaStream_t stream);
/* The same two contracts on the tensor cores (attention_mma.cu): bf16 only, head_dim a multiple of 16 up to 128
 * (nbk_attention_mma_supports says whether a shape is one; others are refused with nb_fail). Opt-in until it has
 * run on a GPU: the CUDA backend calls these under NB_CUDA_KERNELS=next (nb_cuda_next_kernels). */
int nbk_attention_mma_supports(int hd, int bf16);
/* Whether the current GPU has bf16 tensor cores (compute capability 8.0 or newer): where not, the calls refuse. */
int nbk_attention_mma_device_ok(void);
int nbk_attention_forward_mma(float *out, nb_bf16 *out16, float *lse, const float *qkv, int B, int T, int H, int Hkv,
                              int hd, int bf16, cudaStream_t stream);
int nbk_attention_backward_mma(float *dqkv, const float *dout, const float *out, const float *lse, const float *qkv,
                               int B, int T, int H, int Hkv, int hd, int bf16, float *delta, cudaStream_t stream);

/* ---- The mixture-of-experts block outside its products (moe.cu; the steps of src/layers/moe.c, whose
 * moe.h states the rule), each the CPU's bits. N tokens, E experts, k experts per token (at most
 * MOE_KERNEL_MAX_K, moe.h's MOE_MAX_K), slots t k + j. ---- */
enum { MOE_KERNEL_MAX_K = 64 };
/* probs (N x E): the router's logits in, softmax out; top, weight (N x k): each token's experts (largest
 * first, ties to the lower index) and their renormalized weights. */
int nbk_moe_route(float *probs, int *top, float *weight, int N, int E, int k, cudaStream_t stream);
/* count (E), start (E + 1): rows per expert and where each begins, each expert's rows rounded up to row_align
 * (1 in fp32; moe.h's MOE_ROW_ALIGN under bf16), the rows past its count marked -1 in row_token; row_token
 * (rows): each grouped row's token, an expert's rows in token order; slot_row (N k): each slot's row. */
int nbk_moe_group(int *count, int *start, int *row_token, int *slot_row, const int *top, int N, int E, int k,
                  int row_align, cudaStream_t stream);
/* Each grouped row (below start[E], of max_rows) the copy of its token's row of x (row_bytes each, even: fp32 or
 * bf16 rows), zeros for a row of no token. */
int nbk_moe_gather(void *xg, const void *x, const int *row_token, const int *start, int E, size_t max_rows,
                   size_t row_bytes, cudaStream_t stream);
/* *aux (device double): the load-balancing loss E sum_e (count_e / N)(mean p_e); load (NULL: none): each
 * expert's share of the N k assignments. */
int nbk_moe_balance(double *aux, float *load, const float *probs, const int *count, int N, int E, int k,
                    cudaStream_t stream);
/* out[t] (d wide) += each of token t's grouped rows, times its weight (weight NULL: 1), in slot order. */
int nbk_moe_add_rows(float *out, const float *rows, const float *weight, const int *slot_row, int N, int k, int d,
                     cudaStream_t stream);
/* dy's grouped rows = weight dout of their token; dp (N x E) = the router's gradient through the
 * renormalized weights (y: the experts' outputs, grouped). */
int nbk_moe_route_backward(float *dy, float *dp, const float *dout, const float *y, const float *probs, const int *top,
                           const float *weight, const int *slot_row, int N, int E, int k, int d, cudaStream_t stream);
/* dp += the aux loss's part (aux_grad E count_e / N^2), then through the softmax, in place. */
int nbk_moe_softmax_backward(float *dp, const float *probs, const int *count, float aux_grad, int N, int E,
                             cudaStream_t stream);

/* ---- The elementwise optimizer rules (src/optim/adamw.c, lion.c, adan.c, mars.c; docs/rules.md) ----
 * Each computes one tensor's step d (n values) from its gradient g and weights w and advances the state
 * buffers, as the rule's step does; the caller then counts the update (the rule's ts->count++). */
typedef struct {
    float lr;
    float beta1, beta2, beta3;  /* beta3: Adan's */
    float eps;
    float weight_decay;         /* this tensor's: 0 for gains (rules.h's decay_of) */
    float gamma;                /* MARS's */
    long count;                 /* updates this tensor's rule has made before this one */
    float momentum;             /* SGD's */
    int nesterov;               /* SGD's: 1 for Nesterov's form */
} nbk_optim_step;

/* SGD with momentum: m = mu m + g; d = lr (nesterov ? g + mu m : m) + lr wd w; m: n. */
int nbk_sgd_step(float *d, float *m, const float *g, const float *w, size_t n, const nbk_optim_step *p,
                 cudaStream_t stream);

/* AdamW (also the auxiliary rule: the caller passes the aux betas as beta1, beta2); m, v: n each. */
int nbk_adamw_step(float *d, float *m, float *v, const float *g, const float *w, size_t n, const nbk_optim_step *p,
                   cudaStream_t stream);
/* Lion; m: n values. */
int nbk_lion_step(float *d, float *m, const float *g, const float *w, size_t n, const nbk_optim_step *p,
                  cudaStream_t stream);
/* Adan in code form; m, v, nn, g_prev: n each (g_prev ignored at count 0). */
int nbk_adan_step(float *d, float *m, float *v, float *nn, float *g_prev, const float *g, const float *w, size_t n,
                  const nbk_optim_step *p, cudaStream_t stream);
/* MARS-AdamW on a matrix: m, v, g_prev: n each. The tensor's norm ||c||_2 is summed in double in a fixed
 * tree (per-block sums, then one block over them) into scratch, which holds nbk_mars_scratch_doubles()
 * doubles of device memory. */
int nbk_mars_step(float *d, float *m, float *v, float *g_prev, const float *g, const float *w, size_t n,
                  const nbk_optim_step *p, double *scratch, cudaStream_t stream);
size_t nbk_mars_scratch_doubles(void);

/* Muon's and NorMuon's element-wise parts (src/optim/muon.c, normuon.c), around Newton-Schulz's products, which
 * run through the backend's cuBLAS on device pointers. Momentum: m = mu m + (1 - mu) g; X = nesterov ?
 * (1 - mu) g + mu m : m. Normalization: X *= 1 / (sqrt(*sq) + 1e-7), *sq (device memory) X's sum of squares
 * (nbk_sum_squares). B[i][i] += a for the r x r B. Muon's step: d = scale O + lrwd w (lrwd = lr wd, rounded
 * on the host as the CPU rounds it). */
int nbk_muon_momentum(float *m, float *X, const float *g, size_t n, float mu, int nesterov, cudaStream_t stream);
int nbk_scale_by_inverse_norm(float *X, size_t n, const double *sq, cudaStream_t stream);
int nbk_add_diagonal(float *B, int r, float a, cudaStream_t stream);
int nbk_muon_step(float *d, const float *O, const float *w, size_t n, float scale, float lrwd, cudaStream_t stream);
/* NorMuon on O (rows x cols): per row r_i = mean_j O_ij^2 (in double), s_i = b2 s_i + (1 - b2) r_i,
 * inv_i = 1 / (sqrt(s_i) + 1e-10); ratio = ||O||_F / (||O'||_F + 1e-10) with O' = O scaled by inv row by row (the
 * rows' sums added in row order by one thread); d = scale (O_ij inv_i ratio) + lrwd w. row_sq: rows doubles,
 * inv: rows floats, ratio: one float, all device scratch. */
int nbk_normuon_step(float *d, const float *O, float *s, const float *w, int rows, int cols, float b2, float scale,
                     float lrwd, double *row_sq, float *inv, float *ratio, cudaStream_t stream);

#ifdef __cplusplus
}
#endif
#endif
