/* Model configurations: named presets, "field=value" overrides and validation; and the names of the
 * precisions a model runs in (here, with no backend, so that the settings' readers need none). */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "layers/moe.h"
#include "nobubble/model.h"
#include "util/decimal.h"
#include "util/error.h"

typedef struct {
    const char *name;
    nb_config cfg;
} preset;

/* vocab, d, layers, heads, kv heads, ffn, context, theta, eps, tied; then, for a mixture of experts,
 * experts, experts per token, every how many blocks, the auxiliary loss's coefficient. The MoE presets
 * keep their dense twin's active parameters: k = 2 experts of half its d_ffn per token, E = 8. */
static const preset presets[] = {
    {"tiny", {2048, 128, 4, 4, 4, 384, 128, 10000.0, 1e-5, 1, 0, 0, 0, 0.0}},
    {"small", {4096, 256, 6, 4, 4, 768, 256, 10000.0, 1e-5, 1, 0, 0, 0, 0.0}},
    {"medium", {8192, 512, 8, 8, 4, 1536, 256, 10000.0, 1e-5, 1, 0, 0, 0, 0.0}},
    {"smollm-135m", {49152, 576, 30, 9, 3, 1536, 2048, 10000.0, 1e-5, 1, 0, 0, 0, 0.0}},
    {"smollm-360m", {49152, 960, 32, 15, 5, 2560, 2048, 10000.0, 1e-5, 1, 0, 0, 0, 0.0}},
    {"moe-tiny", {2048, 128, 4, 4, 4, 192, 128, 10000.0, 1e-5, 1, 8, 2, 1, 0.01}},
    {"moe-small", {4096, 256, 6, 4, 4, 384, 256, 10000.0, 1e-5, 1, 8, 2, 1, 0.01}},
};
#define N_PRESETS (sizeof presets / sizeof presets[0])

const char *nb_config_preset_names(void) { return "tiny small medium smollm-135m smollm-360m moe-tiny moe-small"; }

/* Indexed by nb_precision: --precision's names, summary.json's and checkpoints'. */
static const char *const precision_names[] = {"fp32", "bf16", "auto"};

const char *nb_precision_names(int i) {
    return (unsigned)i < sizeof precision_names / sizeof precision_names[0] ? precision_names[i] : NULL;
}

/* An unknown value reads as fp32, as it always has (stages treat anything but bf16 so). */
const char *nb_precision_name(nb_precision p) { return nb_precision_names(p) ? nb_precision_names(p) : "fp32"; }

int nb_config_preset(const char *name, nb_config *out) {
    for (size_t i = 0; i < N_PRESETS; i++)
        if (!strcmp(presets[i].name, name)) {
            *out = presets[i].cfg;
            return 0;
        }
    return nb_fail("unknown model preset '%s' (expected one of: %s)", name, nb_config_preset_names());
}

static int parse_int(const char *key, const char *s, int *out) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (!nb_is_decimal(s, 1) || end == s || *end) return nb_fail("model field %s: '%s' is not an integer", key, s);
    if (errno || v < INT_MIN || v > INT_MAX)
        return nb_fail("model field %s: %s is out of range (expected an integer from %d to %d)", key, s, INT_MIN, INT_MAX);
    *out = (int)v;
    return 0;
}

static int parse_double(const char *key, const char *s, double *out) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (!nb_is_decimal(s, 0) || errno || end == s || *end)
        return nb_fail("model field %s: '%s' is not a decimal number", key, s);
    *out = v;
    return 0;
}

