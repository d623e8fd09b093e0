/* Causal grouped-query attention under bf16 on the tensor cores (WMMA tiles of 16 x 16 x 16, bf16 operands,
 * fp32 accumulation): the same contracts and the same algorithm as attention.cu's kernels, for head_dim a
 * multiple of 16 up to 128 under bf16 (nbk_attention_mma_supports). Opt-in (NB_CUDA_KERNELS=next, read by the
 * CUDA backend; docs/gpu.md) until it has run on a GPU: written 2026-12-05 without one.
 *
 * Why its operands are exact: under bf16 the values that meet in attention's products are bf16 values on
 * the CPU too (q, k and v come out of bf16 products and are cast exactly by the CPU's bf16 path; p and ds
 * are rounded to bf16 before they multiply, here as there), so only the order of the sums differs from the
 * CPU's, as it does in attention.cu. dO is rounded to bf16 for its products, as the CPU's bf16 path does.
 *
 * The layout of the work (the same split as attention.cu, so every sum still has one owner):
 * - A block owns 64 query rows of one (sequence, head) (forward, dQ) or 64 keys of one (sequence, kv head)
 *   (dK, dV); its 4 warps own 16 rows each. The other side is walked in tiles of 64 rows staged in shared
 *   memory as bf16 (rows past the sequence are zeros, so a masked product meets no NaN).
 * - A warp's 16 x 64 scores (or their transposes) are tensor-core products into shared memory; two lanes
 *   per row then apply the scale, the causal mask, the exponentials and the bf16 roundings, each over 32
 *   columns, and combine through one shuffle (IEEE addition commutes: both lanes hold the same bits).
 * - Forward makes two passes like attention.cu: the first finds each row's maximum and sum (rescaled as the
 *   maximum moves), the second forms exp(s - m) * (1 / sum) rounded to bf16 and adds P V into fp32
 *   accumulators held in registers across the tiles; lse = m + log(sum).
 * - Backward: D = dO . O (attention.cu's delta kernel); dQ += dS K per query block; dV += P^T dO and
 *   dK += dS^T Q per key block, over the query heads of its kv head and the queries that see its keys.
 * No atomics; every sum's order depends only on the shape, so a run gives the same bits twice. */
#include <math.h>
#include <stdint.h>
#include <cuda_bf16.h>
#include <mma.h>
#include "backend/bf16.h"
#include "backend/cuda/device.cuh"
#include "backend/cuda/kernels.h"
#include "util/fastmath.h"

