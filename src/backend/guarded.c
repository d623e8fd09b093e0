/* The guarded device (guarded.h). */
#define _GNU_SOURCE
#include "backend/guarded.h"
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include "backend/failure.h"
#include "util/error.h"

typedef struct {
    const nb_backend *inner;
    nb_backend *owned;  /* inner, where the guarded backend opened it */
    char *real, *fake;  /* the host's mirror and the inaccessible range, pool bytes each */
    size_t pool, used;
    long misuses;
    nb_failure failure;
} guarded_state;

static guarded_state *state_of(const nb_backend *b) { return b->impl; }
const nb_backend *nb_guarded_inner(const nb_backend *b) { return state_of(b)->inner; }
long nb_guarded_misuses(const nb_backend *b) { return state_of(b)->misuses; }

void *nb_guarded_host(const nb_backend *b, const void *p) {
    guarded_state *s = state_of(b);
    const char *c = p;
    if (!p) return NULL;
    if (c >= s->fake && c < s->fake + s->pool) return s->real + (c - s->fake);
    if (__atomic_fetch_add(&s->misuses, 1, __ATOMIC_RELAXED) == 0) {
        nb_fail("guarded device: host address %p given where the device's memory is expected", p);
        nb_failure_keep(&s->failure);
    }
    return (void *)p;
}
#define RF(p) ((float *)nb_guarded_host(b, (p)))
#define RB(p) ((nb_bf16 *)nb_guarded_host(b, (p)))

/* A bump allocator under a lock: a run allocates when it sets up, and everything goes when it closes. */
static pthread_mutex_t alloc_lock = PTHREAD_MUTEX_INITIALIZER;
static void *g_alloc(const nb_backend *b, size_t bytes, const char *what) {
    guarded_state *s = state_of(b);
    const size_t size = (bytes + 63) / 64 * 64;
    pthread_mutex_lock(&alloc_lock);
    void *p = size <= s->pool - s->used ? s->fake + s->used : NULL;
    if (p) s->used += size;
    pthread_mutex_unlock(&alloc_lock);
    if (!p) {
        nb_fail("guarded device: out of memory for %s (%zu bytes; %zu of %zu used)", what, bytes, s->used, s->pool);
        return NULL;
    }
    memset(nb_guarded_host(b, p), 0, size);  /* zeroed, as every backend's memory is */
    return p;
}
static void g_free(const nb_backend *b, void *p) { (void)nb_guarded_host(b, p); }
static void g_to_host(const nb_backend *b, void *host, const void *mem, size_t n) {
    if (n) memcpy(host, nb_guarded_host(b, mem), n);
}
static void g_from_host(const nb_backend *b, void *mem, const void *host, size_t n) {
    if (n) memcpy(nb_guarded_host(b, mem), host, n);
}
static void g_copy(const nb_backend *b, void *dst, const void *src, size_t n) {
    if (n) memmove(nb_guarded_host(b, dst), nb_guarded_host(b, src), n);
}
static void g_zero(const nb_backend *b, void *mem, size_t n) {
    if (n) memset(nb_guarded_host(b, mem), 0, n);
}
static void g_add(const nb_backend *b, float *dst, const float *src, size_t n) {
    nb_backend_add(nb_guarded_inner(b), RF(dst), RF(src), n);
}
static void g_scale(const nb_backend *b, float *x, size_t n, float scale) {
    nb_backend_scale(nb_guarded_inner(b), RF(x), n, scale);
}
static double g_sum_squares(const nb_backend *b, const float *x, const float *y, size_t n) {
    return nb_backend_sum_squares(nb_guarded_inner(b), RF(x), RF(y), n);
}
static int g_check(const nb_backend *b) {
    const int own = nb_failure_take(&state_of(b)->failure);
    const nb_backend *inner = nb_guarded_inner(b);
    return inner->ops->check(inner) || own ? -1 : 0;
}

