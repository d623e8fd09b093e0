/* A stage: a contiguous range of blocks, plus the embedding on the first stage and the final
 * norm, head and loss on the last. This file lays out a stage's parameters and runs forward and
 * backward by calling the layers in order; its activation slots and scratch are model/acts.c's. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "layers/layers.h"
#include "layers/ops.h"
#include "model/acts.h"
#include "model/stage.h"
#include "util/alloc.h"
#include "util/error.h"

/* The nine tensors of a block, in memory order. q, k and v are adjacent, and so are gate and
 * up, so that each group is one (out, in) matrix and one GEMM. A MoE block has the first six, then
 * the router (B_ROUTER), each expert's gate (w1) and up (w3) adjacent, expert after expert (so that
 * expert e's gate|up is one 2F x d matrix and the E of them one array), then the E downs (w2). */
enum { B_LN1, B_Q, B_K, B_V, B_O, B_LN2, B_GATE, B_UP, B_DOWN, TENSORS_PER_BLOCK };
enum { B_ROUTER = B_GATE };

/* The tensors of block l of the whole model. */
static int block_tensors(const nb_config *c, int l) {
    return nb_config_block_is_moe(c, l) ? B_ROUTER + 1 + 3 * c->n_experts : TENSORS_PER_BLOCK;
}

/* The index in s->tensors of the stage's block l's first tensor. */
static int block_first_tensor(const nb_stage *s, int l) {
    int i = s->has_embed ? 1 : 0;
    for (int b = 0; b < l; b++) i += block_tensors(&s->cfg, s->first_block + b);
    return i;
}

static void add_tensor(nb_stage *s, const char *name, int rows, int cols, nb_group group, int tied_copy) {
    nb_tensor *t = &s->tensors[s->n_tensors++];
    snprintf(t->name, sizeof t->name, "%s", name);
    t->ndim = cols ? 2 : 1;
    t->shape[0] = rows;
    t->shape[1] = cols;
    t->numel = (size_t)rows * (size_t)(cols ? cols : 1);
    t->offset = s->n_params;
    t->group = group;
    t->tied_copy = tied_copy;
    s->n_params += t->numel;
}

/* A MoE block's tensors after its second norm, with Mixtral's names (block_sparse_moe: gate is the
 * router; expert e's w1 gate, w3 up, w2 down). Each is a matrix of its own: Muon orthogonalizes each. */
static void layout_moe_tensors(nb_stage *s, int L) {
    const int E = s->cfg.n_experts, F = s->cfg.d_ffn, d = s->cfg.d_model;
    char name[64];
    snprintf(name, sizeof name, "model.layers.%d.block_sparse_moe.gate.weight", L);
    add_tensor(s, name, E, d, NB_GROUP_MATRIX, 0);
    for (int e = 0; e < E; e++)
        for (int w = 1; w <= 3; w += 2) {  /* w1 (gate), then w3 (up) */
            snprintf(name, sizeof name, "model.layers.%d.block_sparse_moe.experts.%d.w%d.weight", L, e, w);
            add_tensor(s, name, F, d, NB_GROUP_MATRIX, 0);
        }
    for (int e = 0; e < E; e++) {
        snprintf(name, sizeof name, "model.layers.%d.block_sparse_moe.experts.%d.w2.weight", L, e);
        add_tensor(s, name, d, F, NB_GROUP_MATRIX, 0);
    }
}

static void layout_tensors(nb_stage *s) {
    dims m = stage_dims(&s->cfg);
    char name[64];
    if (s->has_embed) add_tensor(s, "model.embed_tokens.weight", m.V, m.d, NB_GROUP_EMBED, 0);
    static const char *const block_names[TENSORS_PER_BLOCK] = {
        "input_layernorm", "self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
        "post_attention_layernorm", "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"};
    const int rows[TENSORS_PER_BLOCK] = {m.d, m.dq, m.dkv, m.dkv, m.d, m.d, m.F, m.F, m.d};
    const int cols[TENSORS_PER_BLOCK] = {0, m.d, m.d, m.d, m.dq, 0, m.d, m.d, m.F};
    for (int l = 0; l < s->n_blocks; l++) {
        const int L = s->first_block + l, moe = nb_config_block_is_moe(&s->cfg, L);
        for (int k = 0; k < (moe ? B_ROUTER : TENSORS_PER_BLOCK); k++) {
            snprintf(name, sizeof name, "model.layers.%d.%s.weight", L, block_names[k]);
            add_tensor(s, name, rows[k], cols[k], cols[k] ? NB_GROUP_MATRIX : NB_GROUP_GAIN, 0);
        }
        if (moe) layout_moe_tensors(s, L);
    }
    if (s->has_head) {
        add_tensor(s, "model.norm.weight", m.d, 0, NB_GROUP_GAIN, 0);
        if (!s->cfg.tied) add_tensor(s, "lm_head.weight", m.V, m.d, NB_GROUP_EMBED, 0);
        else if (!s->has_embed) add_tensor(s, "lm_head.weight", m.V, m.d, NB_GROUP_EMBED, 1);
    }
}

int nb_stage_layout(nb_stage *s, const nb_config *cfg, int index, int count, int first_block, int n_blocks) {
    memset(s, 0, sizeof *s);
    s->cfg = *cfg;
    s->index = index;
    s->count = count;
    s->first_block = first_block;
    s->n_blocks = n_blocks;
    s->has_embed = index == 0;
    s->has_head = index == count - 1;
    size_t n = 3;
    for (int l = first_block; l < first_block + n_blocks; l++) n += (size_t)block_tensors(cfg, l);
    s->tensors = nb_calloc(n, sizeof(nb_tensor), "a stage's tensor table");
    if (!s->tensors) return -1;
    layout_tensors(s);
    return 0;
}

