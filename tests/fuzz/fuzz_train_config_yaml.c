/* Fuzz target: train --config FILE.yaml (nb_settings_read_config on a .yaml file: src/train/settings/config_yaml.c,
 * then the JSON reader's rules) on arbitrary bytes, over the default settings; what an accepted file must
 * satisfy: fuzz_settings.h. */
#include "fuzz_input.h"
#include "fuzz_settings.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    nb_train_options o;
    nb_settings_args a;
    nb_train_config_file *f;
    nb_train_defaults(&o);
    nb_settings_begin(&a, &o);
    if (nb_settings_read_config(&a, fuzz_write(data, size, "fuzz.yaml"), &f)) return 0;
    fuzz_check_accepted("fuzz_train_config_yaml", &o, f);
    return 0;
}