int nb_config_override(nb_config *c, const char *assignment) {
    const char *eq = strchr(assignment, '=');
    if (!eq) return nb_fail("model override '%s': expected field=value", assignment);
    char key[64];
    size_t klen = (size_t)(eq - assignment);
    if (klen == 0 || klen >= sizeof key) return nb_fail("model override '%s': expected field=value", assignment);
    memcpy(key, assignment, klen);
    key[klen] = 0;
    const char *val = eq + 1;
    struct { const char *name; int *field; } ints[] = {
        {"vocab_size", &c->vocab_size}, {"d_model", &c->d_model}, {"n_layers", &c->n_layers},
        {"n_heads", &c->n_heads},       {"n_kv_heads", &c->n_kv_heads}, {"d_ffn", &c->d_ffn},
        {"context", &c->context},       {"tied", &c->tied},             {"n_experts", &c->n_experts},
        {"experts_per_token", &c->experts_per_token}, {"moe_every", &c->moe_every},
    };
    /* tied is a yes/no: true and false as well as 1 and 0 (as a JSON config writes it) */
    if (!strcmp(key, "tied") && (!strcmp(val, "true") || !strcmp(val, "false"))) {
        c->tied = !strcmp(val, "true");
        return 0;
    }
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++)
        if (!strcmp(key, ints[i].name)) return parse_int(key, val, ints[i].field);
    if (!strcmp(key, "rope_theta")) return parse_double(key, val, &c->rope_theta);
    if (!strcmp(key, "norm_eps")) return parse_double(key, val, &c->norm_eps);
    if (!strcmp(key, "aux_coef")) return parse_double(key, val, &c->aux_coef);
    return nb_fail("unknown model field '%s' (expected vocab_size, d_model, n_layers, n_heads, "
                   "n_kv_heads, d_ffn, context, rope_theta, norm_eps, tied, n_experts, experts_per_token, "
                   "moe_every or aux_coef)", key);
}

/* The mixture-of-experts fields: all 0 for a dense model (so that a stray one is not silently ignored),
 * else each in its range. */
static int validate_moe(const nb_config *c) {
    if (c->n_experts == 0) {
        if (c->experts_per_token || c->moe_every || c->aux_coef != 0.0)
            return nb_fail("model: experts_per_token = %d, moe_every = %d, aux_coef = %g are set but n_experts = 0 "
                           "(a dense model): set n_experts >= 1 for a mixture of experts, or these to 0",
                           c->experts_per_token, c->moe_every, c->aux_coef);
        return 0;
    }
    if (c->n_experts < 0 || c->n_experts > MOE_MAX_E)
        return nb_fail("model field n_experts = %d: expected 0 (dense) to %d", c->n_experts, MOE_MAX_E);
    const int k_max = c->n_experts < MOE_MAX_K ? c->n_experts : MOE_MAX_K;
    if (c->experts_per_token < 1 || c->experts_per_token > k_max)
        return nb_fail("model field experts_per_token = %d: expected 1 <= experts_per_token <= %d (n_experts, at most %d)",
                       c->experts_per_token, k_max, MOE_MAX_K);
    if (c->moe_every < 1 || c->moe_every > c->n_layers)
        return nb_fail("model field moe_every = %d: expected 1 <= moe_every <= n_layers (%d): every block (1), every "
                       "other block (2), ...", c->moe_every, c->n_layers);
    if (!(c->aux_coef >= 0.0 && c->aux_coef <= 1.0))
        return nb_fail("model field aux_coef = %g: expected 0 <= aux_coef <= 1 (0.01 as a rule)", c->aux_coef);
    return 0;
}

int nb_config_block_is_moe(const nb_config *c, int l) {
    return c->n_experts > 0 && c->moe_every > 0 && l % c->moe_every == c->moe_every - 1;
}

int nb_config_moe_blocks(const nb_config *c) {
    int n = 0;
    for (int l = 0; l < c->n_layers; l++) n += nb_config_block_is_moe(c, l);
    return n;
}

