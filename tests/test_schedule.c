/* Learning-rate schedules (docs/rules.md, section 5) against their formulas, computed here in
 * double:
 *   warmup:   lr * (t + 1) / warmup for t < warmup (lr/warmup at t = 0, lr at t = warmup - 1);
 *   cosine:   lr_min + 0.5 (lr - lr_min)(1 + cos(pi p)), p = (t - warmup) / (total - 1 - warmup),
 *             so p = 0 at the first step after warmup and p = 1 at the last step (total - 1);
 *   wsd:      lr until the last C = cooldown * total steps, then linear from lr (first decay step,
 *             t = total - C) to lr_min (last step, t = total - 1);
 *   constant: lr after warmup.
 * The cases use cooldown * total integral, so the rounding of C does not matter. And the
 * validation errors name their flags. */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "check.h"
#include "nobubble/common.h"
#include "nobubble/optim.h"

static double warm(const nb_schedule *s, int t) { return (double)s->lr * (t + 1) / s->warmup; }

static double want_lr(const nb_schedule *s, int t) {
    if (t < s->warmup) return warm(s, t);
    if (s->kind == NB_SCHEDULE_CONSTANT) return s->lr;
    if (s->kind == NB_SCHEDULE_COSINE) {
        double p = (double)(t - s->warmup) / (s->total_steps - 1 - s->warmup);
        return s->lr_min + 0.5 * ((double)s->lr - s->lr_min) * (1 + cos(M_PI * p));
    }
    int C = (int)lround((double)s->cooldown * s->total_steps), start = s->total_steps - C;
    if (t < start) return s->lr;
    double p = (double)(t - start) / (C - 1);
    return s->lr + ((double)s->lr_min - s->lr) * p;
}

static void expect(const nb_schedule *s, const char *label, int t, double want) {
    float got = nb_schedule_lr(s, t);
    double e = fabs(got - want);
    CHECK(e <= 1e-6 * fabs(want) + 1e-12, "%s: lr at step %d = %.9g, expected %.9g", label, t, got, want);
}

static void sweep(const nb_schedule *s, const char *label) {
    int worst_t = -1;
    double worst = 0;
    for (int t = 0; t < s->total_steps; t++) {
        double want = want_lr(s, t), got = nb_schedule_lr(s, t);
        double e = fabs(got - want) / fmax(fabs(want), 1e-30);
        if (!(e <= worst)) { worst = e; worst_t = t; }
    }
    CHECK(worst <= 1e-6, "%s: every step within 1e-6 of the formula; worst %.3e at step %d", label, worst, worst_t);
}

static void test_cosine(void) {
    nb_schedule s = { NB_SCHEDULE_COSINE, 1e-3f, 1e-4f, 10, 110, 0.2f };
    const char *L = "cosine (lr 1e-3, min 1e-4, warmup 10, 110 steps)";
    expect(&s, L, 0, 1e-4);                   /* lr / warmup */
    expect(&s, L, 4, 5e-4);
    expect(&s, L, 9, 1e-3);                   /* lr at warmup - 1 */
    expect(&s, L, 10, 1e-3);                  /* p = 0 */
    expect(&s, L, 59, 1e-4 + 0.5 * 9e-4 * (1 + cos(M_PI * 49.0 / 99.0)));
    expect(&s, L, 109, 1e-4);                 /* p = 1 at the last step */
    expect(&s, L, 10 + 33, 1e-4 + 0.5 * 9e-4 * (1 + cos(M_PI / 3)));  /* p = 33/99 = 1/3: lr_min + 0.75 (lr - lr_min) */
    sweep(&s, L);
    nb_schedule z = { NB_SCHEDULE_COSINE, 2e-2f, 0.0f, 0, 51, 0.2f };
    const char *Z = "cosine (lr 2e-2, min 0, no warmup, 51 steps)";
    expect(&z, Z, 0, 2e-2);
    expect(&z, Z, 25, 1e-2);                  /* p = 1/2 */
    expect(&z, Z, 50, 0.0);
    sweep(&z, Z);
}

