/* Activation slots and the stage's scratch (model/acts.h). A slot is one allocation carved into the
 * arrays a micro-batch's backward reads; the scratch is one set of grow-only buffers per stage for what
 * a pass needs only while it runs (the gradients of a block's tensors, a chunk of logits, the float32
 * values that a bf16 slot keeps in bf16), so that each micro-batch in flight holds only its slot. */
#include <stdlib.h>
#include <string.h>
#include "model/acts.h"
#include "util/alloc.h"
#include "util/error.h"

/* ---- slots ---- */

/* Carves one allocation into the slot's arrays. With base == NULL it only counts bytes. */
static size_t carve(nb_acts *a, const nb_stage *s, char *base) {
    dims m = stage_dims(&s->cfg);
    const size_t N = (size_t)a->B * a->T;
    const size_t b16 = a->precision == NB_PRECISION_BF16, f32 = 1 - b16;  /* which copy is kept */
    const size_t whole_logits = a->logit_rows == a->B * a->T;
    size_t off = 0;
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
        moe_dims moe = stage_moe_dims(s, l, (int)N);
        moe.bf16 = (int)b16;
        const size_t dense = moe.E == 0;  /* a MoE block keeps its routing and grouped rows instead of gu, h */
        TAKE(b->ln1, float, f32 * N * m.d);
        TAKE(b->ln1b, nb_bf16, b16 * N * m.d);
        TAKE(b->rstd1, float, N);
        TAKE(b->qkv, float, f32 * N * m.qkv);
        TAKE(b->qkvb, nb_bf16, b16 * N * m.qkv);
        TAKE(b->att, float, f32 * N * m.dq);
        TAKE(b->attb, nb_bf16, b16 * N * m.dq);
        TAKE(b->lse, float, N * m.H);
        TAKE(b->mid, float, N * m.d);
        TAKE(b->ln2, float, f32 * N * m.d);
        TAKE(b->ln2b, nb_bf16, b16 * N * m.d);
        TAKE(b->rstd2, float, N);
        TAKE(b->gu, float, dense * f32 * N * 2 * m.F);
        TAKE(b->gub, nb_bf16, dense * b16 * N * 2 * m.F);
        TAKE(b->h, float, dense * f32 * N * m.F);
        TAKE(b->hb, nb_bf16, dense * b16 * N * m.F);
        if (!dense) {
            char *state = NULL;
            TAKE(state, char, moe_state_bytes(&moe));
            TAKE(b->load, float, moe.E);
            if (base) moe_state_bind(&b->moe, &moe, state);
        }
    }
    if (s->has_head) {
        TAKE(a->lnf, float, f32 * N * m.d);
        TAKE(a->lnfb, nb_bf16, b16 * N * m.d);
        TAKE(a->rstdf, float, N);
        TAKE(a->logits, float, f32 * whole_logits * N * m.V);
        TAKE(a->dlogits, nb_bf16, b16 * whole_logits * N * m.V);
        TAKE(a->ce_lse, float, N);
    }
    TAKE(a->dinput, float, s->has_embed ? 0 : N * m.d);
#undef TAKE
    return off;
}

moe_dims stage_moe_dims(const nb_stage *s, int l, int N) {
    const nb_config *c = &s->cfg;
    moe_dims m = {N, c->d_model, c->d_ffn, 0, 0, 0};
    if (nb_config_block_is_moe(c, s->first_block + l)) {
        m.E = c->n_experts;
        m.k = c->experts_per_token;
    }
    return m;
}

/* Whole micro-batches' logits up to this many bytes of float32; beyond, chunks of rows that fit. */
#define LOGIT_BUDGET ((size_t)64 << 20)

int stage_logit_rows(const nb_stage *s, int N) {
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
    nb_acts *a = nb_calloc(1, sizeof *a, "an activation slot");
    if (!a) return NULL;
    a->B = B;
    a->T = T;
    a->n_blocks = s->n_blocks;
    a->d = s->cfg.d_model;
    a->precision = s->precision;
    a->logit_rows = stage_logit_rows(s, B * T);
    a->blocks = nb_calloc((size_t)s->n_blocks, sizeof(block_acts), "an activation slot's table of blocks");
    a->bytes = carve(a, s, NULL);
    a->backend = stage_backend(s);
    if (!a->blocks || !a->backend || !(a->memory = nb_backend_alloc(a->backend, a->bytes, "an activation slot's activations"))) {
        nb_acts_free(a);
        return NULL;
    }
    carve(a, s, a->memory);
    return a;
}

void nb_acts_free(nb_acts *a) {
    if (!a) return;
    if (a->backend) nb_backend_free(a->backend, a->memory);
    free(a->blocks);
    free(a);
}

