/* The model: its stages, their initialization and the tied embedding's gradient sum. What runs them
 * is the executor's stage role (src/train/exec/worker.c), in every kind of run. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "model/stage.h"
#include "util/alloc.h"
#include "util/error.h"
#include "util/hash.h"
#include "util/rng.h"

/* The model's stages on backend be; with allocate, their weights, gradients, scratch and RoPE tables too.
 * On failure nothing stays allocated. */
static int make_stages(nb_model *m, const nb_config *cfg, int n_stages, const int *blocks_per_stage, int allocate,
                       const nb_backend *be) {
    memset(m, 0, sizeof *m);
    if (nb_config_validate(cfg)) return -1;
    if (!be && !(be = nb_backend_default())) return nb_fail("the default backend could not be opened: %s", nb_last_error());
    if (n_stages < 1 || n_stages > cfg->n_layers)
        return nb_fail("stages = %d: expected 1 <= stages <= n_layers (%d)", n_stages, cfg->n_layers);
    int sum = 0;
    for (int i = 0; blocks_per_stage && i < n_stages; i++) {
        if (blocks_per_stage[i] < 0) return nb_fail("stage %d: %d blocks: expected >= 0", i, blocks_per_stage[i]);
        sum += blocks_per_stage[i];
    }
    if (blocks_per_stage && sum != cfg->n_layers)
        return nb_fail("the stage split assigns %d blocks: expected n_layers = %d", sum, cfg->n_layers);
    m->cfg = *cfg;
    m->stages = nb_calloc((size_t)n_stages, sizeof(nb_stage), "the model's table of stages");
    if (!m->stages) return -1;
    m->n_stages = n_stages;  /* once the table exists, which freeing reads */
    int first = 0;
    for (int i = 0; i < n_stages; i++) {
        int n = blocks_per_stage ? blocks_per_stage[i]
                                 : cfg->n_layers / n_stages + (i < cfg->n_layers % n_stages ? 1 : 0);
        if (allocate ? nb_stage_init(&m->stages[i], cfg, i, n_stages, first, n)
                     : nb_stage_layout(&m->stages[i], cfg, i, n_stages, first, n)) {
            nb_model_free(m);  /* the stages not reached are zero, which releasing skips */
            return -1;
        }
        /* a backend with memory of its own (a GPU's) takes the stage's arrays there */
        if (allocate && be->device_memory && nb_stage_place(&m->stages[i], be)) {
            nb_model_free(m);
            return -1;
        }
        m->stages[i].backend = be;
        first += n;
    }
    return 0;
}

int nb_model_create(nb_model *m, const nb_config *cfg, int n_stages, const int *blocks_per_stage,
                    const nb_backend *backend) {
    return make_stages(m, cfg, n_stages, blocks_per_stage, 1, backend);
}

int nb_model_layout(nb_model *m, const nb_config *cfg, int n_stages, const int *blocks_per_stage) {
    return make_stages(m, cfg, n_stages, blocks_per_stage, 0, NULL);
}

void nb_model_free(nb_model *m) {
    for (int i = 0; i < m->n_stages; i++) nb_stage_release(&m->stages[i]);
    free(m->stages);
    memset(m, 0, sizeof *m);
}

void nb_model_keep_only(nb_model *m, int stage) { nb_model_keep_worker(m, stage, m->n_stages); }

/* Another process's stage placed on a device: its device arrays given back, and the stage left on the host's
 * memory (the weights that arrive at the end, nb_model_alloc_stage, are the host's). */
static void leave_device(nb_stage *s) {
    float **arrays[5] = {&s->params, &s->grads, &s->tied_head_grad, &s->rope_cos, &s->rope_sin};
    for (int i = 0; i < 5; i++) {
        nb_stage_free(s, *arrays[i]);
        *arrays[i] = NULL;
    }
    s->backend = nb_backend_default();
}

void nb_model_keep_worker(nb_model *m, int worker, int workers) {
    for (int i = 0; i < m->n_stages; i++) {
        nb_stage *s = &m->stages[i];
        if (i % workers == worker) continue;
        if (nb_stage_on_device(s)) {
            leave_device(s);
            continue;
        }
        free(s->params);
        free(s->grads);
        free(s->tied_head_grad);
        s->params = s->grads = s->tied_head_grad = NULL;
    }
}

int nb_model_alloc_stage(nb_model *m, int stage) {
    nb_stage *s = &m->stages[stage];
    if (s->params) return 0;
    if (!(s->params = nb_calloc(s->n_params, sizeof(float), "a stage's weights")))
        return nb_fail("stage %d: %s", stage, nb_last_error());
    return 0;
}

/* Attention's output and each MLP's down projection (a MoE expert's is its w2). */
static int is_output_projection(const char *name) {
    return strstr(name, "o_proj.weight") != NULL || strstr(name, "down_proj.weight") != NULL ||
           strstr(name, ".w2.weight") != NULL;
}

