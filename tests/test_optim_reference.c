/* The C optimizers against the independent float64 references of
 * tools/reference/optim_reference.py (torch.optim.AdamW itself for AdamW, direct numpy
 * transcriptions of docs/rules.md for the others): 20 steps on five tensors (square [8,8],
 * wide [8,20] and tall [20,8] matrices, an [10,6] embedding, a [12] gain) with varying
 * gradient scales, ~10% zero gradients, varying lr and aux_lr, weight decay 0.1.
 *
 * For each optimizer the inputs come from tests/fixtures/optim_inputs.nbfx and the trajectory
 * from tests/fixtures/optim_<name>.nbfx. Each step d_t is compared with the reference's d_t, and
 * the float32 weights w_{t+1} (w -= d, applied here) with w0 - sum_{s<=t} d_s of the reference,
 * per tensor, as max |c - ref| / max |ref| (check_rel_err_d).
 *
 * Tolerances. Every input (weights, gradients, learning rates, hyperparameters) is a float32
 * value, so the only differences are float32 rounding in the C code. Running the same
 * references in float32 (optim_reference.py --f32-check) puts that rounding at:
 *   SGD, AdamW, Lion, Adan, MARS (elementwise): d <= 3e-7, w <= 3e-7;
 *   Muon, NorMuon: d <= 2.3e-6 (Newton-Schulz amplifies rounding in the directions of small singular
 *         values: the quintic's slope at 0 is a = 3.4445, so five iterations magnify them up
 *         to ~a^5 ~ 490 times; the GEMMs' summation order also differs from numpy's);
 *   SOAP: d <= 2.2e-6 (eigenvectors from a float32 eigensolver are accurate to about
 *         eps32 * ||L|| / gap, and the QR refreshes and rotations add GEMM rounding; a different
 *         LAPACK driver (syev / syevd / syevr) gives different but equally accurate vectors).
 * The tolerances leave >= 20x headroom over those: 1e-5 for the elementwise optimizers (the
 * issue's "about 1e-5 relative in fp32"), 5e-5 for Muon, NorMuon and SOAP, and 1e-5 for the weights of
 * every optimizer (their error is the float32 rounding of w -= d, ~2e-7). A wrong coefficient,
 * bias correction, group, lr or decay shows up at 1e-3 or more. The fixture was generated with
 * a seed that keeps the rule's discontinuities away: no Lion sign argument is nonzero and
 * within 3e-5 (relative) of 0, no SOAP coefficient at its first Adam step (where the step is
 * sign(G')) within 6e-3, no MARS ||c|| within 0.017 of the clipping threshold 1. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "check.h"
#include "fixture.h"
#include "nobubble/common.h"
#include "nobubble/optim.h"

#define N_T 5
#define STEPS 20
#define TOL_ELEMENTWISE 1e-5
#define TOL_MATRIX 5e-5
#define TOL_W 1e-5
#define FLOOR 1e-12

typedef struct {
    const char *file;   /* optim_<file>.nbfx */
    nb_optimizer_kind kind;
    double tol_d;
} opt_case;

static const opt_case CASES[] = {
    { "sgd", NB_OPT_SGD, TOL_ELEMENTWISE },
    { "sgd_nesterov", NB_OPT_SGD, TOL_ELEMENTWISE },
    { "adamw", NB_OPT_ADAMW, TOL_ELEMENTWISE },
    { "muon", NB_OPT_MUON, TOL_MATRIX },
    { "lion", NB_OPT_LION, TOL_ELEMENTWISE },
    { "adan", NB_OPT_ADAN, TOL_ELEMENTWISE },
    { "mars", NB_OPT_MARS, TOL_ELEMENTWISE },
    { "soap", NB_OPT_SOAP, TOL_MATRIX },
    { "normuon", NB_OPT_NORMUON, TOL_MATRIX },
};

static const char *GROUP_NAMES[] = { "matrix", "embed", "gain" };

