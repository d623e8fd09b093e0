/* The optimizer interface: hyperparameters and their checks, the per-tensor state, and the
 * dispatch of each tensor to its rule (docs/rules.md, section 1 decides which). */
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "optim/rules.h"
#include "util/alloc.h"
#include "util/error.h"

static const char *const names[NB_OPT_COUNT] = {"sgd", "adamw", "muon", "lion", "adan", "mars", "soap", "normuon"};

const char *nb_optimizer_name(nb_optimizer_kind kind) {
    return kind >= 0 && kind < NB_OPT_COUNT ? names[kind] : "unknown";
}

int nb_optimizer_parse(const char *name, nb_optimizer_kind *out) {
    for (int k = 0; k < NB_OPT_COUNT; k++)
        if (!strcmp(name, names[k])) {
            *out = (nb_optimizer_kind)k;
            return 0;
        }
    return nb_fail("--optimizer '%s': expected one of sgd, adamw, muon, lion, adan, mars, soap, normuon", name);
}

nb_optim_params nb_optim_defaults(nb_optimizer_kind kind) {
    nb_optim_params p = {
        .kind = kind, .beta1 = 0.9f, .beta2 = 0.95f, .beta3 = 0.0f, .eps = 1e-8f, .weight_decay = 0.0f,
        .momentum = 0.9f, .nesterov = 0, .ns_steps = 5, .gamma = 0.025f, .precond_every = 10,
        .max_precond_dim = 10000, .aux_beta1 = 0.9f, .aux_beta2 = 0.95f,
    };
    switch (kind) {
    case NB_OPT_MUON: p.momentum = 0.95f; p.nesterov = 1; break;
    case NB_OPT_NORMUON: p.momentum = 0.95f; p.nesterov = 1; p.beta2 = 0.95f; break;
    case NB_OPT_LION: p.beta1 = 0.9f; p.beta2 = 0.99f; break;
    case NB_OPT_ADAN: p.beta1 = 0.98f; p.beta2 = 0.92f; p.beta3 = 0.99f; break;
    case NB_OPT_MARS: p.beta1 = 0.95f; p.beta2 = 0.99f; break;
    case NB_OPT_SOAP: p.beta1 = 0.95f; p.beta2 = 0.95f; break;
    default: break;
    }
    return p;
}

static int check_beta(const char *flag, float b) {
    if (!(b >= 0.0f && b < 1.0f)) return nb_fail("%s %g: expected a number in [0, 1)", flag, b);
    return 0;
}

int nb_optim_validate(const nb_optim_params *p) {
    if (p->kind < 0 || p->kind >= NB_OPT_COUNT) return nb_fail("unknown optimizer kind %d", (int)p->kind);
    if (check_beta("--beta1", p->beta1) || check_beta("--beta2", p->beta2)) return -1;
    if (p->kind == NB_OPT_ADAN && check_beta("--beta3", p->beta3)) return -1;
    if (check_beta("--momentum", p->momentum)) return -1;
    if (check_beta("--aux-beta1", p->aux_beta1) || check_beta("--aux-beta2", p->aux_beta2)) return -1;
    if (!(p->eps > 0.0f) || !isfinite(p->eps)) return nb_fail("--eps %g: expected a positive number", p->eps);
    if (!(p->weight_decay >= 0.0f) || !isfinite(p->weight_decay))
        return nb_fail("--wd %g: expected a number >= 0", p->weight_decay);
    if (p->ns_steps < 1 || p->ns_steps > 100) return nb_fail("--ns-steps %d: expected 1 to 100", p->ns_steps);
    if (!(p->gamma >= 0.0f) || !isfinite(p->gamma)) return nb_fail("--gamma %g: expected a number >= 0", p->gamma);
    if (p->precond_every < 1) return nb_fail("--precond-every %d: expected >= 1", p->precond_every);
    if (p->max_precond_dim < 1) return nb_fail("--max-precond-dim %d: expected >= 1", p->max_precond_dim);
    return 0;
}

