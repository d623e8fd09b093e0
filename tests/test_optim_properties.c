/* Closed-form properties of the optimizers that need no reference (docs/rules.md, section 2):
 * the sheet's defaults; parsing and validation errors; Lion's step is lr*{-1,0,1} plus decay;
 * Muon's orthogonalized matrix has its singular values in the band the Newton-Schulz quintic
 * reaches in 5 steps; bias correction makes the first step lr in magnitude (AdamW, Adan, MARS,
 * the auxiliary AdamW, SOAP's first Adam step); SOAP's step at t = 0 is zero; the state
 * enumeration covers every buffer with the right sizes; NorMuon's first step is Muon's with each
 * row rescaled to the same norm (and the total norm kept); the gradient-clipping helpers.
 *
 * Singular values come from LAPACK's sgesvd through its Fortran interface, from the OpenBLAS
 * the library already links (as src/util/linalg.c does), so the test needs no liblapacke. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "check.h"
#include "nobubble/common.h"
#include "nobubble/model.h"
#include "nobubble/optim.h"

/* LAPACK's Fortran interface: arguments by reference, column-major matrices. */
extern void sgesvd_(const char *jobu, const char *jobvt, const int *m, const int *n, float *a, const int *lda,
                    float *s, float *u, const int *ldu, float *vt, const int *ldvt, float *work, const int *lwork,
                    int *info);

/* The singular values (descending) of a row-major m x n matrix, which LAPACK sees as its
 * transpose (same singular values). a is overwritten. Returns LAPACK's info. */
static int singular_values(float *a, int m, int n, float *s) {
    int cm = n, cn = m, lda = n, one = 1, lwork = -1, info = 0;
    float wq = 0, dummy = 0;
    sgesvd_("N", "N", &cm, &cn, a, &lda, s, &dummy, &one, &dummy, &one, &wq, &lwork, &info);
    if (info) return info;
    lwork = (int)wq + 1;
    float *work = malloc(sizeof(float) * (size_t)lwork);
    if (!work) return -1000;
    sgesvd_("N", "N", &cm, &cn, a, &lda, s, &dummy, &one, &dummy, &one, work, &lwork, &info);
    free(work);
    return info;
}

/* ---- deterministic random numbers ---- */
static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static double urand(void) {
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return (double)((rng_state * 0x2545F4914F6CDD1Dull) >> 11) * (1.0 / 9007199254740992.0);
}
static double nrand(void) {
    double u = urand(), v = urand();
    if (u < 1e-300) u = 1e-300;
    return sqrt(-2.0 * log(u)) * cos(2.0 * M_PI * v);
}

/* ---- a small tensor table over one buffer ---- */
typedef struct {
    int n;
    nb_tensor t[8];
    size_t n_params;
} table;

static void add(table *tb, const char *name, int rows, int cols, nb_group group) {
    nb_tensor *t = &tb->t[tb->n++];
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", name);
    t->ndim = cols ? 2 : 1;
    t->shape[0] = rows;
    t->shape[1] = cols;
    t->numel = (size_t)rows * (size_t)(cols ? cols : 1);
    t->offset = tb->n_params;
    t->group = group;
    tb->n_params += t->numel;
}

/* The standard table: square, wide and tall matrices, an embedding, a gain. */
static table std_table(void) {
    table tb = { 0 };
    add(&tb, "model.layers.0.self_attn.q_proj.weight", 8, 8, NB_GROUP_MATRIX);
    add(&tb, "model.layers.0.mlp.up_proj.weight", 6, 16, NB_GROUP_MATRIX);
    add(&tb, "model.layers.0.mlp.down_proj.weight", 16, 6, NB_GROUP_MATRIX);
    add(&tb, "model.embed_tokens.weight", 7, 4, NB_GROUP_EMBED);
    add(&tb, "model.norm.weight", 9, 0, NB_GROUP_GAIN);
    return tb;
}

static const char *KIND_NAMES[] = { "sgd", "adamw", "muon", "lion", "adan", "mars", "soap", "normuon" };
_Static_assert(sizeof KIND_NAMES / sizeof KIND_NAMES[0] == NB_OPT_COUNT,
               "one per optimizer: a new one needs its value here (docs/optimizers.md)");

