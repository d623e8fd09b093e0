/* The CUDA kernels (src/backend/cuda/kernels.cu, -DNB_CUDA=ON only) against the CPU functions they stand
 * for: src/layers' embedding, RMSNorm, RoPE, SwiGLU and cross-entropy, forward and backward, and the
 * elementwise rules of src/optim (AdamW, Lion, Adan, MARS), the MoE block's routing, grouping and sums (moe.c's
 * steps, from its state); a stage in the GPU's memory against the CPU (check_device_stage); attention against a double-precision
 * reference (its own bound, stated at check_attention_gpu's section). Random inputs from a fixed seed, shapes that
 * are not multiples of the kernels' 256-thread blocks (37 rows of 100, rows of 1000 and 1003, 3701 values).
 * Exits 77 (ctest's "skipped", the reason printed) where there is no GPU or driver.
 *
 * Each GPU result runs twice from the same inputs and must give the same bits (no atomics, fixed-order
 * reductions). Against the CPU, every value must lie within a stated bound of the CPU's, a number of units
 * of fp32 rounding (u = 2^-24) times the sum of the magnitudes of the terms that make it (mag), so that
 * cancellation does not make the bound meaningless:
 * - The kernels that do the CPU's operations in the CPU's order (embedding, RoPE, SwiGLU, the loss's
 *   gradient, the optimizers, RMSNorm's dgain; kernels.cu says how) are expected to give the CPU's bits;
 *   the check allows 2 u mag (8 u mag for the optimizers' steps, a few roundings deep) and prints how many
 *   values are bitwise equal, so a difference in rounding shows without failing, and a wrong formula
 *   (relative errors of 1e-3 and more) fails.
 * - The row reductions add in a tree where the CPU adds in vector lanes. A sum of k terms in any order is
 *   within gamma(k) = k u / (1 - k u) of the sum of its terms' magnitudes, so two orders differ by at most
 *   twice that: RMSNorm's rstd and output within (d + 14) u of their value (squares: no cancellation; a few
 *   roundings for the mean, sqrt, division and products), its dx within 2 (d + 8) u mag; the log-sum-exp
 *   within 2 (V + 2) u (the sum of V exps, which are the CPU's bits, relative) + 8 u (|log sum| + |lse|)
 *   (libm's and CUDA's logf, each within an ulp or two); the loss's sum within the sum of its rows' bounds.
 *   MARS's norm is a double sum (relative error ~1e-13): its clipping scale may differ by an ulp, inside the
 *   8 u mag of the steps.
 * - The bf16 forms (RMSNorm's output, RoPE's, SwiGLU's, the loss's gradient) round the same fp32 values to
 *   bf16, so they are expected bitwise too; the bound adds one bf16 step (2^-7 of the value, 2^17 u) to the
 *   fp32 bound, the most two values within it can differ once rounded; the pure casts are exact.
 * Before the GPU runs, the comparison itself is checked on the CPU: a value 3 bounds off and a NaN fail. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cuda_runtime.h>
#include "backend/cuda.h"
#include "backend/cuda/kernels.h"
#include "check.h"
#include "layers/layers.h"
#include "delay/ops.h"
#include "layers/moe.h"
#include "layers/ops.h"
#include "nobubble/model.h"
#include "stage_run.h"
#include "nobubble/backend.h"
#include "nobubble/optim.h"
#include "optim/rules.h"
#include "util/error.h"

#define U 0x1p-24  /* fp32's unit roundoff */
#define BF16 131072.0  /* one bf16 step, 2^-7 of a value, in u: where two fp32 values within their bound straddle
                          a bf16 rounding boundary, their bf16 values are one step apart */

static uint64_t rng = 0x2545f4914f6cdd1dull;
static float uniform(void) { /* in [-1, 1) */
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (float)((double)(rng >> 11) / 4503599627370496.0 - 1.0);
}
static void fill(float *x, size_t n, float scale) {
    for (size_t i = 0; i < n; i++) x[i] = scale * uniform();
}
static void *alloc(size_t bytes) {
    void *p = calloc(1, bytes ? bytes : 1);
    if (!p) fprintf(stderr, "out of host memory\n"), exit(1);
    return p;
}

/* ---- Device memory: any CUDA failure ends the test, saying where ---- */
#define CU(call) cu_check((call), #call, __LINE__)
static void cu_check(cudaError_t e, const char *what, int line) {
    if (e == cudaSuccess) return;
    fprintf(stderr, "FAIL line %d: %s: %s (%s)\n", line, what, cudaGetErrorString(e), cudaGetErrorName(e));
    exit(1);
}
/* A device copy of host bytes; host NULL: bytes of 0xff (NaN as floats), so that a value a kernel forgets to
 * write fails the comparison. */
static void *dev(const void *host, size_t bytes) {
    void *p = NULL;
    CU(cudaMalloc(&p, bytes ? bytes : 1));
    if (host) CU(cudaMemcpy(p, host, bytes, cudaMemcpyHostToDevice));
    else CU(cudaMemset(p, 0xff, bytes));
    return p;
}
static void put(void *d, const void *host, size_t bytes) { CU(cudaMemcpy(d, host, bytes, cudaMemcpyHostToDevice)); }
static void get(void *host, const void *d, size_t bytes) {
    CU(cudaDeviceSynchronize());  /* a kernel's failure while it ran shows here */
    CU(cudaMemcpy(host, d, bytes, cudaMemcpyDeviceToHost));
}
/* A kernel entry point's return value. */
static void ran(int rc, const char *what) { CHECK(rc == 0, "%s: the call failed: %s", what, rc ? nb_last_error() : ""); }

/* ---- Comparisons ---- */

/* The worst |gpu - cpu| / (ulps u mag) over n values (mag NULL: |cpu|), its index in *at, the bitwise-equal
 * count in *same. A NaN, or a difference where the bound is 0, is infinitely bad. */
static double worst_of(const float *gpu, const float *cpu, const double *mag, size_t n, double ulps, size_t *at,
                       size_t *same) {
    double worst = 0;
    *at = 0, *same = 0;
    for (size_t i = 0; i < n; i++) {
        *same += memcmp(&gpu[i], &cpu[i], sizeof(float)) == 0;
        const double diff = fabs((double)gpu[i] - (double)cpu[i]);
        const double bound = ulps * U * (mag ? mag[i] : fabs((double)cpu[i]));
        double r = diff == 0 ? 0 : diff / bound;   /* diff/0 = inf */
        if (isnan(r) || isnan((double)gpu[i]) != isnan((double)cpu[i])) r = INFINITY;
        if (isnan((double)gpu[i]) && isnan((double)cpu[i])) r = 0;
        if (r > worst || (isinf(r) && !isinf(worst))) worst = r, *at = i;
    }
    return worst;
}

static void compare(const char *what, const float *gpu, const float *cpu, const double *mag, size_t n, double ulps) {
    size_t at, same;
    const double worst = worst_of(gpu, cpu, mag, n, ulps, &at, &same);
    const double m = mag ? mag[at] : fabs((double)cpu[at]);
    CHECK(worst <= 1.0,
          "%s: value %zu differs: GPU %.9g, CPU %.9g, |diff| %.3g > bound %.3g (%g u of magnitude %.6g); worst %.3g "
          "of the bound; %zu of %zu values bitwise equal",
          what, at, (double)gpu[at], (double)cpu[at], fabs((double)gpu[at] - (double)cpu[at]), ulps * U * m, ulps, m,
          worst, same, n);
    printf("%-44s %6zu of %6zu bitwise the CPU's, worst %.3g of the bound (%g u)\n", what, same, n, worst, ulps);
}

/* Two GPU runs' results must be the same bits. */
static void same_bits(const char *what, const void *a, const void *b, size_t bytes, size_t elem) {
    size_t i = 0;
    while (i < bytes && ((const unsigned char *)a)[i] == ((const unsigned char *)b)[i]) i++;
    CHECK(i == bytes, "%s: two GPU runs differ, first at element %zu", what, i / elem);
}

/* Two GPU runs (g1, g2) the same bits, and the first within ulps u mag of the CPU's values. */
static void judge(const char *what, const float *g1, const float *g2, const float *cpu, const double *mag, size_t n,
                  double ulps) {
    same_bits(what, g1, g2, sizeof(float) * n, sizeof(float));
    compare(what, g1, cpu, mag, n, ulps);
}

/* The same for bf16 values (widened exactly). */
static void judge16(const char *what, const nb_bf16 *g1, const nb_bf16 *g2, const nb_bf16 *cpu, const double *mag,
                    size_t n, double ulps) {
    float *w1 = alloc(sizeof(float) * n), *w2 = alloc(sizeof(float) * n), *wc = alloc(sizeof(float) * n);
    for (size_t i = 0; i < n; i++)
        w1[i] = nb_bf16_to_float(g1[i]), w2[i] = nb_bf16_to_float(g2[i]), wc[i] = nb_bf16_to_float(cpu[i]);
    judge(what, w1, w2, wc, mag, n, ulps);
    free(w1), free(w2), free(wc);
}

/* The comparison can fail: a value 3 bounds off, a NaN, and a difference where the bound is 0. */
static void check_the_check(void) {
    float cpu[3] = {1.0f, -2.0f, 0.0f}, gpu[3];
    double mag[3] = {1.0, 2.0, 0.0};
    size_t at, same;
    memcpy(gpu, cpu, sizeof gpu);
    CHECK(worst_of(gpu, cpu, mag, 3, 2, &at, &same) == 0 && same == 3, "equal values pass");
    gpu[1] = (float)(-2.0 - 3 * (2 * U * 2.0));  /* 3 bounds (2 u of magnitude 2) away: 3 ulps of 2 */
    CHECK(worst_of(gpu, cpu, mag, 3, 2, &at, &same) > 1 && at == 1, "a value 3 bounds off fails");
    memcpy(gpu, cpu, sizeof gpu);
    gpu[0] = NAN;
    CHECK(isinf(worst_of(gpu, cpu, mag, 3, 2, &at, &same)) && at == 0, "a NaN fails");
    memcpy(gpu, cpu, sizeof gpu);
    gpu[2] = 1e-30f;
    CHECK(worst_of(gpu, cpu, mag, 3, 2, &at, &same) > 1 && at == 2, "any difference fails where the bound is 0");
}

/* ---- Layers ---- */

static void check_embedding(void) {
    enum { V = 50, N = 37, D = 100, REPEATS = 11 };
    int tokens[N];
    for (int n = 0; n < N; n++) tokens[n] = (int)((uniform() + 1.0f) * 0.5f * REPEATS) % REPEATS;  /* repeats */
    tokens[N - 1] = V - 1;
    float *table = alloc(sizeof(float) * V * D), *dout = alloc(sizeof(float) * N * D);
    float *cpu = alloc(sizeof(float) * V * D), *g1 = alloc(sizeof(float) * V * D), *g2 = alloc(sizeof(float) * V * D);
    double *mag = alloc(sizeof(double) * V * D);
    fill(table, V * D, 1.0f), fill(dout, N * D, 1.0f);
    int *d_tok = dev(tokens, sizeof tokens);
    float *d_table = dev(table, sizeof(float) * V * D), *d_out = dev(NULL, sizeof(float) * N * D);
    float *d_dout = dev(dout, sizeof(float) * N * D);

    embedding_forward(cpu, tokens, table, N, D);
    ran(nbk_embedding_forward(d_out, d_tok, d_table, N, D, 0), "embedding_forward");
    get(g1, d_out, sizeof(float) * N * D);
    CU(cudaMemset(d_out, 0xff, sizeof(float) * N * D));
    ran(nbk_embedding_forward(d_out, d_tok, d_table, N, D, 0), "embedding_forward");
    get(g2, d_out, sizeof(float) * N * D);
    judge("embedding_forward (a copy: exact)", g1, g2, cpu, NULL, (size_t)N * D, 0);

    /* backward into a table that is not zero (+=), the rows' additions in order of n */
    memcpy(cpu, table, sizeof(float) * V * D);
    for (size_t i = 0; i < (size_t)V * D; i++) mag[i] = fabs((double)table[i]);
    for (int n = 0; n < N; n++)
        for (int i = 0; i < D; i++) mag[(size_t)tokens[n] * D + i] += fabs((double)dout[(size_t)n * D + i]);
    embedding_backward(cpu, dout, tokens, N, D);
    for (int run = 0; run < 2; run++) {
        put(d_table, table, sizeof(float) * V * D);
        ran(nbk_embedding_backward(d_table, d_dout, d_tok, N, D, 0), "embedding_backward");
        get(run ? g2 : g1, d_table, sizeof(float) * V * D);
    }
    judge("embedding_backward", g1, g2, cpu, mag, (size_t)V * D, 2);
    cudaFree(d_tok), cudaFree(d_table), cudaFree(d_out), cudaFree(d_dout);
    free(table), free(dout), free(cpu), free(g1), free(g2), free(mag);
}