int nb_stage_init(nb_stage *s, const nb_config *cfg, int index, int count, int first_block, int n_blocks) {
    if (nb_stage_layout(s, cfg, index, count, first_block, n_blocks)) return -1;
    dims m = stage_dims(cfg);
    const int tied_head = s->has_head && s->has_embed && cfg->tied, half = m.hd / 2;
    s->params = nb_calloc(s->n_params, sizeof(float), "a stage's weights");
    s->grads = nb_calloc(s->n_params, sizeof(float), "a stage's gradients");
    if (tied_head) s->tied_head_grad = nb_calloc((size_t)m.V * m.d, sizeof(float), "the tied head's gradient");
    s->scratch = stage_scratch_new();
    s->rope_cos = nb_calloc((size_t)cfg->context * half, sizeof(float), "the RoPE tables");
    s->rope_sin = nb_calloc((size_t)cfg->context * half, sizeof(float), "the RoPE tables");
    if (!s->params || !s->grads || (tied_head && !s->tied_head_grad) || !s->scratch || !s->rope_cos || !s->rope_sin) {
        nb_stage_release(s);
        return nb_fail("stage %d: %s", index, nb_last_error());  /* the allocation that failed said what */
    }
    /* Rotation angles in double, rounded once: pos * theta^(-2i/hd). */
    for (int t = 0; t < cfg->context; t++)
        for (int i = 0; i < half; i++) {
            double angle = t * pow(cfg->rope_theta, -2.0 * i / m.hd);
            s->rope_cos[(size_t)t * half + i] = (float)cos(angle);
            s->rope_sin[(size_t)t * half + i] = (float)sin(angle);
        }
    return 0;
}

void nb_stage_release(nb_stage *s) {
    stage_precision_release(s);
    stage_scratch_release(s);
    free(s->tensors);
    nb_stage_free(s, s->params);
    nb_stage_free(s, s->grads);
    nb_stage_free(s, s->tied_head_grad);
    nb_stage_free(s, s->rope_cos);
    nb_stage_free(s, s->rope_sin);
    memset(s, 0, sizeof *s);
}

int nb_stage_place(nb_stage *s, const nb_backend *be) {
    if (!be->device_memory) {
        s->backend = be;
        return 0;
    }
    if (nb_stage_on_device(s)) return nb_fail("stage %d is already in the %s backend's memory", s->index, s->backend->name);
    if (!nb_layers_of(be))
        return nb_fail("stage %d: the %s backend's memory has no layers in this build", s->index, be->name);
    const dims m = stage_dims(&s->cfg);
    const size_t rope = sizeof(float) * (size_t)s->cfg.context * (size_t)(m.hd / 2);
    /* the host's arrays stay until every copy exists, so a failure leaves the stage as it was */
    nb_stage moved = *s;
    moved.params = moved.grads = moved.tied_head_grad = moved.rope_cos = moved.rope_sin = NULL;
    if (!(moved.scratch = stage_scratch_new())) return nb_fail("stage %d: %s", s->index, nb_last_error());
    float *host[5] = {s->params, s->grads, s->tied_head_grad, s->rope_cos, s->rope_sin};
    float **dst[5] = {&moved.params, &moved.grads, &moved.tied_head_grad, &moved.rope_cos, &moved.rope_sin};
    const size_t bytes[5] = {sizeof(float) * s->n_params, sizeof(float) * s->n_params,
                             sizeof(float) * (size_t)m.V * m.d, rope, rope};
    for (int i = 0; i < 5; i++) {
        if (!host[i]) continue;
        if (!(*dst[i] = nb_backend_alloc(be, bytes[i], "a stage's weights, gradients or RoPE tables"))) {
            for (int j = 0; j < i; j++) nb_backend_free(be, *dst[j]);
            free(moved.scratch);
            return nb_fail("stage %d: %s", s->index, nb_last_error());
        }
        nb_backend_from_host(be, *dst[i], host[i], bytes[i]);
    }
    for (int i = 0; i < 5; i++) free(host[i]);
    stage_scratch_release(s);  /* host buffers, if a pass ran: made anew in be's memory when needed */
    moved.backend = be;
    *s = moved;
    return 0;
}

/* ---- forward and backward ---- */

block_weights weights_of_block(const nb_stage *s, const float *w, int l) {
    const nb_tensor *t = &s->tensors[block_first_tensor(s, l)];
    block_weights b = {w + t[B_LN1].offset, w + t[B_Q].offset,  w + t[B_O].offset,
                       w + t[B_LN2].offset, w + t[B_GATE].offset, w + t[B_DOWN].offset, NULL};
    if (nb_config_block_is_moe(&s->cfg, s->first_block + l)) {  /* router, the experts' gate|up, their downs */
        const int E = s->cfg.n_experts;
        b.router = w + t[B_ROUTER].offset;
        b.wgu = w + t[B_ROUTER + 1].offset;
        b.wdown = w + t[B_ROUTER + 1 + 2 * E].offset;
    }
    return b;
}

/* The gradient buffers of block l, laid out like its weights. */
static block_weights grads_of_block(nb_stage *s, int l) { return weights_of_block(s, s->grads, l); }

/* The last stage ends with model.norm.weight, then lm_head.weight unless the model is tied
 * and in one stage, where the head is the embedding itself. */
static int has_head_tensor(const nb_stage *s) { return !(s->cfg.tied && s->has_embed); }
static int final_norm_index(const nb_stage *s) { return s->n_tensors - (has_head_tensor(s) ? 2 : 1); }
const float *final_norm_weights(const nb_stage *s, const float *w) { return w + s->tensors[final_norm_index(s)].offset; }

