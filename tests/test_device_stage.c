/* A stage on a backend with memory of its own (src/model/stage.h, nb_stage_place): on the guarded device
 * (src/backend/guarded.h, `--device guarded`), whose memory faults at any access that does not go through the backend, a
 * model's stages run forward and backward and give the CPU's bits: the loss, every gradient (the tied
 * head's too), the input gradient a stage hands upstream, and the output it hands downstream, for one stage
 * and for two (the second reading the first's output in the device's memory), tied and untied, the logits
 * whole and in chunks, over two micro-batches (the gradients add up). Nothing reached the device's memory
 * from the host but through the backend (a fault would end the test), and no host address was given where
 * the device's memory belongs. Mixture-of-experts blocks too (every block a MoE block, and every other one,
 * one stage and two): the routing, grouping, gathering, balance and sums through the layer table, each
 * expert's product sized by the counts read back. Under bf16 too (the layers' bf16 entries, the versions' bf16 copies in the
 * device's memory), every check above gives the CPU's bits. The optimizer's element-wise rules with
 * their state in the device's memory give the CPU's steps and state (check_rule_on_device), and the delay
 * rules' versions, error feedback and Taylor compensation (its metric too) there the CPU's (check_delay_on_device). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "check.h"
#include "backend/guarded.h"
#include "stage_run.h"
#include "model/stage.h"
#include "nobubble/model.h"
#include "nobubble/delay.h"
#include "nobubble/optim.h"
#include "util/error.h"

enum { B = 2, T = 12, VOCAB = 64 };

static nb_config small_config(int tied) {
    nb_config cfg;
    nb_config_preset("tiny", &cfg);
    cfg.n_layers = 3;
    cfg.vocab_size = VOCAB;
    cfg.context = 16;
    cfg.tied = tied;
    return cfg;
}

/* moe_every 0: dense; else 4 experts, 2 a token, in every moe_every-th block. */
static nb_config moe_config(int tied, int moe_every) {
    nb_config cfg = small_config(tied);
    if (moe_every) cfg.n_experts = 4, cfg.experts_per_token = 2, cfg.moe_every = moe_every, cfg.aux_coef = 0.01;
    return cfg;
}

static int same(const float *a, const float *b, size_t n) { return (!a && !b) || (a && b && !memcmp(a, b, sizeof(float) * n)); }

static void check_same_run(const nb_backend *cpu, nb_backend *dev, int tied, int n_stages, int logit_rows, nb_precision p,
                           int moe_every) {
    const nb_config cfg = moe_config(tied, moe_every);
    nb_model layout;
    if (nb_model_layout(&layout, &cfg, n_stages, NULL)) {
        CHECK(0, "layout: %s", nb_last_error());
        return;
    }
    stage_outcome want, got;
    const long misuses = nb_guarded_misuses(dev);
    const int ok = stage_run_at(cpu, &cfg, n_stages, B, T, logit_rows, p, &want) == 0 &&
                   stage_run_at(dev, &cfg, n_stages, B, T, logit_rows, p, &got) == 0;
    char what[96];
    snprintf(what, sizeof what, "%s, %s, %d stage(s), logits %s%s", nb_precision_name(p), tied ? "tied" : "untied",
             n_stages, logit_rows ? "in chunks" : "whole",
             moe_every == 1 ? ", MoE blocks" : moe_every ? ", every other block MoE" : "");
    if (ok) {
        const size_t nd = (size_t)B * T * cfg.d_model;
        for (int k = 0; k < STAGE_RUN_MICRO; k++)
            CHECK(!memcmp(&want.loss[k], &got.loss[k], sizeof(float)), "%s: micro-batch %d's loss %.9g on the device, %.9g on the CPU",
                  what, k, (double)got.loss[k], (double)want.loss[k]);
        for (int s = 0; s < n_stages; s++) {
            CHECK(same(want.grads[s], got.grads[s], layout.stages[s].n_params), "%s: stage %d's gradients differ", what, s);
            CHECK(same(want.tied[s], got.tied[s], layout.stages[s].tensors[0].numel), "%s: stage %d's tied head gradient differs",
                  what, s);
        }
        for (int k = 0; k < STAGE_RUN_MICRO && n_stages == 2; k++) {
            CHECK(same(want.output[k], got.output[k], nd), "%s: stage 0's output differs (micro-batch %d)", what, k);
            CHECK(same(want.input_grad[k], got.input_grad[k], nd), "%s: stage 1's input gradient differs (micro-batch %d)",
                  what, k);
        }
        printf("%s: losses %.7f, %.7f, the CPU's bits\n", what, (double)got.loss[0], (double)got.loss[1]);
    }
    CHECK(nb_guarded_misuses(dev) == misuses, "%s: %ld host addresses given as the device's memory", what,
          nb_guarded_misuses(dev) - misuses);
    stage_outcome_free(&want), stage_outcome_free(&got);
    nb_model_free(&layout);
}

