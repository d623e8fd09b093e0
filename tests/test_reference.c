/* The C model against the independent PyTorch reference (tools/reference/llama_reference.py):
 * for each fixture, unsplit and split in two stages, the loss, the logits and the gradient of
 * every parameter must match the float64 reference. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "check.h"
#include "model_pass.h"
#include "fixture.h"
#include "nobubble/model.h"

#define LOSS_TOL 1e-5
#define LOGITS_TOL 1e-5
#define GRAD_TOL 1e-4
#define FLOOR 1e-12

static const nbfx_entry *need(const nbfx *f, const char *name, int dtype, size_t numel) {
    const nbfx_entry *e = nbfx_get(f, name);
    CHECK(e != NULL, "fixture entry '%s' present", name);
    if (!e) return NULL;
    CHECK(e->dtype == dtype && (numel == 0 || e->numel == numel),
          "fixture entry '%s': dtype %d numel %zu (expected dtype %d numel %zu)", name, e->dtype,
          e->numel, dtype, numel);
    if (e->dtype != dtype || (numel && e->numel != numel)) return NULL;
    return e;
}

/* The fixture name of a model tensor: a tied copy of the embedding reads the embedding. */
static const char *ref_name(const nb_tensor *t) {
    return t->tied_copy ? "model.embed_tokens.weight" : t->name;
}

static int shape_matches(const nb_tensor *t, const nbfx_entry *e) {
    if (e->ndim != t->ndim || e->numel != t->numel) return 0;
    for (int k = 0; k < t->ndim; k++)
        if (e->dims[k] != (uint64_t)t->shape[k]) return 0;
    return 1;
}

/* Runs one model (n_stages with blocks[]) on fixture f; *logits_out / *grads_out (optional)
 * receive copies of the last stage's logits and of every stage's grads concatenated, for
 * comparing splits with each other. Returns 0 when it ran. */
