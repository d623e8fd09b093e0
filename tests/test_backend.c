/* The backend object (include/nobubble/backend.h, src/backend/backend.h).
 * - Opening by name: every CPU backend and bf16 suffix opens; unknown names, suffixes and the removed
 *   "matmul" are refused naming the value and the choices; NULL and "" open the build's default.
 * - Failures are not fatal: an odd K in a bf16 tile product is recorded, making nb_backend_check fail once
 *   with a message naming it, then pass again; an allocation too large for any machine returns NULL at
 *   once with its message, and records nothing.
 * - The seam: a test backend that wraps the default one counts every call. A model made on it runs its
 *   stage's forward and backward (fp32 and bf16, with a tied head) and an optimizer made on it runs
 *   Muon's and SOAP's products, and every product arrives at the wrapper: none goes around it, and the
 *   results are bitwise those of the default backend. Made to fail its products, the wrapper makes the
 *   stage's forward and backward and the key/value decode return -1 with its message, and nothing exits. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "backend/backend.h"
#include "check.h"
#include "stage_step.h"
#include "nobubble/model.h"
#include "nobubble/optim.h"
#include "util/error.h"

/* Under AddressSanitizer an impossible allocation must return NULL, as glibc's does, instead of stopping the
 * test (CI's ASAN_OPTIONS adds to these defaults). */
const char *__asan_default_options(void);
const char *__asan_default_options(void) { return "allocator_may_return_null=1"; }

/* ":onednn" needs oneDNN's bf16 matmul, which it has from AVX-512 on (gemm_bf16.c). */
static int onednn_bf16(void) { return strncmp(nb_cpu_isa_name(), "avx512", 6) == 0; }

static void check_open(void) {
    const char *good[] = {"tiles", "hybrid", "onednn", "openblas", "tiles:onednn", "tiles:widen", "hybrid:widen",
                          "openblas:onednn"};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        nb_backend *b = NULL;
        if (strstr(good[i], ":onednn") && !onednn_bf16()) { /* refused at open, naming the ISA and the choices */
            char want[160];
            snprintf(want, sizeof want, "backend '%s': oneDNN has no bf16 matmul on this CPU (its ISA is %s", good[i],
                     nb_cpu_isa_name());
            CHECK(nb_backend_open(good[i], &b) == -1 && !b && strstr(nb_last_error(), want) &&
                      strstr(nb_last_error(), ":widen'"),
                  "%s refused on %s: %s", good[i], nb_cpu_isa_name(), nb_last_error());
            continue;
        }
        CHECK(nb_backend_open(good[i], &b) == 0 && b && !strcmp(nb_backend_name(b), good[i]), "open %s: %s", good[i],
              nb_last_error());
        if (b && strstr(good[i], ":widen")) CHECK(!nb_backend_bf16_native(b), "%s: bf16 widened", good[i]);
        if (b && strstr(good[i], ":onednn")) CHECK(nb_backend_bf16_native(b), "%s: bf16 on oneDNN", good[i]);
        nb_backend_close(b);
    }
    const char *bad[] = {"cublas", "matmul", "Tiles", "tiles:", "tiles:amx", ":widen", "tiles:widen:widen", "hybrid "};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        nb_backend *b = (nb_backend *)&b;  /* must be cleared */
        char want[64];
        snprintf(want, sizeof want, "backend '%s': expected tiles, hybrid", bad[i]);
        CHECK(nb_backend_open(bad[i], &b) == -1 && !b && strstr(nb_last_error(), want), "refuse '%s': %s", bad[i],
              nb_last_error());
    }
    nb_backend *d1, *d2;
    CHECK(nb_backend_open(NULL, &d1) == 0 && nb_backend_open("", &d2) == 0, "NULL and \"\" open the default");
    CHECK(!strcmp(nb_backend_name(d1), nb_backend_name(nb_backend_default())) &&
              !strcmp(nb_backend_name(d2), nb_backend_name(d1)),
          "the default: %s", nb_backend_name(d1));
    nb_backend_close(d1);
    nb_backend_close(d2);
}

static void check_recorded_failures(void) {
    nb_backend *b;
    CHECK(nb_backend_open("tiles", &b) == 0, "open");
    CHECK(nb_backend_check(b) == 0, "a new backend has no failure");
    nb_bf16 A[4] = {0}, B[64] = {0};
    float C[64];
    nb_tile_gemm_bf16(b, 1, 1, 3, 1.0f, A, 4, B, 16, 0, C, 16);  /* K = 3: odd */
    CHECK(nb_backend_check(b) == -1 && strstr(nb_last_error(), "odd K = 3"), "odd K recorded: %s", nb_last_error());
    CHECK(nb_backend_check(b) == 0, "the record is cleared once reported");
    void *p = nb_backend_alloc(b, SIZE_MAX / 2, "a test's impossible buffer");
    CHECK(!p && strstr(nb_last_error(), "out of memory allocating a test's impossible buffer"),
          "a failed allocation returns NULL with its message at once: %s", nb_last_error());
    CHECK(nb_backend_check(b) == 0, "and records nothing for a later check");
    float *q = nb_backend_alloc(b, 100, "a small buffer");
    CHECK(q && ((uintptr_t)q % 64) == 0 && q[0] == 0.0f && q[24] == 0.0f, "allocations are zeroed and aligned");
    nb_backend_free(b, q);
    CHECK(nb_backend_check(b) == 0, "no failure after a good allocation");
    nb_backend_close(b);
}