const float *head_weights(const nb_stage *s, const float *w) {
    return w + s->tensors[has_head_tensor(s) ? s->n_tensors - 1 : 0].offset;
}

/* One backward's gradients of a block's tensors, from the stage's scratch (model/acts.h). dres holds
 * the gradient of the residual stream: of a block's output on entry, of its input on return. */
typedef struct {
    float *dres, *dln, *dqkv, *datt, *dgu, *dh;
} block_grads;

static block_grads backward_scratch(const nb_stage *s, int N) {
    block_grads d = {stage_scratch(s, SCR_DRES, N), stage_scratch(s, SCR_DLN, N), stage_scratch(s, SCR_DQKV, N),
                     stage_scratch(s, SCR_DATT, N), stage_scratch(s, SCR_DGU, N), stage_scratch(s, SCR_DH, N)};
    return d;
}

/* ---- the backward split in two (nb_stage_backward_input / _weight) ---- */

typedef struct {
    float *dw;           /* the weight gradient the product adds into */
    const float *x;      /* the layer's input [N x in], in the activation slot (fp32) */
    const nb_bf16 *x16;  /* or its bf16 operand there (bf16; x is then NULL) */
    size_t dy_at;        /* where its output gradient [N x out] is copied: in dy (fp32) or dy16 (bf16) */
    float alpha;         /* bf16: the product's scale (the loss scale, for the head) */
    int N, in, out;
} wgrad_product;

struct nb_wgrad {
    nb_wgrad_sink sink;  /* first: the layers hand their products to it (layers/layers.h) */
    wgrad_product *products;
    int n, cap;
    float *dy;
    nb_bf16 *dy16;
    size_t used, size, used16, size16;  /* values of dy and dy16 in use, allocated */
    int failed;
    const nb_backend *device;  /* dy and dy16 are this backend's memory (a device's stage); NULL: the host's */
};

static void wgrad_product_sink(nb_wgrad_sink *k, float *dw, const float *dy, const float *x, int N, int in, int out);
static void wgrad_product16_sink(nb_wgrad_sink *k, float *dw, float alpha, const nb_bf16 *dy16, const nb_bf16 *x16, int N,
                                 int in, int out);

nb_wgrad *nb_wgrad_create(void) {
    nb_wgrad *g = calloc(1, sizeof *g);
    if (!g) {
        nb_fail("out of memory for a split backward's record");
        return NULL;
    }
    g->sink = (nb_wgrad_sink){wgrad_product_sink, wgrad_product16_sink};
    return g;
}

/* The record's copies of dY: the host's memory, or the device's of the stage that records into it. */
static void wgrad_buffer_free(const nb_wgrad *g, void *p) {
    if (g->device) nb_backend_free(g->device, p);
    else free(p);
}

void nb_wgrad_free(nb_wgrad *g) {
    if (!g) return;
    free(g->products);
    wgrad_buffer_free(g, g->dy);
    wgrad_buffer_free(g, g->dy16);
    free(g);
}

/* Room for one more product: the table grows on the first micro-batch and keeps its size, later ones
 * recording the same products. */
static int wgrad_room(nb_wgrad *g) {
    if (g->failed) return -1;
    if (g->n < g->cap) return 0;
    const int cap = g->cap ? 2 * g->cap : 16;
    wgrad_product *p = realloc(g->products, sizeof *p * (size_t)cap);
    if (!p) {
        g->failed = 1;
        return nb_fail("out of memory recording a split backward's weight gradients");
    }
    g->products = p, g->cap = cap;
    return 0;
}

/* buf (of *size values of `bytes` each) with room for `need` values: itself, or grown to exactly that (the
 * first micro-batch grows it product by product; every later one needs the same, which the memory
 * estimate counts); NULL when memory ran out. */
static void *wgrad_grow(nb_wgrad *g, void *buf, size_t *size, size_t need, size_t bytes) {
    if (need <= *size) return buf;
    const size_t want = need;
    void *grown = NULL;
    if (!g->device) {
        grown = realloc(buf, bytes * want);
    } else if ((grown = nb_backend_alloc(g->device, bytes * want, "a split backward's output gradients"))) {
        if (buf) nb_backend_copy(g->device, grown, buf, bytes * *size);  /* what earlier products recorded */
        nb_backend_free(g->device, buf);
    }
    if (!grown) {
        g->failed = 1;
        nb_fail("out of memory for a split backward's output gradients (%zu values)", want);
        return NULL;
    }
    *size = want;
    return grown;
}

/* Records dW += dY^T X for W: the product and a copy of dY (the scratch it is in is reused). */
static void wgrad_product_sink(nb_wgrad_sink *k, float *dw, const float *dy, const float *x, int N, int in, int out) {
    nb_wgrad *g = (nb_wgrad *)k;
    const size_t n = (size_t)N * out;
    float *dy_all = wgrad_room(g) ? NULL : wgrad_grow(g, g->dy, &g->size, g->used + n, sizeof(float));
    if (!dy_all) return;
    g->dy = dy_all;
    if (g->device) nb_backend_copy(g->device, g->dy + g->used, dy, sizeof(float) * n);
    else memcpy(g->dy + g->used, dy, sizeof(float) * n);
    g->products[g->n++] = (wgrad_product){dw, x, NULL, g->used, 1.0f, N, in, out};
    g->used += n;
}

