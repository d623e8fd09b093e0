/* Generation with a key/value cache gives, at every position, the logits of a full forward over
 * the prefix (the training path), for a grouped-query model split into 2 stages, tied and untied, and
 * for a mixture of experts (5 experts, 2 per token, in every other block). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "check.h"
#include "model_pass.h"
#include "nobubble/model.h"

enum { LEN = 20 };

static void check_config(int tied, int moe) {
    nb_config cfg = {40, 32, 3, 4, 2, 48, 24, 10000.0, 1e-5, tied, 0, 0, 0, 0.0};
    if (moe) {
        cfg.n_experts = 5;
        cfg.experts_per_token = 2;
        cfg.moe_every = 2;
        cfg.aux_coef = 0.01;
    }
    nb_model m;
    CHECK(nb_model_create(&m, &cfg, 2, NULL, NULL) == 0, "%s", nb_last_error());
    srand(11);
    for (int si = 0; si < m.n_stages; si++) {
        nb_stage *s = &m.stages[si];
        for (int ti = 0; ti < s->n_tensors; ti++) {
            const nb_tensor *t = &s->tensors[ti];
            for (size_t i = 0; i < t->numel; i++) {
                double z = rand() / (double)RAND_MAX - 0.5;
                s->params[t->offset + i] = (float)(t->group == NB_GROUP_GAIN ? 1.0 + 0.4 * z : z);
            }
        }
    }
    nb_model_sync_tied_copy(&m);
    int tok[LEN], tgt[LEN] = {0};
    for (int i = 0; i < LEN; i++) tok[i] = rand() % cfg.vocab_size;
    nb_kv_cache *kv = nb_kv_cache_create(&m, LEN);
    CHECK(kv != NULL, "%s", nb_last_error());
    float logits[40];
    double worst = 0;
    for (int p = 0; p < LEN; p++) {
        CHECK(nb_decode_step(&m, kv, tok[p], logits) == 0, "%s", nb_last_error());
        nb_acts *acts[2] = {nb_acts_create(&m.stages[0], 1, p + 1), nb_acts_create(&m.stages[1], 1, p + 1)};
        float loss;
        CHECK(model_forward(&m, acts, tok, tgt, &loss) == 0, "%s", nb_last_error());
        const float *full = nb_acts_logits(acts[1]) + (size_t)p * cfg.vocab_size;
        double e = check_rel_err_f(logits, full, (size_t)cfg.vocab_size, 1e-12);
        worst = e > worst ? e : worst;
        nb_acts_free(acts[0]);
        nb_acts_free(acts[1]);
    }
    printf("tied=%d moe=%d: cached against full-forward logits over %d positions: worst relative error %.3g\n", tied, moe,
           LEN, worst);
    CHECK(worst < 1e-5, "tied=%d moe=%d: cached logits equal the full forward's (worst %.3g)", tied, moe, worst);
    CHECK(nb_kv_cache_length(kv) == LEN, "cache length");
    CHECK(nb_decode_step(&m, kv, tok[0], logits) == -1 && strstr(nb_last_error(), "full"), "a full cache is refused: %s",
          nb_last_error());
    nb_kv_cache_free(kv);
    kv = nb_kv_cache_create(&m, LEN);
    CHECK(nb_decode_step(&m, kv, cfg.vocab_size, logits) == -1 && strstr(nb_last_error(), "vocabulary"),
          "a token outside the vocabulary is refused");
    nb_kv_cache_free(kv);
    CHECK(nb_kv_cache_create(&m, cfg.context + 1) == NULL && strstr(nb_last_error(), "context"), "longer than the context");
    nb_model_free(&m);
}

int main(void) {
    check_config(0, 0);
    check_config(1, 0);
    check_config(0, 1);
    return check_summary();
}
