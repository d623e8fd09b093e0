/* Reading a Hugging Face config.json of a LlamaForCausalLM or a MixtralForCausalLM (saved by transformers
 * 4.x or 5.x) into an nb_config. Every field of LlamaConfig (MixtralConfig) is either used, ignored because it does not change what the
 * weights compute, or refused with the file, the field, its value and what is supported, because it
 * would change the math and nobubble does not implement it (docs/checkpoints.md, "Importing a Hugging
 * Face model", has the table and the reasons). A field missing from the file takes LlamaConfig's
 * default, as transformers would; the five that give the model's shape are required. Keys that
 * LlamaConfig does not have are ignored: LlamaForCausalLM never reads them either. */
#define _POSIX_C_SOURCE 200809L
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "nobubble/checkpoint.h"
#include "util/error.h"
#include "util/json.h"

typedef struct {
    const char *path;    /* names the file in every message */
    const nb_json *obj;  /* the object the keys are looked up in (the root, or rope_parameters) */
    const char *prefix;  /* "" or "rope_parameters." (how a key is named in messages) */
} cfg_reader;

/* A present, non-null value (JSON null counts as absent: transformers writes null for "unset"). */
static const nb_json *field(const cfg_reader *r, const char *key) {
    const nb_json *v = nb_json_get(r->obj, key);
    return v && v->type != NB_JNULL ? v : NULL;
}

/* A short rendering of a value for messages: strings quoted, objects and arrays elided. */
static void brief(const nb_json *v, char *buf, size_t size) {
    switch (v->type) {
    case NB_JNULL: snprintf(buf, size, "null"); break;
    case NB_JBOOL: snprintf(buf, size, "%s", v->b ? "true" : "false"); break;
    case NB_JNUM: snprintf(buf, size, "%.17g", v->num); break;
    case NB_JSTR: snprintf(buf, size, "\"%.100s\"", v->str); break;
    case NB_JARR: snprintf(buf, size, "a list of %zu", v->n); break;
    case NB_JOBJ: snprintf(buf, size, "an object"); break;
    }
}

/* "FILE: "KEY" is VALUE: WHY" for a value nobubble does not implement. */
static int refuse(const cfg_reader *r, const char *key, const nb_json *v, const char *why) {
    char shown[160];
    brief(v, shown, sizeof shown);
    return nb_fail("%s: \"%s%s\" is %s: %s", r->path, r->prefix, key, shown, why);
}

static int read_int(const cfg_reader *r, const char *key, int required, int def, int *out) {
    const nb_json *v = field(r, key);
    if (!v) {
        if (required) return nb_fail("%s: missing \"%s%s\" (an integer)", r->path, r->prefix, key);
        *out = def;
        return 0;
    }
    if (v->type != NB_JNUM || !v->is_int || v->i < INT_MIN || v->i > INT_MAX)
        return refuse(r, key, v, "expected an integer");
    *out = (int)v->i;
    return 0;
}

static int read_number(const cfg_reader *r, const char *key, double def, double *out) {
    const nb_json *v = field(r, key);
    if (v && v->type != NB_JNUM) return refuse(r, key, v, "expected a number");
    *out = v ? v->num : def;
    return 0;
}

static int read_bool(const cfg_reader *r, const char *key, int def, int *out) {
    const nb_json *v = field(r, key);
    if (v && v->type != NB_JBOOL) return refuse(r, key, v, "expected true or false");
    *out = v ? v->b : def;
    return 0;
}

/* A string field that, when present, must be `want`. */
static int require_string(const cfg_reader *r, const char *key, const char *want, const char *why) {
    const nb_json *v = field(r, key);
    if (v && (v->type != NB_JSTR || strcmp(v->str, want))) return refuse(r, key, v, why);
    return 0;
}

/* A boolean field that, when present, must be false. */
static int require_false(const cfg_reader *r, const char *key, const char *why) {
    const nb_json *v = field(r, key);
    if (v && (v->type != NB_JBOOL || v->b)) return refuse(r, key, v, why);
    return 0;
}

/* A number that, when present, must be `want`. */
static int require_number(const cfg_reader *r, const char *key, double want, const char *why) {
    const nb_json *v = field(r, key);
    if (v && (v->type != NB_JNUM || v->num != want)) return refuse(r, key, v, why);
    return 0;
}

/* A field that must be absent or null. */
static int require_absent(const cfg_reader *r, const char *key, const char *why) {
    const nb_json *v = field(r, key);
    return v ? refuse(r, key, v, why) : 0;
}

