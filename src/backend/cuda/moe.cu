/* The mixture-of-experts block's work outside its products, on the GPU (kernels.h states the contracts;
 * src/layers/moe.h the rule, src/layers/moe.c the CPU's functions of the same steps).
 *
 * Every step is the CPU's arithmetic in the CPU's order, so every result is the CPU's bits:
 * - per token, one thread does what moe.c's loop body does for that token (the softmax, the top-k and its
 *   weights, the router's gradient through them, the softmax's backward), serially over the experts and
 *   slots, with the round-to-nearest intrinsics (never contracted: the CPU contracts nothing, in float or
 *   double);
 * - per value, one thread adds a token's rows in slot order (the weighted sum, the input gradient's sum);
 * - the grouping is integer counting, exact in any order: a block per expert counts its assignments, one
 *   thread lays the experts' row ranges out (rounded up to row_align under bf16), and a block per expert
 *   numbers its assignments in token order with a prefix sum; so each expert's rows are in token order, as
 *   the CPU's serial scan puts them;
 * - the balance statistics sum in double in the CPU's order (tokens, then experts) in one block.
 * Between these steps the caller reads the counts (E ints) to size each expert's products, as the CPU
 * loop does. */
#include <math.h>
#include <stdint.h>
#include "backend/bf16.h"
#include "backend/cuda/device.cuh"
#include "backend/cuda/kernels.h"
#include "util/fastmath.h"

namespace {
using namespace nbk;

constexpr int BLOCK = 256;  /* the block scans' width: a power of two */

__device__ __forceinline__ double dmul(double a, double b) { return __dmul_rn(a, b); }
__device__ __forceinline__ double dadd(double a, double b) { return __dadd_rn(a, b); }
__device__ __forceinline__ double ddiv(double a, double b) { return __ddiv_rn(a, b); }

/* Per token: probs (the router's logits on entry) = softmax in place; its k experts, largest first, ties to
 * the lower index; their weights p / (the chosen p summed in slot order). */
__global__ void route_k(float *probs, int *top, float *weight, int N, int E, int k) {
    const int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= N) return;
    float *z = probs + (size_t)t * E, mx = z[0], sum = 0.0f;
    for (int e = 1; e < E; e++) mx = z[e] > mx ? z[e] : mx;
    for (int e = 0; e < E; e++) sum = add(sum, z[e] = nb_expf(sub(z[e], mx)));
    for (int e = 0; e < E; e++) z[e] = dvd(z[e], sum);
    int *tp = top + (size_t)t * k;
    float *w = weight + (size_t)t * k, chosen = 0.0f;
    for (int j = 0; j < k; j++) {
        int best = -1;
        for (int e = 0; e < E; e++) {
            int taken = 0;
            for (int i = 0; i < j; i++) taken |= tp[i] == e;
            if (!taken && (best < 0 || z[e] > z[best])) best = e;
        }
        tp[j] = best;
        chosen = add(chosen, z[best]);
    }
    for (int j = 0; j < k; j++) w[j] = dvd(z[tp[j]], chosen);
}

/* The exclusive prefix sum of v over the block's threads, and the total in *total (sh: BLOCK ints). */
__device__ int block_scan(int v, int *sh, int *total) {
    const int t = threadIdx.x;
    sh[t] = v;
    __syncthreads();
    for (int s = 1; s < BLOCK; s <<= 1) {
        const int x = t >= s ? sh[t - s] : 0;
        __syncthreads();
        sh[t] += x;
        __syncthreads();
    }
    const int inclusive = sh[t];
    *total = sh[BLOCK - 1];
    __syncthreads();
    return inclusive - v;
}

/* count[e] = the assignments to expert e (block e). */
__global__ void count_k(int *count, const int *top, size_t slots) {
    __shared__ int sh[BLOCK];
    int n = 0, total;
    for (size_t r = threadIdx.x; r < slots; r += BLOCK) n += top[r] == (int)blockIdx.x;
    block_scan(n, sh, &total);
    if (threadIdx.x == 0) count[blockIdx.x] = total;
}

/* The experts' row ranges (each rounded up to row_align), and the rows past each count marked as no
 * token's (-1). One thread. */
__global__ void starts_k(int *start, int *row_token, const int *count, int E, int row_align) {
    start[0] = 0;
    for (int e = 0; e < E; e++) {
        start[e + 1] = start[e] + (count[e] + row_align - 1) / row_align * row_align;
        for (int r = start[e] + count[e]; r < start[e + 1]; r++) row_token[r] = -1;
    }
}

/* Block e numbers expert e's assignments in token order (slot r = t k + j, in order of r) from start[e]. */
__global__ void assign_k(int *row_token, int *slot_row, const int *top, const int *start, size_t slots, int k) {
    __shared__ int sh[BLOCK];
    const int e = blockIdx.x;
    int next = start[e];
    for (size_t r0 = 0; r0 < slots; r0 += BLOCK) {
        const size_t r = r0 + threadIdx.x;
        const int mine = r < slots && top[r] == e;
        int total;
        const int before = block_scan(mine, sh, &total);
        if (mine) {
            row_token[next + before] = (int)(r / k);
            slot_row[r] = next + before;
        }
        next += total;
    }
}

