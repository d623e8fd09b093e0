/* Internal: the update rules, one per file, and the per-tensor state they keep. Each rule
 * computes d for one tensor from its gradient g and current weights w (docs/rules.md). */
#ifndef NB_OPTIM_RULES_H
#define NB_OPTIM_RULES_H
#include <stddef.h>
#include "backend/backend.h"
#include "nobubble/optim.h"

typedef enum { RULE_SGD, RULE_ADAMW, RULE_MUON, RULE_LION, RULE_ADAN, RULE_MARS, RULE_SOAP, RULE_NORMUON } rule_kind;

#define MAX_BUFFERS 6
typedef struct {
    rule_kind rule;
    const nb_tensor *t;
    int n_buf;
    const char *buf_name[MAX_BUFFERS];
    float *buf[MAX_BUFFERS];
    size_t buf_len[MAX_BUFFERS];
    long count;          /* updates this tensor's rule has made: bias correction uses count + 1 */
    int left, right;     /* SOAP: which sides are preconditioned */
} tensor_state;

/* Scratch shared by the rules, sized for the largest matrix of the optimizer. */
typedef struct {
    float *f[4];
    double *d[3];
    nb_bf16 *h;          /* Muon's and NorMuon's bf16 operands under bf16: a matrix and an r x r block */
} scratch;

typedef struct {
    const nb_optim_params *p;
    float lr;
    long step;           /* the optimizer's step t (0-based) */
    scratch *s;
    int bf16;            /* 1: Muon's and NorMuon's Newton-Schulz products take bf16 operands (fp32 accumulation) */
    const nb_backend *be; /* runs the products (the stage's backend) */
} rule_ctx;

/* The buffers a rule keeps for tensor t: names and lengths (up to MAX_BUFFERS). */
int rule_buffers(rule_kind rule, const nb_tensor *t, const nb_optim_params *p, const char **names, size_t *lens);

void sgd_step(tensor_state *ts, const rule_ctx *c, const float *g, const float *w, float *d);
void adamw_step(tensor_state *ts, const rule_ctx *c, float beta1, float beta2, const float *g, const float *w, float *d);
void muon_step(tensor_state *ts, const rule_ctx *c, const float *g, const float *w, float *d);
void normuon_step(tensor_state *ts, const rule_ctx *c, const float *g, const float *w, float *d);
/* Muon's shared part (muon.c): the momentum step and Newton-Schulz; O (rows x cols) in scratch f[0] or
 * f[2], valid until the next rule step on this scratch; f[1] is not used. */
const float *muon_orthogonalize(tensor_state *ts, const rule_ctx *c, const float *g);
/* lr sqrt(max(1, rows/cols)). */
float muon_shape_scale(const nb_tensor *t, float lr);
void lion_step(tensor_state *ts, const rule_ctx *c, const float *g, const float *w, float *d);
void adan_step(tensor_state *ts, const rule_ctx *c, const float *g, const float *w, float *d);
void mars_step(tensor_state *ts, const rule_ctx *c, const float *g, const float *w, float *d);
int soap_step(tensor_state *ts, const rule_ctx *c, const float *g, const float *w, float *d);

/* Weight decay of a tensor: none for gains. */
static inline float decay_of(const nb_tensor *t, const nb_optim_params *p) {
    return t->group == NB_GROUP_GAIN ? 0.0f : p->weight_decay;
}
/* Parallel loops only where a tensor is large enough to pay for the threads. */
#define PAR_MIN 32768
#endif
