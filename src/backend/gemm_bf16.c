/* nb_gemm_bf16: bf16 operands, float32 accumulation (docs/rules.md, section 5).
 * Where oneDNN reports bf16 instructions (AVX512-BF16, AMX), a oneDNN matmul primitive runs it: one
 * primitive per shape (transposes, sizes, strides, alpha, beta) and thread, created on first use
 * (dnnl_matmul.c). Elsewhere oneDNN 2.6 emulates bf16 at about a third of its sgemm's speed (measured on an Ice
 * Lake Xeon, BENCHMARKS.md), so the operands are widened to float32 (exactly: a bf16 is the high half
 * of a float) and nb_gemm runs them; both accumulate in float32 and are deterministic.
 * NB_BF16_GEMM=onednn|widen forces one of the two (tests run both on any machine). */
#include <oneapi/dnnl/dnnl.h>
#include <omp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "backend/dnnl_matmul.h"
#include "backend/gemm.h"
#include "util/error.h"

/* The calling thread's buffer for widened operands (the fallback), freed when the thread ends. */
typedef struct {
    float *wide;
    size_t wide_count;
} thread_cache;

static int use_onednn = -1;   /* 1: oneDNN matmul, 0: widen + nb_gemm */
static pthread_key_t cache_key;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void free_cache(void *p) {
    thread_cache *c = p;
    if (!c) return;
    free(c->wide);
    free(c);
}

static int isa_has_bf16(void) {
    unsigned isa = (unsigned)dnnl_get_effective_cpu_isa();
    return (isa & (unsigned)dnnl_cpu_isa_avx512_core_bf16) == (unsigned)dnnl_cpu_isa_avx512_core_bf16;
}

static void setup(void) {
    pthread_key_create(&cache_key, free_cache);
    const char *forced = getenv("NB_BF16_GEMM");
    if (forced && !strcmp(forced, "onednn")) use_onednn = 1;
    else if (forced && !strcmp(forced, "widen")) use_onednn = 0;
    else use_onednn = isa_has_bf16();  /* unknown names are refused by the CLI (src/cli/main.c) */
}

int nb_bf16_native(void) {
    pthread_once(&once, setup);
    return isa_has_bf16();
}

const char *nb_cpu_isa_name(void) {
    switch (dnnl_get_effective_cpu_isa()) {
    case dnnl_cpu_isa_sse41: return "sse41";
    case dnnl_cpu_isa_avx: return "avx";
    case dnnl_cpu_isa_avx2: return "avx2";
    case dnnl_cpu_isa_avx2_vnni: return "avx2_vnni";
    case dnnl_cpu_isa_avx512_core: return "avx512_core";
    case dnnl_cpu_isa_avx512_core_vnni: return "avx512_core_vnni";
    case dnnl_cpu_isa_avx512_core_bf16: return "avx512_core_bf16";
    case dnnl_cpu_isa_avx512_core_amx: return "avx512_core_amx";
    default: return "other";
    }
}

static thread_cache *my_cache(void) {
    thread_cache *c = pthread_getspecific(cache_key);
    if (c) return c;
    c = calloc(1, sizeof *c);
    if (!c) {
        fprintf(stderr, "nobubble: out of memory (bf16 GEMM buffers)\n");
        exit(3);
    }
    pthread_setspecific(cache_key, c);
    return c;
}

/* Copies a stored rows x cols block (row stride ld) of bf16 values into floats, packed. */
static void widen(float *dst, const nb_bf16 *src, int rows, int cols, int ld) {
#pragma omp parallel for schedule(static) if ((size_t)rows * cols > 65536)
    for (int r = 0; r < rows; r++)
        for (int j = 0; j < cols; j++) dst[(size_t)r * cols + j] = nb_bf16_to_float(src[(size_t)r * ld + j]);
}

/* The thread's buffer for widened operands, grown to `need` floats. */
static float *wide_buffer(thread_cache *c, size_t need) {
    if (need > c->wide_count) {
        free(c->wide);
        c->wide = malloc(sizeof(float) * need);
        if (!c->wide) {
            fprintf(stderr, "nobubble: out of memory widening a bf16 GEMM's operands (%zu floats)\n", need);
            exit(3);
        }
        c->wide_count = need;
    }
    return c->wide;
}