/* xg's rows (row_units 16-bit units each) from x's rows of their tokens; zeros in a row of no token. Rows
 * at or past start[E] (the grouped rows' end) are left alone. */
__global__ void gather_k(uint16_t *xg, const uint16_t *x, const int *row_token, const int *start, int E,
                         size_t row_units, size_t total) {
    const size_t rows = (size_t)start[E];
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x) {
        const size_t r = i / row_units, u = i % row_units;
        if (r >= rows) continue;
        const int t = row_token[r];
        xg[i] = t < 0 ? 0 : x[(size_t)t * row_units + u];
    }
}

/* aux = E sum_e (count_e / N)(P_e / N), P_e the sum over tokens of p_te in token order; load_e = count_e /
 * (N k). One block: P_e in shared memory (E doubles), then one thread sums over e in order. */
__global__ void balance_k(double *aux, float *load, const float *probs, const int *count, int N, int E, int k) {
    extern __shared__ double P[];
    for (int e = threadIdx.x; e < E; e += blockDim.x) {
        double s = 0.0;
        for (int t = 0; t < N; t++) s = dadd(s, (double)probs[(size_t)t * E + e]);
        P[e] = s;
        if (load) load[e] = (float)ddiv((double)count[e], dmul((double)N, (double)k));
    }
    __syncthreads();
    if (threadIdx.x) return;
    double sum = 0.0;
    for (int e = 0; e < E; e++) sum = dadd(sum, dmul(ddiv((double)count[e], (double)N), ddiv(P[e], (double)N)));
    *aux = dmul((double)E, sum);
}

/* out[t][i] += w_tj rows[slot_row[t k + j]][i] for j in slot order (w = 1 where weight is NULL). */
__global__ void add_rows_k(float *out, const float *rows, const float *weight, const int *slot_row, int k, size_t d,
                           size_t total) {
    for (size_t v = (size_t)blockIdx.x * blockDim.x + threadIdx.x; v < total; v += (size_t)gridDim.x * blockDim.x) {
        const size_t t = v / d, i = v % d;
        float o = out[v];
        for (int j = 0; j < k; j++) {
            const float w = weight ? weight[t * k + j] : 1.0f;
            o = add(o, mul(w, rows[(size_t)slot_row[t * k + j] * d + i]));
        }
        out[v] = o;
    }
}

/* Per token: dp (E values) = the router's gradient through the renormalized weights: dw_j = dout . y_j (in
 * order of i), dp_i = (dw_i - sum_j w_j dw_j) / (the chosen p summed), zero elsewhere. */
__global__ void route_backward_k(float *dp, const float *dout, const float *y, const float *probs, const int *top,
                                 const float *weight, const int *slot_row, int N, int E, int k, int d) {
    const int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= N) return;
    const float *g = dout + (size_t)t * d, *p = probs + (size_t)t * E;
    float *dpt = dp + (size_t)t * E, dw[MOE_KERNEL_MAX_K], sum = 0.0f, wdw = 0.0f;
    for (int e = 0; e < E; e++) dpt[e] = 0.0f;
    for (int j = 0; j < k; j++) {
        const size_t slot = (size_t)t * k + j;
        const float *yj = y + (size_t)slot_row[slot] * d;
        float dot = 0.0f;
        for (int i = 0; i < d; i++) dot = add(dot, mul(g[i], yj[i]));
        dw[j] = dot;
        sum = add(sum, p[top[slot]]);
        wdw = add(wdw, mul(weight[slot], dot));
    }
    for (int j = 0; j < k; j++) dpt[top[(size_t)t * k + j]] = dvd(sub(dw[j], wdw), sum);
}

/* dy[row of slot t k + j][i] = w_tj dout[t][i]. */
__global__ void scale_rows_k(float *dy, const float *dout, const float *weight, const int *slot_row, int k, size_t d,
                             size_t total) {
    for (size_t v = (size_t)blockIdx.x * blockDim.x + threadIdx.x; v < total; v += (size_t)gridDim.x * blockDim.x) {
        const size_t slot = v / d, i = v % d;
        dy[(size_t)slot_row[slot] * d + i] = mul(weight[slot], dout[slot / k * d + i]);
    }
}

/* Per token: dp += aux_grad E count_e / N^2 (the aux loss's part), then dz = p (dp - p . dp), in place. */
__global__ void softmax_backward_k(float *dp, const float *probs, const int *count, float aux_grad, int N, int E) {
    const int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= N) return;
    const float *p = probs + (size_t)t * E;
    float *dpt = dp + (size_t)t * E, dot = 0.0f;
    for (int e = 0; e < E; e++) {
        const double f = ddiv(dmul((double)E, (double)count[e]), dmul((double)N, (double)N));
        dpt[e] = add(dpt[e], mul(aux_grad, (float)f));
        dot = add(dot, mul(p[e], dpt[e]));
    }
    for (int e = 0; e < E; e++) dpt[e] = mul(p[e], sub(dpt[e], dot));
}

