/* Learning-rate schedules (docs/rules.md, section 6). */
#include <math.h>
#include <stddef.h>
#include <string.h>
#include "nobubble/optim.h"
#include "util/error.h"
#include "util/range.h"

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

/* Indexed by nb_schedule_kind: --schedule's names, summary.json's and checkpoints'. */
static const char *const schedule_names[] = {"cosine", "wsd", "constant"};
#define N_SCHEDULES (int)(sizeof schedule_names / sizeof schedule_names[0])

const char *nb_schedule_names(int i) { return (unsigned)i < N_SCHEDULES ? schedule_names[i] : NULL; }

const char *nb_schedule_name(nb_schedule_kind kind) {
    return nb_schedule_names(kind) ? nb_schedule_names(kind) : "unknown";
}

int nb_schedule_parse(const char *name, nb_schedule_kind *out) {
    int k;
    if (nb_names_parse(nb_schedule_names, "--schedule", name, &k)) return -1;
    *out = (nb_schedule_kind)k;
    return 0;
}

#define AT(field) offsetof(nb_schedule, field)
const nb_range nb_schedule_ranges[] = {
    {"--lr", AT(lr), 0, 0, NB_RANGE_HUGE, 1, 0},
    {"--lr-min", AT(lr_min), 0, 0, NB_RANGE_HUGE, 0, 0},
    /* at most the longest run (train.h's NB_TRAIN_MAX_STEPS) */
    {"--warmup", AT(warmup), 1, 0, 1e8, 0, 0},
    {"--cooldown", AT(cooldown), 0, 0, 1, 0, 0},
    {NULL, 0, 0, 0, 0, 0, 0},
};

int nb_schedule_validate(const nb_schedule *s) {
    for (const nb_range *r = nb_schedule_ranges; r->flag; r++)
        if (nb_range_check(r, s)) return -1;
    if (s->lr_min > s->lr)
        return nb_fail("--lr-min %g: above --lr %g (expected 0 <= lr-min <= lr: the schedule decays from lr to lr-min)",
                       s->lr_min, s->lr);
    return 0;
}
