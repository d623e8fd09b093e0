/* nobubble: the model. A decoder-only Llama (RMSNorm, rotary attention with grouped-query
 * heads, SwiGLU MLP, tied or untied LM head, mean cross-entropy), held as a sequence of
 * stages. A stage is a contiguous range of transformer blocks; the first stage also owns the
 * token embedding, the last the final norm, the head and the loss. An unsplit model is one
 * stage. A stage's parameters live in one allocation described by a table of named tensors
 * (Hugging Face Llama names, linear weights stored (out, in)); its gradients mirror it. */
#ifndef NOBUBBLE_MODEL_H
#define NOBUBBLE_MODEL_H
#include <stddef.h>
#include <stdint.h>
#include "nobubble/backend.h"
#include "nobubble/common.h"

/* ---- configuration ---- */
typedef struct nb_config {
    int vocab_size;
    int d_model;
    int n_layers;
    int n_heads;
    int n_kv_heads;   /* divides n_heads (grouped-query attention) */
    int d_ffn;
    int context;      /* longest sequence the model accepts */
    double rope_theta;
    double norm_eps;
    int tied;         /* 1: the LM head is the token embedding */
    /* Mixture of experts (docs/moe.md): 0 experts is the dense model, whose three other fields stay 0. With
     * n_experts >= 1, block l's MLP is a MoE block when l % moe_every == moe_every - 1 (1: every block; 2:
     * blocks 1, 3, 5, ...): a router over n_experts SwiGLU experts of width d_ffn, each token sent to
     * experts_per_token of them; the objective adds aux_coef times the mean over the MoE blocks of their
     * load-balancing losses. */
    int n_experts, experts_per_token, moe_every;
    double aux_coef;
} nb_config;

/* Fills *out with a named preset (tiny, small, medium, smollm-135m, smollm-360m; moe-tiny, moe-small). */
int nb_config_preset(const char *name, nb_config *out);
/* Space-separated list of the preset names, for help texts. */
const char *nb_config_preset_names(void);
/* Applies one "field=value" override (vocab_size, d_model, n_layers, n_heads, n_kv_heads,
 * d_ffn, context, rope_theta, norm_eps, tied, n_experts, experts_per_token, moe_every, aux_coef). */
int nb_config_override(nb_config *c, const char *assignment);
/* Checks every field and their relations; the error names the field and the expectation. */
int nb_config_validate(const nb_config *c);
/* A micro-batch of B sequences of T tokens for this model: B, T >= 1, T <= context, and its largest
 * activation (B x T x the largest of vocab_size, d_ffn, d_model values: the logits, as a rule) at most
 * 2^31 - 1 values, which keeps GEMM dimensions and indices in 32 bits and the buffer under 8 GiB. Fails
 * naming flags (--batch, --seq) and sizes. */
int nb_config_check_batch(const nb_config *c, long long B, long long T);
/* Writes the configuration as one JSON object into buf (always NUL-terminated). */
void nb_config_json(const nb_config *c, char *buf, size_t size);
/* The blocks per stage (n_stages entries, each >= 1) that best balance the stages' training
 * FLOPs at sequence length T, the last stage also carrying the LM head: a pipeline runs at the
 * pace of its slowest stage, and an even split leaves the last one the slowest. */
int nb_config_balanced_split(const nb_config *c, int T, int n_stages, int *blocks);
/* Parameters of the whole model (a tied embedding counted once). */
size_t nb_config_param_count(const nb_config *c);
/* The parameters one token's forward uses: all but the experts it is not sent to (the dense model's
 * count for a dense model). */
size_t nb_config_active_param_count(const nb_config *c);
/* 1 when block l (of the whole model) has a MoE MLP; the number of such blocks. */
int nb_config_block_is_moe(const nb_config *c, int l);
int nb_config_moe_blocks(const nb_config *c);
/* Training FLOPs per token of block l at sequence length T (its share of nb_model_train_flops_per_token). */
double nb_config_block_flops(const nb_config *c, int l, int T);

/* ---- precision (docs/rules.md section 5) ----
 * fp32: everything in float32 (the reference path). bf16: every GEMM (the linear layers' forward and
 * both backward products, the head's, and attention's) takes bf16 operands and accumulates in
 * float32; weights, gradients, optimizer state, the loss, softmax and normalization statistics stay
 * float32. auto is a run's choice (bf16 where the CPU has bf16 instructions), resolved before any
 * stage is built: a stage is fp32 or bf16. */