/* ---- defaults, parsing, validation ---- */
static void test_defaults(void) {
    nb_optim_params p;
    p = nb_optim_defaults(NB_OPT_ADAMW);
    CHECK(p.kind == NB_OPT_ADAMW && p.beta1 == 0.9f && p.beta2 == 0.95f && p.eps == 1e-8f,
          "adamw defaults (0.9, 0.95, 1e-8): %g %g %g", p.beta1, p.beta2, p.eps);
    p = nb_optim_defaults(NB_OPT_SGD);
    CHECK(p.kind == NB_OPT_SGD && p.momentum == 0.9f && p.nesterov == 0, "sgd defaults (0.9, no nesterov): %g %d",
          p.momentum, p.nesterov);
    p = nb_optim_defaults(NB_OPT_MUON);
    CHECK(p.kind == NB_OPT_MUON && p.momentum == 0.95f && p.nesterov == 1 && p.ns_steps == 5,
          "muon defaults (0.95, nesterov, 5): %g %d %d", p.momentum, p.nesterov, p.ns_steps);
    CHECK(p.aux_beta1 == 0.9f && p.aux_beta2 == 0.95f, "muon aux AdamW defaults (0.9, 0.95): %g %g", p.aux_beta1,
          p.aux_beta2);
    p = nb_optim_defaults(NB_OPT_LION);
    CHECK(p.kind == NB_OPT_LION && p.beta1 == 0.9f && p.beta2 == 0.99f, "lion defaults (0.9, 0.99): %g %g", p.beta1,
          p.beta2);
    p = nb_optim_defaults(NB_OPT_ADAN);
    CHECK(p.kind == NB_OPT_ADAN && p.beta1 == 0.98f && p.beta2 == 0.92f && p.beta3 == 0.99f,
          "adan defaults (0.98, 0.92, 0.99): %g %g %g", p.beta1, p.beta2, p.beta3);
    p = nb_optim_defaults(NB_OPT_MARS);
    CHECK(p.kind == NB_OPT_MARS && p.beta1 == 0.95f && p.beta2 == 0.99f && p.gamma == 0.025f,
          "mars defaults (0.95, 0.99, 0.025): %g %g %g", p.beta1, p.beta2, p.gamma);
    p = nb_optim_defaults(NB_OPT_SOAP);
    CHECK(p.kind == NB_OPT_SOAP && p.beta1 == 0.95f && p.beta2 == 0.95f && p.precond_every == 10 &&
          p.max_precond_dim == 10000, "soap defaults (0.95, 0.95, every 10, max dim 10000): %g %g %d %d", p.beta1,
          p.beta2, p.precond_every, p.max_precond_dim);
    p = nb_optim_defaults(NB_OPT_NORMUON);
    CHECK(p.kind == NB_OPT_NORMUON && p.momentum == 0.95f && p.nesterov == 1 && p.ns_steps == 5 && p.beta2 == 0.95f &&
          p.aux_beta1 == 0.9f && p.aux_beta2 == 0.95f,
          "normuon defaults (0.95, nesterov, 5, b2 0.95, aux 0.9, 0.95): %g %d %d %g %g %g", p.momentum, p.nesterov,
          p.ns_steps, p.beta2, p.aux_beta1, p.aux_beta2);
    for (int k = 0; k < NB_OPT_COUNT; k++) {
        p = nb_optim_defaults((nb_optimizer_kind)k);
        int rc = nb_optim_validate(&p);
        CHECK(rc == 0, "%s: the defaults validate: %s", KIND_NAMES[k], rc ? nb_last_error() : "");
    }
}

static void test_parse(void) {
    for (int k = 0; k < NB_OPT_COUNT; k++) {
        nb_optimizer_kind kind = NB_OPT_COUNT;
        int rc = nb_optimizer_parse(KIND_NAMES[k], &kind);
        CHECK(rc == 0 && kind == (nb_optimizer_kind)k, "parse '%s' -> %d (rc %d)", KIND_NAMES[k], (int)kind, rc);
        const char *name = nb_optimizer_name((nb_optimizer_kind)k);
        CHECK(name && !strcmp(name, KIND_NAMES[k]), "nb_optimizer_name(%d) = '%s'", k, name ? name : "(null)");
    }
    const char *bad[] = { "adam", "ADAMW", "", "muon2", "sgd " };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        nb_optimizer_kind kind;
        int rc = nb_optimizer_parse(bad[i], &kind);
        CHECK(rc != 0, "parse '%s' is rejected", bad[i]);
        const char *e = nb_last_error();
        for (int k = 0; k < NB_OPT_COUNT; k++)
            CHECK(e && strstr(e, KIND_NAMES[k]), "parse '%s': the error lists '%s': %s", bad[i], KIND_NAMES[k],
                  e ? e : "(null)");
    }
}

typedef enum { F_BETA1, F_BETA2, F_BETA3, F_EPS, F_WD, F_MOMENTUM, F_GAMMA, F_AUX1, F_AUX2 } ffield;
static float *ffield_ptr(nb_optim_params *p, ffield f) {
    switch (f) {
    case F_BETA1: return &p->beta1;
    case F_BETA2: return &p->beta2;
    case F_BETA3: return &p->beta3;
    case F_EPS: return &p->eps;
    case F_WD: return &p->weight_decay;
    case F_MOMENTUM: return &p->momentum;
    case F_GAMMA: return &p->gamma;
    case F_AUX1: return &p->aux_beta1;
    default: return &p->aux_beta2;
    }
}

static void expect_invalid(const nb_optim_params *p, const char *flag, const char *what) {
    int rc = nb_optim_validate(p);
    const char *e = rc ? nb_last_error() : NULL;
    CHECK(rc != 0, "%s: %s %s is rejected", KIND_NAMES[p->kind], flag, what);
    if (rc) CHECK(e && strstr(e, flag), "%s: %s %s: the message names the flag: %s", KIND_NAMES[p->kind], flag, what,
                  e ? e : "(null)");
}

