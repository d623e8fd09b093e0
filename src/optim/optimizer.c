/* The optimizer interface: the per-tensor state, and the dispatch of each tensor to its rule (docs/rules.md,
 * section 1 decides which), read from the optimizer's descriptor (optimizers.c). */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "optim/rules.h"
#include "util/alloc.h"
#include "util/error.h"

struct nb_optimizer {
    nb_optim_params p;
    nb_optim_params aux_p; /* p with the aux betas as beta1, beta2: the auxiliary AdamW's */
    const nb_optimizer_desc *desc;
    const nb_backend *be;  /* runs the rules' products (Muon's, NorMuon's, SOAP's): the stage's */
    int n_tensors;
    tensor_state *ts;
    scratch *s;          /* one per thread: matrix rules run in parallel over tensors */
    int n_scratch;
    size_t scratch_sizes[SCRATCH_FLOATS], scratch_side2, scratch_bf16;
    int bf16;            /* nb_optimizer_set_precision: Muon's and NorMuon's products in bf16 */
    int *by_cost;        /* the matrix rules' tensors, costliest first (n_matrix of them) */
    int n_matrix;
    long steps;
    float *host_io;      /* a device's stage with rules on the host: per thread, g, w and d of its largest such tensor */
    size_t host_io_size; /* floats of one thread's g (and of w, and of d) there */
    int host_io_threads; /* the threads host_io has room for */
    char **state_names;  /* "optimizer.buffer:tensor" for each enumerated buffer (the rule's optimizer) */
    int n_states;
};

/* The rule that takes t: the optimizer's own, or the auxiliary AdamW for what its rule does not take (and
 * for a matrix-group tensor that is not 2-D, which no matrix rule is written for). */
static const nb_optimizer_desc *rule_for(const nb_optimizer_desc *own, const nb_tensor *t) {
    const nb_optimizer_desc *adamw = nb_optimizer_desc_of(NB_OPT_ADAMW);
    if (t->group == NB_GROUP_MATRIX && t->ndim != 2) return adamw;
    if (own->rule->matrices_only && t->group != NB_GROUP_MATRIX) return adamw;
    return own;
}

/* The length of a state buffer of t; 0: absent. */
static size_t buffer_length(state_size size, const nb_tensor *t, const nb_optim_params *p) {
    const size_t rows = (size_t)t->shape[0], cols = (size_t)t->shape[1];
    switch (size) {
    case STATE_PER_VALUE: return t->numel;
    case STATE_PER_ROW: return rows;
    case STATE_PRECOND_LEFT: return t->shape[0] <= p->max_precond_dim ? rows * rows : 0;
    case STATE_PRECOND_RIGHT: return t->shape[1] <= p->max_precond_dim ? cols * cols : 0;
    }
    return 0;
}

static void scratch_free(scratch *s) {
    for (int i = 0; i < SCRATCH_FLOATS; i++) free(s->f[i]);
    for (int i = 0; i < SCRATCH_DOUBLES; i++) free(s->d[i]);
    free(s->h);
}

/* A state buffer in the backend's memory where it is a device's, else the host's. */
static float *state_alloc(const nb_backend *be, size_t n, const char *what) {
    return be->device_memory ? nb_backend_alloc(be, sizeof(float) * n, what) : nb_calloc(n, sizeof(float), what);
}

static void state_free(const nb_backend *be, float *p) {
    if (be && be->device_memory) nb_backend_free(be, p);
    else free(p);
}

void nb_optimizer_free(nb_optimizer *o) {
    if (!o) return;
    for (int i = 0; i < o->n_tensors; i++)
        for (int b = 0; b < o->ts[i].n_buf; b++) state_free(o->ts[i].on_host ? NULL : o->be, o->ts[i].buf[b]);
    free(o->host_io);
    for (int k = 0; k < o->n_scratch; k++) scratch_free(&o->s[k]);
    free(o->s);
    for (int i = 0; i < o->n_states; i++) free(o->state_names[i]);
    free(o->state_names);
    free(o->by_cost);
    free(o->ts);
    free(o);
}

static int per_matrix(const tensor_state *ts) { return ts->opt->rule->per_matrix; }

/* Scratch for the largest matrix of the per-matrix rules: Muon and NorMuon need 2 matrices and 2 r x r
 * blocks (and, under bf16, a matrix and an r x r block of bf16), SOAP 2 matrices, an n x n float and two
 * n x n doubles for its largest preconditioner (an n x n buffer). Floats into sizes[SCRATCH_FLOATS], doubles
 * per array into *side2, bf16 values into *bf16_out. */
