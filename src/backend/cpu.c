/* The CPU backends (include/nobubble/backend.h): which library runs which product, opened by name, and
 * the operation table every one of them shares. A failure inside a product is recorded here, in the
 * backend, and reported by nb_backend_check: the layers and the optimizer rules have no error path of
 * their own, as a device's queued kernels have none (a CUDA error is read at the next synchronization). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "backend/cpu.h"
#include "backend/failure.h"
#include "util/alloc.h"
#include "util/error.h"

/* Each backend names who runs A^T B (tn) and who runs the other products (fn).
 * - "hybrid": oneDNN 2.6's sgemm runs C = A^T B at about half its usual speed when A is tall and C
 *   narrow (weight gradients such as the LM head's), where OpenBLAS does not (measured on the
 *   development machine, see BENCHMARKS.md), so those go to OpenBLAS.
 * - "tiles" is hybrid whose A^T B run nobubble's own packed register tiles (gemm_tn.c) instead of
 *   OpenBLAS's fixed-order tiles.
 * - "onednn" and "openblas": one library each, the references the two above are measured against.
 * A fifth, "matmul" (hybrid with its large A B and A B^T through oneDNN's matmul primitive), measured
 * no faster than hybrid on a whole step and went (BENCHMARKS.md, "oneDNN's matmul primitive in fp32"). */
typedef struct {
    const char *name, *label;
    nb_cpu_gemm_fn fn, tn;
    int fn_is_onednn, tn_own_order;
} variant;

static const variant variants[] = {
    {"tiles", "oneDNN sgemm, own register tiles for A^T B", nb_cpu_gemm_onednn, nb_cpu_gemm_tn_tiles, 1, 1},
    {"hybrid", "oneDNN sgemm, OpenBLAS for A^T B", nb_cpu_gemm_onednn, nb_cpu_gemm_openblas, 1, 0},
    {"onednn", "oneDNN sgemm", nb_cpu_gemm_onednn, nb_cpu_gemm_onednn, 1, 0},
    {"openblas", "OpenBLAS sgemm", nb_cpu_gemm_openblas, nb_cpu_gemm_openblas, 0, 0},
};
enum { N_VARIANTS = sizeof variants / sizeof variants[0] };

/* The default: tiles where the build targets AVX-512 (BENCHMARKS.md, "Weight gradients on register
 * tiles": its A^T B 1.02-1.24x hybrid's per product, the step's GEMM time 6-15% less against the same
 * non-GEMM time); hybrid elsewhere, where the AVX2 tiles ran at 0.85-1.03x OpenBLAS's AVX2 kernels. */
#if defined(__AVX512F__)
static const char *const default_name = "tiles";
#else
static const char *const default_name = "hybrid";
#endif

const char *nb_cpu_default_name(void) { return default_name; }

/* A backend's state: its choice of libraries and the first failure since the last check. */
typedef struct {
    nb_cpu_config config;
    nb_failure failure;
} cpu_state;

static cpu_state *state_of(const nb_backend *b) { return b->impl; }

static void record(const nb_backend *b) { nb_failure_keep(&state_of(b)->failure); }

static void cpu_gemm(const nb_backend *b, int trans_a, int trans_b, int M, int N, int K, float alpha, const float *A,
                     int lda, const float *B, int ldb, float beta, float *C, int ldc) {
    if (nb_cpu_gemm(&state_of(b)->config, trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc)) record(b);
}

static void cpu_gemm_bf16(const nb_backend *b, int trans_a, int trans_b, int M, int N, int K, float alpha,
                          const nb_bf16 *A, int lda, const nb_bf16 *B, int ldb, float beta, float *C, int ldc) {
    if (nb_cpu_gemm_bf16(&state_of(b)->config, trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc))
        record(b);
}

static void cpu_syrk(const nb_backend *b, int trans, int N, int K, float alpha, const float *A, int lda, float beta,
                     float *C, int ldc) {
    if (nb_cpu_syrk(&state_of(b)->config, trans, N, K, alpha, A, lda, beta, C, ldc)) record(b);
}

static void cpu_syrk_bf16(const nb_backend *b, int trans, int N, int K, float alpha, const nb_bf16 *A, int lda,
                          float beta, float *C, int ldc) {
    if (nb_cpu_syrk_bf16(&state_of(b)->config, trans, N, K, alpha, A, lda, beta, C, ldc)) record(b);
}

static void cpu_tile_gemm(const nb_backend *b, int M, int N, int K, float alpha, const float *A, ptrdiff_t ars,
                          ptrdiff_t aks, const float *B, ptrdiff_t ldb, int accumulate, float *C, ptrdiff_t ldc) {
    (void)b;
    nb_cpu_tile_gemm(M, N, K, alpha, A, ars, aks, B, ldb, accumulate, C, ldc);
}

static void cpu_tile_gemm_bf16(const nb_backend *b, int M, int N, int K, float alpha, const nb_bf16 *A, ptrdiff_t lda,
                               const nb_bf16 *B, ptrdiff_t ldb, int accumulate, float *C, ptrdiff_t ldc) {
    if (nb_cpu_tile_gemm_bf16(M, N, K, alpha, A, lda, B, ldb, accumulate, C, ldc)) record(b);
}

/* Host memory, 64-byte aligned (a cache line, an AVX-512 vector), zeroed. */
void *nb_cpu_alloc(const nb_backend *b, size_t bytes, const char *what) {
    (void)b;
    return nb_alloc_aligned(bytes, what);
}

void nb_cpu_free(const nb_backend *b, void *p) {
    (void)b;
    free(p);
}

void nb_cpu_copy(const nb_backend *b, void *dst, const void *src, size_t bytes) {
    (void)b;
    if (bytes) memmove(dst, src, bytes);
}