namespace {
using namespace nbk;
using namespace nvcuda;

constexpr int MR = 64;            /* query rows (or keys) a block owns */
constexpr int MT = 64;            /* keys (or queries) per staged tile */
constexpr int MW = MR / 16;       /* warps: 16 rows each */
constexpr int MTHREADS = MW * 32; /* 128 */
constexpr int MAX_HD = 128;       /* accumulators in registers: MAX_HD / 16 fragments per output */
/* stage16 fills MT rows into regions carved for MR, and the walks take a block's first row as a tile's start */
static_assert(MR == MT, "attention_mma.cu assumes blocks and tiles of the same number of rows");


/* Shared memory's plan for a head_dim: bf16 rows of ld16 values (hd + 8: a multiple of 8, and rows that do
 * not start on the same bank), fp32 score rows of ldS (wide enough to stage a 16 x hd output too), bf16
 * probability rows of ldP. Every region starts on 128 bytes; every fragment's pointer is then on 32 bytes. */
struct plan {
    int hd, ld16, ldS, ldP;
    __host__ __device__ explicit plan(int head_dim)
        : hd(head_dim), ld16(head_dim + 8), ldS((head_dim > MT ? head_dim : MT) + 4), ldP(MT + 8) {}
    __host__ __device__ size_t rows16(int rows) const { return align((size_t)rows * ld16 * 2); }
    __host__ __device__ size_t scores() const { return align((size_t)MW * 16 * ldS * 4); }
    __host__ __device__ size_t probs() const { return align((size_t)MW * 16 * ldP * 2); }
    __host__ __device__ static size_t align(size_t bytes) { return (bytes + 127) & ~(size_t)127; }
};

/* Carves shared memory in order. */
struct carver {
    char *at;
    template <typename T> __device__ T *take(size_t bytes) {
        T *p = (T *)at;
        at += bytes;
        return p;
    }
};

/* Shapes of the packed rows qkv[B T][(H + 2 Hkv) hd] (attention.cu's). */
struct shape {
    int T, H, Hkv, hd;
    float scale;
    __device__ int dq() const { return H * hd; }
    __device__ int stride() const { return (H + 2 * Hkv) * hd; }
    __device__ int group() const { return H / Hkv; }
};

#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
/* The kernels: bf16 tensor cores, sm_80 and newer. A build for an older architecture as well gets kernels that
 * trap there (nbk_attention_mma_device_ok keeps the backend from calling them on such a GPU). */

typedef wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> frag_a;
typedef wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::row_major> frag_b_row;
typedef wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::col_major> frag_b_col;
typedef wmma::fragment<wmma::accumulator, 16, 16, 16, float> frag_acc;

__device__ __forceinline__ const __nv_bfloat16 *as_bf16(const nb_bf16 *p) {
    return reinterpret_cast<const __nv_bfloat16 *>(p);
}

/* dst[r][0..hd) = bf16(src row r), rows r < n read `stride` floats apart, rows n .. MT - 1 zero; the block's
 * threads together, consecutive threads on consecutive values. */
__device__ __forceinline__ void stage16(nb_bf16 *dst, int ld16, const float *src, size_t stride, int n, int hd) {
    for (int i = threadIdx.x; i < MT * hd; i += MTHREADS) {
        const int r = i / hd, c = i % hd;
        dst[r * ld16 + c] = r < n ? nb_bf16_from_float(src[(size_t)r * stride + c]) : (nb_bf16)0;
    }
}

/* S[16][64] (row stride ldS) = A[16][hd] (bf16 rows of ld16) times B^T, B[64][hd] (bf16 rows of ld16): each of
 * the 4 column blocks one chain of hd / 16 tensor-core products. */
__device__ __forceinline__ void scores16(float *S, int ldS, const nb_bf16 *A, const nb_bf16 *B, int ld16, int hd) {
    for (int n = 0; n < MT / 16; n++) {
        frag_acc acc;
        wmma::fill_fragment(acc, 0.0f);
        for (int k = 0; k < hd / 16; k++) {
            frag_a a;
            frag_b_col b;
            wmma::load_matrix_sync(a, as_bf16(A) + k * 16, ld16);
            wmma::load_matrix_sync(b, as_bf16(B) + n * 16 * ld16 + k * 16, ld16);
            wmma::mma_sync(acc, a, b, acc);
        }
        wmma::store_matrix_sync(S + n * 16, acc, ldS, wmma::mem_row_major);
    }
}

/* acc[j] += P[16][64] (bf16 rows of ldP) times X[64][hd] (bf16 rows of ld16), column block j of the head. */
template <int NB>
__device__ __forceinline__ void mix16(frag_acc (&acc)[NB], const nb_bf16 *P, int ldP, const nb_bf16 *X, int ld16) {
#pragma unroll
    for (int j = 0; j < NB; j++)
        for (int k = 0; k < MT / 16; k++) {
            frag_a a;
            frag_b_row b;
            wmma::load_matrix_sync(a, as_bf16(P) + k * 16, ldP);
            wmma::load_matrix_sync(b, as_bf16(X) + k * 16 * ld16 + j * 16, ld16);
            wmma::mma_sync(acc[j], a, b, acc[j]);
        }
}

/* The warp's 16 x hd accumulators into S (row stride ldS >= hd) for the lanes to read. */
template <int NB>
__device__ __forceinline__ void spill(float *S, int ldS, frag_acc (&acc)[NB]) {
#pragma unroll
    for (int j = 0; j < NB; j++) wmma::store_matrix_sync(S + j * 16, acc[j], ldS, wmma::mem_row_major);
}

template <int NB> __device__ __forceinline__ void zero(frag_acc (&acc)[NB]) {
#pragma unroll
    for (int j = 0; j < NB; j++) wmma::fill_fragment(acc[j], 0.0f);
}

/* The tile of keys from k0 (and their values where sV is given) into shared memory, between two barriers of
 * the block: every warp has finished with the tile before, and sees all of this one. */
__device__ __forceinline__ void stage_keys(nb_bf16 *sK, nb_bf16 *sV, const float *K, const float *V, int k0, int T,
                                           size_t stride, int ld16, int hd) {
    __syncthreads();
    stage16(sK, ld16, K + (size_t)k0 * stride, stride, min(MT, T - k0), hd);
    if (sV) stage16(sV, ld16, V + (size_t)k0 * stride, stride, min(MT, T - k0), hd);
    __syncthreads();
}

/* This lane's half of row r of a warp's 16 x hd result spilled into S, to dst (that row's first value). */
__device__ __forceinline__ void write_half(float *dst, const float *S, int ldS, int r, int half, int hd) {
    for (int c = half * (hd / 2); c < (half + 1) * (hd / 2); c++) dst[c] = S[r * ldS + c];
}


/* This lane's row in its warp's 16 (two lanes per row) and which half of the 64 columns it takes. */
__device__ __forceinline__ int lane_row() { return (threadIdx.x & 31) >> 1; }
__device__ __forceinline__ int lane_half() { return threadIdx.x & 1; }
__device__ __forceinline__ int warp_id() { return threadIdx.x >> 5; }
/* The two lanes of a row: lanes 2r and 2r + 1 of the warp. */
__device__ __forceinline__ float pair_max(float x) { return fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1)); }
__device__ __forceinline__ float pair_add(float x) { return add(x, __shfl_xor_sync(0xffffffffu, x, 1)); }

