/* A stage: a contiguous range of blocks, plus the embedding on the first stage and the final
 * norm, head and loss on the last. This file lays out a stage's parameters, allocates
 * activation slots, and runs forward and backward by calling the layers in order. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "layers/layers.h"
#include "model/stage.h"
#include "util/error.h"

/* The nine tensors of a block, in memory order. q, k and v are adjacent, and so are gate and
 * up, so that each group is one (out, in) matrix and one GEMM. */
enum { B_LN1, B_Q, B_K, B_V, B_O, B_LN2, B_GATE, B_UP, B_DOWN, TENSORS_PER_BLOCK };

typedef struct {
    int d, hd, H, Hkv, dq, dkv, qkv, F, V;
} dims;

static dims stage_dims(const nb_config *c) {
    dims m;
    m.d = c->d_model;
    m.H = c->n_heads;
    m.Hkv = c->n_kv_heads;
    m.hd = c->d_model / c->n_heads;
    m.dq = m.H * m.hd;
    m.dkv = m.Hkv * m.hd;
    m.qkv = m.dq + 2 * m.dkv;
    m.F = c->d_ffn;
    m.V = c->vocab_size;
    return m;
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

static void layout_tensors(nb_stage *s) {
    dims m = stage_dims(&s->cfg);
    char name[64];
    if (s->has_embed) add_tensor(s, "model.embed_tokens.weight", m.V, m.d, NB_GROUP_EMBED, 0);
    static const char *const block_names[TENSORS_PER_BLOCK] = {
        "input_layernorm", "self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
        "post_attention_layernorm", "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"};
    const int rows[TENSORS_PER_BLOCK] = {m.d, m.dq, m.dkv, m.dkv, m.d, m.d, m.F, m.F, m.d};
    const int cols[TENSORS_PER_BLOCK] = {0, m.d, m.d, m.d, m.dq, 0, m.d, m.d, m.F};
    for (int l = 0; l < s->n_blocks; l++)
        for (int k = 0; k < TENSORS_PER_BLOCK; k++) {
            snprintf(name, sizeof name, "model.layers.%d.%s.weight", s->first_block + l, block_names[k]);
            add_tensor(s, name, rows[k], cols[k], cols[k] ? NB_GROUP_MATRIX : NB_GROUP_GAIN, 0);
        }
    if (s->has_head) {
        add_tensor(s, "model.norm.weight", m.d, 0, NB_GROUP_GAIN, 0);
        if (!s->cfg.tied) add_tensor(s, "lm_head.weight", m.V, m.d, NB_GROUP_EMBED, 0);
        else if (!s->has_embed) add_tensor(s, "lm_head.weight", m.V, m.d, NB_GROUP_EMBED, 1);
    }
}

static void *checked_calloc(size_t n, size_t size) {
    void *p = calloc(n ? n : 1, size);
    if (!p) {
        fprintf(stderr, "nobubble: out of memory allocating %zu bytes\n", n * size);
        exit(3);
    }
    return p;
}

int nb_stage_init(nb_stage *s, const nb_config *cfg, int index, int count, int first_block, int n_blocks) {
    memset(s, 0, sizeof *s);
    s->cfg = *cfg;
    s->index = index;
    s->count = count;
    s->first_block = first_block;
    s->n_blocks = n_blocks;
    s->has_embed = index == 0;
    s->has_head = index == count - 1;
    s->tensors = checked_calloc((size_t)n_blocks * TENSORS_PER_BLOCK + 3, sizeof(nb_tensor));
    layout_tensors(s);
    s->params = checked_calloc(s->n_params, sizeof(float));
    s->grads = checked_calloc(s->n_params, sizeof(float));
    dims m = stage_dims(cfg);
    if (s->has_head && s->has_embed && cfg->tied) s->tied_head_grad = checked_calloc((size_t)m.V * m.d, sizeof(float));
    /* Rotation angles in double, rounded once: pos * theta^(-2i/hd). */
    int half = m.hd / 2;
    s->rope_cos = checked_calloc((size_t)cfg->context * half, sizeof(float));
    s->rope_sin = checked_calloc((size_t)cfg->context * half, sizeof(float));
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
    free(s->tensors);
    free(s->params);
    free(s->grads);
    free(s->tied_head_grad);
    free(s->rope_cos);
    free(s->rope_sin);
    memset(s, 0, sizeof *s);
}

/* ---- activation slots ---- */

/* Under bf16 the inputs of products that nothing else reads (the norms' outputs, SwiGLU's) are kept
 * as bf16 only (ln1b, ln2b, hb, lnfb), and their float32 arrays are empty. */
typedef struct {
    float *ln1, *rstd1, *qkv, *att, *lse, *mid, *ln2, *rstd2, *gu, *h;
    nb_bf16 *ln1b, *ln2b, *hb;
} block_acts;

struct nb_acts {
    int B, T, n_blocks, d, precision;
    int logit_rows;      /* rows of logits held at once: B*T, or a chunk (stage_logit_rows) */
    size_t bytes;
    void *memory;
    int *tokens, *targets;
    float *res;          /* [n_blocks + 1][N][d]: each block's input, then the stage's output */
    block_acts *blocks;
    float *lnf, *rstdf, *logits, *ce_lse;  /* last stage */
    nb_bf16 *lnfb;
    /* backward scratch, one set per slot so that slots are independent */
    float *dres, *dln, *dqkv, *datt, *dgu, *dh, *dinput;
    float loss;
};

/* Carves one allocation into the slot's arrays. With base == NULL it only counts bytes. */
static size_t carve(nb_acts *a, const nb_stage *s, char *base) {
    dims m = stage_dims(&s->cfg);
    size_t N = (size_t)a->B * a->T, off = 0;
    const size_t f32 = a->precision == NB_PRECISION_BF16 ? 0 : 1, b16 = 1 - f32;  /* which copy is kept */
#define TAKE(ptr, type, count)                                      \
    do {                                                            \
        if (base) ptr = (type *)(base + off);                       \
        off += ((sizeof(type) * (size_t)(count) + 63) / 64) * 64;   \
    } while (0)
    TAKE(a->tokens, int, s->has_embed ? N : 0);
    TAKE(a->targets, int, s->has_head ? N : 0);
    TAKE(a->res, float, (size_t)(s->n_blocks + 1) * N * m.d);
    for (int l = 0; l < s->n_blocks; l++) {
        block_acts *b = &a->blocks[l];
        TAKE(b->ln1, float, f32 * N * m.d);
        TAKE(b->ln1b, nb_bf16, b16 * N * m.d);
        TAKE(b->rstd1, float, N);
        TAKE(b->qkv, float, N * m.qkv);
        TAKE(b->att, float, N * m.dq);
        TAKE(b->lse, float, N * m.H);
        TAKE(b->mid, float, N * m.d);
        TAKE(b->ln2, float, f32 * N * m.d);
        TAKE(b->ln2b, nb_bf16, b16 * N * m.d);
        TAKE(b->rstd2, float, N);
        TAKE(b->gu, float, N * 2 * m.F);
        TAKE(b->h, float, f32 * N * m.F);
        TAKE(b->hb, nb_bf16, b16 * N * m.F);
    }
    if (s->has_head) {
        TAKE(a->lnf, float, f32 * N * m.d);
        TAKE(a->lnfb, nb_bf16, b16 * N * m.d);
        TAKE(a->rstdf, float, N);
        TAKE(a->logits, float, (size_t)a->logit_rows * m.V);
        TAKE(a->ce_lse, float, N);
    }
    TAKE(a->dres, float, N * m.d);
    TAKE(a->dln, float, N * m.d);
    TAKE(a->dqkv, float, N * m.qkv);
    TAKE(a->datt, float, N * m.dq);
    TAKE(a->dgu, float, N * 2 * m.F);
    TAKE(a->dh, float, N * m.F);
    TAKE(a->dinput, float, s->has_embed ? 0 : N * m.d);
#undef TAKE
    return off;
}

/* Whole micro-batches' logits up to this many bytes; beyond, chunks of rows that fit. */
#define LOGIT_BUDGET ((size_t)64 << 20)

static int stage_logit_rows(const nb_stage *s, int N) {
    if (!s->has_head) return 0;
    if (s->logit_rows > 0) return s->logit_rows < N ? s->logit_rows : N;
    size_t fit = LOGIT_BUDGET / (sizeof(float) * (size_t)s->cfg.vocab_size);
    return fit >= (size_t)N ? N : fit > 0 ? (int)fit : 1;
}

size_t nb_acts_bytes(const nb_stage *s, int B, int T) {
    nb_acts a = {.B = B, .T = T, .precision = s->precision, .logit_rows = stage_logit_rows(s, B * T)};
    return carve(&a, s, NULL) + sizeof(nb_acts) + sizeof(block_acts) * (size_t)s->n_blocks;
}

nb_acts *nb_acts_create(const nb_stage *s, int B, int T) {
    if (B <= 0 || T <= 0 || T > s->cfg.context) {
        nb_fail("activation slot: batch %d x sequence %d: expected B > 0 and 0 < T <= context (%d)", B, T,
                s->cfg.context);
        return NULL;
    }
    nb_acts *a = checked_calloc(1, sizeof *a);
    a->B = B;
    a->T = T;
    a->n_blocks = s->n_blocks;
    a->d = s->cfg.d_model;
    a->precision = s->precision;
    a->logit_rows = stage_logit_rows(s, B * T);
    a->blocks = checked_calloc((size_t)(s->n_blocks ? s->n_blocks : 1), sizeof(block_acts));
    a->bytes = carve(a, s, NULL);
    a->memory = aligned_alloc(64, a->bytes ? a->bytes : 64);
    if (!a->memory) {
        fprintf(stderr, "nobubble: out of memory allocating %zu bytes of activations\n", a->bytes);
        exit(3);
    }
    memset(a->memory, 0, a->bytes);
    carve(a, s, a->memory);
    return a;
}

void nb_acts_free(nb_acts *a) {
    if (!a) return;
    free(a->memory);
    free(a->blocks);
    free(a);
}

const float *nb_acts_output(const nb_acts *a) { return a->res + (size_t)a->n_blocks * a->B * a->T * a->d; }
const float *nb_acts_logits(const nb_acts *a) { return a->logit_rows == a->B * a->T ? a->logits : NULL; }
const float *nb_acts_input_grad(const nb_acts *a) { return a->dinput; }
float nb_acts_loss(const nb_acts *a) { return a->loss; }

/* ---- forward and backward ---- */

block_weights weights_of_block(const nb_stage *s, const float *w, int l) {
    const nb_tensor *t = &s->tensors[(s->has_embed ? 1 : 0) + l * TENSORS_PER_BLOCK];
    block_weights b = {w + t[B_LN1].offset, w + t[B_Q].offset,  w + t[B_O].offset,
                       w + t[B_LN2].offset, w + t[B_GATE].offset, w + t[B_DOWN].offset};
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

static void block_forward(const nb_stage *s, const block_weights *w, block_acts *b, const float *x, float *out,
                          int B, int T) {
    dims m = stage_dims(&s->cfg);
    int N = B * T;
    float eps = (float)s->cfg.norm_eps;
    rmsnorm_forward(b->ln1, b->rstd1, x, w->ln1, N, m.d, eps);
    linear_forward(b->qkv, 0.0f, b->ln1, w->wqkv, N, m.d, m.qkv);
    rope_forward(b->qkv, B, T, m.qkv, m.H + m.Hkv, m.hd, s->rope_cos, s->rope_sin);
    attention_forward(b->att, b->lse, b->qkv, B, T, m.H, m.Hkv, m.hd, 0);
    /* Residual adds are folded into the output GEMMs: copy the stream, then beta = 1. */
    memcpy(b->mid, x, sizeof(float) * (size_t)N * m.d);
    linear_forward(b->mid, 1.0f, b->att, w->wo, N, m.dq, m.d);
    rmsnorm_forward(b->ln2, b->rstd2, b->mid, w->ln2, N, m.d, eps);
    linear_forward(b->gu, 0.0f, b->ln2, w->wgu, N, m.d, 2 * m.F);
    swiglu_forward(b->h, b->gu, N, m.F);
    memcpy(out, b->mid, sizeof(float) * (size_t)N * m.d);
    linear_forward(out, 1.0f, b->h, w->wdown, N, m.F, m.d);
}

/* dres holds the gradient of the block's output on entry and of its input on return. */
static void block_backward(const nb_stage *s, const block_weights *w, const block_weights *g, block_acts *b,
                           nb_acts *a, const float *x) {
    dims m = stage_dims(&s->cfg);
    int B = a->B, T = a->T, N = B * T;
    float *dres = a->dres;
    /* MLP branch */
    linear_backward(a->dh, 0.0f, (float *)g->wdown, dres, b->h, w->wdown, N, m.F, m.d);
    swiglu_backward(a->dgu, a->dh, b->gu, N, m.F);
    linear_backward(a->dln, 0.0f, (float *)g->wgu, a->dgu, b->ln2, w->wgu, N, m.d, 2 * m.F);
    rmsnorm_backward(dres, (float *)g->ln2, a->dln, b->mid, w->ln2, b->rstd2, N, m.d);
    /* attention branch */
    linear_backward(a->datt, 0.0f, (float *)g->wo, dres, b->att, w->wo, N, m.dq, m.d);
    attention_backward(a->dqkv, a->datt, b->att, b->lse, b->qkv, B, T, m.H, m.Hkv, m.hd, 0);
    rope_backward(a->dqkv, B, T, m.qkv, m.H + m.Hkv, m.hd, s->rope_cos, s->rope_sin);
    linear_backward(a->dln, 0.0f, (float *)g->wqkv, a->dqkv, b->ln1, w->wqkv, N, m.d, m.qkv);
    rmsnorm_backward(dres, (float *)g->ln1, a->dln, x, w->ln1, b->rstd1, N, m.d);
}

/* ---- the same under bf16: the products through nb_gemm_bf16 on the version's bf16 copy (w16) ---- */

typedef struct {
    const nb_bf16 *wqkv, *wo, *wgu, *wdown;
} block_weights16;

static block_weights16 weights16_of_block(const nb_stage *s, const nb_bf16 *w16, int l) {
    const nb_tensor *t = &s->tensors[(s->has_embed ? 1 : 0) + l * TENSORS_PER_BLOCK];
    block_weights16 b = {w16 + t[B_Q].offset, w16 + t[B_O].offset, w16 + t[B_GATE].offset, w16 + t[B_DOWN].offset};
    return b;
}

static void block_forward_bf16(const nb_stage *s, const block_weights *w, const block_weights16 *w16, block_acts *b,
                               const float *x, float *out, int B, int T) {
    dims m = stage_dims(&s->cfg);
    int N = B * T;
    const float eps = (float)s->cfg.norm_eps;
    rmsnorm_forward_bf16(b->ln1b, b->rstd1, x, w->ln1, N, m.d, eps);
    linear_forward_bf16(b->qkv, 0.0f, b->ln1b, w16->wqkv, N, m.d, m.qkv);
    rope_forward(b->qkv, B, T, m.qkv, m.H + m.Hkv, m.hd, s->rope_cos, s->rope_sin);
    nb_bf16_round(b->qkv, (size_t)N * m.qkv);  /* q, k, v as attention's bf16 operands (kept for backward) */
    attention_forward(b->att, b->lse, b->qkv, B, T, m.H, m.Hkv, m.hd, 1);
    nb_bf16 *att16 = stage_x16_scratch(s, (size_t)N * m.dq);
    nb_bf16_cast(att16, b->att, (size_t)N * m.dq);
    memcpy(b->mid, x, sizeof(float) * (size_t)N * m.d);
    linear_forward_bf16(b->mid, 1.0f, att16, w16->wo, N, m.dq, m.d);
    rmsnorm_forward_bf16(b->ln2b, b->rstd2, b->mid, w->ln2, N, m.d, eps);
    linear_forward_bf16(b->gu, 0.0f, b->ln2b, w16->wgu, N, m.d, 2 * m.F);
    swiglu_forward_bf16(b->hb, b->gu, N, m.F);
    memcpy(out, b->mid, sizeof(float) * (size_t)N * m.d);
    linear_forward_bf16(out, 1.0f, b->hb, w16->wdown, N, m.F, m.d);
}

static void block_backward_bf16(const nb_stage *s, const block_weights *w, const block_weights16 *w16,
                                const block_weights *g, block_acts *b, nb_acts *a, const float *x) {
    dims m = stage_dims(&s->cfg);
    int B = a->B, T = a->T, N = B * T;
    float *dres = a->dres;
    nb_bf16 *dy16 = stage_dy16_scratch(s, (size_t)N * (m.qkv > 2 * m.F ? m.qkv : 2 * m.F));
    /* MLP branch */
    linear_backward_bf16(a->dh, 0.0f, (float *)g->wdown, dres, b->hb, w16->wdown, N, m.F, m.d, dy16);
    swiglu_backward(a->dgu, a->dh, b->gu, N, m.F);
    linear_backward_bf16(a->dln, 0.0f, (float *)g->wgu, a->dgu, b->ln2b, w16->wgu, N, m.d, 2 * m.F, dy16);
    rmsnorm_backward(dres, (float *)g->ln2, a->dln, b->mid, w->ln2, b->rstd2, N, m.d);
    /* attention branch */
    nb_bf16 *att16 = stage_x16_scratch(s, (size_t)N * m.dq);
    nb_bf16_cast(att16, b->att, (size_t)N * m.dq);
    linear_backward_bf16(a->datt, 0.0f, (float *)g->wo, dres, att16, w16->wo, N, m.dq, m.d, dy16);
    nb_bf16_round(a->datt, (size_t)N * m.dq);  /* dO as attention's bf16 operand */
    attention_backward(a->dqkv, a->datt, b->att, b->lse, b->qkv, B, T, m.H, m.Hkv, m.hd, 1);
    rope_backward(a->dqkv, B, T, m.qkv, m.H + m.Hkv, m.hd, s->rope_cos, s->rope_sin);
    linear_backward_bf16(a->dln, 0.0f, (float *)g->wqkv, a->dqkv, b->ln1b, w16->wqkv, N, m.d, m.qkv, dy16);
    rmsnorm_backward(dres, (float *)g->ln1, a->dln, x, w->ln1, b->rstd1, N, m.d);
}

/* ---- the head and the loss, by chunks of rows ---- */

/* Where the logits of rows r0.. go: their place in the whole micro-batch's logits, or the one chunk. */
static float *chunk_logits(const nb_stage *s, nb_acts *a, int r0) {
    return a->logit_rows == a->B * a->T ? a->logits + (size_t)r0 * s->cfg.vocab_size : a->logits;
}

/* z = the logits of `rows` rows from r0: the final norm's output times the head. */
static void head_product(const nb_stage *s, const float *w, const nb_bf16 *w16, const nb_acts *a, float *z, int r0,
                         int rows) {
    dims m = stage_dims(&s->cfg);
    const float *head = head_weights(s, w);
    if (w16) linear_forward_bf16(z, 0.0f, a->lnfb + (size_t)r0 * m.d, w16 + (head - w), rows, m.d, m.V);
    else linear_forward(z, 0.0f, a->lnf + (size_t)r0 * m.d, head, rows, m.d, m.V);
}

/* The loss's gradient through the head, chunk by chunk: dln (the final norm's output gradient) and the
 * head's weight gradient. A slot that keeps one chunk recomputes its logits first. */
static void head_backward(nb_stage *s, const float *w, const nb_bf16 *w16, nb_acts *a, float loss_scale) {
    dims m = stage_dims(&s->cfg);
    const int N = a->B * a->T;
    float *dhead = s->tied_head_grad ? s->tied_head_grad : s->grads + s->tensors[s->n_tensors - 1].offset;
    const float *head = head_weights(s, w);
    for (int r0 = 0; r0 < N; r0 += a->logit_rows) {
        const int rows = N - r0 < a->logit_rows ? N - r0 : a->logit_rows;
        float *z = chunk_logits(s, a, r0), *dln = a->dln + (size_t)r0 * m.d;
        if (a->logit_rows < N) head_product(s, w, w16, a, z, r0, rows);
        cross_entropy_backward(z, a->ce_lse + r0, a->targets + r0, rows, m.V, loss_scale, N);
        if (w16)
            linear_backward_bf16(dln, 0.0f, dhead, z, a->lnfb + (size_t)r0 * m.d, w16 + (head - w), rows, m.d, m.V,
                                 stage_dy16_scratch(s, (size_t)rows * m.V));
        else
            linear_backward(dln, 0.0f, dhead, z, a->lnf + (size_t)r0 * m.d, head, rows, m.d, m.V);
    }
}

/* The blocks, then (last stage) the final norm, head and loss. */
static void stage_body_forward(const nb_stage *s, const float *w, long version, nb_acts *a) {
    dims m = stage_dims(&s->cfg);
    int B = a->B, T = a->T, N = B * T;
    const nb_bf16 *w16 = s->precision == NB_PRECISION_BF16 ? stage_bf16_weights(s, w, version) : NULL;
    for (int l = 0; l < s->n_blocks; l++) {
        block_weights bw = weights_of_block(s, w, l);
        const float *x = a->res + (size_t)l * N * m.d;
        float *out = a->res + (size_t)(l + 1) * N * m.d;
        if (w16) {
            block_weights16 bw16 = weights16_of_block(s, w16, l);
            block_forward_bf16(s, &bw, &bw16, &a->blocks[l], x, out, B, T);
        } else {
            block_forward(s, &bw, &a->blocks[l], x, out, B, T);
        }
    }
    if (!s->has_head) return;
    const float *xf = a->res + (size_t)s->n_blocks * N * m.d;
    const float *gain = w + s->tensors[final_norm_index(s)].offset;
    if (w16) rmsnorm_forward_bf16(a->lnfb, a->rstdf, xf, gain, N, m.d, (float)s->cfg.norm_eps);
    else rmsnorm_forward(a->lnf, a->rstdf, xf, gain, N, m.d, (float)s->cfg.norm_eps);
    double total = 0.0;
    for (int r0 = 0; r0 < N; r0 += a->logit_rows) {
        const int rows = N - r0 < a->logit_rows ? N - r0 : a->logit_rows;
        float *z = chunk_logits(s, a, r0);
        head_product(s, w, w16, a, z, r0, rows);
        total += cross_entropy_forward(a->ce_lse + r0, z, a->targets + r0, rows, m.V);
    }
    a->loss = (float)(total / N);
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
    if (s->has_embed) {
        for (int n = 0; n < N; n++)
            if (tokens[n] < 0 || tokens[n] >= m.V)
                return nb_fail("token id %d at position %d is outside the vocabulary [0, %d)", tokens[n], n, m.V);
        memcpy(a->tokens, tokens, sizeof(int) * (size_t)N);
        embedding_forward(a->res, tokens, w + s->tensors[0].offset, N, m.d);
    } else {
        memcpy(a->res, x_in, sizeof(float) * (size_t)N * m.d);
    }
    if (s->has_head)
        for (int n = 0; n < N; n++)
            if (targets[n] < 0 || targets[n] >= m.V)
                return nb_fail("target id %d at position %d is outside the vocabulary [0, %d)", targets[n], n, m.V);
    if (s->has_head) memcpy(a->targets, targets, sizeof(int) * (size_t)N);
    stage_body_forward(s, w, version, a);
    if (s->has_head && loss) *loss = a->loss;
    return 0;
}

int nb_stage_backward(nb_stage *s, const float *w, long version, nb_acts *a, const float *dout, float loss_scale) {
    dims m = stage_dims(&s->cfg);
    int N = a->B * a->T;
    if (a->precision != s->precision)
        return nb_fail("stage %d: activation slot was made for %s, the stage runs %s", s->index,
                       nb_precision_name(a->precision), nb_precision_name(s->precision));
    const nb_bf16 *w16 = s->precision == NB_PRECISION_BF16 ? stage_bf16_weights(s, w, version) : NULL;
    if (s->has_head) {
        int norm_index = final_norm_index(s);
        const float *xf = a->res + (size_t)s->n_blocks * N * m.d;
        head_backward(s, w, w16, a, loss_scale);
        memset(a->dres, 0, sizeof(float) * (size_t)N * m.d);
        rmsnorm_backward(a->dres, s->grads + s->tensors[norm_index].offset, a->dln, xf,
                         w + s->tensors[norm_index].offset, a->rstdf, N, m.d);
    } else {
        memcpy(a->dres, dout, sizeof(float) * (size_t)N * m.d);
    }
    for (int l = s->n_blocks - 1; l >= 0; l--) {
        block_weights bw = weights_of_block(s, w, l), bg = grads_of_block(s, l);
        const float *x = a->res + (size_t)l * N * m.d;
        if (w16) {
            block_weights16 bw16 = weights16_of_block(s, w16, l);
            block_backward_bf16(s, &bw, &bw16, &bg, &a->blocks[l], a, x);
        } else {
            block_backward(s, &bw, &bg, &a->blocks[l], a, x);
        }
    }
    if (s->has_embed) embedding_backward(s->grads + s->tensors[0].offset, a->dres, a->tokens, N, m.d);
    else memcpy(a->dinput, a->dres, sizeof(float) * (size_t)N * m.d);
    return 0;
}