static void test_validate(void) {
    /* each float hyperparameter, tested under an optimizer that uses it */
    struct { ffield f; nb_optimizer_kind kind; const char *flag; int is_beta; } fl[] = {
        { F_BETA1, NB_OPT_ADAMW, "--beta1", 1 },   { F_BETA2, NB_OPT_ADAMW, "--beta2", 1 },
        { F_BETA1, NB_OPT_LION, "--beta1", 1 },    { F_BETA2, NB_OPT_LION, "--beta2", 1 },
        { F_BETA3, NB_OPT_ADAN, "--beta3", 1 },    { F_BETA1, NB_OPT_SOAP, "--beta1", 1 },
        { F_BETA2, NB_OPT_MARS, "--beta2", 1 },    { F_AUX1, NB_OPT_MUON, "--aux-beta1", 1 },
        { F_AUX2, NB_OPT_MUON, "--aux-beta2", 1 }, { F_EPS, NB_OPT_ADAMW, "--eps", 0 },
        { F_WD, NB_OPT_ADAMW, "--wd", 0 },         { F_WD, NB_OPT_SGD, "--wd", 0 },
        { F_MOMENTUM, NB_OPT_SGD, "--momentum", 0 }, { F_MOMENTUM, NB_OPT_MUON, "--momentum", 0 },
        { F_GAMMA, NB_OPT_MARS, "--gamma", 0 },       { F_BETA2, NB_OPT_NORMUON, "--beta2", 1 },
        { F_MOMENTUM, NB_OPT_NORMUON, "--momentum", 0 },
    };
    for (size_t i = 0; i < sizeof fl / sizeof fl[0]; i++) {
        nb_optim_params p = nb_optim_defaults(fl[i].kind);
        float keep = *ffield_ptr(&p, fl[i].f);
        const float vals[] = { -0.1f, NAN, INFINITY };
        const char *names[] = { "-0.1", "NaN", "inf" };
        for (int v = 0; v < 3; v++) {
            *ffield_ptr(&p, fl[i].f) = vals[v];
            expect_invalid(&p, fl[i].flag, names[v]);
        }
        if (fl[i].is_beta) {
            *ffield_ptr(&p, fl[i].f) = 1.0f;
            expect_invalid(&p, fl[i].flag, "1 (outside [0, 1))");
            *ffield_ptr(&p, fl[i].f) = 1.5f;
            expect_invalid(&p, fl[i].flag, "1.5 (outside [0, 1))");
            *ffield_ptr(&p, fl[i].f) = 0.0f;
            int rc = nb_optim_validate(&p);
            CHECK(rc == 0, "%s: %s 0 is accepted (inside [0, 1)): %s", KIND_NAMES[p.kind], fl[i].flag,
                  rc ? nb_last_error() : "");
        }
        *ffield_ptr(&p, fl[i].f) = keep;
    }
    nb_optim_params p = nb_optim_defaults(NB_OPT_ADAMW);
    p.eps = 0.0f;
    expect_invalid(&p, "--eps", "0 (expected > 0)");
    p = nb_optim_defaults(NB_OPT_ADAMW);
    p.weight_decay = 0.0f;
    CHECK(nb_optim_validate(&p) == 0, "adamw: --wd 0 is accepted");

    p = nb_optim_defaults(NB_OPT_SOAP);
    p.precond_every = 0;
    expect_invalid(&p, "--precond-every", "0");
    p.precond_every = -3;
    expect_invalid(&p, "--precond-every", "-3");
    p.precond_every = 1;
    CHECK(nb_optim_validate(&p) == 0, "soap: --precond-every 1 is accepted");
    p = nb_optim_defaults(NB_OPT_SOAP);
    p.max_precond_dim = -1;
    expect_invalid(&p, "--max-precond-dim", "-1");
    p = nb_optim_defaults(NB_OPT_MUON);
    p.ns_steps = -1;
    expect_invalid(&p, "--ns-steps", "-1");
}

/* ---- running an optimizer on the table ---- */
typedef struct {
    table tb;
    nb_optimizer *o;
    float *g, *w, *d;
} rig;

static int rig_open(rig *r, const nb_optim_params *p, table tb) {
    memset(r, 0, sizeof *r);
    r->tb = tb;
    int rc = nb_optimizer_create(&r->o, p, r->tb.t, r->tb.n, r->tb.n_params, NULL);
    CHECK(rc == 0 && r->o, "%s: nb_optimizer_create: %s", KIND_NAMES[p->kind], rc ? nb_last_error() : "");
    if (rc || !r->o) return -1;
    r->g = calloc(tb.n_params, sizeof *r->g);
    r->w = calloc(tb.n_params, sizeof *r->w);
    r->d = calloc(tb.n_params, sizeof *r->d);
    for (size_t k = 0; k < tb.n_params; k++) r->w[k] = (float)nrand();
    return 0;
}

/* Gradients N(0,1) with |g| >= 0.1 (so that eps is negligible), and ~10% exact zeros. */
static void rig_grads(rig *r) {
    for (size_t k = 0; k < r->tb.n_params; k++) {
        double x = nrand();
        if (fabs(x) < 0.1) x = x < 0 ? -0.1 - fabs(x) : 0.1 + fabs(x);
        r->g[k] = urand() < 0.1 ? 0.0f : (float)x;
    }
}

static void rig_close(rig *r) {
    nb_optimizer_free(r->o);
    free(r->g);
    free(r->w);
    free(r->d);
}

static float decay_for(const nb_tensor *t, const nb_optim_params *p) {
    return t->group == NB_GROUP_GAIN ? 0.0f : p->weight_decay;
}

/* ---- Lion: d = lr*sign(c) + lr*wd*w ---- */
static void test_lion(void) {
    nb_optim_params p = nb_optim_defaults(NB_OPT_LION);
    p.weight_decay = 0.1f;
    rig r;
    if (rig_open(&r, &p, std_table())) return;
    int bad = 0, zeros_seen = 0;
    double worst = 0;
    for (int s = 0; s < 6; s++) {
        rig_grads(&r);
        float lr = 1e-3f * (float)(s + 1), aux = 7e-4f;
        nb_optimizer_step(r.o, r.g, r.w, lr, aux, r.d);
        for (int i = 0; i < r.tb.n; i++) {
            const nb_tensor *t = &r.tb.t[i];
            float wd = decay_for(t, &p);
            for (size_t k = t->offset; k < t->offset + t->numel; k++) {
                double sgn = ((double)r.d[k] - (double)lr * wd * r.w[k]) / lr;
                double nearest = sgn > 0.5 ? 1 : sgn < -0.5 ? -1 : 0;
                double e = fabs(sgn - nearest);
                if (e > worst) worst = e;
                if (!(e <= 1e-4)) bad++;
                /* at t = 0, m = 0: a zero gradient gives c = 0 and sign(0) = 0 */
                if (s == 0 && r.g[k] == 0.0f) {
                    zeros_seen++;
                    if (nearest != 0) bad++;
                }
            }
        }
        for (size_t k = 0; k < r.tb.n_params; k++) r.w[k] -= r.d[k];
    }
    CHECK(bad == 0, "lion: %d step entries are not lr*{-1,0,1} + lr*wd*w (worst |d - decay|/lr off by %.3e)", bad,
          worst);
    CHECK(zeros_seen > 0, "lion: the test saw zero gradients at t = 0");
    printf("lion: (d - lr*wd*w)/lr is within %.2e of {-1, 0, 1}\n", worst);
    rig_close(&r);
}