int nb_model_init(nb_model *m, uint64_t seed) {
    double out_scale = 1.0 / sqrt(2.0 * m->cfg.n_layers);
    for (int si = 0; si < m->n_stages; si++) {
        nb_stage *s = &m->stages[si];
        if (!s->params) continue;  /* another process's stage (nb_model_keep_only) */
        /* a stage in a device's memory: drawn on the host, then copied over */
        float *host = nb_stage_on_device(s) ? nb_alloc(sizeof(float) * s->n_params, "a stage's initial weights") : s->params;
        if (!host) return -1;
        for (int ti = 0; ti < s->n_tensors; ti++) {
            const nb_tensor *t = &s->tensors[ti];
            float *p = host + t->offset;
            if (t->group == NB_GROUP_GAIN) {
                for (size_t i = 0; i < t->numel; i++) p[i] = 1.0f;
                continue;
            }
            /* A tied copy draws the embedding's stream, so both copies start equal. */
            nb_rng r = nb_rng_keyed(seed, t->tied_copy ? "model.embed_tokens.weight" : t->name);
            double std = 0.02 * (is_output_projection(t->name) ? out_scale : 1.0);
            for (size_t i = 0; i < t->numel; i++) p[i] = (float)(std * nb_rng_normal(&r));
        }
        if (host != s->params) {
            nb_backend_from_host(s->backend, s->params, host, sizeof(float) * s->n_params);
            free(host);
        }
    }
    return 0;
}

void nb_model_zero_grads(nb_model *m) {
    for (int i = 0; i < m->n_stages; i++) {
        nb_stage *s = &m->stages[i];
        nb_stage_zero(s, s->grads, sizeof(float) * s->n_params);
        if (s->tied_head_grad) nb_stage_zero(s, s->tied_head_grad, sizeof(float) * s->tensors[0].numel);
    }
}

void nb_stage_sum_tied_grad(nb_stage *s, const float *head_grad) {
    if (!s->cfg.tied || !s->has_embed) return;
    const float *head = s->tied_head_grad ? s->tied_head_grad : head_grad;
    float *embed = s->grads + s->tensors[0].offset;
    const size_t n = s->tensors[0].numel;
    if (head && nb_stage_on_device(s)) nb_backend_add(s->backend, embed, head, n);
    else
        for (size_t i = 0; head && i < n; i++) embed[i] += head[i];
    if (s->tied_head_grad) nb_stage_zero(s, s->tied_head_grad, sizeof(float) * n);
}

const nb_tensor *nb_model_find(const nb_model *m, const char *name, nb_stage **stage_out) {
    for (int si = 0; si < m->n_stages; si++)
        for (int ti = 0; ti < m->stages[si].n_tensors; ti++)
            if (!strcmp(m->stages[si].tensors[ti].name, name)) {
                if (stage_out) *stage_out = &m->stages[si];
                return &m->stages[si].tensors[ti];
            }
    return NULL;
}

void nb_model_sync_tied_copy(nb_model *m) {
    if (!m->cfg.tied || m->n_stages == 1) return;
    nb_stage *first = &m->stages[0], *last = &m->stages[m->n_stages - 1];
    /* one run: one backend, so the first stage's copy reaches the last's memory */
    nb_stage_copy(first, last->params + last->tensors[last->n_tensors - 1].offset,
                  first->params + first->tensors[0].offset, sizeof(float) * first->tensors[0].numel);
}

/* A placed stage's weights are hashed tensor by tensor from a host copy (0 when there is no memory for it:
 * a hash that matches nothing, which the caller's comparison then reports). */
uint64_t nb_model_weights_hash(const nb_model *m) {
    uint64_t h = NB_FNV_INIT;
    for (int si = 0; si < m->n_stages; si++) {
        const nb_stage *s = &m->stages[si];
        for (int ti = 0; ti < s->n_tensors; ti++) {
            const nb_tensor *t = &s->tensors[ti];
            if (t->tied_copy) continue;
            const size_t bytes = sizeof(float) * t->numel;
            if (!nb_stage_on_device(s)) {
                h = nb_fnv1a(h, s->params + t->offset, bytes);
                continue;
            }
            float *host = malloc(bytes ? bytes : 1);
            if (!host) return 0;
            nb_stage_to_host(s, host, s->params + t->offset, bytes);
            h = nb_fnv1a(h, host, bytes);
            free(host);
        }
    }
    return h;
}

double nb_model_train_flops_per_token(const nb_config *c, int T) {
    double d = c->d_model, hd = d / c->n_heads, dq = hd * c->n_heads, dkv = hd * c->n_kv_heads, f = c->d_ffn;
    /* a MoE block's router and its k experts in place of the dense MLP (0 for a dense model) */
    const double moe = nb_config_moe_blocks(c) * (c->n_experts * d + (c->experts_per_token - 1) * 3 * f * d);
    double matrix = c->n_layers * (d * (dq + 2 * dkv) + dq * d + 3 * f * d) + (double)c->vocab_size * d + moe;
    return 6.0 * matrix + 6.0 * c->n_layers * dq * (T + 1.0);
}