static void check_rmsnorm(int N, int D) {
    char what[96];
    const float eps = 1e-5f;
    const size_t nd = (size_t)N * D;
    float *x = alloc(sizeof(float) * nd), *gain = alloc(sizeof(float) * D), *dout = alloc(sizeof(float) * nd);
    float *out = alloc(sizeof(float) * nd), *rstd = alloc(sizeof(float) * N);
    float *o1 = alloc(sizeof(float) * nd), *o2 = alloc(sizeof(float) * nd), *r1 = alloc(sizeof(float) * N),
          *r2 = alloc(sizeof(float) * N);
    float *dx0 = alloc(sizeof(float) * nd), *dx = alloc(sizeof(float) * nd), *dg0 = alloc(sizeof(float) * D),
          *dg = alloc(sizeof(float) * D), *dg1 = alloc(sizeof(float) * D), *dg2 = alloc(sizeof(float) * D);
    double *mag = alloc(sizeof(double) * nd), *magg = alloc(sizeof(double) * D);
    fill(x, nd, 2.0f), fill(dout, nd, 1.0f), fill(dx0, nd, 0.5f), fill(dg0, D, 0.5f);
    for (int i = 0; i < D; i++) gain[i] = 1.0f + 0.5f * uniform();
    float *d_x = dev(x, sizeof(float) * nd), *d_gain = dev(gain, sizeof(float) * D), *d_dout = dev(dout, sizeof(float) * nd);
    float *d_out = dev(NULL, sizeof(float) * nd), *d_rstd = dev(NULL, sizeof(float) * N);
    float *d_dx = dev(NULL, sizeof(float) * nd), *d_dg = dev(NULL, sizeof(float) * D);

    rmsnorm_forward(out, rstd, x, gain, N, D, eps);
    for (int run = 0; run < 2; run++) {
        ran(nbk_rmsnorm_forward(d_out, d_rstd, d_x, d_gain, N, D, eps, 0), "rmsnorm_forward");
        get(run ? o2 : o1, d_out, sizeof(float) * nd);
        get(run ? r2 : r1, d_rstd, sizeof(float) * N);
    }
    snprintf(what, sizeof what, "rmsnorm_forward %dx%d rstd", N, D);
    judge(what, r1, r2, rstd, NULL, (size_t)N, D + 14);
    snprintf(what, sizeof what, "rmsnorm_forward %dx%d out", N, D);
    judge(what, o1, o2, out, NULL, nd, D + 14);
    {
        nb_bf16 *c16 = alloc(sizeof(nb_bf16) * nd), *h1 = alloc(sizeof(nb_bf16) * nd), *h2 = alloc(sizeof(nb_bf16) * nd);
        nb_bf16 *d_o16 = dev(NULL, sizeof(nb_bf16) * nd);
        rmsnorm_forward_bf16(c16, rstd, x, gain, N, D, eps);
        for (int run = 0; run < 2; run++) {
            ran(nbk_rmsnorm_forward_bf16(d_o16, d_rstd, d_x, d_gain, N, D, eps, 0), "rmsnorm_forward_bf16");
            get(run ? h2 : h1, d_o16, sizeof(nb_bf16) * nd);
        }
        snprintf(what, sizeof what, "rmsnorm_forward_bf16 %dx%d out", N, D);
        judge16(what, h1, h2, c16, NULL, nd, D + 14 + BF16);
        cudaFree(d_o16), free(c16), free(h1), free(h2);
    }

    /* backward from the CPU's rstd, onto dx and dgain that are not zero (+=) */
    memcpy(dx, dx0, sizeof(float) * nd), memcpy(dg, dg0, sizeof(float) * D);
    rmsnorm_backward(dx, dg, dout, x, gain, rstd, N, D);
    for (int i = 0; i < D; i++) magg[i] = fabs((double)dg0[i]);
    for (int n = 0; n < N; n++) {
        const double r = rstd[n];
        double dot = 0;
        for (int i = 0; i < D; i++) dot += fabs((double)gain[i] * dout[(size_t)n * D + i] * x[(size_t)n * D + i]);
        for (int i = 0; i < D; i++) {
            const size_t k = (size_t)n * D + i;
            mag[k] = fabs((double)dx0[k]) + fabs(r * gain[i] * dout[k]) + fabs((double)x[k]) * r * r * r / D * dot;
            magg[i] += fabs((double)dout[k] * x[k] * r);
        }
    }
    put(d_rstd, rstd, sizeof(float) * N);
    for (int run = 0; run < 2; run++) {
        put(d_dx, dx0, sizeof(float) * nd), put(d_dg, dg0, sizeof(float) * D);
        ran(nbk_rmsnorm_backward(d_dx, d_dg, d_dout, d_x, d_gain, d_rstd, N, D, 0), "rmsnorm_backward");
        get(run ? o2 : o1, d_dx, sizeof(float) * nd);
        get(run ? dg2 : dg1, d_dg, sizeof(float) * D);
    }
    snprintf(what, sizeof what, "rmsnorm_backward %dx%d dx", N, D);
    judge(what, o1, o2, dx, mag, nd, 2.0 * (D + 8));
    snprintf(what, sizeof what, "rmsnorm_backward %dx%d dgain", N, D);
    judge(what, dg1, dg2, dg, magg, (size_t)D, 2);
    /* dgain on every SM (nbk_rmsnorm_backward_wide, NB_CUDA_KERNELS=next): the same products added in the same
     * order, so the one-thread-per-column kernel's bits, dx's too (the same kernel) */
    {
        float *d_terms = dev(NULL, sizeof(float) * nbk_rmsnorm_wide_scratch_floats(N, D));
        float *wdx = alloc(sizeof(float) * nd), *wdg = alloc(sizeof(float) * D);
        for (int run = 0; run < 2; run++) {
            put(d_dx, dx0, sizeof(float) * nd), put(d_dg, dg0, sizeof(float) * D);
            ran(nbk_rmsnorm_backward_wide(d_dx, d_dg, d_dout, d_x, d_gain, d_rstd, N, D, d_terms, 0),
                "rmsnorm_backward_wide");
            get(wdx, d_dx, sizeof(float) * nd), get(wdg, d_dg, sizeof(float) * D);
            snprintf(what, sizeof what, "rmsnorm_backward_wide %dx%d dgain against the one-thread kernel's (run %d)", N,
                     D, run + 1);
            same_bits(what, wdg, dg1, sizeof(float) * D, sizeof(float));
            snprintf(what, sizeof what, "rmsnorm_backward_wide %dx%d dx against the one-thread kernel's (run %d)", N, D,
                     run + 1);
            same_bits(what, wdx, o1, sizeof(float) * nd, sizeof(float));
        }
        cudaFree(d_terms), free(wdx), free(wdg);
    }
    cudaFree(d_x), cudaFree(d_gain), cudaFree(d_dout), cudaFree(d_out), cudaFree(d_rstd), cudaFree(d_dx), cudaFree(d_dg);
    free(x), free(gain), free(dout), free(out), free(rstd), free(o1), free(o2), free(r1), free(r2);
    free(dx0), free(dx), free(dg0), free(dg), free(dg1), free(dg2), free(mag), free(magg);
}

/* The wide dgain past the grid's 65535 row tiles (N > 65535 x 32 rows: its loop over row tiles), bit for bit
 * against the one-thread-per-column kernel; d 3, so 3 x 2.1M values per array. */
static void check_dgain_tall(void) {
    enum { N = 65535 * 32 + 33, D = 3 };
    const size_t nd = (size_t)N * D;
    float *x = alloc(sizeof(float) * nd), *dout = alloc(sizeof(float) * nd), *rstd = alloc(sizeof(float) * N);
    float *dg0 = alloc(sizeof(float) * D), *one = alloc(sizeof(float) * D), *wide = alloc(sizeof(float) * D), gain[D];
    fill(x, nd, 2.0f), fill(dout, nd, 1.0f), fill(dg0, D, 0.5f);
    for (int n = 0; n < N; n++) rstd[n] = 0.5f + 0.25f * uniform();
    for (int i = 0; i < D; i++) gain[i] = 1.0f;
    float *d_x = dev(x, sizeof(float) * nd), *d_dout = dev(dout, sizeof(float) * nd), *d_rstd = dev(rstd, sizeof(float) * N);
    float *d_gain = dev(gain, sizeof gain), *d_dx = dev(NULL, sizeof(float) * nd), *d_dg = dev(dg0, sizeof(float) * D);
    float *d_terms = dev(NULL, sizeof(float) * nbk_rmsnorm_wide_scratch_floats(N, D));
    CU(cudaMemset(d_dx, 0, sizeof(float) * nd));
    ran(nbk_rmsnorm_backward(d_dx, d_dg, d_dout, d_x, d_gain, d_rstd, N, D, 0), "rmsnorm_backward (tall)");
    get(one, d_dg, sizeof(float) * D);
    put(d_dg, dg0, sizeof(float) * D);
    ran(nbk_rmsnorm_backward_wide(d_dx, d_dg, d_dout, d_x, d_gain, d_rstd, N, D, d_terms, 0), "rmsnorm_backward_wide (tall)");
    get(wide, d_dg, sizeof(float) * D);
    same_bits("rmsnorm_backward_wide, 2097153 rows: dgain against the one-thread kernel's", wide, one, sizeof(float) * D,
              sizeof(float));
    cudaFree(d_x), cudaFree(d_dout), cudaFree(d_rstd), cudaFree(d_gain), cudaFree(d_dx), cudaFree(d_dg), cudaFree(d_terms);
    free(x), free(dout), free(rstd), free(dg0), free(one), free(wide);
}