/* The same for a bf16 product: dW += alpha dY16^T X16. */
static void wgrad_product16_sink(nb_wgrad_sink *k, float *dw, float alpha, const nb_bf16 *dy16, const nb_bf16 *x16, int N,
                                 int in, int out) {
    nb_wgrad *g = (nb_wgrad *)k;
    const size_t n = (size_t)N * out;
    nb_bf16 *dy_all = wgrad_room(g) ? NULL : wgrad_grow(g, g->dy16, &g->size16, g->used16 + n, sizeof(nb_bf16));
    if (!dy_all) return;
    g->dy16 = dy_all;
    if (g->device) nb_backend_copy(g->device, g->dy16 + g->used16, dy16, sizeof(nb_bf16) * n);
    else memcpy(g->dy16 + g->used16, dy16, sizeof(nb_bf16) * n);
    g->products[g->n++] = (wgrad_product){dw, NULL, x16, g->used16, alpha, N, in, out};
    g->used16 += n;
}

/* The stage's sink while a split backward runs (NULL: whole backwards). */
static nb_wgrad_sink *stage_sink(const nb_stage *s) { return s->defer ? &s->defer->sink : NULL; }

/* linear_backward, or under a split backward its input-gradient product alone, the other recorded. */
static void stage_linear_backward(const nb_stage *s, float *dx, float *dw, const float *dy, const float *x,
                                  const float *w, int N, int in, int out) {
    linear_backward_to(s->backend, stage_sink(s), dx, dw, dy, x, w, N, in, out);
}

/* The same for bf16 products, on dY cast (or already in bf16). */
static void stage_linear_backward_bf16_cast(const nb_stage *s, float *dx, float *dw, float alpha, const nb_bf16 *dy16,
                                            const nb_bf16 *x16, const nb_bf16 *w16, int N, int in, int out) {
    linear_backward_bf16_cast_to(s->backend, stage_sink(s), dx, dw, alpha, dy16, x16, w16, N, in, out);
}

static void stage_linear_backward_bf16(const nb_stage *s, float *dx, float *dw, const float *dy, const nb_bf16 *x16,
                                       const nb_bf16 *w16, int N, int in, int out, nb_bf16 *dy_scratch) {
    linear_backward_bf16_to(s->backend, stage_sink(s), dx, dw, dy, x16, w16, N, in, out, dy_scratch);
}

/* Each pass below returns -1 (nb_last_error) when its scratch or attention's cannot be allocated. */
static int block_forward(const nb_stage *s, const block_weights *w, block_acts *b, const float *x, float *out,
                         int B, int T) {
    dims m = stage_dims(&s->cfg);
    int N = B * T;
    float eps = (float)s->cfg.norm_eps;
    const nb_backend *be = s->backend;
    const nb_layer_ops *L = nb_layers_of(be);
    L->rmsnorm_forward(be, b->ln1, b->rstd1, x, w->ln1, N, m.d, eps);
    linear_forward(be, b->qkv, 0.0f, b->ln1, w->wqkv, N, m.d, m.qkv);
    L->rope_forward(be, b->qkv, B, T, m.qkv, m.H + m.Hkv, m.hd, s->rope_cos, s->rope_sin);
    if (L->attention_forward(be, b->att, NULL, b->lse, b->qkv, B, T, m.H, m.Hkv, m.hd, 0)) return -1;
    /* Residual adds are folded into the output GEMMs: copy the stream, then beta = 1. */
    nb_backend_copy(be, b->mid, x, sizeof(float) * (size_t)N * m.d);
    linear_forward(be, b->mid, 1.0f, b->att, w->wo, N, m.dq, m.d);
    L->rmsnorm_forward(be, b->ln2, b->rstd2, b->mid, w->ln2, N, m.d, eps);
    nb_backend_copy(be, out, b->mid, sizeof(float) * (size_t)N * m.d);
    if (w->router) {  /* a MoE block: out += the experts' weighted outputs */
        if (stage_moe_scratch(s, b, N)) return -1;
        return moe_forward(s->backend, &b->moe, out, b->ln2, w->router, w->wgu, w->wdown, b->load);
    }
    linear_forward(be, b->gu, 0.0f, b->ln2, w->wgu, N, m.d, 2 * m.F);
    L->swiglu_forward(be, b->h, b->gu, N, m.F);
    linear_forward(be, out, 1.0f, b->h, w->wdown, N, m.F, m.d);
    return 0;
}

static int block_backward(const nb_stage *s, const block_weights *w, const block_weights *g, block_acts *b,
                          const block_grads *d, const float *x, int B, int T, float aux_grad) {
    dims m = stage_dims(&s->cfg);
    int N = B * T;
    float *dres = d->dres;
    const nb_backend *be = s->backend;
    const nb_layer_ops *L = nb_layers_of(be);
    /* MLP branch */
    if (w->router) {
        if (stage_moe_scratch(s, b, N)) return -1;
        b->moe.sink = stage_sink(s);
        if (moe_backward(s->backend, &b->moe, d->dln, (float *)g->router, (float *)g->wgu, (float *)g->wdown, dres,
                         aux_grad, b->ln2, w->router, w->wgu, w->wdown))
            return -1;
    } else {
        stage_linear_backward(s, d->dh, (float *)g->wdown, dres, b->h, w->wdown, N, m.F, m.d);
        L->swiglu_backward(be, d->dgu, d->dh, b->gu, N, m.F);
        stage_linear_backward(s, d->dln, (float *)g->wgu, d->dgu, b->ln2, w->wgu, N, m.d, 2 * m.F);
    }
    L->rmsnorm_backward(be, dres, (float *)g->ln2, d->dln, b->mid, w->ln2, b->rstd2, N, m.d);
    /* attention branch */
    stage_linear_backward(s, d->datt, (float *)g->wo, dres, b->att, w->wo, N, m.dq, m.d);
    if (L->attention_backward(be, d->dqkv, d->datt, b->att, b->lse, b->qkv, B, T, m.H, m.Hkv, m.hd, 0)) return -1;
    L->rope_backward(be, d->dqkv, B, T, m.qkv, m.H + m.Hkv, m.hd, s->rope_cos, s->rope_sin);
    stage_linear_backward(s, d->dln, (float *)g->wqkv, d->dqkv, b->ln1, w->wqkv, N, m.d, m.qkv);
    L->rmsnorm_backward(be, dres, (float *)g->ln1, d->dln, x, w->ln1, b->rstd1, N, m.d);
    return 0;
}