template <int NB>
__global__ void __launch_bounds__(MTHREADS) forward_mma_k(float *out, nb_bf16 *out16, float *lse, const float *qkv,
                                                          shape s) {
    extern __shared__ __align__(128) char smem[];
    const plan pl(s.hd);
    carver cv{smem};
    nb_bf16 *sQ = cv.take<nb_bf16>(pl.rows16(MR)), *sK = cv.take<nb_bf16>(pl.rows16(MT)),
            *sV = cv.take<nb_bf16>(pl.rows16(MT));
    float *sS = cv.take<float>(pl.scores());
    nb_bf16 *sP = cv.take<nb_bf16>(pl.probs());
    const int b = blockIdx.z, h = blockIdx.y, first = blockIdx.x * MR, w = warp_id(), r = lane_row(), half = lane_half();
    const int stride = s.stride(), q = first + w * 16 + r;
    const float *base = qkv + (size_t)b * s.T * stride;
    const float *K = base + s.dq() + h / s.group() * s.hd, *V = K + s.Hkv * s.hd;
    float *S = sS + w * 16 * pl.ldS;
    nb_bf16 *P = sP + w * 16 * pl.ldP;
    stage16(sQ, pl.ld16, base + (size_t)first * stride + h * s.hd, stride, min(MR, s.T - first), s.hd);
    const int seen = min(s.T, first + MR);  /* keys 0 .. seen - 1 are visible to some row of the block */

    float m = -INFINITY, sum = 0.0f;
    for (int k0 = 0; k0 < seen; k0 += MT) {
        stage_keys(sK, nullptr, K, V, k0, s.T, stride, pl.ld16, s.hd);
        scores16(S, pl.ldS, sQ + w * 16 * pl.ld16, sK, pl.ld16, s.hd);
        __syncwarp();
        float tile_max = -INFINITY;
        for (int c = half * 32; c < half * 32 + 32; c++)
            if (k0 + c <= q && q < s.T) tile_max = fmaxf(tile_max, mul(S[r * pl.ldS + c], s.scale));
        tile_max = pair_max(tile_max);
        /* a row with no visible key in this tile (both lanes agree) keeps its m and sum; every lane still
         * takes part in the shuffle below, which names the whole warp */
        const bool any = tile_max != -INFINITY;
        const float m_new = any ? fmaxf(m, tile_max) : m;
        float part = 0.0f;
        for (int c = half * 32; any && c < half * 32 + 32; c++)
            if (k0 + c <= q && q < s.T) part = add(part, nb_expf(sub(mul(S[r * pl.ldS + c], s.scale), m_new)));
        part = pair_add(part);
        if (any) sum = m == -INFINITY ? part : add(mul(sum, nb_expf(sub(m, m_new))), part), m = m_new;
    }
    const float inv = q < s.T ? dvd(1.0f, sum) : 0.0f;

    frag_acc acc[NB];
    zero<NB>(acc);
    for (int k0 = 0; k0 < seen; k0 += MT) {
        stage_keys(sK, sV, K, V, k0, s.T, stride, pl.ld16, s.hd);
        scores16(S, pl.ldS, sQ + w * 16 * pl.ld16, sK, pl.ld16, s.hd);
        __syncwarp();
        for (int c = half * 32; c < half * 32 + 32; c++) {
            const bool visible = k0 + c <= q && q < s.T;
            const float p = visible ? mul(nb_expf(sub(mul(S[r * pl.ldS + c], s.scale), m)), inv) : 0.0f;
            P[r * pl.ldP + c] = nb_bf16_from_float(p);
        }
        __syncwarp();
        mix16<NB>(acc, P, pl.ldP, sV, pl.ld16);
    }
    __syncwarp();
    spill<NB>(S, pl.ldS, acc);
    __syncwarp();
    if (q >= s.T) return;
    const size_t at = ((size_t)b * s.T + q) * s.dq() + (size_t)h * s.hd;
    write_half(out + at, S, pl.ldS, r, half, s.hd);
    for (int c = half * (s.hd / 2); out16 && c < (half + 1) * (s.hd / 2); c++)
        out16[at + c] = nb_bf16_from_float(S[r * pl.ldS + c]);
    if (half == 0) lse[((size_t)b * s.H + h) * s.T + q] = add(m, logf(sum));
}