static void scratch_sizes(const tensor_state *ts, int n_tensors, size_t sizes[SCRATCH_FLOATS], size_t *side2_out,
                          size_t *bf16_out) {
    size_t mat = 1, square = 1, side2 = 1, bf16 = 1;
    for (int i = 0; i < n_tensors; i++) {
        const nb_tensor *t = ts[i].t;
        if (!per_matrix(&ts[i])) continue;
        size_t r = (size_t)t->shape[0], c = (size_t)t->shape[1], small = r < c ? r : c;
        mat = t->numel > mat ? t->numel : mat;
        square = 2 * small * small > square ? 2 * small * small : square;
        if (t->numel + small * small > bf16) bf16 = t->numel + small * small;
        for (int b = 0; b < ts[i].n_buf; b++) {
            const state_size size = ts[i].opt->rule->buffers[b].size;
            const int precond = size == STATE_PRECOND_LEFT || size == STATE_PRECOND_RIGHT;
            if (precond && ts[i].buf_len[b] > side2) side2 = ts[i].buf_len[b];
        }
    }
    sizes[SCRATCH_MATRIX] = mat;
    sizes[SCRATCH_MATRIX_OR_PRECOND] = mat > side2 ? mat : side2;
    sizes[SCRATCH_NEXT_MATRIX] = mat;
    sizes[SCRATCH_GRAM] = square;
    *side2_out = side2;
    *bf16_out = bf16;
}

static void size_scratch(nb_optimizer *o) {
    scratch_sizes(o->ts, o->n_tensors, o->scratch_sizes, &o->scratch_side2, &o->scratch_bf16);
}

/* Bytes of one thread's scratch (ensure_scratch allocates these). */
static size_t scratch_bytes_per_thread(const size_t sizes[SCRATCH_FLOATS], size_t side2, size_t bf16) {
    size_t floats = 0;
    for (int i = 0; i < SCRATCH_FLOATS; i++) floats += sizes[i];
    return sizeof(float) * floats + SCRATCH_DOUBLES * sizeof(double) * side2 +
           sizeof(nb_bf16) * bf16;
}

/* A matrix rule's work on t: about rows x cols x min(rows, cols) (Newton-Schulz's and SOAP's products). */
static double matrix_cost(const nb_tensor *t) {
    const double r = t->shape[0], c = t->shape[1];
    return r * c * (r < c ? r : c);
}

typedef struct {
    double cost;
    int index;
} costed;

static int costlier_first(const void *a, const void *b) {
    const costed *x = a, *y = b;
    return x->cost > y->cost ? -1 : x->cost < y->cost ? 1 : x->index - y->index;
}

/* The order in which the matrices are handed to the threads: costliest first, so that the last ones to
 * start are the cheapest and the threads finish together (each matrix's result does not depend on it). */
static int order_by_cost(nb_optimizer *o) {
    costed *c = nb_calloc((size_t)o->n_tensors, sizeof(costed), "the optimizer's order of matrices");
    o->by_cost = nb_calloc((size_t)o->n_tensors, sizeof(int), "the optimizer's order of matrices");
    if (!c || !o->by_cost) {
        free(c);
        return -1;
    }
    for (int i = 0; i < o->n_tensors; i++)
        if (per_matrix(&o->ts[i])) c[o->n_matrix++] = (costed){matrix_cost(o->ts[i].t), i};
    qsort(c, (size_t)o->n_matrix, sizeof(costed), costlier_first);
    for (int k = 0; k < o->n_matrix; k++) o->by_cost[k] = c[k].index;
    free(c);
    return 0;
}

/* One thread's scratch, whole or not at all: a scratch that is counted is always complete, so that a
 * step after a failed one never reads a missing buffer. */
static int scratch_alloc(scratch *s, const nb_optimizer *o) {
    static const char what[] = "the optimizer's scratch of one thread";
    int ok = 1;
    memset(s, 0, sizeof *s);
    for (int i = 0; i < SCRATCH_FLOATS && ok; i++)
        ok = (s->f[i] = nb_alloc(sizeof(float) * o->scratch_sizes[i], what)) != NULL;
    for (int i = 0; i < SCRATCH_DOUBLES && ok; i++)
        ok = (s->d[i] = nb_alloc(sizeof(double) * o->scratch_side2, what)) != NULL;
    if (ok) ok = (s->h = nb_alloc(sizeof(nb_bf16) * o->scratch_bf16, what)) != NULL;
    if (!ok) scratch_free(s);
    return ok ? 0 : -1;
}

