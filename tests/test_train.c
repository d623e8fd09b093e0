/* The trainer: the same seed gives bitwise the same weights after 20 steps (and another seed
 * does not); loss falls on real English text (byte tokens of the King James Bible);
 * two stages in one process are bitwise the same run; AdamW's first steps equal the closed
 * form. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "check.h"
#include "kjv_data.h"
#include "nobubble/checkpoint.h"
#include "nobubble/data.h"
#include "nobubble/delay.h"
#include "nobubble/optim.h"
#include "nobubble/train.h"

static void check_determinism_and_learning(void) {
    kjv_paths paths;
    nb_train_options o = kjv_small_run(&paths);
    nb_train_result a, b, c;
    CHECK(nb_train(&o, &a) == 0, "run a: %s", nb_last_error());
    CHECK(nb_train(&o, &b) == 0, "run b: %s", nb_last_error());
    CHECK(a.weights_hash == b.weights_hash, "same seed, 20 steps: weights %016llx vs %016llx",
          (unsigned long long)a.weights_hash, (unsigned long long)b.weights_hash);
    CHECK(a.final_train_loss == b.final_train_loss && a.final_val_loss == b.final_val_loss, "same seed, same losses");
    o.seed = 2;
    CHECK(nb_train(&o, &c) == 0, "run c: %s", nb_last_error());
    CHECK(c.weights_hash != a.weights_hash, "another seed gives other weights");
    /* Learning: byte-level English starts at ln(256) = 5.55 nats; unigram statistics alone
     * bring it near 3.3, so a working trainer ends well below 4 after 60 steps. */
    o.seed = 1;
    o.steps = 60;
    nb_train_result d;
    CHECK(nb_train(&o, &d) == 0, "run d: %s", nb_last_error());
    printf("60 steps on KJV bytes: train %.4f, val %.4f (start ~%.4f)\n", d.final_train_loss, d.final_val_loss, log(256.0));
    CHECK(d.final_val_loss < 3.6, "validation loss fell from 5.55 to %.4f", d.final_val_loss);
    /* Two stages in one process: bitwise the same run. */
    o.stages = 2;
    nb_train_result e;
    CHECK(nb_train(&o, &e) == 0, "run e: %s", nb_last_error());
    CHECK(e.weights_hash == d.weights_hash, "2 stages equal 1 stage bitwise after 60 steps");
}

static void check_adamw_closed_form(void) {
    nb_config cfg = {8, 4, 1, 2, 1, 6, 4, 10000.0, 1e-5, 0, 0, 0, 0, 0.0};
    nb_model m;
    nb_model_create(&m, &cfg, 1, NULL, NULL);
    nb_stage *s = &m.stages[0];
    nb_optimizer *opt;
    nb_optim_params p = nb_optim_defaults(NB_OPT_ADAMW);
    p.weight_decay = 0.1f;
    CHECK(nb_optimizer_create(&opt, &p, s->tensors, s->n_tensors, s->n_params, NULL) == 0, "adamw: %s", nb_last_error());
    float *w = s->params, *g = s->grads, *d = calloc(s->n_params, sizeof(float));
    for (size_t i = 0; i < s->n_params; i++) { w[i] = 0.5f - 0.01f * (float)(i % 97); g[i] = 0.03f * (float)((int)(i % 11) - 5); }
    double maxerr = 0;
    double m1[4096], v1[4096];
    for (int step = 0; step < 2; step++) {
        nb_optimizer_step(opt, g, w, 0.01f, 0.01f, d);
        for (int ti = 0; ti < s->n_tensors; ti++) {
            const nb_tensor *t = &s->tensors[ti];
            double wd = t->group == NB_GROUP_GAIN ? 0.0 : 0.1;
            for (size_t k = t->offset; k < t->offset + t->numel; k++) {
                double gk = g[k];
                m1[k] = step == 0 ? 0.1 * gk : 0.9 * m1[k] + 0.1 * gk;
                v1[k] = step == 0 ? 0.05 * gk * gk : 0.95 * v1[k] + 0.05 * gk * gk;
                double mh = m1[k] / (1 - pow(0.9, step + 1)), vh = v1[k] / (1 - pow(0.95, step + 1));
                double want = 0.01 * mh / (sqrt(vh) + 1e-8) + 0.01 * wd * w[k];
                double err = fabs(d[k] - want) / (fabs(want) + 1e-6);
                if (err > maxerr) maxerr = err;
            }
        }
    }
    CHECK(s->n_params < 4096, "small enough");
    CHECK(maxerr < 1e-5, "AdamW steps 0 and 1 against the closed form: relative error %.3g", maxerr);
    /* At step 0 with wd = 0 on gains, |d| = lr * |g| / (|g| + eps): lr wherever g != 0. */
    const nb_tensor *gain = &s->tensors[1];
    nb_optimizer_free(opt);
    nb_optimizer_create(&opt, &p, s->tensors, s->n_tensors, s->n_params, NULL);
    nb_optimizer_step(opt, g, w, 0.01f, 0.01f, d);
    for (size_t k = gain->offset; k < gain->offset + gain->numel; k++)
        if (g[k] != 0) CHECK(fabsf(fabsf(d[k]) - 0.01f) < 1e-6f, "bias-corrected first step of a gain is lr");
    free(d);
    nb_optimizer_free(opt);
    nb_model_free(&m);
}