/* dQ for 64 query rows of (b, h): the sum over visible keys of ds k, ds = bf16(p (dO . v - D) scale). */
template <int NB>
__global__ void __launch_bounds__(MTHREADS) dq_mma_k(float *dqkv, const float *dout, const float *lse,
                                                     const float *delta, const float *qkv, shape s) {
    extern __shared__ __align__(128) char smem[];
    const plan pl(s.hd);
    carver cv{smem};
    nb_bf16 *sQ = cv.take<nb_bf16>(pl.rows16(MR)), *sO = cv.take<nb_bf16>(pl.rows16(MR)),
            *sK = cv.take<nb_bf16>(pl.rows16(MT)), *sV = cv.take<nb_bf16>(pl.rows16(MT));
    float *sS = cv.take<float>(pl.scores()), *sDP = cv.take<float>(pl.scores());
    nb_bf16 *sP = cv.take<nb_bf16>(pl.probs());
    const int b = blockIdx.z, h = blockIdx.y, first = blockIdx.x * MR, w = warp_id(), r = lane_row(), half = lane_half();
    const int stride = s.stride(), q = first + w * 16 + r;
    const float *base = qkv + (size_t)b * s.T * stride;
    const float *K = base + s.dq() + h / s.group() * s.hd, *V = K + s.Hkv * s.hd;
    float *S = sS + w * 16 * pl.ldS, *DP = sDP + w * 16 * pl.ldS;
    nb_bf16 *P = sP + w * 16 * pl.ldP;
    const int nq = min(MR, s.T - first);
    stage16(sQ, pl.ld16, base + (size_t)first * stride + h * s.hd, stride, nq, s.hd);
    stage16(sO, pl.ld16, dout + ((size_t)b * s.T + first) * s.dq() + h * s.hd, s.dq(), nq, s.hd);
    const size_t row = ((size_t)b * s.H + h) * s.T + q;
    const float l = q < s.T ? lse[row] : 0.0f, D = q < s.T ? delta[row] : 0.0f;
    const int seen = min(s.T, first + MR);

    frag_acc acc[NB];
    zero<NB>(acc);
    for (int k0 = 0; k0 < seen; k0 += MT) {
        stage_keys(sK, sV, K, V, k0, s.T, stride, pl.ld16, s.hd);
        scores16(S, pl.ldS, sQ + w * 16 * pl.ld16, sK, pl.ld16, s.hd);
        scores16(DP, pl.ldS, sO + w * 16 * pl.ld16, sV, pl.ld16, s.hd);
        __syncwarp();
        for (int c = half * 32; c < half * 32 + 32; c++) {
            float ds = 0.0f;
            if (k0 + c <= q && q < s.T) {
                const float p = nb_expf(sub(mul(S[r * pl.ldS + c], s.scale), l));
                ds = mul(mul(p, sub(DP[r * pl.ldS + c], D)), s.scale);
            }
            P[r * pl.ldP + c] = nb_bf16_from_float(ds);
        }
        __syncwarp();
        mix16<NB>(acc, P, pl.ldP, sK, pl.ld16);
    }
    __syncwarp();
    spill<NB>(S, pl.ldS, acc);
    __syncwarp();
    if (q >= s.T) return;
    write_half(dqkv + ((size_t)b * s.T + q) * stride + h * s.hd, S, pl.ldS, r, half, s.hd);
}

