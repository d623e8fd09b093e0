/* Hugging Face export and import: model.safetensors under the Llama names + config.json. The
 * model's rotary embedding already pairs dimension i with i + head_dim/2 (rotate_half), as
 * Hugging Face's does, so q_proj and k_proj are written as they are. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "util/fs.h"
#include "util/json.h"
#include "model/stage.h"
#include "nobubble/checkpoint.h"
#include "util/error.h"

/* The shortest %g form that reads back as the same double, with ".0" when it looks integral
 * (so that Python sees a float). */
static void fmt_double(char *buf, size_t size, double v) {
    for (int p = 1; p <= 17; p++) {
        snprintf(buf, size, "%.*g", p, v);
        if (strtod(buf, NULL) == v) break;
    }
    if (!strpbrk(buf, ".eEni")) strncat(buf, ".0", size - strlen(buf) - 1);
}

/* A mixture of experts is exported as transformers' Mixtral (MixtralForCausalLM), whose blocks are all
 * MoE blocks with nobubble's rule (softmax router, top-k renormalized, SwiGLU experts, no jitter); the
 * MoE-specific keys (empty for a dense model). NULL (nb_fail) for a model Mixtral cannot express. */
static int moe_keys(const nb_config *c, char *buf, size_t size) {
    buf[0] = 0;
    if (c->n_experts == 0) return 0;
    if (c->moe_every != 1)
        return nb_fail("a mixture of experts with moe_every = %d: Hugging Face's Mixtral has a MoE MLP in every "
                       "block (moe_every = 1); this model has no architecture to export to", c->moe_every);
    char coef[40];
    fmt_double(coef, sizeof coef, c->aux_coef);
    snprintf(buf, size,
             "  \"num_local_experts\": %d,\n"
             "  \"num_experts_per_tok\": %d,\n"
             "  \"router_aux_loss_coef\": %s,\n"
             "  \"router_jitter_noise\": 0.0,\n"
             "  \"output_router_logits\": false,\n"
             "  \"sliding_window\": null,\n",
             c->n_experts, c->experts_per_token, coef);
    return 0;
}

static char *config_json(const nb_config *c, int bos, int eos) {
    char theta[40], eps[40], moe[512];
    fmt_double(theta, sizeof theta, c->rope_theta);
    fmt_double(eps, sizeof eps, c->norm_eps);
    if (moe_keys(c, moe, sizeof moe)) return NULL;
    const int mixtral = c->n_experts > 0;
    nb_buf b = {0};
    int r = nb_buf_printf(&b,
                           "{\n"
                           "  \"architectures\": [\"%s\"],\n"
                           "  \"model_type\": \"%s\",\n"
                           "%s"
                           "  \"vocab_size\": %d,\n"
                           "  \"hidden_size\": %d,\n"
                           "  \"intermediate_size\": %d,\n"
                           "  \"num_hidden_layers\": %d,\n"
                           "  \"num_attention_heads\": %d,\n"
                           "  \"num_key_value_heads\": %d,\n"
                           "  \"head_dim\": %d,\n"
                           "  \"max_position_embeddings\": %d,\n"
                           "  \"rms_norm_eps\": %s,\n"
                           "  \"rope_theta\": %s,\n"
                           "  \"rope_scaling\": null,\n"
                           "  \"tie_word_embeddings\": %s,\n"
                           "  \"hidden_act\": \"silu\",\n"
                           "%s"
                           "  \"attention_dropout\": 0.0,\n"
                           "  \"initializer_range\": 0.02,\n"
                           "  \"bos_token_id\": %d,\n"
                           "  \"eos_token_id\": %d,\n"
                           "  \"use_cache\": true,\n"
                           "  \"torch_dtype\": \"float32\"\n"
                           "}\n",
                           mixtral ? "MixtralForCausalLM" : "LlamaForCausalLM", mixtral ? "mixtral" : "llama", moe,
                           c->vocab_size, c->d_model, c->d_ffn, c->n_layers, c->n_heads, c->n_kv_heads,
                           c->d_model / c->n_heads, c->context, eps, theta, c->tied ? "true" : "false",
                           mixtral ? "" : "  \"attention_bias\": false,\n  \"mlp_bias\": false,\n", bos, eos);
    if (r) {
        nb_buf_free(&b);
        return NULL;
    }
    return b.p;
}

