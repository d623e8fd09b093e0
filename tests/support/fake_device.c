/* The fake device (fake_device.h). */
#include "fake_device.h"
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include "layers/ops.h"
#include "delay/ops.h"
#include "optim/rules.h"
#include "util/error.h"

enum { POOL = 1 << 30 };  /* reserved, not committed: pages are made as they are first written */

typedef struct {
    const nb_backend *inner;
    char *real, *fake;  /* the host's mirror and the inaccessible range, POOL bytes each */
    size_t used;
    long misuses;
} fake_state;

static fake_state *state_of(const nb_backend *b) { return b->impl; }
static const nb_backend *inner_of(const nb_backend *b) { return state_of(b)->inner; }

/* The mirror of a device address (NULL stays NULL). */
static void *R(const nb_backend *b, const void *p) {
    fake_state *s = state_of(b);
    const char *c = p;
    if (!p) return NULL;
    if (c >= s->fake && c < s->fake + POOL) return s->real + (c - s->fake);
    if (s->misuses++ == 0) fprintf(stderr, "fake device: host address %p given as the device's memory\n", p);
    return (void *)p;
}
#define RF(p) ((float *)R(be, (p)))
#define RB(p) ((nb_bf16 *)R(be, (p)))
#define RI(p) ((int *)R(be, (p)))

static void *f_alloc(const nb_backend *b, size_t bytes, const char *what) {
    fake_state *s = state_of(b);
    const size_t size = (bytes + 63) / 64 * 64;
    if (size > POOL - s->used) {
        nb_fail("fake device: out of memory for %s (%zu bytes)", what, bytes);
        return NULL;
    }
    void *p = s->fake + s->used;
    memset(s->real + s->used, 0, size);  /* zeroed, as every backend's memory is */
    s->used += size;
    return p;
}
static void f_free(const nb_backend *b, void *p) { (void)R(b, p); }  /* a bump allocator: nothing to give back */
static void f_to_host(const nb_backend *b, void *host, const void *mem, size_t n) { memcpy(host, R(b, mem), n); }
static void f_from_host(const nb_backend *b, void *mem, const void *host, size_t n) { memcpy(R(b, mem), host, n); }
static void f_copy(const nb_backend *b, void *dst, const void *src, size_t n) { memmove(R(b, dst), R(b, src), n); }
static void f_zero(const nb_backend *b, void *mem, size_t n) { memset(R(b, mem), 0, n); }
static int f_check(const nb_backend *b) { return nb_backend_check(inner_of(b)); }
static void f_close(nb_backend *b) { fake_device_close(b); }

static void f_gemm(const nb_backend *be, int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda,
                   const float *B, int ldb, float beta, float *C, int ldc) {
    nb_gemm(inner_of(be), ta, tb, M, N, K, alpha, RF(A), lda, RF(B), ldb, beta, RF(C), ldc);
}
static void f_gemm_bf16(const nb_backend *be, int ta, int tb, int M, int N, int K, float alpha, const nb_bf16 *A,
                        int lda, const nb_bf16 *B, int ldb, float beta, float *C, int ldc) {
    nb_gemm_bf16(inner_of(be), ta, tb, M, N, K, alpha, RB(A), lda, RB(B), ldb, beta, RF(C), ldc);
}
static void f_syrk(const nb_backend *be, int trans, int N, int K, float alpha, const float *A, int lda, float beta,
                   float *C, int ldc) {
    nb_syrk(inner_of(be), trans, N, K, alpha, RF(A), lda, beta, RF(C), ldc);
}
static void f_syrk_bf16(const nb_backend *be, int trans, int N, int K, float alpha, const nb_bf16 *A, int lda,
                        float beta, float *C, int ldc) {
    nb_syrk_bf16(inner_of(be), trans, N, K, alpha, RB(A), lda, beta, RF(C), ldc);
}
/* Attention runs on the inner backend (the layer table below), so its tile products never come here; they
 * would be the device's own business. */