/* dK and dV for 64 keys of (b, kv head): over the query heads that read it, then over the query tiles that
 * see its keys, in order: dv += bf16(p) dO, dk += bf16(ds) q, with the products' transposes (keys along rows). */
template <int NB>
__global__ void __launch_bounds__(MTHREADS) dkv_mma_k(float *dqkv, const float *dout, const float *lse,
                                                      const float *delta, const float *qkv, shape s) {
    extern __shared__ __align__(128) char smem[];
    const plan pl(s.hd);
    carver cv{smem};
    nb_bf16 *sK = cv.take<nb_bf16>(pl.rows16(MR)), *sV = cv.take<nb_bf16>(pl.rows16(MR)),
            *sQ = cv.take<nb_bf16>(pl.rows16(MT)), *sO = cv.take<nb_bf16>(pl.rows16(MT));
    float *sS = cv.take<float>(pl.scores()), *sDP = cv.take<float>(pl.scores());
    nb_bf16 *sPT = cv.take<nb_bf16>(pl.probs()), *sDST = cv.take<nb_bf16>(pl.probs());
    float *sL = cv.take<float>(plan::align(MT * 4)), *sD = cv.take<float>(plan::align(MT * 4));
    const int b = blockIdx.z, kvh = blockIdx.y, first = blockIdx.x * MR, w = warp_id(), r = lane_row(),
              half = lane_half();
    const int stride = s.stride(), dq = s.dq(), dkv = s.Hkv * s.hd, key = first + w * 16 + r;
    const float *base = qkv + (size_t)b * s.T * stride;
    float *S = sS + w * 16 * pl.ldS, *DP = sDP + w * 16 * pl.ldS;
    nb_bf16 *PT = sPT + w * 16 * pl.ldP, *DST = sDST + w * 16 * pl.ldP;
    const int nk = min(MR, s.T - first);
    stage16(sK, pl.ld16, base + (size_t)first * stride + dq + kvh * s.hd, stride, nk, s.hd);
    stage16(sV, pl.ld16, base + (size_t)first * stride + dq + dkv + kvh * s.hd, stride, nk, s.hd);

    frag_acc dk[NB], dv[NB];
    zero<NB>(dk);
    zero<NB>(dv);
    for (int h = kvh * s.group(); h < (kvh + 1) * s.group(); h++)
        for (int t0 = first; t0 < s.T; t0 += MT) {  /* queries before the block's first key see none of it */
            const int nq = min(MT, s.T - t0);
            __syncthreads();
            stage16(sQ, pl.ld16, base + (size_t)t0 * stride + h * s.hd, stride, nq, s.hd);
            stage16(sO, pl.ld16, dout + ((size_t)b * s.T + t0) * dq + h * s.hd, dq, nq, s.hd);
            const size_t row = ((size_t)b * s.H + h) * s.T + t0;
            for (int i = threadIdx.x; i < MT; i += MTHREADS) {
                sL[i] = i < nq ? lse[row + i] : 0.0f;
                sD[i] = i < nq ? delta[row + i] : 0.0f;
            }
            __syncthreads();
            scores16(S, pl.ldS, sK + w * 16 * pl.ld16, sQ, pl.ld16, s.hd);   /* S^T: keys x queries */
            scores16(DP, pl.ldS, sV + w * 16 * pl.ld16, sO, pl.ld16, s.hd);  /* (dO V^T)^T */
            __syncwarp();
            for (int c = half * 32; c < half * 32 + 32; c++) {
                const int q = t0 + c;
                float p = 0.0f, ds = 0.0f;
                if (key < s.T && q < s.T && q >= key) {
                    p = nb_expf(sub(mul(S[r * pl.ldS + c], s.scale), sL[c]));
                    ds = mul(mul(p, sub(DP[r * pl.ldS + c], sD[c])), s.scale);
                }
                PT[r * pl.ldP + c] = nb_bf16_from_float(p);
                DST[r * pl.ldP + c] = nb_bf16_from_float(ds);
            }
            __syncwarp();
            mix16<NB>(dv, PT, pl.ldP, sO, pl.ld16);
            mix16<NB>(dk, DST, pl.ldP, sQ, pl.ld16);
        }
    __syncwarp();
    float *dst = dqkv + ((size_t)b * s.T + key) * stride + dq;
    spill<NB>(S, pl.ldS, dk);
    __syncwarp();
    if (key < s.T) write_half(dst + kvh * s.hd, S, pl.ldS, r, half, s.hd);
    __syncwarp();
    spill<NB>(S, pl.ldS, dv);
    __syncwarp();
    if (key < s.T) write_half(dst + dkv + kvh * s.hd, S, pl.ldS, r, half, s.hd);
}

