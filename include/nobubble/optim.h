/* nobubble: optimizers and learning-rate schedules. An optimizer computes the step d_t for a
 * stage's tensors from their gradients, the current weights and the scheduled learning rate,
 * and advances its own state; applying w -= d is the trainer's job, so that delays and error
 * feedback can wrap any optimizer (../shared/reference/update-rules.md). */
#ifndef NOBUBBLE_OPTIM_H
#define NOBUBBLE_OPTIM_H
#include <stddef.h>
#include "nobubble/model.h"

typedef struct nb_adamw_params {
    float beta1;        /* 0.9 */
    float beta2;        /* 0.95 */
    float eps;          /* 1e-8 */
    float weight_decay; /* decoupled; matrix and embed groups only, never gains */
} nb_adamw_params;

nb_adamw_params nb_adamw_defaults(void);

/* AdamW state for one stage: first and second moments mirroring the stage's parameters. */
typedef struct nb_adamw {
    nb_adamw_params p;
    const nb_stage *stage;
    float *m, *v;
    long step;          /* steps taken: bias correction uses step + 1 */
} nb_adamw;

int nb_adamw_init(nb_adamw *o, const nb_stage *s, nb_adamw_params p);
void nb_adamw_free(nb_adamw *o);
/* d = lr * mh / (sqrt(vh) + eps) + lr * wd * w, tensor by tensor; advances m, v, step. */
void nb_adamw_step(nb_adamw *o, const float *grads, const float *w, float lr, float *d);

/* Learning-rate schedule: linear warmup from lr/warmup at t = 0 to lr at t = warmup - 1,
 * then cosine to lr_min at the last step, or constant. */
typedef enum { NB_SCHEDULE_COSINE, NB_SCHEDULE_CONSTANT } nb_schedule_kind;
typedef struct nb_schedule {
    nb_schedule_kind kind;
    float lr, lr_min;
    int warmup, total_steps;
} nb_schedule;

float nb_schedule_lr(const nb_schedule *s, int step);
/* Parses "cosine" or "constant". */
int nb_schedule_parse(const char *name, nb_schedule_kind *out);
#endif
