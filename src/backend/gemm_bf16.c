/* The CPU backend's products with bf16 operands, float32 accumulation (docs/rules.md, section 5).
 * Where the backend says bf16_onednn (by default where oneDNN reports bf16 instructions: AVX512-BF16,
 * AMX), a oneDNN matmul primitive runs each: one primitive per shape (transposes, sizes, strides, alpha,
 * beta) and thread, created on first use (dnnl_matmul.c). Elsewhere oneDNN 2.6 emulates bf16 at about a
 * third of its sgemm's speed (measured on an Ice Lake Xeon, BENCHMARKS.md), so the operands are widened
 * to float32 (exactly: a bf16 is the high half of a float) and the fp32 products run them; both
 * accumulate in float32 and are deterministic. A backend's ":onednn" or ":widen" forces one of the two
 * (tests run both on any machine). */
#include <oneapi/dnnl/dnnl.h>
#include <omp.h>
#include <pthread.h>
#include <stdlib.h>
#include "backend/cpu.h"
#include "backend/dnnl_matmul.h"
#include "util/error.h"
#include "util/thread_buffer.h"

int nb_bf16_native(void) {
    unsigned isa = (unsigned)dnnl_get_effective_cpu_isa();
    return (isa & (unsigned)dnnl_cpu_isa_avx512_core_bf16) == (unsigned)dnnl_cpu_isa_avx512_core_bf16;
}

/* oneDNN's ISA holds every feature of avx512_core (its ISA values are masks of features). */
static int isa_has_avx512_core(void) {
    const unsigned isa = (unsigned)dnnl_get_effective_cpu_isa();
    return (isa & (unsigned)dnnl_cpu_isa_avx512_core) == (unsigned)dnnl_cpu_isa_avx512_core;
}

int nb_bf16_onednn_available(void) { return isa_has_avx512_core(); }
int nb_onednn_threads_split_c(void) { return isa_has_avx512_core(); }

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

/* The calling thread's buffer for widened operands, kept between calls (freed when the thread ends). */
static nb_thread_buffer wide_buffer;

/* Copies a stored rows x cols block (row stride ld) of bf16 values into floats, packed. */
static void widen(float *dst, const nb_bf16 *src, int rows, int cols, int ld) {
#pragma omp parallel for schedule(static) if ((size_t)rows * cols > 65536)
    for (int r = 0; r < rows; r++)
        for (int j = 0; j < cols; j++) dst[(size_t)r * cols + j] = nb_bf16_to_float(src[(size_t)r * ld + j]);
}

/* `count` floats of the thread's buffer; NULL after nb_fail. */
static float *wide_floats(size_t count) {
    float *p = nb_thread_buffer_get(&wide_buffer, count * sizeof(float));
    if (!p) nb_fail("out of memory widening a bf16 product's operands (%zu bytes)", count * sizeof(float));
    return p;
}

static int gemm_widened(const nb_cpu_config *c, const nb_matmul_shape *k, const nb_bf16 *A, const nb_bf16 *B,
                        float *C) {
    const int a_rows = k->trans_a ? k->K : k->M, a_cols = k->trans_a ? k->M : k->K;
    const int b_rows = k->trans_b ? k->N : k->K, b_cols = k->trans_b ? k->K : k->N;
    float *wa = wide_floats((size_t)a_rows * a_cols + (size_t)b_rows * b_cols);
    if (!wa) return -1;
    float *wb = wa + (size_t)a_rows * a_cols;
    widen(wa, A, a_rows, a_cols, k->lda);
    widen(wb, B, b_rows, b_cols, k->ldb);
    return nb_cpu_gemm(c, k->trans_a, k->trans_b, k->M, k->N, k->K, k->alpha, wa, a_cols, wb, b_cols, k->beta, C,
                       k->ldc);
}

int nb_cpu_gemm_bf16(const nb_cpu_config *c, int trans_a, int trans_b, int M, int N, int K, float alpha,
                     const nb_bf16 *A, int lda, const nb_bf16 *B, int ldb, float beta, float *C, int ldc) {
    if (M == 0 || N == 0) return 0;
    if (K == 0) {  /* an empty sum: C = beta * C (oneDNN rejects zero-sized operands) */
        for (int i = 0; i < M; i++)
            for (int j = 0; j < N; j++) C[(size_t)i * ldc + j] = beta == 0.0f ? 0.0f : beta * C[(size_t)i * ldc + j];
        return 0;
    }
    const nb_matmul_shape key = {trans_a, trans_b, M, N, K, lda, ldb, ldc, alpha, beta, 1};
    const double start = nb_cpu_time_begin();
    const int rc = c->bf16_onednn ? nb_matmul_run(&key, A, B, C) : gemm_widened(c, &key, A, B, C);
    nb_cpu_time_end(start);
    return rc;
}

int nb_cpu_syrk_bf16(const nb_cpu_config *c, int trans, int N, int K, float alpha, const nb_bf16 *A, int lda,
                     float beta, float *C, int ldc) {
    if (N == 0) return 0;
    if (K == 0) return nb_cpu_syrk(c, trans, N, 0, alpha, NULL, 1, beta, C, ldc);  /* scales C, reads no A */
    const double start = nb_cpu_time_begin();
    int rc = 0;
    if (c->bf16_onednn) {  /* row panels of the upper triangle, as nb_cpu_syrk (gemm.c); the mirror counted too */
        for (int i = 0; i < N && !rc; i += NB_SYRK_PANEL) {
            const int rows = N - i < NB_SYRK_PANEL ? N - i : NB_SYRK_PANEL;
            const nb_bf16 *Ai = trans ? A + i : A + (size_t)i * lda;
            rc = nb_cpu_gemm_bf16(c, trans, !trans, rows, N - i, K, alpha, Ai, lda, Ai, lda, beta,
                                  C + (size_t)i * ldc + i, ldc);
        }
        nb_cpu_mirror_upper(C, N, ldc);
    } else {
        const int rows = trans ? K : N, cols = trans ? N : K;
        float *wa = wide_floats((size_t)rows * cols);
        if (!wa) rc = -1;
        else {
            widen(wa, A, rows, cols, lda);
            rc = nb_cpu_syrk(c, trans, N, K, alpha, wa, cols, beta, C, ldc);
        }
    }
    nb_cpu_time_end(start);
    return rc;
}
