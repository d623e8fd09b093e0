/* Internal: the full training state of a one-process run, saved into and restored from a
 * checkpoint folder: DIR/model.safetensors + DIR/config.json (the weights, Hugging Face format)
 * and DIR/state.safetensors (every stage's weights, optimizer buffers, weight versions and EF
 * buffer; the step, the optimizer counts and the loader position in its metadata), written last,
 * so that a folder with state.safetensors is complete. */
#ifndef NB_TRAIN_STATE_H
#define NB_TRAIN_STATE_H
#include "nobubble/data.h"
#include "nobubble/delay.h"
#include "nobubble/optim.h"
#include "nobubble/train.h"

typedef struct {
    nb_model *model;
    nb_optimizer **opt;   /* one per stage */
    nb_stash **stash;     /* one per stage */
    nb_loader *train;
} train_parts;

/* Saves the state before step next_step as the folder dir: written as dir.partial, then renamed, so that
 * dir exists only complete; on failure nothing but dir.partial's removal happens. */
int train_state_save(const char *dir, const train_parts *p, int next_step, const nb_train_options *o);
/* Restores a state saved with any split by a run of the same configuration (fields that differ are
 * refused, naming them, unless o->resume_override; run_fields.h); *next_step receives the step to run
 * next. */
int train_state_load(const char *dir, const train_parts *p, int *next_step, const nb_train_options *o);
/* Removes a checkpoint folder (its completion marker first) and a killed save's temporaries in it. */
void train_state_remove(const char *dir);
#endif