static void check_rope(void) {
    enum { B = 3, T = 13, H = 4, HKV = 2, HD = 10, HALF = HD / 2, STRIDE = (H + 2 * HKV) * HD, ROT = H + HKV };
    const size_t n = (size_t)B * T * STRIDE;
    float cos_t[T * HALF], sin_t[T * HALF];
    for (int t = 0; t < T; t++)
        for (int i = 0; i < HALF; i++) {
            const double a = t * pow(10000.0, -2.0 * i / HD);
            cos_t[t * HALF + i] = (float)cos(a), sin_t[t * HALF + i] = (float)sin(a);
        }
    float *x = alloc(sizeof(float) * n), *cpu = alloc(sizeof(float) * n), *g1 = alloc(sizeof(float) * n),
          *g2 = alloc(sizeof(float) * n);
    double *mag = alloc(sizeof(double) * n);
    fill(x, n, 3.0f);
    float *d_x = dev(x, sizeof(float) * n), *d_cos = dev(cos_t, sizeof cos_t), *d_sin = dev(sin_t, sizeof sin_t);
    for (size_t k = 0; k < n; k++) mag[k] = fabs((double)x[k]);  /* the heads not rotated: copied */
    for (int r = 0; r < B * T; r++)
        for (int h = 0; h < ROT; h++)
            for (int i = 0; i < HALF; i++) {
                const size_t lo = (size_t)r * STRIDE + (size_t)h * HD + i, hi = lo + HALF;
                const double c = fabs((double)cos_t[(r % T) * HALF + i]), s = fabs((double)sin_t[(r % T) * HALF + i]);
                mag[lo] = fabs((double)x[lo]) * c + fabs((double)x[hi]) * s;
                mag[hi] = fabs((double)x[hi]) * c + fabs((double)x[lo]) * s;
            }
    for (int backward = 0; backward < 2; backward++) {
        memcpy(cpu, x, sizeof(float) * n);
        if (backward) rope_backward(cpu, B, T, STRIDE, ROT, HD, cos_t, sin_t);
        else rope_forward(cpu, B, T, STRIDE, ROT, HD, cos_t, sin_t);
        for (int run = 0; run < 2; run++) {
            put(d_x, x, sizeof(float) * n);
            ran(backward ? nbk_rope_backward(d_x, B, T, STRIDE, ROT, HD, d_cos, d_sin, 0)
                         : nbk_rope_forward(d_x, B, T, STRIDE, ROT, HD, d_cos, d_sin, 0),
                backward ? "rope_backward" : "rope_forward");
            get(run ? g2 : g1, d_x, sizeof(float) * n);
        }
        const char *what = backward ? "rope_backward" : "rope_forward";
        judge(what, g1, g2, cpu, mag, n, 2);
    }
    /* the bf16 forms: forward rounds x in place and casts it into x16; backward casts into dx16, dx unchanged */
    nb_bf16 *c16 = alloc(sizeof(nb_bf16) * n), *h1 = alloc(sizeof(nb_bf16) * n), *h2 = alloc(sizeof(nb_bf16) * n);
    nb_bf16 *d_x16 = dev(NULL, sizeof(nb_bf16) * n);
    for (int backward = 0; backward < 2; backward++) {
        const char *what = backward ? "rope_backward_cast_bf16" : "rope_forward_bf16";
        memcpy(cpu, x, sizeof(float) * n);
        if (backward) rope_backward_cast_bf16(c16, cpu, B, T, STRIDE, ROT, HD, cos_t, sin_t);
        else rope_forward_bf16(cpu, c16, B, T, STRIDE, ROT, HD, cos_t, sin_t);
        for (int run = 0; run < 2; run++) {
            put(d_x, x, sizeof(float) * n);
            CU(cudaMemset(d_x16, 0xff, sizeof(nb_bf16) * n));
            ran(backward ? nbk_rope_backward_cast_bf16(d_x16, d_x, B, T, STRIDE, ROT, HD, d_cos, d_sin, 0)
                         : nbk_rope_forward_bf16(d_x, d_x16, B, T, STRIDE, ROT, HD, d_cos, d_sin, 0), what);
            get(run ? g2 : g1, d_x, sizeof(float) * n);
            get(run ? h2 : h1, d_x16, sizeof(nb_bf16) * n);
        }
        char name[96];
        snprintf(name, sizeof name, "%s (bf16)", what);
        judge16(name, h1, h2, c16, mag, n, 2 + BF16);
        snprintf(name, sizeof name, "%s (%s)", what, backward ? "dx unchanged" : "x rounded");
        judge(name, g1, g2, cpu, mag, n, backward ? 0 : 2 + BF16);
    }
    cudaFree(d_x16), free(c16), free(h1), free(h2);
    cudaFree(d_x), cudaFree(d_cos), cudaFree(d_sin);
    free(x), free(cpu), free(g1), free(g2), free(mag);
}

static void check_swiglu(void) {
    enum { N = 37, F = 100 };
    const size_t nf = (size_t)N * F;
    float *gu = alloc(sizeof(float) * 2 * nf), *dh = alloc(sizeof(float) * nf), *h = alloc(sizeof(float) * nf);
    float *dgu = alloc(sizeof(float) * 2 * nf), *g1 = alloc(sizeof(float) * 2 * nf), *g2 = alloc(sizeof(float) * 2 * nf);
    double *mag = alloc(sizeof(double) * 2 * nf);
    fill(gu, 2 * nf, 6.0f), fill(dh, nf, 1.0f);
    gu[0] = -30.0f, gu[1] = 100.0f;  /* a far tail; exp(-100) clamped to exp(-87) (normal: no subnormal anywhere) */
    float *d_gu = dev(gu, sizeof(float) * 2 * nf), *d_dh = dev(dh, sizeof(float) * nf);
    float *d_h = dev(NULL, sizeof(float) * nf), *d_dgu = dev(NULL, sizeof(float) * 2 * nf);

    swiglu_forward(h, gu, N, F);
    for (int run = 0; run < 2; run++) {
        CU(cudaMemset(d_h, 0xff, sizeof(float) * nf));
        ran(nbk_swiglu_forward(d_h, d_gu, N, F, 0), "swiglu_forward");
        get(run ? g2 : g1, d_h, sizeof(float) * nf);
    }
    judge("swiglu_forward", g1, g2, h, NULL, nf, 4);  /* products and quotients of positive sums: no cancellation */

    swiglu_backward(dgu, dh, gu, N, F);
    for (int n = 0; n < N; n++)
        for (int i = 0; i < F; i++) {
            const double g = gu[(size_t)n * 2 * F + i], u = gu[(size_t)n * 2 * F + F + i], d = dh[(size_t)n * F + i];
            const double s = 1.0 / (1.0 + exp(-g));
            mag[(size_t)n * 2 * F + i] = fabs(d * u * s) * (1.0 + fabs(g * (1.0 - s)));  /* 1 + g (1 - s) cancels */
            mag[(size_t)n * 2 * F + F + i] = fabs(d * g * s);
        }
    for (int run = 0; run < 2; run++) {
        CU(cudaMemset(d_dgu, 0xff, sizeof(float) * 2 * nf));
        ran(nbk_swiglu_backward(d_dgu, d_dh, d_gu, N, F, 0), "swiglu_backward");
        get(run ? g2 : g1, d_dgu, sizeof(float) * 2 * nf);
    }
    judge("swiglu_backward", g1, g2, dgu, mag, 2 * nf, 8);

    /* the bf16 forms: gate/up kept in bf16 (cast here, as the product's bf16 output would be) */
    nb_bf16 *gu16 = alloc(sizeof(nb_bf16) * 2 * nf), *c16 = alloc(sizeof(nb_bf16) * 2 * nf);
    nb_bf16 *cg16 = alloc(sizeof(nb_bf16) * 2 * nf), *h1 = alloc(sizeof(nb_bf16) * 2 * nf),
            *h2 = alloc(sizeof(nb_bf16) * 2 * nf), *k1 = alloc(sizeof(nb_bf16) * 2 * nf),
            *k2 = alloc(sizeof(nb_bf16) * 2 * nf);
    for (size_t i = 0; i < 2 * nf; i++) gu16[i] = nb_bf16_from_float(gu[i]);
    nb_bf16 *d_gu16 = dev(gu16, sizeof(nb_bf16) * 2 * nf), *d_h16 = dev(NULL, sizeof(nb_bf16) * 2 * nf);
    nb_bf16 *d_out16 = dev(NULL, sizeof(nb_bf16) * 2 * nf);
    swiglu_forward_bf16(c16, gu16, N, F);
    for (int run = 0; run < 2; run++) {
        CU(cudaMemset(d_h16, 0xff, sizeof(nb_bf16) * nf));
        ran(nbk_swiglu_forward_bf16(d_h16, d_gu16, N, F, 0), "swiglu_forward_bf16");
        get(run ? h2 : h1, d_h16, sizeof(nb_bf16) * nf);
    }
    judge16("swiglu_forward_bf16", h1, h2, c16, NULL, nf, 4 + BF16);
    swiglu_forward_cast_bf16(c16, cg16, gu, N, F);
    for (int run = 0; run < 2; run++) {
        CU(cudaMemset(d_h16, 0xff, sizeof(nb_bf16) * nf));
        CU(cudaMemset(d_out16, 0xff, sizeof(nb_bf16) * 2 * nf));
        ran(nbk_swiglu_forward_cast_bf16(d_h16, d_out16, d_gu, N, F, 0), "swiglu_forward_cast_bf16");
        get(run ? h2 : h1, d_h16, sizeof(nb_bf16) * nf);
        get(run ? k2 : k1, d_out16, sizeof(nb_bf16) * 2 * nf);
    }
    judge16("swiglu_forward_cast_bf16 h", h1, h2, c16, NULL, nf, 4 + BF16);
    judge16("swiglu_forward_cast_bf16 gu16 (a cast: exact)", k1, k2, cg16, NULL, 2 * nf, 0);
    swiglu_backward_bf16_cast(c16, dh, gu16, N, F);
    for (int run = 0; run < 2; run++) {
        CU(cudaMemset(d_out16, 0xff, sizeof(nb_bf16) * 2 * nf));
        ran(nbk_swiglu_backward_bf16_cast(d_out16, d_dh, d_gu16, N, F, 0), "swiglu_backward_bf16_cast");
        get(run ? k2 : k1, d_out16, sizeof(nb_bf16) * 2 * nf);
    }
    judge16("swiglu_backward_bf16_cast", k1, k2, c16, mag, 2 * nf, 8 + BF16);
    cudaFree(d_gu16), cudaFree(d_h16), cudaFree(d_out16);
    free(gu16), free(c16), free(cg16), free(h1), free(h2), free(k1), free(k2);
    cudaFree(d_gu), cudaFree(d_dh), cudaFree(d_h), cudaFree(d_dgu);
    free(gu), free(dh), free(h), free(dgu), free(g1), free(g2), free(mag);
}

static void check_cross_entropy(void) {
    enum { N = 37, V = 1003, N_MEAN = 50 };
    const size_t nv = (size_t)N * V;
    const float scale = 0.75f;
    int targets[N];
    for (int n = 0; n < N; n++) targets[n] = (int)((uniform() + 1.0f) * 0.5f * V) % V;
    targets[0] = 0, targets[1] = V - 1;
    float *z = alloc(sizeof(float) * nv), *cpu = alloc(sizeof(float) * nv), *g1 = alloc(sizeof(float) * nv),
          *g2 = alloc(sizeof(float) * nv);
    float lse[N], l1[N], l2[N];
    double mag[N], *magz = alloc(sizeof(double) * nv);
    fill(z, nv, 4.0f);
    for (int i = 0; i < V; i++) z[(size_t)2 * V + i] -= 30.0f;  /* a row far from 0 */
    z[(size_t)3 * V + 7] = 40.0f;                               /* a row with one large logit */
    int *d_t = dev(targets, sizeof targets);
    float *d_z = dev(z, sizeof(float) * nv), *d_lse = dev(NULL, sizeof lse);
    double *d_loss = dev(NULL, sizeof(double)), loss[2];

    const double cpu_loss = cross_entropy_forward(lse, z, targets, N, V);
    for (int run = 0; run < 2; run++) {
        ran(nbk_cross_entropy_forward(d_lse, d_loss, d_z, d_t, N, V, 0), "cross_entropy_forward");
        get(run ? l2 : l1, d_lse, sizeof lse);
        get(&loss[run], d_loss, sizeof(double));
    }
    same_bits("cross_entropy_forward loss", &loss[0], &loss[1], sizeof(double), sizeof(double));
    /* 2 (V + 2) u + 8 u (|log sum| + |lse|), in units of 2 u: (V + 2) + 4 (|lse - max| + |lse|). */
    double loss_bound = 0;
    for (int n = 0; n < N; n++) {
        float m = z[(size_t)n * V];
        for (int i = 1; i < V; i++) m = z[(size_t)n * V + i] > m ? z[(size_t)n * V + i] : m;
        mag[n] = (V + 2) + 4.0 * (fabs((double)lse[n] - m) + fabs((double)lse[n]));
        loss_bound += 2 * U * mag[n];
    }
    judge("cross_entropy_forward lse", l1, l2, lse, mag, N, 2);
    loss_bound += 1e-15 * fabs(cpu_loss);  /* the double sum's own rounding, from different lse values */
    CHECK(fabs(loss[0] - cpu_loss) <= loss_bound, "cross_entropy_forward loss: GPU %.17g, CPU %.17g, |diff| %.3g > bound %.3g",
          loss[0], cpu_loss, fabs(loss[0] - cpu_loss), loss_bound);
    printf("%-44s GPU %.17g CPU %.17g (|diff| %.3g, bound %.3g)\n", "cross_entropy_forward loss", loss[0], cpu_loss,
           fabs(loss[0] - cpu_loss), loss_bound);

    /* backward from the CPU's lse, in place */
    memcpy(cpu, z, sizeof(float) * nv);
    cross_entropy_backward(cpu, lse, targets, N, V, scale, N_MEAN);
    const double k = scale / N_MEAN;
    for (int n = 0; n < N; n++)
        for (int i = 0; i < V; i++)
            magz[(size_t)n * V + i] = k * exp((double)z[(size_t)n * V + i] - lse[n]) + (i == targets[n] ? k : 0.0);
    put(d_lse, lse, sizeof lse);
    for (int run = 0; run < 2; run++) {
        put(d_z, z, sizeof(float) * nv);
        ran(nbk_cross_entropy_backward(d_z, d_lse, d_t, N, V, scale, N_MEAN, 0), "cross_entropy_backward");
        get(run ? g2 : g1, d_z, sizeof(float) * nv);
    }
    judge("cross_entropy_backward", g1, g2, cpu, magz, nv, 2);

    /* the bf16 gradient (scale 1) from the CPU's lse */
    nb_bf16 *c16 = alloc(sizeof(nb_bf16) * nv), *h1 = alloc(sizeof(nb_bf16) * nv), *h2 = alloc(sizeof(nb_bf16) * nv);
    nb_bf16 *d_16 = dev(NULL, sizeof(nb_bf16) * nv);
    cross_entropy_grad_bf16(c16, z, lse, targets, N, V, N_MEAN);
    for (size_t i = 0; i < nv; i++) magz[i] /= scale;
    put(d_z, z, sizeof(float) * nv);
    for (int run = 0; run < 2; run++) {
        CU(cudaMemset(d_16, 0xff, sizeof(nb_bf16) * nv));
        ran(nbk_cross_entropy_grad_bf16(d_16, d_z, d_lse, d_t, N, V, N_MEAN, 0), "cross_entropy_grad_bf16");
        get(run ? h2 : h1, d_16, sizeof(nb_bf16) * nv);
    }
    judge16("cross_entropy_grad_bf16", h1, h2, c16, magz, nv, 2 + BF16);

    /* Both in one kernel: lse and the loss as above; the gradient comes from the GPU's own lse, within 2 mag[n] u
     * of the CPU's, which moves each exp by as much relatively: bound (2 mag[n] + 4 + BF16) u of the value's
     * magnitude (magf, with ulps 1). */
    float fl[2][N], cl[N];
    double floss[2], *magf = alloc(sizeof(double) * nv);
    const double cpu_floss = cross_entropy_forward_grad_bf16(cl, c16, z, targets, N, V, N_MEAN);
    for (int n = 0; n < N; n++)
        for (int i = 0; i < V; i++) magf[(size_t)n * V + i] = magz[(size_t)n * V + i] * (2 * mag[n] + 4 + BF16);
    for (int run = 0; run < 2; run++) {
        CU(cudaMemset(d_16, 0xff, sizeof(nb_bf16) * nv));
        ran(nbk_cross_entropy_forward_grad_bf16(d_lse, d_16, d_loss, d_z, d_t, N, V, N_MEAN, 0),
            "cross_entropy_forward_grad_bf16");
        get(fl[run], d_lse, sizeof lse), get(&floss[run], d_loss, sizeof(double));
        get(run ? h2 : h1, d_16, sizeof(nb_bf16) * nv);
    }
    same_bits("cross_entropy_forward_grad_bf16 loss", &floss[0], &floss[1], sizeof(double), sizeof(double));
    judge("cross_entropy_forward_grad_bf16 lse", fl[0], fl[1], cl, mag, N, 2);
    CHECK(fabs(floss[0] - cpu_floss) <= loss_bound,
          "cross_entropy_forward_grad_bf16 loss: GPU %.17g, CPU %.17g, |diff| %.3g > bound %.3g", floss[0], cpu_floss,
          fabs(floss[0] - cpu_floss), loss_bound);
    judge16("cross_entropy_forward_grad_bf16 gradient", h1, h2, c16, magf, nv, 1);
    free(magf);
    cudaFree(d_16), free(c16), free(h1), free(h2);
    cudaFree(d_t), cudaFree(d_z), cudaFree(d_lse), cudaFree(d_loss);
    free(z), free(cpu), free(g1), free(g2), free(magz);
}