/* ---- The optimizer's element-wise rules in the device's memory ----
 * One stage's gradients from one micro-batch, then three steps of an optimizer made on the backend (its
 * state in the backend's memory, the step d too): d at every step and every state buffer at the end are
 * the CPU's bits, for AdamW, Lion, Adan and MARS (whose embeddings and gains take the auxiliary AdamW). */
static nb_optimizer *stepped(const nb_backend *be, nb_optimizer_kind kind, float *d_steps[3], nb_model *m) {
    const nb_config cfg = small_config(0);
    nb_optimizer *o = NULL;
    if (nb_model_create(m, &cfg, 1, NULL, be) || nb_model_init(m, 5)) {
        CHECK(0, "model on %s: %s", be->name, nb_last_error());
        return NULL;
    }
    nb_stage *s = &m->stages[0];
    nb_acts *a = nb_acts_create(s, B, T);
    int tokens[B * T], targets[B * T];
    for (int i = 0; i < B * T; i++) tokens[i] = (3 * i + 1) % VOCAB, targets[i] = (11 * i + 5) % VOCAB;
    float loss;
    nb_optim_params p = nb_optim_defaults(kind);
    p.weight_decay = 0.1f;
    float *d = nb_backend_alloc(be, sizeof(float) * s->n_params, "a test's step");
    int rc = !a || !d || nb_stage_forward(s, s->params, 0, a, tokens, NULL, targets, &loss) ||
             nb_stage_backward(s, s->params, 0, a, NULL, 1.0f) ||
             nb_optimizer_create(&o, &p, s->tensors, s->n_tensors, s->n_params, be);
    for (int k = 0; k < 3 && !rc; k++) {
        rc = nb_optimizer_step(o, s->grads, s->params, 2e-3f, 1e-3f, d);
        d_steps[k] = calloc(s->n_params, sizeof(float));
        if (!rc && d_steps[k]) nb_backend_to_host(be, d_steps[k], d, sizeof(float) * s->n_params);
    }
    CHECK(rc == 0, "%s on %s: %s", nb_optimizer_desc_of(kind)->name, be->name, rc ? nb_last_error() : "");
    nb_backend_free(be, d);
    nb_acts_free(a);
    if (rc) {
        nb_optimizer_free(o);
        return NULL;
    }
    return o;
}

static void check_rule_on_device(const nb_backend *cpu, nb_backend *dev, nb_optimizer_kind kind) {
    float *want[3] = {0}, *got[3] = {0};
    const long misuses = nb_guarded_misuses(dev);
    nb_model mc, md;
    const char *name = nb_optimizer_desc_of(kind)->name;
    nb_optimizer *oc = stepped(cpu, kind, want, &mc), *od = oc ? stepped(dev, kind, got, &md) : NULL;
    if (oc && od) {
        const size_t n = mc.stages[0].n_params;
        for (int k = 0; k < 3; k++) CHECK(same(want[k], got[k], n), "%s: step %d's d differs from the CPU's", name, k);
        int states = nb_optimizer_state_count(od), same_states = states == nb_optimizer_state_count(oc);
        for (int i = 0; i < states && same_states; i++) {
            const char *nc, *nd;
            float *c, *dd;
            size_t lc, ld;
            nb_optimizer_state(oc, i, &nc, &c, &lc);
            nb_optimizer_state(od, i, &nd, &dd, &ld);
            float *h = calloc(ld ? ld : 1, sizeof(float));
            if (h && nb_optimizer_state_on_device(od, i)) nb_backend_to_host(dev, h, dd, sizeof(float) * ld);
            else if (h) memcpy(h, dd, sizeof(float) * ld);  /* SOAP's: the host's (its rule runs there) */
            same_states = h && lc == ld && !strcmp(nc, nd) && same(c, h, lc);
            free(h);
        }
        CHECK(same_states, "%s: the state buffers differ from the CPU's", name);
        printf("%s in the device's memory: d of 3 steps and %d state buffers, the CPU's bits\n", name, states);
    }
    CHECK(nb_guarded_misuses(dev) == misuses, "%s: %ld host addresses given as the device's memory", name,
          nb_guarded_misuses(dev) - misuses);
    for (int k = 0; k < 3; k++) free(want[k]), free(got[k]);
    nb_optimizer_free(oc), nb_optimizer_free(od);
    if (oc) nb_model_free(&mc);
    if (od) nb_model_free(&md);
}

