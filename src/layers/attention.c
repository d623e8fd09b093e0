/* Causal grouped-query attention without a stored T x T matrix: forward keeps only each
 * query row's log-sum-exp; backward recomputes the probabilities from it. Work is done in
 * blocks of QBLOCK query rows, each against the keys it can see; a block's scores live in a
 * per-thread scratch of QBLOCK x T floats, so activation memory grows linearly with the context
 * length. One task per (sequence, head) in forward and per (sequence, kv head) in backward, each on
 * one thread, so the result does not depend on the number of threads.
 *
 * The products are nb_tile_gemm's, on the stage's backend (backend/backend.h): each task first packs the head's K and V the way
 * the products read them (K^T and V^T with keys along rows, K and V with rows padded to whole
 * vectors), and each block its Q and dO rows (a 64-byte aligned scratch: a product's vector loads
 * never split a cache line; BENCHMARKS.md, "Attention on register tiles"); the scores are read in
 * place. Causality is used by row tiles of
 * NB_TILE_ROWS queries: a tile's scores are computed only up to its last query's position, and its
 * products with V and K stop there; entries past a row's own position are zeroed up to the block's
 * padded width, so every product reads defined values. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "backend/backend.h"
#include "util/fastmath.h"
#include "layers/layers.h"
#include "util/error.h"

enum { QBLOCK = 64, KBLOCK = 64 }; /* query rows per block; keys per cache block of a product */

static inline float dot(const float *a, const float *b, int n) {
    float s = 0.0f;
#pragma omp simd reduction(+ : s)
    for (int i = 0; i < n; i++) s += a[i] * b[i];
    return s;
}

/* Rounds a row to bf16 values in place (a product operand under bf16); serial: it runs inside a task. */
static inline void round_bf16(float *x, int n) {
#pragma omp simd
    for (int i = 0; i < n; i++) x[i] = nb_bf16_rounded(x[i]);
}

static inline int round_up(int n, int m) { return (n + m - 1) / m * m; }

/* A row stride for n floats: whole vectors, and not a multiple of 512 bytes, since the products walk
 * down columns of K^T and of the scores, and rows 2 KB apart would share a few of L1's sets. */
static inline int row_stride(const nb_backend *be, int n) {
    const int ld = round_up(n, be->tile_width);
    return ld % 128 ? ld : ld + be->tile_width;
}

/* A task's buffers, one set per thread. Widths: Tp keys and hdp head values, both whole vectors. */
typedef struct {
    int Tp, hdp;
    float *S, *dS;          /* [QBLOCK][Tp] a block's scores (probabilities), and their gradients */
    float *KT, *VT;         /* [hd][Tp]: keys along rows, for Q K^T and dO V^T */
    float *Kp, *Vp;         /* [T][hdp]: K and V with padded rows, for P V and dS K */
    float *dKp, *dVp;       /* [T][hdp]: a kv head's gradients, summed over its query heads */
    float *Qp, *dOp, *Ob;   /* [QBLOCK][hdp]: a block's Q and dO padded; a product's output rows */
    /* bf16 products on the CPU's bf16 instruction (pairs: nb_tile_gemm_bf16's packing, backend/backend.h) */
    nb_bf16 *KT2, *VT2;     /* [hd/2][Tp][2]: K and V in pairs along the head dimension, for Q K^T, dO V^T */
    nb_bf16 *V2;            /* [Tp/2][hdp][2]: V (forward) or K (backward) in pairs along keys, for P V, dS K */
    nb_bf16 *A16, *B16;     /* [QBLOCK][hdp]: a block's Q and dO as bf16 rows */
    nb_bf16 *P16;           /* [QBLOCK][Tp]: a block's probabilities (forward) or score gradients (backward) */
    nb_bf16 *PT, *dST;      /* [Tp][QBLOCK]: a block's P and dS by keys (queries along rows), for P^T dO, dS^T Q */
    nb_bf16 *Q2, *dO2;      /* [QBLOCK/2][hdp][2]: a block's Q and dO in pairs along queries */
    float *mem;             /* all of them, one allocation (scratch_new); a pass gets only what it uses */
} att_scratch;

/* Whether attention's bf16 products run on nb_tile_gemm_bf16: where the build has the instruction and
 * the head dimension pairs up (the pairs run along it in Q K^T and dO V^T). */