/* ---- Muon: singular values of the orthogonalized matrix ---- */
/* Q: an m x n (m >= n) matrix with orthonormal columns, by modified Gram-Schmidt in double. */
static void orthonormal(double *Q, int m, int n) {
    for (int j = 0; j < n; j++) {
        for (int i = 0; i < m; i++) Q[i * n + j] = nrand();
        for (int pass = 0; pass < 2; pass++)
            for (int l = 0; l < j; l++) {
                double dot = 0;
                for (int i = 0; i < m; i++) dot += Q[i * n + l] * Q[i * n + j];
                for (int i = 0; i < m; i++) Q[i * n + j] -= dot * Q[i * n + l];
            }
        double nrm = 0;
        for (int i = 0; i < m; i++) nrm += Q[i * n + j] * Q[i * n + j];
        nrm = sqrt(nrm);
        for (int i = 0; i < m; i++) Q[i * n + j] /= nrm;
    }
}

/* The band. Muon normalizes G by its Frobenius norm, so every singular value starts in (0, 1];
 * the quintic p(x) = 3.4445 x - 4.7750 x^3 + 2.0315 x^5 iterated 5 times maps every start
 * x0 in [0.01, 1] into [0.6818, 1.1344] (evaluated on a grid of 2e6 points; a start below 0.0015
 * stays below 0.68). The gradients below have singular values in [0.05, 1] with at most 8 of
 * them, so every x0 >= 0.05 / sqrt(8) = 0.0177, and the band checked is [0.68, 1.14]; float32
 * rounding moves singular values by ~1e-6. */
#define MUON_BAND_LO 0.68
#define MUON_BAND_HI 1.14

static double quintic5(double x) {
    for (int i = 0; i < 5; i++) x = 3.4445 * x - 4.7750 * x * x * x + 2.0315 * x * x * x * x * x;
    return x;
}

static void check_muon_band(table tb, nb_precision precision, double band_lo, double band_hi);

static void test_muon(void) {
    /* the band itself, recomputed */
    double lo = 1e9, hi = -1e9;
    for (int i = 0; i <= 100000; i++) {
        double y = quintic5(0.01 + (1.0 - 0.01) * i / 100000.0);
        if (y < lo) lo = y;
        if (y > hi) hi = y;
    }
    CHECK(lo >= MUON_BAND_LO && hi <= MUON_BAND_HI, "the quintic's 5-step range over [0.01, 1] is [%.4f, %.4f]", lo,
          hi);
    check_muon_band(std_table(), NB_PRECISION_FP32, MUON_BAND_LO, MUON_BAND_HI);
}

/* Gradients of the table's matrices g = U diag(s) V^T with s spread over [0.05, 1]. */
static void spread_singular_values(rig *r) {
    for (int i = 0; i < r->tb.n; i++) {
        const nb_tensor *t = &r->tb.t[i];
        if (t->group != NB_GROUP_MATRIX) continue;
        int m = t->shape[0], n = t->shape[1], k = m < n ? m : n;
        double *U = malloc(sizeof(double) * m * k), *V = malloc(sizeof(double) * n * k), *s = malloc(sizeof(double) * k);
        orthonormal(U, m, k);
        orthonormal(V, n, k);
        for (int j = 0; j < k; j++) s[j] = 0.05 + 0.95 * j / (k - 1);
        for (int a = 0; a < m; a++)
            for (int b = 0; b < n; b++) {
                double x = 0;
                for (int j = 0; j < k; j++) x += U[a * k + j] * s[j] * V[b * k + j];
                r->g[t->offset + (size_t)a * n + b] = (float)x;
            }
        free(U);
        free(V);
        free(s);
    }
}

/* One Muon step in the precision given on gradients with singular values in [0.05, 1]: the orthogonalized
 * matrices' singular values lie in [band_lo, band_hi]; the other tensors take AdamW's first step at aux_lr. */
static void check_muon_band(table tb, nb_precision precision, double band_lo, double band_hi) {
    nb_optim_params p = nb_optim_defaults(NB_OPT_MUON);
    p.weight_decay = 0.1f;
    rig r;
    if (rig_open(&r, &p, tb)) return;
    CHECK(nb_optimizer_set_precision(r.o, precision) == 0, "set_precision: %s", nb_last_error());
    rig_grads(&r);
    spread_singular_values(&r);
    const char *prec = nb_precision_name(precision);
    float lr = 0.02f, aux = 3e-3f;
    nb_optimizer_step(r.o, r.g, r.w, lr, aux, r.d);
    for (int i = 0; i < r.tb.n; i++) {
        const nb_tensor *t = &r.tb.t[i];
        float wd = decay_for(t, &p);
        if (t->group != NB_GROUP_MATRIX) {
            /* the auxiliary AdamW at aux_lr: bias-corrected first step, |d - decay| = aux_lr */
            double worst = 0;
            for (size_t k = t->offset; k < t->offset + t->numel; k++) {
                double u = fabs((double)r.d[k] - (double)aux * wd * r.w[k]);
                double e = r.g[k] == 0.0f ? u / aux : fabs(u - aux) / aux;
                if (e > worst) worst = e;
            }
            CHECK(worst <= 1e-5, "muon %s: %s (AdamW at aux_lr) first step |d - decay| = aux_lr: off by %.3e", prec,
                  t->name, worst);
            continue;
        }
        int m = t->shape[0], n = t->shape[1], k = m < n ? m : n;
        double scale = lr * sqrt(fmax(1.0, (double)m / n));
        float *X = malloc(sizeof(float) * m * n), *sv = malloc(sizeof(float) * k);
        for (int a = 0; a < m * n; a++)
            X[a] = (float)(((double)r.d[t->offset + a] - (double)lr * wd * r.w[t->offset + a]) / scale);
        int info = singular_values(X, m, n, sv);
        CHECK(info == 0, "muon: %s: sgesvd info %d", t->name, info);
        float smin = sv[k - 1], smax = sv[0];
        CHECK(smin >= band_lo && smax <= band_hi,
              "muon %s: %s [%d,%d]: singular values of (d - lr wd w)/(lr sqrt(max(1, rows/cols))) in [%.4f, %.4f], "
              "outside [%.3f, %.3f]", prec, t->name, m, n, smin, smax, band_lo, band_hi);
        printf("muon %s: %s [%d,%d]: singular values in [%.4f, %.4f]\n", prec, t->name, m, n, smin, smax);
        free(X);
        free(sv);
    }
    rig_close(&r);
}

