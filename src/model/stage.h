/* Internal: building and releasing one stage (the model owns its stages). */
#ifndef NB_MODEL_STAGE_H
#define NB_MODEL_STAGE_H
#include "nobubble/model.h"

int nb_stage_init(nb_stage *s, const nb_config *cfg, int index, int count, int first_block, int n_blocks);
void nb_stage_release(nb_stage *s);
#endif
