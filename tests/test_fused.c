/* The fused and vectorized elementwise passes (issue 15, the time outside GEMMs), each bitwise against
 * an independent reference:
 * 1. the bf16 casts as the vectorized loops run them (nb_bf16_cast, nb_bf16_round, nb_bf16_widen) against
 *    the rounding rule written here bit by bit, on every high half with chosen low halves (ties, just
 *    below and above them, NaN payloads, denormals, infinities), 2^24 values; `test_fused --all` runs
 *    all 2^32 floats (minutes; not part of ctest);
 * 2. RoPE with the bf16 rounding in one pass against rope_forward, nb_bf16_round and nb_bf16_cast in turn,
 *    and its backward written to bf16 against rope_backward then nb_bf16_cast;
 * 3. SwiGLU with the cast of gate/up in one pass against nb_bf16_cast then swiglu_forward_bf16, and its
 *    backward written to bf16 against swiglu_backward on the widened gate/up then nb_bf16_cast; attention's output cast as
 *    it is computed against the cast of the whole output;
 *    the loss with its bf16 gradient in one pass against cross_entropy_forward then cross_entropy_grad_bf16;
 * 4. RMSNorm's gain gradient, threaded over columns, against the serial sum over rows written here, for
 *    1, 2 and 3 threads. */
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "backend/backend.h"
#include "check.h"
#include "layers/layers.h"

/* Round to nearest, ties to even, on the bits: keep the high half, add one when the low half is more
 * than half an ulp, or exactly half and the high half is odd (a carry runs into the exponent, up to
 * infinity). A NaN keeps its sign and high payload bits and is made quiet. */
static uint16_t reference_bf16(uint32_t u) {
    const uint32_t exponent = (u >> 23) & 0xffu, mantissa = u & 0x7fffffu;
    if (exponent == 0xffu && mantissa != 0) return (uint16_t)((u >> 16) | 0x0040u);
    uint32_t high = u >> 16;
    const uint32_t low = u & 0xffffu;
    if (low > 0x8000u || (low == 0x8000u && (high & 1u))) high++;
    return (uint16_t)high;
}