/* ---- Optimizers ----
 * Three steps (counts 0, 1, 2: Adan's and MARS's first step differs) of each rule on one tensor; each GPU
 * step starts from the CPU's state before that step, so each step is compared on its own. */

enum { NV = 3701, MAX_STATE = 4 };

typedef enum { ADAMW, LION, ADAN, MARS } rule_kind;

/* The sum of the magnitudes of the terms of output s (0: d, else state buffer s - 1) at value i, from the state
 * before the step (old) and after it (cpu: v and n, whose terms are all positive, stand for their own). */
static double magnitude(rule_kind kind, int s, int i, const nb_optim_params *p, float lr, float wd, int count,
                        const float *g, const float *w, float *const *old, float *const *cpu) {
    const double b1 = p->beta1, b2 = p->beta2, b3 = p->beta3, gi = fabs((double)g[i]);
    const double c1 = 1 - pow(b1, count + 1.0), c2 = 1 - pow(b2, count + 1.0), c3 = 1 - pow(b3, count + 1.0);
    const double decay = fabs((double)lr * wd * w[i]);
    switch (kind) {
    case LION:
        return s ? b2 * fabs((double)old[0][i]) + (1 - b2) * gi : lr + decay;
    case ADAMW:
    case MARS: {
        double x = gi;  /* what the moments take: g, or MARS's c (clipped) */
        if (kind == MARS && count) x = gi + p->gamma * b1 / (1 - b1) * (gi + fabs((double)old[2][i]));
        if (kind == MARS) {
            double sq = 0;
            for (int j = 0; j < NV; j++) {
                const double cj = count ? g[j] + (double)(p->gamma * b1 / (1.0f - b1)) * ((double)g[j] - old[2][j]) : g[j];
                sq += cj * cj;
            }
            if (sq > 1) x /= sqrt(sq);
            if (s == 3) return gi;  /* g_prev = g */
        }
        const double mm = b1 * fabs((double)old[0][i]) + (1 - b1) * x;
        const double den = sqrt(fabs((double)cpu[1][i]) / c2) + p->eps;
        return s == 1 ? mm : s == 2 ? fabs((double)cpu[1][i]) + x * x : lr * mm / c1 / den + decay;
    }
    case ADAN: {
        const double diff = count ? gi + fabs((double)old[3][i]) : 0.0;
        const double mm = b1 * fabs((double)old[0][i]) + (1 - b1) * gi, mv = b2 * fabs((double)old[1][i]) + (1 - b2) * diff;
        const double mu = gi + b2 * diff, mn = fabs((double)cpu[2][i]) + (1 - b3) * mu * mu;
        const double den = sqrt(fabs((double)cpu[2][i]) / c3) + p->eps;
        switch (s) {
        case 0: return lr * mm / c1 / den + lr * b2 * mv / c2 / den + decay;
        case 1: return mm;
        case 2: return mv;
        case 3: return mn;
        default: return gi;  /* g_prev = g */
        }
    }
    }
    return 0;
}

static void check_rule(rule_kind kind, nb_group group, float gscale) {
    static const char *names[] = {"adamw", "lion", "adan", "mars"};
    static const nb_optimizer_kind kinds[] = {NB_OPT_ADAMW, NB_OPT_LION, NB_OPT_ADAN, NB_OPT_MARS};
    static const nb_optim_rule *rules[] = {&adamw_rule, &lion_rule, &adan_rule, &mars_rule};
    static const char *state_names[][MAX_STATE] = {{"m", "v"}, {"m"}, {"m", "v", "n", "g_prev"}, {"m", "v", "g_prev"}};
    static const int n_state[] = {2, 1, 4, 3};
    const int ns = n_state[kind];
    nb_optim_params p = nb_optim_defaults(kinds[kind]);
    p.weight_decay = 0.1f;
    const float lr = kind == LION ? 3e-4f : 2e-3f;
    nb_tensor t = {0};
    t.numel = NV, t.group = group;
    float *w = alloc(sizeof(float) * NV), *g = alloc(sizeof(float) * NV), *d = alloc(sizeof(float) * NV);
    float *state[MAX_STATE], *before[MAX_STATE], *gs[2][MAX_STATE + 1], *d_state[MAX_STATE];
    double *mag = alloc(sizeof(double) * NV);
    fill(w, NV, 1.0f);
    for (int s = 0; s < ns; s++) {
        state[s] = alloc(sizeof(float) * NV), before[s] = alloc(sizeof(float) * NV);
        d_state[s] = dev(NULL, sizeof(float) * NV);
    }
    for (int r = 0; r < 2; r++)
        for (int s = 0; s <= ns; s++) gs[r][s] = alloc(sizeof(float) * NV);
    float *d_w = dev(w, sizeof(float) * NV), *d_g = dev(NULL, sizeof(float) * NV), *d_d = dev(NULL, sizeof(float) * NV);
    double *d_scratch = dev(NULL, sizeof(double) * nbk_mars_scratch_doubles());
    tensor_state ts = {0};
    ts.t = &t, ts.n_buf = ns;
    for (int s = 0; s < ns; s++) ts.buf[s] = state[s], ts.buf_len[s] = NV;

    for (int step = 0; step < 3; step++) {
        for (int i = 0; i < NV; i++) g[i] = (i % 10 == 3) ? 0.0f : gscale * uniform() * (1.0f + (float)(i % 7));
        for (int s = 0; s < ns; s++) memcpy(before[s], state[s], sizeof(float) * NV);
        const rule_ctx c = {.p = &p, .lr = lr, .step = step};
        const nbk_optim_step gp = {.lr = lr, .beta1 = p.beta1, .beta2 = p.beta2, .beta3 = p.beta3, .eps = p.eps,
                                   .weight_decay = decay_of(&t, &p), .gamma = p.gamma, .count = ts.count};
        CHECK(rules[kind]->step(&ts, &c, g, w, d) == 0, "%s: the CPU's step", names[kind]);
        put(d_g, g, sizeof(float) * NV);
        for (int run = 0; run < 2; run++) {
            for (int s = 0; s < ns; s++) put(d_state[s], before[s], sizeof(float) * NV);
            CU(cudaMemset(d_d, 0xff, sizeof(float) * NV));
            int rc = -1;
            switch (kind) {
            case ADAMW: rc = nbk_adamw_step(d_d, d_state[0], d_state[1], d_g, d_w, NV, &gp, 0); break;
            case LION: rc = nbk_lion_step(d_d, d_state[0], d_g, d_w, NV, &gp, 0); break;
            case ADAN:
                rc = nbk_adan_step(d_d, d_state[0], d_state[1], d_state[2], d_state[3], d_g, d_w, NV, &gp, 0);
                break;
            case MARS: rc = nbk_mars_step(d_d, d_state[0], d_state[1], d_state[2], d_g, d_w, NV, &gp, d_scratch, 0); break;
            }
            ran(rc, names[kind]);
            get(gs[run][0], d_d, sizeof(float) * NV);
            for (int s = 0; s < ns; s++) get(gs[run][s + 1], d_state[s], sizeof(float) * NV);
        }
        char what[96];
        for (int s = 0; s <= ns; s++) {
            snprintf(what, sizeof what, "%s %s, g x%g, step %d: %s", names[kind], group == NB_GROUP_GAIN ? "gain" : "matrix",
                     (double)gscale, step, s ? state_names[kind][s - 1] : "d");
            for (int i = 0; i < NV; i++) mag[i] = magnitude(kind, s, i, &p, lr, decay_of(&t, &p), step, g, w, before, state);
            judge(what, gs[0][s], gs[1][s], s ? state[s - 1] : d, mag, NV, 8);
        }
    }
    for (int s = 0; s < ns; s++) free(state[s]), free(before[s]), cudaFree(d_state[s]);
    for (int r = 0; r < 2; r++)
        for (int s = 0; s <= ns; s++) free(gs[r][s]);
    cudaFree(d_w), cudaFree(d_g), cudaFree(d_d), cudaFree(d_scratch);
    free(w), free(g), free(d), free(mag);
}

/* ---- The mixture-of-experts block outside its products ----
 * The CPU's moe_forward and moe_backward (src/layers/moe.c) keep every intermediate in their state (the
 * probabilities, each token's experts and weights, the counts and row ranges, the grouped rows, the
 * experts' outputs, dy, the router's dz, aux). Each GPU step runs on the CPU's inputs to that step (the
 * router's logits recomputed here with the same product) and is expected to give the CPU's bits (moe.cu
 * says why): the integer arrays and the gathered rows must be exactly the CPU's, the floats within 2 u of
 * their own magnitude (8 u of the tensor's largest value for dz, where p . dp cancels), printing how many
 * are bitwise. The unweighted sum of rows (the input gradient's) against a loop written here. fp32 and bf16
 * (rows rounded up to MOE_ROW_ALIGN, the padding rows no token's); the router makes one expert never chosen
 * (a count of 0) and two experts tie (equal router rows: the lower index first). */
static double *max_magnitude(const float *x, size_t n) {
    double top = 0, *mag = alloc(sizeof(double) * (n ? n : 1));
    for (size_t i = 0; i < n; i++) top = fabs((double)x[i]) > top ? fabs((double)x[i]) : top;
    for (size_t i = 0; i < n; i++) mag[i] = top;
    return mag;
}