static void f_tile(const nb_backend *be, int M, int N, int K, float alpha, const float *A, ptrdiff_t ars,
                   ptrdiff_t aks, const float *B, ptrdiff_t ldb, int acc, float *C, ptrdiff_t ldc) {
    nb_tile_gemm(inner_of(be), M, N, K, alpha, RF(A), ars, aks, RF(B), ldb, acc, RF(C), ldc);
}
static void f_tile_bf16(const nb_backend *be, int M, int N, int K, float alpha, const nb_bf16 *A, ptrdiff_t lda,
                        const nb_bf16 *B, ptrdiff_t ldb, int acc, float *C, ptrdiff_t ldc) {
    nb_tile_gemm_bf16(inner_of(be), M, N, K, alpha, RB(A), lda, RB(B), ldb, acc, RF(C), ldc);
}

static const nb_backend_ops fake_ops = {
    .gemm = f_gemm, .gemm_bf16 = f_gemm_bf16, .syrk = f_syrk, .syrk_bf16 = f_syrk_bf16, .tile_gemm = f_tile,
    .tile_gemm_bf16 = f_tile_bf16, .alloc = f_alloc, .free = f_free, .to_host = f_to_host,
    .from_host = f_from_host, .check = f_check, .close = f_close, .copy = f_copy, .zero = f_zero,
};

/* ---- The layers: the CPU's, on the mirrors ---- */
#define CPU nb_layer_ops_cpu()

static void l_embedding_forward(const nb_backend *be, float *out, const int *tokens, const float *table, int N, int d) {
    CPU->embedding_forward(inner_of(be), RF(out), RI(tokens), RF(table), N, d);
}
static void l_embedding_backward(const nb_backend *be, float *dtable, const float *dout, const int *tokens, int N,
                                 int d) {
    CPU->embedding_backward(inner_of(be), RF(dtable), RF(dout), RI(tokens), N, d);
}
static void l_rmsnorm_forward(const nb_backend *be, float *out, float *rstd, const float *x, const float *gain, int N,
                              int d, float eps) {
    CPU->rmsnorm_forward(inner_of(be), RF(out), RF(rstd), RF(x), RF(gain), N, d, eps);
}
static void l_rmsnorm_backward(const nb_backend *be, float *dx, float *dgain, const float *dout, const float *x,
                               const float *gain, const float *rstd, int N, int d) {
    CPU->rmsnorm_backward(inner_of(be), RF(dx), RF(dgain), RF(dout), RF(x), RF(gain), RF(rstd), N, d);
}
static void l_rope_forward(const nb_backend *be, float *x, int B, int T, int stride, int n_rot, int hd,
                           const float *cos_t, const float *sin_t) {
    CPU->rope_forward(inner_of(be), RF(x), B, T, stride, n_rot, hd, RF(cos_t), RF(sin_t));
}
static void l_rope_backward(const nb_backend *be, float *dx, int B, int T, int stride, int n_rot, int hd,
                            const float *cos_t, const float *sin_t) {
    CPU->rope_backward(inner_of(be), RF(dx), B, T, stride, n_rot, hd, RF(cos_t), RF(sin_t));
}
static int l_attention_forward(const nb_backend *be, float *out, nb_bf16 *out16, float *lse, const float *qkv, int B,
                               int T, int H, int Hkv, int hd, int bf16) {
    return CPU->attention_forward(inner_of(be), RF(out), RB(out16), RF(lse), RF(qkv), B, T, H, Hkv, hd, bf16);
}
static int l_attention_backward(const nb_backend *be, float *dqkv, const float *dout, const float *out,
                                const float *lse, const float *qkv, int B, int T, int H, int Hkv, int hd, int bf16) {
    return CPU->attention_backward(inner_of(be), RF(dqkv), RF(dout), RF(out), RF(lse), RF(qkv), B, T, H, Hkv, hd,
                                   bf16);
}
static void l_swiglu_forward(const nb_backend *be, float *h, const float *gu, int N, int F) {
    CPU->swiglu_forward(inner_of(be), RF(h), RF(gu), N, F);
}
static void l_swiglu_backward(const nb_backend *be, float *dgu, const float *dh, const float *gu, int N, int F) {
    CPU->swiglu_backward(inner_of(be), RF(dgu), RF(dh), RF(gu), N, F);
}
static double l_cross_entropy_forward(const nb_backend *be, float *lse, const float *logits, const int *targets, int N,
                                      int V) {
    return CPU->cross_entropy_forward(inner_of(be), RF(lse), RF(logits), RI(targets), N, V);
}
static void l_cross_entropy_backward(const nb_backend *be, float *logits, const float *lse, const int *targets, int N,
                                     int V, float scale, int n_mean) {
    CPU->cross_entropy_backward(inner_of(be), RF(logits), RF(lse), RI(targets), N, V, scale, n_mean);
}

