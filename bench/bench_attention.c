/* Attention's forward and backward (src/layers/attention.c) on one step's shapes, alone: median of 7
 * calls each after one warm-up, GFLOP/s by causal attention's useful products (per sequence and query
 * head: forward Q K^T and P V, 2 T^2 hd; backward the scores again, dO V^T, dS K, dS^T Q, P^T dO,
 * 5 T^2 hd). For comparing one attention with another: build both, run them in turn.
 * Usage: bench_attention B T H HKV HD [bf16]   e.g. bench_attention 8 512 8 4 64   (medium at B 8 x T 512);
 * bf16: attention as --precision bf16 runs it (q, k, v and dO rounded to bf16 values first). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "backend/backend.h"
#include "layers/layers.h"
#include "util/clock.h"

enum { CALLS = 7 };

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static float *random_values(size_t n, unsigned seed, float amplitude) {
    float *x = malloc(sizeof(float) * n);
    if (!x) {
        fprintf(stderr, "bench_attention: out of memory\n");
        exit(1);
    }
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1103515245u + 12345u;
        x[i] = amplitude * ((float)((seed >> 9) & 0xffff) / 65536.0f - 0.5f);
    }
    return x;
}

int main(int argc, char **argv) {
    if (argc != 6 && !(argc == 7 && !strcmp(argv[6], "bf16"))) {
        fprintf(stderr, "usage: bench_attention B T H HKV HD [bf16]\n");
        return 2;
    }
    const int bf16 = argc == 7;
    const int B = atoi(argv[1]), T = atoi(argv[2]), H = atoi(argv[3]), Hkv = atoi(argv[4]), hd = atoi(argv[5]);
    if (B < 1 || T < 1 || H < 1 || Hkv < 1 || hd < 1 || H % Hkv) {
        fprintf(stderr, "bench_attention: B, T, H, HKV, HD must be positive and HKV must divide H\n");
        return 2;
    }
    const size_t N = (size_t)B * T, stride = (size_t)(H + 2 * Hkv) * hd;
    float *qkv = random_values(N * stride, 1, 4.0f), *dout = random_values(N * H * hd, 2, 1.0f);
    float *out = malloc(sizeof(float) * N * H * hd), *lse = malloc(sizeof(float) * N * H);
    float *dqkv = malloc(sizeof(float) * N * stride);
    if (bf16) {
        nb_bf16_round(qkv, N * stride);
        nb_bf16_round(dout, N * H * hd);
    }
    const nb_backend *be = nb_backend_default();
    double fwd[CALLS], bwd[CALLS];
    for (int c = -1; c < CALLS; c++) {
        double t = nb_now();
        attention_forward(be, out, NULL, lse, qkv, B, T, H, Hkv, hd, bf16);
        double u = nb_now();
        attention_backward(be, dqkv, dout, out, lse, qkv, B, T, H, Hkv, hd, bf16);
        double v = nb_now();
        if (c >= 0) fwd[c] = u - t, bwd[c] = v - u;
    }
    qsort(fwd, CALLS, sizeof(double), cmp_double);
    qsort(bwd, CALLS, sizeof(double), cmp_double);
    const double per = (double)B * H * T * T * hd;
    double check = 0;
    for (size_t i = 0; i < N * stride; i++) check += dqkv[i];
    printf("attention %s B%d T%d H%d Hkv%d hd%d: forward %.2f ms (%.1f GFLOP/s), backward %.2f ms (%.1f GFLOP/s), "
           "sum of dqkv %.6g\n",
           bf16 ? (be->tile_bf16_native ? "bf16 (bf16 instructions)" : "bf16 (emulated)") : "fp32", B, T, H,
           Hkv, hd, 1e3 * fwd[CALLS / 2], 2 * per / fwd[CALLS / 2] * 1e-9, 1e3 * bwd[CALLS / 2],
           5 * per / bwd[CALLS / 2] * 1e-9, check);
    free(qkv), free(dout), free(out), free(lse), free(dqkv);
    return 0;
}
