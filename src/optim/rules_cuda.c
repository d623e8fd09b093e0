/* The optimizer's rules on the GPU's memory (rules.h's table for the CUDA backend's device memory mode):
 * SGD, AdamW (the auxiliary rule too), Lion, Adan and MARS as their kernels; Muon and NorMuon as kernels around
 * Newton-Schulz's cuBLAS products (one matrix after another: they share the backend's scratch)
 * (src/backend/cuda/kernels.h, checked on an H200 against these rules' CPU code), queued on the backend's
 * stream. Built only with -DNB_CUDA=ON; checked on an H100 in this form (docs/gpu.md). */
#ifdef NB_HAVE_CUDA
#include <cuda_runtime.h>
#include "backend/cuda.h"
#include "backend/cuda/kernels.h"
#include "optim/rules.h"
#include "util/error.h"

/* Muon's and NorMuon's scratch in the backend's device scratch, carved in 256-byte pieces: X and Xn (the
 * matrix each), A and B (r x r each), the sum of squares' parts and result, NorMuon's per-row values, and under
 * bf16 the operands' bf16 copies: hx of X, hs of an r x r block (as muon.c's ns_matrix). */
typedef struct {
    float *X, *Xn, *A, *B, *inv, *ratio;
    double *sq, *row_sq;
    nb_bf16 *hx, *hs;
} muon_scratch;

static size_t piece(size_t bytes) { return (bytes + 255) / 256 * 256; }

static int muon_scratch_of(const nb_backend *be, int rows, int cols, int bf16, muon_scratch *s) {
    const size_t n = (size_t)rows * cols, r = (size_t)(rows < cols ? rows : cols), h = bf16 ? sizeof(nb_bf16) : 0;
    const size_t sizes[10] = {piece(sizeof(float) * n), piece(sizeof(float) * n), piece(sizeof(float) * r * r),
                              piece(sizeof(float) * r * r), piece(sizeof(float) * rows), piece(sizeof(float)),
                              piece(sizeof(double) * (NBK_SQ_PARTS + 1)), piece(sizeof(double) * rows),
                              piece(h * n), piece(h * r * r)};
    size_t total = 0;
    for (int i = 0; i < 10; i++) total += sizes[i];
    char *p = nb_cuda_scratch_hold(be, total);  /* released by muon_like_step */
    if (!p) return -1;
    void **at[10] = {(void **)&s->X, (void **)&s->Xn, (void **)&s->A, (void **)&s->B, (void **)&s->inv,
                     (void **)&s->ratio, (void **)&s->sq, (void **)&s->row_sq, (void **)&s->hx, (void **)&s->hs};
    for (int i = 0; i < 10; i++) *at[i] = p, p += sizes[i];
    if (!bf16) s->hx = s->hs = NULL;
    return 0;
}

/* One Newton-Schulz step with bf16 operands, muon.c's under bf16 in its order: hx = bf16(X), A = hx hx^T (hx^T hx
 * when tall); B = b A + c bf16(A) bf16(A), its diagonal + a; Xn = bf16(B) hx (hx bf16(B) when tall); fp32
 * accumulation throughout. 0, or -1 where a kernel failed to launch. */
static int ns_step_bf16(const nb_backend *be, const muon_scratch *s, const float *X, float *Xn, int rows, int cols,
                        cudaStream_t stream) {
    const int tall = rows > cols, r = tall ? cols : rows, k = tall ? rows : cols;
    const size_t rr = (size_t)r * r;
    if (nbk_bf16_cast(s->hx, X, (size_t)rows * cols, stream)) return -1;
    nb_syrk_bf16(be, tall, r, k, 1.0f, s->hx, cols, 0.0f, s->A, r);
    nb_backend_copy(be, s->B, s->A, sizeof(float) * rr);
    if (nbk_bf16_cast(s->hs, s->A, rr, stream)) return -1;
    nb_syrk_bf16(be, 0, r, r, MUON_NS_C, s->hs, r, MUON_NS_B, s->B, r);
    if (nbk_add_diagonal(s->B, r, MUON_NS_A, stream) || nbk_bf16_cast(s->hs, s->B, rr, stream)) return -1;
    if (tall) nb_gemm_bf16(be, 0, 0, rows, cols, r, 1.0f, s->hx, cols, s->hs, r, 0.0f, Xn, cols);
    else nb_gemm_bf16(be, 0, 0, rows, cols, r, 1.0f, s->hs, r, s->hx, cols, 0.0f, Xn, cols);
    return 0;
}

/* muon_orthogonalize on the GPU: the momentum and normalization as kernels, Newton-Schulz's products through
 * the backend's cuBLAS on device pointers (the CPU's products in the CPU's order: A = X X^T (X^T X when tall),
 * B = a I + b A + c A A, X = B X (X B); under bf16 with bf16 operands, ns_step_bf16). Returns O (s->X or s->Xn). */