int nb_config_validate(const nb_config *c) {
    struct { const char *name; int value; } positive[] = {
        {"vocab_size", c->vocab_size}, {"d_model", c->d_model}, {"n_layers", c->n_layers},
        {"n_heads", c->n_heads},       {"n_kv_heads", c->n_kv_heads}, {"d_ffn", c->d_ffn},
        {"context", c->context},
    };
    for (size_t i = 0; i < sizeof positive / sizeof positive[0]; i++)
        if (positive[i].value <= 0)
            return nb_fail("model field %s = %d: expected a positive integer", positive[i].name, positive[i].value);
    if (c->d_model % c->n_heads)
        return nb_fail("model: d_model = %d is not divisible by n_heads = %d", c->d_model, c->n_heads);
    if (c->n_heads % c->n_kv_heads)
        return nb_fail("model: n_kv_heads = %d does not divide n_heads = %d", c->n_kv_heads, c->n_heads);
    if ((c->d_model / c->n_heads) % 2)
        return nb_fail("model: head_dim = d_model/n_heads = %d must be even for rotary embedding",
                       c->d_model / c->n_heads);
    /* Finite: an infinite theta would also be written into config.json as "inf", which is not JSON. */
    if (!(c->rope_theta > 1.0) || !isfinite(c->rope_theta))
        return nb_fail("model field rope_theta = %g: expected a finite number > 1", c->rope_theta);
    if (!(c->norm_eps > 0.0 && c->norm_eps < 1.0))
        return nb_fail("model field norm_eps = %g: expected 0 < eps < 1", c->norm_eps);
    if (c->tied != 0 && c->tied != 1) return nb_fail("model field tied = %d: expected 0 or 1", c->tied);
    if (validate_moe(c)) return -1;
    /* Sizes no model nobubble trains comes near, bounding the allocations before they are tried. */
    if (c->n_layers > 4096) return nb_fail("model field n_layers = %d: expected at most 4096", c->n_layers);
    if (c->context > 1048576) return nb_fail("model field context = %d: expected at most 1048576", c->context);
    /* Keep every buffer index inside 32-bit GEMM dimensions. */
    if ((long long)c->vocab_size * c->d_model > INT_MAX || (long long)c->d_ffn * 2 * c->d_model > INT_MAX)
        return nb_fail("model: vocab_size x d_model or d_ffn x d_model is too large");
    if ((long long)c->n_experts * c->d_ffn * 2 * c->d_model > INT_MAX)
        return nb_fail("model: n_experts x d_ffn x d_model is too large");
    return 0;
}

int nb_config_check_batch(const nb_config *c, long long B, long long T) {
    if (B < 1) return nb_fail("--batch %lld: expected >= 1", B);
    if (T < 1 || T > c->context) return nb_fail("--seq %lld: expected 1 <= seq <= the model's context (%d)", T, c->context);
    long long width = c->vocab_size;
    if (c->d_ffn > width) width = c->d_ffn;
    if (c->d_model > width) width = c->d_model;
    /* B <= 2^31, T <= 2^31, width <= 2^31: compared in double, exact enough at this size. */
    if ((double)B * (double)T * (double)width > 2147483647.0)
        return nb_fail("--batch %lld x --seq %lld x %lld (the widest activation: vocab_size, d_ffn or d_model) = %.4g "
                       "values in one micro-batch: too large (at most 2^31 - 1); use a smaller --batch (in training, "
                       "more --microbatches) or --seq", B, T, width, (double)B * (double)T * (double)width);
    return 0;
}

void nb_config_json(const nb_config *c, char *buf, size_t size) {
    snprintf(buf, size,
             "{\"vocab_size\": %d, \"d_model\": %d, \"n_layers\": %d, \"n_heads\": %d, "
             "\"n_kv_heads\": %d, \"d_ffn\": %d, \"context\": %d, \"rope_theta\": %.17g, "
             "\"norm_eps\": %.17g, \"tied\": %s, \"n_experts\": %d, \"experts_per_token\": %d, "
             "\"moe_every\": %d, \"aux_coef\": %.17g}",
             c->vocab_size, c->d_model, c->n_layers, c->n_heads, c->n_kv_heads, c->d_ffn, c->context,
             c->rope_theta, c->norm_eps, c->tied ? "true" : "false", c->n_experts, c->experts_per_token,
             c->moe_every, c->aux_coef);
}