static const nb_layer_ops fake_layers = {
    .embedding_forward = l_embedding_forward,
    .embedding_backward = l_embedding_backward,
    .rmsnorm_forward = l_rmsnorm_forward,
    .rmsnorm_backward = l_rmsnorm_backward,
    .rope_forward = l_rope_forward,
    .rope_backward = l_rope_backward,
    .attention_forward = l_attention_forward,
    .attention_backward = l_attention_backward,
    .swiglu_forward = l_swiglu_forward,
    .swiglu_backward = l_swiglu_backward,
    .cross_entropy_forward = l_cross_entropy_forward,
    .cross_entropy_backward = l_cross_entropy_backward,
};

/* ---- The optimizer's rules: the CPU's code, on the mirrors ---- */
static int r_step(const nb_backend *be, const nb_optim_rule *rule, tensor_state *ts, const rule_ctx *c, const float *g,
                  const float *w, float *d) {
    tensor_state here = *ts;
    for (int b = 0; b < here.n_buf; b++) here.buf[b] = RF(ts->buf[b]);
    rule_ctx ctx = *c;
    ctx.be = inner_of(be);
    const int rc = rule->step(&here, &ctx, RF(g), RF(w), RF(d));
    ts->count = here.count;
    return rc;
}

static const nb_rule_ops fake_rules = {.step = r_step};

/* ---- The delay rules' update: the CPU's passes, on the mirrors ---- */
static void d_apply(const nb_backend *be, nb_apply_kind kind, float *keep, float *current, float *d, float *prev,
                    float alpha, int first, size_t n) {
    nb_delay_apply_host(kind, RF(keep), RF(current), RF(d), RF(prev), alpha, first, n);
}

static const nb_delay_ops fake_delay = {.apply = d_apply};

nb_backend *fake_device_open(const nb_backend *inner) {
    fake_state *s = calloc(1, sizeof *s);
    nb_backend *b = calloc(1, sizeof *b);
    if (!s || !b) goto fail;
    s->inner = inner;
    s->real = mmap(NULL, POOL, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    s->fake = mmap(NULL, POOL, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (s->real == MAP_FAILED || s->fake == MAP_FAILED) goto fail;
    *b = *inner;
    b->ops = &fake_ops;
    snprintf(b->name, sizeof b->name, "fake-device");
    b->label = "a fake device over the CPU (tests)";
    b->device_memory = 1;
    b->layers = &fake_layers;
    b->rules = &fake_rules;
    b->delay = &fake_delay;
    b->impl = s;
    return b;
fail:
    if (s && s->real && s->real != MAP_FAILED) munmap(s->real, POOL);
    if (s && s->fake && s->fake != MAP_FAILED) munmap(s->fake, POOL);
    free(s), free(b);
    return NULL;
}

void fake_device_close(nb_backend *b) {
    if (!b) return;
    fake_state *s = state_of(b);
    munmap(s->real, POOL), munmap(s->fake, POOL);
    free(s), free(b);
}

long fake_device_misuses(const nb_backend *b) { return state_of(b)->misuses; }
