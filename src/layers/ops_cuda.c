/* The layers on the GPU's memory (ops.h's table for the CUDA backend's device memory mode,
 * nb_cuda_open_device_memory): each entry launches the kernel of its name (src/backend/cuda/kernels.h) on
 * the backend's stream; a failed launch is recorded in the backend and reported by its check, as a
 * product's failure is. Built only with -DNB_CUDA=ON. Checked on an H100 (docs/gpu.md). */
#ifdef NB_HAVE_CUDA
#include <math.h>
#include <cuda_runtime.h>
#include "backend/cuda.h"
#include "backend/cuda/kernels.h"
#include "layers/ops.h"
#include "util/error.h"

static cudaStream_t stream_of(const nb_backend *be) { return (cudaStream_t)nb_cuda_stream(be); }
/* The loss's sum (one double of device memory) into *total, waited for: 0, or -1 recorded in the backend. */
static int loss_back(const nb_backend *be, const double *sum, double *total) {
    cudaError_t e = cudaMemcpyAsync(total, sum, sizeof *total, cudaMemcpyDeviceToHost, stream_of(be));
    if (e == cudaSuccess) e = cudaStreamSynchronize(stream_of(be));
    if (e == cudaSuccess) return 0;
    nb_fail("cuda: reading the loss back: %s (%s)", cudaGetErrorString(e), cudaGetErrorName(e));
    nb_cuda_keep_failure(be);
    return -1;
}
static void done(const nb_backend *be, int rc) {
    if (rc) nb_cuda_keep_failure(be);
}

static void g_embedding_forward(const nb_backend *be, float *out, const int *tokens, const float *table, int N, int d) {
    done(be, nbk_embedding_forward(out, tokens, table, N, d, stream_of(be)));
}
static void g_embedding_backward(const nb_backend *be, float *dtable, const float *dout, const int *tokens, int N,
                                 int d) {
    done(be, nbk_embedding_backward(dtable, dout, tokens, N, d, stream_of(be)));
}
static void g_rmsnorm_forward(const nb_backend *be, float *out, float *rstd, const float *x, const float *gain, int N,
                              int d, float eps) {
    done(be, nbk_rmsnorm_forward(out, rstd, x, gain, N, d, eps, stream_of(be)));
}
static void g_rmsnorm_backward(const nb_backend *be, float *dx, float *dgain, const float *dout, const float *x,
                               const float *gain, const float *rstd, int N, int d) {
    if (!nb_cuda_next_kernels(be)) {
        done(be, nbk_rmsnorm_backward(dx, dgain, dout, x, gain, rstd, N, d, stream_of(be)));
        return;
    }
    float *terms = nb_cuda_scratch_hold(be, sizeof(float) * nbk_rmsnorm_wide_scratch_floats(N, d));
    if (!terms) return;  /* the failure is recorded */
    const int rc = nbk_rmsnorm_backward_wide(dx, dgain, dout, x, gain, rstd, N, d, terms, stream_of(be));
    nb_cuda_scratch_release(be);
    done(be, rc);
}
static void g_rope_forward(const nb_backend *be, float *x, int B, int T, int stride, int n_rot, int hd,
                           const float *cos_t, const float *sin_t) {
    done(be, nbk_rope_forward(x, B, T, stride, n_rot, hd, cos_t, sin_t, stream_of(be)));
}
static void g_rope_backward(const nb_backend *be, float *dx, int B, int T, int stride, int n_rot, int hd,
                            const float *cos_t, const float *sin_t) {
    done(be, nbk_rope_backward(dx, B, T, stride, n_rot, hd, cos_t, sin_t, stream_of(be)));
}
/* Attention on the tensor cores where the backend was asked for the kernels not yet run on a GPU
 * (NB_CUDA_KERNELS=next) and the shape allows. */