unsigned blocks(size_t n) {
    const size_t b = (n + BLOCK - 1) / BLOCK;
    return (unsigned)(b > 65536 ? 65536 : (b ? b : 1));
}

int bad_moe(const char *what, int N, int E, int k) {
    return nb_fail("cuda: %s: invalid shape (%d tokens, %d experts, %d per token; expected N >= 1, 1 <= k <= E, k <= %d)",
                   what, N, E, k, MOE_KERNEL_MAX_K);
}

bool moe_ok(int N, int E, int k) { return N >= 1 && E >= 1 && k >= 1 && k <= E && k <= MOE_KERNEL_MAX_K; }

}  // namespace

extern "C" {

int nbk_moe_route(float *probs, int *top, float *weight, int N, int E, int k, cudaStream_t stream) {
    if (!moe_ok(N, E, k)) return bad_moe("moe_route", N, E, k);
    route_k<<<(N + 127) / 128, 128, 0, stream>>>(probs, top, weight, N, E, k);
    return launched("moe_route");
}

int nbk_moe_group(int *count, int *start, int *row_token, int *slot_row, const int *top, int N, int E, int k,
                  int row_align, cudaStream_t stream) {
    if (!moe_ok(N, E, k) || row_align < 1) return bad_moe("moe_group", N, E, k);
    const size_t slots = (size_t)N * k;
    count_k<<<E, BLOCK, 0, stream>>>(count, top, slots);
    if (launched("moe_group (count)")) return -1;
    starts_k<<<1, 1, 0, stream>>>(start, row_token, count, E, row_align);
    if (launched("moe_group (starts)")) return -1;
    assign_k<<<E, BLOCK, 0, stream>>>(row_token, slot_row, top, start, slots, k);
    return launched("moe_group (assign)");
}

int nbk_moe_gather(void *xg, const void *x, const int *row_token, const int *start, int E, size_t max_rows,
                   size_t row_bytes, cudaStream_t stream) {
    if (E < 1 || row_bytes == 0 || row_bytes % 2) return nb_fail("cuda: moe_gather: invalid rows (%zu bytes)", row_bytes);
    const size_t units = row_bytes / 2, total = max_rows * units;
    if (!total) return 0;
    gather_k<<<blocks(total), BLOCK, 0, stream>>>((uint16_t *)xg, (const uint16_t *)x, row_token, start, E, units,
                                                  total);
    return launched("moe_gather");
}

int nbk_moe_balance(double *aux, float *load, const float *probs, const int *count, int N, int E, int k,
                    cudaStream_t stream) {
    if (!moe_ok(N, E, k)) return bad_moe("moe_balance", N, E, k);
    const size_t bytes = sizeof(double) * (size_t)E;
    if (bytes > 48 * 1024 && cudaFuncSetAttribute(balance_k, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes))
        return launched("moe_balance");
    balance_k<<<1, BLOCK, bytes, stream>>>(aux, load, probs, count, N, E, k);
    return launched("moe_balance");
}

int nbk_moe_add_rows(float *out, const float *rows, const float *weight, const int *slot_row, int N, int k, int d,
                     cudaStream_t stream) {
    if (N < 1 || k < 1 || d < 1) return nb_fail("cuda: moe_add_rows: invalid shape (%d tokens, %d slots, width %d)", N, k, d);
    const size_t total = (size_t)N * d;
    add_rows_k<<<blocks(total), BLOCK, 0, stream>>>(out, rows, weight, slot_row, k, (size_t)d, total);
    return launched("moe_add_rows");
}

int nbk_moe_route_backward(float *dy, float *dp, const float *dout, const float *y, const float *probs, const int *top,
                           const float *weight, const int *slot_row, int N, int E, int k, int d, cudaStream_t stream) {
    if (!moe_ok(N, E, k) || d < 1) return bad_moe("moe_route_backward", N, E, k);
    const size_t total = (size_t)N * k * d;
    scale_rows_k<<<blocks(total), BLOCK, 0, stream>>>(dy, dout, weight, slot_row, k, (size_t)d, total);
    if (launched("moe_route_backward (dy)")) return -1;
    route_backward_k<<<(N + 127) / 128, 128, 0, stream>>>(dp, dout, y, probs, top, weight, slot_row, N, E, k, d);
    return launched("moe_route_backward (dp)");
}

int nbk_moe_softmax_backward(float *dp, const float *probs, const int *count, float aux_grad, int N, int E,
                             cudaStream_t stream) {
    if (N < 1 || E < 1) return bad_moe("moe_softmax_backward", N, E, 1);
    softmax_backward_k<<<(N + 127) / 128, 128, 0, stream>>>(dp, probs, count, aux_grad, N, E);
    return launched("moe_softmax_backward");
}

}  // extern "C"
