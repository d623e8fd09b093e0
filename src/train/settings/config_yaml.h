/* Internal to train: train --config's YAML form (config_yaml.c). */
#ifndef NB_TRAIN_CONFIG_YAML_H
#define NB_TRAIN_CONFIG_YAML_H
#include <stddef.h>
#include "util/json.h"

/* Whether a --config path names a YAML file (.yaml, .yml). */
int train_config_is_yaml(const char *path);
/* The YAML text (one mapping of plain values) as the equivalent JSON object, into json; errors name `what`
 * and the line. */
int train_config_yaml_to_json(const char *text, size_t n, const char *what, nb_buf *json);
#endif