static int tensor_attention(const nb_backend *be, int hd, int bf16) {
    return nb_cuda_next_kernels(be) && nbk_attention_mma_supports(hd, bf16) && nbk_attention_mma_device_ok();
}
static int g_attention_forward(const nb_backend *be, float *out, nb_bf16 *out16, float *lse, const float *qkv, int B,
                               int T, int H, int Hkv, int hd, int bf16) {
    if (tensor_attention(be, hd, bf16))
        return nbk_attention_forward_mma(out, out16, lse, qkv, B, T, H, Hkv, hd, bf16, stream_of(be)) ? -1 : 0;
    return nbk_attention_forward(out, out16, lse, qkv, B, T, H, Hkv, hd, bf16, stream_of(be)) ? -1 : 0;
}
static int g_attention_backward(const nb_backend *be, float *dqkv, const float *dout, const float *out,
                                const float *lse, const float *qkv, int B, int T, int H, int Hkv, int hd, int bf16) {
    float *delta = nb_cuda_scratch_hold(be, sizeof(float) * nbk_attention_scratch_floats(B, T, H));
    if (!delta) return -1;
    const int rc = tensor_attention(be, hd, bf16)
                       ? nbk_attention_backward_mma(dqkv, dout, out, lse, qkv, B, T, H, Hkv, hd, bf16, delta, stream_of(be))
                       : nbk_attention_backward(dqkv, dout, out, lse, qkv, B, T, H, Hkv, hd, bf16, delta, stream_of(be));
    nb_cuda_scratch_release(be);  /* queued: D is written and read before any later user's work */
    return rc ? -1 : 0;
}
static void g_swiglu_forward(const nb_backend *be, float *h, const float *gu, int N, int F) {
    done(be, nbk_swiglu_forward(h, gu, N, F, stream_of(be)));
}
static void g_swiglu_backward(const nb_backend *be, float *dgu, const float *dh, const float *gu, int N, int F) {
    done(be, nbk_swiglu_backward(dgu, dh, gu, N, F, stream_of(be)));
}
/* After a loss kernel (rc) that wrote its sum into the held scratch: the sum read back, the scratch released;
 * NaN after a recorded failure. */
static double loss_and_release(const nb_backend *be, int rc, const double *sum) {
    double total = NAN;
    if (rc) nb_cuda_keep_failure(be);
    const int back = rc || loss_back(be, sum, &total);
    nb_cuda_scratch_release(be);
    return back ? NAN : total;
}
/* The loss's sum waits for the GPU: it comes back to the host (NaN after a recorded failure). */
static double g_cross_entropy_forward(const nb_backend *be, float *lse, const float *logits, const int *targets, int N,
                                      int V) {
    double *sum = nb_cuda_scratch_hold(be, sizeof(double));
    if (!sum) return NAN;
    return loss_and_release(be, nbk_cross_entropy_forward(lse, sum, logits, targets, N, V, stream_of(be)), sum);
}
static void g_cross_entropy_backward(const nb_backend *be, float *logits, const float *lse, const int *targets, int N,
                                     int V, float scale, int n_mean) {
    done(be, nbk_cross_entropy_backward(logits, lse, targets, N, V, scale, n_mean, stream_of(be)));
}

static void g_bf16_cast(const nb_backend *be, nb_bf16 *dst, const float *src, size_t n) {
    done(be, nbk_bf16_cast(dst, src, n, stream_of(be)));
}
static void g_bf16_round(const nb_backend *be, float *x, size_t n) {
    done(be, nbk_bf16_round(x, n, stream_of(be)));
}
static void g_bf16_widen(const nb_backend *be, float *dst, const nb_bf16 *src, size_t n) {
    done(be, nbk_bf16_widen(dst, src, n, stream_of(be)));
}
static void g_rmsnorm_forward_bf16(const nb_backend *be, nb_bf16 *out, float *rstd, const float *x, const float *gain, int N, int d, float eps) {
    done(be, nbk_rmsnorm_forward_bf16(out, rstd, x, gain, N, d, eps, stream_of(be)));
}
static void g_rope_forward_bf16(const nb_backend *be, float *x, nb_bf16 *x16, int B, int T, int stride, int n_rot_heads, int hd, const float *cos_t, const float *sin_t) {
    done(be, nbk_rope_forward_bf16(x, x16, B, T, stride, n_rot_heads, hd, cos_t, sin_t, stream_of(be)));
}
static void g_rope_backward_cast_bf16(const nb_backend *be, nb_bf16 *dx16, const float *dx, int B, int T, int stride, int n_rot_heads, int hd, const float *cos_t, const float *sin_t) {
    done(be, nbk_rope_backward_cast_bf16(dx16, dx, B, T, stride, n_rot_heads, hd, cos_t, sin_t, stream_of(be)));
}
static void g_swiglu_forward_cast_bf16(const nb_backend *be, nb_bf16 *h, nb_bf16 *gu16, const float *gu, int N, int F) {
    done(be, nbk_swiglu_forward_cast_bf16(h, gu16, gu, N, F, stream_of(be)));
}
static void g_swiglu_backward_bf16_cast(const nb_backend *be, nb_bf16 *dgu16, const float *dh, const nb_bf16 *gu, int N, int F) {
    done(be, nbk_swiglu_backward_bf16_cast(dgu16, dh, gu, N, F, stream_of(be)));
}
static void g_cross_entropy_grad_bf16(const nb_backend *be, nb_bf16 *dlogits, const float *logits, const float *lse, const int *targets, int N, int V, int n_mean) {
    done(be, nbk_cross_entropy_grad_bf16(dlogits, logits, lse, targets, N, V, n_mean, stream_of(be)));
}
/* The loss's sum comes back to the host, as g_cross_entropy_forward's. */
static double g_cross_entropy_forward_grad_bf16(const nb_backend *be, float *lse, nb_bf16 *dlogits, const float *logits,
                                                const int *targets, int N, int V, int n_mean) {
    double *sum = nb_cuda_scratch_hold(be, sizeof(double));
    if (!sum) return NAN;
    return loss_and_release(
        be, nbk_cross_entropy_forward_grad_bf16(lse, dlogits, sum, logits, targets, N, V, n_mean, stream_of(be)), sum);
}