static const nbfx_entry *need(const nbfx *f, const char *file, const char *name, int dtype, size_t numel) {
    const nbfx_entry *e = nbfx_get(f, name);
    CHECK(e != NULL, "%s: entry '%s' present", file, name);
    if (!e) return NULL;
    int ok = e->dtype == dtype && (numel == 0 || e->numel == numel);
    CHECK(ok, "%s: entry '%s': dtype %d numel %zu (expected dtype %d numel %zu)", file, name, e->dtype,
          e->numel, dtype, numel);
    return ok ? e : NULL;
}

/* Shared inputs. */
typedef struct {
    nb_tensor t[N_T];
    size_t n_params;
    const double *w0[N_T], *g[N_T];
    const double *lr, *aux_lr;
} inputs;

static int load_inputs(const nbfx *f, inputs *in) {
    const char *file = "optim_inputs.nbfx";
    const nbfx_entry *te = need(f, file, "tensors", NBFX_I32, N_T * 3);
    const nbfx_entry *lr = need(f, file, "lr", NBFX_F64, STEPS);
    const nbfx_entry *aux = need(f, file, "aux_lr", NBFX_F64, STEPS);
    if (!te || !lr || !aux) return -1;
    in->lr = lr->f64;
    in->aux_lr = aux->f64;
    in->n_params = 0;
    for (int i = 0; i < N_T; i++) {
        nb_tensor *t = &in->t[i];
        memset(t, 0, sizeof *t);
        int rows = te->i32[i * 3], cols = te->i32[i * 3 + 1], group = te->i32[i * 3 + 2];
        snprintf(t->name, sizeof t->name, "t%d.%s.%dx%d", i, GROUP_NAMES[group], rows, cols);
        t->ndim = cols ? 2 : 1;
        t->shape[0] = rows;
        t->shape[1] = cols;
        t->numel = (size_t)rows * (size_t)(cols ? cols : 1);
        t->offset = in->n_params;
        t->group = (nb_group)group;
        t->tied_copy = 0;
        in->n_params += t->numel;
        char name[32];
        snprintf(name, sizeof name, "w0:%d", i);
        const nbfx_entry *w0 = need(f, file, name, NBFX_F64, t->numel);
        snprintf(name, sizeof name, "g:%d", i);
        const nbfx_entry *g = need(f, file, name, NBFX_F64, STEPS * t->numel);
        if (!w0 || !g) return -1;
        in->w0[i] = w0->f64;
        in->g[i] = g->f64;
    }
    return 0;
}

/* The defaults of the kind, overridden by every "hp:<name>" entry of the fixture. */
static int params_from(const nbfx *f, const char *file, nb_optimizer_kind kind, nb_optim_params *p) {
    *p = nb_optim_defaults(kind);
    CHECK(p->kind == kind, "%s: nb_optim_defaults sets kind", file);
    p->kind = kind;
    int bad = 0;
    for (int i = 0; i < f->n_entries; i++) {
        const nbfx_entry *e = &f->entries[i];
        if (strncmp(e->name, "hp:", 3)) continue;
        if (e->dtype != NBFX_F64 || e->numel != 1) { CHECK(0, "%s: %s is f64 [1]", file, e->name); bad = 1; continue; }
        const char *h = e->name + 3;
        double v = e->f64[0];
        if (!strcmp(h, "beta1")) p->beta1 = (float)v;
        else if (!strcmp(h, "beta2")) p->beta2 = (float)v;
        else if (!strcmp(h, "beta3")) p->beta3 = (float)v;
        else if (!strcmp(h, "eps")) p->eps = (float)v;
        else if (!strcmp(h, "weight_decay")) p->weight_decay = (float)v;
        else if (!strcmp(h, "momentum")) p->momentum = (float)v;
        else if (!strcmp(h, "nesterov")) p->nesterov = (int)v;
        else if (!strcmp(h, "ns_steps")) p->ns_steps = (int)v;
        else if (!strcmp(h, "gamma")) p->gamma = (float)v;
        else if (!strcmp(h, "precond_every")) p->precond_every = (int)v;
        else if (!strcmp(h, "max_precond_dim")) p->max_precond_dim = (int)v;
        else if (!strcmp(h, "aux_beta1")) p->aux_beta1 = (float)v;
        else if (!strcmp(h, "aux_beta2")) p->aux_beta2 = (float)v;
        else { CHECK(0, "%s: unknown hyperparameter entry %s", file, e->name); bad = 1; }
    }
    return bad ? -1 : 0;
}