struct nb_optimizer {
    nb_optim_params p;
    const nb_backend *be;  /* runs the rules' products (Muon's, NorMuon's, SOAP's): the stage's */
    int n_tensors;
    tensor_state *ts;
    scratch *s;          /* one per thread: matrix rules run in parallel over tensors */
    int n_scratch;
    size_t scratch_sizes[4], scratch_side2, scratch_bf16;
    int bf16;            /* nb_optimizer_set_precision: Muon's and NorMuon's products in bf16 */
    int *by_cost;        /* the matrix rules' tensors, costliest first (n_matrix of them) */
    int n_matrix;
    long steps;
    char **state_names;  /* "rule.buffer:tensor" for each enumerated buffer */
    int n_states;
};

static rule_kind rule_of(nb_optimizer_kind kind, nb_group group) {
    int matrix_only = kind == NB_OPT_MUON || kind == NB_OPT_NORMUON || kind == NB_OPT_SOAP || kind == NB_OPT_MARS;
    if (matrix_only && group != NB_GROUP_MATRIX) return RULE_ADAMW;
    static const rule_kind rules[NB_OPT_COUNT] = {RULE_SGD, RULE_ADAMW, RULE_MUON, RULE_LION,
                                                  RULE_ADAN, RULE_MARS, RULE_SOAP, RULE_NORMUON};
    return rules[kind];
}

static const char *const rule_names[] = {"sgd", "adamw", "muon", "lion", "adan", "mars", "soap", "normuon"};

int rule_buffers(rule_kind rule, const nb_tensor *t, const nb_optim_params *p, const char **bn, size_t *len) {
    size_t n = t->numel;
    switch (rule) {
    case RULE_SGD: case RULE_MUON: case RULE_LION:
        bn[0] = "m"; len[0] = n;
        return 1;
    case RULE_ADAMW:
        bn[0] = "m"; bn[1] = "v"; len[0] = len[1] = n;
        return 2;
    case RULE_ADAN:
        bn[0] = "m"; bn[1] = "v"; bn[2] = "n"; bn[3] = "g_prev";
        len[0] = len[1] = len[2] = len[3] = n;
        return 4;
    case RULE_NORMUON:
        bn[0] = "m"; bn[1] = "s"; len[0] = n; len[1] = (size_t)t->shape[0];
        return 2;
    case RULE_MARS:
        bn[0] = "m"; bn[1] = "v"; bn[2] = "g_prev"; len[0] = len[1] = len[2] = n;
        return 3;
    case RULE_SOAP: {
        size_t r = (size_t)t->shape[0], c = (size_t)t->shape[1];
        int left = t->shape[0] <= p->max_precond_dim, right = t->shape[1] <= p->max_precond_dim;
        bn[0] = "m"; bn[1] = "v"; bn[2] = "L"; bn[3] = "R"; bn[4] = "QL"; bn[5] = "QR";
        len[0] = len[1] = n;
        len[2] = len[4] = left ? r * r : 0;
        len[3] = len[5] = right ? c * c : 0;
        return 6;
    }
    }
    return 0;
}

static void scratch_free(scratch *s) {
    for (int i = 0; i < 4; i++) free(s->f[i]);
    for (int i = 0; i < 3; i++) free(s->d[i]);
    free(s->h);
}

void nb_optimizer_free(nb_optimizer *o) {
    if (!o) return;
    for (int i = 0; i < o->n_tensors; i++)
        for (int b = 0; b < o->ts[i].n_buf; b++) free(o->ts[i].buf[b]);
    for (int k = 0; k < o->n_scratch; k++) scratch_free(&o->s[k]);
    free(o->s);
    for (int i = 0; i < o->n_states; i++) free(o->state_names[i]);
    free(o->state_names);
    free(o->by_cost);
    free(o->ts);
    free(o);
}

