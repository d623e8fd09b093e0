/* The CUDA kernels of the layers that are not matrix products and of the elementwise optimizers
 * (kernels.h states the contracts: those of src/layers/layers.h and src/optim's rules, on device memory).
 *
 * How they keep the CPU's values:
 * - Elementwise arithmetic is written with the round-to-nearest intrinsics (__fmul_rn, __fadd_rn, ...),
 *   which the compiler never contracts into fused multiply-adds, in the order the C expressions of the CPU
 *   functions evaluate (the CPU build contracts nothing either: -std=c11 means -ffp-contract=off). exp is
 *   util/fastmath.h's nb_expf and the bf16 casts backend/bf16.h's, compiled for the GPU. So embedding, RoPE,
 *   SwiGLU, the loss's gradient, the optimizers' steps (given the same norm, for MARS), RMSNorm's dgain and
 *   the bf16 forms of these are the CPU's bits.
 * - Reductions have a fixed order that depends only on the shape: each thread of a block adds its strided
 *   elements in order, then the block adds the threads' sums in a fixed tree (block_sum). No atomics, so a
 *   run gives the same bits every time. The row reductions (RMSNorm's sums, the log-sum-exp) differ from the
 *   CPU's vector-lane order by rounding only; the sums the CPU makes in order of rows (dgain, embedding's
 *   gradient, the loss) are made in that order here too, one thread per column (or one thread). */
#include <math.h>
#include <stdint.h>
#include "backend/bf16.h"
#include "backend/cuda/device.cuh"
#include "backend/cuda/kernels.h"
#include "util/fastmath.h"
extern "C" {
#include "util/error.h"
}

