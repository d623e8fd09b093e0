/* Internal: the update rules, one per file, and the per-tensor state they keep. Each rule computes d
 * for one tensor from its gradient g and current weights w (docs/rules.md). An optimizer's descriptor
 * (optim.h, src/optim/optimizers.c) names its rule; the dispatch (optimizer.c) reads nothing else. */
#ifndef NB_OPTIM_RULES_H
#define NB_OPTIM_RULES_H
#include <stddef.h>
#include "backend/backend.h"
#include "nobubble/optim.h"

#define MAX_BUFFERS 6
typedef struct {
    const nb_optimizer_desc *opt; /* whose rule runs on this tensor: the run's optimizer, or AdamW as the
                                     auxiliary rule of what the optimizer's rule does not take */
    const nb_tensor *t;
    int n_buf;
    float *buf[MAX_BUFFERS];      /* in the order of the rule's buffers; NULL where a buffer is absent (length 0) */
    size_t buf_len[MAX_BUFFERS];
    long count;          /* updates this tensor's rule has made: bias correction uses count + 1 */
    int on_host;         /* a device's stage whose rule runs on the host (SOAP: its eigendecompositions are LAPACK's):
                            its buffers are the host's, and g, w and d cross over for each step */
} tensor_state;

/* Scratch shared by the rules, sized for the largest matrix of the optimizer (r: min(rows, cols) of its
 * matrices, n: the side of SOAP's largest preconditioner). The float buffers, by their index in f: */
enum {
    SCRATCH_MATRIX,           /* a matrix: Muon's iterate X, SOAP's rotated gradient P */
    SCRATCH_MATRIX_OR_PRECOND, /* a matrix or an n x n, whichever is larger: SOAP's T, NorMuon's row scales */
    SCRATCH_NEXT_MATRIX,      /* a matrix: Muon's next iterate Xn */
    SCRATCH_GRAM,             /* two r x r blocks: Newton-Schulz's A and B */
    SCRATCH_FLOATS
};
/* The double buffers, n x n each, by their index in d: SOAP's eigendecomposition. */
enum { SCRATCH_EIG_A, SCRATCH_EIG_Q, SCRATCH_DOUBLES };
typedef struct {
    float *f[SCRATCH_FLOATS];
    double *d[SCRATCH_DOUBLES];
    nb_bf16 *h;          /* Muon's and NorMuon's bf16 operands under bf16: a matrix and an r x r block */
} scratch;

typedef struct {
    const nb_optim_params *p; /* the optimizer's; for the auxiliary AdamW, with aux_beta1 and aux_beta2 as its betas */
    float lr;
    long step;           /* the optimizer's step t (0-based) */
    scratch *s;
    int bf16;            /* 1: Muon's and NorMuon's Newton-Schulz products take bf16 operands (fp32 accumulation) */
    const nb_backend *be; /* runs the products (the stage's backend) */
} rule_ctx;

/* How long a state buffer is, for a tensor of rows x cols. */
typedef enum {
    STATE_PER_VALUE,       /* one float per value of the tensor */
    STATE_PER_ROW,         /* one float per row (per output neuron) */
    STATE_PRECOND_LEFT,    /* rows x rows; absent when rows > --max-precond-dim */
    STATE_PRECOND_RIGHT,   /* cols x cols; absent when cols > --max-precond-dim */
} state_size;

typedef struct {
    const char *name;      /* "m": checkpoints store it as "<optimizer>.m:<tensor>", so it never changes */
    state_size size;
} state_buffer;

/* An update rule: what the dispatch needs to run it. */
typedef struct nb_optim_rule {
    /* d for one tensor, advancing ts (its buffers and count); -1 (nb_fail) when it cannot go on: the
     * state is then partly advanced, and the run must stop. */
    int (*step)(tensor_state *ts, const rule_ctx *c, const float *g, const float *w, float *d);
    state_buffer buffers[MAX_BUFFERS];  /* the state it keeps per tensor, in ts->buf's order; name NULL after
                                           the last */
    int matrices_only;   /* 1: it takes the 2-D matrix tensors only; embeddings and gains take the auxiliary
                            AdamW (aux betas, --aux-lr) */
    int per_matrix;      /* 1: it runs matrix products on each tensor: its tensors run one per thread, each
                            with a scratch sized for the largest matrix (the products' result then does not
                            depend on the thread count) */
} nb_optim_rule;

/* The rules on a backend whose memory is a device's (nb_backend.device_memory; the tensor's buffers, g, w
 * and d are then that memory): the backend's `rules` table runs each rule's step there, with the
 * contract of rule->step (d computed, ts's buffers and count advanced). The CUDA backend's is
 * rules_cuda.c's; a rule the table does not have fails naming it (the run refuses such an optimizer before
 * anything is made). SOAP's rule stays on the host: its state is the host's, g and w are copied over and d
 * back (optimizer.c, tensor_state.on_host). */
typedef struct nb_rule_ops {
    int (*step)(const nb_backend *be, const struct nb_optim_rule *rule, tensor_state *ts, const rule_ctx *c,
                const float *g, const float *w, float *d);
} nb_rule_ops;
/* be's table: its own, else its device's (NULL on the host's memory, or for a device this build has no
 * table for). */
const nb_rule_ops *nb_rules_of(const nb_backend *be);
/* The CUDA backend's table (rules_cuda.c, -DNB_CUDA=ON only): AdamW, Lion, Adan and MARS as its kernels,
 * Muon and NorMuon (fp32) with Newton-Schulz through cuBLAS. */
const nb_rule_ops *nb_rule_ops_cuda(void);
/* The guarded device's (rules_guarded.c; backend/guarded.h): the CPU's rules on its mirrors. */
const nb_rule_ops *nb_rule_ops_guarded(void);

/* The rules (one file each), which the descriptors of optimizers.c name. */
extern const nb_optim_rule sgd_rule, adamw_rule, muon_rule, lion_rule, adan_rule, mars_rule, soap_rule, normuon_rule;

/* Muon's shared part (muon.c): the momentum step and Newton-Schulz; O (rows x cols) in scratch
 * SCRATCH_MATRIX or SCRATCH_NEXT_MATRIX, valid until the next rule step on this scratch;
 * SCRATCH_MATRIX_OR_PRECOND is not used. */
const float *muon_orthogonalize(tensor_state *ts, const rule_ctx *c, const float *g);
/* Newton-Schulz's quintic coefficients (a, b, c): X = a X + (b A + c A A) X with A = X X^T. */
#define MUON_NS_A 3.4445f
#define MUON_NS_B (-4.7750f)
#define MUON_NS_C 2.0315f
/* lr sqrt(max(1, rows/cols)). */
float muon_shape_scale(const nb_tensor *t, float lr);

/* Weight decay of a tensor: none for gains. */
static inline float decay_of(const nb_tensor *t, const nb_optim_params *p) {
    return t->group == NB_GROUP_GAIN ? 0.0f : p->weight_decay;
}
/* Parallel loops only where a tensor is large enough to pay for the threads. */
#define PAR_MIN 32768
#endif