/* ---- the same under bf16: the products through nb_gemm_bf16 on the version's bf16 copy (w16) ----
 * The slot keeps q/k/v, attention's output and gate/up in bf16 (model/acts.h); they are computed in
 * float32 in the scratch, and a backward widens q/k/v and attention's output back (exactly) into it. */

typedef struct {
    const nb_bf16 *wqkv, *wo, *wgu, *wdown, *router;  /* a MoE block: wgu and wdown are its experts', as in block_weights */
} block_weights16;

/* The bf16 copy laid out like the weights: the same offsets as weights_of_block's. */
static block_weights16 weights16_of_block(const nb_stage *s, const float *w, const nb_bf16 *w16, int l) {
    const block_weights b = weights_of_block(s, w, l);
    block_weights16 b16 = {w16 + (b.wqkv - w), w16 + (b.wo - w), w16 + (b.wgu - w), w16 + (b.wdown - w),
                           b.router ? w16 + (b.router - w) : NULL};
    return b16;
}

static int block_forward_bf16(const nb_stage *s, const block_weights *w, const block_weights16 *w16, block_acts *b,
                              const float *x, float *out, int B, int T) {
    dims m = stage_dims(&s->cfg);
    const nb_backend *be = s->backend;
    const nb_layer_ops *L = nb_layers_of(be);
    int N = B * T;
    const float eps = (float)s->cfg.norm_eps;
    float *qkv = stage_scratch(s, SCR_QKV, N), *att = stage_scratch(s, SCR_ATT, N), *gu = stage_scratch(s, SCR_GU, N);
    if (!qkv || !att || !gu) return -1;
    L->rmsnorm_forward_bf16(be, b->ln1b, b->rstd1, x, w->ln1, N, m.d, eps);
    linear_forward_bf16(s->backend, qkv, 0.0f, b->ln1b, w16->wqkv, N, m.d, m.qkv);
    /* q, k, v rotated and rounded as attention's bf16 operands, and kept in bf16, in one pass */
    L->rope_forward_bf16(be, qkv, b->qkvb, B, T, m.qkv, m.H + m.Hkv, m.hd, s->rope_cos, s->rope_sin);
    if (L->attention_forward(be, att, b->attb, b->lse, qkv, B, T, m.H, m.Hkv, m.hd, 1)) return -1;  /* O kept in bf16 */
    nb_backend_copy(be, b->mid, x, sizeof(float) * (size_t)N * m.d);
    linear_forward_bf16(s->backend, b->mid, 1.0f, b->attb, w16->wo, N, m.dq, m.d);
    L->rmsnorm_forward_bf16(be, b->ln2b, b->rstd2, b->mid, w->ln2, N, m.d, eps);
    if (w16->router) {  /* a MoE block: out += the experts' weighted outputs */
        if (stage_moe_scratch(s, b, N)) return -1;
        nb_backend_copy(be, out, b->mid, sizeof(float) * (size_t)N * m.d);
        return moe_forward_bf16(s->backend, &b->moe, out, b->ln2b, w16->router, w16->wgu, w16->wdown, b->load);
    }
    linear_forward_bf16(s->backend, gu, 0.0f, b->ln2b, w16->wgu, N, m.d, 2 * m.F);
    /* gate/up kept in bf16 (as autocast keeps a linear's output), SwiGLU on those values, in one pass */
    L->swiglu_forward_cast_bf16(be, b->hb, b->gub, gu, N, m.F);
    nb_backend_copy(be, out, b->mid, sizeof(float) * (size_t)N * m.d);
    linear_forward_bf16(s->backend, out, 1.0f, b->hb, w16->wdown, N, m.F, m.d);
    return 0;
}

static int block_backward_bf16(const nb_stage *s, const block_weights *w, const block_weights16 *w16,
                               const block_weights *g, block_acts *b, const block_grads *d, const float *x, int B,
                               int T, float aux_grad) {
    dims m = stage_dims(&s->cfg);
    const nb_backend *be = s->backend;
    const nb_layer_ops *L = nb_layers_of(be);
    int N = B * T;
    float *dres = d->dres;
    nb_bf16 *dy16 = stage_scratch(s, SCR_DY16, N);
    float *qkv = stage_scratch(s, SCR_QKV, N), *att = stage_scratch(s, SCR_ATT, N);
    if (!dy16 || !qkv || !att) return -1;
    /* MLP branch */
    if (w16->router) {
        if (stage_moe_scratch(s, b, N)) return -1;
        b->moe.sink = stage_sink(s);
        if (moe_backward_bf16(s->backend, &b->moe, d->dln, (float *)g->router, (float *)g->wgu, (float *)g->wdown, dres,
                              aux_grad, b->ln2b, w16->router, w16->wgu, w16->wdown))
            return -1;
    } else {
        stage_linear_backward_bf16(s, d->dh, (float *)g->wdown, dres, b->hb, w16->wdown, N, m.F, m.d, dy16);
        L->swiglu_backward_bf16_cast(be, dy16, d->dh, b->gub, N, m.F);  /* dgu straight to its bf16 operand */
        stage_linear_backward_bf16_cast(s, d->dln, (float *)g->wgu, 1.0f, dy16, b->ln2b, w16->wgu, N, m.d, 2 * m.F);
    }
    L->rmsnorm_backward(be, dres, (float *)g->ln2, d->dln, b->mid, w->ln2, b->rstd2, N, m.d);
    /* attention branch: its output O (for the row sums of dO O) and q/k/v widened from the slot */
    stage_linear_backward_bf16(s, d->datt, (float *)g->wo, dres, b->attb, w16->wo, N, m.dq, m.d, dy16);
    L->bf16_round(be, d->datt, (size_t)N * m.dq);  /* dO as attention's bf16 operand */
    L->bf16_widen(be, qkv, b->qkvb, (size_t)N * m.qkv);
    L->bf16_widen(be, att, b->attb, (size_t)N * m.dq);
    if (L->attention_backward(be, d->dqkv, d->datt, att, b->lse, qkv, B, T, m.H, m.Hkv, m.hd, 1)) return -1;
    L->rope_backward_cast_bf16(be, dy16, d->dqkv, B, T, m.qkv, m.H + m.Hkv, m.hd, s->rope_cos, s->rope_sin);
    stage_linear_backward_bf16_cast(s, d->dln, (float *)g->wqkv, 1.0f, dy16, b->ln1b, w16->wqkv, N, m.d, m.qkv);
    L->rmsnorm_backward(be, dres, (float *)g->ln1, d->dln, x, w->ln1, b->rstd1, N, m.d);
    return 0;
}

