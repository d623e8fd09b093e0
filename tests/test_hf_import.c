/* Folders saved by transformers 4.31 and 5.x (tools/reference/hf_import_reference.py: tests/fixtures/hf4_*,
 * hf5_*, tied and untied, 4.x with pretraining_tp 2, 5.x sharded): nb_hf_read_config must give the shape
 * the script built (5.x keeps rope_theta in rope_parameters: 500 there, so missing it changes the
 * logits), and the imported model's float32 forward must give transformers' logits (relative 2e-5 of
 * the largest) and loss, in 1 and 2 stages. Every refused configuration the script saved
 * (tests/fixtures/hf_refused/) must be refused naming its file and field; hand-written configurations
 * check LlamaConfig's defaults for missing fields and the rules transformers leaves implicit. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "check.h"
#include "model_pass.h"
#include "fixture.h"
#include "nobubble/checkpoint.h"
#include "nobubble/model.h"

static void check_config_equals_fixture(const char *dir, const nb_config *got, const nb_config *want) {
    CHECK(got->vocab_size == want->vocab_size && got->d_model == want->d_model && got->n_layers == want->n_layers &&
              got->n_heads == want->n_heads && got->n_kv_heads == want->n_kv_heads && got->d_ffn == want->d_ffn &&
              got->context == want->context && got->tied == want->tied && got->n_experts == want->n_experts &&
              got->experts_per_token == want->experts_per_token && got->moe_every == want->moe_every &&
              got->aux_coef == want->aux_coef,
          "%s: shape read from config.json differs from the one the script built", dir);
    CHECK(got->rope_theta == want->rope_theta, "%s: rope_theta %g, built with %g", dir, got->rope_theta, want->rope_theta);
    CHECK(got->norm_eps == want->norm_eps, "%s: rms_norm_eps %g, built with %g", dir, got->norm_eps, want->norm_eps);
}

/* folder tests/fixtures/<folder> against tests/fixtures/<fixture>.nbfx, split into n_stages. */
static void check_model(const char *fixture, const char *folder, int n_stages) {
    char path[256], dir[256];
    snprintf(path, sizeof path, "tests/fixtures/%s.nbfx", fixture);
    snprintf(dir, sizeof dir, "tests/fixtures/%s", folder);
    nbfx *f = nbfx_load(path);
    CHECK(f != NULL, "%s: fixture loads", path);
    if (!f) return;
    nb_config want, cfg;
    int B, T;
    if (nbfx_model_config(f, &want, &B, &T) || nb_hf_read_config(dir, &cfg)) {
        CHECK(0, "%s: configuration: %s", dir, nb_last_error());
        nbfx_free(f);
        return;
    }
    check_config_equals_fixture(dir, &cfg, &want);
    nb_model m;
    CHECK(nb_model_create(&m, &cfg, n_stages, NULL, NULL) == 0, "%s", nb_last_error());
    CHECK(nb_import_hf(&m, dir) == 0, "%s: import: %s", dir, nb_last_error());
    nb_acts *acts[2];
    for (int i = 0; i < n_stages; i++) acts[i] = nb_acts_create(&m.stages[i], B, T);
    float loss = 0;
    CHECK(model_forward(&m, acts, nbfx_get(f, "tokens")->i32, nbfx_get(f, "targets")->i32, &loss) == 0, "%s",
          nb_last_error());
    const double ref_loss = nbfx_get(f, "loss")->f64[0];
    const double err = check_rel_err_d(nb_acts_logits(acts[n_stages - 1]), nbfx_get(f, "logits")->f64,
                                       (size_t)B * T * cfg.vocab_size, 1e-12);
    printf("%s, %d stage(s): loss %.8f vs transformers %.8f; logits relative error %.3g\n", folder, n_stages, loss,
           ref_loss, err);
    CHECK(fabs(loss - ref_loss) <= 1e-5 * fabs(ref_loss), "%s: loss %.8f vs transformers' %.8f", folder, loss, ref_loss);
    CHECK(err < 2e-5, "%s: logits against transformers: relative error %.3g", folder, err);
    for (int i = 0; i < n_stages; i++) nb_acts_free(acts[i]);
    nb_model_free(&m);
    nbfx_free(f);
}