/* ---- Muon and NorMuon under bf16: the Newton-Schulz products take bf16 operands ----
 * Larger matrices than std_table's too (bf16's error grows with the products' length), square, wide and
 * tall as Muon orients them. Each operand carries a relative error up to 2^-9, and Newton-Schulz
 * magnifies it in the directions of small singular values (the quintic's slope at 0 is a = 3.4445 a step),
 * so the orthogonalized matrix moves by a few percent while staying orthogonal: its singular values must
 * stay in the fp32 band widened by MUON_BF16_BAND (measured: at most 0.004 outside it), and each step
 * within MUON_BF16_TOL of the fp32 step on the same gradients and state, as ||d16 - d32||_F / ||d32||_F
 * (measured 2.4% to 3.6% over these shapes; a wrong coefficient or orientation gives tens of percent);
 * and it must differ from fp32's (the bf16 path ran). */
#define MUON_BF16_BAND 0.03
#define MUON_BF16_TOL 0.06

static table large_table(void) {
    table tb = { 0 };
    add(&tb, "model.layers.0.self_attn.o_proj.weight", 64, 64, NB_GROUP_MATRIX);
    add(&tb, "model.layers.0.mlp.up_proj.weight", 48, 160, NB_GROUP_MATRIX);
    add(&tb, "model.layers.0.mlp.down_proj.weight", 160, 48, NB_GROUP_MATRIX);
    add(&tb, "model.norm.weight", 9, 0, NB_GROUP_GAIN);
    return tb;
}

/* Three steps of kind in fp32 and in bf16 on the same gradients: the steps of each matrix agree within
 * MUON_BF16_TOL (relative, Frobenius) and differ somewhere; the other tensors' steps are bitwise equal. */
static void compare_bf16_steps(nb_optimizer_kind kind, table tb) {
    nb_optim_params p = nb_optim_defaults(kind);
    p.weight_decay = 0.1f;
    rig a, b;
    if (rig_open(&a, &p, tb)) return;
    if (rig_open(&b, &p, tb)) { rig_close(&a); return; }
    memcpy(b.w, a.w, sizeof(float) * a.tb.n_params);
    CHECK(nb_optimizer_set_precision(b.o, NB_PRECISION_BF16) == 0, "set_precision bf16: %s", nb_last_error());
    double worst = 0;
    int differs = 0, aux_equal = 1;
    for (int step = 0; step < 3; step++) {
        rig_grads(&a);
        memcpy(b.g, a.g, sizeof(float) * a.tb.n_params);
        nb_optimizer_step(a.o, a.g, a.w, 0.02f, 3e-3f, a.d);
        nb_optimizer_step(b.o, b.g, b.w, 0.02f, 3e-3f, b.d);
        for (int i = 0; i < a.tb.n; i++) {
            const nb_tensor *t = &a.tb.t[i];
            const float *d32 = a.d + t->offset, *d16 = b.d + t->offset;
            if (t->group != NB_GROUP_MATRIX) {
                aux_equal &= !memcmp(d32, d16, sizeof(float) * t->numel);
                continue;
            }
            double diff = 0, norm = 0;
            for (size_t k = 0; k < t->numel; k++) {
                diff += ((double)d16[k] - d32[k]) * ((double)d16[k] - d32[k]);
                norm += (double)d32[k] * d32[k];
            }
            double err = sqrt(diff / norm);
            if (!(err <= worst)) worst = isnan(err) ? INFINITY : err;
            differs |= memcmp(d32, d16, sizeof(float) * t->numel) != 0;
        }
    }
    CHECK(worst <= MUON_BF16_TOL, "%s bf16: steps within %.2g of fp32's (relative, Frobenius): %.3g",
          KIND_NAMES[kind], MUON_BF16_TOL, worst);
    CHECK(differs, "%s bf16: the steps differ from fp32's (the bf16 products ran)", KIND_NAMES[kind]);
    CHECK(aux_equal, "%s bf16: the auxiliary AdamW steps are bitwise fp32's", KIND_NAMES[kind]);
    printf("%s bf16: steps within %.2e of fp32's (relative, Frobenius)\n", KIND_NAMES[kind], worst);
    rig_close(&a);
    rig_close(&b);
}

static void test_muon_bf16(void) {
    check_muon_band(std_table(), NB_PRECISION_BF16, MUON_BAND_LO - MUON_BF16_BAND, MUON_BAND_HI + MUON_BF16_BAND);
    check_muon_band(large_table(), NB_PRECISION_BF16, MUON_BAND_LO - MUON_BF16_BAND, MUON_BAND_HI + MUON_BF16_BAND);
    check_muon_band(large_table(), NB_PRECISION_FP32, MUON_BAND_LO, MUON_BAND_HI);
    compare_bf16_steps(NB_OPT_MUON, std_table());
    compare_bf16_steps(NB_OPT_MUON, large_table());
    compare_bf16_steps(NB_OPT_NORMUON, large_table());
    nb_optimizer *o = NULL;
    table tb = std_table();
    nb_optim_params p = nb_optim_defaults(NB_OPT_MUON);
    CHECK(nb_optimizer_create(&o, &p, tb.t, tb.n, tb.n_params, NULL) == 0, "muon: %s", nb_last_error());
    CHECK(o && nb_optimizer_set_precision(o, NB_PRECISION_AUTO) == -1 && strstr(nb_last_error(), "auto"),
          "set_precision refuses auto (resolve it first): %s", nb_last_error());
    nb_optimizer_free(o);
}

