/* Internal: building and releasing one stage (the model owns its stages). */
#ifndef NB_MODEL_STAGE_H
#define NB_MODEL_STAGE_H
#include <stdlib.h>
#include <string.h>
#include "backend/backend.h"
#include "util/alloc.h"
#include "nobubble/model.h"

/* The stage's fields and tensor table only (nb_model_layout); nb_stage_init also allocates. Both return -1
 * (nb_last_error) when memory runs out, having released what they took. */
int nb_stage_layout(nb_stage *s, const nb_config *cfg, int index, int count, int first_block, int n_blocks);
int nb_stage_init(nb_stage *s, const nb_config *cfg, int index, int count, int first_block, int n_blocks);
void nb_stage_release(nb_stage *s);
/* Puts the stage on backend be. Where be's memory is the host's this only sets s->backend; where it is a
 * device's (be->device_memory) the stage's weights, gradients (and the tied head's) and RoPE tables move
 * there, its scratch and activation slots are made there from then on, and the host reaches them only
 * through the backend's copies (the weights passed to forward, the input x_in and the gradient dout
 * are then be's memory too; tokens and targets stay the host's). nb_model_create calls it for such a
 * backend (bf16, the split backward and mixture-of-experts blocks run there too). -1 (nb_last_error) leaves the
 * stage as it was. */
int nb_stage_place(nb_stage *s, const nb_backend *be);
/* 1 when the stage's arrays are its backend's memory, not the host's (placed by nb_stage_place). */
static inline int nb_stage_on_device(const nb_stage *s) { return s->backend && s->backend->device_memory; }
/* Bytes between the stage's memory and the host's (checkpoints, exports, hashes): memcpy on the host's memory,
 * the backend's copies where the stage is placed on a device; and within the stage's memory. Inline: the
 * readers that the fuzz targets build alone (checkpoint/hf.c) call them without the model's library. */
static inline void nb_stage_to_host(const nb_stage *s, void *host, const void *mem, size_t bytes) {
    if (nb_stage_on_device(s)) nb_backend_to_host(s->backend, host, mem, bytes);
    else if (bytes) memcpy(host, mem, bytes);
}
static inline void nb_stage_from_host(const nb_stage *s, void *mem, const void *host, size_t bytes) {
    if (nb_stage_on_device(s)) nb_backend_from_host(s->backend, mem, host, bytes);
    else if (bytes) memcpy(mem, host, bytes);
}
static inline void nb_stage_copy(const nb_stage *s, void *dst, const void *src, size_t bytes) {
    if (nb_stage_on_device(s)) nb_backend_copy(s->backend, dst, src, bytes);
    else if (bytes) memmove(dst, src, bytes);
}
static inline void nb_stage_zero(const nb_stage *s, void *mem, size_t bytes) {
    if (nb_stage_on_device(s)) nb_backend_zero(s->backend, mem, bytes);
    else if (bytes) memset(mem, 0, bytes);
}
/* Zeroed memory of the stage's kind (the host's, or its device's), NULL with nb_fail naming `what`; and its
 * release (NULL is nothing). */
static inline void *nb_stage_alloc(const nb_stage *s, size_t bytes, const char *what) {
    if (!bytes) bytes = 1;
    return nb_stage_on_device(s) ? nb_backend_alloc(s->backend, bytes, what) : nb_calloc(1, bytes, what);
}
static inline void nb_stage_free(const nb_stage *s, void *p) {
    if (nb_stage_on_device(s)) nb_backend_free(s->backend, p);
    else free(p);
}
/* Where the final part of the stage's gradient starts after each range a whole backward completes
 * (nb_stage.grads_done), in the backward's order: the final norm's first value (the last stage), each block's
 * first from the last block, 0 for the embedding (the first stage). Returns how many (at most n_blocks + 2)
 * into starts; the last is 0 unless the stage has no parameters. */
int nb_stage_grad_ranges(const nb_stage *s, size_t *starts);

/* Where a stage's weights w (laid out like its params) keep what (for generate.c). */
typedef struct {
    const float *ln1, *wqkv, *wo, *ln2, *wgu, *wdown;  /* q, k, v adjacent; gate, up adjacent */
    const float *router;  /* a MoE block's (E x d), else NULL; then wgu and wdown are its E experts' */
} block_weights;
block_weights weights_of_block(const nb_stage *s, const float *w, int l);
const float *final_norm_weights(const nb_stage *s, const float *w);  /* the last stage */
const float *head_weights(const nb_stage *s, const float *w);        /* the last stage */

/* A bf16 stage's weight versions (precision.c); NULL (nb_last_error) when memory runs out. */
const nb_bf16 *stage_bf16_weights(const nb_stage *s, const float *w, long version);
/* Bytes of bf16 weight copies the stage may hold (its capacity, once filled). */
size_t stage_bf16_bytes(const nb_stage *s);
void stage_precision_release(nb_stage *s);
#endif