namespace {
using namespace nbk;

constexpr int BLOCK = 256;            /* threads of every block; block_sum's tree assumes a power of two */
constexpr int MAX_BLOCKS = 1 << 16;   /* grid-stride loops above this */
constexpr int MARS_BLOCKS = 128;      /* the norm's per-block sums: a fixed count, so a fixed order */
static_assert((BLOCK & (BLOCK - 1)) == 0, "block_sum needs a power of two");


/* Loads and stores in float32 or bf16 (widened exactly; rounded to nearest even, as nb_bf16_from_float). */
__device__ __forceinline__ float load(const float *p) { return *p; }
__device__ __forceinline__ float load(const nb_bf16 *p) { return nb_bf16_to_float(*p); }
__device__ __forceinline__ void store(float *p, float v) { *p = v; }
__device__ __forceinline__ void store(nb_bf16 *p, float v) { *p = nb_bf16_from_float(v); }

/* The sum of v over the block's threads in a fixed tree: thread t adds t + s for s = BLOCK/2, ..., 1. Every
 * thread of the block calls it and gets the sum; sh holds BLOCK values. */
template <typename T> __device__ T block_sum(T v, T *sh) {
    const int t = threadIdx.x;
    sh[t] = v;
    __syncthreads();
    for (int s = BLOCK / 2; s > 0; s >>= 1) {
        if (t < s) sh[t] = sh[t] + sh[t + s];
        __syncthreads();
    }
    const T total = sh[0];
    __syncthreads();  /* sh may be reused at once */
    return total;
}

__device__ float block_max(float v, float *sh) {
    const int t = threadIdx.x;
    sh[t] = v;
    __syncthreads();
    for (int s = BLOCK / 2; s > 0; s >>= 1) {
        if (t < s) sh[t] = sh[t + s] > sh[t] ? sh[t + s] : sh[t];
        __syncthreads();
    }
    const float m = sh[0];
    __syncthreads();
    return m;
}

int blocks_for(size_t n) {
    const size_t b = (n + BLOCK - 1) / BLOCK;
    return b > (size_t)MAX_BLOCKS ? MAX_BLOCKS : (int)(b ? b : 1);
}

#define GRID_STRIDE(i, n) for (size_t i = (size_t)blockIdx.x * BLOCK + threadIdx.x; i < (n); i += (size_t)gridDim.x * BLOCK)

/* ---- Embedding ---- */

__global__ void embedding_forward_k(float *out, const int *tokens, const float *table, int d, size_t total) {
    GRID_STRIDE(k, total) {
        const size_t n = k / (size_t)d, i = k % (size_t)d;
        out[k] = table[(size_t)tokens[n] * d + i];
    }
}

/* One thread per column, the tokens in order: the CPU's order of additions into each value. */
__global__ void embedding_backward_k(float *dtable, const float *dout, const int *tokens, int N, int d) {
    const int i = blockIdx.x * BLOCK + threadIdx.x;
    if (i >= d) return;
    for (int n = 0; n < N; n++) {
        float *p = dtable + (size_t)tokens[n] * d + i;
        *p = add(*p, dout[(size_t)n * d + i]);
    }
}

/* ---- RMSNorm ---- */

template <typename Out>
__global__ void rmsnorm_forward_k(Out *out, float *rstd, const float *x, const float *gain, int d, float eps) {
    __shared__ float sh[BLOCK];
    const size_t row = blockIdx.x;
    const float *xr = x + row * d;
    Out *yr = out + row * d;
    float s = 0.0f;
    for (int i = threadIdx.x; i < d; i += BLOCK) s = add(s, mul(xr[i], xr[i]));
    const float ss = block_sum(s, sh);
    const float r = dvd(1.0f, __fsqrt_rn(add(dvd(ss, (float)d), eps)));
    if (threadIdx.x == 0) rstd[row] = r;
    for (int i = threadIdx.x; i < d; i += BLOCK) store(&yr[i], mul(mul(xr[i], r), gain[i]));
}

/* dx_i += r g_i dy_i - x_i r^3 / d * sum_j g_j dy_j x_j, one block per row. */
__global__ void rmsnorm_backward_dx_k(float *dx, const float *dout, const float *x, const float *gain,
                                      const float *rstd, int d) {
    __shared__ float sh[BLOCK];
    const size_t row = blockIdx.x;
    const float *xr = x + row * d, *dy = dout + row * d;
    float *dxr = dx + row * d;
    const float r = rstd[row];
    float s = 0.0f;
    for (int i = threadIdx.x; i < d; i += BLOCK) s = add(s, mul(mul(gain[i], dy[i]), xr[i]));
    const float dot = block_sum(s, sh);
    const float c = dvd(mul(mul(mul(dot, r), r), r), (float)d);
    for (int i = threadIdx.x; i < d; i += BLOCK) dxr[i] = add(dxr[i], sub(mul(mul(r, gain[i]), dy[i]), mul(c, xr[i])));
}

/* dgain_i += dy_i x_i r over rows in order, one thread per column. */
__global__ void rmsnorm_backward_dgain_k(float *dgain, const float *dout, const float *x, const float *rstd, int N,
                                         int d) {
    const int i = blockIdx.x * BLOCK + threadIdx.x;
    if (i >= d) return;
    float acc = dgain[i];
    for (int n = 0; n < N; n++) acc = add(acc, mul(mul(dout[(size_t)n * d + i], x[(size_t)n * d + i]), rstd[n]));
    dgain[i] = acc;
}

/* dgain on every SM with the same bits (nbk_rmsnorm_backward_wide): rmsnorm_backward_dgain_k's d threads walk all
 * N rows, so a few SMs fetch the whole activation. Here every product dy_i x_i r of every row goes first into
 * terms[i][n] (by column), through 32 x 32 tiles in shared memory so that the reads along a row and the writes
 * along a column are both consecutive; then a warp per column stages its N terms in shared memory, CHAIN at a
 * time, for its first lane to add to dgain_i in order of rows: the same products, added in the same order, as
 * the one-thread kernel (and the CPU) add them. */
constexpr int TILE_T = 32;   /* the transpose's tile */
constexpr int CHAIN = 256;   /* terms a warp stages at a time */
constexpr int CHAIN_WARPS = 4;

__global__ void dgain_terms_k(float *terms, const float *dout, const float *x, const float *rstd, int N, int d) {
    __shared__ float tile[TILE_T][TILE_T + 1];  /* + 1: a column of the tile spans the banks */
    const int i0 = blockIdx.x * TILE_T;
    /* the same count of iterations for every thread of the block (its barriers) */
    for (long long n0 = (long long)blockIdx.y * TILE_T; n0 < N; n0 += (long long)gridDim.y * TILE_T) {
        for (int r = threadIdx.y; r < TILE_T; r += blockDim.y) {
            const long long n = n0 + r;
            const int i = i0 + threadIdx.x;
            tile[r][threadIdx.x] =
                n < N && i < d ? mul(mul(dout[(size_t)n * d + i], x[(size_t)n * d + i]), rstd[n]) : 0.0f;
        }
        __syncthreads();
        for (int r = threadIdx.y; r < TILE_T; r += blockDim.y) {
            const int i = i0 + r;
            const long long n = n0 + threadIdx.x;
            if (i < d && n < N) terms[(size_t)i * N + n] = tile[threadIdx.x][r];
        }
        __syncthreads();  /* the tile is read before the next rows overwrite it */
    }
}

__global__ void dgain_chain_k(float *dgain, const float *terms, int N, int d) {
    __shared__ float staged[CHAIN_WARPS][CHAIN];
    const int w = threadIdx.x / 32, lane = threadIdx.x % 32, i = blockIdx.x * CHAIN_WARPS + w;
    if (i >= d) return;  /* the whole warp (i is the same for its lanes); no block barrier follows */
    const float *column = terms + (size_t)i * N;
    float acc = lane == 0 ? dgain[i] : 0.0f;
    for (long long n0 = 0; n0 < N; n0 += CHAIN) {
        const int m = (int)(N - n0 < CHAIN ? N - n0 : CHAIN);
        for (int j = lane; j < m; j += 32) staged[w][j] = column[n0 + j];
        __syncwarp();
        if (lane == 0)
            for (int j = 0; j < m; j++) acc = add(acc, staged[w][j]);
        __syncwarp();  /* the chain has read the terms before the next ones overwrite them */
    }
    if (lane == 0) dgain[i] = acc;
}

/* ---- RoPE: one thread per (row, head, pair) ----
 * The pair read from src is rotated; dst (NULL: none) receives it in float32, dst16 (NULL: none) in bf16, and
 * where both are given dst receives the bf16 value widened (rope_forward_bf16). src may be dst (in place). */
__global__ void rope_k(const float *src, float *dst, nb_bf16 *dst16, int T, int stride, int n_rot_heads, int half,
                       const float *cos_t, const float *sin_t, float sign, size_t total) {
    GRID_STRIDE(k, total) {
        const size_t i = k % (size_t)half, h = (k / (size_t)half) % (size_t)n_rot_heads;
        const size_t n = k / ((size_t)half * (size_t)n_rot_heads);
        const size_t t = n % (size_t)T;
        const size_t lo = n * stride + h * (size_t)(2 * half) + i, hi = lo + half;
        const float a = src[lo], b = src[hi], c = cos_t[t * half + i], si = mul(sign, sin_t[t * half + i]);
        float l = sub(mul(a, c), mul(b, si)), r = add(mul(b, c), mul(a, si));
        if (dst16) {
            const nb_bf16 l16 = nb_bf16_from_float(l), r16 = nb_bf16_from_float(r);
            dst16[lo] = l16, dst16[hi] = r16;
            l = nb_bf16_to_float(l16), r = nb_bf16_to_float(r16);
        }
        if (dst) dst[lo] = l, dst[hi] = r;
    }
}

/* The rest of each row (from column `from`: v), cast to bf16 into dst16 and, where dst is given, rounded
 * in dst. */
__global__ void cast_rest_k(const float *src, float *dst, nb_bf16 *dst16, int stride, int from, size_t total) {
    const size_t width = (size_t)(stride - from);
    GRID_STRIDE(k, total) {
        const size_t j = k / width * stride + from + k % width;
        const nb_bf16 v16 = nb_bf16_from_float(src[j]);
        dst16[j] = v16;
        if (dst) dst[j] = nb_bf16_to_float(v16);
    }
}

/* ---- SwiGLU ----
 * gate and up read as In (float32 or bf16, widened); gu16 (NULL: none) receives them rounded to bf16, and h
 * is then computed from the rounded values (swiglu_forward_cast_bf16). */
template <typename In, typename Out>
__global__ void swiglu_forward_k(Out *h, const In *gu, nb_bf16 *gu16, int F, size_t total) {
    GRID_STRIDE(k, total) {
        const size_t n = k / (size_t)F, i = k % (size_t)F, gi = n * 2 * F + i, ui = gi + F;
        float g = load(&gu[gi]), u = load(&gu[ui]);
        if (gu16) {
            const nb_bf16 g16 = nb_bf16_from_float(g), u16 = nb_bf16_from_float(u);
            gu16[gi] = g16, gu16[ui] = u16;
            g = nb_bf16_to_float(g16), u = nb_bf16_to_float(u16);
        }
        store(&h[k], mul(dvd(g, add(1.0f, nb_expf(-g))), u));
    }
}

/* silu'(g) = s (1 + g (1 - s)), s the sigmoid. */
template <typename In, typename Out>
__global__ void swiglu_backward_k(Out *dgu, const float *dh, const In *gu, int F, size_t total) {
    GRID_STRIDE(k, total) {
        const size_t n = k / (size_t)F, i = k % (size_t)F;
        const float g = load(&gu[n * 2 * F + i]), u = load(&gu[n * 2 * F + F + i]), d = dh[k];
        const float s = dvd(1.0f, add(1.0f, nb_expf(-g)));
        store(&dgu[n * 2 * F + F + i], mul(mul(d, g), s));
        store(&dgu[n * 2 * F + i], mul(mul(mul(d, u), s), add(1.0f, mul(g, sub(1.0f, s)))));
    }
}

/* ---- Cross-entropy ---- */

__global__ void lse_k(float *lse, const float *logits, int V) {
    __shared__ float sh[BLOCK];
    const float *z = logits + (size_t)blockIdx.x * V;
    float m = z[0];
    for (int i = threadIdx.x; i < V; i += BLOCK) m = z[i] > m ? z[i] : m;
    m = block_max(m, sh);
    float s = 0.0f;
    for (int i = threadIdx.x; i < V; i += BLOCK) s = add(s, nb_expf(sub(z[i], m)));
    const float sum = block_sum(s, sh);
    if (threadIdx.x == 0) lse[blockIdx.x] = add(m, logf(sum));
}

/* The loss in double in row order: one thread, as the CPU's loop. */
/* lse_k, then the row's bf16 gradient from that lse (cross_entropy_forward_grad_bf16): the row is read twice
 * more while it is likely still in the cache, not once more from a later kernel. */
__global__ void lse_grad_bf16_k(float *lse, nb_bf16 *dlogits, const float *logits, const int *targets, int V, float k) {
    __shared__ float sh[BLOCK];
    const size_t row = (size_t)blockIdx.x * V;
    const float *z = logits + row;
    float m = z[0];
    for (int i = threadIdx.x; i < V; i += BLOCK) m = z[i] > m ? z[i] : m;
    m = block_max(m, sh);
    float s = 0.0f;
    for (int i = threadIdx.x; i < V; i += BLOCK) s = add(s, nb_expf(sub(z[i], m)));
    const float l = add(m, logf(block_sum(s, sh)));
    if (threadIdx.x == 0) lse[blockIdx.x] = l;
    const int t = targets[blockIdx.x];
    for (int i = threadIdx.x; i < V; i += BLOCK)
        dlogits[row + i] = nb_bf16_from_float(sub(mul(k, nb_expf(sub(z[i], l))), i == t ? k : 0.0f));
}
__global__ void loss_sum_k(double *loss_sum, const float *lse, const float *logits, const int *targets, int N, int V) {
    double total = 0.0;
    for (int n = 0; n < N; n++)
        total = __dadd_rn(total, __dsub_rn((double)lse[n], (double)logits[(size_t)n * V + targets[n]]));
    *loss_sum = total;
}

/* k (softmax - onehot) into dst, which may be the logits (in place). */
template <typename Out>
__global__ void cross_entropy_grad_k(Out *dst, const float *logits, const float *lse, const int *targets, int V, float k,
                                     size_t total) {
    GRID_STRIDE(j, total) {
        const size_t n = j / (size_t)V, i = j % (size_t)V;
        store(&dst[j], sub(mul(k, nb_expf(sub(logits[j], lse[n]))), (int)i == targets[n] ? k : 0.0f));
    }
}

/* ---- Optimizers: the expressions of src/optim/<rule>.c, in C's order of evaluation ---- */

__global__ void adamw_k(float *d, float *m, float *v, const float *g, const float *w, size_t n, float lr, float b1,
                        float b2, float eps, float wd, float c1, float c2) {
    GRID_STRIDE(i, n) {
        const float gi = g[i];
        const float mi = add(mul(b1, m[i]), mul(sub(1.0f, b1), gi));
        const float vi = add(mul(b2, v[i]), mul(mul(sub(1.0f, b2), gi), gi));
        m[i] = mi;
        v[i] = vi;
        d[i] = add(dvd(mul(lr, dvd(mi, c1)), add(__fsqrt_rn(dvd(vi, c2)), eps)), mul(mul(lr, wd), w[i]));
    }
}

__global__ void sgd_k(float *d, float *m, const float *g, const float *w, size_t n, float lr, float mu, int nesterov,
                      float wd) {
    GRID_STRIDE(i, n) {
        const float gi = g[i], mi = add(mul(mu, m[i]), gi);
        m[i] = mi;
        d[i] = add(mul(lr, nesterov ? add(gi, mul(mu, mi)) : mi), mul(mul(lr, wd), w[i]));
    }
}

__global__ void lion_k(float *d, float *m, const float *g, const float *w, size_t n, float lr, float b1, float b2,
                       float wd) {
    GRID_STRIDE(i, n) {
        const float gi = g[i], mi = m[i];
        const float u = add(mul(b1, mi), mul(sub(1.0f, b1), gi));
        const float sign = u > 0.0f ? 1.0f : (u < 0.0f ? -1.0f : 0.0f);
        d[i] = add(mul(lr, sign), mul(mul(lr, wd), w[i]));
        m[i] = add(mul(b2, mi), mul(sub(1.0f, b2), gi));
    }
}

__global__ void adan_k(float *d, float *m, float *v, float *nn, float *gp, const float *g, const float *w, size_t n,
                       float lr, float b1, float b2, float b3, float eps, float wd, float c1, float c2, float c3,
                       int first) {
    GRID_STRIDE(i, n) {
        const float gi = g[i];
        const float diff = first ? 0.0f : sub(gi, gp[i]);
        const float mi = add(mul(b1, m[i]), mul(sub(1.0f, b1), gi));
        const float vi = add(mul(b2, v[i]), mul(sub(1.0f, b2), diff));
        const float u = add(gi, mul(b2, diff));
        const float ni = add(mul(b3, nn[i]), mul(mul(sub(1.0f, b3), u), u));
        const float den = add(__fsqrt_rn(dvd(ni, c3)), eps);
        m[i] = mi, v[i] = vi, nn[i] = ni;
        d[i] = add(add(dvd(mul(lr, dvd(mi, c1)), den), dvd(mul(mul(lr, b2), dvd(vi, c2)), den)), mul(mul(lr, wd), w[i]));
        gp[i] = gi;
    }
}

/* MARS, pass 1: c into d, and each block's sum of c^2 (double) into partial[blockIdx]. The grid is
 * MARS_BLOCKS blocks whatever n, so the order of the sum depends on n only. */
__global__ void mars_c_k(float *d, double *partial, const float *gp, const float *g, size_t n, float k, int first) {
    __shared__ double sh[BLOCK];
    double s = 0.0;
    GRID_STRIDE(i, n) {
        const float gi = g[i];
        const float c = first ? gi : add(gi, mul(k, sub(gi, gp[i])));
        d[i] = c;
        s = __dadd_rn(s, __dmul_rn((double)c, (double)c));
    }
    const double total = block_sum(s, sh);
    if (threadIdx.x == 0) partial[blockIdx.x] = total;
}

/* Pass 2, one block: the sum of the per-block sums into partial[MARS_BLOCKS]. */
__global__ void mars_norm_k(double *partial) {
    __shared__ double sh[BLOCK];
    double s = 0.0;
    for (int b = threadIdx.x; b < MARS_BLOCKS; b += BLOCK) s = __dadd_rn(s, partial[b]);
    const double total = block_sum(s, sh);
    if (threadIdx.x == 0) partial[MARS_BLOCKS] = total;
}

/* Pass 3: the clipped c, AdamW's moments and step on it; g_prev = g. */
__global__ void mars_step_k(float *d, float *m, float *v, float *gp, const float *g, const float *w, size_t n,
                            const double *sq, float lr, float b1, float b2, float eps, float wd, float c1, float c2) {
    const double q = *sq;
    const float scale = q > 1.0 ? (float)__ddiv_rn(1.0, __dsqrt_rn(q)) : 1.0f;
    GRID_STRIDE(i, n) {
        const float ci = mul(d[i], scale);
        const float mi = add(mul(b1, m[i]), mul(sub(1.0f, b1), ci));
        const float vi = add(mul(b2, v[i]), mul(mul(sub(1.0f, b2), ci), ci));
        m[i] = mi, v[i] = vi;
        d[i] = add(dvd(mul(lr, dvd(mi, c1)), add(__fsqrt_rn(dvd(vi, c2)), eps)), mul(mul(lr, wd), w[i]));
        gp[i] = g[i];
    }
}

/* 1 - beta^(count + 1), as the rules compute it (on the host, in double, then float). */
float correction(float beta, long count) { return 1.0f - (float)pow(beta, (double)(count + 1)); }

int bad_rows(const char *what, int N, int d) {
    return nb_fail("cuda: %s: invalid shape (%d rows of %d)", what, N, d);
}

template <typename Out>
int rmsnorm_forward(const char *what, Out *out, float *rstd, const float *x, const float *gain, int N, int d, float eps,
                    cudaStream_t stream) {
    if (N < 0 || d <= 0) return bad_rows(what, N, d);
    if (N == 0) return 0;
    rmsnorm_forward_k<<<N, BLOCK, 0, stream>>>(out, rstd, x, gain, d, eps);
    return launched(what);
}

/* The rotation of src into dst and/or dst16; with dst16, the rest of each row cast too. */
int rope(const char *what, const float *src, float *dst, nb_bf16 *dst16, int B, int T, int stride,
                int n_rot_heads, int hd, const float *cos_t, const float *sin_t, float sign, cudaStream_t stream) {
    if (B < 0 || T <= 0 || hd <= 0 || hd % 2 || n_rot_heads < 0 || (long)n_rot_heads * hd > stride)
        return nb_fail("cuda: %s: invalid shape (B %d, T %d, stride %d, %d heads of %d)", what, B, T, stride,
                       n_rot_heads, hd);
    const size_t total = (size_t)B * T * n_rot_heads * (hd / 2);
    if (total) {
        rope_k<<<blocks_for(total), BLOCK, 0, stream>>>(src, dst, dst16, T, stride, n_rot_heads, hd / 2, cos_t, sin_t,
                                                        sign, total);
        if (launched(what)) return -1;
    }
    const size_t rest = (size_t)B * T * (size_t)(stride - n_rot_heads * hd);
    if (!dst16 || rest == 0) return 0;
    cast_rest_k<<<blocks_for(rest), BLOCK, 0, stream>>>(src, dst, dst16, stride, n_rot_heads * hd, rest);
    return launched(what);
}

/* SwiGLU's kernels on N rows of F. */
template <typename In, typename Out>
int swiglu_forward(const char *what, Out *h, const In *gu, nb_bf16 *gu16, int N, int F, cudaStream_t stream) {
    if (N < 0 || F <= 0) return bad_rows(what, N, F);
    const size_t total = (size_t)N * F;
    if (total == 0) return 0;
    swiglu_forward_k<<<blocks_for(total), BLOCK, 0, stream>>>(h, gu, gu16, F, total);
    return launched(what);
}

template <typename In, typename Out>
int swiglu_backward(const char *what, Out *dgu, const float *dh, const In *gu, int N, int F, cudaStream_t stream) {
    if (N < 0 || F <= 0) return bad_rows(what, N, F);
    const size_t total = (size_t)N * F;
    if (total == 0) return 0;
    swiglu_backward_k<<<blocks_for(total), BLOCK, 0, stream>>>(dgu, dh, gu, F, total);
    return launched(what);
}

template <typename Out>
int cross_entropy_grad(const char *what, Out *dst, const float *logits, const float *lse, const int *targets,
                              int N, int V, float k, int n_mean, cudaStream_t stream) {
    if (N < 0 || V <= 0 || n_mean <= 0) return bad_rows(what, N, V);
    const size_t total = (size_t)N * V;
    if (total == 0) return 0;
    cross_entropy_grad_k<<<blocks_for(total), BLOCK, 0, stream>>>(dst, logits, lse, targets, V, k, total);
    return launched(what);
}

/* The delay rules' update (src/delay/ops.h, nb_delay_apply_host): kind 0 current -= d; 1 also keep = current
 * first; 2 with error feedback. The CPU's operations in its order (sub, then mul and add, never fused). */
__global__ void delay_apply_k(int kind, float *keep, float *current, float *d, float *prev, float alpha, int first,
                              size_t n) {
    GRID_STRIDE(i, n) {
        const float w = current[i];
        if (kind == 0) {
            current[i] = sub(w, d[i]);
            continue;
        }
        keep[i] = w;
        if (kind == 1) {
            current[i] = sub(w, d[i]);
            continue;
        }
        const float computed = d[i];
        const float di = first ? computed : add(computed, mul(alpha, sub(computed, prev[i])));
        prev[i] = computed;
        d[i] = di;
        current[i] = sub(w, di);
    }
}

/* C[i][j] = C[j][i] below the diagonal (nb_cpu_mirror_upper): one thread per element of the lower triangle. */
__global__ void mirror_upper_k(float *C, int N, int ldc, size_t total) {
    GRID_STRIDE(v, total) {
        const size_t i = v / (size_t)N, j = v % (size_t)N;
        if (j < i) C[i * ldc + j] = C[j * ldc + i];
    }
}

__global__ void muon_momentum_k(float *m, float *X, const float *g, size_t n, float mu, int nesterov) {
    const float keep = sub(1.0f, mu);
    GRID_STRIDE(i, n) {
        const float mi = add(mul(mu, m[i]), mul(keep, g[i]));
        m[i] = mi;
        X[i] = nesterov ? add(mul(keep, g[i]), mul(mu, mi)) : mi;
    }
}

__global__ void scale_by_inverse_norm_k(float *X, size_t n, const double *sq) {
    const float inv = (float)(1.0 / __dadd_rn(sqrt(*sq), 1e-7));
    GRID_STRIDE(i, n) X[i] = mul(X[i], inv);
}

__global__ void add_diagonal_k(float *B, int r, float a) {
    GRID_STRIDE(i, (size_t)r) B[i * (size_t)r + i] = add(B[i * (size_t)r + i], a);
}

__global__ void muon_step_k(float *d, const float *O, const float *w, size_t n, float scale, float lrwd) {
    GRID_STRIDE(i, n) d[i] = add(mul(scale, O[i]), mul(lrwd, w[i]));
}

/* One block per row: the row's sum of squares in double (each lane's chain, then block_sum's tree). */
__global__ void normuon_rows_k(const float *O, int cols, double *row_sq) {
    __shared__ double sh[BLOCK];
    const float *row = O + (size_t)blockIdx.x * cols;
    double s = 0.0;
    for (int j = threadIdx.x; j < cols; j += BLOCK) s = __dadd_rn(s, __dmul_rn((double)row[j], (double)row[j]));
    s = block_sum(s, sh);
    if (threadIdx.x == 0) row_sq[blockIdx.x] = s;
}

/* One thread, the rows in order (as the CPU's loop): s, inv and the two norms' sums. */
__global__ void normuon_stats_k(const double *row_sq, float *s, float *inv, float *ratio, int rows, int cols, float b2) {
    double o_sq = 0.0, scaled_sq = 0.0;
    const float keep = sub(1.0f, b2);
    for (int i = 0; i < rows; i++) {
        s[i] = add(mul(b2, s[i]), mul(keep, (float)(row_sq[i] / cols)));
        inv[i] = dvd(1.0f, add(__fsqrt_rn(s[i]), 1e-10f));
        o_sq = __dadd_rn(o_sq, row_sq[i]);
        scaled_sq = __dadd_rn(scaled_sq, __dmul_rn(__dmul_rn(row_sq[i], (double)inv[i]), (double)inv[i]));
    }
    *ratio = (float)(sqrt(o_sq) / __dadd_rn(sqrt(scaled_sq), (double)1e-10f));  /* the CPU adds the float eps */
}

__global__ void normuon_step_k(float *d, const float *O, const float *w, int cols, size_t n, float scale, float lrwd,
                               const float *inv, const float *ratio) {
    const float r = *ratio;
    GRID_STRIDE(i, n) d[i] = add(mul(scale, mul(mul(O[i], inv[i / cols]), r)), mul(lrwd, w[i]));
}

/* lambda g g (current - old) as the CPU's C forms it: ((lambda g) g) (current - old) */
__device__ __forceinline__ float taylor_term(float lambda, float g, float c, float o) {
    return mul(mul(mul(lambda, g), g), sub(c, o));
}

__global__ void taylor_k(float *grads, const float *current, const float *old, float lambda, size_t n) {
    GRID_STRIDE(i, n) grads[i] = add(grads[i], taylor_term(lambda, grads[i], current[i], old[i]));
}

/* sum_squares_k's partition and tree, over the correction's values */
__global__ void taylor_sq_k(const float *grads, const float *current, const float *old, float lambda, size_t n,
                            double *partial) {
    __shared__ double lanes[BLOCK];
    double s = 0.0;
    const size_t stride = (size_t)NBK_SQ_PARTS * BLOCK;
    for (size_t i = (size_t)blockIdx.x * BLOCK + threadIdx.x; i < n; i += stride) {
        const double v = (double)taylor_term(lambda, grads[i], current[i], old[i]);
        s = __dadd_rn(s, __dmul_rn(v, v));
    }
    s = block_sum(s, lanes);
    if (threadIdx.x == 0) partial[blockIdx.x] = s;
}

__global__ void bf16_cast_k(nb_bf16 *dst, const float *src, size_t n) {
    GRID_STRIDE(i, n) dst[i] = nb_bf16_from_float(src[i]);
}
__global__ void bf16_round_k(float *x, size_t n) {
    GRID_STRIDE(i, n) x[i] = nb_bf16_rounded(x[i]);
}
__global__ void bf16_widen_k(float *dst, const nb_bf16 *src, size_t n) {
    GRID_STRIDE(i, n) dst[i] = nb_bf16_to_float(src[i]);
}

__global__ void add_k(float *dst, const float *src, size_t n) {
    GRID_STRIDE(i, n) dst[i] = add(dst[i], src[i]);
}

__global__ void scale_k(float *x, size_t n, float scale) {
    GRID_STRIDE(i, n) x[i] = mul(x[i], scale);
}

/* Block b sums the squares of the values i = b*BLOCK + lane + k*NBK_SQ_PARTS*BLOCK in double, each lane its
 * own chain, then the block's lanes as block_sum's tree: every sum in one order whatever the GPU. */
__global__ void sum_squares_k(const float *x, const float *y, size_t n, double *partial) {
    __shared__ double lanes[BLOCK];
    double s = 0.0;
    const size_t stride = (size_t)NBK_SQ_PARTS * BLOCK;
    for (size_t i = (size_t)blockIdx.x * BLOCK + threadIdx.x; i < n; i += stride) {
        const double v = y ? (double)sub(x[i], y[i]) : (double)x[i];
        s = __dadd_rn(s, __dmul_rn(v, v));
    }
    s = block_sum(s, lanes);  /* the block's lanes as a tree */
    if (threadIdx.x == 0) partial[blockIdx.x] = s;
}

__global__ void sum_parts_k(const double *partial, double *out) {
    double s = 0.0;
    for (int b = 0; b < NBK_SQ_PARTS; b++) s = __dadd_rn(s, partial[b]);
    *out = s;
}

}  // namespace