/* Makes sure there is one scratch per thread (the thread count can change between steps). */
static int ensure_scratch(nb_optimizer *o, int threads) {
    if (threads <= o->n_scratch) return 0;
    scratch *grown = nb_realloc(o->s, sizeof(scratch) * (size_t)threads, "the optimizer's table of scratch");
    if (!grown) return -1;
    o->s = grown;
    for (int k = o->n_scratch; k < threads; k++) {
        if (scratch_alloc(&o->s[k], o)) return -1;
        o->n_scratch = k + 1;
    }
    return 0;
}

/* Room in host_io for `threads` threads' g, w and d (none where no rule runs on the host). */
static int ensure_host_io(nb_optimizer *o, int threads) {
    if (!o->host_io_size || threads <= o->host_io_threads) return 0;
    float *grown = nb_calloc(3 * o->host_io_size * (size_t)threads, sizeof(float), "a device's rule on the host: g, w, d");
    if (!grown) return -1;
    free(o->host_io);
    o->host_io = grown, o->host_io_threads = threads;
    return 0;
}

/* Which rule takes t, and its buffers' lengths (nothing allocated). */
static void plan_tensor(tensor_state *ts, const nb_optim_params *p, const nb_tensor *t) {
    ts->t = t;
    ts->opt = rule_for(nb_optimizer_desc_of(p->kind), t);
    ts->n_buf = 0;
    for (const state_buffer *b = ts->opt->rule->buffers; ts->n_buf < MAX_BUFFERS && b->name; b++)
        ts->buf_len[ts->n_buf++] = buffer_length(b->size, t, p);
}

size_t nb_optimizer_state_bytes(const nb_optim_params *p, const nb_tensor *tensors, int n_tensors,
                                size_t *scratch_per_thread) {
    tensor_state *ts = calloc((size_t)(n_tensors ? n_tensors : 1), sizeof *ts);
    size_t state = 0, sizes[SCRATCH_FLOATS], side2, bf16;
    if (!ts || !nb_optimizer_desc_of(p->kind)) {
        free(ts);
        return (size_t)-1;
    }
    for (int i = 0; i < n_tensors; i++) {
        plan_tensor(&ts[i], p, &tensors[i]);
        for (int b = 0; b < ts[i].n_buf; b++) state += sizeof(float) * ts[i].buf_len[b];
    }
    scratch_sizes(ts, n_tensors, sizes, &side2, &bf16);
    if (scratch_per_thread) *scratch_per_thread = scratch_bytes_per_thread(sizes, side2, bf16);
    free(ts);
    return state;
}

/* The names of the `total` state buffers, "optimizer.buffer:tensor" (the optimizer whose rule keeps it),
 * in the order of nb_optimizer_state: checkpoints store them. */
static int name_states(nb_optimizer *o, int total) {
    if (!(o->state_names = nb_calloc((size_t)total, sizeof(char *), "the optimizer state's names"))) return -1;
    for (int i = 0; i < o->n_tensors; i++) {
        const tensor_state *ts = &o->ts[i];
        for (int b = 0; b < ts->n_buf; b++) {
            if (!ts->buf_len[b]) continue;
            char name[160];
            snprintf(name, sizeof name, "%s.%s:%s", ts->opt->name, ts->opt->rule->buffers[b].name, ts->t->name);
            char *copy = nb_alloc(strlen(name) + 1, "an optimizer state's name");
            if (!copy) return -1;
            o->state_names[o->n_states++] = memcpy(copy, name, strlen(name) + 1);
        }
    }
    return 0;
}

