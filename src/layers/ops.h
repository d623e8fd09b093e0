/* Internal: the layers' functions as a table, so that a stage runs them on its backend's memory
 * (docs/architecture.md, "Backends"). The CPU's table (ops.c) calls the functions of layers.h; a backend
 * whose memory the host cannot read (a GPU's: nb_backend.device_memory) brings its own table
 * (nb_backend.layers), each entry with the contract of the layers.h function of the same name on that
 * memory. Every entry takes the stage's backend first. A failure inside a void entry is recorded in the
 * backend, as a product's is, and reported by nb_backend_check.
 *
 * The stage calls only these (and the products, nb_gemm and the linear layers, which go through the backend
 * already) on its memory; copies within that memory are nb_backend_copy and nb_backend_zero, and what comes
 * from the host (tokens, targets) arrives by nb_backend_from_host. The table holds the float32 layers, their
 * bf16 forms and the mixture-of-experts block's steps outside its products (layers/moe.h). */
#ifndef NB_LAYERS_OPS_H
#define NB_LAYERS_OPS_H
#include "backend/backend.h"

typedef struct nb_layer_ops {
    void (*embedding_forward)(const nb_backend *be, float *out, const int *tokens, const float *table, int N, int d);
    void (*embedding_backward)(const nb_backend *be, float *dtable, const float *dout, const int *tokens, int N, int d);
    void (*rmsnorm_forward)(const nb_backend *be, float *out, float *rstd, const float *x, const float *gain, int N,
                            int d, float eps);
    void (*rmsnorm_backward)(const nb_backend *be, float *dx, float *dgain, const float *dout, const float *x,
                             const float *gain, const float *rstd, int N, int d);
    void (*rope_forward)(const nb_backend *be, float *x, int B, int T, int stride, int n_rot_heads, int hd,
                         const float *cos_t, const float *sin_t);
    void (*rope_backward)(const nb_backend *be, float *dx, int B, int T, int stride, int n_rot_heads, int hd,
                          const float *cos_t, const float *sin_t);
    int (*attention_forward)(const nb_backend *be, float *out, nb_bf16 *out16, float *lse, const float *qkv, int B,
                             int T, int H, int Hkv, int hd, int bf16);
    int (*attention_backward)(const nb_backend *be, float *dqkv, const float *dout, const float *out, const float *lse,
                              const float *qkv, int B, int T, int H, int Hkv, int hd, int bf16);
    void (*swiglu_forward)(const nb_backend *be, float *h, const float *gu, int N, int F);
    void (*swiglu_backward)(const nb_backend *be, float *dgu, const float *dh, const float *gu, int N, int F);
    /* The loss's sum comes back to the host (a device waits for it). */
    double (*cross_entropy_forward)(const nb_backend *be, float *lse, const float *logits, const int *targets, int N,
                                    int V);
    void (*cross_entropy_backward)(const nb_backend *be, float *logits, const float *lse, const int *targets, int N,
                                   int V, float scale, int n_mean);
    /* The bf16 path's entries (under --precision bf16; layers.h's and backend/bf16.h's functions of the same names). */
    void (*bf16_cast)(const nb_backend *be, nb_bf16 *dst, const float *src, size_t n);
    void (*bf16_round)(const nb_backend *be, float *x, size_t n);
    void (*bf16_widen)(const nb_backend *be, float *dst, const nb_bf16 *src, size_t n);
    void (*rmsnorm_forward_bf16)(const nb_backend *be, nb_bf16 *out, float *rstd, const float *x, const float *gain, int N, int d, float eps);
    void (*rope_forward_bf16)(const nb_backend *be, float *x, nb_bf16 *x16, int B, int T, int stride, int n_rot_heads, int hd, const float *cos_t, const float *sin_t);
    void (*rope_backward_cast_bf16)(const nb_backend *be, nb_bf16 *dx16, const float *dx, int B, int T, int stride, int n_rot_heads, int hd, const float *cos_t, const float *sin_t);
    void (*swiglu_forward_cast_bf16)(const nb_backend *be, nb_bf16 *h, nb_bf16 *gu16, const float *gu, int N, int F);
    void (*swiglu_backward_bf16_cast)(const nb_backend *be, nb_bf16 *dgu16, const float *dh, const nb_bf16 *gu, int N, int F);
    void (*cross_entropy_grad_bf16)(const nb_backend *be, nb_bf16 *dlogits, const float *logits, const float *lse, const int *targets, int N, int V, int n_mean);
    double (*cross_entropy_forward_grad_bf16)(const nb_backend *be, float *lse, nb_bf16 *dlogits, const float *logits, const int *targets, int N, int V, int n_mean);
    /* The mixture-of-experts block's steps outside its products (layers/moe.h's functions of the same names;
     * moe_gather's max_rows bounds start[E], which a device does not read on the host). */
    void (*moe_route)(const nb_backend *be, float *probs, int *top, float *weight, int N, int E, int k);
    void (*moe_group)(const nb_backend *be, int *count, int *start, int *row_token, int *slot_row, const int *top, int N,
                      int E, int k, int row_align);
    void (*moe_gather)(const nb_backend *be, void *xg, const void *x, const int *row_token, const int *start, int E,
                       size_t max_rows, size_t row_bytes);
    /* The loss comes back to the host (a device waits for it); load (E values, NULL: none) stays in be's memory. */
    double (*moe_balance)(const nb_backend *be, float *load, const float *probs, const int *count, int N, int E, int k);
    void (*moe_add_rows)(const nb_backend *be, float *out, const float *rows, const float *weight, const int *slot_row,
                         int N, int k, int d);
    void (*moe_route_backward)(const nb_backend *be, float *dy, float *dp, const float *dout, const float *y,
                               const float *probs, const int *top, const float *weight, const int *slot_row, int N,
                               int E, int k, int d);
    void (*moe_softmax_backward)(const nb_backend *be, float *dp, const float *probs, const int *count, float aux_grad,
                                 int N, int E);
} nb_layer_ops;

/* The CPU's table: layers.h's functions. */
const nb_layer_ops *nb_layer_ops_cpu(void);
/* The CUDA backend's device memory mode's (ops_cuda.c, -DNB_CUDA=ON only): the kernels of
 * src/backend/cuda/kernels.h on the backend's stream. */
const nb_layer_ops *nb_layer_ops_cuda(void);
/* The guarded device's (ops_guarded.c; backend/guarded.h): the CPU's functions on its mirrors. */
const nb_layer_ops *nb_layer_ops_guarded(void);
/* be's table: its own, else its device's (the CPU's on the host's memory; NULL for a device this build
 * has no table for). */
const nb_layer_ops *nb_layers_of(const nb_backend *be);
#endif