/* Every optimizer lowers the validation loss of a fresh model (ln 256 = 5.55 nats on bytes)
 * within 20 steps at a reasonable learning rate. */
static void check_each_optimizer_learns(void) {
    static const float lr[] = {0.05f, 3e-3f, 0.02f, 3e-3f, 3e-3f, 3e-3f, 3e-3f, 0.02f};
    _Static_assert(sizeof lr / sizeof lr[0] == NB_OPT_COUNT,
                   "one per optimizer: a new one needs its value here (docs/optimizers.md)");
    for (int k = 0; k < NB_OPT_COUNT; k++) {
        kjv_paths paths;
        nb_train_options o = kjv_small_run(&paths);
        o.optim = nb_optim_defaults((nb_optimizer_kind)k);
        o.optim.weight_decay = 0.1f;
        o.schedule.lr = lr[k];
        o.aux_lr = 3e-3f;
        nb_train_result r;
        CHECK(nb_train(&o, &r) == 0, "%s: %s", nb_optimizer_name((nb_optimizer_kind)k), nb_last_error());
        printf("%-6s 20 steps: val %.4f\n", nb_optimizer_name((nb_optimizer_kind)k), r.final_val_loss);
        CHECK(r.final_val_loss < 4.6, "%s lowers the validation loss from 5.55: %.4f",
              nb_optimizer_name((nb_optimizer_kind)k), r.final_val_loss);
    }
}

/* train --export writes the final weights: importing them gives bitwise the trained model. */
static void check_export_of_trained_weights(void) {
    kjv_paths paths;
    nb_train_options o = kjv_small_run(&paths);
    o.steps = 5;
    char dir[] = "/tmp/nb_test_export_XXXXXX";
    CHECK(mkdtemp(dir) != NULL, "temporary folder");
    o.export_dir = dir;
    nb_train_result r;
    CHECK(nb_train(&o, &r) == 0, "%s", nb_last_error());
    nb_model m;
    CHECK(nb_model_create(&m, &o.model, 2, NULL, NULL) == 0, "%s", nb_last_error());
    CHECK(nb_import_hf(&m, dir) == 0, "import: %s", nb_last_error());
    CHECK(nb_model_weights_hash(&m) == r.weights_hash, "the exported weights are the trained ones, bitwise");
    nb_model_free(&m);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    check_run(cmd);
}

/* Stopping after step 4 and resuming from its checkpoint gives bitwise the uninterrupted run, for
 * every optimizer and every delay mode, each without mitigations and with all of them (EF, Taylor,
 * a synchronous start and cooldown); 2 stages where the delay depends on the stage. */