/* ---- The delay rules in the device's memory ----
 * Four steps of a training loop on one stage (the forward and backward on the stashed version the delay
 * picks, the optimizer's d, the stash's update, the gradients zeroed), under 2BW with and without error
 * feedback and PipeDream's fixed:2: the weights, the stashed versions and the EF buffer at the end are the
 * CPU's bits. */
static float *trained(const nb_backend *be, const nb_delay_options *delay, float **versions, size_t *n_versions,
                      float **ef, size_t *n_ef, size_t *n, double *taylor_sq) {
    const nb_config cfg = small_config(0);
    nb_model m;
    nb_optimizer *o = NULL;
    nb_stash *st = NULL;
    float *weights = NULL;
    if (nb_model_create(&m, &cfg, 1, NULL, be) || nb_model_init(&m, 9)) {
        CHECK(0, "model on %s: %s", be->name, nb_last_error());
        return NULL;
    }
    nb_stage *s = &m.stages[0];
    *n = s->n_params;
    nb_acts *a = nb_acts_create(s, B, T);
    nb_optim_params p = nb_optim_defaults(NB_OPT_ADAMW);
    float *d = nb_backend_alloc(be, sizeof(float) * s->n_params, "a test's step"), loss;
    int rc = !a || !d || nb_optimizer_create(&o, &p, s->tensors, s->n_tensors, s->n_params, be) ||
             nb_stash_create_on(&st, delay, 0, 1, 4, s->params, s->n_params, be);
    for (int step = 0; step < 4 && !rc; step++) {
        int tokens[B * T], targets[B * T];
        for (int i = 0; i < B * T; i++) tokens[i] = (5 * i + step) % VOCAB, targets[i] = (3 * i + 2 * step + 1) % VOCAB;
        const float *w = nb_stash_weights(st, s->params, step);
        rc = nb_stage_forward(s, w, step, a, tokens, NULL, targets, &loss) || nb_stage_backward(s, w, step, a, NULL, 1.0f);
        if (!rc && delay->taylor > 0) {  /* its metric (the correction's norm), then the correction, as the executor */
            taylor_sq[step] = nb_stash_taylor_sq(st, s->grads, s->params, step, 0, s->n_params);
            nb_stash_taylor(st, s->grads, s->params, step);
        }
        if (!rc) rc = nb_optimizer_step(o, s->grads, s->params, 3e-3f, 3e-3f, d);
        if (!rc) nb_stash_apply(st, s->params, d, step), nb_model_zero_grads(&m);
        if (!rc) rc = nb_backend_check(be);
    }
    CHECK(rc == 0, "training on %s under %s: %s", be->name, nb_delay_mode_name(delay->mode), rc ? nb_last_error() : "");
    if (!rc) {
        weights = calloc(s->n_params, sizeof(float));
        const float *v = nb_stash_versions(st, n_versions), *e = nb_stash_ef_buffer(st, n_ef);
        *versions = calloc(*n_versions + 1, sizeof(float)), *ef = calloc(*n_ef + 1, sizeof(float));
        if (weights) nb_backend_to_host(be, weights, s->params, sizeof(float) * s->n_params);
        if (*versions && v) nb_backend_to_host(be, *versions, v, sizeof(float) * *n_versions);
        if (*ef && e) nb_backend_to_host(be, *ef, e, sizeof(float) * *n_ef);
    }
    nb_stash_free(st);
    nb_optimizer_free(o);
    nb_backend_free(be, d);
    nb_acts_free(a);
    nb_model_free(&m);
    return weights;
}

static void check_delay_on_device(const nb_backend *cpu, nb_backend *dev, nb_delay_mode mode, int tau, int ef,
                                  float taylor) {
    nb_delay_options o = {0};
    o.mode = mode, o.tau = tau, o.ef = ef, o.ef_alpha = 1.0f, o.taylor = taylor;
    char what[64];
    snprintf(what, sizeof what, "%s%s%s", mode == NB_DELAY_FIXED ? "fixed:2" : nb_delay_mode_name(mode), ef ? " + EF" : "",
             taylor > 0 ? " + Taylor" : "");
    double sq_c[4] = {0}, sq_d[4] = {0};
    float *vc = NULL, *vd = NULL, *ec = NULL, *ed = NULL;
    size_t n = 0, nvc = 0, nvd = 0, nec = 0, ned = 0;
    const long misuses = nb_guarded_misuses(dev);
    float *wc = trained(cpu, &o, &vc, &nvc, &ec, &nec, &n, sq_c),
          *wd = wc ? trained(dev, &o, &vd, &nvd, &ed, &ned, &n, sq_d) : NULL;
    if (wc && wd) {
        CHECK(!memcmp(sq_c, sq_d, sizeof sq_c), "%s: Taylor's metric differs from the CPU's (step 1: %.17g, %.17g)", what,
              sq_d[1], sq_c[1]);
        CHECK(taylor == 0 || sq_c[1] > 0, "%s: Taylor's correction is zero at step 1 (the check would see nothing)", what);
        CHECK(same(wc, wd, n), "%s: the weights after 4 steps differ from the CPU's", what);
        CHECK(nvc == nvd && same(vc, vd, nvc), "%s: the stashed versions differ (%zu and %zu values)", what, nvc, nvd);
        CHECK(nec == ned && same(ec, ed, nec), "%s: the EF buffers differ (%zu and %zu values)", what, nec, ned);
        printf("%s in the device's memory: weights, %zu stashed and %zu EF values after 4 steps, the CPU's bits\n", what,
               nvd, ned);
    }
    CHECK(nb_guarded_misuses(dev) == misuses, "%s: %ld host addresses given as the device's memory", what,
          nb_guarded_misuses(dev) - misuses);
    free(wc), free(wd), free(vc), free(vd), free(ec), free(ed);
}