void nb_cpu_zero(const nb_backend *b, void *mem, size_t bytes) {
    (void)b;
    if (bytes) memset(mem, 0, bytes);
}

void nb_cpu_add(const nb_backend *b, float *dst, const float *src, size_t n) {
    (void)b;
    for (size_t i = 0; i < n; i++) dst[i] += src[i];
}

/* Threads only where the buffer pays for them; each value is one multiplication either way. */
void nb_cpu_scale(const nb_backend *b, float *x, size_t n, float scale) {
    (void)b;
#pragma omp parallel for simd schedule(static) if (n > 32768)
    for (size_t i = 0; i < n; i++) x[i] *= scale;
}

/* In double with 8 independent partial sums combined in a fixed order: the compiler vectorizes it
 * without reassociating anything, so the result is the same on every run and thread count. */
double nb_cpu_sum_squares(const nb_backend *b, const float *x, const float *y, size_t n) {
    (void)b;
    double lane[8] = {0};
    size_t k = 0;
    if (y) {
        for (; k + 8 <= n; k += 8)
            for (int j = 0; j < 8; j++) lane[j] += (double)(x[k + j] - y[k + j]) * (x[k + j] - y[k + j]);
        for (; k < n; k++) lane[k % 8] += (double)(x[k] - y[k]) * (x[k] - y[k]);
    } else {
        for (; k + 8 <= n; k += 8)
            for (int j = 0; j < 8; j++) lane[j] += (double)x[k + j] * x[k + j];
        for (; k < n; k++) lane[k % 8] += (double)x[k] * x[k];
    }
    return ((lane[0] + lane[1]) + (lane[2] + lane[3])) + ((lane[4] + lane[5]) + (lane[6] + lane[7]));
}

/* Nothing is queued on the CPU: every product has finished when it returns. */
static int cpu_check(const nb_backend *b) { return nb_failure_take(&state_of(b)->failure); }

static void cpu_close(nb_backend *b) {
    cpu_state *s = state_of(b);
    nb_failure_destroy(&s->failure);
    free(s);
    free(b);
}

static const nb_backend_ops cpu_ops = {
    .gemm = cpu_gemm,
    .gemm_bf16 = cpu_gemm_bf16,
    .syrk = cpu_syrk,
    .syrk_bf16 = cpu_syrk_bf16,
    .tile_gemm = cpu_tile_gemm,
    .tile_gemm_bf16 = cpu_tile_gemm_bf16,
    .alloc = nb_cpu_alloc,
    .free = nb_cpu_free,
    .to_host = nb_cpu_copy,
    .from_host = nb_cpu_copy,
    .check = cpu_check,
    .close = cpu_close,
    .copy = nb_cpu_copy,
    .zero = nb_cpu_zero,
    .add = nb_cpu_add,
    .scale = nb_cpu_scale,
    .sum_squares = nb_cpu_sum_squares,
};

/* spec = NAME or NAME:BF16 into the variant and the bf16 path (-1: the CPU's choice). */
static int parse_spec(const char *spec, const variant **v, int *bf16_onednn) {
    const char *colon = strchr(spec, ':');
    const size_t len = colon ? (size_t)(colon - spec) : strlen(spec);
    *v = NULL;
    for (int i = 0; i < N_VARIANTS; i++)
        if (strlen(variants[i].name) == len && !strncmp(spec, variants[i].name, len)) *v = &variants[i];
    *bf16_onednn = -1;
    if (colon && !strcmp(colon + 1, "onednn")) *bf16_onednn = 1;
    else if (colon && !strcmp(colon + 1, "widen")) *bf16_onednn = 0;
    else if (colon) *v = NULL;
    return *v ? 0 : nb_fail("backend '%s': not a CPU backend", spec);
}

int nb_cpu_known(const char *spec) {
    const variant *v;
    int bf16_onednn;
    return parse_spec(spec, &v, &bf16_onednn) == 0;
}

int nb_cpu_open(const char *spec, nb_backend **out) {
    const variant *v;
    int bf16_onednn;
    if (parse_spec(spec, &v, &bf16_onednn)) return -1;
    if (bf16_onednn == 1 && !nb_bf16_onednn_available())
        return nb_fail("backend '%s': oneDNN has no bf16 matmul on this CPU (its ISA is %s; oneDNN 2.6 needs AVX-512): "
                       "use '%.*s' or '%.*s:widen'", spec, nb_cpu_isa_name(), (int)strcspn(spec, ":"), spec,
                       (int)strcspn(spec, ":"), spec);
    nb_backend *b = nb_calloc(1, sizeof *b, "a backend");
    cpu_state *s = b ? nb_calloc(1, sizeof *s, "a backend's state") : NULL;
    if (!s) {
        free(b);
        return -1;
    }
    /* oneDNN's own threads split a large C (never K) only on its AVX-512 kernels: on AVX2 (an AMD EPYC without
     * AVX-512, 2026-12-05) C of 4096 x 256 x 40 and 16384 x 64 x 24 came out in other bits at 3 and 8
     * threads than at 1 (tests/test_gemm_threads.c), so there every product is cut into tiles. */
    s->config = (nb_cpu_config){v->fn, v->tn, v->fn_is_onednn && nb_onednn_threads_split_c(), v->tn_own_order,
                                bf16_onednn >= 0 ? bf16_onednn : nb_bf16_native()};
    nb_failure_init(&s->failure);
    b->ops = &cpu_ops;
    snprintf(b->name, sizeof b->name, "%s", spec);
    b->label = v->label;
    b->tile_width = nb_cpu_tile_width();
    b->tile_bf16_native = nb_cpu_tile_bf16_available();
    b->bf16_native = s->config.bf16_onednn;
    b->impl = s;
    *out = b;
    return 0;
}