/* Parameters of the blocks when each MoE block counts `experts` of its experts (all of them, or the k a
 * token uses), the router included. */
static size_t blocks_params(const nb_config *c, int experts) {
    size_t d = (size_t)c->d_model, hd = d / (size_t)c->n_heads;
    size_t dq = hd * (size_t)c->n_heads, dkv = hd * (size_t)c->n_kv_heads, f = (size_t)c->d_ffn;
    size_t attention = 2 * d + d * (dq + 2 * dkv) + dq * d, total = 0;
    for (int l = 0; l < c->n_layers; l++)
        total += attention + (nb_config_block_is_moe(c, l) ? (size_t)c->n_experts * d + (size_t)experts * 3 * f * d
                                                           : 3 * f * d);
    return total;
}

size_t nb_config_param_count(const nb_config *c) {
    size_t embed = (size_t)c->vocab_size * (size_t)c->d_model;
    return embed * (c->tied ? 1 : 2) + blocks_params(c, c->n_experts) + (size_t)c->d_model;
}

size_t nb_config_active_param_count(const nb_config *c) {
    size_t embed = (size_t)c->vocab_size * (size_t)c->d_model;
    return embed * (c->tied ? 1 : 2) + blocks_params(c, c->experts_per_token) + (size_t)c->d_model;
}

/* Training FLOPs per token of block l: its matrices (a MoE block's router and the k experts a token
 * uses) and causal attention. The same terms as nb_model_train_flops_per_token. */
double nb_config_block_flops(const nb_config *c, int l, int T) {
    double d = c->d_model, hd = d / c->n_heads, dq = hd * c->n_heads, dkv = hd * c->n_kv_heads, f = c->d_ffn;
    const double mlp = nb_config_block_is_moe(c, l) ? c->n_experts * d + c->experts_per_token * 3 * f * d : 3 * f * d;
    return 6.0 * (d * (dq + 2 * dkv) + dq * d + mlp) + 6.0 * dq * (T + 1.0);
}

/* The training FLOPs of blocks first .. first + count - 1: count times one block's where all blocks are
 * alike (a dense model, or MoE in every block), else their sum. */
static double blocks_flops(const nb_config *c, int T, int first, int count) {
    if (c->n_experts == 0 || c->moe_every == 1) return count * nb_config_block_flops(c, 0, T);
    double sum = 0;
    for (int l = first; l < first + count; l++) sum += nb_config_block_flops(c, l, T);
    return sum;
}

int nb_config_balanced_split(const nb_config *c, int T, int n_stages, int *blocks) {
    const int L = c->n_layers;
    if (n_stages < 1 || n_stages > L)
        return nb_fail("stages = %d: expected 1 <= stages <= n_layers (%d)", n_stages, L);
    const double head = 6.0 * c->vocab_size * c->d_model;
    /* Stage s < P - 1 takes k_s blocks, the last stage the rest and the head: choose the counts
     * that minimize the largest stage, filling the earlier stages up to a bound found by bisection
     * over the possible maxima (a block is the unit, so the candidates are few). */
    double best = -1;
    int *trial = malloc(sizeof(int) * (size_t)n_stages);
    if (!trial) return nb_fail("out of memory");
    for (int cap = 1; cap <= L; cap++) {
        int left = L;
        for (int s = 0; s < n_stages - 1; s++) {
            int need_after = n_stages - 1 - s;  /* every later stage keeps at least one block */
            int k = cap < left - need_after ? cap : left - need_after;
            trial[s] = k;
            left -= k;
        }
        trial[n_stages - 1] = left;
        double worst = blocks_flops(c, T, L - left, left) + head;
        for (int s = 0, first = 0; s < n_stages - 1; first += trial[s], s++) {
            const double cost = blocks_flops(c, T, first, trial[s]);
            worst = cost > worst ? cost : worst;
        }
        if (best < 0 || worst < best) {
            best = worst;
            memcpy(blocks, trial, sizeof(int) * (size_t)n_stages);
        }
    }
    free(trial);
    return 0;
}
