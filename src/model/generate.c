/* Generation: one token at a time through every stage with a key/value cache, so that each new
 * token costs one row of work instead of a forward over the whole prefix. The same layer
 * functions as training run on a single row; attention reads the cached (rotated) keys and values. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "layers/layers.h"
#include "layers/moe.h"
#include "model/stage.h"
#include "util/alloc.h"
#include "util/error.h"

struct nb_kv_cache {
    int max_len, len, n_layers, dkv, d, dq, F;
    float *k, *v;              /* [n_layers][max_len][dkv], rotated keys and values */
    float *x, *ln, *qkv, *att, *gu, *h, *p;  /* one row of work */
    moe_state moe;             /* a MoE model's routing of the one row (its memory: moe_memory) */
    void *moe_memory;
};

nb_kv_cache *nb_kv_cache_create(const nb_model *m, int max_len) {
    const nb_config *c = &m->cfg;
    if (max_len < 1 || max_len > c->context) {
        nb_fail("generation length %d: expected 1 to the context (%d)", max_len, c->context);
        return NULL;
    }
    nb_kv_cache *k = calloc(1, sizeof *k);
    if (!k) return NULL;
    int hd = c->d_model / c->n_heads;
    k->max_len = max_len;
    k->n_layers = c->n_layers;
    k->d = c->d_model;
    k->dq = hd * c->n_heads;
    k->dkv = hd * c->n_kv_heads;
    k->F = c->d_ffn;
    size_t cache = (size_t)c->n_layers * max_len * k->dkv;
    k->k = calloc(cache, sizeof(float));
    k->v = calloc(cache, sizeof(float));
    k->x = calloc((size_t)k->d, sizeof(float));
    k->ln = calloc((size_t)k->d, sizeof(float));
    k->qkv = calloc((size_t)k->dq + 2 * k->dkv, sizeof(float));
    k->att = calloc((size_t)k->dq, sizeof(float));
    k->gu = calloc(2 * (size_t)k->F, sizeof(float));
    k->h = calloc((size_t)k->F, sizeof(float));
    k->p = calloc((size_t)max_len, sizeof(float));
    const moe_dims moe = {1, c->d_model, c->d_ffn, c->n_experts, c->experts_per_token, 0};
    const size_t moe_kept = c->n_experts > 0 ? moe_state_bytes(&moe) : 0;  /* a multiple of 64, then the scratch */
    if (c->n_experts > 0 &&
        (k->moe_memory = nb_alloc_aligned(moe_kept + moe_scratch_bytes(&moe), "a MoE block's routing"))) {
        moe_state_bind(&k->moe, &moe, k->moe_memory);
        moe_scratch_bind(&k->moe, (char *)k->moe_memory + moe_kept);
    }
    if (!k->k || !k->v || !k->x || !k->ln || !k->qkv || !k->att || !k->gu || !k->h || !k->p ||
        (c->n_experts > 0 && !k->moe_memory)) {
        nb_kv_cache_free(k);
        nb_fail("out of memory for a key/value cache of %d positions", max_len);
        return NULL;
    }
    return k;
}

void nb_kv_cache_free(nb_kv_cache *k) {
    if (!k) return;
    free(k->k); free(k->v); free(k->x); free(k->ln); free(k->qkv); free(k->att); free(k->gu); free(k->h); free(k->p);
    free(k->moe_memory);
    free(k);
}

int nb_kv_cache_length(const nb_kv_cache *k) { return k->len; }