char *nb_hf_config_json(const nb_config *c) { return config_json(c, c->vocab_size - 1, c->vocab_size - 1); }

static char *join(const char *dir, const char *name) {
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = malloc(n);
    if (p) snprintf(p, n, "%s/%s", dir, name);
    return p;
}

/* Writes the tensors of stages [first, last] (tied copies skipped) as dir/file. */
static int write_stages(const nb_model *m, int first, int last, const char *dir, const char *file,
                        const char *const *meta, int n_meta) {
    int n = 0;
    for (int si = first; si <= last; si++) n += m->stages[si].n_tensors;
    nb_st_tensor *t = calloc((size_t)(n ? n : 1), sizeof *t);
    float **host = calloc((size_t)(last - first + 1), sizeof *host);  /* placed stages' weights, copied */
    char *path = join(dir, file);
    int r = !t || !host || !path ? nb_fail("%s: out of memory", dir) : 0, k = 0;
    for (int si = first; si <= last && !r; si++) {
        const nb_stage *s = &m->stages[si];
        const float *w = s->params;
        if (!s->params) r = nb_fail("%s: stage %d's weights are not in this process", dir, si);
        else if (nb_stage_on_device(s)) {
            if (!(w = host[si - first] = malloc(sizeof(float) * (s->n_params ? s->n_params : 1))))
                r = nb_fail("%s: out of memory for stage %d's weights", dir, si);
            else nb_stage_to_host(s, host[si - first], s->params, sizeof(float) * s->n_params);
        }
        for (int ti = 0; ti < s->n_tensors && !r; ti++) {
            const nb_tensor *x = &s->tensors[ti];
            if (x->tied_copy) continue;
            t[k].name = x->name;
            t[k].ndim = x->ndim;
            for (int d = 0; d < x->ndim; d++) t[k].shape[d] = x->shape[d];
            t[k].data = w + x->offset;
            k++;
        }
    }
    if (!r) r = nb_st_write(path, t, k, meta, n_meta);
    for (int i = 0; host && i <= last - first; i++) free(host[i]);
    free(host);
    free(t);
    free(path);
    return r;
}

/* nobubble's own tokenizers end with the end-of-text token: the default bos and eos. */
static int last_id(const nb_model *m) { return m->cfg.vocab_size - 1; }

static int write_config(const nb_config *c, const char *dir, int bos, int eos) {
    char *path = join(dir, "config.json"), *cfg = config_json(c, bos, eos);
    int r = !cfg ? nb_fail("%s: %s", dir, nb_last_error()) : !path ? nb_fail("%s: out of memory", dir)
                                                                   : nb_fs_write_atomic(path, cfg, strlen(cfg));
    free(path);
    free(cfg);
    return r;
}

/* generation_config.json: what transformers' generate() reads for its special tokens (the same ids
 * as config.json's); without it, transformers derives one and warns. Exports only: a checkpoint
 * folder holds a fixed set of files (src/train/run/state.c). */
static int write_generation_config(const char *dir, int bos, int eos) {
    char *path = join(dir, "generation_config.json"), text[160];
    int n = snprintf(text, sizeof text, "{\n  \"bos_token_id\": %d,\n  \"eos_token_id\": %d\n}\n", bos, eos);
    int r = !path ? nb_fail("%s: out of memory", dir) : nb_fs_write_atomic(path, text, (size_t)n);
    free(path);
    return r;
}

int nb_export_hf_generation_config(const nb_model *m, const char *dir) {
    return write_generation_config(dir, last_id(m), last_id(m));
}

int nb_export_hf_special_tokens(const nb_config *c, const char *dir, int bos, int eos) {
    const int v = c->vocab_size;
    if (bos < 0 || bos >= v || eos < 0 || eos >= v)
        return nb_fail("%s: special token ids bos %d, eos %d: expected ids below the vocabulary size %d", dir, bos, eos, v);
    return write_config(c, dir, bos, eos) || write_generation_config(dir, bos, eos);
}