/* ---- the head and the loss, by chunks of rows ---- */

static int whole_logits(const nb_acts *a) { return a->logit_rows == a->B * a->T; }

/* Where the float32 logits of rows r0.. go: their place in an fp32 slot's whole logits, else the scratch
 * (NULL when it cannot be allocated). */
static float *chunk_logits(const nb_stage *s, nb_acts *a, int r0) {
    if (a->precision != NB_PRECISION_BF16 && whole_logits(a)) return a->logits + (size_t)r0 * s->cfg.vocab_size;
    return stage_scratch(s, SCR_LOGITS, a->B * a->T);
}

/* z = the logits of `rows` rows from r0: the final norm's output times the head. */
static void head_product(const nb_stage *s, const float *w, const nb_bf16 *w16, const nb_acts *a, float *z, int r0,
                         int rows) {
    dims m = stage_dims(&s->cfg);
    const float *head = head_weights(s, w);
    if (w16) linear_forward_bf16(s->backend, z, 0.0f, a->lnfb + (size_t)r0 * m.d, w16 + (head - w), rows, m.d, m.V);
    else linear_forward(s->backend, z, 0.0f, a->lnf + (size_t)r0 * m.d, head, rows, m.d, m.V);
}

/* The loss's gradient through the head, chunk by chunk: dln (the final norm's output gradient) and the
 * head's weight gradient. A slot that keeps one chunk recomputes its logits first. Under bf16 the
 * gradient of the logits is (softmax - onehot) / N in bf16, kept by the forward for whole slots; the
 * loss scale multiplies both products (their alpha). */
static int head_backward(nb_stage *s, const float *w, const nb_bf16 *w16, nb_acts *a, float *dln_all,
                         float loss_scale) {
    dims m = stage_dims(&s->cfg);
    const int N = a->B * a->T;
    float *dhead = s->tied_head_grad ? s->tied_head_grad : s->grads + s->tensors[s->n_tensors - 1].offset;
    const float *head = head_weights(s, w);
    for (int r0 = 0; r0 < N; r0 += a->logit_rows) {
        const int rows = N - r0 < a->logit_rows ? N - r0 : a->logit_rows;
        float *z = chunk_logits(s, a, r0), *dln = dln_all + (size_t)r0 * m.d;
        if (!z) return -1;
        if (!whole_logits(a)) head_product(s, w, w16, a, z, r0, rows);
        if (w16) {
            nb_bf16 *dz16 = whole_logits(a) ? a->dlogits + (size_t)r0 * m.V : stage_scratch(s, SCR_DY16, N);
            if (!dz16) return -1;
            if (!whole_logits(a))
                nb_layers_of(s->backend)->cross_entropy_grad_bf16(s->backend, dz16, z, a->ce_lse + r0, a->targets + r0,
                                                                  rows, m.V, N);
            stage_linear_backward_bf16_cast(s, dln, dhead, loss_scale, dz16, a->lnfb + (size_t)r0 * m.d, w16 + (head - w),
                                            rows, m.d, m.V);
        } else {
            nb_layers_of(s->backend)->cross_entropy_backward(s->backend, z, a->ce_lse + r0, a->targets + r0, rows, m.V,
                                                             loss_scale, N);
            stage_linear_backward(s, dln, dhead, z, a->lnf + (size_t)r0 * m.d, head, rows, m.d, m.V);
        }
    }
    return 0;
}

/* The final norm, the head and the loss (in float32, from float32 logits); a bf16 slot of whole rows
 * keeps the logits' gradient in bf16 instead of the logits (fused into the loss, as llm.c does). */