static void same_ints(const char *what, const int *gpu, const int *cpu, size_t n) {
    size_t i = 0;
    while (i < n && gpu[i] == cpu[i]) i++;
    CHECK(i == n, "%s: value %zu differs: GPU %d, CPU %d", what, i, i < n ? gpu[i] : 0, i < n ? cpu[i] : 0);
    if (i == n) printf("%-44s %6zu of %6zu equal (exact)\n", what, n, n);
}

static void *copy_back(const void *d, size_t bytes) {
    void *h = alloc(bytes);
    get(h, d, bytes);
    return h;
}

static void check_moe(int bf16, int gpu) {
    enum { N = 37, D = 24, F = 16, E = 6, K = 2 };
    const moe_dims m = {N, D, F, E, K, bf16};
    const size_t R = (size_t)N * K + (bf16 ? (size_t)E * (MOE_ROW_ALIGN - 1) : 0), nx = (size_t)N * D;
    const float aux_grad = 0.3f;
    char what[96];
    float *x = alloc(sizeof(float) * nx), *wr = alloc(sizeof(float) * E * D);
    float *wgu = alloc(sizeof(float) * E * 2 * F * D), *wdown = alloc(sizeof(float) * E * D * F);
    float *out = alloc(sizeof(float) * nx), *out0 = alloc(sizeof(float) * nx), *dout = alloc(sizeof(float) * nx);
    float *dx = alloc(sizeof(float) * nx), *z = alloc(sizeof(float) * N * E), load[E];
    float *gr = alloc(sizeof(float) * E * D), *ggu = alloc(sizeof(float) * E * 2 * F * D);
    float *gdown = alloc(sizeof(float) * E * D * F);
    fill(x, nx, 1.0f), fill(wr, (size_t)E * D, 1.0f), fill(wgu, (size_t)E * 2 * F * D, 0.3f);
    fill(wdown, (size_t)E * D * F, 0.3f), fill(out0, nx, 1.0f), fill(dout, nx, 1.0f);
    for (int t = 0; t < N; t++) x[(size_t)t * D] = 1.0f + 0.5f * uniform();  /* a positive first feature... */
    wr[(size_t)(E - 1) * D] = -60.0f;  /* ...which keeps the last expert's logit far below the rest */
    memcpy(wr + 2 * D, wr + 1 * D, sizeof(float) * D);  /* experts 1 and 2 tie for every token */
    memcpy(out, out0, sizeof(float) * nx);
    nb_bf16 *x16 = alloc(sizeof(nb_bf16) * nx), *wr16 = alloc(sizeof(nb_bf16) * E * D);
    nb_bf16 *wgu16 = alloc(sizeof(nb_bf16) * E * 2 * F * D), *wdown16 = alloc(sizeof(nb_bf16) * E * D * F);
    for (size_t i = 0; i < nx; i++) x16[i] = nb_bf16_from_float(x[i]);
    for (size_t i = 0; i < (size_t)E * D; i++) wr16[i] = nb_bf16_from_float(wr[i]);
    for (size_t i = 0; i < (size_t)E * 2 * F * D; i++) wgu16[i] = nb_bf16_from_float(wgu[i]);
    for (size_t i = 0; i < (size_t)E * D * F; i++) wdown16[i] = nb_bf16_from_float(wdown[i]);

    const nb_backend *be = nb_backend_default();
    moe_state *s = be ? moe_state_create(be, &m) : NULL;
    CHECK(s != NULL, "CPU MoE state: %s", nb_last_error());
    if (!s) return;
    if (bf16) {
        linear_forward_bf16(be, z, 0.0f, x16, wr16, N, D, E);
        moe_forward_bf16(be, s, out, x16, wr16, wgu16, wdown16, load);
        moe_backward_bf16(be, s, dx, gr, ggu, gdown, dout, aux_grad, x16, wr16, wgu16, wdown16);
    } else {
        linear_forward(be, z, 0.0f, x, wr, N, D, E);
        moe_forward(be, s, out, x, wr, wgu, wdown, load);
        moe_backward(be, s, dx, gr, ggu, gdown, dout, aux_grad, x, wr, wgu, wdown);
    }
    CHECK(nb_backend_check(be) == 0, "CPU MoE: %s", nb_last_error());
    CHECK(s->count[E - 1] == 0, "the test's router leaves the last expert without tokens (count %d)", s->count[E - 1]);
    int tie_first = 0;  /* tokens whose slots hold both tied experts: the lower index must come first */
    for (int t = 0; t < N; t++) tie_first += s->top[t * K] == 1 && s->top[t * K + 1] == 2;
    CHECK(tie_first > 0, "the test's router ties experts 1 and 2 (no token chose both, 1 first)");
    const int rows = s->start[E];
    const char *mode = bf16 ? " bf16" : "";
    if (!gpu) { /* the CPU's side of the premises only */
        moe_state_free(be, s);
        free(x), free(wr), free(wgu), free(wdown), free(out), free(out0), free(dout), free(dx), free(z), free(gr);
        free(ggu), free(gdown), free(x16), free(wr16), free(wgu16), free(wdown16);
        return;
    }

    /* route: softmax, top-k, weights */
    float *d_probs = dev(z, sizeof(float) * N * E), *d_weight = dev(NULL, sizeof(float) * N * K);
    int *d_top = dev(NULL, sizeof(int) * N * K);
    ran(nbk_moe_route(d_probs, d_top, d_weight, N, E, K, 0), "moe_route");
    float *probs = copy_back(d_probs, sizeof(float) * N * E), *weight = copy_back(d_weight, sizeof(float) * N * K);
    int *top = copy_back(d_top, sizeof(int) * N * K);
    snprintf(what, sizeof what, "moe_route probs%s", mode), compare(what, probs, s->probs, NULL, (size_t)N * E, 2);
    snprintf(what, sizeof what, "moe_route top%s", mode), same_ints(what, top, s->top, (size_t)N * K);
    snprintf(what, sizeof what, "moe_route weight%s", mode), compare(what, weight, s->weight, NULL, (size_t)N * K, 2);

    /* group, from the CPU's top */
    put(d_top, s->top, sizeof(int) * N * K);
    int *d_count = dev(NULL, sizeof(int) * E), *d_start = dev(NULL, sizeof(int) * (E + 1));
    int *d_row_token = dev(NULL, sizeof(int) * R), *d_slot_row = dev(NULL, sizeof(int) * N * K);
    ran(nbk_moe_group(d_count, d_start, d_row_token, d_slot_row, d_top, N, E, K, bf16 ? MOE_ROW_ALIGN : 1, 0),
        "moe_group");
    int *count = copy_back(d_count, sizeof(int) * E), *start = copy_back(d_start, sizeof(int) * (E + 1));
    int *row_token = copy_back(d_row_token, sizeof(int) * R), *slot_row = copy_back(d_slot_row, sizeof(int) * N * K);
    snprintf(what, sizeof what, "moe_group count%s", mode), same_ints(what, count, s->count, E);
    snprintf(what, sizeof what, "moe_group start%s", mode), same_ints(what, start, s->start, E + 1);
    snprintf(what, sizeof what, "moe_group row_token%s", mode), same_ints(what, row_token, s->row_token, (size_t)rows);
    snprintf(what, sizeof what, "moe_group slot_row%s", mode), same_ints(what, slot_row, s->slot_row, (size_t)N * K);

    /* gather, from the CPU's grouping */
    put(d_row_token, s->row_token, sizeof(int) * (size_t)rows), put(d_start, s->start, sizeof(int) * (E + 1));
    const size_t row_bytes = (bf16 ? sizeof(nb_bf16) : sizeof(float)) * D;
    void *d_x = dev(bf16 ? (const void *)x16 : (const void *)x, row_bytes * N), *d_xg = dev(NULL, row_bytes * R);
    ran(nbk_moe_gather(d_xg, d_x, d_row_token, d_start, E, R, row_bytes, 0), "moe_gather");
    unsigned char *xg = copy_back(d_xg, row_bytes * R);
    CHECK(memcmp(xg, bf16 ? (const void *)s->xg16 : (const void *)s->xg, row_bytes * (size_t)rows) == 0,
          "moe_gather%s: the grouped rows differ from the CPU's", mode);

    /* balance, from the CPU's probabilities and counts */
    put(d_probs, s->probs, sizeof(float) * N * E), put(d_count, s->count, sizeof(int) * E);
    double *d_aux = dev(NULL, sizeof(double)), aux;
    float *d_load = dev(NULL, sizeof(float) * E), gload[E];
    ran(nbk_moe_balance(d_aux, d_load, d_probs, d_count, N, E, K, 0), "moe_balance");
    get(&aux, d_aux, sizeof aux), get(gload, d_load, sizeof gload);
    CHECK(fabs(aux - s->aux) <= 4e-16 * fabs(s->aux), "moe_balance%s aux: GPU %.17g, CPU %.17g", mode, aux, s->aux);
    printf("%-44s GPU %.17g CPU %.17g (%s)\n", "moe_balance aux", aux, s->aux, aux == s->aux ? "bitwise" : "differs");
    snprintf(what, sizeof what, "moe_balance load%s", mode), compare(what, gload, load, NULL, E, 0);

    /* the weighted sum of the experts' outputs into out, from the CPU's rows and weights */
    float *d_out = dev(out0, sizeof(float) * nx), *d_y = dev(s->y, sizeof(float) * R * D);
    put(d_weight, s->weight, sizeof(float) * N * K), put(d_slot_row, s->slot_row, sizeof(int) * N * K);
    ran(nbk_moe_add_rows(d_out, d_y, d_weight, d_slot_row, N, K, D, 0), "moe_add_rows");
    float *gout = copy_back(d_out, sizeof(float) * nx);
    double *mag = alloc(sizeof(double) * nx);
    for (int t = 0; t < N; t++)
        for (int i = 0; i < D; i++) {
            double a = fabs((double)out0[(size_t)t * D + i]);
            for (int j = 0; j < K; j++)
                a += fabs((double)s->weight[t * K + j] * s->y[(size_t)s->slot_row[t * K + j] * D + i]);
            mag[(size_t)t * D + i] = a;
        }
    snprintf(what, sizeof what, "moe_add_rows (weighted)%s", mode), compare(what, gout, out, mag, nx, 2);

    /* backward: dy and the router's dz */
    float *d_dout = dev(dout, sizeof(float) * nx), *d_dy = dev(NULL, sizeof(float) * R * D);
    float *d_dp = dev(NULL, sizeof(float) * N * E);
    ran(nbk_moe_route_backward(d_dy, d_dp, d_dout, d_y, d_probs, d_top, d_weight, d_slot_row, N, E, K, D, 0),
        "moe_route_backward");
    ran(nbk_moe_softmax_backward(d_dp, d_probs, d_count, aux_grad, N, E, 0), "moe_softmax_backward");
    float *dy = copy_back(d_dy, sizeof(float) * R * D), *dp = copy_back(d_dp, sizeof(float) * N * E);
    float *dy_rows = alloc(sizeof(float) * R * D), *cpu_rows = alloc(sizeof(float) * R * D);
    size_t kept = 0;  /* the rows of a token (the GPU leaves the padding rows alone; the caller zeroes them) */
    for (int r = 0; r < rows; r++)
        if (s->row_token[r] >= 0) {
            memcpy(dy_rows + kept * D, dy + (size_t)r * D, sizeof(float) * D);
            memcpy(cpu_rows + kept * D, s->dy + (size_t)r * D, sizeof(float) * D);
            kept++;
        }
    snprintf(what, sizeof what, "moe_route_backward dy%s", mode), compare(what, dy_rows, cpu_rows, NULL, kept * D, 2);
    double *magp = max_magnitude(s->dp, (size_t)N * E);
    snprintf(what, sizeof what, "moe_softmax_backward dz%s", mode), compare(what, dp, s->dp, magp, (size_t)N * E, 8);

    /* the unweighted sum (dx += each grouped row's input gradient) against a loop written here */
    float *base = alloc(sizeof(float) * nx), *ref = alloc(sizeof(float) * nx), *grows = alloc(sizeof(float) * R * D);
    fill(base, nx, 1.0f), fill(grows, R * D, 1.0f);
    for (int t = 0; t < N; t++)
        for (int i = 0; i < D; i++) {
            float o = base[(size_t)t * D + i];
            for (int j = 0; j < K; j++) o += grows[(size_t)s->slot_row[t * K + j] * D + i];
            ref[(size_t)t * D + i] = o;
            mag[(size_t)t * D + i] = fabs((double)base[(size_t)t * D + i]) + K;  /* |rows| < 1 */
        }
    put(d_out, base, sizeof(float) * nx), put(d_y, grows, sizeof(float) * R * D);
    ran(nbk_moe_add_rows(d_out, d_y, NULL, d_slot_row, N, K, D, 0), "moe_add_rows");
    get(gout, d_out, sizeof(float) * nx);
    snprintf(what, sizeof what, "moe_add_rows (unweighted)%s", mode), compare(what, gout, ref, mag, nx, 2);

    cudaFree(d_probs), cudaFree(d_weight), cudaFree(d_top), cudaFree(d_count), cudaFree(d_start);
    cudaFree(d_row_token), cudaFree(d_slot_row), cudaFree(d_x), cudaFree(d_xg), cudaFree(d_aux), cudaFree(d_load);
    cudaFree(d_out), cudaFree(d_y), cudaFree(d_dout), cudaFree(d_dy), cudaFree(d_dp);
    free(probs), free(weight), free(top), free(count), free(start), free(row_token), free(slot_row), free(xg);
    free(gout), free(mag), free(dy), free(dp), free(dy_rows), free(cpu_rows), free(magp), free(base), free(ref);
    free(grows);
    moe_state_free(be, s);
    free(x), free(wr), free(wgu), free(wdown), free(out), free(out0), free(dout), free(dx), free(z), free(gr);
    free(ggu), free(gdown), free(x16), free(wr16), free(wgu16), free(wdown16);
}

