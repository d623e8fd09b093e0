/* Causal grouped-query attention on the GPU, flash-style: no T x T matrix anywhere, the keys (or queries)
 * staged through shared memory a tile at a time. The contracts are attention_forward's and
 * attention_backward's (src/layers/layers.h) on device memory; kernels.h states them.
 *
 * The layout of the work:
 * - A block holds ROWS query rows (forward, dQ) or ROWS keys (dK and dV). Each row belongs to a quad of
 *   LANES threads; lane l of a quad owns the head dimensions l, l + LANES, l + 2 LANES, ... of that row's
 *   vectors, in registers. A dot product is the lanes' partial sums (each a chain of fused multiply-adds in
 *   order of dimension) added in a butterfly of two shuffles: IEEE addition commutes, so all four lanes
 *   hold the same bits, and the order depends only on hd.
 * - The block walks the other side (keys for a query block, queries for a key block) in tiles of TILE rows
 *   that its threads copy into shared memory together; every row of a tile is then read by all quads at
 *   once (a broadcast). Causality bounds the walk: a query block stops at its last query's position, a key
 *   block starts at its first key's.
 * - Forward makes two passes over the keys. The first finds each row's maximum score m and its sum of
 *   exp(s - m) (rescaled when the maximum moves); the second forms each probability exactly as the CPU
 *   does, exp(s - m) * (1 / sum), rounds it to bf16 under bf16, and adds p v into the output. So the
 *   probabilities that meet V are the CPU's normalised (and rounded) ones, at the price of the score
 *   products done twice; lse = m + log(sum) is kept for backward.
 * - Backward: a first kernel computes D = dO . O per row (in order of dimension); the dQ kernel walks keys
 *   for a query block, the dK/dV kernel walks query heads of the kv head and then queries for a key block,
 *   each recomputing p = exp(s - lse) and ds = p (dO . v - D) scale (both rounded to bf16 under bf16, as
 *   the CPU rounds its products' operands). Two kernels instead of one with atomic additions: every sum
 *   has one owner and a fixed order.
 *
 * The sums over keys (the output, dQ) and over queries (dK, dV, query head by query head, each in order of
 * position) are chains of fused multiply-adds in the CPU's order (nb_tile_gemm's chains over the same
 * index); the scores' dot products, the row sums and the exps of differing scores are where the bits may
 * differ from the CPU's. Plain fp32 arithmetic on the CUDA cores: tensor-core tiles are the next step for
 * speed (docs/gpu.md). */
#include <math.h>
#include <stdint.h>
#include "backend/bf16.h"
#include "backend/cuda/device.cuh"
#include "backend/cuda/kernels.h"
#include "util/fastmath.h"