#else
/* (the stub names shape's members so that this pass does not warn that they go unused) */
__device__ __forceinline__ void stop(const shape &s) {
    if (s.dq() + s.stride() + s.group() >= 0) __trap();
}
template <int NB> __global__ void forward_mma_k(float *, nb_bf16 *, float *, const float *, shape s) { stop(s); }
template <int NB> __global__ void dq_mma_k(float *, const float *, const float *, const float *, const float *, shape s) {
    stop(s);
}
template <int NB> __global__ void dkv_mma_k(float *, const float *, const float *, const float *, const float *, shape s) {
    stop(s);
}
#endif

int bad_shape(const char *what, int B, int T, int H, int Hkv, int hd, int bf16) {
    return nb_fail("cuda: %s on the tensor cores: unsupported (B %d, T %d, %d query heads, %d kv heads, head_dim %d, "
                   "%s; expected bf16, positive sizes, kv heads dividing query heads, head_dim a multiple of 16 up to %d)",
                   what, B, T, H, Hkv, hd, bf16 ? "bf16" : "fp32", MAX_HD);
}

int old_device(const char *what) {
    return nb_fail("cuda: %s on the tensor cores: this GPU has no bf16 tensor cores (compute capability 8.0 or newer "
                   "expected)", what);
}

bool valid_shape(int B, int T, int H, int Hkv, int hd, int bf16) {
    return bf16 && B > 0 && T > 0 && H > 0 && Hkv > 0 && H % Hkv == 0 && hd > 0 && hd % 16 == 0 && hd <= MAX_HD &&
           B <= 65535 && H <= 65535;
}