static int native_bf16(const nb_backend *be, int bf16, int hd) { return bf16 && be->tile_bf16_native && hd % 2 == 0; }

/* Hands out a scratch's buffers in order, each from a whole 64-byte line (every packed row starts a
 * vector, so no load of the products splits a line). With no base it only counts the bytes, so that
 * one description of the layout both sizes the allocation and carves it. */
typedef struct {
    char *base;
    size_t used;
} carver;

static void *take(carver *c, size_t bytes) {
    void *at = c->base ? c->base + c->used : NULL;
    c->used += (bytes + 63) / 64 * 64;
    return at;
}

/* The buffers the pass uses, and only those: forward or backward, fp32 tiles or the bf16 instruction. */
static void layout(att_scratch *s, carver *c, int T, int hd, int backward, int native) {
    const size_t score = (size_t)QBLOCK * s->Tp, trans = (size_t)hd * s->Tp, rows = (size_t)T * s->hdp,
                 block = (size_t)QBLOCK * s->hdp, f = sizeof(float), h = sizeof(nb_bf16);
    s->S = take(c, score * f);
    s->Ob = take(c, block * f);
    if (backward) {
        s->dS = take(c, score * f);
        s->dKp = take(c, rows * f);
        s->dVp = take(c, rows * f);
    }
    if (!native) {
        s->KT = take(c, trans * f);
        s->Qp = take(c, block * f);
        if (backward) {
            s->VT = take(c, trans * f);
            s->Kp = take(c, rows * f);
            s->dOp = take(c, block * f);
        } else {
            s->Vp = take(c, rows * f);
        }
        return;
    }
    s->KT2 = take(c, trans * h);
    s->V2 = take(c, (size_t)s->Tp * s->hdp * h);
    s->A16 = take(c, block * h);
    s->P16 = take(c, score * h);
    if (backward) {
        s->VT2 = take(c, trans * h);
        s->B16 = take(c, block * h);
        s->PT = take(c, (size_t)s->Tp * QBLOCK * h);
        s->dST = take(c, (size_t)s->Tp * QBLOCK * h);
        s->Q2 = take(c, (size_t)QBLOCK * s->hdp * h);
        s->dO2 = take(c, (size_t)QBLOCK * s->hdp * h);
    }
}

/* A thread's scratch from the backend's memory, zeroed (the padding of every packed operand stays 0).
 * s.mem is NULL, with this thread's nb_last_error, when memory runs out. */
static att_scratch scratch_new(const nb_backend *be, int T, int hd, int backward, int native) {
    att_scratch s = {.Tp = row_stride(be, T), .hdp = round_up(hd, be->tile_width)};
    carver size = {0};
    layout(&s, &size, T, hd, backward, native);
    s.mem = nb_backend_alloc(be, size.used, "attention's scratch per thread");
    if (!s.mem) return s;
    carver carve = {(char *)s.mem, 0};
    layout(&s, &carve, T, hd, backward, native);
    return s;
}

/* A thread whose scratch could not be had keeps its message for the pass to return once the parallel
 * region ends (no thread may leave a region early, and each thread has its own nb_last_error). */
static void keep_failure(char *why, size_t size) {
#pragma omp critical(nb_attention_failure)
    snprintf(why, size, "%s", nb_last_error());
}

/* dst[k][t] = src[t][k] for T rows of hd values (row stride ld): keys along dst's rows (row stride Tp).
 * By 16 rows of src at a time, which stay in L1 while each dst row gets 16 consecutive values. */
static void pack_transposed(float *dst, int Tp, const float *src, int T, int hd, int ld) {
    enum { ROWS = 16 };
    for (int t0 = 0; t0 < T; t0 += ROWS) {
        const int n = T - t0 < ROWS ? T - t0 : ROWS;
        for (int k = 0; k < hd; k++) {
            float *d = dst + (size_t)k * Tp + t0;
            const float *s = src + (size_t)t0 * ld + k;
            for (int t = 0; t < n; t++) d[t] = s[(size_t)t * ld];
        }
    }
}

/* dst[t][0..hd) = src[t][0..hd) for n rows; dst's rows are hdp wide, the rest already 0. */
static void pack_rows(float *dst, int hdp, const float *src, int n, int hd, int ld) {
    for (int t = 0; t < n; t++) memcpy(dst + (size_t)t * hdp, src + (size_t)t * ld, sizeof(float) * hd);
}

