/* Internal: the mixture-of-experts feed-forward block (moe.c), the layer that replaces the SwiGLU MLP in
 * a MoE model's blocks. The rule (docs/moe.md):
 *   router   z = x W_r^T (W_r: E x d, no bias); p = softmax(z) in fp32, row by row;
 *   top-k    the k experts of largest p, ties to the lower index, in that order (the token's slots);
 *            their weights w_j = p_j / (sum of the k chosen p), summed in slot order;
 *   experts  each a SwiGLU FFN: gu = x W_gu[e]^T (gate | up, 2F x d), h = silu(gate) * up,
 *            y = h W_down[e]^T (d x F);
 *   output   out[t] += w_0 y_0 + w_1 y_1 + ..., added in slot order;
 *   aux      E * sum_e f_e P_e (Switch form): f_e = (assignments to e) / N (sum_e f_e = k),
 *            P_e = the mean over the tokens of p_e; f carries no gradient.
 * Dropless: every token reaches its k experts, grouped by expert (rows in token order), one product per
 * expert and direction through the backend. Nothing depends on the thread count: the grouping scans the
 * tokens in order and every sum has a fixed order.
 * Under bf16 (moe_dims.bf16; docs/precision.md) every product takes bf16 operands and accumulates in
 * float32, as the dense layers' do: the router's (z from the bf16 normalized input and router, z itself
 * float32, the softmax, top-k and weights in float32), the experts' (the grouped inputs, gate|up and
 * SwiGLU's output kept in bf16, y float32), and in backward dy, dgu and dz cast to bf16 as operands. */
#ifndef NB_LAYERS_MOE_H
#define NB_LAYERS_MOE_H
#include "backend/backend.h"

enum { MOE_MAX_K = 64 };  /* experts per token at most */
enum { MOE_MAX_E = 1024 };  /* experts at most (a pass reads each expert's row count back to the host) */
enum { MOE_ROW_ALIGN = 64 };  /* under bf16 each expert's grouped rows are rounded up to a multiple of this (moe.c) */

typedef struct {
    int N, d, F, E, k;  /* tokens, model width, expert hidden width, experts, experts per token */
    int bf16;           /* 1: the products take bf16 operands (moe_forward_bf16, moe_backward_bf16) */
} moe_dims;

/* What a forward keeps for its backward (one block of memory: an activation slot's), and pointers into the
 * scratch that a pass uses only while it runs (bound before each forward and backward: moe_scratch_bind). */
typedef struct {
    moe_dims m;
    void *memory;
    float *probs;                          /* N x E: softmax(z) */
    int *top;                              /* N x k: each token's experts, slot by slot */
    float *weight;                         /* N x k: their renormalized weights */
    int *count, *start;                    /* E and E + 1: rows per expert, and where each begins */
    int *row_token, *slot_row;             /* N k: a grouped row's token; token t's slot j's row (t k + j) */
    float *xg, *gu, *h, *y;                /* grouped rows: inputs (d), gate|up (2F), hidden (F), output (d);
                                              under bf16 only y (xg, gu, h: NULL) */
    nb_bf16 *xg16, *gu16, *h16;            /* under bf16 (else NULL): the grouped inputs, gate|up and hidden */
    float *dy, *dh, *dgu, *dxg, *dp;       /* backward scratch: as above, and dp (N x E); under bf16 the
                                              forward also computes gate|up in dgu before its cast */
    nb_bf16 *op16;                         /* under bf16: the backward's operand cast (rows x max(d, 2F, E)) */
    double aux;                            /* the forward's load-balancing loss */
    struct nb_wgrad_sink *sink;           /* a split backward: the weight-gradient products go here (NULL: computed) */
} moe_state;

/* 0, or -1 with nb_last_error naming the field and its range (E >= 1, 1 <= k <= min(E, MOE_MAX_K), N, d,
 * F >= 1). */
int moe_check(const moe_dims *m);
/* The bytes of a state's kept arrays for these dimensions; moe_state_bind carves them from `memory` (64-byte
 * aligned, moe_state_bytes long), e.g. a slot's own allocation (moe_check first). */
size_t moe_state_bytes(const moe_dims *m);
void moe_state_bind(moe_state *s, const moe_dims *m, void *memory);
/* The bytes of a pass's scratch (dy, dh, dgu, dxg, dp, op16; a forward also uses dp and dgu) and its
 * binding: `scratch` (64-byte aligned, moe_scratch_bytes(&s->m) long) serves every state of the same
 * dimensions, one pass at a time (e.g. a stage's scratch). */