static int head_forward(const nb_stage *s, const float *w, const nb_bf16 *w16, nb_acts *a) {
    dims m = stage_dims(&s->cfg);
    const nb_layer_ops *L = nb_layers_of(s->backend);
    const int N = a->B * a->T;
    const float *xf = a->res + (size_t)s->n_blocks * N * m.d;
    const float *gain = w + s->tensors[final_norm_index(s)].offset;
    if (w16) L->rmsnorm_forward_bf16(s->backend, a->lnfb, a->rstdf, xf, gain, N, m.d, (float)s->cfg.norm_eps);
    else L->rmsnorm_forward(s->backend, a->lnf, a->rstdf, xf, gain, N, m.d, (float)s->cfg.norm_eps);
    double total = 0.0;
    for (int r0 = 0; r0 < N; r0 += a->logit_rows) {
        const int rows = N - r0 < a->logit_rows ? N - r0 : a->logit_rows;
        float *z = chunk_logits(s, a, r0);
        if (!z) return -1;
        head_product(s, w, w16, a, z, r0, rows);
        if (w16 && whole_logits(a))
            total += L->cross_entropy_forward_grad_bf16(s->backend, a->ce_lse + r0, a->dlogits + (size_t)r0 * m.V, z,
                                                        a->targets + r0, rows, m.V, N);
        else
            total += L->cross_entropy_forward(s->backend, a->ce_lse + r0, z, a->targets + r0, rows, m.V);
    }
    a->loss = (float)(total / N);
    return 0;
}

/* The blocks, then (last stage) the final norm, head and loss. */
static int stage_body_forward(const nb_stage *s, const float *w, long version, nb_acts *a) {
    dims m = stage_dims(&s->cfg);
    int B = a->B, T = a->T, N = B * T;
    const nb_bf16 *w16 = s->precision == NB_PRECISION_BF16 ? stage_bf16_weights(s, w, version) : NULL;
    if (s->precision == NB_PRECISION_BF16 && !w16) return -1;
    a->aux = 0.0;
    for (int l = 0; l < s->n_blocks; l++) {
        block_weights bw = weights_of_block(s, w, l);
        const float *x = a->res + (size_t)l * N * m.d;
        float *out = a->res + (size_t)(l + 1) * N * m.d;
        if (w16) {
            block_weights16 bw16 = weights16_of_block(s, w, w16, l);
            if (block_forward_bf16(s, &bw, &bw16, &a->blocks[l], x, out, B, T)) return -1;
        } else if (block_forward(s, &bw, &a->blocks[l], x, out, B, T)) {
            return -1;
        }
        if (bw.router) a->aux += a->blocks[l].moe.aux;
    }
    return s->has_head ? head_forward(s, w, w16, a) : 0;
}

int nb_stage_forward(const nb_stage *s, const float *w, long version, nb_acts *a, const int *tokens,
                     const float *x_in, const int *targets, float *loss) {
    dims m = stage_dims(&s->cfg);
    int B = a->B, T = a->T, N = B * T;
    if (a->n_blocks != s->n_blocks || a->d != m.d)
        return nb_fail("stage %d: activation slot was made for another stage", s->index);
    if (a->precision != s->precision)
        return nb_fail("stage %d: activation slot was made for %s, the stage runs %s", s->index,
                       nb_precision_name(a->precision), nb_precision_name(s->precision));
    a->forwarded_by = NULL;
    if (s->has_embed) {
        for (int n = 0; n < N; n++)
            if (tokens[n] < 0 || tokens[n] >= m.V)
                return nb_fail("token id %d at position %d is outside the vocabulary [0, %d)", tokens[n], n, m.V);
        nb_backend_from_host(s->backend, a->tokens, tokens, sizeof(int) * (size_t)N);
        nb_layers_of(s->backend)->embedding_forward(s->backend, a->res, a->tokens, w + s->tensors[0].offset, N, m.d);
    } else {
        nb_backend_copy(s->backend, a->res, x_in, sizeof(float) * (size_t)N * m.d);
    }
    if (s->has_head)
        for (int n = 0; n < N; n++)
            if (targets[n] < 0 || targets[n] >= m.V)
                return nb_fail("target id %d at position %d is outside the vocabulary [0, %d)", targets[n], n, m.V);
    if (s->has_head) nb_backend_from_host(s->backend, a->targets, targets, sizeof(int) * (size_t)N);
    if (stage_body_forward(s, w, version, a)) return -1;
    if (nb_backend_check(s->backend)) return nb_fail("stage %d, forward: %s", s->index, nb_last_error());
    if (s->has_head && loss) *loss = a->loss;
    a->forwarded_by = s;
    return 0;
}

/* The first value of the stage's block l, in its parameters and gradients. */
static size_t block_offset(const nb_stage *s, int l) { return s->tensors[block_first_tensor(s, l)].offset; }

int nb_stage_grad_ranges(const nb_stage *s, size_t *starts) {
    int n = 0;
    if (s->has_head) starts[n++] = s->tensors[final_norm_index(s)].offset;
    for (int l = s->n_blocks - 1; l >= 0; l--) starts[n++] = block_offset(s, l);
    if (s->has_embed) starts[n++] = 0;
    return n;
}

/* The gradient from `from` to *end final for this backward: told to grads_done (a whole backward), once the
 * backend's queued products are done; *end moves to from. */
static int grads_final(nb_stage *s, size_t from, size_t *end) {
    const size_t n = *end - from;
    *end = from;
    if (!s->grads_done || s->defer) return 0;
    if (nb_backend_check(s->backend)) return nb_fail("stage %d, backward: %s", s->index, nb_last_error());
    return s->grads_done(s->grads_done_ctx, from, n);
}

