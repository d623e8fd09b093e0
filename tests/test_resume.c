/* Resuming: a checkpoint of one split resumes into another bitwise equal to the uninterrupted run
 * (the state is recorded by tensor name, so state.safetensors does not depend on the split), PipeDream
 * re-splits need --override, and configuration changes are refused naming both values unless they are
 * free to change or --override is given; fields that shape the state are refused even then. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "check.h"
#include "kjv_data.h"
#include "nobubble/checkpoint.h"
#include "nobubble/delay.h"
#include "nobubble/optim.h"
#include "nobubble/train.h"

/* A 3-layer run of 8 steps saving at step 4 into a fresh folder *dir. */
static nb_train_options run_of(kjv_paths *paths, nb_optimizer_kind opt, const char *delay, int ef, int stages, char *dir) {
    nb_train_options o = kjv_small_run(paths);
    o.model.n_layers = 3;
    o.steps = 8;
    o.optim = nb_optim_defaults(opt);
    o.optim.weight_decay = 0.1f;
    o.optim.precond_every = 3;
    o.schedule.lr = opt == NB_OPT_MUON || opt == NB_OPT_NORMUON ? 0.02f : 3e-3f;
    nb_delay_parse(delay, &o.delay);
    o.delay.ef = ef;
    o.stages = stages;
    o.data_seed = 7;
    CHECK(mkdtemp(dir) != NULL, "temporary folder");
    o.save_dir = dir;
    o.save_every = 4;
    return o;
}

static void remove_dir(const char *dir) {
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    check_run(cmd);
}

/* Saved with P stages, resumed with P': bitwise the uninterrupted run, tied and untied. */
static void check_resplit(void) {
    struct { nb_optimizer_kind opt; const char *delay; int ef, from, to, tied; } cases[] = {
        {NB_OPT_ADAMW, "sync", 0, 1, 3, 1},
        {NB_OPT_MUON, "2bw", 1, 2, 1, 1},
        {NB_OPT_SOAP, "fixed:2", 1, 3, 2, 1},
        {NB_OPT_ADAN, "2bw", 1, 1, 2, 0},
        {NB_OPT_NORMUON, "2bw", 1, 3, 2, 0},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        kjv_paths paths;
        char dir[] = "/tmp/nb_test_resplit_XXXXXX", step4[300];
        nb_train_options o = run_of(&paths, cases[c].opt, cases[c].delay, cases[c].ef, cases[c].from, dir);
        o.model.tied = cases[c].tied;
        nb_train_result whole, resumed;
        CHECK(nb_train(&o, &whole) == 0, "%s", nb_last_error());
        snprintf(step4, sizeof step4, "%s/step_000004", dir);
        o.save_dir = NULL;
        o.save_every = 0;
        o.resume_dir = step4;
        o.stages = cases[c].to;
        int rc = nb_train(&o, &resumed);
        CHECK(rc == 0, "resume: %s", nb_last_error());
        CHECK(rc == 0 && resumed.weights_hash == whole.weights_hash,
              "%s, %s%s, %s: saved with %d stage(s), resumed with %d, equals the whole run bitwise",
              nb_optimizer_name(cases[c].opt), cases[c].delay, cases[c].ef ? " + ef" : "",
              cases[c].tied ? "tied" : "untied", cases[c].from, cases[c].to);
        remove_dir(dir);
    }
}

/* The same tensors, in the same order, with bitwise the same values; metadata equal but the split (and so the
 * header's checksum). */
static int same_state(const char *a_dir, const char *b_dir) {
    char a_path[400], b_path[400];
    snprintf(a_path, sizeof a_path, "%s/state.safetensors", a_dir);
    snprintf(b_path, sizeof b_path, "%s/state.safetensors", b_dir);
    nb_st_file a, b;
    if (nb_st_open(a_path, &a)) return 0;
    if (nb_st_open(b_path, &b)) { nb_st_close(&a); return 0; }
    int same = a.n == b.n && a.n > 0;
    for (int i = 0; i < a.n && same; i++) {
        const nb_st_entry *x = &a.entries[i], *y = &b.entries[i];
        same = !strcmp(x->name, y->name) && x->numel == y->numel;
        float *u = malloc(sizeof(float) * (x->numel + 1)), *v = malloc(sizeof(float) * (x->numel + 1));
        same = same && u && v && !nb_st_read_f32(&a, x->name, u, x->numel) && !nb_st_read_f32(&b, y->name, v, y->numel) &&
               !memcmp(u, v, sizeof(float) * x->numel);
        if (!same) printf("  differs at tensor %d: %s / %s\n", i, x->name, y->name);
        free(u);
        free(v);
    }
    for (int k = 0; k < a.n_meta && same; k++) {
        const char *key = a.meta_keys[k], *other = nb_st_meta(&b, key);
        if (strcmp(key, "stages") && strcmp(key, "run.stages") && strcmp(key, NB_ST_HEADER_CHECKSUM_KEY))
            same = other && !strcmp(other, a.meta_values[k]);
        if (!same) printf("  metadata %s differs\n", key);
    }
    same = same && a.n_meta == b.n_meta;
    nb_st_close(&a);
    nb_st_close(&b);
    return same;
}