size_t moe_scratch_bytes(const moe_dims *m);
void moe_scratch_bind(moe_state *s, void *scratch);
/* The state for blocks of these dimensions (at most N tokens) with its own scratch: the struct in the host's
 * memory, its arrays in be's; NULL with nb_last_error. */
moe_state *moe_state_create(const nb_backend *be, const moe_dims *m);
void moe_state_free(const nb_backend *be, moe_state *s);

/* out[N x d] += the block's output for x[N x d] (the normalized input); w_router (E x d), w_gu (E blocks
 * of 2F x d), w_down (E blocks of d x F). Keeps in s what the backward needs; s->aux gets the layer's
 * load-balancing loss and load[e] (may be NULL) the fraction of the N k assignments that went to e. Each pass
 * returns 0, or -1 with nb_fail where the experts' row counts read back from be do not add up (a device's
 * failed copy: nothing is computed from them). */
int moe_forward(const nb_backend *be, moe_state *s, float *out, const float *x, const float *w_router,
                const float *w_gu, const float *w_down, float *load);
/* dx (overwritten, N x d) and the weights' gradients (+=) from dout = dL/d(out) and aux_grad = dL/d(aux),
 * after moe_forward on the same x and weights. */
int moe_backward(const nb_backend *be, moe_state *s, float *dx, float *g_router, float *g_gu, float *g_down,
                 const float *dout, float aux_grad, const float *x, const float *w_router, const float *w_gu,
                 const float *w_down);
/* The same two under bf16 (a state made with m.bf16 = 1): x is the normalized input as bf16, the weights
 * a version's bf16 copy; the gradients stay float32. */
int moe_forward_bf16(const nb_backend *be, moe_state *s, float *out, const nb_bf16 *x, const nb_bf16 *w_router,
                     const nb_bf16 *w_gu, const nb_bf16 *w_down, float *load);
int moe_backward_bf16(const nb_backend *be, moe_state *s, float *dx, float *g_router, float *g_gu, float *g_down,
                      const float *dout, float aux_grad, const nb_bf16 *x, const nb_bf16 *w_router,
                      const nb_bf16 *w_gu, const nb_bf16 *w_down);

/* ---- The block's steps outside its products, on the host's memory: the CPU's entries of the layer table
 * (layers/ops.h), which moe_forward and moe_backward call in this order on any backend's memory. A device's
 * table brings kernels with the same contracts (src/backend/cuda/kernels.h's nbk_moe_*). ---- */
/* probs (N x E): the router's logits in, softmax out (fp32); top, weight (N x k): each token's experts (largest p
 * first, ties to the lower index) and their renormalized weights. */
void moe_route(float *probs, int *top, float *weight, int N, int E, int k);
/* count (E), start (E + 1): rows per expert and where each begins, each expert's rows rounded up to row_align (1;
 * MOE_ROW_ALIGN under bf16), the rows past its count marked -1 in row_token; row_token: each grouped row's token,
 * an expert's rows in token order; slot_row (N k): each slot's row. A serial scan: the same for any thread count. */
void moe_group(int *count, int *start, int *row_token, int *slot_row, const int *top, int N, int E, int k,
               int row_align);
/* Each grouped row below start[E] the copy of its token's row of x (row_bytes each), zeros in a row of no token. */
void moe_gather(void *xg, const void *x, const int *row_token, const int *start, int E, size_t row_bytes);
/* The load-balancing loss E sum_e (count_e / N)(mean p_e), in double; load (NULL: none): each expert's share of
 * the N k assignments. */
double moe_balance(float *load, const float *probs, const int *count, int N, int E, int k);
/* out[t] (d wide) += each of token t's grouped rows, times its weight (weight NULL: 1), in slot order. */
void moe_add_rows(float *out, const float *rows, const float *weight, const int *slot_row, int N, int k, int d);
/* dy's grouped rows = weight dout of their token; dp (N x E) = the router's gradient through the renormalized
 * weights: dp_i = (dw_i - sum_j w_j dw_j) / S for the chosen i, dw_j = dout . y_j (0 elsewhere). */
void moe_route_backward(float *dy, float *dp, const float *dout, const float *y, const float *probs, const int *top,
                        const float *weight, const int *slot_row, int N, int E, int k, int d);
/* dp += the aux loss's part (aux_grad E count_e / N^2), then through the softmax (dz = p (dp - sum p dp)), in place. */
void moe_softmax_backward(float *dp, const float *probs, const int *count, float aux_grad, int N, int E);
#endif