/* Each configuration the script saved with one unsupported field is refused, naming the file and the
 * field (hand-written expectations: the field each was saved with). */
static void check_refused_fixtures(void) {
    static const struct { const char *dir, *field; } cases[] = {
        {"hf4_rope_linear", "\"rope_scaling.type\" is \"linear\""},
        {"hf4_rope_dynamic", "\"rope_scaling.type\" is \"dynamic\""},
        {"hf4_hidden_act", "\"hidden_act\" is \"gelu\""},
        {"hf5_rope_linear", "\"rope_parameters.rope_type\" is \"linear\""},
        {"hf5_rope_dynamic", "\"rope_parameters.rope_type\" is \"dynamic\""},
        {"hf5_rope_llama3", "\"rope_parameters.rope_type\" is \"llama3\""},
        {"hf5_hidden_act", "\"hidden_act\" is \"gelu\""},
        {"hf5_attention_bias", "\"attention_bias\" is true"},
        {"hf5_mlp_bias", "\"mlp_bias\" is true"},
        {"hf5_head_dim", "\"head_dim\" is 8"},
        {"hf5_attention_dropout", "\"attention_dropout\" is 0.1"},
        {"hf5_model_type", "\"model_type\" is \"mistral\""},
        {"hf5_architectures", "\"architectures\" is \"LlamaForSequenceClassification\""},
        {"hf5_sliding_window", "\"sliding_window\" is 4"},
        {"hf5_mixtral_jitter", "\"router_jitter_noise\" is 0.1"},
        {"hf5_qwen2_moe", "\"model_type\" is \"qwen2_moe\""},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char dir[256], file[300];
        snprintf(dir, sizeof dir, "tests/fixtures/hf_refused/%s", cases[i].dir);
        snprintf(file, sizeof file, "%s/config.json", dir);
        nb_config c;
        int rc = nb_hf_read_config(dir, &c);
        CHECK(rc == -1 && strstr(nb_last_error(), file) && strstr(nb_last_error(), cases[i].field),
              "%s: expected a refusal naming %s and %s, got: %s", cases[i].dir, file, cases[i].field,
              rc ? nb_last_error() : "accepted");
    }
}

/* The Mixtral folder without one expert's tensor: its config reads, the import refuses naming the tensor. */
static void check_missing_expert(void) {
    const char *dir = "tests/fixtures/hf_refused/hf5_mixtral_missing_expert";
    nb_config c;
    nb_model m;
    CHECK(nb_hf_read_config(dir, &c) == 0, "%s: config: %s", dir, nb_last_error());
    CHECK(nb_model_create(&m, &c, 1, NULL, NULL) == 0, "%s", nb_last_error());
    const int rc = nb_import_hf(&m, dir);
    CHECK(rc == -1 && strstr(nb_last_error(), "model.layers.1.block_sparse_moe.experts.2.w3.weight"),
          "%s: expected a refusal naming the missing expert tensor, got: %s", dir, rc ? nb_last_error() : "accepted");
    nb_model_free(&m);
}

static char tmp_dir[64];

/* Writes tmp_dir/config.json and reads it back (0: accepted). */
static int read_text(const char *json, nb_config *c) {
    char path[128];
    snprintf(path, sizeof path, "%s/config.json", tmp_dir);
    FILE *f = fopen(path, "w");
    if (!f) return -2;
    fputs(json, f);
    fclose(f);
    return nb_hf_read_config(tmp_dir, c);
}

#define SHAPE "\"vocab_size\": 64, \"hidden_size\": 16, \"intermediate_size\": 24, \"num_hidden_layers\": 2, " \
              "\"num_attention_heads\": 4"

