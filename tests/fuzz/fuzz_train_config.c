/* Fuzz target: train --config's reader (nb_settings_parse_config, src/train/config_file.c) on arbitrary
 * bytes, over the default settings. A file it accepts must leave every setting within the table's
 * range (nb_settings_check) and only "FIELD=VALUE" model settings; else abort. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "fuzz_input.h"
#include "nobubble/train.h"
#include "optim/rules.h"

/* The reader takes the optimizers' names and defaults from their descriptors (src/optim/optimizers.c), never
 * their rules, whose code the fuzz build leaves out (OpenMP, the GEMM libraries): these stand in for them. */
#ifdef NB_FUZZ_BUILD
const nb_optim_rule sgd_rule, adamw_rule, muon_rule, lion_rule, adan_rule, mars_rule, soap_rule, normuon_rule;
#endif

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    nb_train_options o;
    nb_settings_args a;
    nb_train_config_file *f;
    nb_train_defaults(&o);
    nb_settings_begin(&a, &o);
    if (nb_settings_parse_config(&a, (const char *)data, size, "fuzz.json", &f)) return 0;
    if (nb_settings_check(&o)) {
        fprintf(stderr, "fuzz_train_config: an accepted file left a setting out of range: %s\n", nb_last_error());
        abort();
    }
    for (int i = 0; i < nb_train_config_model_count(f); i++)
        if (!strchr(nb_train_config_model_set(f, i), '=')) abort();
    nb_train_config_free(f);
    return 0;
}