typedef enum { NB_PRECISION_FP32, NB_PRECISION_BF16, NB_PRECISION_AUTO } nb_precision;
/* "fp32", "bf16" or "auto". */
const char *nb_precision_name(nb_precision p);
/* The i-th precision's name, NULL past the last (the settings table's enum row). */
const char *nb_precision_names(int i);
/* auto made concrete: bf16 where oneDNN reports bf16 instructions (AVX512-BF16, AMX), fp32 elsewhere;
 * fp32 and bf16 as they are. */
nb_precision nb_precision_choose(nb_precision p);
/* Names the weights passed to nb_stage_forward/backward when the caller cannot (see there). */
#define NB_VERSION_NONE (-1L)

/* ---- parameter tables ---- */
typedef enum { NB_GROUP_MATRIX, NB_GROUP_EMBED, NB_GROUP_GAIN } nb_group;

typedef struct nb_tensor {
    char name[64];   /* Hugging Face Llama name, e.g. model.layers.3.self_attn.q_proj.weight */
    int ndim;        /* 1 or 2 */
    int shape[2];    /* (out_features, in_features) for a linear weight */
    size_t offset;   /* in floats, from the start of the stage's allocation */
    size_t numel;
    nb_group group;
    int tied_copy;   /* the last stage's copy of a tied embedding (not exported) */
} nb_tensor;

/* Opaque: what one micro-batch's forward keeps for its backward (an "activation slot"). */
typedef struct nb_acts nb_acts;

typedef struct nb_stage {
    nb_config cfg;
    int index, count;            /* this stage's position and the number of stages */
    int first_block, n_blocks;   /* the contiguous range of blocks it runs */
    int has_embed, has_head;     /* first stage / last stage */
    /* What runs its products (and, with a device, holds its memory): the run's backend, chosen once when
     * it starts; the optimizer and the delay rules of the stage use it too (nobubble/backend.h). */
    const nb_backend *backend;
    int n_tensors;
    nb_tensor *tensors;
    size_t n_params;
    float *params;               /* the current weights: one allocation */
    float *grads;                /* mirrors params; backward accumulates (+=) into it */
    /* A tied model in one stage uses the embedding as its head; the head's gradient is
     * accumulated here and added to the embedding's by nb_stage_sum_tied_grad, in the
     * same order as across a split, so that splits are bitwise identical. */
    float *tied_head_grad;
    float *rope_cos, *rope_sin;  /* [context][head_dim/2] */
    /* NB_PRECISION_FP32 or NB_PRECISION_BF16 (nb_stage_set_precision); under bf16, the weight
     * versions cast to bf16 and the stage's scratch (src/model/precision.c). */
    int precision;
    struct nb_bf16_state *bf16;
    /* What one forward or backward needs only while it runs (the gradients of a block's tensors, a chunk
     * of logits, ...): one set per stage, shared by its activation slots (src/model/acts.c). */
    struct nb_stage_scratch *scratch;
    /* The last stage computes the logits of at most this many rows at once (0: automatic, all the
     * micro-batch's rows when their float32 logits take at most 64 MiB, else as many as fit). A slot of
     * whole rows keeps the logits for backward (bf16: their gradient, in bf16); with chunks, the slot
     * keeps neither, backward recomputes each chunk's logits (one more head product) and nb_acts_logits
     * gives NULL. Set before making slots. */
    int logit_rows;
    /* While nb_stage_backward_input runs: where its linear layers' weight-gradient products go instead
     * of being computed (NULL otherwise). */
    struct nb_wgrad *defer;
    /* While nb_stage_backward runs a whole backward (not B of a split one), when not NULL: told each time a
     * range of grads is final for it (this backward writes it no more), grads[offset .. offset + n), after the
     * backend's queued work is done. The ranges come from the end of grads to its start and tile it: the final
     * norm and head (the last stage), each block from the last, the embedding (the first stage); the ranges
     * nb_stage_grad_ranges lists. A whole tied model's head gradient (tied_head_grad) is in none. A non-zero
     * return fails the backward (nb_last_error). Data parallelism's buckets (src/train/exec/worker.c). */
    int (*grads_done)(void *ctx, size_t offset, size_t n);
    void *grads_done_ctx;
} nb_stage;

typedef struct nb_model {
    nb_config cfg;
    int n_stages;
    nb_stage *stages;
} nb_model;

/* Builds the stages on backend (NULL: nb_backend_default()), which must outlive the model.
 * blocks_per_stage may be NULL for an even split (earlier stages take the remainder); otherwise its
 * n_stages entries must be >= 0 and sum to n_layers. On -1 (a bad split, or memory that ran out)
 * nothing is left allocated. */
