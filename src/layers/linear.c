#include "backend/gemm.h"
#include "layers/layers.h"

void linear_forward(float *y, float beta, const float *x, const float *w, int N, int in, int out) {
    nb_gemm(0, 1, N, out, in, 1.0f, x, in, w, in, beta, y, out);
}

void linear_backward(float *dx, float dx_beta, float *dw, const float *dy, const float *x, const float *w,
                     int N, int in, int out) {
    nb_gemm(0, 0, N, in, out, 1.0f, dy, out, w, in, dx_beta, dx, in);
    nb_gemm(1, 0, out, in, N, 1.0f, dy, out, x, in, 1.0f, dw, in);
}