/* A split backward (ZB-H1's: its record of dY in the device's memory) runs there, and a placed stage is not
 * placed twice. */
static void check_split_and_place(nb_backend *dev) {
    nb_config cfg = small_config(1);
    nb_model m;
    if (nb_model_create(&m, &cfg, 1, NULL, dev) || nb_model_init(&m, 1)) {
        CHECK(0, "model: %s", nb_last_error());
        return;
    }
    nb_stage *s = &m.stages[0];
    nb_acts *a = NULL;
    int tokens[B * T] = {0}, targets[B * T] = {0};
    float loss;
    a = nb_acts_create(s, B, T);
    nb_wgrad *g = nb_wgrad_create();
    const long misuses = nb_guarded_misuses(dev);
    CHECK(a && g && nb_stage_forward(s, s->params, 0, a, tokens, NULL, targets, &loss) == 0 &&
              nb_stage_backward_input(s, s->params, 0, a, NULL, 1.0f, g) == 0 && nb_stage_backward_weight(s, g) == 0 &&
              nb_guarded_misuses(dev) == misuses,
          "a split backward on the device (its record of dY in the device's memory): %s", nb_last_error());
    nb_wgrad_free(g);
    nb_acts_free(a);
    CHECK(nb_stage_place(s, dev) == -1 && strstr(nb_last_error(), "already"), "a placed stage is not placed twice: %s",
          nb_last_error());
    nb_model_free(&m);
}

int main(void) {
    const nb_backend *cpu = nb_backend_default();
    nb_backend *dev = cpu ? nb_guarded_wrap(cpu, 0) : NULL;
    if (!dev) {
        fprintf(stderr, "FAIL: the CPU backend or the guarded device could not be made: %s\n", nb_last_error());
        return 1;
    }
    for (int bf16 = 0; bf16 < 2; bf16++) {
        const nb_precision p = bf16 ? NB_PRECISION_BF16 : NB_PRECISION_FP32;
        for (int tied = 0; tied < 2; tied++)
            for (int n_stages = 1; n_stages <= 2; n_stages++) check_same_run(cpu, dev, tied, n_stages, 0, p, 0);
        check_same_run(cpu, dev, 1, 1, 5, p, 0);  /* the head in chunks of 5 rows: recomputed logits in backward */
        check_same_run(cpu, dev, 0, 2, 7, p, 0);
        for (int n_stages = 1; n_stages <= 2; n_stages++) {
            check_same_run(cpu, dev, 1, n_stages, 0, p, 1);
            check_same_run(cpu, dev, 0, n_stages, 0, p, 2);
        }
    }
    const nb_optimizer_kind kinds[] = {NB_OPT_ADAMW, NB_OPT_LION,  NB_OPT_ADAN, NB_OPT_MARS,
                                       NB_OPT_MUON,  NB_OPT_NORMUON, NB_OPT_SOAP};
    for (int i = 0; i < 7; i++) check_rule_on_device(cpu, dev, kinds[i]);
    check_delay_on_device(cpu, dev, NB_DELAY_2BW, 0, 0, 0.0f);
    check_delay_on_device(cpu, dev, NB_DELAY_2BW, 0, 1, 0.0f);
    check_delay_on_device(cpu, dev, NB_DELAY_2BW, 0, 0, 0.5f);
    check_delay_on_device(cpu, dev, NB_DELAY_FIXED, 2, 1, 0.5f);
    check_delay_on_device(cpu, dev, NB_DELAY_FIXED, 2, 1, 0.0f);
    check_split_and_place(dev);
    nb_backend_close(dev);
    return check_summary();
}
