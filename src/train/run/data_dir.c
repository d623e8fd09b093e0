/* A run's data folder (nb_train_options.data_dir): the facts nb_train reads from it, the same for the
 * command line (train --data DIR) and a program that calls the library. */
#include <glob.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include "nobubble/checkpoint.h"
#include "nobubble/data.h"
#include "train/run/run.h"
#include "util/error.h"

static int matches_any(const char *pattern) {
    glob_t g;
    memset(&g, 0, sizeof g);
    const int found = glob(pattern, 0, NULL, &g) == 0 && g.gl_pathc > 0;
    globfree(&g);
    return found;
}

/* The shards of one kind ("train", "val"): prepare's numbered NAME_KIND_NNNNNN.bin (also llm.c's
 * fineweb_train_000001.bin), else llm.c's single NAME_KIND.bin (tiny_shakespeare_train.bin). Neither: the
 * numbered pattern, which the loader's error then names. */
static void data_glob(const char *dir, const char *kind, char *out, size_t size) {
    snprintf(out, size, "%s/*_%s.bin", dir, kind);
    if (matches_any(out)) {
        char numbered[4200];
        snprintf(numbered, sizeof numbered, "%s/*_%s_*.bin", dir, kind);
        if (!matches_any(numbered)) return;
    }
    snprintf(out, size, "%s/*_%s_*.bin", dir, kind);
}

/* The vocabulary size of DIR/tokenizer.json; 0 when there is none, -1 (nb_fail) when it does not load. */
static int data_vocab(const char *dir) {
    char path[4200];
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    if (access(path, R_OK)) return 0;
    nb_tokenizer *t;
    if (nb_tokenizer_load(&t, path)) return -1;
    const int v = nb_tokenizer_vocab_size(t);
    nb_tokenizer_free(t);
    return v;
}

int train_resolve_data(nb_train_options *o, train_data_globs *g) {
    if (o->data_dir && o->train_pattern)
        return nb_fail("data_dir %s and a train pattern (%s): give one of them (--data or --train)", o->data_dir,
                       o->train_pattern);
    if (o->train_pattern) return 0;
    const char *dir = o->data_dir ? o->data_dir : NB_TRAIN_DEFAULT_DATA;
    data_glob(dir, "train", g->train, sizeof g->train);
    data_glob(dir, "val", g->val, sizeof g->val);
    o->data_dir = dir;
    o->train_pattern = g->train;
    if (!o->val_pattern) {
        /* prepare --val-fraction 0 writes no validation shards: train without validation, and say so. */
        if (matches_any(g->val) || !matches_any(g->train)) o->val_pattern = g->val;
        else
            fprintf(stderr, "nobubble train: note: %s has no validation shards (%s; prepared with --val-fraction 0?): "
                    "training without a validation loss\n", dir, g->val);
    }
    const int v = data_vocab(dir);
    if (v < 0) return -1;
    if (v > 0 && o->vocab_from_data) o->model.vocab_size = v;
    if (v > o->model.vocab_size && o->init_from)
        return nb_fail("--data %s: its tokenizer has %d tokens, more than the vocab_size %d of %s/config.json: the data "
                       "was not tokenized for this model", dir, v, o->model.vocab_size, o->init_from);
    return 0;
}

int train_export_tokenizer(const nb_train_options *o, int *copied) {
    *copied = 0;
    if (!o->export_dir || !o->data_dir) return 0;
    char from[4200], to[4200];
    snprintf(from, sizeof from, "%s/tokenizer.json", o->data_dir);
    snprintf(to, sizeof to, "%s/tokenizer.json", o->export_dir);
    if (access(from, R_OK)) return 0;
    nb_tokenizer *t;
    if (nb_tokenizer_load(&t, from)) return -1;
    int rc = nb_tokenizer_save(t, to) || nb_tokenizer_save_config(t, o->export_dir) ? -1 : 0;
    /* An imported Hugging Face tokenizer's end-of-text token need not be the last id. */
    const int eot = nb_tokenizer_eot(t);
    nb_tokenizer_free(t);
    if (!rc && eot != o->model.vocab_size - 1 && nb_export_hf_special_tokens(&o->model, o->export_dir, eot, eot))
        rc = -1;
    *copied = !rc;
    return rc;
}