/* One query row against the cached keys and values of one layer (positions 0..pos). */
static void attend(nb_kv_cache *k, const nb_config *c, int layer, int pos) {
    const int hd = c->d_model / c->n_heads, group = c->n_heads / c->n_kv_heads;
    const float scale = 1.0f / sqrtf((float)hd);
    const float *K = k->k + (size_t)layer * k->max_len * k->dkv, *V = k->v + (size_t)layer * k->max_len * k->dkv;
    for (int h = 0; h < c->n_heads; h++) {
        const float *q = k->qkv + h * hd;
        const int off = (h / group) * hd;
        float m = -INFINITY, sum = 0.0f;
        for (int s = 0; s <= pos; s++) {
            float dot = 0.0f;
            for (int i = 0; i < hd; i++) dot += q[i] * K[(size_t)s * k->dkv + off + i];
            k->p[s] = dot * scale;
            m = k->p[s] > m ? k->p[s] : m;
        }
        for (int s = 0; s <= pos; s++) sum += (k->p[s] = expf(k->p[s] - m));
        float *o = k->att + h * hd;
        memset(o, 0, sizeof(float) * hd);
        for (int s = 0; s <= pos; s++)
            for (int i = 0; i < hd; i++) o[i] += k->p[s] / sum * V[(size_t)s * k->dkv + off + i];
    }
}

int nb_decode_step(const nb_model *m, nb_kv_cache *k, int token, float *logits) {
    const nb_config *c = &m->cfg;
    if (token < 0 || token >= c->vocab_size)
        return nb_fail("token id %d is outside the vocabulary [0, %d)", token, c->vocab_size);
    if (k->len >= k->max_len) return nb_fail("the key/value cache is full (%d positions)", k->max_len);
    const int pos = k->len, d = k->d, qkv = k->dq + 2 * k->dkv, half = (c->d_model / c->n_heads) / 2;
    const float eps = (float)c->norm_eps;
    const nb_stage *first = &m->stages[0];
    memcpy(k->x, first->params + first->tensors[0].offset + (size_t)token * d, sizeof(float) * d);
    for (int si = 0; si < m->n_stages; si++) {
        const nb_stage *s = &m->stages[si];
        for (int l = 0; l < s->n_blocks; l++) {
            const int layer = s->first_block + l;
            block_weights w = weights_of_block(s, s->params, l);
            float rstd;
            rmsnorm_forward(k->ln, &rstd, k->x, w.ln1, 1, d, eps);
            linear_forward(s->backend, k->qkv, 0.0f, k->ln, w.wqkv, 1, d, qkv);
            /* one row: the tables from this position on give it angle pos */
            rope_forward(k->qkv, 1, 1, qkv, c->n_heads + c->n_kv_heads, c->d_model / c->n_heads,
                         s->rope_cos + (size_t)pos * half, s->rope_sin + (size_t)pos * half);
            size_t at = ((size_t)layer * k->max_len + pos) * k->dkv;
            memcpy(k->k + at, k->qkv + k->dq, sizeof(float) * k->dkv);
            memcpy(k->v + at, k->qkv + k->dq + k->dkv, sizeof(float) * k->dkv);
            attend(k, c, layer, pos);
            linear_forward(s->backend, k->x, 1.0f, k->att, w.wo, 1, k->dq, d);
            rmsnorm_forward(k->ln, &rstd, k->x, w.ln2, 1, d, eps);
            if (w.router) {  /* a MoE block: the row's experts */
                if (moe_forward(s->backend, &k->moe, k->x, k->ln, w.router, w.wgu, w.wdown, NULL)) return -1;
                continue;
            }
            linear_forward(s->backend, k->gu, 0.0f, k->ln, w.wgu, 1, d, 2 * k->F);
            swiglu_forward(k->h, k->gu, 1, k->F);
            linear_forward(s->backend, k->x, 1.0f, k->h, w.wdown, 1, k->F, d);
        }
    }
    const nb_stage *last = &m->stages[m->n_stages - 1];
    float rstd;
    rmsnorm_forward(k->ln, &rstd, k->x, final_norm_weights(last, last->params), 1, d, eps);
    linear_forward(last->backend, logits, 0.0f, k->ln, head_weights(last, last->params), 1, d, c->vocab_size);
    if (nb_backend_check(last->backend)) return -1;
    k->len++;
    return 0;
}