int nb_model_create(nb_model *m, const nb_config *cfg, int n_stages, const int *blocks_per_stage,
                    const nb_backend *backend);
/* The same stages with their tensor tables only (no weights, gradients or scratch): what a memory
 * estimate reads (n_params, tensors, nb_acts_bytes, nb_stage_scratch_bytes) before anything large is
 * allocated. Free with nb_model_free. */
int nb_model_layout(nb_model *m, const nb_config *cfg, int n_stages, const int *blocks_per_stage);
void nb_model_free(nb_model *m);
/* For a process that runs one stage of a split (an MPI rank): frees the other stages' weights and
 * gradients (their tensor tables stay). nb_model_alloc_stage gives a stage zeroed weights again,
 * e.g. to receive them at the end of a run. */
void nb_model_keep_only(nb_model *m, int stage);
/* The same for a process that runs the stages worker, worker + workers, ... (an interleaved pipeline's
 * worker: its virtual stages); nb_model_keep_only(m, s) is nb_model_keep_worker(m, s, n_stages). */
void nb_model_keep_worker(nb_model *m, int worker, int workers);
int nb_model_alloc_stage(nb_model *m, int stage);
/* N(0, 0.02) for matrices and embeddings, the two output projections of each block (o_proj,
 * down_proj) scaled by 1/sqrt(2 n_layers), gains 1. Every tensor draws from its own stream,
 * keyed by the seed and its name, so a model split any way gets the same weights. */
/* A stage in a device's memory gets its weights drawn on the host and copied over. 0, or -1 when the
 * host's memory for that copy ran out. */
int nb_model_init(nb_model *m, uint64_t seed);
void nb_model_zero_grads(nb_model *m);
/* A tied embedding's gradient completed on the stage that holds the embedding (the first): the head's
 * part added to the embedding's in one order whatever the split, so that every split gives bitwise the
 * same weights. The head's part is the stage's own tied_head_grad when it holds the head too (then
 * zeroed for the next step), else head_grad, the gradient of the last stage's copy (NULL: none).
 * Nothing on another stage or an untied model. Once per step, after every micro-batch's backward. */
void nb_stage_sum_tied_grad(nb_stage *s, const float *head_grad);
/* Finds a tensor by name; *stage_out (optional) receives its stage. NULL if absent.
 * With a split tied model the first stage's embedding is returned. */
const nb_tensor *nb_model_find(const nb_model *m, const char *name, nb_stage **stage_out);

/* ---- running a stage ---- */
/* NULL (nb_last_error) when B x T does not fit the stage's context or memory runs out. */
nb_acts *nb_acts_create(const nb_stage *s, int B, int T);
void nb_acts_free(nb_acts *a);
/* Bytes of one activation slot for micro-batches of B x T: what each micro-batch in flight holds. */
size_t nb_acts_bytes(const nb_stage *s, int B, int T);
/* Bytes of the stage's scratch for such micro-batches: held once per stage, whatever the slots. */
size_t nb_stage_scratch_bytes(const nb_stage *s, int B, int T);
/* The stage's output [B*T*d_model] after forward (a non-last stage). */
const float *nb_acts_output(const nb_acts *a);
/* The logits [B*T*vocab] after forward, until backward (the last stage), or NULL when the slot does not
 * keep them: chunks of rows (nb_stage.logit_rows), or a bf16 stage (which keeps their gradient in bf16). */
const float *nb_acts_logits(const nb_acts *a);
/* The mean cross-entropy of the last forward (the last stage). */
float nb_acts_loss(const nb_acts *a);
/* After a forward: the stage's MoE blocks' load-balancing losses, summed (0 without MoE blocks); block
 * l's expert loads (n_experts fractions of the token-expert assignments, summing to 1), NULL for a dense
 * block. */
double nb_acts_aux_loss(const nb_acts *a);
const float *nb_acts_expert_load(const nb_acts *a, int l);
/* After a forward: block l's chosen experts, k per token (experts_per_token), token after token, largest
 * weight first; NULL for a dense block. */
const int *nb_acts_expert_choice(const nb_acts *a, int l);
/* The gradient of the stage's input [B*T*d_model] after backward (a non-first stage). */
const float *nb_acts_input_grad(const nb_acts *a);

/* Forward of one micro-batch of B sequences of T tokens on the weights w (laid out like
 * s->params; a stashed older version is allowed). The first stage reads tokens[B*T], the
 * others x_in[B*T*d]. The last stage reads targets[B*T] and writes the mean cross-entropy
 * to *loss. Token ids outside the vocabulary and T > context are errors. */