/* Launches kernel<hd / 16> on a grid of row blocks x heads x B with `bytes` of dynamic shared memory. */
template <template <int> class Pick, typename... Args>
int launch(const char *what, int rows, int heads, int B, int hd, size_t bytes, cudaStream_t stream, Args... args) {
    const dim3 grid((unsigned)((rows + MR - 1) / MR), (unsigned)heads, (unsigned)B);
    auto run = [&](auto kernel) {
        if (cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes) != cudaSuccess)
            return launched(what);
        kernel<<<grid, MTHREADS, bytes, stream>>>(args...);
        return launched(what);
    };
    switch (hd / 16) {
    case 1: return run(Pick<1>::kernel);
    case 2: return run(Pick<2>::kernel);
    case 3: return run(Pick<3>::kernel);
    case 4: return run(Pick<4>::kernel);
    case 5: return run(Pick<5>::kernel);
    case 6: return run(Pick<6>::kernel);
    case 7: return run(Pick<7>::kernel);
    default: return run(Pick<8>::kernel);
    }
}
template <int NB> struct pick_forward { static constexpr auto kernel = forward_mma_k<NB>; };
template <int NB> struct pick_dq { static constexpr auto kernel = dq_mma_k<NB>; };
template <int NB> struct pick_dkv { static constexpr auto kernel = dkv_mma_k<NB>; };

}  // namespace

extern "C" {

int nbk_attention_mma_supports(int hd, int bf16) { return bf16 && hd > 0 && hd % 16 == 0 && hd <= MAX_HD; }

int nbk_attention_mma_device_ok(void) {
    int device = 0, major = 0;
    if (cudaGetDevice(&device) != cudaSuccess ||
        cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess || major < 8)
        return 0;
    /* and the code that loads for this GPU is the real kernels, not the stubs of an older architecture's PTX */
    struct cudaFuncAttributes a;
    return cudaFuncGetAttributes(&a, forward_mma_k<1>) == cudaSuccess && a.ptxVersion >= 80;
}

int nbk_attention_forward_mma(float *out, nb_bf16 *out16, float *lse, const float *qkv, int B, int T, int H, int Hkv,
                              int hd, int bf16, cudaStream_t stream) {
    if (!valid_shape(B, T, H, Hkv, hd, bf16)) return bad_shape("attention_forward", B, T, H, Hkv, hd, bf16);
    if (!nbk_attention_mma_device_ok()) return old_device("attention_forward");
    const shape s = {T, H, Hkv, hd, 1.0f / sqrtf((float)hd)};
    const plan pl(hd);
    const size_t bytes = pl.rows16(MR) + 2 * pl.rows16(MT) + pl.scores() + pl.probs();
    return launch<pick_forward>("attention_forward (tensor cores)", T, H, B, hd, bytes, stream, out, out16, lse, qkv, s);
}

int nbk_attention_backward_mma(float *dqkv, const float *dout, const float *out, const float *lse, const float *qkv,
                               int B, int T, int H, int Hkv, int hd, int bf16, float *delta, cudaStream_t stream) {
    if (!valid_shape(B, T, H, Hkv, hd, bf16)) return bad_shape("attention_backward", B, T, H, Hkv, hd, bf16);
    if (!nbk_attention_mma_device_ok()) return old_device("attention_backward");
    const shape s = {T, H, Hkv, hd, 1.0f / sqrtf((float)hd)};
    const plan pl(hd);
    if (nbk_attention_delta(delta, dout, out, B, T, H, hd, stream)) return -1;
    const size_t dq_bytes = 2 * pl.rows16(MR) + 2 * pl.rows16(MT) + 2 * pl.scores() + pl.probs();
    if (launch<pick_dq>("attention_backward (dQ, tensor cores)", T, H, B, hd, dq_bytes, stream, dqkv, dout, lse,
                        (const float *)delta, qkv, s))
        return -1;
    const size_t dkv_bytes =
        2 * pl.rows16(MR) + 2 * pl.rows16(MT) + 2 * pl.scores() + 2 * pl.probs() + 2 * plan::align(MT * 4);
    return launch<pick_dkv>("attention_backward (dK, dV, tensor cores)", T, Hkv, B, hd, dkv_bytes, stream, dqkv, dout,
                            lse, (const float *)delta, qkv, s);
}

}  // extern "C"
