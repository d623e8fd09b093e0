/* Fuzz target: train --config's reader (nb_settings_parse_config, src/train/settings/config_file.c) on arbitrary
 * bytes, over the default settings; what an accepted file must satisfy: fuzz_settings.h. */
#include "fuzz_input.h"
#include "fuzz_settings.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    nb_train_options o;
    nb_settings_args a;
    nb_train_config_file *f;
    nb_train_defaults(&o);
    nb_settings_begin(&a, &o);
    if (nb_settings_parse_config(&a, (const char *)data, size, "fuzz.json", &f)) return 0;
    fuzz_check_accepted("fuzz_train_config", &o, f);
    return 0;
}
