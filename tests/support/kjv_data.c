#include "kjv_data.h"
#include <stdio.h>
#include <stdlib.h>
#include "check.h"
#include "nobubble/data.h"

static char dir[] = "/tmp/nb_test_kjv_XXXXXX";

int kjv_make_data(void) {
    if (!mkdtemp(dir)) return -1;
    char *text;
    size_t *off, n_docs;
    if (nb_bible_documents(&text, &off, &n_docs)) return -1;
    size_t n = off[n_docs] < 300000 ? off[n_docs] : 300000, n_val = 30000;
    uint32_t *tok = malloc(sizeof(uint32_t) * n);
    for (size_t i = 0; i < n; i++) tok[i] = (unsigned char)text[i];
    char path[256];
    snprintf(path, sizeof path, "%s/kjv_train_000000.bin", dir);
    int rc = nb_shard_write(path, tok, n - n_val, 256);
    snprintf(path, sizeof path, "%s/kjv_val_000000.bin", dir);
    rc |= nb_shard_write(path, tok + n - n_val, n_val, 256);
    free(tok);
    free(text);
    free(off);
    return rc;
}

void kjv_remove_data(void) {
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    check_run(cmd);
}

nb_train_options kjv_small_run(kjv_paths *paths) {
    nb_train_options o;
    nb_train_defaults(&o);
    nb_config_preset("tiny", &o.model);
    o.model.vocab_size = 256;
    o.model.d_model = 64;
    o.model.n_layers = 2;
    o.model.n_heads = 4;
    o.model.n_kv_heads = 2;
    o.model.d_ffn = 160;
    o.model.context = 64;
    o.batch = 4;
    o.steps = 20;
    o.schedule.lr = 3e-3f;
    o.schedule.warmup = 2;
    o.eval_batches = 4;
    o.quiet = 1;
    snprintf(paths->train, sizeof paths->train, "%s/*_train_*.bin", dir);
    snprintf(paths->val, sizeof paths->val, "%s/*_val_*.bin", dir);
    o.train_pattern = paths->train;
    o.val_pattern = paths->val;
    return o;
}