static void unpack_rows(float *dst, int ld, const float *src, int n, int hd, int hdp) {
    for (int t = 0; t < n; t++) memcpy(dst + (size_t)t * ld, src + (size_t)t * hdp, sizeof(float) * hd);
}

/* out16[rows][hd] (row stride ld) = bf16(out) (row stride hdp): one block of a head's output, cast while
 * it is in cache. */
static void cast_block(nb_bf16 *out16, int ld, const float *out, int rows, int hd, int hdp) {
    for (int i = 0; i < rows; i++) {
#pragma omp simd
        for (int j = 0; j < hd; j++) out16[(size_t)i * ld + j] = nb_bf16_from_float(out[(size_t)i * hdp + j]);
    }
}

/* ---- bf16 operands for nb_tile_gemm_bf16 (the values are already bf16 values: the casts are exact) */

/* dst in pairs along the head dimension: dst[(k/2)][t][k%2] = src[t][k], rows of 2 Tp values; for K^T
 * and V^T, keys along the rows. hd is even. */
static void pack_pairs_dim(nb_bf16 *dst, int Tp, const float *src, int T, int hd, int ld) {
    enum { ROWS = 16 }; /* by 16 keys, which stay in L1 while each pair row gets 16 consecutive pairs */
    uint32_t *d32 = (uint32_t *)dst;
    for (int t0 = 0; t0 < T; t0 += ROWS) {
        const int n = T - t0 < ROWS ? T - t0 : ROWS;
        for (int k = 0; k < hd; k += 2) {
            uint32_t *d = d32 + (size_t)(k / 2) * Tp + t0;
            const float *x = src + (size_t)t0 * ld + k;
            for (int t = 0; t < n; t++)
                d[t] = nb_bf16_from_float(x[(size_t)t * ld]) | (uint32_t)nb_bf16_from_float(x[(size_t)t * ld + 1]) << 16;
        }
    }
}

/* dst in pairs along keys: dst[t/2][j][t%2] = src[t][j], rows of 2 hdp values; for V and K as the right
 * operand of P V and dS K. Keys T.. (to an even count) and columns hd.. stay 0. */
static void pack_pairs_keys(nb_bf16 *dst, int hdp, const float *src, int T, int hd, int ld) {
    for (int t = 0; t < T; t++) {
        nb_bf16 *d = dst + (size_t)(t / 2) * 2 * hdp + (t % 2);
        for (int j = 0; j < hd; j++) d[2 * (size_t)j] = nb_bf16_from_float(src[(size_t)t * ld + j]);
    }
}

/* dst[i][0..n) = bf16(src[i][0..n)) for `rows` rows (strides ldd, lds). */
static void cast_rows(nb_bf16 *dst, int ldd, const float *src, int lds, int rows, int n) {
    for (int i = 0; i < rows; i++) {
#pragma omp simd
        for (int j = 0; j < n; j++) dst[(size_t)i * ldd + j] = nb_bf16_from_float(src[(size_t)i * lds + j]);
    }
}

/* The last key (exclusive) that the row tile holding query row i of a block at t0 sees. */
static inline int tile_keys(int t0, int i, int nq) {
    const int end = (i / NB_TILE_ROWS + 1) * NB_TILE_ROWS;
    return t0 + (end < nq ? end : nq);
}

/* The first row tile of a block at t0 that sees key k0 (the tiles before it end at or before k0). */
static inline int first_tile_seeing(int k0, int t0) {
    return k0 > t0 ? (k0 - t0) / NB_TILE_ROWS * NB_TILE_ROWS : 0;
}

/* S[i][s] = alpha * sum_k A[i][k] BT[k][s] for the nq rows of a block at t0, each row tile up to its
 * last query's keys (A's rows of stride lda, hd wide: Q or dO; BT: K^T or V^T). Keys go by KBLOCK,
 * the row tiles inside, so that the KBLOCK columns of BT in use stay in L1 across the row tiles. */
static void scores(const nb_backend *be, float *S, int ldS, float alpha, const float *A, int lda, const float *BT, int Tp, int t0, int nq,
                   int hd) {
    for (int c0 = 0; c0 < t0 + nq; c0 += KBLOCK)
        for (int i = first_tile_seeing(c0, t0); i < nq; i += NB_TILE_ROWS) {
            const int rows = nq - i < NB_TILE_ROWS ? nq - i : NB_TILE_ROWS, keys = tile_keys(t0, i, nq) - c0;
            nb_tile_gemm(be, rows, keys < KBLOCK ? keys : KBLOCK, hd, alpha, A + (size_t)i * lda, lda, 1, BT + c0, Tp, 0,
                         S + (size_t)i * ldS + c0, ldS);
        }
}