extern "C" {

int nbk_muon_momentum(float *m, float *X, const float *g, size_t n, float mu, int nesterov, cudaStream_t stream) {
    if (!n) return 0;
    muon_momentum_k<<<blocks_for(n), BLOCK, 0, stream>>>(m, X, g, n, mu, nesterov);
    return launched("muon_momentum");
}

int nbk_scale_by_inverse_norm(float *X, size_t n, const double *sq, cudaStream_t stream) {
    if (!n) return 0;
    scale_by_inverse_norm_k<<<blocks_for(n), BLOCK, 0, stream>>>(X, n, sq);
    return launched("scale_by_inverse_norm");
}

int nbk_add_diagonal(float *B, int r, float a, cudaStream_t stream) {
    if (r <= 0) return 0;
    add_diagonal_k<<<blocks_for((size_t)r), BLOCK, 0, stream>>>(B, r, a);
    return launched("add_diagonal");
}

int nbk_muon_step(float *d, const float *O, const float *w, size_t n, float scale, float lrwd, cudaStream_t stream) {
    if (!n) return 0;
    muon_step_k<<<blocks_for(n), BLOCK, 0, stream>>>(d, O, w, n, scale, lrwd);
    return launched("muon_step");
}

int nbk_normuon_step(float *d, const float *O, float *s, const float *w, int rows, int cols, float b2, float scale,
                     float lrwd, double *row_sq, float *inv, float *ratio, cudaStream_t stream) {
    if (rows <= 0 || cols <= 0) return nb_fail("cuda: normuon_step: invalid shape (%d x %d)", rows, cols);
    normuon_rows_k<<<rows, BLOCK, 0, stream>>>(O, cols, row_sq);
    if (launched("normuon_rows")) return -1;
    normuon_stats_k<<<1, 1, 0, stream>>>(row_sq, s, inv, ratio, rows, cols, b2);
    if (launched("normuon_stats")) return -1;
    const size_t n = (size_t)rows * cols;
    normuon_step_k<<<blocks_for(n), BLOCK, 0, stream>>>(d, O, w, cols, n, scale, lrwd, inv, ratio);
    return launched("normuon_step");
}

int nbk_taylor(float *grads, const float *current, const float *old, float lambda, size_t n, cudaStream_t stream) {
    if (!n) return 0;
    taylor_k<<<blocks_for(n), BLOCK, 0, stream>>>(grads, current, old, lambda, n);
    return launched("taylor");
}

int nbk_taylor_sq(const float *grads, const float *current, const float *old, float lambda, size_t n, double *partial,
                  double *out, cudaStream_t stream) {
    taylor_sq_k<<<NBK_SQ_PARTS, BLOCK, 0, stream>>>(grads, current, old, lambda, n, partial);
    if (launched("taylor_sq")) return -1;
    sum_parts_k<<<1, 1, 0, stream>>>(partial, out);
    return launched("taylor_sq (the parts)");
}

int nbk_bf16_cast(nb_bf16 *dst, const float *src, size_t n, cudaStream_t stream) {
    if (!n) return 0;
    bf16_cast_k<<<blocks_for(n), BLOCK, 0, stream>>>(dst, src, n);
    return launched("bf16_cast");
}

int nbk_bf16_round(float *x, size_t n, cudaStream_t stream) {
    if (!n) return 0;
    bf16_round_k<<<blocks_for(n), BLOCK, 0, stream>>>(x, n);
    return launched("bf16_round");
}

int nbk_bf16_widen(float *dst, const nb_bf16 *src, size_t n, cudaStream_t stream) {
    if (!n) return 0;
    bf16_widen_k<<<blocks_for(n), BLOCK, 0, stream>>>(dst, src, n);
    return launched("bf16_widen");
}

int nbk_add(float *dst, const float *src, size_t n, cudaStream_t stream) {
    if (!n) return 0;
    add_k<<<blocks_for(n), BLOCK, 0, stream>>>(dst, src, n);
    return launched("add");
}

int nbk_scale(float *x, size_t n, float scale, cudaStream_t stream) {
    if (!n) return 0;
    scale_k<<<blocks_for(n), BLOCK, 0, stream>>>(x, n, scale);
    return launched("scale");
}

int nbk_sum_squares(const float *x, const float *y, size_t n, double *partial, double *out, cudaStream_t stream) {
    sum_squares_k<<<NBK_SQ_PARTS, BLOCK, 0, stream>>>(x, y, n, partial);
    if (launched("sum_squares")) return -1;
    sum_parts_k<<<1, 1, 0, stream>>>(partial, out);
    return launched("sum_squares (the parts)");
}

int nbk_delay_apply(int kind, float *keep, float *current, float *d, float *prev, float alpha, int first, size_t n,
                    cudaStream_t stream) {
    if (kind < 0 || kind > 2) return nb_fail("cuda: delay_apply: kind %d: expected 0, 1 or 2", kind);
    if (!n) return 0;
    delay_apply_k<<<blocks_for(n), BLOCK, 0, stream>>>(kind, keep, current, d, prev, alpha, first, n);
    return launched("delay_apply");
}

int nbk_mirror_upper(float *C, int N, int ldc, cudaStream_t stream) {
    if (N < 0 || ldc < N) return nb_fail("cuda: mirror_upper: invalid shape (N %d, ldc %d)", N, ldc);
    const size_t total = (size_t)N * N;
    if (!total) return 0;
    mirror_upper_k<<<blocks_for(total), BLOCK, 0, stream>>>(C, N, ldc, total);
    return launched("mirror_upper");
}

int nbk_embedding_forward(float *out, const int *tokens, const float *table, int N, int d, cudaStream_t stream) {
    if (N < 0 || d <= 0) return bad_rows("embedding_forward", N, d);
    if (N == 0) return 0;
    const size_t total = (size_t)N * d;
    embedding_forward_k<<<blocks_for(total), BLOCK, 0, stream>>>(out, tokens, table, d, total);
    return launched("embedding_forward");
}

int nbk_embedding_backward(float *dtable, const float *dout, const int *tokens, int N, int d, cudaStream_t stream) {
    if (N < 0 || d <= 0) return bad_rows("embedding_backward", N, d);
    if (N == 0) return 0;
    embedding_backward_k<<<(d + BLOCK - 1) / BLOCK, BLOCK, 0, stream>>>(dtable, dout, tokens, N, d);
    return launched("embedding_backward");
}

int nbk_rmsnorm_forward(float *out, float *rstd, const float *x, const float *gain, int N, int d, float eps,
                        cudaStream_t stream) {
    return rmsnorm_forward("rmsnorm_forward", out, rstd, x, gain, N, d, eps, stream);
}

int nbk_rmsnorm_forward_bf16(nb_bf16 *out, float *rstd, const float *x, const float *gain, int N, int d, float eps,
                             cudaStream_t stream) {
    return rmsnorm_forward("rmsnorm_forward_bf16", out, rstd, x, gain, N, d, eps, stream);
}

int nbk_rmsnorm_backward(float *dx, float *dgain, const float *dout, const float *x, const float *gain,
                         const float *rstd, int N, int d, cudaStream_t stream) {
    if (N < 0 || d <= 0) return bad_rows("rmsnorm_backward", N, d);
    if (N == 0) return 0;
    rmsnorm_backward_dx_k<<<N, BLOCK, 0, stream>>>(dx, dout, x, gain, rstd, d);
    if (launched("rmsnorm_backward (dx)")) return -1;
    rmsnorm_backward_dgain_k<<<(d + BLOCK - 1) / BLOCK, BLOCK, 0, stream>>>(dgain, dout, x, rstd, N, d);
    return launched("rmsnorm_backward (dgain)");
}

size_t nbk_rmsnorm_wide_scratch_floats(int N, int d) { return N > 0 && d > 0 ? (size_t)N * d : 1; }

int nbk_rmsnorm_backward_wide(float *dx, float *dgain, const float *dout, const float *x, const float *gain,
                              const float *rstd, int N, int d, float *terms, cudaStream_t stream) {
    if (N < 0 || d <= 0) return bad_rows("rmsnorm_backward", N, d);
    if (N == 0) return 0;
    rmsnorm_backward_dx_k<<<N, BLOCK, 0, stream>>>(dx, dout, x, gain, rstd, d);
    if (launched("rmsnorm_backward (dx)")) return -1;
    const long long row_tiles = ((long long)N + TILE_T - 1) / TILE_T;
    const dim3 grid((unsigned)(((long long)d + TILE_T - 1) / TILE_T),
                    (unsigned)(row_tiles < 65535 ? row_tiles : 65535));
    dgain_terms_k<<<grid, dim3(TILE_T, 8), 0, stream>>>(terms, dout, x, rstd, N, d);
    if (launched("rmsnorm_backward (dgain's terms)")) return -1;
    const unsigned chains = (unsigned)(((long long)d + CHAIN_WARPS - 1) / CHAIN_WARPS);
    dgain_chain_k<<<chains, CHAIN_WARPS * 32, 0, stream>>>(dgain, terms, N, d);
    return launched("rmsnorm_backward (dgain's sums)");
}

int nbk_rope_forward(float *x, int B, int T, int stride, int n_rot_heads, int hd, const float *cos_t,
                     const float *sin_t, cudaStream_t stream) {
    return rope("rope_forward", x, x, NULL, B, T, stride, n_rot_heads, hd, cos_t, sin_t, 1.0f, stream);
}

int nbk_rope_backward(float *dx, int B, int T, int stride, int n_rot_heads, int hd, const float *cos_t,
                      const float *sin_t, cudaStream_t stream) {
    return rope("rope_backward", dx, dx, NULL, B, T, stride, n_rot_heads, hd, cos_t, sin_t, -1.0f, stream);
}

int nbk_rope_forward_bf16(float *x, nb_bf16 *x16, int B, int T, int stride, int n_rot_heads, int hd,
                          const float *cos_t, const float *sin_t, cudaStream_t stream) {
    return rope("rope_forward_bf16", x, x, x16, B, T, stride, n_rot_heads, hd, cos_t, sin_t, 1.0f, stream);
}

int nbk_rope_backward_cast_bf16(nb_bf16 *dx16, const float *dx, int B, int T, int stride, int n_rot_heads, int hd,
                                const float *cos_t, const float *sin_t, cudaStream_t stream) {
    return rope("rope_backward_cast_bf16", dx, NULL, dx16, B, T, stride, n_rot_heads, hd, cos_t, sin_t, -1.0f, stream);
}

int nbk_swiglu_forward(float *h, const float *gu, int N, int F, cudaStream_t stream) {
    return swiglu_forward("swiglu_forward", h, gu, NULL, N, F, stream);
}

int nbk_swiglu_forward_bf16(nb_bf16 *h, const nb_bf16 *gu, int N, int F, cudaStream_t stream) {
    return swiglu_forward("swiglu_forward_bf16", h, gu, NULL, N, F, stream);
}

int nbk_swiglu_forward_cast_bf16(nb_bf16 *h, nb_bf16 *gu16, const float *gu, int N, int F, cudaStream_t stream) {
    return swiglu_forward("swiglu_forward_cast_bf16", h, gu, gu16, N, F, stream);
}

int nbk_swiglu_backward(float *dgu, const float *dh, const float *gu, int N, int F, cudaStream_t stream) {
    return swiglu_backward("swiglu_backward", dgu, dh, gu, N, F, stream);
}

int nbk_swiglu_backward_bf16_cast(nb_bf16 *dgu16, const float *dh, const nb_bf16 *gu, int N, int F,
                                  cudaStream_t stream) {
    return swiglu_backward("swiglu_backward_bf16_cast", dgu16, dh, gu, N, F, stream);
}

int nbk_cross_entropy_forward(float *lse, double *loss_sum, const float *logits, const int *targets, int N, int V,
                              cudaStream_t stream) {
    if (N < 0 || V <= 0) return bad_rows("cross_entropy_forward", N, V);
    if (N > 0) {
        lse_k<<<N, BLOCK, 0, stream>>>(lse, logits, V);
        if (launched("cross_entropy_forward (lse)")) return -1;
    }
    loss_sum_k<<<1, 1, 0, stream>>>(loss_sum, lse, logits, targets, N, V);
    return launched("cross_entropy_forward (sum)");
}

int nbk_cross_entropy_backward(float *logits, const float *lse, const int *targets, int N, int V, float scale,
                               int n_mean, cudaStream_t stream) {
    return cross_entropy_grad("cross_entropy_backward", logits, logits, lse, targets, N, V, scale / (float)n_mean,
                              n_mean, stream);
}

int nbk_cross_entropy_forward_grad_bf16(float *lse, nb_bf16 *dlogits, double *loss_sum, const float *logits,
                                        const int *targets, int N, int V, int n_mean, cudaStream_t stream) {
    if (N < 0 || V <= 0 || n_mean <= 0) return bad_rows("cross_entropy_forward_grad_bf16", N, V);
    if (N > 0) {
        lse_grad_bf16_k<<<N, BLOCK, 0, stream>>>(lse, dlogits, logits, targets, V, 1.0f / (float)n_mean);
        if (launched("cross_entropy_forward_grad_bf16 (lse, gradient)")) return -1;
    }
    loss_sum_k<<<1, 1, 0, stream>>>(loss_sum, lse, logits, targets, N, V);
    return launched("cross_entropy_forward_grad_bf16 (sum)");
}

int nbk_cross_entropy_grad_bf16(nb_bf16 *dlogits, const float *logits, const float *lse, const int *targets, int N,
                                int V, int n_mean, cudaStream_t stream) {
    return cross_entropy_grad("cross_entropy_grad_bf16", dlogits, logits, lse, targets, N, V, 1.0f / (float)n_mean,
                              n_mean, stream);
}

int nbk_adamw_step(float *d, float *m, float *v, const float *g, const float *w, size_t n, const nbk_optim_step *p,
                   cudaStream_t stream) {
    if (n == 0) return 0;
    adamw_k<<<blocks_for(n), BLOCK, 0, stream>>>(d, m, v, g, w, n, p->lr, p->beta1, p->beta2, p->eps, p->weight_decay,
                                                 correction(p->beta1, p->count), correction(p->beta2, p->count));
    return launched("adamw");
}

int nbk_sgd_step(float *d, float *m, const float *g, const float *w, size_t n, const nbk_optim_step *p,
                 cudaStream_t stream) {
    if (n == 0) return 0;
    sgd_k<<<blocks_for(n), BLOCK, 0, stream>>>(d, m, g, w, n, p->lr, p->momentum, p->nesterov, p->weight_decay);
    return launched("sgd");
}

int nbk_lion_step(float *d, float *m, const float *g, const float *w, size_t n, const nbk_optim_step *p,
                  cudaStream_t stream) {
    if (n == 0) return 0;
    lion_k<<<blocks_for(n), BLOCK, 0, stream>>>(d, m, g, w, n, p->lr, p->beta1, p->beta2, p->weight_decay);
    return launched("lion");
}

int nbk_adan_step(float *d, float *m, float *v, float *nn, float *g_prev, const float *g, const float *w, size_t n,
                  const nbk_optim_step *p, cudaStream_t stream) {
    if (n == 0) return 0;
    adan_k<<<blocks_for(n), BLOCK, 0, stream>>>(d, m, v, nn, g_prev, g, w, n, p->lr, p->beta1, p->beta2, p->beta3,
                                                p->eps, p->weight_decay, correction(p->beta1, p->count),
                                                correction(p->beta2, p->count), correction(p->beta3, p->count),
                                                p->count == 0);
    return launched("adan");
}

size_t nbk_mars_scratch_doubles(void) { return MARS_BLOCKS + 1; }

int nbk_mars_step(float *d, float *m, float *v, float *g_prev, const float *g, const float *w, size_t n,
                  const nbk_optim_step *p, double *scratch, cudaStream_t stream) {
    if (n == 0) return 0;
    const float k = p->gamma * p->beta1 / (1.0f - p->beta1);
    mars_c_k<<<MARS_BLOCKS, BLOCK, 0, stream>>>(d, scratch, g_prev, g, n, k, p->count == 0);
    if (launched("mars (c)")) return -1;
    mars_norm_k<<<1, BLOCK, 0, stream>>>(scratch);
    if (launched("mars (norm)")) return -1;
    mars_step_k<<<blocks_for(n), BLOCK, 0, stream>>>(d, m, v, g_prev, g, w, n, scratch + MARS_BLOCKS, p->lr, p->beta1,
                                                     p->beta2, p->eps, p->weight_decay, correction(p->beta1, p->count),
                                                     correction(p->beta2, p->count));
    return launched("mars (step)");
}

}  // extern "C"