/* What LlamaConfig does with missing fields, and the rules between fields. */
static void check_hand_written(void) {
    nb_config c;
    CHECK(read_text("{" SHAPE "}", &c) == 0, "the five shape fields alone: %s", nb_last_error());
    CHECK(c.n_kv_heads == 4 && c.context == 2048 && c.norm_eps == 1e-6 && c.rope_theta == 10000.0 && c.tied == 0,
          "LlamaConfig's defaults: kv heads = heads, context 2048, eps 1e-6, theta 10000, untied (got %d %d %g %g %d)",
          c.n_kv_heads, c.context, c.norm_eps, c.rope_theta, c.tied);
    CHECK(read_text("{\"vocab_size\": 64, \"hidden_size\": 16, \"num_hidden_layers\": 2, \"num_attention_heads\": 4}",
                    &c) == -1 && strstr(nb_last_error(), "missing \"intermediate_size\""),
          "a missing shape field is named: %s", nb_last_error());
    CHECK(read_text("{" SHAPE ", \"num_key_value_heads\": null, \"head_dim\": null, \"rope_scaling\": null, "
                    "\"sliding_window\": null, \"pad_token_id\": null}", &c) == 0 && c.n_kv_heads == 4,
          "null means unset: %s", nb_last_error());
    CHECK(read_text("{" SHAPE ", \"head_dim\": 4, \"rope_scaling\": {\"rope_type\": \"default\"}, \"pretraining_tp\": 2,"
                    " \"dtype\": \"bfloat16\", \"some_future_key\": [1, 2]}", &c) == 0,
          "head_dim = hidden/heads, default rope_scaling, pretraining_tp, dtype and unknown keys are accepted: %s",
          nb_last_error());
    CHECK(read_text("{" SHAPE ", \"rope_theta\": 1000.0, \"rope_parameters\": {\"rope_type\": \"default\", "
                    "\"rope_theta\": 1000.0}}", &c) == 0 && c.rope_theta == 1000.0,
          "rope_theta in both places, equal: %s", nb_last_error());
    CHECK(read_text("{" SHAPE ", \"rope_theta\": 1000.0, \"rope_parameters\": {\"rope_type\": \"default\", "
                    "\"rope_theta\": 2000.0}}", &c) == -1 && strstr(nb_last_error(), "\"rope_parameters.rope_theta\" is 2000"),
          "rope_theta in both places, different: %s", nb_last_error());
    CHECK(read_text("{" SHAPE ", \"rope_parameters\": {\"rope_theta\": 1000.0, \"partial_rotary_factor\": 0.5}}", &c) == -1 &&
              strstr(nb_last_error(), "\"rope_parameters.partial_rotary_factor\" is 0.5"),
          "partial rotary: %s", nb_last_error());
    CHECK(read_text("{" SHAPE ", \"rope_scaling\": {\"factor\": 4.0}}", &c) == -1 && strstr(nb_last_error(), "\"rope_scaling\""),
          "rope_scaling without a type: %s", nb_last_error());
    CHECK(read_text("{" SHAPE ", \"layer_types\": [\"full_attention\", \"sliding_attention\"]}", &c) == -1 &&
              strstr(nb_last_error(), "\"layer_types\" is \"sliding_attention\""),
          "a sliding layer: %s", nb_last_error());
    CHECK(read_text("{" SHAPE ", \"tie_word_embeddings\": 1}", &c) == -1 &&
              strstr(nb_last_error(), "\"tie_word_embeddings\" is 1: expected true or false"),
          "a non-boolean tie: %s", nb_last_error());
    CHECK(read_text("{" SHAPE ", \"quantization_config\": {\"bits\": 4}}", &c) == -1 &&
              strstr(nb_last_error(), "\"quantization_config\""),
          "quantized: %s", nb_last_error());
}

int main(void) {
    snprintf(tmp_dir, sizeof tmp_dir, "/tmp/nb_hf_import_XXXXXX");
    if (!mkdtemp(tmp_dir)) return 1;
    for (int stages = 1; stages <= 2; stages++) {
        check_model("hf4_untied", "hf4_untied", stages);
        check_model("hf4_tied", "hf4_tied", stages);
        check_model("hf4_tp2", "hf4_tp2", stages);
        check_model("hf5_untied", "hf5_untied", stages);
        check_model("hf5_tied", "hf5_tied", stages);
        check_model("hf5_untied", "hf5_untied_sharded", stages);
        check_model("hf5_mixtral", "hf5_mixtral", stages);  /* a mixture of experts, every block */
    }
    check_missing_expert();
    check_refused_fixtures();
    check_hand_written();
    char path[128];
    snprintf(path, sizeof path, "%s/config.json", tmp_dir);
    unlink(path);
    rmdir(tmp_dir);
    return check_summary();
}