namespace {
using namespace nbk;

constexpr int ROWS = 32;                 /* query rows (or keys) a block owns */
constexpr int TILE = 32;                 /* keys (or queries) staged in shared memory at a time */
constexpr int LANES = 4;                 /* threads per row */
constexpr int THREADS = ROWS * LANES;    /* 128 */
constexpr int MAX_HD = 256;              /* per-thread registers: MAX_HD / LANES values per vector */

/* The lanes of this thread's quad, for the shuffles: quads of a warp may take different branches (their
 * rows see different numbers of keys), so each shuffle names only its own quad. */
__device__ __forceinline__ unsigned quad_mask() { return 0xFu << (threadIdx.x & 31 & ~(LANES - 1)); }

/* x . y over hd dimensions, x in this lane's registers (dimensions lane + LANES i), y a row of shared
 * memory; every lane of the quad returns the same bits. */
template <int PER>
__device__ __forceinline__ float quad_dot(const float (&x)[PER], const float *y, int lane, int hd) {
    float s = 0.0f;
#pragma unroll
    for (int i = 0; i < PER; i++)
        if (lane + LANES * i < hd) s = __fmaf_rn(x[i], y[lane + LANES * i], s);
    const unsigned mask = quad_mask();
    s = add(s, __shfl_xor_sync(mask, s, 1));
    return add(s, __shfl_xor_sync(mask, s, 2));
}

/* acc += a * y (this lane's dimensions of a shared row), one fused multiply-add each. */
template <int PER>
__device__ __forceinline__ void quad_axpy(float (&acc)[PER], float a, const float *y, int lane, int hd) {
#pragma unroll
    for (int i = 0; i < PER; i++)
        if (lane + LANES * i < hd) acc[i] = __fmaf_rn(a, y[lane + LANES * i], acc[i]);
}

/* This lane's dimensions of a row of global memory (zeros past hd, or for a row past the sequence). */
template <int PER>
__device__ __forceinline__ void load_lane(float (&x)[PER], const float *row, int lane, int hd, bool valid) {
#pragma unroll
    for (int i = 0; i < PER; i++) x[i] = valid && lane + LANES * i < hd ? row[lane + LANES * i] : 0.0f;
}

template <int PER>
__device__ __forceinline__ void store_lane(float *row, const float (&x)[PER], int lane, int hd) {
#pragma unroll
    for (int i = 0; i < PER; i++)
        if (lane + LANES * i < hd) row[lane + LANES * i] = x[i];
}

/* n rows of hd floats, rows `stride` floats apart in global memory, into consecutive rows of dst; the
 * block's threads together, consecutive threads on consecutive floats. */
__device__ __forceinline__ void stage_rows(float *dst, const float *src, size_t stride, int n, int hd) {
    for (int i = threadIdx.x; i < n * hd; i += THREADS) dst[i] = src[(size_t)(i / hd) * stride + i % hd];
}

/* Stages the keys that the block's rows see (0 .. seen - 1), and their values where sV is given, into shared
 * memory a tile at a time, and calls visit(key row, value row) for each key at or before this thread's row,
 * in order of key. Every thread of the block calls it (the tiles are staged together). */
template <typename Visit>
__device__ __forceinline__ void walk_keys(float *sK, float *sV, const float *K, const float *V, int stride, int hd,
                                          int seen, int row, bool valid, Visit visit) {
    for (int k0 = 0; k0 < seen; k0 += TILE) {
        const int nk = min(TILE, seen - k0);
        stage_rows(sK, K + (size_t)k0 * stride, stride, nk, hd);
        if (sV) stage_rows(sV, V + (size_t)k0 * stride, stride, nk, hd);
        __syncthreads();
        for (int j = 0; valid && j < nk && k0 + j <= row; j++) visit(sK + j * hd, sV ? sV + j * hd : nullptr);
        __syncthreads();
    }
}

__device__ __forceinline__ float maybe_bf16(float x, int bf16) { return bf16 ? nb_bf16_rounded(x) : x; }

/* Where a block is: its sequence b (blockIdx.z), head (blockIdx.y; a query head, or a kv head for dK/dV),
 * its first row, this thread's row and lane. */
struct place {
    int b, head, first, row, lane;
};
__device__ __forceinline__ place where() {
    return {(int)blockIdx.z, (int)blockIdx.y, (int)blockIdx.x * ROWS, (int)blockIdx.x * ROWS + (int)threadIdx.x / LANES,
            (int)threadIdx.x % LANES};
}

/* Shapes of the packed rows qkv[B T][(H + 2 Hkv) hd]. */
struct shape {
    int T, H, Hkv, hd, bf16;
    float scale;
    __device__ int dq() const { return H * hd; }
    __device__ int stride() const { return (H + 2 * Hkv) * hd; }
    __device__ int group() const { return H / Hkv; }
    /* The first key row of query head h's kv head, in a sequence's rows from base (its values follow Hkv hd later). */
    __device__ const float *keys(const float *base, int h) const { return base + dq() + h / group() * hd; }
};

template <int PER>
__global__ void __launch_bounds__(THREADS) forward_k(float *out, nb_bf16 *out16, float *lse, const float *qkv, shape s) {
    extern __shared__ float sh[];  /* TILE rows of K, then TILE rows of V */
    float *sK = sh, *sV = sh + TILE * s.hd;
    const place p = where();
    const int stride = s.stride(), dq = s.dq();
    const bool valid = p.row < s.T;
    const float *base = qkv + (size_t)p.b * s.T * stride, *K = s.keys(base, p.head), *V = K + s.Hkv * s.hd;
    float q[PER], acc[PER];
    load_lane(q, base + (size_t)p.row * stride + p.head * s.hd, p.lane, s.hd, valid);
    load_lane(acc, nullptr, p.lane, s.hd, false);
    const int seen = min(s.T, p.first + ROWS);  /* keys 0 .. seen - 1 are visible to some row of the block */

    float m = -INFINITY, sum = 0.0f;
    walk_keys(sK, nullptr, K, V, stride, s.hd, seen, p.row, valid, [&](const float *k, const float *) {
        const float x = mul(quad_dot(q, k, p.lane, s.hd), s.scale);
        if (m == -INFINITY) m = x, sum = 1.0f;
        else if (x > m) sum = add(mul(sum, nb_expf(sub(m, x))), 1.0f), m = x;
        else sum = add(sum, nb_expf(sub(x, m)));
    });
    const float inv = dvd(1.0f, sum);
    walk_keys(sK, sV, K, V, stride, s.hd, seen, p.row, valid, [&](const float *k, const float *v) {
        const float x = mul(quad_dot(q, k, p.lane, s.hd), s.scale);
        quad_axpy(acc, maybe_bf16(mul(nb_expf(sub(x, m)), inv), s.bf16), v, p.lane, s.hd);
    });
    if (!valid) return;
    const size_t at = ((size_t)p.b * s.T + p.row) * dq + (size_t)p.head * s.hd;
    store_lane(out + at, acc, p.lane, s.hd);
    if (out16)
        for (int i = 0; i < PER; i++)
            if (p.lane + LANES * i < s.hd) out16[at + p.lane + LANES * i] = nb_bf16_from_float(acc[i]);
    if (p.lane == 0) lse[((size_t)p.b * s.H + p.head) * s.T + p.row] = add(m, logf(sum));
}

/* delta[(b H + h) T + t] = dO . O of that row, in order of dimension (one thread per row). */
__global__ void delta_k(float *delta, const float *dout, const float *out, int B, int T, int H, int hd) {
    const size_t r = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= (size_t)B * H * T) return;
    const size_t t = r % T, h = r / T % H, b = r / T / H;
    const size_t at = (b * T + t) * (size_t)H * hd + h * hd;
    float d = 0.0f;
    for (int i = 0; i < hd; i++) d = __fmaf_rn(dout[at + i], out[at + i], d);
    delta[r] = d;
}

