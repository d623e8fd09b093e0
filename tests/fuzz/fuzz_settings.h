/* What the two fuzz targets of train --config (JSON, YAML) require of a file the reader accepted: every
 * setting within the table's range (nb_settings_check) and only "FIELD=VALUE" model settings; else abort. */
#ifndef NB_FUZZ_SETTINGS_H
#define NB_FUZZ_SETTINGS_H
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "nobubble/train.h"
#include "optim/rules.h"

/* The readers take the optimizers' names and defaults from their descriptors (src/optim/optimizers.c), never
 * their rules, whose code the fuzz build leaves out (OpenMP, the GEMM libraries): these stand in for them. */
#ifdef NB_FUZZ_BUILD
const nb_optim_rule sgd_rule, adamw_rule, muon_rule, lion_rule, adan_rule, mars_rule, soap_rule, normuon_rule;
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
