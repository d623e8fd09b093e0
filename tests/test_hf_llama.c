/* Hugging Face's own LlamaForCausalLM as the reference: tools/reference/hf_reference.py saved two
 * small random models with save_pretrained (tests/fixtures/hf_untied, grouped-query with an untied
 * head; hf_tied, multi-query with a tied head) and the logits and loss transformers computes for
 * fixed tokens. nobubble imports each folder (nb_import_hf, into 1 and 2 stages) and its float32
 * forward must give the same logits and loss. Both sides run in float32, so the tolerance is
 * 2e-5 of the largest logit (the two differ only in the order of float32 operations). The untied
 * model saved sharded (max_shard_size 20 kB) must import to the same. */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "check.h"
#include "model_pass.h"
#include "fixture.h"
#include "nobubble/checkpoint.h"
#include "nobubble/model.h"

/* folder: the saved model (NULL: hf_NAME); the untied one is also saved sharded, as Hugging Face saves
 * large models (model.safetensors.index.json and four parts). */
static void check_fixture(const char *name, const char *folder, int n_stages) {
    char path[256], dir[256];
    snprintf(path, sizeof path, "tests/fixtures/hf_%s.nbfx", name);
    snprintf(dir, sizeof dir, "tests/fixtures/%s", folder ? folder : "");
    if (!folder) snprintf(dir, sizeof dir, "tests/fixtures/hf_%s", name);
    nbfx *f = nbfx_load(path);
    CHECK(f != NULL, "%s: fixture loads", path);
    if (!f) return;
    nb_config cfg;
    int B, T;
    if (nbfx_model_config(f, &cfg, &B, &T)) {
        CHECK(0, "%s: model configuration entries", path);
        nbfx_free(f);
        return;
    }
    const int N = B * T;
    nb_model m;
    CHECK(nb_model_create(&m, &cfg, n_stages, NULL, NULL) == 0, "%s", nb_last_error());
    CHECK(nb_import_hf(&m, dir) == 0, "%s: import: %s", dir, nb_last_error());
    nb_acts *acts[2];
    for (int i = 0; i < n_stages; i++) acts[i] = nb_acts_create(&m.stages[i], B, T);
    float loss = 0;
    CHECK(model_forward(&m, acts, nbfx_get(f, "tokens")->i32, nbfx_get(f, "targets")->i32, &loss) == 0, "%s",
          nb_last_error());
    double ref_loss = nbfx_get(f, "loss")->f64[0];
    double lerr = check_rel_err_d(nb_acts_logits(acts[n_stages - 1]), nbfx_get(f, "logits")->f64,
                                  (size_t)N * cfg.vocab_size, 1e-12);
    printf("%s, %d stage(s): loss %.8f vs transformers %.8f; logits relative error %.3g\n", name, n_stages, loss,
           ref_loss, lerr);
    CHECK(fabs(loss - ref_loss) <= 1e-5 * fabs(ref_loss), "%s: loss %.8f vs transformers' %.8f", name, loss, ref_loss);
    CHECK(lerr < 2e-5, "%s: logits against transformers: relative error %.3g", name, lerr);
    for (int i = 0; i < n_stages; i++) nb_acts_free(acts[i]);
    nb_model_free(&m);
    nbfx_free(f);
}

int main(void) {
    for (int stages = 1; stages <= 2; stages++) {
        check_fixture("untied", NULL, stages);
        check_fixture("tied", NULL, stages);
        check_fixture("untied", "hf_untied_sharded", stages);
    }
    return check_summary();
}