/* ---- The delay rules' update (src/delay/ops.h) ----
 * nbk_delay_apply against nb_delay_apply_host on the same values, each kind (EF on its first step and a
 * later one): every output array bitwise expected, checked within 2 u of its magnitude. */
/* The backend's arithmetic (nbk_add, nbk_scale, nbk_sum_squares): add and scale the CPU's bits (one
 * rounding each), the sums of squares within 1e-12 of a double sum written here (another order), and the
 * same bits twice; over more values than one pass of the grid holds, so the strides are exercised. */
static void check_arithmetic(void) {
    const size_t n = (size_t)NBK_SQ_PARTS * 256 * 3 + 77;
    float *x = alloc(sizeof(float) * n), *y = alloc(sizeof(float) * n), *want = alloc(sizeof(float) * n);
    float *got = alloc(sizeof(float) * n);
    fill(x, n, 1.0f), fill(y, n, 0.5f);
    float *d_x = dev(x, sizeof(float) * n), *d_y = dev(y, sizeof(float) * n);
    double *parts = NULL, *out = NULL, sums[2][2];
    CU(cudaMalloc((void **)&parts, sizeof(double) * NBK_SQ_PARTS));
    CU(cudaMalloc((void **)&out, sizeof(double)));
    for (int run = 0; run < 2; run++)
        for (int diff = 0; diff < 2; diff++) {
            ran(nbk_sum_squares(d_x, diff ? d_y : NULL, n, parts, out, 0), "sum_squares");
            get(&sums[run][diff], out, sizeof(double));
        }
    for (int diff = 0; diff < 2; diff++) {
        double ref = 0;
        for (size_t i = 0; i < n; i++) {
            const double v = diff ? (double)(x[i] - y[i]) : (double)x[i];
            ref += v * v;
        }
        CHECK(fabs(sums[0][diff] - ref) <= 1e-12 * ref, "sum_squares%s: %.17g, a double sum gives %.17g",
              diff ? " of x - y" : "", sums[0][diff], ref);
        CHECK(sums[0][diff] == sums[1][diff], "sum_squares%s: %.17g, then %.17g on the same values",
              diff ? " of x - y" : "", sums[0][diff], sums[1][diff]);
    }
    for (size_t i = 0; i < n; i++) want[i] = (x[i] + y[i]) * 0.37f;
    ran(nbk_add(d_x, d_y, n, 0), "add");
    ran(nbk_scale(d_x, n, 0.37f, 0), "scale");
    get(got, d_x, sizeof(float) * n);
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) bad += memcmp(&got[i], &want[i], sizeof(float)) != 0;
    CHECK(bad == 0, "add then scale: %zu of %zu values differ from the CPU's", bad, n);
    cudaFree(d_x), cudaFree(d_y), cudaFree(parts), cudaFree(out);
    free(x), free(y), free(want), free(got);
}

static void check_delay_apply(void) {
    enum { NV2 = 3701 };
    float *w = alloc(sizeof(float) * NV2), *d = alloc(sizeof(float) * NV2), *prev = alloc(sizeof(float) * NV2);
    float *c_w = alloc(sizeof(float) * NV2), *c_d = alloc(sizeof(float) * NV2), *c_prev = alloc(sizeof(float) * NV2);
    float *c_keep = alloc(sizeof(float) * NV2), *g[2][4];
    fill(w, NV2, 1.0f), fill(d, NV2, 0.01f), fill(prev, NV2, 0.01f);
    float *d_w = dev(NULL, sizeof(float) * NV2), *d_d = dev(NULL, sizeof(float) * NV2);
    float *d_prev = dev(NULL, sizeof(float) * NV2), *d_keep = dev(NULL, sizeof(float) * NV2);
    for (int r = 0; r < 2; r++)
        for (int k = 0; k < 4; k++) g[r][k] = alloc(sizeof(float) * NV2);
    static const char *names[] = {"current -= d", "keep, current -= d", "EF (first)", "EF"};
    for (int variant = 0; variant < 4; variant++) {
        const nb_apply_kind kind = variant == 0 ? NB_APPLY_ONLY : variant == 1 ? NB_APPLY_KEEP : NB_APPLY_EF;
        const int first = variant == 2;
        memcpy(c_w, w, sizeof(float) * NV2), memcpy(c_d, d, sizeof(float) * NV2), memcpy(c_prev, prev, sizeof(float) * NV2);
        nb_delay_apply_host(kind, c_keep, c_w, c_d, c_prev, 0.5f, first, NV2);
        for (int run = 0; run < 2; run++) {
            put(d_w, w, sizeof(float) * NV2), put(d_d, d, sizeof(float) * NV2), put(d_prev, prev, sizeof(float) * NV2);
            CU(cudaMemset(d_keep, 0xff, sizeof(float) * NV2));
            ran(nbk_delay_apply((int)kind, d_keep, d_w, d_d, d_prev, 0.5f, first, NV2, 0), "delay_apply");
            get(g[run][0], d_w, sizeof(float) * NV2), get(g[run][1], d_d, sizeof(float) * NV2);
            get(g[run][2], d_prev, sizeof(float) * NV2), get(g[run][3], d_keep, sizeof(float) * NV2);
        }
        char what[96];
        const float *cpu[4] = {c_w, c_d, c_prev, c_keep};
        static const char *parts[] = {"weights", "d", "prev", "keep"};
        for (int k = 0; k < 4; k++) {
            if (k == 3 && kind == NB_APPLY_ONLY) continue;     /* keeps nothing */
            if ((k == 1 || k == 2) && kind != NB_APPLY_EF) continue;  /* d and prev untouched */
            snprintf(what, sizeof what, "delay_apply %s: %s", names[variant], parts[k]);
            double *mag = max_magnitude(cpu[k], NV2);
            judge(what, g[0][k], g[1][k], cpu[k], mag, NV2, 2);
            free(mag);
        }
    }
    cudaFree(d_w), cudaFree(d_d), cudaFree(d_prev), cudaFree(d_keep);
    for (int r = 0; r < 2; r++)
        for (int k = 0; k < 4; k++) free(g[r][k]);
    free(w), free(d), free(prev), free(c_w), free(c_d), free(c_prev), free(c_keep);
}

/* ---- Attention ----
 * Causal grouped-query attention, forward and backward, against a double-precision implementation written
 * here from the formulas (softmax(q k^T / sqrt(hd)) v over the keys at or before each query; dv = P^T dO,
 * dP = dO v^T, dS = P (dP - rowsum(dO o)) / sqrt(hd), dq = dS k, dk = dS^T q). The GPU and the CPU each sum
 * in their own order, so neither is the other's bits; each output tensor's error is measured as
 * max |x - ref| / max |ref| and the GPU's must be within 4 times the CPU's plus a floor: 256 u in fp32;
 * 2^-9 (a bf16 rounding) under bf16, where both round every probability (and score gradient) to bf16, which
 * the reference does not. The CPU's own error is checked first, on every machine (256 u, and 2^-6 under
 * bf16), which checks the reference, the layout and the bound before any GPU runs. Shapes: T not a multiple
 * of the kernels' 32-row blocks, kv heads shared by 2 and 3 query heads, head_dim 26 (not a multiple of the
 * 4 lanes that split it), 32, 64, 128 and 256 (the largest the kernels take). */
typedef struct {
    int B, T, H, Hkv, hd, bf16;
} att_case;

typedef struct {
    size_t nqkv, nout, nlse;
    float *qkv, *dout;
    double *out, *lse, *dqkv;  /* the reference */
} att_data;

static void attention_reference(const att_case *c, att_data *a) {
    const int dq = c->H * c->hd, dkv = c->Hkv * c->hd, stride = dq + 2 * dkv, group = c->H / c->Hkv, T = c->T;
    const double scale = 1.0 / sqrt((double)c->hd);
    double *p = alloc(sizeof(double) * T), *ds = alloc(sizeof(double) * T);
    memset(a->dqkv, 0, sizeof(double) * a->nqkv);
    for (int b = 0; b < c->B; b++)
        for (int h = 0; h < c->H; h++) {
            const float *base = a->qkv + (size_t)b * T * stride;
            const int kq = dq + (h / group) * c->hd, kv = kq + dkv;
            for (int t = 0; t < T; t++) {
                const float *q = base + (size_t)t * stride + h * c->hd;
                const float *dout = a->dout + ((size_t)b * T + t) * dq + h * c->hd;
                double *out = a->out + ((size_t)b * T + t) * dq + h * c->hd, m = -INFINITY, sum = 0, D = 0;
                for (int s = 0; s <= t; s++) {
                    double x = 0;
                    for (int i = 0; i < c->hd; i++) x += (double)q[i] * base[(size_t)s * stride + kq + i];
                    p[s] = x * scale, m = p[s] > m ? p[s] : m;
                }
                for (int s = 0; s <= t; s++) p[s] = exp(p[s] - m), sum += p[s];
                for (int i = 0; i < c->hd; i++) out[i] = 0;
                for (int s = 0; s <= t; s++) {
                    p[s] /= sum;
                    for (int i = 0; i < c->hd; i++) out[i] += p[s] * base[(size_t)s * stride + kv + i];
                }
                a->lse[((size_t)b * c->H + h) * T + t] = m + log(sum);
                for (int i = 0; i < c->hd; i++) D += (double)dout[i] * out[i];
                for (int s = 0; s <= t; s++) {
                    double dp = 0;
                    for (int i = 0; i < c->hd; i++) dp += (double)dout[i] * base[(size_t)s * stride + kv + i];
                    ds[s] = p[s] * (dp - D) * scale;
                }
                double *dbase = a->dqkv + (size_t)b * T * stride;
                for (int s = 0; s <= t; s++)
                    for (int i = 0; i < c->hd; i++) {
                        dbase[(size_t)t * stride + h * c->hd + i] += ds[s] * base[(size_t)s * stride + kq + i];
                        dbase[(size_t)s * stride + kq + i] += ds[s] * q[i];
                        dbase[(size_t)s * stride + kv + i] += p[s] * dout[i];
                    }
            }
        }
    free(p), free(ds);
}

/* max |x - ref| / max |ref| over n values; a NaN anywhere is infinitely bad. */
static double relative_error(const float *x, const double *ref, size_t n) {
    double worst = 0, top = 0;
    for (size_t i = 0; i < n; i++) {
        const double d = fabs((double)x[i] - ref[i]);
        if (isnan(d)) return INFINITY;
        worst = d > worst ? d : worst, top = fabs(ref[i]) > top ? fabs(ref[i]) : top;
    }
    return top > 0 ? worst / top : (worst > 0 ? INFINITY : 0);
}