/* ---- NorMuon's first step: s = (1-b2) r, so every row of O' has the same RMS 1/sqrt(1-b2); after
 * the norm-preserving rescale, row i of (d - lr wd w) is row i of Muon's (d - lr wd w) on the same
 * gradient, scaled to the norm ||D_muon||_F / sqrt(rows). A zero gradient gives the decay alone. ---- */
static double row_norm(const float *x, int cols) {
    double s = 0;
    for (int j = 0; j < cols; j++) s += (double)x[j] * x[j];
    return sqrt(s);
}

static void check_normuon_rows(const rig *mu, const rig *no, const nb_tensor *t, float lr, float wd) {
    int rows = t->shape[0], cols = t->shape[1];
    float *Dm = malloc(sizeof(float) * t->numel), *Dn = malloc(sizeof(float) * t->numel);
    for (size_t k = 0; k < t->numel; k++) {
        Dm[k] = (float)((double)mu->d[t->offset + k] - (double)lr * wd * mu->w[t->offset + k]);
        Dn[k] = (float)((double)no->d[t->offset + k] - (double)lr * wd * no->w[t->offset + k]);
    }
    double total = row_norm(Dm, (int)t->numel), worst = 0, scale = 0;
    for (int i = 0; i < rows; i++) {
        double want_norm = total / sqrt((double)rows), factor = want_norm / row_norm(Dm + (size_t)i * cols, cols);
        for (int j = 0; j < cols; j++) {
            double e = fabs(Dn[(size_t)i * cols + j] - factor * Dm[(size_t)i * cols + j]) / want_norm;
            if (!(e <= worst)) worst = isnan(e) ? INFINITY : e;
        }
        scale = fmax(scale, fabs(factor - 1));
    }
    CHECK(worst <= 1e-4, "normuon: %s [%d,%d]: first step = Muon's, rows rescaled to equal norms: off by %.3e",
          t->name, rows, cols, worst);
    printf("normuon: %s [%d,%d]: rows of Muon's step rescaled by up to %.1f%%\n", t->name, rows, cols, 100 * scale);
    free(Dm);
    free(Dn);
}

static void test_normuon(void) {
    nb_optim_params pm = nb_optim_defaults(NB_OPT_MUON), pn = nb_optim_defaults(NB_OPT_NORMUON);
    pm.weight_decay = pn.weight_decay = 0.1f;
    rig mu, no;
    if (rig_open(&mu, &pm, std_table())) return;
    if (rig_open(&no, &pn, std_table())) { rig_close(&mu); return; }
    rig_grads(&mu);
    memcpy(no.g, mu.g, sizeof(float) * mu.tb.n_params);
    memcpy(no.w, mu.w, sizeof(float) * mu.tb.n_params);
    const float lr = 0.02f, aux = 3e-3f;
    nb_optimizer_step(mu.o, mu.g, mu.w, lr, aux, mu.d);
    nb_optimizer_step(no.o, no.g, no.w, lr, aux, no.d);
    for (int i = 0; i < mu.tb.n; i++) {
        const nb_tensor *t = &mu.tb.t[i];
        if (t->group == NB_GROUP_MATRIX) check_normuon_rows(&mu, &no, t, lr, pn.weight_decay);
        else CHECK(!memcmp(mu.d + t->offset, no.d + t->offset, sizeof(float) * t->numel),
                   "normuon: %s: the auxiliary AdamW step equals Muon's", t->name);
    }
    /* a zero gradient: O = 0, so d is the decay alone (and finite, despite the 1/(sqrt(0) + 1e-10)) */
    rig_close(&no);
    if (rig_open(&no, &pn, std_table())) { rig_close(&mu); return; }
    memset(no.g, 0, sizeof(float) * no.tb.n_params);
    nb_optimizer_step(no.o, no.g, no.w, lr, aux, no.d);
    double worst = 0;
    for (int i = 0; i < no.tb.n; i++) {
        const nb_tensor *t = &no.tb.t[i];
        if (t->group != NB_GROUP_MATRIX) continue;
        for (size_t k = t->offset; k < t->offset + t->numel; k++) {
            double e = fabs((double)no.d[k] - (double)lr * pn.weight_decay * no.w[k]);
            if (!(e <= worst)) worst = isnan(e) ? INFINITY : e;
        }
    }
    CHECK(worst <= 1e-9, "normuon: a zero gradient gives d = lr wd w on matrices: off by %.3e", worst);
    rig_close(&no);
    rig_close(&mu);
}

/* ---- bias correction: the first step is lr * sign(g) (wd = 0) ---- */
static double first_step_err(const rig *r, int i, float lr) {
    const nb_tensor *t = &r->tb.t[i];
    double worst = 0;
    for (size_t k = t->offset; k < t->offset + t->numel; k++) {
        double e = r->g[k] == 0.0f ? fabs(r->d[k]) / lr : fabs(r->d[k] - lr * (r->g[k] > 0 ? 1.0 : -1.0)) / lr;
        if (!(e <= worst)) worst = isnan(e) ? INFINITY : e;
    }
    return worst;
}

