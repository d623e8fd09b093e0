/* Learning-rate schedules (docs/rules.md, section 6). */
#include <math.h>
#include <string.h>
#include "nobubble/optim.h"
#include "util/error.h"

float nb_schedule_lr(const nb_schedule *s, int step) {
    if (s->warmup > 0 && step < s->warmup) return s->lr * (float)(step + 1) / (float)s->warmup;
    switch (s->kind) {
    case NB_SCHEDULE_CONSTANT:
        return s->lr;
    case NB_SCHEDULE_WSD: {
        /* constant, then linear from lr (at the decay's first step) to lr_min (at the last step) */
        int decay = (int)lround((double)s->cooldown * s->total_steps);
        int start = s->total_steps - decay;
        if (decay <= 0 || step < start) return s->lr;
        double p = decay > 1 ? (double)(step - start) / (decay - 1) : 1.0;
        if (p > 1.0) p = 1.0;
        return (float)(s->lr + (s->lr_min - s->lr) * p);
    }
    case NB_SCHEDULE_COSINE:
    default: {
        int span = s->total_steps - s->warmup - 1;
        double p = span > 0 ? (double)(step - s->warmup) / span : 1.0;
        if (p > 1.0) p = 1.0;
        return (float)(s->lr_min + 0.5 * (s->lr - s->lr_min) * (1.0 + cos(3.14159265358979323846 * p)));
    }
    }
}

/* Indexed by nb_schedule_kind. */
static const char *const schedule_names[] = {"cosine", "wsd", "constant"};

const char *nb_schedule_name(nb_schedule_kind kind) {
    return (unsigned)kind < 3 ? schedule_names[kind] : "unknown";
}

int nb_schedule_parse(const char *name, nb_schedule_kind *out) {
    for (int k = 0; k < 3; k++)
        if (!strcmp(name, schedule_names[k])) {
            *out = (nb_schedule_kind)k;
            return 0;
        }
    return nb_fail("--schedule '%s': expected cosine, wsd or constant", name);
}

int nb_schedule_validate(const nb_schedule *s) {
    if (!(s->lr > 0) || !isfinite(s->lr)) return nb_fail("--lr %g: expected a positive number", s->lr);
    if (!(s->lr_min >= 0) || !isfinite(s->lr_min)) return nb_fail("--lr-min %g: expected a number >= 0", s->lr_min);
    if (s->lr_min > s->lr)
        return nb_fail("--lr-min %g: above --lr %g (expected 0 <= lr-min <= lr: the schedule decays from lr to lr-min)",
                       s->lr_min, s->lr);
    if (s->warmup < 0) return nb_fail("--warmup %d: expected >= 0", s->warmup);
    if (!(s->cooldown >= 0 && s->cooldown <= 1)) return nb_fail("--cooldown %g: expected a fraction in [0, 1]", s->cooldown);
    return 0;
}