/* 1 for a Mixtral (model_type "mixtral"), 0 for a Llama ("llama", or no model_type); -1 for another. */
static int read_model_type(const cfg_reader *r) {
    const nb_json *v = field(r, "model_type");
    if (v && v->type == NB_JSTR && !strcmp(v->str, "mixtral")) return 1;
    return require_string(r, "model_type", "llama", "nobubble imports only \"llama\" and \"mixtral\" (mistral, qwen2, "
                          "qwen2_moe, gemma and others differ in attention, activation, norms or routing)") ? -1 : 0;
}

/* "architectures": every entry the model type's causal LM (another head computes something else). */
static int check_architectures(const cfg_reader *r, int mixtral) {
    const char *want = mixtral ? "MixtralForCausalLM" : "LlamaForCausalLM";
    const nb_json *v = field(r, "architectures");
    if (!v) return 0;
    if (v->type != NB_JARR) return refuse(r, "architectures", v, "expected a list of class names");
    for (size_t i = 0; i < v->n; i++)
        if (v->items[i].type != NB_JSTR || strcmp(v->items[i].str, want))
            return refuse(r, "architectures", &v->items[i],
                          mixtral ? "a \"mixtral\" model must be [\"MixtralForCausalLM\"] (its language-model head)"
                                  : "nobubble imports only [\"LlamaForCausalLM\"] (a Llama decoder with its "
                                    "language-model head) and [\"MixtralForCausalLM\"]");
    return 0;
}

/* A RoPE type: only the plain rotation (transformers' "default"; 4.x's rope_scaling null) is
 * implemented; linear, dynamic, yarn, longrope, llama3 and the rest rescale the frequencies. */
static int check_rope_type(const cfg_reader *r, const char *key) {
    return require_string(r, key, "default",
                          "nobubble implements only unscaled RoPE (rope_type \"default\"); linear, dynamic, yarn, "
                          "longrope, llama3 and other scalings are not supported");
}

/* 4.x: "rope_scaling" null, or a dict whose type ("rope_type", or "type" before 4.45) is "default". */
static int check_rope_scaling(const cfg_reader *r) {
    const nb_json *v = field(r, "rope_scaling");
    if (!v) return 0;
    if (v->type != NB_JOBJ) return refuse(r, "rope_scaling", v, "expected null or an object");
    cfg_reader in = {r->path, v, "rope_scaling."};
    const int has_type = field(&in, "rope_type") || field(&in, "type");
    if (!has_type)
        return refuse(r, "rope_scaling", v, "expected null (no scaling) or a \"rope_type\"; nobubble implements only "
                      "unscaled RoPE");
    return check_rope_type(&in, "rope_type") || check_rope_type(&in, "type");
}

/* The rotary base: 5.x keeps it in "rope_parameters" {"rope_type", "rope_theta"}, 4.x in "rope_theta"
 * (transformers 4.31 saved it but used 10000; every release since reads it). Both present must agree. */
static int read_rope(const cfg_reader *r, double def, double *theta) {
    if (read_number(r, "rope_theta", def, theta) || check_rope_scaling(r) ||
        require_number(r, "partial_rotary_factor", 1.0, "nobubble rotates every dimension of a head (1.0)"))
        return -1;
    const nb_json *p = field(r, "rope_parameters");
    if (!p) return 0;
    if (p->type != NB_JOBJ) return refuse(r, "rope_parameters", p, "expected an object {\"rope_type\", \"rope_theta\"}");
    cfg_reader in = {r->path, p, "rope_parameters."};
    double inner = *theta;
    if (check_rope_type(&in, "rope_type") || read_number(&in, "rope_theta", *theta, &inner) ||
        require_number(&in, "partial_rotary_factor", 1.0, "nobubble rotates every dimension of a head (1.0)"))
        return -1;
    if (field(r, "rope_theta") && inner != *theta)
        return nb_fail("%s: \"rope_theta\" is %.17g but \"rope_parameters.rope_theta\" is %.17g: expected one value",
                       r->path, *theta, inner);
    *theta = inner;
    return 0;
}

/* The fields that would change what the weights compute, each held to the one value nobubble
 * implements (a Llama decoder: SwiGLU with SiLU, no biases, full causal attention, no dropout; a Mixtral's
 * router without noise). */