/* ---- A backend of the test's own: counts calls, forwards them to the default backend, or fails them. */
static struct {
    long gemm, gemm_bf16, syrk, syrk_bf16, tile, tile_bf16, alloc;
    int fail;       /* 1: products do nothing and record a failure */
    int failed;     /* the record */
} seen;

static const nb_backend *inner(const nb_backend *b) { return b->impl; }

static int refused(void) {
    if (!seen.fail) return 0;
    seen.failed = 1;
    return 1;
}

static void w_gemm(const nb_backend *b, int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda,
                   const float *B, int ldb, float beta, float *C, int ldc) {
    seen.gemm++;
    if (!refused()) nb_gemm(inner(b), ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}
static void w_gemm_bf16(const nb_backend *b, int ta, int tb, int M, int N, int K, float alpha, const nb_bf16 *A,
                        int lda, const nb_bf16 *B, int ldb, float beta, float *C, int ldc) {
    seen.gemm_bf16++;
    if (!refused()) nb_gemm_bf16(inner(b), ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}
static void w_syrk(const nb_backend *b, int t, int N, int K, float alpha, const float *A, int lda, float beta, float *C,
                   int ldc) {
#pragma omp atomic
    seen.syrk++;
    nb_syrk(inner(b), t, N, K, alpha, A, lda, beta, C, ldc);
}
static void w_syrk_bf16(const nb_backend *b, int t, int N, int K, float alpha, const nb_bf16 *A, int lda, float beta,
                        float *C, int ldc) {
#pragma omp atomic
    seen.syrk_bf16++;
    nb_syrk_bf16(inner(b), t, N, K, alpha, A, lda, beta, C, ldc);
}
static void w_tile(const nb_backend *b, int M, int N, int K, float alpha, const float *A, ptrdiff_t ars, ptrdiff_t aks,
                   const float *B, ptrdiff_t ldb, int acc, float *C, ptrdiff_t ldc) {
#pragma omp atomic
    seen.tile++;
    nb_tile_gemm(inner(b), M, N, K, alpha, A, ars, aks, B, ldb, acc, C, ldc);
}
static void w_tile_bf16(const nb_backend *b, int M, int N, int K, float alpha, const nb_bf16 *A, ptrdiff_t lda,
                        const nb_bf16 *B, ptrdiff_t ldb, int acc, float *C, ptrdiff_t ldc) {
#pragma omp atomic
    seen.tile_bf16++;
    nb_tile_gemm_bf16(inner(b), M, N, K, alpha, A, lda, B, ldb, acc, C, ldc);
}
static void *w_alloc(const nb_backend *b, size_t bytes, const char *what) {
#pragma omp atomic
    seen.alloc++;
    return nb_backend_alloc(inner(b), bytes, what);
}
static void w_free(const nb_backend *b, void *p) { nb_backend_free(inner(b), p); }
static void w_copy(const nb_backend *b, void *dst, const void *src, size_t n) {
    (void)b;
    memcpy(dst, src, n);
}
static int w_check(const nb_backend *b) {
    if (seen.failed) {
        seen.failed = 0;
        return nb_fail("the test backend refused a product");
    }
    return nb_backend_check(inner(b));
}
static void w_close(nb_backend *b) { (void)b; }

static void w_zero(const nb_backend *b, void *mem, size_t n) {
    (void)b;
    memset(mem, 0, n);
}

static void w_add(const nb_backend *b, float *dst, const float *src, size_t n) { nb_backend_add(inner(b), dst, src, n); }
static void w_scale(const nb_backend *b, float *x, size_t n, float s) { nb_backend_scale(inner(b), x, n, s); }
static double w_sum_squares(const nb_backend *b, const float *x, const float *y, size_t n) {
    return nb_backend_sum_squares(inner(b), x, y, n);
}

static const nb_backend_ops wrapper_ops = {w_gemm, w_gemm_bf16, w_syrk, w_syrk_bf16, w_tile, w_tile_bf16,
                                           w_alloc, w_free, w_copy, w_copy, w_check, w_close, w_copy, w_zero,
                                           w_add, w_scale, w_sum_squares};

static nb_backend wrapper(const nb_backend *real) {
    nb_backend w = *real;
    w.ops = &wrapper_ops;
    snprintf(w.name, sizeof w.name, "counting");
    w.impl = (void *)real;
    return w;
}

/* `tiny` cut to n_layers and a vocabulary of 64. */
static nb_config small_config(int n_layers, int context) {
    nb_config cfg;
    nb_config_preset("tiny", &cfg);
    cfg.n_layers = n_layers;
    cfg.vocab_size = 64;
    cfg.context = context;
    return cfg;
}

/* One micro-batch forward and backward of a 2-layer tied model in `precision` (stage_step.h). */
static int step(const nb_backend *be, nb_precision precision, float *loss, float *grads, size_t *n_params) {
    const nb_backend *held = NULL;
    const int rc = stage_step(be, precision, 16, 7, loss, grads, n_params, &held);
    CHECK(held == be, "the stage holds the backend it was made on");
    return rc;
}

static void check_seam(void) {
    const nb_backend *real = nb_backend_default();
    nb_backend counting = wrapper(real);
    static float g_real[1 << 20], g_wrap[1 << 20];
    for (int p = 0; p < 2; p++) {
        const nb_precision prec = p ? NB_PRECISION_BF16 : NB_PRECISION_FP32;
        float l_real = 0, l_wrap = 0;
        size_t n_real = 0, n_wrap = 0;
        memset(&seen, 0, sizeof seen);
        CHECK(step(real, prec, &l_real, g_real, &n_real) == 0, "%s on the default backend: %s", nb_precision_name(prec),
              nb_last_error());
        CHECK(step(&counting, prec, &l_wrap, g_wrap, &n_wrap) == 0, "%s on the counting backend: %s",
              nb_precision_name(prec), nb_last_error());
        /* per block 4 forward products (qkv, o, gate-up, down) and 8 backward, then the head's 1 + 2 */
        const long want = 2 * 12 + 3;
        const long got = p ? seen.gemm_bf16 : seen.gemm, other = p ? seen.gemm : seen.gemm_bf16;
        CHECK(got == want && other == 0, "%s: %ld products through the stage's backend (want %ld), %ld of the other kind",
              nb_precision_name(prec), got, want, other);
        CHECK(seen.tile + seen.tile_bf16 > 0 && seen.alloc > 0, "%s: attention's tiles (%ld + %ld) and scratch (%ld) too",
              nb_precision_name(prec), seen.tile, seen.tile_bf16, seen.alloc);
        CHECK(l_real == l_wrap && n_real == n_wrap && !memcmp(g_real, g_wrap, sizeof(float) * n_real),
              "%s: the same loss (%.9g, %.9g) and bitwise gradients through the wrapper", nb_precision_name(prec), l_real,
              l_wrap);
    }
    /* The optimizer's products: Muon's symmetric and plain products, SOAP's, on the stage's backend. */
    nb_tensor t = {.name = "w", .ndim = 2, .shape = {24, 40}, .offset = 0, .numel = 960, .group = NB_GROUP_MATRIX};
    float g[960], w[960], d[960];
    for (int i = 0; i < 960; i++) g[i] = (float)((i * 37) % 101) / 101.0f - 0.5f, w[i] = 0.01f * (float)(i % 13);
    const nb_optimizer_kind kinds[] = {NB_OPT_MUON, NB_OPT_SOAP};
    for (int k = 0; k < 2; k++) {
        nb_optim_params op = nb_optim_defaults(kinds[k]);
        nb_optimizer *o;
        memset(&seen, 0, sizeof seen);
        CHECK(nb_optimizer_create(&o, &op, &t, 1, 960, &counting) == 0, "%s: %s", nb_optimizer_name(kinds[k]),
              nb_last_error());
        nb_optimizer_step(o, g, w, 1e-3f, 1e-3f, d);
        nb_optimizer_step(o, g, w, 1e-3f, 1e-3f, d);
        CHECK(seen.gemm + seen.syrk > 0, "%s: its products (%ld gemm, %ld syrk) go through the backend it was made with",
              nb_optimizer_name(kinds[k]), seen.gemm, seen.syrk);
        nb_optimizer_free(o);
    }
    /* A backend whose products fail: the stage's calls and the decoder report it, nothing exits. */
    float loss, *grads = g_wrap;
    size_t n;
    memset(&seen, 0, sizeof seen);
    seen.fail = 1;
    CHECK(step(&counting, NB_PRECISION_FP32, &loss, grads, &n) == -1 &&
              strstr(nb_last_error(), "stage 0, forward: the test backend refused a product"),
          "a failed product fails the stage's forward: %s", nb_last_error());
    const nb_config cfg = small_config(1, 8);
    nb_model m;
    CHECK(nb_model_create(&m, &cfg, 1, NULL, &counting) == 0, "create");
    nb_kv_cache *kv = nb_kv_cache_create(&m, 4);
    float logits[64];
    CHECK(kv && nb_decode_step(&m, kv, 3, logits) == -1 && strstr(nb_last_error(), "refused"),
          "a failed product fails the decode step: %s", nb_last_error());
    nb_kv_cache_free(kv);
    nb_model_free(&m);
    seen.fail = 0;
}

int main(void) {
    check_open();
    check_recorded_failures();
    check_seam();
    return check_summary();
}