static att_data attention_data(const att_case *c) {
    att_data a;
    a.nqkv = (size_t)c->B * c->T * (c->H + 2 * c->Hkv) * c->hd;
    a.nout = (size_t)c->B * c->T * c->H * c->hd;
    a.nlse = (size_t)c->B * c->H * c->T;
    a.qkv = alloc(sizeof(float) * a.nqkv), a.dout = alloc(sizeof(float) * a.nout);
    fill(a.qkv, a.nqkv, 1.5f), fill(a.dout, a.nout, 1.0f);
    if (c->bf16) /* the caller rounds q, k, v and dout (layers.h) */
        for (size_t i = 0; i < a.nqkv || i < a.nout; i++) {
            if (i < a.nqkv) a.qkv[i] = nb_bf16_rounded(a.qkv[i]);
            if (i < a.nout) a.dout[i] = nb_bf16_rounded(a.dout[i]);
        }
    a.out = alloc(sizeof(double) * a.nout), a.lse = alloc(sizeof(double) * a.nlse);
    a.dqkv = alloc(sizeof(double) * a.nqkv);
    attention_reference(c, &a);
    return a;
}

static void attention_data_free(att_data *a) {
    free(a->qkv), free(a->dout), free(a->out), free(a->lse), free(a->dqkv);
}

/* Each output's error against the reference: out, lse, then dqkv's query, key and value parts as one. */
static void attention_errors(const att_case *c, const att_data *a, const float *out, const float *lse,
                             const float *dqkv, double err[3]) {
    err[0] = relative_error(out, a->out, a->nout);
    err[1] = relative_error(lse, a->lse, a->nlse);
    err[2] = relative_error(dqkv, a->dqkv, a->nqkv);
    (void)c;
}

static const char *const att_outputs[3] = {"out", "lse", "dqkv"};

/* The CPU's attention on the same inputs, and its errors; 0, or -1 when a CPU pass failed. */
static int attention_on_cpu(const att_case *c, const att_data *a, double err[3]) {
    float *out = alloc(sizeof(float) * a->nout), *lse = alloc(sizeof(float) * a->nlse);
    float *dqkv = alloc(sizeof(float) * a->nqkv);
    const nb_backend *be = nb_backend_default();
    const int rc = be ? attention_forward(be, out, NULL, lse, a->qkv, c->B, c->T, c->H, c->Hkv, c->hd, c->bf16) ||
                            attention_backward(be, dqkv, a->dout, out, lse, a->qkv, c->B, c->T, c->H, c->Hkv, c->hd,
                                               c->bf16)
                      : -1;
    CHECK(rc == 0, "CPU attention failed: %s", nb_last_error());
    attention_errors(c, a, out, lse, dqkv, err);
    free(out), free(lse), free(dqkv);
    return rc ? -1 : 0;
}

static void attention_name(char *what, size_t size, const att_case *c, const char *part) {
    snprintf(what, size, "attention %s B%d T%d H%d/%d hd%d%s", part, c->B, c->T, c->H, c->Hkv, c->hd,
             c->bf16 ? " bf16" : "");
}
/* ... with " (tensor cores)" where the tensor-core kernels (attention_mma.cu) made it. */
static void attention_name_of(char *what, size_t size, const att_case *c, const char *part, int tensor) {
    attention_name(what, size, c, part);
    if (tensor) snprintf(what + strlen(what), size - strlen(what), " (tensor cores)");
}

static double attention_cpu_bound(const att_case *c) { return c->bf16 ? 0x1p-6 : 256 * U; }
static double attention_gpu_bound(const att_case *c, double cpu_err) {
    return 4 * cpu_err + (c->bf16 ? 0x1p-9 : 256 * U);
}

/* The CPU against the reference: runs on every machine. */
static void check_attention_cpu(const att_case *c) {
    att_data a = attention_data(c);
    double err[3];
    char what[96];
    if (attention_on_cpu(c, &a, err) == 0)
        for (int k = 0; k < 3; k++) {
            attention_name(what, sizeof what, c, att_outputs[k]);
            CHECK(err[k] <= attention_cpu_bound(c), "%s: the CPU's relative error %.3g > %.3g: the reference, the "
                  "layout or the CPU is wrong", what, err[k], attention_cpu_bound(c));
            printf("%-44s CPU error %.3g (bound %.3g)\n", what, err[k], attention_cpu_bound(c));
        }
    attention_data_free(&a);
}

/* The GPU's forward and backward (forward's out and lse feed its backward), twice: the same bits, and each
 * output within attention_gpu_bound of the reference. */
/* tensor: the tensor-core kernels (attention_mma.cu: bf16, head_dim a multiple of 16 up to 128), under the same
 * bound; their operands are the same bf16 values as the CUDA-core kernels' and the CPU's, only the sums' order
 * differs. */
static void check_attention_gpu(const att_case *c, int tensor) {
    att_data a = attention_data(c);
    double cpu[3], gpu[3];
    char what[96];
    if (attention_on_cpu(c, &a, cpu)) {
        attention_data_free(&a);
        return;
    }
    float *out[2], *lse[2], *dqkv[2];
    nb_bf16 *out16[2];
    float *d_qkv = dev(a.qkv, sizeof(float) * a.nqkv), *d_dout = dev(a.dout, sizeof(float) * a.nout);
    float *d_out = dev(NULL, sizeof(float) * a.nout), *d_lse = dev(NULL, sizeof(float) * a.nlse);
    float *d_dqkv = dev(NULL, sizeof(float) * a.nqkv);
    float *d_delta = dev(NULL, sizeof(float) * nbk_attention_scratch_floats(c->B, c->T, c->H));
    nb_bf16 *d_out16 = dev(NULL, sizeof(nb_bf16) * a.nout);
    for (int run = 0; run < 2; run++) {
        out[run] = alloc(sizeof(float) * a.nout), lse[run] = alloc(sizeof(float) * a.nlse);
        dqkv[run] = alloc(sizeof(float) * a.nqkv), out16[run] = alloc(sizeof(nb_bf16) * a.nout);
        CU(cudaMemset(d_out, 0xff, sizeof(float) * a.nout)), CU(cudaMemset(d_dqkv, 0xff, sizeof(float) * a.nqkv));
        if (tensor) {
            ran(nbk_attention_forward_mma(d_out, d_out16, d_lse, d_qkv, c->B, c->T, c->H, c->Hkv, c->hd, c->bf16, 0),
                "attention_forward (tensor cores)");
            ran(nbk_attention_backward_mma(d_dqkv, d_dout, d_out, d_lse, d_qkv, c->B, c->T, c->H, c->Hkv, c->hd,
                                           c->bf16, d_delta, 0),
                "attention_backward (tensor cores)");
        } else {
            ran(nbk_attention_forward(d_out, d_out16, d_lse, d_qkv, c->B, c->T, c->H, c->Hkv, c->hd, c->bf16, 0),
                "attention_forward");
            ran(nbk_attention_backward(d_dqkv, d_dout, d_out, d_lse, d_qkv, c->B, c->T, c->H, c->Hkv, c->hd, c->bf16,
                                       d_delta, 0),
                "attention_backward");
        }
        get(out[run], d_out, sizeof(float) * a.nout), get(lse[run], d_lse, sizeof(float) * a.nlse);
        get(dqkv[run], d_dqkv, sizeof(float) * a.nqkv), get(out16[run], d_out16, sizeof(nb_bf16) * a.nout);
    }
    attention_name_of(what, sizeof what, c, "", tensor);
    same_bits(what, out[0], out[1], sizeof(float) * a.nout, sizeof(float));
    same_bits(what, lse[0], lse[1], sizeof(float) * a.nlse, sizeof(float));
    same_bits(what, dqkv[0], dqkv[1], sizeof(float) * a.nqkv, sizeof(float));
    size_t cast_ok = 0;
    for (size_t i = 0; i < a.nout; i++) cast_ok += out16[0][i] == nb_bf16_from_float(out[0][i]);
    CHECK(cast_ok == a.nout, "%s: out16 is not out cast to bf16 (%zu of %zu values)", what, cast_ok, a.nout);
    attention_errors(c, &a, out[0], lse[0], dqkv[0], gpu);
    for (int k = 0; k < 3; k++) {
        attention_name_of(what, sizeof what, c, att_outputs[k], tensor);
        const double bound = attention_gpu_bound(c, cpu[k]);
        CHECK(gpu[k] <= bound, "%s: the GPU's relative error %.3g > %.3g (4 x the CPU's %.3g + the floor)", what,
              gpu[k], bound, cpu[k]);
        printf("%-44s GPU error %.3g, CPU error %.3g (bound %.3g)\n", what, gpu[k], cpu[k], bound);
    }
    for (int run = 0; run < 2; run++) free(out[run]), free(lse[run]), free(dqkv[run]), free(out16[run]);
    cudaFree(d_qkv), cudaFree(d_dout), cudaFree(d_out), cudaFree(d_lse), cudaFree(d_dqkv), cudaFree(d_delta);
    cudaFree(d_out16);
    attention_data_free(&a);
}

static const att_case att_cases[] = {
    {2, 75, 4, 2, 32, 0}, {2, 75, 4, 2, 32, 1}, {1, 130, 3, 1, 64, 0}, {1, 130, 3, 1, 64, 1},
    {2, 33, 2, 2, 26, 0}, {1, 40, 2, 1, 128, 0}, {1, 40, 2, 1, 128, 1}, {1, 20, 1, 1, 256, 0},
};
enum { N_ATT_CASES = sizeof att_cases / sizeof att_cases[0] };

/* Bad shapes are refused before anything is launched, naming the call. */
static void check_attention_refusals(void) {
    CHECK(nbk_attention_forward(NULL, NULL, NULL, NULL, 1, 8, 4, 3, 32, 0, 0) == -1 &&
              strstr(nb_last_error(), "attention_forward") && strstr(nb_last_error(), "3 kv heads"),
          "kv heads that do not divide the query heads are refused: %s", nb_last_error());
    CHECK(nbk_attention_backward(NULL, NULL, NULL, NULL, NULL, 1, 8, 1, 1, 258, 0, NULL, 0) == -1 &&
              strstr(nb_last_error(), "head_dim 258"),
          "head_dim above 256 is refused: %s", nb_last_error());
    /* the tensor-core kernels: bf16 and head_dim a multiple of 16 up to 128, nothing else */
    CHECK(nbk_attention_mma_supports(64, 1) && nbk_attention_mma_supports(128, 1) && !nbk_attention_mma_supports(64, 0) &&
              !nbk_attention_mma_supports(26, 1) && !nbk_attention_mma_supports(144, 1) &&
              !nbk_attention_mma_supports(0, 1),
          "nbk_attention_mma_supports: bf16 with head_dim 16, 32, ..., 128 only");
    CHECK(nbk_attention_forward_mma(NULL, NULL, NULL, NULL, 1, 8, 4, 4, 64, 0, 0) == -1 &&
              strstr(nb_last_error(), "tensor cores") && strstr(nb_last_error(), "fp32"),
          "fp32 on the tensor-core kernels is refused, naming it: %s", nb_last_error());
    CHECK(nbk_attention_backward_mma(NULL, NULL, NULL, NULL, NULL, 1, 8, 1, 1, 26, 1, NULL, 0) == -1 &&
              strstr(nb_last_error(), "head_dim 26"),
          "head_dim 26 on the tensor-core kernels is refused: %s", nb_last_error());
}

/* ---- A stage in the GPU's memory ----
 * The CUDA backend's device memory mode (nb_cuda_open_device_memory) with the kernels as its layers
 * (nb_layer_ops_cuda): a model of 3 blocks (vocabulary 64, 2 x 12 tokens) placed there (nb_stage_place), one
 * stage and two, tied and untied, through two micro-batches of forward and backward, against the CPU's
 * default backend on the same weights and tokens: each loss within 1e-5 relative, each stage's gradients
 * and the hand-overs between stages within 1e-4 (max |gpu - cpu| / max |cpu|: products and attention sum
 * in other orders), and the same bits on the GPU twice. */
static int outcome_same_bits(const stage_outcome *a, const stage_outcome *b, const nb_model *layout, size_t nd) {
    int same = !memcmp(a->loss, b->loss, sizeof a->loss);
    for (int s = 0; s < layout->n_stages; s++) {
        same &= !memcmp(a->grads[s], b->grads[s], sizeof(float) * layout->stages[s].n_params);
        if (a->tied[s]) same &= !memcmp(a->tied[s], b->tied[s], sizeof(float) * layout->stages[s].tensors[0].numel);
    }
    for (int k = 0; k < STAGE_RUN_MICRO && layout->n_stages == 2; k++)
        same &= !memcmp(a->output[k], b->output[k], sizeof(float) * nd) &&
                !memcmp(a->input_grad[k], b->input_grad[k], sizeof(float) * nd);
    return same;
}