static void g_moe_route(const nb_backend *be, float *probs, int *top, float *weight, int N, int E, int k) {
    done(be, nbk_moe_route(probs, top, weight, N, E, k, stream_of(be)));
}
static void g_moe_group(const nb_backend *be, int *count, int *start, int *row_token, int *slot_row, const int *top,
                        int N, int E, int k, int row_align) {
    done(be, nbk_moe_group(count, start, row_token, slot_row, top, N, E, k, row_align, stream_of(be)));
}
static void g_moe_gather(const nb_backend *be, void *xg, const void *x, const int *row_token, const int *start, int E,
                         size_t max_rows, size_t row_bytes) {
    done(be, nbk_moe_gather(xg, x, row_token, start, E, max_rows, row_bytes, stream_of(be)));
}
/* The load-balancing loss waits for the GPU, as the cross-entropy's sum does (NaN after a recorded failure). */
static double g_moe_balance(const nb_backend *be, float *load, const float *probs, const int *count, int N, int E,
                            int k) {
    double *aux = nb_cuda_scratch_hold(be, sizeof(double));
    if (!aux) return NAN;
    return loss_and_release(be, nbk_moe_balance(aux, load, probs, count, N, E, k, stream_of(be)), aux);
}
static void g_moe_add_rows(const nb_backend *be, float *out, const float *rows, const float *weight,
                           const int *slot_row, int N, int k, int d) {
    done(be, nbk_moe_add_rows(out, rows, weight, slot_row, N, k, d, stream_of(be)));
}
static void g_moe_route_backward(const nb_backend *be, float *dy, float *dp, const float *dout, const float *y,
                                 const float *probs, const int *top, const float *weight, const int *slot_row, int N,
                                 int E, int k, int d) {
    done(be, nbk_moe_route_backward(dy, dp, dout, y, probs, top, weight, slot_row, N, E, k, d, stream_of(be)));
}
static void g_moe_softmax_backward(const nb_backend *be, float *dp, const float *probs, const int *count,
                                   float aux_grad, int N, int E) {
    done(be, nbk_moe_softmax_backward(dp, probs, count, aux_grad, N, E, stream_of(be)));
}

static const nb_layer_ops cuda_layers = {
    .embedding_forward = g_embedding_forward,
    .embedding_backward = g_embedding_backward,
    .rmsnorm_forward = g_rmsnorm_forward,
    .rmsnorm_backward = g_rmsnorm_backward,
    .rope_forward = g_rope_forward,
    .rope_backward = g_rope_backward,
    .attention_forward = g_attention_forward,
    .attention_backward = g_attention_backward,
    .swiglu_forward = g_swiglu_forward,
    .swiglu_backward = g_swiglu_backward,
    .cross_entropy_forward = g_cross_entropy_forward,
    .cross_entropy_backward = g_cross_entropy_backward,
    .bf16_cast = g_bf16_cast,
    .bf16_round = g_bf16_round,
    .bf16_widen = g_bf16_widen,
    .rmsnorm_forward_bf16 = g_rmsnorm_forward_bf16,
    .rope_forward_bf16 = g_rope_forward_bf16,
    .rope_backward_cast_bf16 = g_rope_backward_cast_bf16,
    .swiglu_forward_cast_bf16 = g_swiglu_forward_cast_bf16,
    .swiglu_backward_bf16_cast = g_swiglu_backward_bf16_cast,
    .cross_entropy_grad_bf16 = g_cross_entropy_grad_bf16,
    .cross_entropy_forward_grad_bf16 = g_cross_entropy_forward_grad_bf16,
    .moe_route = g_moe_route,
    .moe_group = g_moe_group,
    .moe_gather = g_moe_gather,
    .moe_balance = g_moe_balance,
    .moe_add_rows = g_moe_add_rows,
    .moe_route_backward = g_moe_route_backward,
    .moe_softmax_backward = g_moe_softmax_backward,
};

const nb_layer_ops *nb_layer_ops_cuda(void) { return &cuda_layers; }
#else
typedef int nb_no_cuda_layers; /* ISO C wants a translation unit to declare something */
#endif
