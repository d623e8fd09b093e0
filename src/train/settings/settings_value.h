/* Internal: reading and writing one setting's value in nb_train_options (the table: train.h). */
#ifndef NB_TRAIN_SETTINGS_VALUE_H
#define NB_TRAIN_SETTINGS_VALUE_H
#include <stddef.h>
#include "nobubble/train.h"

/* Where the row's value lives in o. */
void *setting_field(const nb_setting *s, const nb_train_options *o);
/* A number into a numeric, boolean or enum row (NB_SET_EF: turns error feedback on with alpha v). */
void setting_set_number(const nb_setting *s, nb_train_options *o, double v);
/* The row's default (its per-optimizer one for o's optimizer when it has those). */
void setting_set_default(const nb_setting *s, nb_train_options *o);
/* The shortest decimal that reads back as the same float: 0.002, not 0.00200000009. */
void setting_format_float(char *buf, size_t size, float v);
/* The value for people and summary.json: as nb_setting_format, but 300 rather than 3e+02 (a
 * checkpoint keeps nb_setting_format's text, which older checkpoints were compared with), and
 * booleans as on/off (summary.json writes them as true/false itself). */
void setting_format_display(const nb_setting *s, const nb_train_options *o, char *buf, size_t size);
#endif
