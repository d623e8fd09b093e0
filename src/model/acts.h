/* Internal: a stage's activation slots (what one micro-batch's forward keeps for its backward, one
 * slot per micro-batch in flight) and its scratch (what one forward or backward needs only while it
 * runs: one set per stage, shared by all its slots, since a stage runs one pass at a time). */
#ifndef NB_MODEL_ACTS_H
#define NB_MODEL_ACTS_H
#include "backend/backend.h"
#include "layers/moe.h"
#include "nobubble/model.h"

/* The widths of a block's tensors. */
typedef struct {
    int d, hd, H, Hkv, dq, dkv, qkv, F, V;
} dims;

static inline dims stage_dims(const nb_config *c) {
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

/* What a block's backward reads. An fp32 slot fills the float arrays; a bf16 slot keeps in bf16 what
 * the backward reads only as a product operand or what is already rounded to bf16 values (the norms'
 * outputs, q/k/v after RoPE, attention's output, gate/up, SwiGLU's output: the *b arrays), and its
 * float32 twins are empty. Statistics (rstd, lse) and the residual stream (mid) stay float32 in both. */
typedef struct {
    float *rstd1, *lse, *mid, *rstd2;
    float *ln1, *qkv, *att, *ln2, *gu, *h;
    nb_bf16 *ln1b, *qkvb, *attb, *ln2b, *gub, *hb;
    /* A MoE block (moe.h): its routing and grouped rows in place of gu and h, and the forward's expert loads
     * (E fractions of the assignments); moe.m.E is 0 in a dense block. Its pass scratch is the stage's
     * (SCR_MOE, bound by stage_moe_scratch before each pass). */
    moe_state moe;
    float *load;
} block_acts;

struct nb_acts {
    int B, T, n_blocks, d, precision;
    int logit_rows;      /* rows of logits computed at once: B*T, or a chunk (stage_logit_rows) */
    size_t bytes;
    void *memory;        /* the stage's backend's (nb_stage_place), freed there */
    const nb_backend *backend;
    int *tokens, *targets;
    float *res;          /* [n_blocks + 1][N][d]: each block's input, then the stage's output */
    block_acts *blocks;
    /* last stage: fp32 keeps the whole micro-batch's logits when logit_rows = B*T; bf16 keeps instead
     * their gradient (softmax - onehot) / (B*T) in bf16 (dlogits); chunks keep neither (recomputed). */
    float *lnf, *rstdf, *logits, *ce_lse;
    nb_bf16 *lnfb, *dlogits;
    float *dinput;       /* the gradient of the stage's input, sent after backward (not the first stage) */
    float loss;
    double aux;          /* the forward's load-balancing losses, summed over the stage's MoE blocks */
    /* The stage whose last nb_stage_forward filled the slot, NULL before one or after a failed one: backward
     * reads what that forward kept, so that it refuses a slot no forward of its stage filled (it would
     * otherwise add gradients of whatever the slot's memory holds, zeros for a new slot). */
    const void *forwarded_by;
};

/* The stage's backend: the one it holds, else the default (NULL with nb_last_error if that cannot open).
 * Its memory holds the stage's activation slots and scratch. */
static inline const nb_backend *stage_backend(const nb_stage *s) {
    return s->backend ? s->backend : nb_backend_default();
}

/* The MoE dimensions of the stage's block l for N rows; E = 0 for a dense block. */
moe_dims stage_moe_dims(const nb_stage *s, int l, int N);

/* Binds the stage's MoE scratch (SCR_MOE) into block b's state for a pass on N rows; -1 (nb_last_error)
 * when it cannot be allocated. */
int stage_moe_scratch(const nb_stage *s, block_acts *b, int N);

/* Rows of logits computed at once for micro-batches of N rows (0 on a stage without the head). */
int stage_logit_rows(const nb_stage *s, int N);

/* The stage's scratch buffers. Float32 unless named otherwise. */
typedef enum {
    SCR_DRES, SCR_DLN, SCR_DQKV, SCR_DATT, SCR_DGU, SCR_DH, /* backward: gradients of one block's tensors */
    SCR_LOGITS,  /* one chunk of logits (and a bf16 slot's whole logits, before their gradient is kept) */
    SCR_QKV, SCR_ATT, SCR_GU,  /* bf16: q/k/v, attention's output, gate/up in float32 while a pass runs */
    SCR_DY16,    /* bf16: a product's gradient operand (dy) cast to bf16; a chunk's dlogits */
    SCR_MOE,     /* a MoE block's pass scratch (moe_scratch_bytes), shared by the stage's MoE blocks */
    SCR_COUNT
} scratch_id;

/* Buffer id sized for micro-batches of N rows (grown on demand, contents not kept between calls); NULL
 * (nb_last_error) when memory runs out. */
void *stage_scratch(const nb_stage *s, scratch_id id, int N);
/* NULL (nb_last_error) when memory runs out. */
struct nb_stage_scratch *stage_scratch_new(void);
void stage_scratch_release(nb_stage *s);
#endif
