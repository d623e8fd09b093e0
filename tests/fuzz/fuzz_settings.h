/* What the two fuzz targets of train --config (JSON, YAML) require of a file the reader accepted: every
 * setting within the table's range (nb_settings_check) and only "FIELD=VALUE" model settings; else abort. */
#ifndef NB_FUZZ_SETTINGS_H
#define NB_FUZZ_SETTINGS_H
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "nobubble/train.h"

/* The readers never name an optimizer (only --help's defaults do); the fuzz build leaves the optimizers
 * out (OpenMP), so this stands in for src/optim/optimizer.c's. */
#ifdef NB_FUZZ_BUILD
const char *nb_optimizer_name(nb_optimizer_kind k) { return k == NB_OPT_ADAMW ? "adamw" : "?"; }
#endif

static void fuzz_check_accepted(const char *target, const nb_train_options *o, nb_train_config_file *f) {
    if (nb_settings_check(o)) {
        fprintf(stderr, "%s: an accepted file left a setting out of range: %s\n", target, nb_last_error());
        abort();
    }
    for (int i = 0; i < nb_train_config_model_count(f); i++)
        if (!strchr(nb_train_config_model_set(f, i), '=')) abort();
    nb_train_config_free(f);
}
#endif