static int is_matrix_rule(rule_kind r) { return r == RULE_MUON || r == RULE_NORMUON || r == RULE_SOAP; }

/* Scratch for the largest matrix: Muon and NorMuon need 2 matrices and 2 r x r blocks (and, under bf16,
 * a matrix and an r x r block of bf16), SOAP 2 matrices, an n x n float and two n x n doubles for its
 * preconditioned sides. Floats into sizes[4], doubles per array into *side2, bf16 values into *bf16_out. */
static void scratch_sizes(const tensor_state *ts, int n_tensors, size_t sizes[4], size_t *side2_out,
                          size_t *bf16_out) {
    size_t mat = 1, square = 1, side2 = 1, bf16 = 1;
    for (int i = 0; i < n_tensors; i++) {
        const nb_tensor *t = ts[i].t;
        if (!is_matrix_rule(ts[i].rule)) continue;
        size_t r = (size_t)t->shape[0], c = (size_t)t->shape[1], small = r < c ? r : c;
        mat = t->numel > mat ? t->numel : mat;
        square = 2 * small * small > square ? 2 * small * small : square;
        if (t->numel + small * small > bf16) bf16 = t->numel + small * small;
        if (ts[i].rule == RULE_SOAP) {
            if (ts[i].left && r * r > side2) side2 = r * r;
            if (ts[i].right && c * c > side2) side2 = c * c;
        }
    }
    const size_t s4[4] = {mat, mat > side2 ? mat : side2, mat, square};
    memcpy(sizes, s4, sizeof s4);
    *side2_out = side2;
    *bf16_out = bf16;
}

static void size_scratch(nb_optimizer *o) {
    scratch_sizes(o->ts, o->n_tensors, o->scratch_sizes, &o->scratch_side2, &o->scratch_bf16);
}