static int run_case(const char *label, const nbfx *f, const nb_config *cfg, int B, int T,
                    int n_stages, const int *blocks, float **logits_out) {
    printf("== %s: %d stage(s)", label, n_stages);
    for (int i = 0; i < n_stages; i++) printf("%s%d", i ? "," : " blocks {", blocks[i]);
    printf("}\n");
    nb_model m;
    memset(&m, 0, sizeof m);
    int rc = nb_model_create(&m, cfg, n_stages, blocks, NULL);
    CHECK(rc == 0, "%s: nb_model_create: %s", label, rc ? nb_last_error() : "");
    if (rc) return -1;
    CHECK(m.n_stages == n_stages, "%s: model has %d stages, expected %d", label, m.n_stages, n_stages);

    /* Load every tensor's weights from the fixture; count what the model holds. */
    size_t counted = 0;
    int n_tensors_total = 0, loaded_ok = 1;
    for (int si = 0; si < m.n_stages; si++) {
        nb_stage *s = &m.stages[si];
        size_t end = 0;
        for (int ti = 0; ti < s->n_tensors; ti++) {
            const nb_tensor *t = &s->tensors[ti];
            n_tensors_total++;
            if (!t->tied_copy) counted += t->numel;
            if (t->offset + t->numel > end) end = t->offset + t->numel;
            const nbfx_entry *e = nbfx_get(f, ref_name(t));
            CHECK(e != NULL, "%s: stage %d tensor '%s'%s has a fixture weight '%s'", label, si,
                  t->name, t->tied_copy ? " (tied copy)" : "", ref_name(t));
            if (!e) { loaded_ok = 0; continue; }
            int ok = e->dtype == NBFX_F64 && shape_matches(t, e);
            CHECK(ok, "%s: tensor '%s' shape [%d,%d] (ndim %d) matches the fixture's", label,
                  t->name, t->shape[0], t->ndim > 1 ? t->shape[1] : 0, t->ndim);
            if (!ok) { loaded_ok = 0; continue; }
            CHECK(t->tied_copy == (cfg->tied && !s->has_embed && !strcmp(t->name, "lm_head.weight")),
                  "%s: tensor '%s' tied_copy flag %d as expected", label, t->name, t->tied_copy);
            for (size_t k = 0; k < t->numel; k++) s->params[t->offset + k] = (float)e->f64[k];
        }
        CHECK(end <= s->n_params, "%s: stage %d tensors end at %zu within n_params %zu", label,
              si, end, s->n_params);
    }
    CHECK(counted == nb_config_param_count(cfg),
          "%s: tensors hold %zu parameters, nb_config_param_count says %zu", label, counted,
          nb_config_param_count(cfg));
    /* Every weight of the fixture must be held by some tensor of the model. */
    for (int i = 0; i < f->n_entries; i++) {
        const char *name = f->entries[i].name;
        if (strncmp(name, "model.", 6) && strcmp(name, "lm_head.weight")) continue;
        int found = 0;
        for (int si = 0; si < m.n_stages && !found; si++)
            for (int ti = 0; ti < m.stages[si].n_tensors && !found; ti++)
                found = !strcmp(ref_name(&m.stages[si].tensors[ti]), name);
        CHECK(found, "%s: fixture weight '%s' is held by a model tensor", label, name);
        if (!found) loaded_ok = 0;
    }
    printf("  %d tensors, %zu parameters\n", n_tensors_total, counted);
    if (!loaded_ok) { nb_model_free(&m); return -1; }

    const nbfx_entry *tok = need(f, "tokens", NBFX_I32, (size_t)B * T);
    const nbfx_entry *tgt = need(f, "targets", NBFX_I32, (size_t)B * T);
    const nbfx_entry *loss_ref = need(f, "loss", NBFX_F64, 1);
    const nbfx_entry *logits_ref = need(f, "logits", NBFX_F64, (size_t)B * T * cfg->vocab_size);
    if (!tok || !tgt || !loss_ref || !logits_ref) { nb_model_free(&m); return -1; }
    int *tokens = malloc(sizeof(int) * B * T), *targets = malloc(sizeof(int) * B * T);
    for (int i = 0; i < B * T; i++) { tokens[i] = tok->i32[i]; targets[i] = tgt->i32[i]; }

    nb_acts **acts = calloc((size_t)m.n_stages, sizeof *acts);
    int acts_ok = 1;
    for (int si = 0; si < m.n_stages; si++) {
        acts[si] = nb_acts_create(&m.stages[si], B, T);
        CHECK(acts[si] != NULL, "%s: nb_acts_create stage %d: %s", label, si,
              acts[si] ? "" : nb_last_error());
        if (!acts[si]) acts_ok = 0;
    }
    int ran = -1;
    if (acts_ok) {
        nb_model_zero_grads(&m);
        float loss = NAN;
        rc = model_forward(&m, acts, tokens, targets, &loss);
        CHECK(rc == 0, "%s: model_forward: %s", label, rc ? nb_last_error() : "");
        if (rc == 0) {
            double lref = loss_ref->f64[0];
            double lerr = fabs((double)loss - lref) / fabs(lref);
            printf("  loss       %.8f ref %.8f rel err %.3g\n", (double)loss, lref, lerr);
            CHECK(lerr <= LOSS_TOL, "%s: loss %.8f vs reference %.8f (rel err %.3g > %g)", label,
                  (double)loss, lref, lerr, LOSS_TOL);
            const float *logits = nb_acts_logits(acts[m.n_stages - 1]);
            CHECK(logits != NULL, "%s: nb_acts_logits after forward", label);
            if (logits) {
                size_t n = logits_ref->numel;
                double err = check_rel_err_d(logits, logits_ref->f64, n, FLOOR);
                printf("  logits     rel err %.3g\n", err);
                CHECK(err <= LOGITS_TOL, "%s: logits rel err %.3g > %g", label, err, LOGITS_TOL);
                if (logits_out) {
                    *logits_out = malloc(n * sizeof(float));
                    memcpy(*logits_out, logits, n * sizeof(float));
                }
            }
            rc = model_backward(&m, acts, 1.0f);
            CHECK(rc == 0, "%s: model_backward: %s", label, rc ? nb_last_error() : "");
            if (rc == 0) {
                model_sum_tied_grads(&m);
                ran = 0;
                for (int si = 0; si < m.n_stages; si++) {
                    nb_stage *s = &m.stages[si];
                    for (int ti = 0; ti < s->n_tensors; ti++) {
                        const nb_tensor *t = &s->tensors[ti];
                        char gname[96];
                        snprintf(gname, sizeof gname, "grad:%s", ref_name(t));
                        const nbfx_entry *g = need(f, gname, NBFX_F64, t->numel);
                        if (!g) continue;
                        double err = check_rel_err_d(s->grads + t->offset, g->f64, t->numel, FLOOR);
                        double gmax = 0;
                        for (size_t k = 0; k < t->numel; k++)
                            if (fabs(g->f64[k]) > gmax) gmax = fabs(g->f64[k]);
                        printf("  grad s%d %-44s rel err %.3g (max |ref| %.3g)%s\n", si, t->name,
                               err, gmax, t->tied_copy ? " [tied copy]" : "");
                        CHECK(err <= GRAD_TOL, "%s: grad of stage %d '%s'%s rel err %.3g > %g", label,
                              si, t->name, t->tied_copy ? " (tied copy, summed)" : "", err, GRAD_TOL);
                    }
                }
            }
        }
    }
    for (int si = 0; si < m.n_stages; si++) nb_acts_free(acts[si]);
    free(acts);
    free(tokens);
    free(targets);
    nb_model_free(&m);
    return ran;
}