static void test_bias_correction(void) {
    /* AdamW and Adan on every group, MARS on matrices (c = g at t = 0, clipped by a positive
     * factor, then AdamW) and the auxiliary AdamW of Muon, MARS and SOAP on embed and gain:
     * m/(1-b1) over sqrt(v/(1-b2)) = g/|g|, so |d| = lr (aux_lr) where g != 0, 0 where g == 0.
     * Without bias correction AdamW's first step would be 0.1/sqrt(0.05) = 0.45 lr. eps/|g| <=
     * 1e-8/0.013 (MARS's clipped c) bounds the deviation; the tolerance is 1e-5. */
    const nb_optimizer_kind kinds[] = { NB_OPT_ADAMW, NB_OPT_ADAN, NB_OPT_MARS, NB_OPT_MUON, NB_OPT_SOAP,
                                        NB_OPT_NORMUON };
    for (size_t q = 0; q < sizeof kinds / sizeof kinds[0]; q++) {
        nb_optim_params p = nb_optim_defaults(kinds[q]);
        p.weight_decay = 0.0f;
        rig r;
        if (rig_open(&r, &p, std_table())) continue;
        rig_grads(&r);
        float lr = 0.01f, aux = 3e-3f;
        nb_optimizer_step(r.o, r.g, r.w, lr, aux, r.d);
        int aux_rule = kinds[q] == NB_OPT_MUON || kinds[q] == NB_OPT_MARS || kinds[q] == NB_OPT_SOAP ||
                       kinds[q] == NB_OPT_NORMUON;
        for (int i = 0; i < r.tb.n; i++) {
            const nb_tensor *t = &r.tb.t[i];
            int is_aux = aux_rule && t->group != NB_GROUP_MATRIX;
            if (!is_aux && kinds[q] != NB_OPT_ADAMW && kinds[q] != NB_OPT_ADAN && kinds[q] != NB_OPT_MARS) continue;
            float use = is_aux ? aux : lr;
            double e = first_step_err(&r, i, use);
            CHECK(e <= 1e-5, "%s: %s%s: first step |d| = %s where g != 0, 0 where g == 0: off by %.3e",
                  KIND_NAMES[kinds[q]], t->name, is_aux ? " (aux AdamW)" : "", is_aux ? "aux_lr" : "lr", e);
        }
        rig_close(&r);
    }
}

/* ---- SOAP: the step at t = 0 is zero; the first Adam step has ||d||_F = lr sqrt(numel) ---- */
static void test_soap(void) {
    for (int variant = 0; variant < 2; variant++) {
        nb_optim_params p = nb_optim_defaults(NB_OPT_SOAP);
        /* variant 1: sides above 7 are not preconditioned: [8,8] none, [6,16] left, [16,6] right */
        if (variant) p.max_precond_dim = 7;
        p.weight_decay = 0.1f;
        rig r;
        if (rig_open(&r, &p, std_table())) continue;
        rig_grads(&r);
        nb_optimizer_step(r.o, r.g, r.w, 0.01f, 3e-3f, r.d);
        for (int i = 0; i < r.tb.n; i++) {
            const nb_tensor *t = &r.tb.t[i];
            if (t->group != NB_GROUP_MATRIX) continue;
            size_t nz = 0;
            for (size_t k = t->offset; k < t->offset + t->numel; k++) nz += r.d[k] != 0.0f;
            CHECK(nz == 0, "soap (max_precond_dim %d): %s: the step at t = 0 is zero (no decay either): %zu nonzero",
                  p.max_precond_dim, t->name, nz);
        }
        rig_close(&r);

        /* wd = 0: at t = 1 (the first Adam step, k = 1), N = G'/|G'| has entries +-1, and
         * QL, QR are orthogonal, so ||d||_F = lr ||N||_F = lr sqrt(rows*cols) */
        p.weight_decay = 0.0f;
        if (rig_open(&r, &p, std_table())) continue;
        for (int s = 0; s < 2; s++) {
            for (size_t k = 0; k < r.tb.n_params; k++) r.g[k] = (float)nrand();
            nb_optimizer_step(r.o, r.g, r.w, 0.01f, 3e-3f, r.d);
        }
        for (int i = 0; i < r.tb.n; i++) {
            const nb_tensor *t = &r.tb.t[i];
            if (t->group != NB_GROUP_MATRIX) continue;
            double ss = 0;
            for (size_t k = t->offset; k < t->offset + t->numel; k++) ss += (double)r.d[k] * r.d[k];
            double want = 0.01 * sqrt((double)t->numel), e = fabs(sqrt(ss) - want) / want;
            CHECK(e <= 1e-4, "soap (max_precond_dim %d): %s: first Adam step ||d||_F = %.6g, expected lr sqrt(%zu) = "
                  "%.6g", p.max_precond_dim, t->name, sqrt(ss), t->numel, want);
        }
        rig_close(&r);
    }
}

/* ---- state enumeration ---- */
static size_t expected_state(const nb_optim_params *p, const nb_tensor *t) {
    size_t n = t->numel;
    int matrix = t->group == NB_GROUP_MATRIX;
    switch (p->kind) {
    case NB_OPT_SGD: return n;                  /* m */
    case NB_OPT_ADAMW: return 2 * n;            /* m, v */
    case NB_OPT_LION: return n;                 /* m */
    case NB_OPT_ADAN: return 4 * n;             /* m, v, n, g_prev */
    case NB_OPT_MUON: return matrix ? n : 2 * n;      /* m | aux m, v */
    case NB_OPT_NORMUON: return matrix ? n + (size_t)t->shape[0] : 2 * n;  /* m, s (one per row) | aux m, v */
    case NB_OPT_MARS: return matrix ? 3 * n : 2 * n;  /* m, v, g_prev | aux m, v */
    case NB_OPT_SOAP: {
        if (!matrix) return 2 * n;
        size_t r = (size_t)t->shape[0], c = (size_t)t->shape[1], s = 2 * n;   /* m, v */
        if (t->shape[0] <= p->max_precond_dim) s += 2 * r * r;                /* L, QL */
        if (t->shape[1] <= p->max_precond_dim) s += 2 * c * c;                /* R, QR */
        return s;
    }
    default: return 0;
    }
}