const float *nb_acts_output(const nb_acts *a) { return a->res + (size_t)a->n_blocks * a->B * a->T * a->d; }
const float *nb_acts_logits(const nb_acts *a) {
    return a->precision != NB_PRECISION_BF16 && a->logit_rows == a->B * a->T ? a->logits : NULL;
}
const float *nb_acts_input_grad(const nb_acts *a) { return a->dinput; }
float nb_acts_loss(const nb_acts *a) { return a->loss; }
double nb_acts_aux_loss(const nb_acts *a) { return a->aux; }
const int *nb_acts_expert_choice(const nb_acts *a, int l) {
    return l >= 0 && l < a->n_blocks && a->blocks[l].moe.m.E > 0 ? a->blocks[l].moe.top : NULL;
}
const float *nb_acts_expert_load(const nb_acts *a, int l) {
    return l >= 0 && l < a->n_blocks && a->blocks[l].moe.m.E > 0 ? a->blocks[l].load : NULL;
}

/* ---- scratch ---- */

struct nb_stage_scratch {
    void *buffer[SCR_COUNT];
    size_t bytes[SCR_COUNT];
};

/* Bytes of buffer id for micro-batches of N rows on this stage (0 where its precision or place in the
 * model does not use it). */
static size_t scratch_bytes(const nb_stage *s, scratch_id id, int N) {
    const dims m = stage_dims(&s->cfg);
    const size_t n = (size_t)N, blocks = s->n_blocks > 0, bf16 = s->precision == NB_PRECISION_BF16;
    const size_t rows = (size_t)stage_logit_rows(s, N), chunked = s->has_head && rows < n;
    const size_t widest = m.qkv > 2 * m.F ? m.qkv : 2 * m.F;  /* >= d, dq: q is d wide */
    switch (id) {
    case SCR_DRES: return sizeof(float) * n * m.d;
    case SCR_DLN: return sizeof(float) * n * m.d;
    case SCR_DQKV: return sizeof(float) * blocks * n * m.qkv;
    case SCR_DATT: return sizeof(float) * blocks * n * m.dq;
    case SCR_DGU: return sizeof(float) * !bf16 * blocks * n * 2 * m.F;  /* bf16 writes it as bf16 (SCR_DY16) */
    case SCR_DH: return sizeof(float) * blocks * n * m.F;
    case SCR_LOGITS: return sizeof(float) * (bf16 || chunked) * rows * m.V;
    case SCR_QKV: return sizeof(float) * bf16 * blocks * n * m.qkv;
    case SCR_ATT: return sizeof(float) * bf16 * blocks * n * m.dq;
    case SCR_GU: return sizeof(float) * bf16 * blocks * n * 2 * m.F;
    case SCR_MOE: {
        int any = 0;
        for (int l = 0; l < s->n_blocks; l++) any |= nb_config_block_is_moe(&s->cfg, s->first_block + l);
        moe_dims md = {N, m.d, m.F, s->cfg.n_experts, s->cfg.experts_per_token, (int)bf16};
        return any ? moe_scratch_bytes(&md) : 0;
    }
    case SCR_DY16: {
        const size_t dy = blocks * n * widest, head = s->has_head ? (chunked ? rows * m.V : 0) : 0;
        return sizeof(nb_bf16) * bf16 * (dy > head ? dy : head);
    }
    default: return 0;
    }
}

int stage_moe_scratch(const nb_stage *s, block_acts *b, int N) {
    void *memory = stage_scratch(s, SCR_MOE, N);
    if (!memory) return -1;
    moe_scratch_bind(&b->moe, memory);
    return 0;
}

struct nb_stage_scratch *stage_scratch_new(void) {
    return nb_calloc(1, sizeof(struct nb_stage_scratch), "a stage's table of scratch buffers");
}

/* A buffer is allocated (1 byte at least) even where it is 0 bytes, so that NULL only means failure. */
void *stage_scratch(const nb_stage *s, scratch_id id, int N) {
    struct nb_stage_scratch *w = s->scratch;
    if ((unsigned)id >= SCR_COUNT) {
        nb_fail("stage %d: scratch buffer %d: expected 0 to %d", s->index, (int)id, SCR_COUNT - 1);
        return NULL;
    }
    const size_t need = scratch_bytes(s, id, N);
    const nb_backend *be = stage_backend(s);
    if (!be) return NULL;
    if (!w->buffer[id] || need > w->bytes[id]) {
        nb_backend_free(be, w->buffer[id]);
        w->bytes[id] = 0;
        if (!(w->buffer[id] = nb_backend_alloc(be, need ? need : 1, "a stage's scratch"))) return NULL;
        w->bytes[id] = need;
    }
    return w->buffer[id];
}

size_t nb_stage_scratch_bytes(const nb_stage *s, int B, int T) {
    size_t sum = 0;
    for (int id = 0; id < SCR_COUNT; id++) sum += scratch_bytes(s, (scratch_id)id, B * T);
    return sum;
}

void stage_scratch_release(nb_stage *s) {
    struct nb_stage_scratch *w = s->scratch;
    if (!w) return;
    const nb_backend *be = stage_backend(s);
    for (int id = 0; id < SCR_COUNT && be; id++) nb_backend_free(be, w->buffer[id]);
    free(w);
    s->scratch = NULL;
}