int nb_export_hf_occupied(const char *dir, const char *flag) {
    struct stat st;
    if (stat(dir, &st)) return 0;   /* a link to a folder is that folder (removal never goes through it) */
    if (!S_ISDIR(st.st_mode)) return nb_fail("%s %s: exists and is not a folder", flag, dir);
    return nb_fs_exists_in(dir, "model.safetensors") || nb_fs_exists_in(dir, "model.safetensors.index.json") ||
           nb_fs_exists_in(dir, "config.json");
}

/* What an export writes: model.safetensors or its parts model-0000k-of-0000P.safetensors and their index,
 * the configs and the tokenizer's files. */
static int is_export_file(const char *name) {
    const size_t n = strlen(name), ext = strlen(".safetensors");
    const int weights = !strncmp(name, "model", 5) && n > ext && !strcmp(name + n - ext, ".safetensors");
    return weights || !strcmp(name, "model.safetensors.index.json") || !strcmp(name, "config.json") ||
           !strcmp(name, "generation_config.json") || !strcmp(name, "tokenizer.json") ||
           !strcmp(name, "tokenizer_config.json");
}

int nb_export_hf_clear(const char *dir) { return nb_fs_remove_files(dir, NULL, 0, is_export_file, "export folder"); }

int nb_export_hf_refuse_occupied(const char *dir, const char *flag, int force) {
    const int occupied = nb_export_hf_occupied(dir, flag);
    /* A folder that is not an export's: --force would remove its own files (prepared data's tokenizer.json, a
     * checkpoint's model.safetensors and config.json beside its state), so not even --force writes there. */
    static const char *const owned[][2] = {{"manifest.json", "prepared data"}, {"state.safetensors", "a checkpoint"},
                                           {"grid.txt", "a sweep"}, {"results.csv", "a sweep"}};
    for (size_t i = 0; occupied >= 0 && i < sizeof owned / sizeof owned[0]; i++)
        if (nb_fs_exists_in(dir, owned[i][0]))
            return nb_fail("%s %s holds %s (%s): give the model a folder of its own (not even --force writes there)",
                           flag, dir, owned[i][1], owned[i][0]);
    if (occupied > 0 && !force)
        return nb_fail("%s %s already holds a model (model.safetensors or config.json): give --force to replace it (its "
                       "export's files go first), or another %s", flag, dir, flag);
    return occupied;
}

int nb_export_hf_locked(const nb_model *m, const char *dir, int force, const char *flag) {
    char keys[1024];
    if (moe_keys(&m->cfg, keys, sizeof keys)) return -1;   /* a model with no architecture: before any folder */
    struct stat st;
    const int existed = !stat(dir, &st);
    nb_fs_lock lock;
    nb_fs_lock_init(&lock);
    if (nb_fs_mkdirs(dir, flag) || nb_fs_lock_dir(&lock, dir, flag)) {
        if (!existed) rmdir(dir);  /* only where it is empty */
        return -1;
    }
    const int occupied = nb_export_hf_refuse_occupied(dir, flag, force);
    const int r = occupied < 0 || (occupied && nb_export_hf_clear(dir)) || nb_export_hf(m, dir) ||
                  nb_export_hf_generation_config(m, dir);
    nb_fs_unlock(&lock);  /* removes the lock file */
    if (r && !existed) rmdir(dir);  /* a folder this call made and left empty goes (rmdir refuses any other) */
    return r ? -1 : 0;
}

int nb_export_hf(const nb_model *m, const char *dir) {
    char keys[1024];
    if (moe_keys(&m->cfg, keys, sizeof keys)) return -1;   /* a model with no architecture: before any file */
    if (nb_fs_mkdirs(dir, NULL)) return -1;
    return write_stages(m, 0, m->n_stages - 1, dir, "model.safetensors", NULL, 0) || write_config(&m->cfg, dir, last_id(m), last_id(m));
}

int nb_export_hf_part(const nb_model *m, int stage, const char *dir, int next_step) {
    char file[256], step[32];
    nb_st_part_name(file, sizeof file, "model", stage + 1, m->n_stages);
    snprintf(step, sizeof step, "%d", next_step);
    const char *meta[] = {"next_step", step};
    if (nb_fs_mkdirs(dir, NULL)) return -1;
    return write_stages(m, stage, stage, dir, file, next_step >= 0 ? meta : NULL, next_step >= 0);
}