static void test_state(void) {
    for (int kk = 0; kk <= NB_OPT_COUNT; kk++) {
        nb_optim_params p = nb_optim_defaults(kk == NB_OPT_COUNT ? NB_OPT_SOAP : (nb_optimizer_kind)kk);
        if (kk == NB_OPT_COUNT) p.max_precond_dim = 7;   /* SOAP with one-sided and unpreconditioned matrices */
        rig r;
        if (rig_open(&r, &p, std_table())) continue;
        rig_grads(&r);
        nb_optimizer_step(r.o, r.g, r.w, 0.01f, 3e-3f, r.d);
        CHECK(nb_optimizer_steps(r.o) == 1, "%s: one step taken: %ld", KIND_NAMES[p.kind], nb_optimizer_steps(r.o));
        int count = nb_optimizer_state_count(r.o);
        CHECK(count > 0, "%s: state count %d", KIND_NAMES[p.kind], count);
        size_t got[8] = { 0 };
        int orphans = 0, malformed = 0, dup = 0;
        const char **names = calloc(count > 0 ? count : 1, sizeof *names);
        for (int i = 0; i < count; i++) {
            const char *name = NULL;
            float *data = NULL;
            size_t numel = 0;
            int rc = nb_optimizer_state(r.o, i, &name, &data, &numel);
            if (rc || !name || !data || numel == 0) { malformed++; continue; }
            names[i] = name;
            for (int j = 0; j < i; j++)
                if (names[j] && !strcmp(names[j], name)) dup++;
            const char *colon = strrchr(name, ':');
            int found = 0;
            for (int t = 0; colon && t < r.tb.n; t++)
                if (!strcmp(colon + 1, r.tb.t[t].name)) { got[t] += numel; found = 1; }
            if (!found) orphans++;
            int finite = 1;
            for (size_t k = 0; k < numel; k++) finite &= isfinite(data[k]) != 0;
            CHECK(finite, "%s: state '%s' is finite", KIND_NAMES[p.kind], name);
        }
        CHECK(malformed == 0, "%s: %d state entries without a name, data or size", KIND_NAMES[p.kind], malformed);
        CHECK(orphans == 0, "%s: %d state names do not end in ':' + a tensor name", KIND_NAMES[p.kind], orphans);
        CHECK(dup == 0, "%s: %d duplicate state names", KIND_NAMES[p.kind], dup);
        for (int t = 0; t < r.tb.n; t++)
            CHECK(got[t] == expected_state(&p, &r.tb.t[t]),
                  "%s (max_precond_dim %d): state of %s holds %zu floats, expected %zu", KIND_NAMES[p.kind],
                  p.max_precond_dim, r.tb.t[t].name, got[t], expected_state(&p, &r.tb.t[t]));
        const char *name;
        float *data;
        size_t numel;
        CHECK(nb_optimizer_state(r.o, count, &name, &data, &numel) != 0, "%s: state index %d (= count) is rejected",
              KIND_NAMES[p.kind], count);
        CHECK(nb_optimizer_state(r.o, -1, &name, &data, &numel) != 0, "%s: state index -1 is rejected",
              KIND_NAMES[p.kind]);
        /* content: SGD's momentum after one step is the gradient (m = mu*0 + g) */
        if (p.kind == NB_OPT_SGD) {
            int seen = 0;
            for (int i = 0; i < count; i++) {
                if (nb_optimizer_state(r.o, i, &name, &data, &numel)) continue;
                const char *colon = strrchr(name, ':');
                for (int t = 0; colon && t < r.tb.n; t++)
                    if (!strcmp(colon + 1, r.tb.t[t].name) && numel == r.tb.t[t].numel) {
                        seen++;
                        CHECK(!memcmp(data, r.g + r.tb.t[t].offset, numel * sizeof(float)),
                              "sgd: state '%s' equals the gradient after one step", name);
                    }
            }
            CHECK(seen == r.tb.n, "sgd: one momentum buffer per tensor (%d)", seen);
        }
        free(names);
        rig_close(&r);
    }
}

/* ---- gradient clipping helpers ---- */
static void test_clip_helpers(void) {
    table tb = { 0 };
    add(&tb, "model.embed_tokens.weight", 5, 3, NB_GROUP_EMBED);
    add(&tb, "model.norm.weight", 4, 0, NB_GROUP_GAIN);
    add(&tb, "model.embed_tokens.weight", 5, 3, NB_GROUP_EMBED);
    tb.t[2].tied_copy = 1;
    add(&tb, "model.layers.0.mlp.up_proj.weight", 3, 7, NB_GROUP_MATRIX);
    float *buf = malloc(tb.n_params * sizeof *buf);
    for (size_t k = 0; k < tb.n_params; k++) buf[k] = (float)(3 * nrand());
    double want = 0;
    for (int i = 0; i < tb.n; i++) {
        if (tb.t[i].tied_copy) continue;
        for (size_t k = tb.t[i].offset; k < tb.t[i].offset + tb.t[i].numel; k++) want += (double)buf[k] * buf[k];
    }
    double got = nb_grad_sum_squares(NULL, buf, tb.t, tb.n);
    CHECK(fabs(got - want) <= 1e-12 * want, "nb_grad_sum_squares skips the tied copy: %.17g, expected %.17g", got,
          want);
    double all = 0;
    for (size_t k = 0; k < tb.n_params; k++) all += (double)buf[k] * buf[k];
    CHECK(fabs(got - all) > 1e-6 * all, "nb_grad_sum_squares differs from the sum over the whole buffer");
    CHECK(nb_grad_sum_squares(NULL, buf, tb.t, 0) == 0.0, "nb_grad_sum_squares over no tensors is 0");

    float *copy = malloc(tb.n_params * sizeof *copy);
    memcpy(copy, buf, tb.n_params * sizeof *copy);
    const float scale = 0.3712f;
    nb_scale(NULL, buf, tb.n_params - 1, scale);
    int bad = 0;
    for (size_t k = 0; k + 1 < tb.n_params; k++) bad += buf[k] != copy[k] * scale;
    CHECK(bad == 0, "nb_scale multiplies each value by the scale (%d differ)", bad);
    CHECK(buf[tb.n_params - 1] == copy[tb.n_params - 1], "nb_scale touches only n values");
    free(buf);
    free(copy);
}

int main(void) {
    test_defaults();
    test_parse();
    test_validate();
    test_lion();
    test_muon();
    test_muon_bf16();
    test_normuon();
    test_bias_correction();
    test_soap();
    test_state();
    test_clip_helpers();
    return check_summary();
}