int nb_optimizer_create(nb_optimizer **out, const nb_optim_params *p, const nb_tensor *tensors, int n_tensors,
                        size_t n_params, const nb_backend *backend) {
    *out = NULL;
    if (!backend && !(backend = nb_backend_default())) return nb_fail("the default backend could not be opened: %s", nb_last_error());
    if (nb_optim_validate(p)) return -1;
    nb_optimizer *o = nb_calloc(1, sizeof *o, "an optimizer");
    if (!o) return -1;
    o->p = *p;
    o->aux_p = *p;
    o->aux_p.beta1 = p->aux_beta1;
    o->aux_p.beta2 = p->aux_beta2;
    o->desc = nb_optimizer_desc_of(p->kind);
    o->be = backend;
    o->ts = nb_calloc((size_t)n_tensors, sizeof(tensor_state), "the optimizer's table of tensors");
    if (!o->ts) { nb_optimizer_free(o); return -1; }
    o->n_tensors = n_tensors;  /* once the table exists, which freeing reads */
    int total = 0;
    size_t host_io_size = 0;
    for (int i = 0; i < n_tensors; i++) {
        tensor_state *ts = &o->ts[i];
        const nb_tensor *t = &tensors[i];
        if (t->offset + t->numel > n_params) {
            nb_optimizer_free(o);
            return nb_fail("tensor %s lies outside the parameter buffer", t->name);
        }
        plan_tensor(ts, p, t);
        if (backend->device_memory && !nb_rules_of(backend)) {
            nb_fail("%s on the %s backend's memory: the backend has no optimizer rules", ts->opt->name, backend->name);
            nb_optimizer_free(o);  /* after the message, which reads ts */
            return -1;
        }
        ts->on_host = backend->device_memory && ts->opt->rule == &soap_rule;
        if (ts->on_host && host_io_size < t->numel) host_io_size = t->numel;
        for (int b = 0; b < ts->n_buf; b++) {
            char what[160];
            snprintf(what, sizeof what, "the optimizer state of %s", t->name);
            if (ts->buf_len[b] &&
                !(ts->buf[b] = ts->on_host ? nb_calloc(ts->buf_len[b], sizeof(float), what)
                                           : state_alloc(backend, ts->buf_len[b], what))) {
                nb_optimizer_free(o);
                return -1;
            }
            total += ts->buf_len[b] > 0;
        }
    }
    size_scratch(o);
    o->host_io_size = host_io_size;
    if (ensure_host_io(o, omp_get_max_threads())) {
        nb_optimizer_free(o);
        return -1;
    }
    if (name_states(o, total) || order_by_cost(o) || ensure_scratch(o, omp_get_max_threads())) {
        nb_optimizer_free(o);
        return -1;  /* the allocation that failed said what */
    }
    *out = o;
    return 0;
}

/* A device's tensor whose rule runs on the host: g and w copied over, the rule on the host's products (the
 * default backend), d copied back. */
static int step_on_host(tensor_state *ts, const rule_ctx *ctx, float *io, const float *g, const float *w, float *d) {
    const size_t n = ts->t->numel, bytes = sizeof(float) * n;
    float *hg = io, *hw = io + n, *hd = io + 2 * n;
    nb_backend_to_host(ctx->be, hg, g, bytes);
    nb_backend_to_host(ctx->be, hw, w, bytes);
    rule_ctx host = *ctx;
    host.be = nb_backend_default();
    if (!host.be) return -1;
    const int rc = ts->opt->rule->step(ts, &host, hg, hw, hd);
    if (!rc) nb_backend_from_host(ctx->be, d, hd, bytes);
    return rc;
}

/* One tensor's step with its rule: on the host, or on the device's memory by the backend's table. */
static int tensor_step(tensor_state *ts, const rule_ctx *ctx, float *io, const float *grads, const float *w, float *d) {
    const size_t off = ts->t->offset;
    if (ts->on_host) return step_on_host(ts, ctx, io, grads + off, w + off, d + off);
    if (ctx->be->device_memory) return nb_rules_of(ctx->be)->step(ctx->be, ts->opt->rule, ts, ctx, grads + off, w + off, d + off);
    return ts->opt->rule->step(ts, ctx, grads + off, w + off, d + off);
}