static void gemm_widened(thread_cache *c, const nb_matmul_shape *k, const nb_bf16 *A, const nb_bf16 *B, float *C) {
    const int a_rows = k->trans_a ? k->K : k->M, a_cols = k->trans_a ? k->M : k->K;
    const int b_rows = k->trans_b ? k->N : k->K, b_cols = k->trans_b ? k->K : k->N;
    float *wa = wide_buffer(c, (size_t)a_rows * a_cols + (size_t)b_rows * b_cols);
    float *wb = wa + (size_t)a_rows * a_cols;
    widen(wa, A, a_rows, a_cols, k->lda);
    widen(wb, B, b_rows, b_cols, k->ldb);
    nb_gemm(k->trans_a, k->trans_b, k->M, k->N, k->K, k->alpha, wa, a_cols, wb, b_cols, k->beta, C, k->ldc);
}

void nb_gemm_bf16(int trans_a, int trans_b, int M, int N, int K, float alpha, const nb_bf16 *A, int lda,
                  const nb_bf16 *B, int ldb, float beta, float *C, int ldc) {
    if (M == 0 || N == 0) return;
    pthread_once(&once, setup);
    if (K == 0) {  /* an empty sum: C = beta * C (oneDNN rejects zero-sized operands) */
        for (int i = 0; i < M; i++)
            for (int j = 0; j < N; j++) C[(size_t)i * ldc + j] = beta == 0.0f ? 0.0f : beta * C[(size_t)i * ldc + j];
        return;
    }
    const nb_matmul_shape key = {trans_a, trans_b, M, N, K, lda, ldb, ldc, alpha, beta, 1};
    const double start = nb_gemm_time_begin();
    if (use_onednn) nb_matmul_run(&key, A, B, C, 0);
    else gemm_widened(my_cache(), &key, A, B, C);
    nb_gemm_time_end(start);
}

void nb_syrk_bf16(int trans, int N, int K, float alpha, const nb_bf16 *A, int lda, float beta, float *C, int ldc) {
    if (N == 0) return;
    if (K == 0) {  /* an empty sum: nb_syrk scales C without reading A */
        nb_syrk(trans, N, 0, alpha, NULL, 1, beta, C, ldc);
        return;
    }
    pthread_once(&once, setup);
    if (use_onednn) {  /* row panels of the upper triangle, as nb_syrk (gemm.c); the mirror counted too */
        const double start = nb_gemm_time_begin();
        for (int i = 0; i < N; i += NB_SYRK_PANEL) {
            const int rows = N - i < NB_SYRK_PANEL ? N - i : NB_SYRK_PANEL;
            const nb_bf16 *Ai = trans ? A + i : A + (size_t)i * lda;
            nb_gemm_bf16(trans, !trans, rows, N - i, K, alpha, Ai, lda, Ai, lda, beta, C + (size_t)i * ldc + i, ldc);
        }
        nb_mirror_upper(C, N, ldc);
        nb_gemm_time_end(start);
        return;
    }
    const double start = nb_gemm_time_begin();
    const int rows = trans ? K : N, cols = trans ? N : K;
    float *wa = wide_buffer(my_cache(), (size_t)rows * cols);
    widen(wa, A, rows, cols, lda);
    nb_syrk(trans, N, K, alpha, wa, cols, beta, C, ldc);
    nb_gemm_time_end(start);
}

void nb_bf16_cast(nb_bf16 *dst, const float *src, size_t n) {
#pragma omp parallel for schedule(static) if (n > 65536)
    for (size_t i = 0; i < n; i++) dst[i] = nb_bf16_from_float(src[i]);
}

void nb_bf16_round(float *x, size_t n) {
#pragma omp parallel for schedule(static) if (n > 65536)
    for (size_t i = 0; i < n; i++) x[i] = nb_bf16_rounded(x[i]);
}

void nb_bf16_widen(float *dst, const nb_bf16 *src, size_t n) {
#pragma omp parallel for schedule(static) if (n > 65536)
    for (size_t i = 0; i < n; i++) dst[i] = nb_bf16_to_float(src[i]);
}