/* Out[i][:] = sum_s P[i][s] B[s][:] for the nq rows of a block at t0 (B: V or K, rows padded to hdp).
 * Keys go by KBLOCK, the row tiles inside (B's KBLOCK rows stay in L1); each element's sum continues
 * from one KBLOCK to the next (accumulate), so it is the same chain over s in order. */
static void mix_rows(const nb_backend *be, float *Out, const float *P, int ldS, const float *B, int hdp, int t0, int nq) {
    for (int k0 = 0; k0 < t0 + nq; k0 += KBLOCK)
        for (int i = first_tile_seeing(k0, t0); i < nq; i += NB_TILE_ROWS) {
            const int rows = nq - i < NB_TILE_ROWS ? nq - i : NB_TILE_ROWS, keys = tile_keys(t0, i, nq) - k0;
            nb_tile_gemm(be, rows, hdp, keys < KBLOCK ? keys : KBLOCK, 1.0f, P + (size_t)i * ldS + k0, ldS, 1,
                         B + (size_t)k0 * hdp, hdp, k0 > 0, Out + (size_t)i * hdp, hdp);
        }
}

/* scores() with bf16 operands: A16 rows (hdp wide), BT2 = K^T or V^T in pairs along the head dimension. */
static void scores16(const nb_backend *be, float *S, int ldS, float alpha, const nb_bf16 *A16, int lda, const nb_bf16 *BT2, int Tp, int t0,
                     int nq, int hd) {
    for (int c0 = 0; c0 < t0 + nq; c0 += KBLOCK)
        for (int i = first_tile_seeing(c0, t0); i < nq; i += NB_TILE_ROWS) {
            const int rows = nq - i < NB_TILE_ROWS ? nq - i : NB_TILE_ROWS, keys = tile_keys(t0, i, nq) - c0;
            nb_tile_gemm_bf16(be, rows, keys < KBLOCK ? keys : KBLOCK, hd, alpha, A16 + (size_t)i * lda, lda,
                              BT2 + 2 * (size_t)c0, Tp, 0, S + (size_t)i * ldS + c0, ldS);
        }
}

/* mix_rows() with bf16 operands: P16 rows (zero past each row's keys, to the block's padded width), B2 =
 * V or K in pairs along keys. A tile's key count is rounded up to even: the extra key is a zero of P16. */
static void mix_rows16(const nb_backend *be, float *Out, const nb_bf16 *P16, int ldS, const nb_bf16 *B2, int hdp, int t0, int nq) {
    for (int k0 = 0; k0 < t0 + nq; k0 += KBLOCK)
        for (int i = first_tile_seeing(k0, t0); i < nq; i += NB_TILE_ROWS) {
            const int rows = nq - i < NB_TILE_ROWS ? nq - i : NB_TILE_ROWS, keys = tile_keys(t0, i, nq) - k0;
            const int n = keys < KBLOCK ? keys : KBLOCK;
            nb_tile_gemm_bf16(be, rows, hdp, n + n % 2, 1.0f, P16 + (size_t)i * ldS + k0, ldS, B2 + (size_t)k0 * hdp, hdp,
                              k0 > 0, Out + (size_t)i * hdp, hdp);
        }
}

/* G[s][:] += sum_i P[i][s] X[i][:] for the keys s < t0 + nq of a block at t0 (dK from dS and Q, dV from P
 * and dO; X: nq rows padded to hdp). Key s gets nothing from queries i < s - t0, so those are skipped. */
static void mix_keys(const nb_backend *be, float *G, const float *P, int ldS, const float *X, int hdp, int t0, int nq) {
    const int nk = t0 + nq;
    for (int s = 0; s < nk; s += NB_TILE_ROWS) {
        const int rows = nk - s < NB_TILE_ROWS ? nk - s : NB_TILE_ROWS, i0 = s > t0 ? s - t0 : 0;
        nb_tile_gemm(be, rows, hdp, nq - i0, 1.0f, P + (size_t)i0 * ldS + s, 1, ldS, X + (size_t)i0 * hdp, hdp, 1,
                     G + (size_t)s * hdp, hdp);
    }
}

