/* Internal: the configuration file every run writes into its --out (config_file.c, which also reads
 * train --config FILE: nb_settings_read_config, train.h). */
#ifndef NB_TRAIN_SETTINGS_CONFIG_FILE_H
#define NB_TRAIN_SETTINGS_CONFIG_FILE_H
#include "nobubble/train.h"

/* OUT_DIR/NB_TRAIN_CONFIG_FILE: the run's resolved settings, in the form train --config reads. */
int train_write_config(const nb_train_options *o);
#endif