static const float *muon_orthogonalize_gpu(const nb_backend *be, tensor_state *ts, const rule_ctx *c, const float *g,
                                           const muon_scratch *s, cudaStream_t stream) {
    const nb_tensor *t = ts->t;
    const int rows = t->shape[0], cols = t->shape[1], tall = rows > cols, r = tall ? cols : rows, k = tall ? rows : cols;
    const size_t n = t->numel;
    if (nbk_muon_momentum(ts->buf[0], s->X, g, n, c->p->momentum, c->p->nesterov, stream) ||
        nbk_sum_squares(s->X, NULL, n, s->sq, s->sq + NBK_SQ_PARTS, stream) ||
        nbk_scale_by_inverse_norm(s->X, n, s->sq + NBK_SQ_PARTS, stream))
        return NULL;
    float *X = s->X, *Xn = s->Xn;
    for (int step = 0; step < c->p->ns_steps; step++) {
        if (c->bf16) {
            if (ns_step_bf16(be, s, X, Xn, rows, cols, stream)) return NULL;
            float *next = Xn;
            Xn = X;
            X = next;
            continue;
        }
        nb_syrk(be, tall, r, k, 1.0f, X, cols, 0.0f, s->A, r);
        nb_backend_copy(be, s->B, s->A, sizeof(float) * (size_t)r * r);
        nb_syrk(be, 0, r, r, MUON_NS_C, s->A, r, MUON_NS_B, s->B, r);
        if (nbk_add_diagonal(s->B, r, MUON_NS_A, stream)) return NULL;
        if (tall) nb_gemm(be, 0, 0, rows, cols, r, 1.0f, X, cols, s->B, r, 0.0f, Xn, cols);
        else nb_gemm(be, 0, 0, rows, cols, r, 1.0f, s->B, r, X, cols, 0.0f, Xn, cols);
        float *next = Xn;
        Xn = X;
        X = next;
    }
    return X;
}

/* Muon (rule == &muon_rule) or NorMuon's step on the GPU's memory. */
static int muon_like_step(const nb_backend *be, const nb_optim_rule *rule, tensor_state *ts, const rule_ctx *c,
                          const float *g, const float *w, float *d, cudaStream_t stream) {
    const nb_tensor *t = ts->t;
    muon_scratch s;
    if (muon_scratch_of(be, t->shape[0], t->shape[1], c->bf16, &s)) return -1;
    const float *O = muon_orthogonalize_gpu(be, ts, c, g, &s, stream);
    const float scale = muon_shape_scale(t, c->lr), lrwd = c->lr * decay_of(t, c->p);
    const int rc = !O ? -1
                   : rule == &muon_rule
                       ? nbk_muon_step(d, O, w, t->numel, scale, lrwd, stream)
                       : nbk_normuon_step(d, O, ts->buf[1], w, t->shape[0], t->shape[1], c->p->beta2, scale, lrwd,
                                          s.row_sq, s.inv, s.ratio, stream);
    nb_cuda_scratch_release(be);  /* every use of the scratch is queued */
    return rc;
}

static int cuda_rule_step(const nb_backend *be, const nb_optim_rule *rule, tensor_state *ts, const rule_ctx *c,
                          const float *g, const float *w, float *d) {
    const nbk_optim_step a = {.lr = c->lr, .beta1 = c->p->beta1, .beta2 = c->p->beta2, .beta3 = c->p->beta3,
                              .eps = c->p->eps, .weight_decay = decay_of(ts->t, c->p), .gamma = c->p->gamma,
                              .count = ts->count, .momentum = c->p->momentum, .nesterov = c->p->nesterov};
    const cudaStream_t stream = (cudaStream_t)nb_cuda_stream(be);
    const size_t n = ts->t->numel;
    int rc;
    if (rule == &sgd_rule) {
        rc = nbk_sgd_step(d, ts->buf[0], g, w, n, &a, stream);
    } else if (rule == &adamw_rule) {
        rc = nbk_adamw_step(d, ts->buf[0], ts->buf[1], g, w, n, &a, stream);
    } else if (rule == &lion_rule) {
        rc = nbk_lion_step(d, ts->buf[0], g, w, n, &a, stream);
    } else if (rule == &adan_rule) {
        rc = nbk_adan_step(d, ts->buf[0], ts->buf[1], ts->buf[2], ts->buf[3], g, w, n, &a, stream);
    } else if (rule == &mars_rule) {
        double *scratch = nb_cuda_scratch_hold(be, sizeof(double) * nbk_mars_scratch_doubles());
        rc = scratch ? nbk_mars_step(d, ts->buf[0], ts->buf[1], ts->buf[2], g, w, n, &a, scratch, stream) : -1;
        if (scratch) nb_cuda_scratch_release(be);
    } else if (rule == &muon_rule || rule == &normuon_rule) {
        rc = muon_like_step(be, rule, ts, c, g, w, d, stream);
    } else {
        return nb_fail("this rule has no kernel on the GPU's memory yet (SGD, AdamW, Lion, Adan, MARS, Muon and NorMuon have)");
    }
    if (rc) return -1;
    ts->count++;
    return 0;
}

static const nb_rule_ops cuda_rules = {.step = cuda_rule_step};

const nb_rule_ops *nb_rule_ops_cuda(void) { return &cuda_rules; }
#else
typedef int nb_no_cuda_rules; /* ISO C wants a translation unit to declare something */
#endif