/* Bytes of one thread's scratch (ensure_scratch allocates these). */
static size_t scratch_bytes_per_thread(const size_t sizes[4], size_t side2, size_t bf16) {
    return sizeof(float) * (sizes[0] + sizes[1] + sizes[2] + sizes[3]) + 2 * sizeof(double) * side2 +
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
        if (is_matrix_rule(o->ts[i].rule)) c[o->n_matrix++] = (costed){matrix_cost(o->ts[i].t), i};
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
    for (int i = 0; i < 4 && ok; i++) ok = (s->f[i] = nb_alloc(sizeof(float) * o->scratch_sizes[i], what)) != NULL;
    for (int i = 0; i < 2 && ok; i++) ok = (s->d[i] = nb_alloc(sizeof(double) * o->scratch_side2, what)) != NULL;
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

/* Which rule takes t, and its buffers' names and lengths (nothing allocated). */
static void plan_tensor(tensor_state *ts, const nb_optim_params *p, const nb_tensor *t) {
    ts->t = t;
    ts->rule = rule_of(p->kind, t->group);
    if (t->group == NB_GROUP_MATRIX && t->ndim != 2) ts->rule = RULE_ADAMW;
    ts->n_buf = rule_buffers(ts->rule, t, p, ts->buf_name, ts->buf_len);
    ts->left = ts->rule == RULE_SOAP && ts->buf_len[2] > 0;
    ts->right = ts->rule == RULE_SOAP && ts->buf_len[3] > 0;
}

size_t nb_optimizer_state_bytes(const nb_optim_params *p, const nb_tensor *tensors, int n_tensors,
                                size_t *scratch_per_thread) {
    tensor_state *ts = calloc((size_t)(n_tensors ? n_tensors : 1), sizeof *ts);
    size_t state = 0, sizes[4], side2, bf16;
    if (!ts) return (size_t)-1;
    for (int i = 0; i < n_tensors; i++) {
        plan_tensor(&ts[i], p, &tensors[i]);
        for (int b = 0; b < ts[i].n_buf; b++) state += sizeof(float) * ts[i].buf_len[b];
    }
    scratch_sizes(ts, n_tensors, sizes, &side2, &bf16);
    if (scratch_per_thread) *scratch_per_thread = scratch_bytes_per_thread(sizes, side2, bf16);
    free(ts);
    return state;
}

/* The names of the `total` state buffers, "rule.buffer:tensor", in the order of nb_optimizer_state. */
static int name_states(nb_optimizer *o, int total) {
    if (!(o->state_names = nb_calloc((size_t)total, sizeof(char *), "the optimizer state's names"))) return -1;
    for (int i = 0; i < o->n_tensors; i++)
        for (int b = 0; b < o->ts[i].n_buf; b++) {
            if (!o->ts[i].buf_len[b]) continue;
            char name[160];
            snprintf(name, sizeof name, "%s.%s:%s", rule_names[o->ts[i].rule], o->ts[i].buf_name[b], o->ts[i].t->name);
            char *copy = nb_alloc(strlen(name) + 1, "an optimizer state's name");
            if (!copy) return -1;
            o->state_names[o->n_states++] = memcpy(copy, name, strlen(name) + 1);
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
    o->be = backend;
    o->ts = nb_calloc((size_t)n_tensors, sizeof(tensor_state), "the optimizer's table of tensors");
    if (!o->ts) { nb_optimizer_free(o); return -1; }
    o->n_tensors = n_tensors;  /* once the table exists, which freeing reads */
    int total = 0;
    for (int i = 0; i < n_tensors; i++) {
        tensor_state *ts = &o->ts[i];
        const nb_tensor *t = &tensors[i];
        if (t->offset + t->numel > n_params) {
            nb_optimizer_free(o);
            return nb_fail("tensor %s lies outside the parameter buffer", t->name);
        }
        plan_tensor(ts, p, t);
        for (int b = 0; b < ts->n_buf; b++) {
            char what[160];
            snprintf(what, sizeof what, "the optimizer state of %s", t->name);
            if (ts->buf_len[b] && !(ts->buf[b] = nb_calloc(ts->buf_len[b], sizeof(float), what))) {
                nb_optimizer_free(o);
                return -1;
            }
            total += ts->buf_len[b] > 0;
        }
    }
    size_scratch(o);
    if (name_states(o, total) || order_by_cost(o) || ensure_scratch(o, omp_get_max_threads())) {
        nb_optimizer_free(o);
        return -1;  /* the allocation that failed said what */
    }
    *out = o;
    return 0;
}

/* One tensor's step with its rule. */
static int tensor_step(nb_optimizer *o, tensor_state *ts, const rule_ctx *main_ctx, const rule_ctx *aux_ctx,
                       const float *grads, const float *w, float *d) {
    size_t off = ts->t->offset;
    const float *g = grads + off, *wt = w + off;
    float *dt = d + off;
    switch (ts->rule) {
    case RULE_SGD: sgd_step(ts, main_ctx, g, wt, dt); break;
    case RULE_ADAMW:
        if (o->p.kind == NB_OPT_ADAMW) adamw_step(ts, main_ctx, o->p.beta1, o->p.beta2, g, wt, dt);
        else adamw_step(ts, aux_ctx, o->p.aux_beta1, o->p.aux_beta2, g, wt, dt);
        break;
    case RULE_MUON: muon_step(ts, main_ctx, g, wt, dt); break;
    case RULE_NORMUON: normuon_step(ts, main_ctx, g, wt, dt); break;
    case RULE_LION: lion_step(ts, main_ctx, g, wt, dt); break;
    case RULE_ADAN: adan_step(ts, main_ctx, g, wt, dt); break;
    case RULE_MARS: mars_step(ts, main_ctx, g, wt, dt); break;
    case RULE_SOAP: return soap_step(ts, main_ctx, g, wt, dt);
    }
    return 0;
}

int nb_optimizer_step(nb_optimizer *o, const float *grads, const float *w, float lr, float aux_lr, float *d) {
    /* Muon's, NorMuon's and SOAP's matrices run in parallel, one tensor per thread with its own scratch (their
     * GEMMs then run on one thread each, so the result does not depend on the thread count); the
     * element-wise rules run one tensor after another, each loop parallel inside. */
    int threads = omp_get_max_threads();
    if (ensure_scratch(o, threads)) return -1;
    char why[1024] = "";  /* a failing tensor's message, which is its thread's nb_last_error */
#pragma omp parallel for schedule(dynamic, 1)
    for (int k = 0; k < o->n_matrix; k++) {
        const int i = o->by_cost[k];
        tensor_state *ts = &o->ts[i];
        rule_ctx ctx = {&o->p, lr, o->steps, &o->s[omp_get_thread_num()], o->bf16, o->be};
        if (tensor_step(o, ts, &ctx, &ctx, grads, w, d)) {
            /* SOAP: out of memory, or LAPACK failing on a finite symmetric matrix (only with NaN/Inf
             * gradients, which the trainer stops on before they reach the optimizer). No thread may leave
             * the loop: the step returns the error after it. */
#pragma omp critical(nb_optimizer_failure)
            snprintf(why, sizeof why, "SOAP: %s (tensor %s)", nb_last_error(), ts->t->name);
        }
    }
    if (why[0]) return nb_fail("%s", why);
    rule_ctx main_ctx = {&o->p, lr, o->steps, &o->s[0], o->bf16, o->be},
             aux_ctx = {&o->p, aux_lr, o->steps, &o->s[0], o->bf16, o->be};
    for (int i = 0; i < o->n_tensors; i++)
        if (!is_matrix_rule(o->ts[i].rule)) tensor_step(o, &o->ts[i], &main_ctx, &aux_ctx, grads, w, d);
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

/* Sum of squares in double with 8 independent partial sums (combined in a fixed order): the
 * compiler vectorizes it without reassociating anything, so the result is the same on every run. */
static double combine(const double lane[8]) {
    return ((lane[0] + lane[1]) + (lane[2] + lane[3])) + ((lane[4] + lane[5]) + (lane[6] + lane[7]));
}

static double sum_squares(const float *x, size_t n) {
    double lane[8] = {0};
    size_t k = 0;
    for (; k + 8 <= n; k += 8)
        for (int j = 0; j < 8; j++) lane[j] += (double)x[k + j] * x[k + j];
    for (; k < n; k++) lane[k % 8] += (double)x[k] * x[k];
    return combine(lane);
}

static double sum_squares_diff(const float *x, const float *y, size_t n) {
    double lane[8] = {0};
    size_t k = 0;
    for (; k + 8 <= n; k += 8)
        for (int j = 0; j < 8; j++) lane[j] += (double)(x[k + j] - y[k + j]) * (x[k + j] - y[k + j]);
    for (; k < n; k++) lane[k % 8] += (double)(x[k] - y[k]) * (x[k] - y[k]);
    return combine(lane);
}

double nb_grad_sum_squares(const float *buf, const nb_tensor *tensors, int n_tensors) {
    double s = 0.0;
    for (int i = 0; i < n_tensors; i++)
        if (!tensors[i].tied_copy) s += sum_squares(buf + tensors[i].offset, tensors[i].numel);
    return s;
}

double nb_distance_sq(const float *a, const float *b, const nb_tensor *tensors, int n_tensors) {
    double s = 0.0;
    for (int i = 0; i < n_tensors; i++)
        if (!tensors[i].tied_copy) s += sum_squares_diff(a + tensors[i].offset, b + tensors[i].offset, tensors[i].numel);
    return s;
}

void nb_scale(float *buf, size_t n, float scale) {
#pragma omp parallel for simd schedule(static) if (n > PAR_MIN)
    for (size_t i = 0; i < n; i++) buf[i] *= scale;
}