int nb_export_hf_index(const nb_model *m, const char *dir) {
    int n = 0;
    for (int si = 0; si < m->n_stages; si++) n += m->stages[si].n_tensors;
    nb_st_index_entry *map = calloc((size_t)(n ? n : 1), sizeof *map);
    char (*files)[64] = calloc((size_t)m->n_stages, sizeof *files);
    char *path = join(dir, "model.safetensors.index.json");
    int r = !map || !files || !path ? nb_fail("%s: out of memory", dir) : nb_fs_mkdirs(dir, NULL), k = 0;
    uint64_t bytes = 0;
    for (int si = 0; si < m->n_stages && !r; si++) {
        nb_st_part_name(files[si], sizeof files[si], "model", si + 1, m->n_stages);
        for (int ti = 0; ti < m->stages[si].n_tensors; ti++) {
            const nb_tensor *x = &m->stages[si].tensors[ti];
            if (x->tied_copy) continue;
            map[k++] = (nb_st_index_entry){x->name, files[si]};
            bytes += sizeof(float) * (uint64_t)x->numel;
        }
    }
    if (!r) r = nb_st_write_index(path, map, k, 0, bytes) || write_config(&m->cfg, dir, last_id(m), last_id(m));
    free(map);
    free(files);
    free(path);
    return r;
}

/* dir/config.json against m's configuration: every field that changes the weights' shapes or the
 * function they compute (read and checked as nb_hf_read_config does: hf_config.c). */
static int check_config(const nb_config *c, const char *dir) {
    nb_config f;
    char path[4096];
    snprintf(path, sizeof path, "%s/config.json", dir);
    if (nb_hf_read_config(dir, &f)) return -1;
    struct { const char *key; int got, want; } ints[] = {
        {"vocab_size", f.vocab_size, c->vocab_size}, {"hidden_size", f.d_model, c->d_model},
        {"intermediate_size", f.d_ffn, c->d_ffn}, {"num_hidden_layers", f.n_layers, c->n_layers},
        {"num_attention_heads", f.n_heads, c->n_heads}, {"num_key_value_heads", f.n_kv_heads, c->n_kv_heads},
        {"num_local_experts", f.n_experts, c->n_experts}, {"num_experts_per_tok", f.experts_per_token,
                                                           c->experts_per_token}};
    if (f.moe_every != c->moe_every && c->n_experts > 0 && f.n_experts > 0)
        return nb_fail("%s: a Mixtral's blocks are all MoE blocks (moe_every 1), the model has moe_every %d", path,
                       c->moe_every);
    /* (aux_coef only weighs a training objective: a run may choose its own) */
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++)
        if (ints[i].got != ints[i].want)
            return nb_fail("%s: \"%s\" is %d, the model has %d", path, ints[i].key, ints[i].got, ints[i].want);
    struct { const char *key; double got, want; } dbls[] = {{"rms_norm_eps", f.norm_eps, c->norm_eps},
                                                            {"rope_theta", f.rope_theta, c->rope_theta}};
    for (size_t i = 0; i < sizeof dbls / sizeof dbls[0]; i++)
        if (dbls[i].got != dbls[i].want)
            return nb_fail("%s: \"%s\" is %.17g, the model has %.17g", path, dbls[i].key, dbls[i].got, dbls[i].want);
    if (f.tied != (c->tied != 0))
        return nb_fail("%s: \"tie_word_embeddings\" is %s, the model is %s", path, f.tied ? "true" : "false",
                       c->tied ? "tied" : "untied");
    return 0;
}

static int wanted(const nb_model *m, const char *name) {
    for (int si = 0; si < m->n_stages; si++)
        for (int ti = 0; ti < m->stages[si].n_tensors; ti++)
            if (!m->stages[si].tensors[ti].tied_copy && !strcmp(m->stages[si].tensors[ti].name, name)) return 1;
    return 0;
}

