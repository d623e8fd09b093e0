#include "backend/backend.h"
#include "layers/layers.h"

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
    nb_bf16_cast(dy_scratch, dy, (size_t)N * out);
    linear_backward_bf16_cast(be, dx, dx_beta, dw, 1.0f, dy_scratch, x, w, N, in, out);
}

void linear_backward_bf16_cast(const nb_backend *be, float *dx, float dx_beta, float *dw, float alpha, const nb_bf16 *dy16,
                               const nb_bf16 *x, const nb_bf16 *w, int N, int in, int out) {
    nb_gemm_bf16(be, 0, 0, N, in, out, alpha, dy16, out, w, in, dx_beta, dx, in);
    nb_gemm_bf16(be, 1, 0, out, in, N, alpha, dy16, out, x, in, 1.0f, dw, in);
}