/* mix_keys() with bf16 operands: PT = P or dS by keys (row s: the block's queries in order, ld QBLOCK),
 * X2 = Q or dO in pairs along queries. A row tile of keys starts at its first query that sees it (a
 * multiple of NB_TILE_ROWS, so even) and runs to nq rounded up to even: the extra query is zero in both. */
static void mix_keys16(const nb_backend *be, float *G, const nb_bf16 *PT, const nb_bf16 *X2, int hdp, int t0, int nq) {
    const int nk = t0 + nq, n = nq + nq % 2;
    for (int s = 0; s < nk; s += NB_TILE_ROWS) {
        const int rows = nk - s < NB_TILE_ROWS ? nk - s : NB_TILE_ROWS, i0 = s > t0 ? s - t0 : 0;
        nb_tile_gemm_bf16(be, rows, hdp, n - i0, 1.0f, PT + (size_t)s * QBLOCK + i0, QBLOCK, X2 + (size_t)i0 * hdp, hdp,
                          1, G + (size_t)s * hdp, hdp);
    }
}

/* PT[s][i] = bf16(S[i][s]) for a block's nq rows (stride ldS) and the keys s < width, two rows at a time
 * (one 32-bit store per key), with a zero query after an odd nq. */
static void cast_by_keys(nb_bf16 *PT, const float *S, int ldS, int nq, int width) {
    uint32_t *dst = (uint32_t *)PT;
    for (int i = 0; i < nq; i += 2) {
        const float *r0 = S + (size_t)i * ldS, *r1 = r0 + ldS;
        if (i + 1 < nq)
            for (int s = 0; s < width; s++)
                dst[(size_t)s * (QBLOCK / 2) + i / 2] =
                    nb_bf16_from_float(r0[s]) | (uint32_t)nb_bf16_from_float(r1[s]) << 16;
        else
            for (int s = 0; s < width; s++) dst[(size_t)s * (QBLOCK / 2) + i / 2] = nb_bf16_from_float(r0[s]);
    }
}

/* X2 = the nq rows of X (stride ld, hd wide) in pairs along rows, with the row after an odd nq zero. */
static void pack_block_pairs(nb_bf16 *X2, int hdp, const float *X, int ld, int nq, int hd) {
    pack_pairs_keys(X2, hdp, X, nq, hd, ld);
    if (nq % 2)
        for (int j = 0; j < hd; j++) X2[(size_t)(nq / 2) * 2 * hdp + 2 * (size_t)j + 1] = 0;
}

