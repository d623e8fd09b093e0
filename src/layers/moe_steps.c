/* The mixture-of-experts block's steps outside its products, on the host's memory (moe.h states each): the
 * CPU's and the guarded device's entries of the layer table (ops.c). Apart from moe.c's passes, which call them
 * through that table, so that no file of this part calls back into one that calls it. */
#include <string.h>
#include "layers/moe.h"
#include "util/fastmath.h"

void moe_route(float *probs, int *top, float *weight, int N, int E, int k) {
#pragma omp parallel for schedule(static)
    for (int t = 0; t < N; t++) {
        float *z = probs + (size_t)t * E, mx = z[0], sum = 0.0f;
        for (int e = 1; e < E; e++) mx = z[e] > mx ? z[e] : mx;
        for (int e = 0; e < E; e++) sum += (z[e] = nb_expf(z[e] - mx));
        for (int e = 0; e < E; e++) z[e] /= sum;
    }
#pragma omp parallel for schedule(static)
    for (int t = 0; t < N; t++) {
        const float *p = probs + (size_t)t * E;
        int *tt = top + (size_t)t * k;
        float *w = weight + (size_t)t * k, sum = 0.0f;
        for (int j = 0; j < k; j++) {
            int best = -1;
            for (int e = 0; e < E; e++) {
                int taken = 0;
                for (int i = 0; i < j; i++) taken |= tt[i] == e;
                if (!taken && (best < 0 || p[e] > p[best])) best = e;
            }
            tt[j] = best;
            sum += p[best];
        }
        for (int j = 0; j < k; j++) w[j] = p[tt[j]] / sum;
    }
}

void moe_group(int *count, int *start, int *row_token, int *slot_row, const int *top, int N, int E, int k,
               int row_align) {
    memset(count, 0, sizeof(int) * (size_t)E);
    for (size_t r = 0; r < (size_t)N * k; r++) count[top[r]]++;
    start[0] = 0;
    for (int e = 0; e < E; e++) {
        start[e + 1] = start[e] + (count[e] + row_align - 1) / row_align * row_align;
        for (int r = start[e] + count[e]; r < start[e + 1]; r++) row_token[r] = -1;
    }
    memset(count, 0, sizeof(int) * (size_t)E);  /* counted again as the rows are numbered: the same counts */
    for (int t = 0; t < N; t++)
        for (int j = 0; j < k; j++) {
            const int e = top[(size_t)t * k + j], row = start[e] + count[e]++;
            row_token[row] = t;
            slot_row[(size_t)t * k + j] = row;
        }
}

void moe_gather(void *xg, const void *x, const int *row_token, const int *start, int E, size_t row_bytes) {
    const int R = start[E];
#pragma omp parallel for schedule(static)
    for (int r = 0; r < R; r++) {
        char *dst = (char *)xg + (size_t)r * row_bytes;
        if (row_token[r] < 0) memset(dst, 0, row_bytes);
        else memcpy(dst, (const char *)x + (size_t)row_token[r] * row_bytes, row_bytes);
    }
}

double moe_balance(float *load, const float *probs, const int *count, int N, int E, int k) {
    double aux = 0.0;
    for (int e = 0; e < E; e++) {
        double P = 0.0;
        for (int t = 0; t < N; t++) P += probs[(size_t)t * E + e];
        aux += ((double)count[e] / N) * (P / N);
        if (load) load[e] = (float)((double)count[e] / ((double)N * k));
    }
    return E * aux;
}

void moe_add_rows(float *out, const float *rows, const float *weight, const int *slot_row, int N, int k, int d) {
#pragma omp parallel for schedule(static)
    for (int t = 0; t < N; t++)
        for (int j = 0; j < k; j++) {
            const float w = weight ? weight[(size_t)t * k + j] : 1.0f;  /* 1 x g is g exactly */
            const float *r = rows + (size_t)slot_row[(size_t)t * k + j] * d;
            float *o = out + (size_t)t * d;
            for (int i = 0; i < d; i++) o[i] += w * r[i];
        }
}

void moe_route_backward(float *dy, float *dp, const float *dout, const float *y, const float *probs, const int *top,
                        const float *weight, const int *slot_row, int N, int E, int k, int d) {
#pragma omp parallel for schedule(static)
    for (int t = 0; t < N; t++) {
        const float *g = dout + (size_t)t * d, *p = probs + (size_t)t * E;
        float *dpt = dp + (size_t)t * E, dw[MOE_MAX_K], sum = 0.0f, wdw = 0.0f;
        memset(dpt, 0, sizeof(float) * (size_t)E);
        for (int j = 0; j < k; j++) {
            const size_t row = (size_t)slot_row[(size_t)t * k + j];
            const float w = weight[(size_t)t * k + j], *yr = y + row * d;
            float *dyr = dy + row * d, dot = 0.0f;
            for (int i = 0; i < d; i++) {
                dyr[i] = w * g[i];
                dot += g[i] * yr[i];
            }
            dw[j] = dot;
            sum += p[top[(size_t)t * k + j]];
            wdw += w * dot;
        }
        for (int j = 0; j < k; j++) dpt[top[(size_t)t * k + j]] = (dw[j] - wdw) / sum;
    }
}

void moe_softmax_backward(float *dp, const float *probs, const int *count, float aux_grad, int N, int E) {
#pragma omp parallel for schedule(static)
    for (int t = 0; t < N; t++) {
        const float *p = probs + (size_t)t * E;
        float *dpt = dp + (size_t)t * E, dot = 0.0f;
        for (int e = 0; e < E; e++) {
            dpt[e] += aux_grad * (float)((double)E * count[e] / ((double)N * N));
            dot += p[e] * dpt[e];
        }
        for (int e = 0; e < E; e++) dpt[e] = p[e] * (dpt[e] - dot);
    }
}