static void run_case(const opt_case *c, const inputs *in) {
    char path[128];
    snprintf(path, sizeof path, "tests/fixtures/optim_%s.nbfx", c->file);
    nbfx *f = nbfx_load(path);
    CHECK(f != NULL, "load %s", path);
    if (!f) return;
    const nbfx_entry *te = need(f, c->file, "tensors", NBFX_I32, N_T * 3);
    const double *dref[N_T] = { 0 }, *w20[N_T] = { 0 };
    int ok = te != NULL;
    for (int i = 0; ok && i < N_T; i++) {
        ok = ok && te->i32[i * 3] == in->t[i].shape[0] && te->i32[i * 3 + 1] == in->t[i].shape[1] &&
             te->i32[i * 3 + 2] == (int)in->t[i].group;
        char name[32];
        snprintf(name, sizeof name, "d:%d", i);
        const nbfx_entry *d = need(f, c->file, name, NBFX_F64, STEPS * in->t[i].numel);
        snprintf(name, sizeof name, "w20:%d", i);
        const nbfx_entry *w = need(f, c->file, name, NBFX_F64, in->t[i].numel);
        if (d) dref[i] = d->f64;
        if (w) w20[i] = w->f64;
        ok = ok && d && w;
    }
    CHECK(ok, "%s: fixture matches the inputs' tensors and holds every d:i, w20:i", c->file);
    nb_optim_params p;
    if (!ok || params_from(f, c->file, c->kind, &p)) { nbfx_free(f); return; }
    int rc = nb_optim_validate(&p);
    CHECK(rc == 0, "%s: the fixture's hyperparameters validate: %s", c->file, rc ? nb_last_error() : "");
    nb_optimizer *o = NULL;
    rc = nb_optimizer_create(&o, &p, in->t, N_T, in->n_params, NULL);
    CHECK(rc == 0 && o, "%s: nb_optimizer_create: %s", c->file, rc ? nb_last_error() : "");
    if (rc || !o) { nbfx_free(f); return; }

    size_t n = in->n_params;
    float *w = malloc(n * sizeof *w), *g = malloc(n * sizeof *g), *d = malloc(n * sizeof *d);
    double *wref = malloc(n * sizeof *wref);
    for (int i = 0; i < N_T; i++)
        for (size_t k = 0; k < in->t[i].numel; k++) {
            w[in->t[i].offset + k] = (float)in->w0[i][k];
            wref[in->t[i].offset + k] = in->w0[i][k];
        }
    double worst_d[N_T] = { 0 }, worst_w[N_T] = { 0 };
    int worst_d_step[N_T] = { 0 }, worst_w_step[N_T] = { 0 }, first_bad[N_T];
    for (int i = 0; i < N_T; i++) first_bad[i] = -1;
    for (int s = 0; s < STEPS; s++) {
        for (int i = 0; i < N_T; i++)
            for (size_t k = 0; k < in->t[i].numel; k++)
                g[in->t[i].offset + k] = (float)in->g[i][(size_t)s * in->t[i].numel + k];
        for (size_t k = 0; k < n; k++) d[k] = NAN;
        nb_optimizer_step(o, g, w, (float)in->lr[s], (float)in->aux_lr[s], d);
        for (size_t k = 0; k < n; k++) w[k] -= d[k];
        for (int i = 0; i < N_T; i++) {
            const nb_tensor *t = &in->t[i];
            const double *dr = dref[i] + (size_t)s * t->numel;
            for (size_t k = 0; k < t->numel; k++) wref[t->offset + k] -= dr[k];
            double ed = check_rel_err_d(d + t->offset, dr, t->numel, FLOOR);
            double ew = check_rel_err_d(w + t->offset, wref + t->offset, t->numel, FLOOR);
            if (!(ed <= worst_d[i])) { worst_d[i] = ed; worst_d_step[i] = s; }
            if (!(ew <= worst_w[i])) { worst_w[i] = ew; worst_w_step[i] = s; }
            if (first_bad[i] < 0 && !(ed <= c->tol_d && ew <= TOL_W)) {
                first_bad[i] = s;
                /* the largest elementwise discrepancy of that step, for diagnosis */
                size_t kk = 0;
                double big = -1;
                for (size_t k = 0; k < t->numel; k++) {
                    double e = fabs((double)d[t->offset + k] - dr[k]);
                    if (isnan(e)) e = INFINITY;
                    if (e > big) { big = e; kk = k; }
                }
                fprintf(stderr, "%s: %s: first failure at step %d: d rel err %.3e, w rel err %.3e; "
                        "element %zu: d = %.9g, reference %.9g (g = %.9g, lr %.6g, aux_lr %.6g)\n",
                        c->file, t->name, s, ed, ew, kk, (double)d[t->offset + kk], dr[kk],
                        (double)g[t->offset + kk], in->lr[s], in->aux_lr[s]);
            }
        }
    }
    CHECK(nb_optimizer_steps(o) == STEPS, "%s: nb_optimizer_steps %ld after %d steps", c->file,
          nb_optimizer_steps(o), STEPS);
    double wd_all = 0, ww_all = 0;
    for (int i = 0; i < N_T; i++) {
        const nb_tensor *t = &in->t[i];
        CHECK(worst_d[i] <= c->tol_d, "%s: %s: d rel err %.3e at step %d > %.1e", c->file, t->name, worst_d[i],
              worst_d_step[i], c->tol_d);
        CHECK(worst_w[i] <= TOL_W, "%s: %s: w rel err %.3e at step %d > %.1e", c->file, t->name, worst_w[i],
              worst_w_step[i], TOL_W);
        /* the fixture's own consistency: w0 - sum d == the reference's final weights */
        double e20 = 0, m20 = 0;
        for (size_t k = 0; k < t->numel; k++) {
            e20 = fmax(e20, fabs(wref[t->offset + k] - w20[i][k]));
            m20 = fmax(m20, fabs(w20[i][k]));
        }
        CHECK(e20 <= 1e-12 * m20, "%s: %s: fixture w0 - sum d vs w20: %.3e", c->file, t->name, e20);
        if (!(worst_d[i] <= wd_all)) wd_all = worst_d[i];
        if (!(worst_w[i] <= ww_all)) ww_all = worst_w[i];
    }
    printf("%-13s worst rel err: d %.2e (tol %.0e)  w %.2e (tol %.0e)   per tensor d:", c->file, wd_all, c->tol_d,
           ww_all, TOL_W);
    for (int i = 0; i < N_T; i++) printf(" %.1e", worst_d[i]);
    printf("\n");
    free(w);
    free(g);
    free(d);
    free(wref);
    nb_optimizer_free(o);
    nbfx_free(f);
}

int main(void) {
    nbfx *f = nbfx_load("tests/fixtures/optim_inputs.nbfx");
    CHECK(f != NULL, "load tests/fixtures/optim_inputs.nbfx");
    if (!f) return check_summary();
    inputs in;
    if (load_inputs(f, &in) == 0)
        for (size_t c = 0; c < sizeof CASES / sizeof CASES[0]; c++) run_case(&CASES[c], &in);
    nbfx_free(f);
    return check_summary();
}
