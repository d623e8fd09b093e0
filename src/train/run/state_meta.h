/* Internal: the numbers a training state's metadata holds (state.safetensors, or the parts of a
 * pipeline's), each read with its range checked before anything uses it:
 *   next_step        0 .. NB_TRAIN_MAX_STEPS (and the caller checks it against --steps)
 *   optimizer_steps  0 .. next_step (each training step updates once)
 *   count:<tensor>   0 .. optimizer_steps (a tensor's update count; AdamW's bias correction uses it)
 *   loader_position  0 .. STATE_MAX_LOADER_POSITION micro-batches
 *   run.batch        1 .. NB_TRAIN_MAX_BATCH, run.seq 1 .. STATE_MAX_SEQ (to rescale the position)
 * Kept apart from state.c (no model, optimizer or OpenMP) so that a fuzz target can run it. */
#ifndef NB_TRAIN_STATE_META_H
#define NB_TRAIN_STATE_META_H
#include "nobubble/checkpoint.h"

#define STATE_MAX_LOADER_POSITION (1LL << 48)
#define STATE_MAX_SEQ (1LL << 20)

typedef struct {
    long long next_step, optimizer_steps;
} state_meta;

/* An integer 0 <= lo <= x <= hi from metadata key's value v (NULL: missing); where names the file. */
int state_meta_int(const char *where, const char *key, const char *v, long long lo, long long hi, long long *out);
/* next_step and optimizer_steps of the set (its first file records them; other parts' next_step must agree). */
int state_meta_steps(const nb_st_set *set, state_meta *m);
/* count:<name>, 0 .. m->optimizer_steps. */
int state_meta_count(const nb_st_set *set, const char *where, const state_meta *m, const char *name, long long *out);
/* The loader's position rescaled from the saved batch shape to batch x seq tokens per micro-batch. */
int state_meta_loader(const nb_st_file *f, long long batch, long long seq, unsigned long long *position);
#endif