static int check_unsupported(const cfg_reader *r, int mixtral) {
    return check_architectures(r, mixtral) ||
           require_number(r, "router_jitter_noise", 0.0, "nobubble's router adds no noise (expected 0.0)") ||
           require_absent(r, "shared_expert_intermediate_size", "nobubble's MoE blocks have no shared expert") ||
           require_absent(r, "n_shared_experts", "nobubble's MoE blocks have no shared expert") ||
           require_string(r, "hidden_act", "silu", "nobubble's MLP is SwiGLU with \"silu\" only") ||
           require_false(r, "attention_bias", "nobubble's attention projections have no bias (expected false)") ||
           require_false(r, "mlp_bias", "nobubble's MLP projections have no bias (expected false)") ||
           require_number(r, "attention_dropout", 0.0, "nobubble has no dropout (expected 0.0; set it to 0.0 in the "
                          "file to train without dropout)") ||
           require_absent(r, "sliding_window", "nobubble's attention is full causal attention (expected null)") ||
           require_false(r, "use_sliding_window", "nobubble's attention is full causal attention (expected false)") ||
           require_absent(r, "quantization_config", "nobubble reads F32, F16 and BF16 weights, not quantized ones") ||
           require_absent(r, "auto_map", "the model's code is custom (trust_remote_code), not transformers' Llama");
}

/* "layer_types" (5.x): when present, every layer "full_attention". */
static int check_layer_types(const cfg_reader *r) {
    const nb_json *v = field(r, "layer_types");
    if (!v) return 0;
    if (v->type != NB_JARR) return refuse(r, "layer_types", v, "expected a list");
    for (size_t i = 0; i < v->n; i++)
        if (v->items[i].type != NB_JSTR || strcmp(v->items[i].str, "full_attention"))
            return refuse(r, "layer_types", &v->items[i], "nobubble's layers are all \"full_attention\"");
    return 0;
}

/* A Mixtral's experts (MixtralConfig's defaults where missing): every block a MoE block. */
static int read_moe(const cfg_reader *r, nb_config *c) {
    c->moe_every = 1;
    return read_int(r, "num_local_experts", 0, 8, &c->n_experts) ||
           read_int(r, "num_experts_per_tok", 0, 2, &c->experts_per_token) ||
           read_number(r, "router_aux_loss_coef", 0.001, &c->aux_coef);
}

/* The shape and the numbers nobubble uses, with LlamaConfig's (MixtralConfig's) defaults where a field is
 * missing. */
static int read_used(const cfg_reader *r, nb_config *c, int mixtral) {
    const struct { const char *key; int *field; int required, def; } ints[] = {
        {"vocab_size", &c->vocab_size, 1, 0}, {"hidden_size", &c->d_model, 1, 0},
        {"intermediate_size", &c->d_ffn, 1, 0}, {"num_hidden_layers", &c->n_layers, 1, 0},
        {"num_attention_heads", &c->n_heads, 1, 0}, {"max_position_embeddings", &c->context, 0, mixtral ? 131072 : 2048}};
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++)
        if (read_int(r, ints[i].key, ints[i].required, ints[i].def, ints[i].field)) return -1;
    int head_dim = 0;
    if (read_int(r, "num_key_value_heads", 0, c->n_heads, &c->n_kv_heads) ||
        read_number(r, "rms_norm_eps", mixtral ? 1e-5 : 1e-6, &c->norm_eps) ||
        read_rope(r, mixtral ? 1e6 : 10000.0, &c->rope_theta) || (mixtral && read_moe(r, c)) ||
        read_bool(r, "tie_word_embeddings", 0, &c->tied) || read_int(r, "head_dim", 0, 0, &head_dim))
        return -1;
    /* (a non-positive head count is nb_config_validate's to name) */
    if (field(r, "head_dim") && c->n_heads > 0 && (long long)head_dim * c->n_heads != c->d_model)
        return refuse(r, "head_dim", field(r, "head_dim"),
                      "nobubble's heads are hidden_size / num_attention_heads wide (expected that value or null)");
    return 0;
}

static int read_config_file(const char *path, nb_config *c) {
    nb_json root;
    if (nb_json_read_file(path, "config", NB_JSON_UNIQUE_KEYS, &root)) return -1;
    int r = 0;
    if (root.type != NB_JOBJ) r = nb_fail("%s: not a JSON object", path);
    cfg_reader in = {path, &root, ""};
    memset(c, 0, sizeof *c);
    const int mixtral = r ? 0 : read_model_type(&in);
    if (!r && mixtral < 0) r = -1;
    if (!r) r = check_unsupported(&in, mixtral) || check_layer_types(&in) || read_used(&in, c, mixtral);
    nb_json_free(&root);
    return r;
}

int nb_hf_read_config(const char *dir, nb_config *out) {
    char path[4096];
    if ((size_t)snprintf(path, sizeof path, "%s/config.json", dir) >= sizeof path)
        return nb_fail("%s: the folder's name is too long", dir);
    if (read_config_file(path, out)) return -1;
    if (nb_config_validate(out)) return nb_fail("%s: %s", path, nb_last_error());   /* safe: nb_fail copies */
    return 0;
}