static void shape_str(char *buf, size_t size, const int64_t *shape, int ndim) {
    size_t at = (size_t)snprintf(buf, size, "[");
    for (int d = 0; d < ndim && at < size; d++) at += (size_t)snprintf(buf + at, size - at, "%s%lld", d ? ", " : "", (long long)shape[d]);
    if (at < size) snprintf(buf + at, size - at, "]");
}

/* The file's name for a tensor (a tied head copy is the embedding). */
static const char *file_name(const nb_tensor *x) { return x->tied_copy ? "model.embed_tokens.weight" : x->name; }

/* Every tensor of the model present in the set with its shape (all stages, held here or not). */
static int check_present(const nb_model *m, const nb_st_set *set, const char *dir) {
    for (int si = 0; si < m->n_stages; si++)
        for (int ti = 0; ti < m->stages[si].n_tensors; ti++) {
            const nb_tensor *x = &m->stages[si].tensors[ti];
            const nb_st_file *in = NULL;
            const nb_st_entry *e = nb_st_set_find(set, file_name(x), &in);
            if (!e)
                return nb_fail("%s: missing tensor '%s'%s", set->n == 1 ? set->files[0].path : dir, file_name(x),
                               set->n == 1 ? "" : " (in no part the index names)");
            int64_t want[2] = {x->shape[0], x->shape[1]};
            int same = e->ndim == x->ndim;
            for (int d = 0; d < x->ndim && same; d++) same = e->shape[d] == want[d];
            if (!same) {
                char a[128], b[128];
                shape_str(a, sizeof a, e->shape, e->ndim);
                shape_str(b, sizeof b, want, x->ndim);
                return nb_fail("%s: tensor '%s' has shape %s, the model expects %s", in->path, file_name(x), a, b);
            }
        }
    return 0;
}

/* Nothing in the set that the model does not have (but the buffers and repeats exports carry). */
static int check_nothing_else(const nb_model *m, const nb_st_set *set) {
    static const char inv[] = "rotary_emb.inv_freq";   /* older exports carry it; it is computed */
    for (int p = 0; p < set->n; p++)
        for (int i = 0; i < set->files[p].n; i++) {
            const char *name = set->files[p].entries[i].name;
            size_t len = strlen(name);
            if (len >= sizeof inv - 1 && !strcmp(name + len - (sizeof inv - 1), inv)) continue;
            if (m->cfg.tied && !strcmp(name, "lm_head.weight")) continue;   /* some exports repeat the tied head */
            if (!wanted(m, name))
                return nb_fail("%s: unexpected tensor '%s' (not part of this model)", set->files[p].path, name);
        }
    return 0;
}

int nb_import_hf_stages(nb_model *m, const char *dir, int first, int last) {
    if (first < 0 || last >= m->n_stages || first > last)
        return nb_fail("%s: stages %d..%d: the model has %d", dir, first, last, m->n_stages);
    if (check_config(&m->cfg, dir)) return -1;
    nb_st_set set;
    if (nb_st_set_open(dir, "model", &set)) return -1;
    /* everything checked before anything is written */
    int r = check_present(m, &set, dir) || check_nothing_else(m, &set) ? -1 : 0;
    for (int si = first; si <= last && !r; si++) {
        nb_stage *s = &m->stages[si];
        /* a placed stage's weights are read on the host, then copied over whole */
        float *w = nb_stage_on_device(s) ? malloc(sizeof(float) * (s->n_params ? s->n_params : 1)) : s->params;
        if (!s->params) r = nb_fail("%s: stage %d's weights are not in this process", dir, si);
        else if (!w) r = nb_fail("%s: out of memory for stage %d's weights", dir, si);
        for (int ti = 0; ti < s->n_tensors && !r; ti++) {
            const nb_tensor *x = &s->tensors[ti];
            r = nb_st_set_read_f32(&set, file_name(x), w + x->offset, x->numel);
        }
        if (w && w != s->params) {
            if (!r) nb_stage_from_host(s, s->params, w, sizeof(float) * s->n_params);
            free(w);
        }
    }
    nb_st_set_close(&set);
    return r;
}

int nb_import_hf(nb_model *m, const char *dir) { return nb_import_hf_stages(m, dir, 0, m->n_stages - 1); }