static float float_of(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static uint32_t bits_of(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

/* Casts `count` values whose bits are bits[0..count) three ways and counts disagreements with the rule. */
static long check_cast_batch(const uint32_t *bits, float *x, nb_bf16 *y, float *back, size_t count) {
    long bad = 0;
    for (size_t i = 0; i < count; i++) x[i] = float_of(bits[i]);
    nb_bf16_cast(y, x, count);
    nb_bf16_widen(back, y, count);
    nb_bf16_round(x, count);
    for (size_t i = 0; i < count; i++) {
        const uint16_t want = reference_bf16(bits[i]);
        const uint32_t wide = (uint32_t)want << 16;
        if (y[i] != want || bits_of(back[i]) != wide || bits_of(x[i]) != wide) {
            if (bad++ < 5)
                fprintf(stderr, "  %08x: cast %04x round %08x widen %08x, rule %04x\n", bits[i], y[i], bits_of(x[i]),
                        bits_of(back[i]), want);
        }
    }
    return bad;
}

static void test_casts(int all) {
    enum { BATCH = 1 << 20 };
    uint32_t *bits = malloc(sizeof(uint32_t) * BATCH);
    float *x = malloc(sizeof(float) * BATCH), *back = malloc(sizeof(float) * BATCH);
    nb_bf16 *y = malloc(sizeof(nb_bf16) * BATCH);
    long bad = 0;
    size_t n = 0, total = 0;
    if (all) {
        for (uint64_t u = 0; u <= 0xffffffffu; u++) {
            bits[n++] = (uint32_t)u;
            if (n == BATCH) bad += check_cast_batch(bits, x, y, back, n), total += n, n = 0;
        }
    } else {
        /* every high half (every sign, exponent and bf16 mantissa: zeros, denormals, normals, infinities,
         * NaNs) with low halves at and around the tie, the extremes and a spread of others */
        static const uint16_t lows[] = {0x0000, 0x0001, 0x0002, 0x3fff, 0x4000, 0x7ffe, 0x7fff, 0x8000,
                                        0x8001, 0x8002, 0xbfff, 0xc000, 0xfffe, 0xffff, 0x1234, 0xedcb};
        uint64_t state = 0x9e3779b97f4a7c15u;
        for (uint32_t high = 0; high <= 0xffffu; high++)
            for (int k = 0; k < 256; k++) {
                uint32_t low;
                if (k < (int)(sizeof lows / sizeof lows[0])) low = lows[k];
                else state = state * 6364136223846793005u + 1442695040888963407u, low = (uint32_t)(state >> 48);
                bits[n++] = high << 16 | low;
                if (n == BATCH) bad += check_cast_batch(bits, x, y, back, n), total += n, n = 0;
            }
    }
    if (n) bad += check_cast_batch(bits, x, y, back, n), total += n;
    CHECK(bad == 0, "bf16 cast, round and widen follow the rounding rule on %zu values (%ld differ)", total, bad);
    CHECK(total == (all ? (size_t)1 << 32 : (size_t)1 << 24), "values checked: %zu", total);
    free(bits);
    free(x);
    free(back);
    free(y);
}

static void fill(float *x, size_t n, float scale, unsigned seed) {
    for (size_t i = 0; i < n; i++) x[i] = scale * sinf(0.7f * (float)i + (float)seed) + 0.01f * (float)(i % 7);
}

/* RoPE's tables for T positions (theta 10000), computed in double. */
static void rope_tables(int T, int hd, float **cos_t, float **sin_t) {
    const int half = hd / 2;
    *cos_t = malloc(sizeof(float) * T * half);
    *sin_t = malloc(sizeof(float) * T * half);
    for (int t = 0; t < T; t++)
        for (int i = 0; i < half; i++) {
            (*cos_t)[t * half + i] = (float)cos(t * pow(10000.0, -2.0 * i / hd));
            (*sin_t)[t * half + i] = (float)sin(t * pow(10000.0, -2.0 * i / hd));
        }
}

static void test_rope_bf16(void) {
    const int B = 2, T = 5, H = 4, Hkv = 2, hd = 8, stride = (H + 2 * Hkv) * hd;
    const size_t n = (size_t)B * T * stride;
    float *cos_t, *sin_t;
    rope_tables(T, hd, &cos_t, &sin_t);
    float *x = malloc(sizeof(float) * n), *want = malloc(sizeof(float) * n), *input = malloc(sizeof(float) * n);
    nb_bf16 *x16 = malloc(sizeof(nb_bf16) * n), *want16 = malloc(sizeof(nb_bf16) * n);
    fill(input, n, 3.0f, 1);
    memcpy(x, input, sizeof(float) * n);
    memcpy(want, input, sizeof(float) * n);
    rope_forward(want, B, T, stride, H + Hkv, hd, cos_t, sin_t);
    nb_bf16_round(want, n);
    nb_bf16_cast(want16, want, n);
    rope_forward_bf16(x, x16, B, T, stride, H + Hkv, hd, cos_t, sin_t);
    CHECK(!memcmp(x, want, sizeof(float) * n), "rope_forward_bf16: the rounded floats of rotate, round, cast");
    CHECK(!memcmp(x16, want16, sizeof(nb_bf16) * n), "rope_forward_bf16: the bf16 copy of rotate, round, cast");
    /* it did rotate (a q value at position 1 moved) and did round (v too) */
    const size_t q1 = (size_t)1 * stride, v0 = (size_t)(H + Hkv) * hd;
    CHECK(x[q1] != nb_bf16_rounded(input[q1]), "position 1's q was rotated");
    CHECK(x[v0] == nb_bf16_rounded(input[v0]) && x[v0] != input[v0], "v was rounded, not rotated");
    free(cos_t), free(sin_t), free(x), free(want), free(input), free(x16), free(want16);
}

/* The backward's rotation written to bf16 against rope_backward then nb_bf16_cast; dx stays as it was. */
static void test_rope_backward_cast(void) {
    const int B = 2, T = 5, H = 4, Hkv = 2, hd = 8, stride = (H + 2 * Hkv) * hd;
    const size_t n = (size_t)B * T * stride;
    float *cos_t, *sin_t;
    rope_tables(T, hd, &cos_t, &sin_t);
    float *dx = malloc(sizeof(float) * n), *input = malloc(sizeof(float) * n), *rotated = malloc(sizeof(float) * n);
    nb_bf16 *dx16 = malloc(sizeof(nb_bf16) * n), *want16 = malloc(sizeof(nb_bf16) * n);
    fill(input, n, 0.5f, 7);
    memcpy(dx, input, sizeof(float) * n);
    memcpy(rotated, input, sizeof(float) * n);
    rope_backward(rotated, B, T, stride, H + Hkv, hd, cos_t, sin_t);
    nb_bf16_cast(want16, rotated, n);
    rope_backward_cast_bf16(dx16, dx, B, T, stride, H + Hkv, hd, cos_t, sin_t);
    CHECK(!memcmp(dx16, want16, sizeof(nb_bf16) * n), "rope_backward_cast_bf16: rope_backward then the cast");
    CHECK(!memcmp(dx, input, sizeof(float) * n), "rope_backward_cast_bf16 leaves dx alone");
    free(cos_t), free(sin_t), free(dx), free(input), free(rotated), free(dx16), free(want16);
}

static void test_swiglu_backward_cast(void) {
    const int N = 7, F = 37;
    float *gu = malloc(sizeof(float) * N * 2 * F), *dh = malloc(sizeof(float) * N * F);
    float *dgu = malloc(sizeof(float) * N * 2 * F);
    nb_bf16 *gu16 = malloc(sizeof(nb_bf16) * N * 2 * F), *dgu16 = malloc(sizeof(nb_bf16) * N * 2 * F);
    nb_bf16 *want16 = malloc(sizeof(nb_bf16) * N * 2 * F);
    fill(gu, (size_t)N * 2 * F, 4.0f, 8);
    fill(dh, (size_t)N * F, 0.3f, 9);
    nb_bf16_cast(gu16, gu, (size_t)N * 2 * F);
    nb_bf16_widen(gu, gu16, (size_t)N * 2 * F);   /* the values the bf16 backward reads */
    swiglu_backward(dgu, dh, gu, N, F);
    nb_bf16_cast(want16, dgu, (size_t)N * 2 * F);
    swiglu_backward_bf16_cast(dgu16, dh, gu16, N, F);
    CHECK(!memcmp(dgu16, want16, sizeof(nb_bf16) * N * 2 * F), "swiglu_backward_bf16_cast: the backward then the cast");
    free(gu), free(dh), free(dgu), free(gu16), free(dgu16), free(want16);
}

/* Attention's output cast block by block as it is computed, against the cast of the whole output after a
 * call without it (T = 70: two query blocks of 64 and 6 rows). */
static void test_attention_cast(void) {
    const int B = 2, T = 70, H = 4, Hkv = 2, hd = 8, stride = (H + 2 * Hkv) * hd, dq = H * hd;
    const size_t n = (size_t)B * T * stride, no = (size_t)B * T * dq;
    float *qkv = malloc(sizeof(float) * n), *out = malloc(sizeof(float) * no), *want = malloc(sizeof(float) * no);
    float *lse = malloc(sizeof(float) * B * H * T), *want_lse = malloc(sizeof(float) * B * H * T);
    nb_bf16 *out16 = malloc(sizeof(nb_bf16) * no), *want16 = malloc(sizeof(nb_bf16) * no);
    fill(qkv, n, 1.5f, 10);
    nb_bf16_round(qkv, n);
    attention_forward(nb_backend_default(), want, NULL, want_lse, qkv, B, T, H, Hkv, hd, 1);
    nb_bf16_cast(want16, want, no);
    attention_forward(nb_backend_default(), out, out16, lse, qkv, B, T, H, Hkv, hd, 1);
    CHECK(!memcmp(out16, want16, sizeof(nb_bf16) * no), "attention_forward's bf16 output: the cast of its output");
    CHECK(!memcmp(out, want, sizeof(float) * no) && !memcmp(lse, want_lse, sizeof(float) * B * H * T),
          "attention_forward: the same output and log-sum-exp with and without the bf16 copy");
    free(qkv), free(out), free(want), free(lse), free(want_lse), free(out16), free(want16);
}

static void test_swiglu_cast(void) {
    const int N = 7, F = 37;
    const size_t n = (size_t)N * 2 * F;
    float *gu = malloc(sizeof(float) * n);
    nb_bf16 *gu16 = malloc(sizeof(nb_bf16) * n), *want_gu16 = malloc(sizeof(nb_bf16) * n);
    nb_bf16 *h = malloc(sizeof(nb_bf16) * N * F), *want_h = malloc(sizeof(nb_bf16) * N * F);
    fill(gu, n, 4.0f, 2);
    nb_bf16_cast(want_gu16, gu, n);
    swiglu_forward_bf16(want_h, want_gu16, N, F);
    swiglu_forward_cast_bf16(h, gu16, gu, N, F);
    CHECK(!memcmp(gu16, want_gu16, sizeof(nb_bf16) * n), "swiglu_forward_cast_bf16: gate/up cast");
    CHECK(!memcmp(h, want_h, sizeof(nb_bf16) * N * F), "swiglu_forward_cast_bf16: h of the cast gate/up");
    free(gu), free(gu16), free(want_gu16), free(h), free(want_h);
}

static void test_cross_entropy_bf16(void) {
    const int N = 9, V = 37;
    float *z = malloc(sizeof(float) * N * V), *lse = malloc(sizeof(float) * N), *want_lse = malloc(sizeof(float) * N);
    nb_bf16 *d = malloc(sizeof(nb_bf16) * N * V), *want_d = malloc(sizeof(nb_bf16) * N * V);
    int targets[9];
    for (int n = 0; n < N; n++) targets[n] = (n * 11 + 3) % V;
    targets[0] = 0, targets[1] = V - 1;
    fill(z, (size_t)N * V, 6.0f, 6);
    const double want = cross_entropy_forward(want_lse, z, targets, N, V);
    cross_entropy_grad_bf16(want_d, z, want_lse, targets, N, V, 4 * N);
    const double got = cross_entropy_forward_grad_bf16(lse, d, z, targets, N, V, 4 * N);
    CHECK(got == want, "cross_entropy_forward_grad_bf16: the loss sum (%.17g, %.17g)", got, want);
    CHECK(!memcmp(lse, want_lse, sizeof(float) * N), "cross_entropy_forward_grad_bf16: each row's log-sum-exp");
    CHECK(!memcmp(d, want_d, sizeof(nb_bf16) * N * V), "cross_entropy_forward_grad_bf16: the bf16 gradient");
    free(z), free(lse), free(want_lse), free(d), free(want_d);
}

/* dgain += sum over rows n, in order, of dout * x * rstd: the order the result must not depend on
 * threads for. dx is checked too (it is threaded over rows, each row alone). */
static void test_rmsnorm_gain_gradient(void) {
    const int N = 67, d = 45;
    float *x = malloc(sizeof(float) * N * d), *dy = malloc(sizeof(float) * N * d), *gain = malloc(sizeof(float) * d);
    float *rstd = malloc(sizeof(float) * N), *y = malloc(sizeof(float) * N * d);
    float *want = malloc(sizeof(float) * d), *dgain = malloc(sizeof(float) * d);
    float *dx = malloc(sizeof(float) * N * d), *dx1 = malloc(sizeof(float) * N * d);
    fill(x, (size_t)N * d, 2.0f, 3);
    fill(dy, (size_t)N * d, 1.0f, 4);
    fill(gain, d, 1.0f, 5);
    rmsnorm_forward(y, rstd, x, gain, N, d, 1e-5f);
    for (int i = 0; i < d; i++) want[i] = 0.25f * (float)i;
    for (int nn = 0; nn < N; nn++)
        for (int i = 0; i < d; i++) want[i] += dy[(size_t)nn * d + i] * x[(size_t)nn * d + i] * rstd[nn];
    const int saved = omp_get_max_threads();
    for (int threads = 1; threads <= 3; threads++) {
        omp_set_num_threads(threads);
        for (int i = 0; i < d; i++) dgain[i] = 0.25f * (float)i;
        memset(dx, 0, sizeof(float) * N * d);
        rmsnorm_backward(dx, dgain, dy, x, gain, rstd, N, d);
        CHECK(!memcmp(dgain, want, sizeof(float) * d), "rmsnorm gain gradient, %d threads: the serial sum over rows",
              threads);
        if (threads == 1) memcpy(dx1, dx, sizeof(float) * N * d);
        else CHECK(!memcmp(dx, dx1, sizeof(float) * N * d), "rmsnorm dx, %d threads: as with 1", threads);
    }
    omp_set_num_threads(saved);
    free(x), free(dy), free(gain), free(rstd), free(y), free(want), free(dgain), free(dx), free(dx1);
}

int main(int argc, char **argv) {
    const int all = argc > 1 && !strcmp(argv[1], "--all");
    test_casts(all);
    test_rope_bf16();
    test_swiglu_cast();
    test_rope_backward_cast();
    test_swiglu_backward_cast();
    test_attention_cast();
    test_cross_entropy_bf16();
    test_rmsnorm_gain_gradient();
    return check_summary();
}
