#include "backend/backend.h"
#include "layers/layers.h"
#include "layers/ops.h"

void linear_forward(const nb_backend *be, float *y, float beta, const float *x, const float *w, int N, int in, int out) {
    nb_gemm(be, 0, 1, N, out, in, 1.0f, x, in, w, in, beta, y, out);
}

void linear_backward(const nb_backend *be, float *dx, float dx_beta, float *dw, const float *dy, const float *x, const float *w,
                     int N, int in, int out) {
    nb_gemm(be, 0, 0, N, in, out, 1.0f, dy, out, w, in, dx_beta, dx, in);
    nb_gemm(be, 1, 0, out, in, N, 1.0f, dy, out, x, in, 1.0f, dw, in);
}

void linear_forward_bf16(const nb_backend *be, float *y, float beta, const nb_bf16 *x, const nb_bf16 *w, int N, int in, int out) {
    nb_gemm_bf16(be, 0, 1, N, out, in, 1.0f, x, in, w, in, beta, y, out);
}

void linear_backward_bf16(const nb_backend *be, float *dx, float dx_beta, float *dw, const float *dy, const nb_bf16 *x, const nb_bf16 *w,
                          int N, int in, int out, nb_bf16 *dy_scratch) {
    nb_layers_of(be)->bf16_cast(be, dy_scratch, dy, (size_t)N * out);
    linear_backward_bf16_cast(be, dx, dx_beta, dw, 1.0f, dy_scratch, x, w, N, in, out);
}

void linear_backward_bf16_cast(const nb_backend *be, float *dx, float dx_beta, float *dw, float alpha, const nb_bf16 *dy16,
                               const nb_bf16 *x, const nb_bf16 *w, int N, int in, int out) {
    nb_gemm_bf16(be, 0, 0, N, in, out, alpha, dy16, out, w, in, dx_beta, dx, in);
    nb_gemm_bf16(be, 1, 0, out, in, N, alpha, dy16, out, x, in, 1.0f, dw, in);
}

void linear_backward_to(const nb_backend *be, nb_wgrad_sink *k, float *dx, float *dw, const float *dy, const float *x,
                        const float *w, int N, int in, int out) {
    if (!k) {
        linear_backward(be, dx, 0.0f, dw, dy, x, w, N, in, out);
        return;
    }
    nb_gemm(be, 0, 0, N, in, out, 1.0f, dy, out, w, in, 0.0f, dx, in);
    k->product(k, dw, dy, x, N, in, out);
}

void linear_backward_bf16_cast_to(const nb_backend *be, nb_wgrad_sink *k, float *dx, float *dw, float alpha,
                                  const nb_bf16 *dy16, const nb_bf16 *x, const nb_bf16 *w, int N, int in, int out) {
    if (!k) {
        linear_backward_bf16_cast(be, dx, 0.0f, dw, alpha, dy16, x, w, N, in, out);
        return;
    }
    nb_gemm_bf16(be, 0, 0, N, in, out, alpha, dy16, out, w, in, 0.0f, dx, in);
    k->product16(k, dw, alpha, dy16, x, N, in, out);
}

void linear_backward_bf16_to(const nb_backend *be, nb_wgrad_sink *k, float *dx, float *dw, const float *dy,
                             const nb_bf16 *x, const nb_bf16 *w, int N, int in, int out, nb_bf16 *dy_scratch) {
    nb_layers_of(be)->bf16_cast(be, dy_scratch, dy, (size_t)N * out);
    linear_backward_bf16_cast_to(be, k, dx, dw, 1.0f, dy_scratch, x, w, N, in, out);
}