/* dQ for a block of query rows: the sum over visible keys of ds k, in order of key. */
template <int PER>
__global__ void __launch_bounds__(THREADS) dq_k(float *dqkv, const float *dout, const float *lse, const float *delta,
                                                const float *qkv, shape s) {
    extern __shared__ float sh[];
    float *sK = sh, *sV = sh + TILE * s.hd;
    const place p = where();
    const int stride = s.stride(), dq = s.dq();
    const bool valid = p.row < s.T;
    const float *base = qkv + (size_t)p.b * s.T * stride, *K = s.keys(base, p.head), *V = K + s.Hkv * s.hd;
    float q[PER], o[PER], acc[PER];
    load_lane(q, base + (size_t)p.row * stride + p.head * s.hd, p.lane, s.hd, valid);
    load_lane(o, dout + ((size_t)p.b * s.T + p.row) * dq + p.head * s.hd, p.lane, s.hd, valid);
    load_lane(acc, nullptr, p.lane, s.hd, false);
    const size_t r = ((size_t)p.b * s.H + p.head) * s.T + p.row;
    const float l = valid ? lse[r] : 0.0f, D = valid ? delta[r] : 0.0f;
    const int seen = min(s.T, p.first + ROWS);
    walk_keys(sK, sV, K, V, stride, s.hd, seen, p.row, valid, [&](const float *k, const float *v) {
        const float pr = nb_expf(sub(mul(quad_dot(q, k, p.lane, s.hd), s.scale), l));
        const float dp = quad_dot(o, v, p.lane, s.hd);
        quad_axpy(acc, maybe_bf16(mul(mul(pr, sub(dp, D)), s.scale), s.bf16), k, p.lane, s.hd);
    });
    if (valid) store_lane(dqkv + ((size_t)p.b * s.T + p.row) * stride + p.head * s.hd, acc, p.lane, s.hd);
}

