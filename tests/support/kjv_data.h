/* Test data shared by the training tests: byte tokens (vocabulary 256) of the first 300 KB of
 * the King James Bible, as one training and one validation shard in a temporary folder, and a
 * small model configuration that learns from them in seconds. */
#ifndef NB_TESTS_KJV_DATA_H
#define NB_TESTS_KJV_DATA_H
#include "nobubble/train.h"

typedef struct {
    char train[300], val[300];
} kjv_paths;

/* Writes the shards into a fresh temporary folder (0, or -1 with nb_last_error()). */
int kjv_make_data(void);
void kjv_remove_data(void);
/* A 2-layer model (d 64, 4 heads, 2 kv heads, context 64) on the data, batch 4, 20 AdamW steps
 * at lr 3e-3, quiet; the globs live in *paths. */
nb_train_options kjv_small_run(kjv_paths *paths);
#endif