int nb_stage_backward(nb_stage *s, const float *w, long version, nb_acts *a, const float *dout, float loss_scale) {
    dims m = stage_dims(&s->cfg);
    int B = a->B, T = a->T, N = B * T;
    if (a->forwarded_by != s)
        return nb_fail("stage %d, backward: the activation slot holds no forward of this stage (%s); run "
                       "nb_stage_forward on it first", s->index,
                       a->forwarded_by ? "its last forward ran on another stage" : "none ran, or the last one failed");
    if (a->precision != s->precision)
        return nb_fail("stage %d: activation slot was made for %s, the stage runs %s", s->index,
                       nb_precision_name(a->precision), nb_precision_name(s->precision));
    const nb_bf16 *w16 = s->precision == NB_PRECISION_BF16 ? stage_bf16_weights(s, w, version) : NULL;
    const block_grads d = backward_scratch(s, N);
    if ((s->precision == NB_PRECISION_BF16 && !w16) || !d.dres || !d.dln || !d.dqkv || !d.datt || !d.dgu || !d.dh)
        return -1;
    size_t final_from = s->n_params;  /* grads[final_from ..) are final for this backward */
    if (s->has_head) {
        int norm_index = final_norm_index(s);
        const float *xf = a->res + (size_t)s->n_blocks * N * m.d;
        if (head_backward(s, w, w16, a, d.dln, loss_scale)) return -1;
        nb_backend_zero(s->backend, d.dres, sizeof(float) * (size_t)N * m.d);
        nb_layers_of(s->backend)->rmsnorm_backward(s->backend, d.dres, s->grads + s->tensors[norm_index].offset, d.dln,
                                                   xf, w + s->tensors[norm_index].offset, a->rstdf, N, m.d);
        if (grads_final(s, s->tensors[norm_index].offset, &final_from)) return -1;
    } else {
        nb_backend_copy(s->backend, d.dres, dout, sizeof(float) * (size_t)N * m.d);
    }
    /* The objective adds aux_coef times the mean of the MoE blocks' auxiliary losses (all the model's). */
    const int moe_blocks = nb_config_moe_blocks(&s->cfg);
    const float aux_grad = moe_blocks ? (float)(loss_scale * s->cfg.aux_coef / moe_blocks) : 0.0f;
    for (int l = s->n_blocks - 1; l >= 0; l--) {
        block_weights bw = weights_of_block(s, w, l), bg = grads_of_block(s, l);
        const float *x = a->res + (size_t)l * N * m.d;
        if (w16) {
            block_weights16 bw16 = weights16_of_block(s, w, w16, l);
            if (block_backward_bf16(s, &bw, &bw16, &bg, &a->blocks[l], &d, x, B, T, aux_grad)) return -1;
        } else if (block_backward(s, &bw, &bg, &a->blocks[l], &d, x, B, T, aux_grad)) {
            return -1;
        }
        if (grads_final(s, block_offset(s, l), &final_from)) return -1;
    }
    if (s->has_embed) {
        nb_layers_of(s->backend)->embedding_backward(s->backend, s->grads + s->tensors[0].offset, d.dres, a->tokens, N,
                                                     m.d);
        if (grads_final(s, 0, &final_from)) return -1;
    } else {
        nb_backend_copy(s->backend, a->dinput, d.dres, sizeof(float) * (size_t)N * m.d);
    }
    if (nb_backend_check(s->backend)) return nb_fail("stage %d, backward: %s", s->index, nb_last_error());
    return 0;
}

int nb_stage_backward_input(nb_stage *s, const float *w, long version, nb_acts *a, const float *dout, float loss_scale,
                            nb_wgrad *g) {
    const nb_backend *device = nb_stage_on_device(s) ? s->backend : NULL;
    if (g->device != device && (g->dy || g->dy16))  /* a record kept for one memory is not handed to another */
        return nb_fail("stage %d: a split backward's record made for another stage's memory", s->index);
    g->device = device;  /* its copies of dY in the stage's memory */
    g->n = 0, g->used = 0, g->used16 = 0, g->failed = 0;
    s->defer = g;
    const int rc = nb_stage_backward(s, w, version, a, dout, loss_scale);
    s->defer = NULL;
    return rc || g->failed ? -1 : 0;
}

int nb_stage_backward_weight(nb_stage *s, nb_wgrad *g) {
    for (int i = 0; i < g->n; i++) {
        const wgrad_product *p = &g->products[i];
        if (p->x16)
            nb_gemm_bf16(s->backend, 1, 0, p->out, p->in, p->N, p->alpha, g->dy16 + p->dy_at, p->out, p->x16, p->in, 1.0f,
                         p->dw, p->in);
        else
            nb_gemm(s->backend, 1, 0, p->out, p->in, p->N, 1.0f, g->dy + p->dy_at, p->out, p->x, p->in, 1.0f, p->dw,
                    p->in);
    }
    g->n = 0, g->used = 0, g->used16 = 0;
    if (nb_backend_check(s->backend)) return nb_fail("stage %d, weight gradients: %s", s->index, nb_last_error());
    return 0;
}

size_t nb_wgrad_bytes(const nb_stage *s, int B, int T) {
    const dims m = stage_dims(&s->cfg);
    const size_t N = (size_t)B * T, k = (size_t)s->cfg.experts_per_token, E = (size_t)s->cfg.n_experts;
    size_t floats = s->has_head ? N * (size_t)m.V : 0;  /* the head's logits' gradient */
    for (int l = 0; l < s->n_blocks; l++) {
        floats += N * ((size_t)m.d + (size_t)m.qkv);  /* attention: the output projection's dY, q/k/v's */
        if (nb_config_block_is_moe(&s->cfg, s->first_block + l)) {
            /* each expert's rows (k per token, under bf16 up to 63 padding rows each) through down (d) and
             * gate|up (2F), and the router's N x E */
            const size_t rows = N * k + (s->precision == NB_PRECISION_BF16 ? 63 * E : 0);
            floats += rows * ((size_t)m.d + 2 * (size_t)m.F) + N * E;
        } else {
            floats += N * ((size_t)m.d + 2 * (size_t)m.F);  /* the MLP's down and gate|up */
        }
    }
    return (s->precision == NB_PRECISION_BF16 ? sizeof(nb_bf16) : sizeof(float)) * floats;
}