/* dK and dV for a block of keys of one kv head: over the query heads that read it, then over the queries
 * that see each key (positions >= the key's), in order: dv += p dO, dk += ds q. */
template <int PER>
__global__ void __launch_bounds__(THREADS) dkv_k(float *dqkv, const float *dout, const float *lse, const float *delta,
                                                 const float *qkv, shape s) {
    extern __shared__ float sh[];  /* TILE rows of Q, TILE rows of dO, TILE lse, TILE D */
    float *sQ = sh, *sO = sh + TILE * s.hd, *sL = sO + TILE * s.hd, *sD = sL + TILE;
    const place p = where();  /* p.head: the kv head; p.row: this quad's key */
    const int stride = s.stride(), dq = s.dq(), dkv = s.Hkv * s.hd;
    const bool valid = p.row < s.T;
    const float *base = qkv + (size_t)p.b * s.T * stride;
    float *dbase = dqkv + (size_t)p.b * s.T * stride;
    float k[PER], v[PER], dk[PER], dv[PER];
    load_lane(k, base + (size_t)p.row * stride + dq + p.head * s.hd, p.lane, s.hd, valid);
    load_lane(v, base + (size_t)p.row * stride + dq + dkv + p.head * s.hd, p.lane, s.hd, valid);
    load_lane(dk, nullptr, p.lane, s.hd, false);
    load_lane(dv, nullptr, p.lane, s.hd, false);
    for (int h = p.head * s.group(); h < (p.head + 1) * s.group(); h++)
        for (int t0 = p.first; t0 < s.T; t0 += TILE) {  /* queries before the block's first key see none of it */
            const int nq = min(TILE, s.T - t0);
            stage_rows(sQ, base + (size_t)t0 * stride + h * s.hd, stride, nq, s.hd);
            stage_rows(sO, dout + ((size_t)p.b * s.T + t0) * dq + h * s.hd, dq, nq, s.hd);
            const size_t r = ((size_t)p.b * s.H + h) * s.T + t0;
            for (int i = threadIdx.x; i < nq; i += THREADS) sL[i] = lse[r + i], sD[i] = delta[r + i];
            __syncthreads();
            for (int i = valid ? max(0, p.row - t0) : nq; i < nq; i++) {
                const float pr = nb_expf(sub(mul(quad_dot(k, sQ + i * s.hd, p.lane, s.hd), s.scale), sL[i]));
                const float dp = quad_dot(v, sO + i * s.hd, p.lane, s.hd);
                const float ds = mul(mul(pr, sub(dp, sD[i])), s.scale);
                quad_axpy(dv, maybe_bf16(pr, s.bf16), sO + i * s.hd, p.lane, s.hd);
                quad_axpy(dk, maybe_bf16(ds, s.bf16), sQ + i * s.hd, p.lane, s.hd);
            }
            __syncthreads();
        }
    if (!valid) return;
    store_lane(dbase + (size_t)p.row * stride + dq + p.head * s.hd, dk, p.lane, s.hd);
    store_lane(dbase + (size_t)p.row * stride + dq + dkv + p.head * s.hd, dv, p.lane, s.hd);
}