static void run_fixture(const char *path) {
    printf("### %s\n", path);
    nbfx *f = nbfx_load(path);
    CHECK(f != NULL, "load fixture %s (regenerate with tools/reference/llama_reference.py)", path);
    if (!f) return;
    nb_config cfg;
    int B, T;
    if (nbfx_model_config(f, &cfg, &B, &T)) {
        CHECK(0, "%s: model configuration entries", path);
        nbfx_free(f);
        return;
    }
    int rc = nb_config_validate(&cfg);
    CHECK(rc == 0, "%s: config validates: %s", path, rc ? nb_last_error() : "");
    if (rc) { nbfx_free(f); return; }
    printf("config: vocab %d d %d layers %d heads %d kv %d ffn %d ctx %d tied %d theta %g; B %d T %d\n",
           cfg.vocab_size, cfg.d_model, cfg.n_layers, cfg.n_heads, cfg.n_kv_heads, cfg.d_ffn,
           cfg.context, cfg.tied, cfg.rope_theta, B, T);

    int one[1] = { cfg.n_layers };
    int two[2] = { (cfg.n_layers + 1) / 2, cfg.n_layers / 2 };   /* {1,1} for 2, {2,1} for 3 */
    float *l1 = NULL, *l2 = NULL;
    char label[256];
    snprintf(label, sizeof label, "%s [1 stage]", path);
    run_case(label, f, &cfg, B, T, 1, one, &l1);
    snprintf(label, sizeof label, "%s [2 stages]", path);
    run_case(label, f, &cfg, B, T, 2, two, &l2);
    if (l1 && l2) {   /* informational: the header promises splits compute identically */
        size_t n = (size_t)B * T * cfg.vocab_size, diff = 0;
        for (size_t i = 0; i < n; i++) diff += memcmp(&l1[i], &l2[i], sizeof(float)) != 0;
        printf("  (info) 1-stage vs 2-stage logits: %zu of %zu values differ bitwise\n", diff, n);
    }
    free(l1);
    free(l2);
    nbfx_free(f);
}

int main(void) {
    run_fixture("tests/fixtures/llama_untied.nbfx");
    run_fixture("tests/fixtures/llama_tied.nbfx");
    return check_summary();
}