int nb_optimizer_step(nb_optimizer *o, const float *grads, const float *w, float lr, float aux_lr, float *d) {
    /* The per-matrix rules' tensors (Muon's, NorMuon's, SOAP's) run in parallel, one tensor per thread with
     * its own scratch (their GEMMs then run on one thread each, so the result does not depend on the thread
     * count); the element-wise rules run one tensor after another, each loop parallel inside. */
    int threads = omp_get_max_threads();
    if (ensure_scratch(o, threads)) return -1;
    char why[1024] = "";  /* a failing tensor's message, which is its thread's nb_last_error */
    /* On a device's memory one matrix after another: its rules share the device's scratch and stream; a rule
     * that runs on the host there (SOAP) runs as on the host, one tensor per thread with its own copies. */
    if (ensure_host_io(o, threads)) return -1;
#pragma omp parallel for schedule(dynamic, 1) if (!o->be->device_memory || o->host_io)
    for (int k = 0; k < o->n_matrix; k++) {
        const int i = o->by_cost[k];
        tensor_state *ts = &o->ts[i];
        rule_ctx ctx = {&o->p, lr, o->steps, &o->s[omp_get_thread_num()], o->bf16, o->be};
        float *io = o->host_io ? o->host_io + (size_t)omp_get_thread_num() * 3 * o->host_io_size : NULL;
        if (tensor_step(ts, &ctx, io, grads, w, d)) {
            /* SOAP: out of memory, or LAPACK failing on a finite symmetric matrix (only with NaN/Inf
             * gradients, which the trainer stops on before they reach the optimizer). No thread may leave
             * the loop: the step returns the error after it. */
#pragma omp critical(nb_optimizer_failure)
            snprintf(why, sizeof why, "%s: %s (tensor %s)", ts->opt->name, nb_last_error(), ts->t->name);
        }
    }
    if (why[0]) return nb_fail("%s", why);
    const rule_ctx main_ctx = {&o->p, lr, o->steps, &o->s[0], o->bf16, o->be},
                   aux_ctx = {&o->aux_p, aux_lr, o->steps, &o->s[0], o->bf16, o->be};
    for (int i = 0; i < o->n_tensors; i++) {
        tensor_state *ts = &o->ts[i];
        if (per_matrix(ts)) continue;
        if (tensor_step(ts, ts->opt == o->desc ? &main_ctx : &aux_ctx, o->host_io, grads, w, d))
            return nb_fail("%s: %s (tensor %s)", ts->opt->name, nb_last_error(), ts->t->name);
    }
    if (nb_backend_check(o->be)) return nb_fail("optimizer step: %s", nb_last_error());
    o->steps++;
    return 0;
}

int nb_optimizer_set_precision(nb_optimizer *o, nb_precision p) {
    if (p != NB_PRECISION_FP32 && p != NB_PRECISION_BF16)
        return nb_fail("optimizer precision %s: expected fp32 or bf16", nb_precision_name(p));
    o->bf16 = p == NB_PRECISION_BF16;
    return 0;
}

long nb_optimizer_steps(const nb_optimizer *o) { return o->steps; }

void nb_optimizer_get_counts(const nb_optimizer *o, long *counts) {
    for (int i = 0; i < o->n_tensors; i++) counts[i] = o->ts[i].count;
}

void nb_optimizer_restore(nb_optimizer *o, const long *counts, long steps) {
    for (int i = 0; i < o->n_tensors; i++) o->ts[i].count = counts[i];
    o->steps = steps;
}
int nb_optimizer_state_count(const nb_optimizer *o) { return o->n_states; }

int nb_optimizer_state(const nb_optimizer *o, int i, const char **name, float **data, size_t *numel) {
    if (i < 0 || i >= o->n_states) return nb_fail("optimizer state %d out of range [0, %d)", i, o->n_states);
    int k = 0;
    for (int ti = 0; ti < o->n_tensors; ti++)
        for (int b = 0; b < o->ts[ti].n_buf; b++) {
            if (!o->ts[ti].buf_len[b]) continue;
            if (k++ == i) {
                *name = o->state_names[i];
                *data = o->ts[ti].buf[b];
                *numel = o->ts[ti].buf_len[b];
                return 0;
            }
        }
    return nb_fail("optimizer state %d not found", i);
}

int nb_optimizer_state_on_device(const nb_optimizer *o, int i) {
    int k = 0;
    for (int ti = 0; ti < o->n_tensors; ti++)
        for (int b = 0; b < o->ts[ti].n_buf; b++) {
            if (!o->ts[ti].buf_len[b]) continue;
            if (k++ == i) return o->be->device_memory && !o->ts[ti].on_host;
        }
    return 0;
}

/* The host's memory where be is NULL: the default backend's arithmetic (the CPU's, nb_cpu_sum_squares). */
static const nb_backend *memory_of(const nb_backend *be) { return be ? be : nb_backend_default(); }

double nb_grad_sum_squares(const nb_backend *be, const float *buf, const nb_tensor *tensors, int n_tensors) {
    double s = 0.0;
    for (int i = 0; i < n_tensors; i++)
        if (!tensors[i].tied_copy) s += nb_backend_sum_squares(memory_of(be), buf + tensors[i].offset, NULL, tensors[i].numel);
    return s;
}

double nb_distance_sq(const nb_backend *be, const float *a, const float *b, const nb_tensor *tensors, int n_tensors) {
    double s = 0.0;
    for (int i = 0; i < n_tensors; i++)
        if (!tensors[i].tied_copy)
            s += nb_backend_sum_squares(memory_of(be), a + tensors[i].offset, b + tensors[i].offset, tensors[i].numel);
    return s;
}

void nb_scale(const nb_backend *be, float *buf, size_t n, float scale) { nb_backend_scale(memory_of(be), buf, n, scale); }