int bad_shape(const char *what, int B, int T, int H, int Hkv, int hd) {
    return nb_fail("cuda: %s: invalid shape (B %d, T %d, %d query heads, %d kv heads, head_dim %d; expected "
                   "positive sizes, kv heads dividing query heads, head_dim <= %d)",
                   what, B, T, H, Hkv, hd, MAX_HD);
}

bool valid_shape(int B, int T, int H, int Hkv, int hd) {
    return B > 0 && T > 0 && H > 0 && Hkv > 0 && H % Hkv == 0 && hd > 0 && hd <= MAX_HD && B <= 65535 &&
           H <= 65535;
}

/* Launches kernel (K<PER> for the smallest PER that holds hd / LANES) on a grid of row blocks x heads x B
 * with `floats` of dynamic shared memory. */
template <template <int> class Pick, typename... Args>
int launch(const char *what, int rows, int heads, int B, int hd, size_t floats, cudaStream_t stream, Args... args) {
    const size_t bytes = floats * sizeof(float);
    const dim3 grid((unsigned)((rows + ROWS - 1) / ROWS), (unsigned)heads, (unsigned)B);
    auto run = [&](auto kernel) {
        if (bytes > 48 * 1024 &&
            cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes) != cudaSuccess)
            return launched(what);
        kernel<<<grid, THREADS, bytes, stream>>>(args...);
        return launched(what);
    };
    if (hd <= 8 * LANES) return run(Pick<8>::kernel);
    if (hd <= 16 * LANES) return run(Pick<16>::kernel);
    if (hd <= 32 * LANES) return run(Pick<32>::kernel);
    return run(Pick<MAX_HD / LANES>::kernel);
}
template <int PER> struct pick_forward { static constexpr auto kernel = forward_k<PER>; };
template <int PER> struct pick_dq { static constexpr auto kernel = dq_k<PER>; };
template <int PER> struct pick_dkv { static constexpr auto kernel = dkv_k<PER>; };

}  // namespace

extern "C" {

int nbk_attention_forward(float *out, nb_bf16 *out16, float *lse, const float *qkv, int B, int T, int H, int Hkv,
                          int hd, int bf16, cudaStream_t stream) {
    if (!valid_shape(B, T, H, Hkv, hd)) return bad_shape("attention_forward", B, T, H, Hkv, hd);
    const shape s = {T, H, Hkv, hd, bf16 != 0, 1.0f / sqrtf((float)hd)};
    return launch<pick_forward>("attention_forward", T, H, B, hd, (size_t)2 * TILE * hd, stream, out, out16, lse, qkv, s);
}

size_t nbk_attention_scratch_floats(int B, int T, int H) { return (size_t)B * T * H; }

int nbk_attention_delta(float *delta, const float *dout, const float *out, int B, int T, int H, int hd,
                        cudaStream_t stream) {
    const size_t rows = (size_t)B * H * T;
    delta_k<<<(unsigned)((rows + 255) / 256), 256, 0, stream>>>(delta, dout, out, B, T, H, hd);
    return launched("attention_backward (D = dO . O)");
}

int nbk_attention_backward(float *dqkv, const float *dout, const float *out, const float *lse, const float *qkv, int B,
                           int T, int H, int Hkv, int hd, int bf16, float *delta, cudaStream_t stream) {
    if (!valid_shape(B, T, H, Hkv, hd)) return bad_shape("attention_backward", B, T, H, Hkv, hd);
    const shape s = {T, H, Hkv, hd, bf16 != 0, 1.0f / sqrtf((float)hd)};
    if (nbk_attention_delta(delta, dout, out, B, T, H, hd, stream)) return -1;
    if (launch<pick_dq>("attention_backward (dQ)", T, H, B, hd, (size_t)2 * TILE * hd, stream, dqkv, dout, lse,
                        (const float *)delta, qkv, s))
        return -1;
    return launch<pick_dkv>("attention_backward (dK, dV)", T, Hkv, B, hd, (size_t)2 * TILE * hd + 2 * TILE, stream,
                            dqkv, dout, lse, (const float *)delta, qkv, s);
}

}  // extern "C"
