/* Internal: the run's configuration, field by field, as a checkpoint records it ("run.FIELD" in
 * state.safetensors' metadata: the settings table's rows with a checkpoint key), and what may differ
 * when a run resumes from it (the rows' resume policy):
 *   fixed     the shape of the saved state (model shape, optimizer): never;
 *   override  what the run computes (hyperparameters, delay, batch shape, data, seeds): only with
 *             --override, which then prints a warning listing them;
 *   free      not compared (--stages except under PipeDream; --steps, --save-*, --out, ... are not
 *             recorded at all).
 * docs/checkpoints.md lists the fields. */
#ifndef NB_TRAIN_RUN_FIELDS_H
#define NB_TRAIN_RUN_FIELDS_H
#include <stddef.h>
#include <stdint.h>
#include "nobubble/checkpoint.h"
#include "nobubble/train.h"

typedef enum { RUN_FIELD_FIXED, RUN_FIELD_OVERRIDE, RUN_FIELD_FREE } run_field_kind;
enum { RUN_FIELDS_MAX = 64 };

typedef struct {
    const char *key;     /* metadata "run.<key>" */
    const nb_setting *setting;   /* its row in the settings table */
    run_field_kind kind;
    char value[64];
} run_field;

/* Fills f[RUN_FIELDS_MAX] with this run's fields; returns their count. */
int run_fields(const nb_train_options *o, int n_stages, run_field *f);
/* Compares this run with the checkpoint f (fingerprint: this run's training loader's; NULL in a
 * pipeline stage without a loader, whose first stage checks it). Fails naming
 * every differing field with both values when a fixed one differs, or an override one without
 * o->resume_override; otherwise writes the overridden fields' list into overridden ("" when none). */
int run_fields_check(const nb_st_file *f, const nb_train_options *o, int n_stages, const uint64_t *fingerprint,
                     char *overridden, size_t size);
#endif