static void test_wsd(void) {
    nb_schedule s = { NB_SCHEDULE_WSD, 3e-3f, 3e-4f, 5, 100, 0.2f };   /* C = 20: decay over 80..99 */
    const char *L = "wsd (lr 3e-3, min 3e-4, warmup 5, 100 steps, cooldown 0.2)";
    expect(&s, L, 0, 3e-3 / 5);
    expect(&s, L, 4, 3e-3);
    expect(&s, L, 5, 3e-3);
    expect(&s, L, 79, 3e-3);                  /* still stable */
    expect(&s, L, 80, 3e-3);                  /* first decay step */
    expect(&s, L, 89, 3e-3 + (3e-4 - 3e-3) * 9.0 / 19.0);  /* 9 of the 19 decay intervals */
    expect(&s, L, 99, 3e-4);                  /* lr_min at the last step */
    sweep(&s, L);
    nb_schedule n = { NB_SCHEDULE_WSD, 1e-3f, 0.0f, 0, 50, 0.0f };
    sweep(&n, "wsd with cooldown 0 (constant)");
    expect(&n, "wsd with cooldown 0", 49, 1e-3);
}

static void test_constant(void) {
    nb_schedule s = { NB_SCHEDULE_CONSTANT, 5e-4f, 1e-5f, 4, 30, 0.2f };
    const char *L = "constant (lr 5e-4, warmup 4)";
    expect(&s, L, 0, 1.25e-4);
    expect(&s, L, 3, 5e-4);
    expect(&s, L, 4, 5e-4);
    expect(&s, L, 29, 5e-4);
    sweep(&s, L);
    nb_schedule nw = { NB_SCHEDULE_CONSTANT, 5e-4f, 0.0f, 0, 30, 0.2f };
    expect(&nw, "constant, no warmup", 0, 5e-4);
}

static void test_parse(void) {
    const char *names[] = { "cosine", "wsd", "constant" };
    const nb_schedule_kind kinds[] = { NB_SCHEDULE_COSINE, NB_SCHEDULE_WSD, NB_SCHEDULE_CONSTANT };
    for (int i = 0; i < 3; i++) {
        nb_schedule_kind k = (nb_schedule_kind)-1;
        CHECK(nb_schedule_parse(names[i], &k) == 0 && k == kinds[i], "parse '%s'", names[i]);
    }
    nb_schedule_kind k;
    CHECK(nb_schedule_parse("linear", &k) != 0, "parse 'linear' is rejected");
    const char *e = nb_last_error();
    for (int i = 0; i < 3; i++)
        CHECK(e && strstr(e, names[i]), "the error lists '%s': %s", names[i], e ? e : "(null)");
}

static void bad(nb_schedule s, const char *flag, const char *what) {
    int rc = nb_schedule_validate(&s);
    CHECK(rc != 0, "schedule %s %s is rejected", flag, what);
    if (rc) {
        const char *e = nb_last_error();
        CHECK(e && strstr(e, flag), "schedule %s %s: the message names the flag: %s", flag, what, e ? e : "(null)");
    }
}

static void test_validate(void) {
    const nb_schedule ok = { NB_SCHEDULE_COSINE, 1e-3f, 0.0f, 10, 100, 0.2f };
    CHECK(nb_schedule_validate(&ok) == 0, "a valid schedule validates: %s", nb_last_error());
    nb_schedule s = ok;
    s.lr = 0.0f; bad(s, "--lr", "0");
    s.lr = -1e-3f; bad(s, "--lr", "-1e-3");
    s.lr = NAN; bad(s, "--lr", "NaN");
    s.lr = INFINITY; bad(s, "--lr", "inf");
    s = ok; s.lr_min = -1e-4f; bad(s, "--lr-min", "-1e-4");
    s = ok; s.lr_min = NAN; bad(s, "--lr-min", "NaN");
    s = ok; s.warmup = -1; bad(s, "--warmup", "-1");
    s = ok; s.kind = NB_SCHEDULE_WSD; s.cooldown = -0.1f; bad(s, "--cooldown", "-0.1");
    s.cooldown = 1.5f; bad(s, "--cooldown", "1.5");
    s.cooldown = NAN; bad(s, "--cooldown", "NaN");
    s.cooldown = 1.0f;
    CHECK(nb_schedule_validate(&s) == 0, "wsd --cooldown 1 (all decay) is accepted");
}

int main(void) {
    test_cosine();
    test_wsd();
    test_constant();
    test_parse();
    test_validate();
    return check_summary();
}