int attention_forward(const nb_backend *be, float *out, nb_bf16 *out16, float *lse, const float *qkv, int B, int T, int H,
                      int Hkv, int hd, int bf16) {
    const int dq = H * hd, dkv = Hkv * hd, stride = dq + 2 * dkv, group = H / Hkv;
    const float scale = 1.0f / sqrtf((float)hd);
    char why[1024] = ""; /* a thread's failure (keep_failure) */
#pragma omp parallel
    {
        const int native = native_bf16(be, bf16, hd);
        att_scratch w = scratch_new(be, T, hd, 0, native);
        if (!w.mem) keep_failure(why, sizeof why);
        const int ldS = w.Tp;
        int packed = -1; /* the (sequence, kv head) whose K^T and V the scratch holds */
#pragma omp for schedule(static) collapse(2)
        for (int b = 0; b < B; b++)
            for (int h = 0; h < H; h++) {
                if (!w.mem) continue; /* the pass has failed: this thread's share is skipped */
                const float *base = qkv + (size_t)b * T * stride;
                const float *K = base + dq + (h / group) * hd, *V = base + dq + dkv + (h / group) * hd;
                if (packed != b * Hkv + h / group) { /* consecutive heads of a thread's share often share it */
                    if (native) {
                        pack_pairs_dim(w.KT2, w.Tp, K, T, hd, stride);
                        pack_pairs_keys(w.V2, w.hdp, V, T, hd, stride);
                    } else {
                        pack_transposed(w.KT, w.Tp, K, T, hd, stride);
                        pack_rows(w.Vp, w.hdp, V, T, hd, stride);
                    }
                    packed = b * Hkv + h / group;
                }
                for (int t0 = 0; t0 < T; t0 += QBLOCK) {
                    const int nq = T - t0 < QBLOCK ? T - t0 : QBLOCK, width = round_up(t0 + nq, be->tile_width);
                    const float *Q = base + (size_t)t0 * stride + h * hd;
                    if (native) {
                        cast_rows(w.A16, w.hdp, Q, stride, nq, hd);
                        scores16(be, w.S, ldS, scale, w.A16, w.hdp, w.KT2, w.Tp, t0, nq, hd);
                    } else {
                        pack_rows(w.Qp, w.hdp, Q, nq, hd, stride);
                        scores(be, w.S, ldS, scale, w.Qp, w.hdp, w.KT, w.Tp, t0, nq, hd);
                    }
                    for (int i = 0; i < nq; i++) {
                        float *row = w.S + (size_t)i * ldS, m = -INFINITY, sum = 0.0f;
                        const int visible = t0 + i + 1;
                        /* The maximum of a set does not depend on the order it is taken in (a +0/-0
                         * tie changes only m's sign, which row[s] - m and m + log(sum) absorb, since
                         * sum >= 1), so the vectorized reduction gives bitwise the serial result. */
#pragma omp simd reduction(max : m)
                        for (int s = 0; s < visible; s++) m = row[s] > m ? row[s] : m;
#pragma omp simd reduction(+ : sum)
                        for (int s = 0; s < visible; s++) {
                            row[s] = nb_expf(row[s] - m);
                            sum += row[s];
                        }
                        const float inv = 1.0f / sum;
#pragma omp simd
                        for (int s = 0; s < visible; s++) row[s] *= inv;
                        memset(row + visible, 0, sizeof(float) * (size_t)(width - visible));
                        if (native) cast_rows(w.P16 + (size_t)i * ldS, ldS, row, ldS, 1, width);
                        else if (bf16) round_bf16(row, visible);
                        lse[((size_t)b * H + h) * T + t0 + i] = m + logf(sum);
                    }
                    if (native) mix_rows16(be, w.Ob, w.P16, ldS, w.V2, w.hdp, t0, nq);
                    else mix_rows(be, w.Ob, w.S, ldS, w.Vp, w.hdp, t0, nq);
                    const size_t at = ((size_t)b * T + t0) * dq + (size_t)h * hd;
                    unpack_rows(out + at, dq, w.Ob, nq, hd, w.hdp);
                    if (out16) cast_block(out16 + at, dq, w.Ob, nq, hd, w.hdp);
                }
            }
        nb_backend_free(be, w.mem);
    }
    return why[0] ? nb_fail("%s", why) : 0;
}