static void g_gemm(const nb_backend *b, int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda,
                   const float *B, int ldb, float beta, float *C, int ldc) {
    nb_gemm(nb_guarded_inner(b), ta, tb, M, N, K, alpha, RF(A), lda, RF(B), ldb, beta, RF(C), ldc);
}
static void g_gemm_bf16(const nb_backend *b, int ta, int tb, int M, int N, int K, float alpha, const nb_bf16 *A,
                        int lda, const nb_bf16 *B, int ldb, float beta, float *C, int ldc) {
    nb_gemm_bf16(nb_guarded_inner(b), ta, tb, M, N, K, alpha, RB(A), lda, RB(B), ldb, beta, RF(C), ldc);
}
static void g_syrk(const nb_backend *b, int trans, int N, int K, float alpha, const float *A, int lda, float beta,
                   float *C, int ldc) {
    nb_syrk(nb_guarded_inner(b), trans, N, K, alpha, RF(A), lda, beta, RF(C), ldc);
}
static void g_syrk_bf16(const nb_backend *b, int trans, int N, int K, float alpha, const nb_bf16 *A, int lda,
                        float beta, float *C, int ldc) {
    nb_syrk_bf16(nb_guarded_inner(b), trans, N, K, alpha, RB(A), lda, beta, RF(C), ldc);
}
/* Attention runs in the layer table on the mirrors, whose tile products are the inner backend's: these
 * would be the device's own business and are only translated. */
static void g_tile(const nb_backend *b, int M, int N, int K, float alpha, const float *A, ptrdiff_t ars,
                   ptrdiff_t aks, const float *B, ptrdiff_t ldb, int acc, float *C, ptrdiff_t ldc) {
    nb_tile_gemm(nb_guarded_inner(b), M, N, K, alpha, RF(A), ars, aks, RF(B), ldb, acc, RF(C), ldc);
}
static void g_tile_bf16(const nb_backend *b, int M, int N, int K, float alpha, const nb_bf16 *A, ptrdiff_t lda,
                        const nb_bf16 *B, ptrdiff_t ldb, int acc, float *C, ptrdiff_t ldc) {
    nb_tile_gemm_bf16(nb_guarded_inner(b), M, N, K, alpha, RB(A), lda, RB(B), ldb, acc, RF(C), ldc);
}

static void g_close(nb_backend *b);
static const nb_backend_ops guarded_ops = {
    .gemm = g_gemm, .gemm_bf16 = g_gemm_bf16, .syrk = g_syrk, .syrk_bf16 = g_syrk_bf16, .tile_gemm = g_tile,
    .tile_gemm_bf16 = g_tile_bf16, .alloc = g_alloc, .free = g_free, .to_host = g_to_host,
    .from_host = g_from_host, .check = g_check, .close = g_close, .copy = g_copy, .zero = g_zero,
    .add = g_add, .scale = g_scale, .sum_squares = g_sum_squares,
};

int nb_guarded_is(const nb_backend *b) { return b && b->ops == &guarded_ops; }

/* As much address space as the machine has memory, reserved, not committed: pages are made as they are
 * first written. */
static size_t pool_size(void) {
    const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    const size_t total = pages > 0 && page > 0 ? (size_t)pages * (size_t)page : (size_t)1 << 32;
    return total < ((size_t)1 << 30) ? (size_t)1 << 30 : total;
}

nb_backend *nb_guarded_wrap(const nb_backend *inner, int owns) {
    guarded_state *s = calloc(1, sizeof *s);
    nb_backend *b = calloc(1, sizeof *b);
    if (!s || !b) goto fail;
    s->inner = inner;
    s->owned = owns ? (nb_backend *)inner : NULL;  /* the opener handed it over */
    s->pool = pool_size();
    s->real = mmap(NULL, s->pool, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    s->fake = mmap(NULL, s->pool, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (s->real == MAP_FAILED || s->fake == MAP_FAILED) goto fail;
    nb_failure_init(&s->failure);
    *b = *inner;
    b->ops = &guarded_ops;
    snprintf(b->name, sizeof b->name, "guarded:%.20s", inner->name);  /* the device, then who computes */
    b->label = "the CPU behind a device's boundary (--device guarded: the CPU's bits, memory the host cannot touch)";
    b->device_memory = 1;
    b->device = NB_DEVICE_GUARDED;  /* its tables: the layers', rules' and delay's *_of lookups */
    b->layers = NULL, b->rules = NULL, b->delay = NULL;
    b->impl = s;
    return b;
fail:
    nb_fail("guarded device: cannot reserve %zu bytes of address space twice", s ? s->pool : 0);
    if (s && s->real && s->real != MAP_FAILED) munmap(s->real, s->pool);
    if (s && s->fake && s->fake != MAP_FAILED) munmap(s->fake, s->pool);
    free(s), free(b);
    return NULL;
}

static void g_close(nb_backend *b) {
    guarded_state *s = state_of(b);
    munmap(s->real, s->pool), munmap(s->fake, s->pool);
    nb_failure_destroy(&s->failure);
    if (s->owned) s->owned->ops->close(s->owned);
    free(s), free(b);
}