int nb_stage_forward(const nb_stage *s, const float *w, long version, nb_acts *a, const int *tokens,
                     const float *x_in, const int *targets, float *loss);
/* Backward of the micro-batch held in a, on the same weights w as its forward. The last
 * stage seeds from its loss times loss_scale (1/M when M micro-batches are accumulated);
 * the others read dout[B*T*d]. Gradients are added to s->grads. Both return -1 when memory for
 * their scratch runs out (backward's gradients are then partial). Backward refuses a slot whose last
 * forward was not a successful nb_stage_forward of this stage (none yet, a failed one, another stage's). */
int nb_stage_backward(nb_stage *s, const float *w, long version, nb_acts *a, const float *dout, float loss_scale);
/* The backward split in two (zero-bubble schedules, ZB-H1): its input-gradient half B, which the stage
 * upstream waits for, and its weight-gradient half W, which only the update waits for and a schedule may
 * run later. B is nb_stage_backward without the products that give the linear layers' weight gradients
 * (dW += dY^T X, the second product of each): it records each of them in g (which layer, a copy of its
 * output gradient dY, its input X in the slot) and leaves them out. W runs the recorded products, the
 * same calls on the same values, so that B then W of every micro-batch, W in micro-batch order, gives
 * bitwise the gradients of nb_stage_backward. The norms' and the embedding's gradients stay in B (they
 * add into tensors W does not touch). Every stage splits: fp32 and bf16 (the recorded dY is then the
 * product's bf16 operand, with its scale), dense and MoE blocks (the router's and each expert's products,
 * the grouped rows kept in the slot). The slot a must be kept, unchanged, until W has run. */
typedef struct nb_wgrad nb_wgrad;
nb_wgrad *nb_wgrad_create(void);
void nb_wgrad_free(nb_wgrad *g);
/* B: as nb_stage_backward (its arguments and results, the input gradient included), with the weight
 * gradients of the linear layers recorded in g instead (g emptied first). */
int nb_stage_backward_input(nb_stage *s, const float *w, long version, nb_acts *a, const float *dout, float loss_scale,
                            nb_wgrad *g);
/* W: the products g recorded, added to s->grads; g emptied. */
int nb_stage_backward_weight(nb_stage *s, nb_wgrad *g);
/* Bytes g holds for one micro-batch of B x T on this stage (the output gradients it copies). */
size_t nb_wgrad_bytes(const nb_stage *s, int B, int T);
/* version (both): a number that names w's contents, the step whose weights w holds, so that a bf16
 * stage casts each version once and keeps the cast while the version lives; NB_VERSION_NONE when
 * the caller cannot name them (a bf16 stage then casts w anew on every call). fp32 ignores it. */

/* Makes the stage run in precision p (NB_PRECISION_FP32 or NB_PRECISION_BF16), keeping at most
 * `versions` weight versions cast to bf16 at once (the versions its forwards and backwards use, plus
 * one). Call before its activation slots are made: a slot is laid out for one precision. */
int nb_stage_set_precision(nb_stage *s, nb_precision p, int versions);
int nb_model_set_precision(nb_model *m, nb_precision p, int versions);

/* With a tied embedding split across stages: copies the first stage's embedding into the last
 * stage's copy, so that the copy follows its owner exactly (after each optimizer step). */
void nb_model_sync_tied_copy(nb_model *m);

/* ---- generation ---- */
/* A key/value cache for generating up to max_len (<= context) tokens with the model's current
 * weights, one token at a time. */
typedef struct nb_kv_cache nb_kv_cache;
nb_kv_cache *nb_kv_cache_create(const nb_model *m, int max_len);
void nb_kv_cache_free(nb_kv_cache *k);
int nb_kv_cache_length(const nb_kv_cache *k);
/* Feeds the token at the next position and writes the logits [vocab] that predict the one after. */
int nb_decode_step(const nb_model *m, nb_kv_cache *k, int token, float *logits);

/* FNV-1a 64 over every stage's weights in tensor order (tied copies skipped): two runs with
 * equal hashes have bitwise equal weights. */
uint64_t nb_model_weights_hash(const nb_model *m);
/* Model FLOPs of one training step (forward + backward) per token at sequence length T:
 * 6 x (matrix parameters, head included) + 12 x n_layers x n_heads x head_dim x (T+1)/2
 * for causal attention. A MoE block counts its router and the experts a token uses (active
 * parameters). */
double nb_model_train_flops_per_token(const nb_config *c, int T);
#endif
