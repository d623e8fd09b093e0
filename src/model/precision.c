/* A bf16 stage's state: its weight versions cast to bf16, each once (docs/rules.md, section 5:
 * "each weight version is cast to bf16 once, never per micro-batch"). The cache is keyed by the
 * version's number, which the caller gives (a stashed version's weights never change while it lives);
 * the least recently used entry makes room. (The stage's scratch, bf16 operands included, is
 * model/acts.c's.) */
#include <stdlib.h>
#include <string.h>
#include "layers/ops.h"
#include "model/stage.h"
#include "util/alloc.h"
#include "util/error.h"

struct nb_bf16_state {
    int capacity;
    long *version, *last_use, clock;  /* version -2: empty */
    nb_bf16 **copy;
    nb_bf16 *unnamed;                 /* weights the caller could not name: cast on every call */
};

nb_precision nb_precision_choose(nb_precision p) {
    if (p != NB_PRECISION_AUTO) return p;
    return nb_bf16_native() ? NB_PRECISION_BF16 : NB_PRECISION_FP32;
}

/* A bf16 copy of the stage's weights, in the stage's memory (a device's where it is placed on one). */
static nb_bf16 *copy_alloc(const nb_stage *s) {
    return nb_stage_alloc(s, sizeof(nb_bf16) * s->n_params, "a stage's bf16 weights");
}

static void free_state(const nb_stage *s, struct nb_bf16_state *b) {
    if (!b) return;
    for (int i = 0; b->copy && i < b->capacity; i++) nb_stage_free(s, b->copy[i]);
    free(b->copy);
    free(b->version);
    free(b->last_use);
    nb_stage_free(s, b->unnamed);
    free(b);
}

void stage_precision_release(nb_stage *s) {
    free_state(s, s->bf16);
    s->bf16 = NULL;
}

int nb_stage_set_precision(nb_stage *s, nb_precision p, int versions) {
    if (p != NB_PRECISION_FP32 && p != NB_PRECISION_BF16)
        return nb_fail("stage %d: precision %s: expected fp32 or bf16", s->index, nb_precision_name(p));
    if (p == NB_PRECISION_BF16 && versions < 1)
        return nb_fail("stage %d: bf16 with %d weight versions: expected at least 1", s->index, versions);
    stage_precision_release(s);
    s->precision = p;
    if (p == NB_PRECISION_FP32) return 0;
    struct nb_bf16_state *b = nb_calloc(1, sizeof *b, "a stage's bf16 state");
    if (!b) return -1;
    b->capacity = versions;
    b->version = nb_calloc((size_t)versions, sizeof(long), "a stage's bf16 version table");
    b->last_use = nb_calloc((size_t)versions, sizeof(long), "a stage's bf16 version table");
    b->copy = nb_calloc((size_t)versions, sizeof(nb_bf16 *), "a stage's bf16 version table");
    if (!b->version || !b->last_use || !b->copy) {
        free_state(s, b);
        return -1;
    }
    for (int i = 0; i < versions; i++) b->version[i] = -2;
    s->bf16 = b;
    return 0;
}

int nb_model_set_precision(nb_model *m, nb_precision p, int versions) {
    for (int i = 0; i < m->n_stages; i++)
        if (nb_stage_set_precision(&m->stages[i], p, versions)) return -1;
    return 0;
}

const nb_bf16 *stage_bf16_weights(const nb_stage *s, const float *w, long version) {
    struct nb_bf16_state *b = s->bf16;
    if (version < 0) {
        if (!b->unnamed && !(b->unnamed = copy_alloc(s))) return NULL;
        nb_layers_of(s->backend)->bf16_cast(s->backend, b->unnamed, w, s->n_params);
        return b->unnamed;
    }
    int victim = 0;
    for (int i = 0; i < b->capacity; i++) {
        if (b->version[i] == version) {
            b->last_use[i] = ++b->clock;
            return b->copy[i];
        }
        if (b->last_use[i] < b->last_use[victim]) victim = i;
    }
    if (!b->copy[victim] && !(b->copy[victim] = copy_alloc(s))) return NULL;
    nb_layers_of(s->backend)->bf16_cast(s->backend, b->copy[victim], w, s->n_params);
    b->version[victim] = version;
    b->last_use[victim] = ++b->clock;
    return b->copy[victim];
}

size_t stage_bf16_bytes(const nb_stage *s) {
    const struct nb_bf16_state *b = s->bf16;
    if (!b) return 0;
    return sizeof(nb_bf16) * s->n_params * (size_t)b->capacity;
}