int attention_backward(const nb_backend *be, float *dqkv, const float *dout, const float *out, const float *lse,
                       const float *qkv, int B, int T, int H, int Hkv, int hd, int bf16) {
    const int dq = H * hd, dkv = Hkv * hd, stride = dq + 2 * dkv, group = H / Hkv;
    const float scale = 1.0f / sqrtf((float)hd);
    /* The query heads that share a kv head all add into its dk and dv, so they stay in one
     * task and no two threads write the same rows. */
    char why[1024] = ""; /* a thread's failure (keep_failure) */
#pragma omp parallel
    {
        const int native = native_bf16(be, bf16, hd);
        att_scratch w = scratch_new(be, T, hd, 1, native);
        if (!w.mem) keep_failure(why, sizeof why);
        const int ldS = w.Tp;
#pragma omp for schedule(static) collapse(2)
        for (int b = 0; b < B; b++)
            for (int kvh = 0; kvh < Hkv; kvh++) {
                if (!w.mem) continue; /* the pass has failed: this thread's share is skipped */
                const float *base = qkv + (size_t)b * T * stride;
                float *dbase = dqkv + (size_t)b * T * stride;
                const float *K = base + dq + kvh * hd, *V = base + dq + dkv + kvh * hd;
                if (native) {
                    pack_pairs_dim(w.KT2, w.Tp, K, T, hd, stride);
                    pack_pairs_dim(w.VT2, w.Tp, V, T, hd, stride);
                    pack_pairs_keys(w.V2, w.hdp, K, T, hd, stride);
                } else {
                    pack_transposed(w.KT, w.Tp, K, T, hd, stride);
                    pack_transposed(w.VT, w.Tp, V, T, hd, stride);
                    pack_rows(w.Kp, w.hdp, K, T, hd, stride);
                }
                memset(w.dKp, 0, sizeof(float) * (size_t)T * w.hdp);
                memset(w.dVp, 0, sizeof(float) * (size_t)T * w.hdp);
                for (int h = kvh * group; h < (kvh + 1) * group; h++)
                    for (int t0 = 0; t0 < T; t0 += QBLOCK) {
                        const int nq = T - t0 < QBLOCK ? T - t0 : QBLOCK, width = round_up(t0 + nq, be->tile_width);
                        const float *Q = base + (size_t)t0 * stride + h * hd;
                        const float *dO = dout + ((size_t)b * T + t0) * dq + h * hd;
                        const float *O = out + ((size_t)b * T + t0) * dq + h * hd;
                        /* P from the saved log-sum-exp; dP = dO V^T */
                        if (native) {
                            cast_rows(w.A16, w.hdp, Q, stride, nq, hd);
                            cast_rows(w.B16, w.hdp, dO, dq, nq, hd);
                            pack_block_pairs(w.Q2, w.hdp, Q, stride, nq, hd);
                            pack_block_pairs(w.dO2, w.hdp, dO, dq, nq, hd);
                            scores16(be, w.S, ldS, scale, w.A16, w.hdp, w.KT2, w.Tp, t0, nq, hd);
                            scores16(be, w.dS, ldS, 1.0f, w.B16, w.hdp, w.VT2, w.Tp, t0, nq, hd);
                        } else {
                            pack_rows(w.Qp, w.hdp, Q, nq, hd, stride);
                            pack_rows(w.dOp, w.hdp, dO, nq, hd, dq);
                            scores(be, w.S, ldS, scale, w.Qp, w.hdp, w.KT, w.Tp, t0, nq, hd);
                            scores(be, w.dS, ldS, 1.0f, w.dOp, w.hdp, w.VT, w.Tp, t0, nq, hd);
                        }
                        for (int i = 0; i < nq; i++) {
                            float *p = w.S + (size_t)i * ldS, *ds = w.dS + (size_t)i * ldS;
                            const int visible = t0 + i + 1;
                            const float l = lse[((size_t)b * H + h) * T + t0 + i];
                            const float D = dot(dO + (size_t)i * dq, O + (size_t)i * dq, hd);
#pragma omp simd
                            for (int s = 0; s < visible; s++) {
                                p[s] = nb_expf(p[s] - l);
                                ds[s] = p[s] * (ds[s] - D) * scale;
                            }
                            memset(p + visible, 0, sizeof(float) * (size_t)(width - visible));
                            memset(ds + visible, 0, sizeof(float) * (size_t)(width - visible));
                            if (bf16 && !native) { /* the casts below round */
                                round_bf16(p, visible);
                                round_bf16(ds, visible);
                            }
                            if (native) cast_rows(w.P16 + (size_t)i * ldS, ldS, ds, ldS, 1, width);
                        }
                        if (native) {
                            cast_by_keys(w.PT, w.S, ldS, nq, width);
                            cast_by_keys(w.dST, w.dS, ldS, nq, width);
                        }
                        /* dQ = dS K, dK += dS^T Q, dV += P^T dO */
                        if (native) mix_rows16(be, w.Ob, w.P16, ldS, w.V2, w.hdp, t0, nq);
                        else mix_rows(be, w.Ob, w.dS, ldS, w.Kp, w.hdp, t0, nq);
                        unpack_rows(dbase + (size_t)t0 * stride + h * hd, stride, w.Ob, nq, hd, w.hdp);
                        if (native) {
                            mix_keys16(be, w.dKp, w.dST, w.Q2, w.hdp, t0, nq);
                            mix_keys16(be, w.dVp, w.PT, w.dO2, w.hdp, t0, nq);
                        } else {
                            mix_keys(be, w.dKp, w.dS, ldS, w.Qp, w.hdp, t0, nq);
                            mix_keys(be, w.dVp, w.S, ldS, w.dOp, w.hdp, t0, nq);
                        }
                    }
                unpack_rows(dbase + dq + kvh * hd, stride, w.dKp, T, hd, w.hdp);
                unpack_rows(dbase + dq + dkv + kvh * hd, stride, w.dVp, T, hd, w.hdp);
            }
        nb_backend_free(be, w.mem);
    }
    return why[0] ? nb_fail("%s", why) : 0;
}
