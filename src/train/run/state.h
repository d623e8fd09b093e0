/* Internal: the full training state of a one-process run, saved into and restored from a
 * checkpoint folder: DIR/model.safetensors + DIR/config.json (the weights, Hugging Face format)
 * and DIR/state.safetensors (every stage's weights, optimizer buffers, weight versions and EF
 * buffer; the step, the optimizer counts and the loader position in its metadata), written last,
 * so that a folder with state.safetensors is complete. A pipeline run writes the same a part per
 * stage with Hugging Face's index files; state.safetensors.index.json marks it complete. Either
 * layout loads into any split. */
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
/* A pipeline's checkpoint, a part per stage (each thread or process writes its own, concurrently):
 * train_state_save_part writes stage's part into dir.partial after that stage's update next_step - 1
 * (the first stage's p->train positioned at the step boundary; p->opt and p->stash need only entry
 * `stage`); once every part is written, train_state_commit writes the indexes (the state's last: the
 * completion marker) and renames dir.partial to dir. */
int train_state_save_part(const char *dir, const train_parts *p, int stage, int next_step, const nb_train_options *o);
int train_state_commit(const char *dir, const nb_model *m);
/* The step a checkpoint folder continues from (its next_step), read from its metadata alone. */
int train_state_step(const char *dir, long long *next_step);
/* Removes dir.partial, once no stage writes into it any more (a part failed): nothing else changes. */
void train_state_abort(const char *dir);
/* train_state_load for stages first..last only (a pipeline process holds its own stage), from either
 * layout; p->train may be NULL (a stage without a loader: the first stage checks the data). */
int train_state_load_stages(const char *dir, const train_parts *p, int first, int last, int *next_step,
                            const nb_train_options *o);
/* Removes a checkpoint folder (its completion marker first) and a killed save's temporaries in it; a
 * folder that is a symbolic link is refused (an error naming it), nothing deleted through it. */
int train_state_remove(const char *dir);
/* Removes a committed checkpoint so that a kill at any moment leaves it whole or absent under its name:
 * renamed to DIR.deleting first (STATE_DELETING), then removed. Used by --keep's pruning, --force and
 * a save that replaces a folder. */
#define STATE_DELETING ".deleting"
int train_state_discard(const char *dir);
/* Removes what killed saves and removals left in save_dir (step_N.partial, step_N.deleting); a run
 * calls it once it holds the folder's lock. Failures are warnings: those names are never read. */
void train_state_clean_leftovers(const char *save_dir);
#endif