static int resume_case(nb_optimizer_kind opt, const char *delay, int mitigated, int stages, int check_refusals) {
    kjv_paths paths;
    nb_train_options o = kjv_small_run(&paths);
    o.steps = 8;
    o.model.context = 32;  /* small: 56 cases, twice each */
    o.batch = 2;
    o.eval_batches = 2;
    o.optim = nb_optim_defaults(opt);
    o.optim.weight_decay = 0.1f;
    o.optim.precond_every = 3;
    o.schedule.lr = opt == NB_OPT_MUON || opt == NB_OPT_NORMUON ? 0.02f : opt == NB_OPT_LION ? 3e-4f : 3e-3f;
    nb_delay_parse(delay, &o.delay);
    if (mitigated) {
        o.delay.ef = 1;
        o.delay.taylor = 0.04f;
        o.delay.sync_start = 2;
        o.delay.sync_cooldown = 2;
    }
    o.stages = stages;
    o.data_seed = 7;
    char dir[] = "/tmp/nb_test_resume_XXXXXX", step4[300];
    CHECK(mkdtemp(dir) != NULL, "temporary folder");
    o.save_dir = dir;
    o.save_every = 4;
    nb_train_result whole, resumed;
    int ok = nb_train(&o, &whole) == 0;
    CHECK(ok, "%s %s: %s", nb_optimizer_name(opt), delay, nb_last_error());
    snprintf(step4, sizeof step4, "%s/step_000004", dir);
    o.save_dir = NULL;
    o.save_every = 0;
    o.resume_dir = step4;
    ok = ok && nb_train(&o, &resumed) == 0 && resumed.weights_hash == whole.weights_hash &&
         resumed.final_val_loss == whole.final_val_loss;
    if (!ok)
        fprintf(stderr, "  %s, %s%s, %d stage(s): the resumed run differs (%s)\n", nb_optimizer_name(opt), delay,
                mitigated ? " + ef, taylor, sync start and cooldown" : "", stages, nb_last_error());
    if (check_refusals) {  /* resuming into another run is refused, naming what differs */
        nb_train_options other = o;
        other.optim = nb_optim_defaults(NB_OPT_ADAMW);
        CHECK(nb_train(&other, &resumed) == -1 && strstr(nb_last_error(), "--optimizer adamw (checkpoint: muon)"),
              "another optimizer: %s", nb_last_error());
        other = o;
        other.data_seed = 8;
        CHECK(nb_train(&other, &resumed) == -1 && strstr(nb_last_error(), "--data-seed 8 (checkpoint: 7)"),
              "other data order: %s", nb_last_error());
    }
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    check_run(cmd);
    return ok;
}

static void check_exact_resume(void) {
    const char *delays[] = {"sync", "2bw", "pipedream", "fixed:2"};
    int cases = 0, good = 0;
    for (int opt = 0; opt < NB_OPT_COUNT; opt++)
        for (int d = 0; d < 4; d++)
            for (int mitigated = 0; mitigated < 2; mitigated++) {
                if (mitigated && !strcmp(delays[d], "sync")) continue;  /* nothing to mitigate */
                int stages = !strcmp(delays[d], "pipedream") ? 2 : 1;
                cases++;
                good += resume_case((nb_optimizer_kind)opt, delays[d], mitigated, stages,
                                    opt == NB_OPT_MUON && d == 1 && !mitigated);
            }
    CHECK(cases == NB_OPT_COUNT * 7 && good == cases,
          "every optimizer x delay (with and without mitigations): resumed at step 4 equals the whole run (%d of %d)", good,
          cases);
}

int main(void) {
    if (kjv_make_data()) {
        CHECK(0, "could not prepare test data: %s", nb_last_error());
        return check_summary();
    }
    check_adamw_closed_form();
    check_determinism_and_learning();
    check_each_optimizer_learns();
    check_export_of_trained_weights();
    check_exact_resume();
    kjv_remove_data();
    return check_summary();
}