/* A checkpoint's state does not depend on the split: 1 and 3 stages save the same tensors bitwise. */
static void check_state_independent_of_split(void) {
    kjv_paths paths;
    char one[] = "/tmp/nb_test_split1_XXXXXX", three[] = "/tmp/nb_test_split3_XXXXXX", a[300], b[300];
    nb_train_options o = run_of(&paths, NB_OPT_MUON, "2bw", 1, 1, one);
    nb_train_result r;
    CHECK(nb_train(&o, &r) == 0, "%s", nb_last_error());
    o = run_of(&paths, NB_OPT_MUON, "2bw", 1, 3, three);
    CHECK(nb_train(&o, &r) == 0, "%s", nb_last_error());
    snprintf(a, sizeof a, "%s/step_000004", one);
    snprintf(b, sizeof b, "%s/step_000004", three);
    CHECK(same_state(a, b), "state.safetensors of 1 and 3 stages (muon, 2bw + ef): same tensors, bitwise");
    remove_dir(one);
    remove_dir(three);
}

/* Under PipeDream stage s runs on weights P-1-s steps old, so another split changes the delays: refused
 * naming --stages, and with --override it continues (versions it lacks start as the oldest it keeps). */
static void check_pipedream_resplit(void) {
    kjv_paths paths;
    char dir[] = "/tmp/nb_test_pdsplit_XXXXXX", step4[300];
    nb_train_options o = run_of(&paths, NB_OPT_ADAMW, "pipedream", 1, 2, dir);
    nb_train_result r;
    CHECK(nb_train(&o, &r) == 0, "%s", nb_last_error());
    snprintf(step4, sizeof step4, "%s/step_000004", dir);
    o.save_dir = NULL;
    o.save_every = 0;
    o.resume_dir = step4;
    for (int to = 1; to <= 3; to += 2) {
        o.stages = to;
        o.resume_override = 0;
        char want[64];
        snprintf(want, sizeof want, "--stages %d (checkpoint: 2)", to);
        CHECK(nb_train(&o, &r) == -1 && strstr(nb_last_error(), want), "pipedream 2 -> %d stages refused: %s", to,
              nb_last_error());
        o.resume_override = 1;
        int rc = nb_train(&o, &r);
        CHECK(rc == 0 && isfinite(r.final_train_loss), "pipedream 2 -> %d stages with --override: %s", to,
              rc ? nb_last_error() : "ok");
    }
    remove_dir(dir);
}

/* What may change on resume, what needs --override, and what never can. */
static void check_configuration_rules(void) {
    kjv_paths paths;
    char dir[] = "/tmp/nb_test_rules_XXXXXX", step4[300];
    nb_train_options base = run_of(&paths, NB_OPT_ADAMW, "2bw", 0, 1, dir);
    nb_train_result r;
    CHECK(nb_train(&base, &r) == 0, "%s", nb_last_error());
    snprintf(step4, sizeof step4, "%s/step_000004", dir);
    base.save_dir = NULL;
    base.save_every = 0;
    base.resume_dir = step4;
    /* free: more steps, logging, evaluation, the split */
    nb_train_options o = base;
    o.steps = 10;
    o.log_every = 3;
    o.eval_every = 2;
    o.stages = 2;
    CHECK(nb_train(&o, &r) == 0 && r.steps == 10, "--steps 10, --log-every, --eval-every, --stages change freely: %s",
          nb_last_error());
    o = base;
    o.steps = 3;
    CHECK(nb_train(&o, &r) == -1 && strstr(nb_last_error(), "at step 4, past this run's 3 steps"),
          "--steps below the checkpoint: %s", nb_last_error());
    /* override: named with both values, all of them; accepted with --override */
    o = base;
    o.schedule.lr = 2e-3f;
    o.batch = 2;
    o.delay.ef = 1;
    CHECK(nb_train(&o, &r) == -1 && strstr(nb_last_error(), "--lr 0.002 (checkpoint: 0.003)") &&
              strstr(nb_last_error(), "--batch 2 (checkpoint: 4)") && strstr(nb_last_error(), "--ef 1 (checkpoint: off)") &&
              strstr(nb_last_error(), "--override"),
          "changed --lr, --batch, --ef refused naming each: %s", nb_last_error());
    o.resume_override = 1;
    CHECK(nb_train(&o, &r) == 0 && isfinite(r.final_train_loss), "... and accepted with --override: %s", nb_last_error());
    /* fixed: the state's shapes */
    o = base;
    o.model.d_ffn = 96;
    o.resume_override = 1;
    CHECK(nb_train(&o, &r) == -1 && strstr(nb_last_error(), "model d_ffn 96 (checkpoint: 160)") &&
              strstr(nb_last_error(), "not even --override"),
          "another d_ffn is refused even with --override: %s", nb_last_error());
    o = base;
    o.resume_override = 1;
    o.resume_dir = NULL;
    CHECK(nb_train(&o, &r) == -1 && strstr(nb_last_error(), "--override needs --resume"), "--override alone: %s",
          nb_last_error());
    remove_dir(dir);
}

int main(void) {
    if (kjv_make_data()) {
        CHECK(0, "could not prepare test data: %s", nb_last_error());
        return check_summary();
    }
    check_resplit();
    check_state_independent_of_split();
    check_pipedream_resplit();
    check_configuration_rules();
    kjv_remove_data();
    return check_summary();
}