static void check_device_stage(void) {
    enum { B = 2, T = 12 };
    nb_backend *dev = NULL;
    if (nb_cuda_open_device_memory(&dev)) {
        CHECK(0, "the device memory mode: %s", nb_last_error());
        return;
    }
    dev->layers = nb_layer_ops_cuda();
    const nb_backend *cpu = nb_backend_default();
    printf("device memory mode: %s\n", nb_backend_label(dev));
    /* fp32: the loss within 1e-5, gradients and hand-overs within 1e-4 (relative, the worst element's); bf16 (the
     * bf16 copies, the slot's bf16 values, cuBLAS's bf16 products): within 1e-3 and 5e-2, since a product summed
     * in another order can round an activation to the neighbouring bf16 value */
    /* and a mixture of experts (4 experts, 2 a token, every block; the routing's steps as their kernels, the
     * products sized by the counts read back): the same bounds. The router's logits differ from the CPU's in their
     * last bits only; a token whose two best experts were that close would change its choice and fail the
     * bounds (then the routing, not a kernel, is the cause: these 24 tokens' random weights make it unlikely) */
    for (int moe = 0; moe < 2; moe++)
    for (int bf16 = 0; bf16 < 2; bf16++)
    for (int tied = 0; tied < 2; tied++)
        for (int n_stages = 1; n_stages <= 2; n_stages++) {
            const nb_precision p = bf16 ? NB_PRECISION_BF16 : NB_PRECISION_FP32;
            const double loss_tol = bf16 ? 1e-3 : 1e-5, tol = bf16 ? 5e-2 : 1e-4;
            nb_config cfg;
            nb_config_preset("tiny", &cfg);
            cfg.n_layers = 3, cfg.vocab_size = 64, cfg.context = 16, cfg.tied = tied;
            if (moe) cfg.n_experts = 4, cfg.experts_per_token = 2, cfg.moe_every = 1, cfg.aux_coef = 0.01;
            nb_model layout;
            if (nb_model_layout(&layout, &cfg, n_stages, NULL)) {  /* a case that cannot be made is a failure, not a skip */
                CHECK(0, "layout of %d stage(s)%s: %s", n_stages, moe ? ", MoE" : "", nb_last_error());
                continue;
            }
            const size_t nd = (size_t)B * T * cfg.d_model;
            stage_outcome want, got, again;
            const int ok = stage_run_at(cpu, &cfg, n_stages, B, T, 0, p, &want) == 0 &&
                           stage_run_at(dev, &cfg, n_stages, B, T, 0, p, &got) == 0 &&
                           stage_run_at(dev, &cfg, n_stages, B, T, 0, p, &again) == 0;
            char what[80];
            snprintf(what, sizeof what, "stage on the GPU, %s, %s, %d stage(s)%s", nb_precision_name(p),
                     tied ? "tied" : "untied", n_stages, moe ? ", MoE" : "");
            if (ok) {
                double worst = 0;
                for (int k = 0; k < STAGE_RUN_MICRO; k++) {
                    const double rel = fabs((double)got.loss[k] - want.loss[k]) / fabs((double)want.loss[k]);
                    CHECK(rel <= loss_tol, "%s: micro-batch %d's loss %.9g, CPU %.9g", what, k, (double)got.loss[k],
                          (double)want.loss[k]);
                }
                for (int s = 0; s < n_stages; s++) {
                    const double e = check_rel_err_f(got.grads[s], want.grads[s], layout.stages[s].n_params, 1e-30);
                    CHECK(e <= tol, "%s: stage %d's gradients: relative error %.3g", what, s, e);
                    worst = e > worst ? e : worst;
                    if (want.tied[s]) {
                        const double t = check_rel_err_f(got.tied[s], want.tied[s], layout.stages[s].tensors[0].numel, 1e-30);
                        CHECK(t <= tol, "%s: stage %d's tied head gradient: relative error %.3g", what, s, t);
                    }
                }
                for (int k = 0; k < STAGE_RUN_MICRO && n_stages == 2; k++) {
                    const double eo = check_rel_err_f(got.output[k], want.output[k], nd, 1e-30);
                    const double ei = check_rel_err_f(got.input_grad[k], want.input_grad[k], nd, 1e-30);
                    CHECK(eo <= tol && ei <= tol, "%s: hand-overs of micro-batch %d: output %.3g, input gradient %.3g",
                          what, k, eo, ei);
                }
                CHECK(outcome_same_bits(&got, &again, &layout, nd), "%s: two runs on the GPU differ", what);
                printf("%-44s losses %.7f %.7f (CPU %.7f %.7f), gradients within %.3g\n", what, (double)got.loss[0],
                       (double)got.loss[1], (double)want.loss[0], (double)want.loss[1], worst);
            }
            stage_outcome_free(&want), stage_outcome_free(&got), stage_outcome_free(&again);
            nb_model_free(&layout);
        }
    nb_backend_close(dev);
}

/* The optimizer made on the device memory mode with the kernels as its rules (nb_rule_ops_cuda): a matrix and
 * a gain (which takes the auxiliary AdamW under MARS, Muon and NorMuon), weights and gradients the same on both
 * sides, three steps of AdamW, Lion, Adan, MARS, Muon and NorMuon, and SGD (Muon-like: within 2^-10, see below): each step's d within 8 u of its magnitude of the CPU's (the kernels
 * are expected to give its bits, as check_rule shows), printing how many are bitwise. */
static void check_device_rules(void) {
    enum { ROWS = 37, COLS = 50, N = ROWS * COLS + COLS };
    nb_backend *dev = NULL;
    if (nb_cuda_open_device_memory(&dev)) {
        CHECK(0, "the device memory mode: %s", nb_last_error());
        return;
    }
    dev->rules = nb_rule_ops_cuda();
    nb_tensor t[2];
    memset(t, 0, sizeof t);
    snprintf(t[0].name, sizeof t[0].name, "matrix"), t[0].ndim = 2, t[0].shape[0] = ROWS, t[0].shape[1] = COLS;
    t[0].numel = ROWS * COLS, t[0].group = NB_GROUP_MATRIX;
    snprintf(t[1].name, sizeof t[1].name, "gain"), t[1].ndim = 1, t[1].shape[0] = COLS, t[1].numel = COLS;
    t[1].offset = ROWS * COLS, t[1].group = NB_GROUP_GAIN;
    float *w = alloc(sizeof(float) * N), *g = alloc(sizeof(float) * N), *d = alloc(sizeof(float) * N);
    float *gd = alloc(sizeof(float) * N);
    fill(w, N, 1.0f), fill(g, N, 0.5f);
    float *d_w = nb_backend_alloc(dev, sizeof(float) * N, "w"), *d_g = nb_backend_alloc(dev, sizeof(float) * N, "g");
    float *d_d = nb_backend_alloc(dev, sizeof(float) * N, "d");
    nb_backend_from_host(dev, d_w, w, sizeof(float) * N), nb_backend_from_host(dev, d_g, g, sizeof(float) * N);
    const nb_optimizer_kind kinds[] = {NB_OPT_ADAMW, NB_OPT_LION, NB_OPT_ADAN, NB_OPT_MARS, NB_OPT_MUON, NB_OPT_NORMUON,
                                       NB_OPT_MUON, NB_OPT_NORMUON, NB_OPT_SGD, NB_OPT_SGD};
    for (int k = 0; k < 10; k++) {
        /* Muon's and NorMuon's Newton-Schulz products sum in cuBLAS's order: within 2^-10 of the step's size
         * (a wrong coefficient or orientation moves it by far more); the element-wise rules within 8 u. The last
         * two under bf16 (Newton-Schulz's operands rounded to bf16, not yet run on a GPU): within 2^-5, since a
         * product summed in another order can round an operand to the neighbouring bf16 value */
        const int bf16 = k == 6 || k == 7;
        const double ulps = bf16 ? 524288 : kinds[k] == NB_OPT_MUON || kinds[k] == NB_OPT_NORMUON ? 16384 : 8;
        nb_optim_params p = nb_optim_defaults(kinds[k]);
        p.weight_decay = 0.1f;
        if (kinds[k] == NB_OPT_SGD) p.nesterov = k == 9;  /* SGD once plain (not yet run on a GPU), once Nesterov's */
        nb_optimizer *oc = NULL, *od = NULL;
        if (nb_optimizer_create(&oc, &p, t, 2, N, nb_backend_default()) || nb_optimizer_create(&od, &p, t, 2, N, dev) ||
            (bf16 && (nb_optimizer_set_precision(oc, NB_PRECISION_BF16) || nb_optimizer_set_precision(od, NB_PRECISION_BF16)))) {
            CHECK(0, "%s: optimizers: %s", nb_optimizer_desc_of(kinds[k])->name, nb_last_error());
        } else {
            for (int step = 0; step < 3; step++) {
                char what[64];
                snprintf(what, sizeof what, "%s%s on the GPU's memory, step %d", nb_optimizer_desc_of(kinds[k])->name,
                         bf16 ? " (bf16)" : "", step);
                const int rc = nb_optimizer_step(oc, g, w, 2e-3f, 1e-3f, d) || nb_optimizer_step(od, d_g, d_w, 2e-3f, 1e-3f, d_d);
                CHECK(rc == 0, "%s: %s", what, rc ? nb_last_error() : "");
                nb_backend_to_host(dev, gd, d_d, sizeof(float) * N);
                double *mag = max_magnitude(d, N);
                compare(what, gd, d, mag, N, ulps);
                free(mag);
            }
        }
        nb_optimizer_free(oc), nb_optimizer_free(od);
    }
    nb_backend_free(dev, d_w), nb_backend_free(dev, d_g), nb_backend_free(dev, d_d);
    free(w), free(g), free(d), free(gd);
    nb_backend_close(dev);
}

int main(void) {
    check_the_check();
    for (int i = 0; i < N_ATT_CASES; i++) check_attention_cpu(&att_cases[i]);
    check_attention_refusals();
    check_moe(0, 0);
    check_moe(1, 0);
    CHECK((int)MOE_KERNEL_MAX_K == (int)MOE_MAX_K, "the kernels' experts per token (%d) are moe.h's (%d)", MOE_KERNEL_MAX_K,
          MOE_MAX_K);
    int devices = 0;
    const cudaError_t e = cudaGetDeviceCount(&devices);
    if (e != cudaSuccess || devices == 0) {
        printf("skipped: no GPU (%s)\n", e != cudaSuccess ? cudaGetErrorString(e) : "no CUDA device");
        return check_failed ? 1 : 77;
    }
    struct cudaDeviceProp prop;
    CU(cudaGetDeviceProperties(&prop, 0));
    printf("GPU: %s (sm_%d%d)\n", prop.name, prop.major, prop.minor);
    check_embedding();
    check_rmsnorm(37, 100);
    check_rmsnorm(5, 1000);
    check_rmsnorm(3, 7);
    check_rmsnorm(600, 70);  /* dgain's wide form: rows past one chain of 256 and 19 row tiles, a partial column tile */
    check_dgain_tall();
    check_rope();
    check_swiglu();
    check_cross_entropy();
    check_moe(0, 1);
    check_moe(1, 1);
    check_device_stage();
    check_device_rules();
    check_delay_apply();
    check_arithmetic();
    for (int i = 0; i < N_ATT_CASES; i++) {
        check_attention_gpu(&att_cases[i], 0);
        if (nbk_attention_mma_supports(att_cases[i].hd, att_cases[i].bf16) && nbk_attention_mma_device_ok())
            check_attention_gpu(&att_cases[i], 1);
    }
    for (int gain = 0; gain < 2; gain++) check_rule(ADAMW, gain ? NB_GROUP_GAIN : NB_GROUP_MATRIX, 1.0f);
    check_rule(LION, NB_GROUP_MATRIX, 1.0f);
    check_rule(ADAN, NB_GROUP_MATRIX, 1.0f);
    check_rule(MARS, NB_GROUP_MATRIX, 1.0f);   /* ||c|| > 1: clipped */
    check_rule(MARS, NB_GROUP_MATRIX, 1e-4f);  /* ||c|| < 1 */
    return check_summary();
}
