/* Learning-rate schedules (update-rules.md section 5). */
#include <math.h>
#include <string.h>
#include "nobubble/optim.h"
#include "util/error.h"

float nb_schedule_lr(const nb_schedule *s, int step) {
    if (s->warmup > 0 && step < s->warmup) return s->lr * (float)(step + 1) / (float)s->warmup;
    if (s->kind == NB_SCHEDULE_CONSTANT) return s->lr;
    int span = s->total_steps - s->warmup - 1;
    double p = span > 0 ? (double)(step - s->warmup) / span : 1.0;
    if (p > 1.0) p = 1.0;
    return (float)(s->lr_min + 0.5 * (s->lr - s->lr_min) * (1.0 + cos(3.14159265358979323846 * p)));
}

int nb_schedule_parse(const char *name, nb_schedule_kind *out) {
    if (!strcmp(name, "cosine")) *out = NB_SCHEDULE_COSINE;
    else if (!strcmp(name, "constant")) *out = NB_SCHEDULE_CONSTANT;
    else return nb_fail("--schedule '%s': expected cosine or constant", name);
    return 0;
}
