/* The mixture-of-experts block (src/layers/moe.c) against an independent double-precision implementation of
 * its rule (moe.h), written here with plain loops:
 * - the forward's output, load-balancing loss and expert loads, for k = 1, 2 and E;
 * - the gradient of every tensor (the router through the renormalized weights and the auxiliary loss, each
 *   expert's gate|up and down, and the input) against central finite differences of the double
 *   implementation, on an objective sum(c * out) + a * aux with random c and a;
 * - ties go to the lower index; a collapsed router (every token to the same experts) runs, the unused
 *   experts getting zero gradients and zero load;
 * - bitwise the same forward and backward at 1 and 3 threads;
 * - the same against a float64 PyTorch implementation with autograd (tools/reference/moe_reference.py,
 *   tests/fixtures/moe_block.nbfx): the experts chosen, the output, aux and every gradient;
 * - under bf16 (the products' operands in bf16, float32 accumulation): the same experts as the float
 *   implementation on the same bf16-rounded inputs, the aux loss within float rounding, the output and
 *   every gradient within a bf16 tolerance of the float layer's (itself checked above), and the same bits
 *   at 1 and 3 threads;
 * - the backward reads nothing of its scratch that it did not write (the scratch is filled with NaN
 *   between forward and backward, as a stage's shared scratch holds another pass's values);
 * - bad dimensions refused naming the field. */
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "check.h"
#include "fixture.h"
#include "layers/moe.h"
#include "util/error.h"

static uint64_t rng = 12345;
static double uniform(void) { /* in [-1, 1) */
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (double)(rng >> 11) / 4503599627370496.0 - 1.0;
}

/* ---- the reference, in double ---- */
typedef struct {
    moe_dims m;
    double *x, *wr, *wg, *wd;  /* input and weights */
} ref_block;

static double silu(double g) { return g / (1.0 + exp(-g)); }

/* out (N x d, overwritten) and aux; top (N x k) and the margin between the k-th and the next probability. */
static double ref_forward(const ref_block *b, double *out, int *top, double *margin) {
    const moe_dims m = b->m;
    double *p = malloc(sizeof(double) * m.E), *gu = malloc(sizeof(double) * 2 * m.F);
    double *P = calloc(m.E, sizeof(double)), *f = calloc(m.E, sizeof(double));
    *margin = INFINITY;
    for (int t = 0; t < m.N; t++) {
        const double *x = b->x + (size_t)t * m.d;
        double mx = -INFINITY, sum = 0;
        for (int e = 0; e < m.E; e++) {
            double z = 0;
            for (int i = 0; i < m.d; i++) z += x[i] * b->wr[(size_t)e * m.d + i];
            p[e] = z;
            mx = z > mx ? z : mx;
        }
        for (int e = 0; e < m.E; e++) sum += (p[e] = exp(p[e] - mx));
        for (int e = 0; e < m.E; e++) p[e] /= sum, P[e] += p[e] / m.N;
        int *tt = top + (size_t)t * m.k;
        double s = 0;
        for (int j = 0; j < m.k; j++) {
            int best = -1;
            for (int e = 0; e < m.E; e++) {
                int taken = 0;
                for (int i = 0; i < j; i++) taken |= tt[i] == e;
                if (!taken && (best < 0 || p[e] > p[best])) best = e;
            }
            tt[j] = best;
            s += p[best];
            f[best] += 1.0 / m.N;
        }
        double next = -1;  /* the largest probability not chosen */
        for (int e = 0; e < m.E; e++) {
            int taken = 0;
            for (int j = 0; j < m.k; j++) taken |= tt[j] == e;
            if (!taken && p[e] > next) next = p[e];
        }
        if (next >= 0 && p[tt[m.k - 1]] - next < *margin) *margin = p[tt[m.k - 1]] - next;
        double *o = out + (size_t)t * m.d;
        memset(o, 0, sizeof(double) * m.d);
        for (int j = 0; j < m.k; j++) {
            const int e = tt[j];
            const double w = p[e] / s, *wg = b->wg + (size_t)e * 2 * m.F * m.d, *wd = b->wd + (size_t)e * m.d * m.F;
            for (int r = 0; r < 2 * m.F; r++) {
                gu[r] = 0;
                for (int i = 0; i < m.d; i++) gu[r] += wg[(size_t)r * m.d + i] * x[i];
            }
            for (int i = 0; i < m.d; i++) {
                double y = 0;
                for (int q = 0; q < m.F; q++) y += wd[(size_t)i * m.F + q] * silu(gu[q]) * gu[m.F + q];
                o[i] += w * y;
            }
        }
    }
    double aux = 0;
    for (int e = 0; e < m.E; e++) aux += f[e] * P[e];
    free(p), free(gu), free(P), free(f);
    return m.E * aux;
}

/* sum(c * out) + a * aux */
static double objective(const ref_block *b, const double *c, double a) {
    const moe_dims m = b->m;
    double *out = malloc(sizeof(double) * m.N * m.d), margin;
    int *top = malloc(sizeof(int) * m.N * m.k);
    double aux = ref_forward(b, out, top, &margin), L = a * aux;
    for (int i = 0; i < m.N * m.d; i++) L += c[i] * out[i];
    free(out), free(top);
    return L;
}

/* ---- the layer under test, in float ---- */
typedef struct {
    float *x, *wr, *wg, *wd, *out, *dx, *gr, *gg, *gd, *load;
    int *top;  /* the layer's experts, slot by slot */
    double aux;
} run_out;

static void to_float(float *dst, const double *src, size_t n) {
    for (size_t i = 0; i < n; i++) dst[i] = (float)src[i];
}

static void run_layer(const ref_block *b, const double *c, double a, run_out *r) {
    const moe_dims m = b->m;
    const size_t nx = (size_t)m.N * m.d, nr = (size_t)m.E * m.d, ng = (size_t)m.E * 2 * m.F * m.d,
                 nd = (size_t)m.E * m.d * m.F;
    r->x = malloc(4 * nx), r->wr = malloc(4 * nr), r->wg = malloc(4 * ng), r->wd = malloc(4 * nd);
    r->out = calloc(nx, 4), r->dx = malloc(4 * nx), r->gr = calloc(nr, 4), r->gg = calloc(ng, 4), r->gd = calloc(nd, 4);
    r->load = malloc(4 * (size_t)m.E);
    to_float(r->x, b->x, nx), to_float(r->wr, b->wr, nr), to_float(r->wg, b->wg, ng), to_float(r->wd, b->wd, nd);
    float *dout = malloc(4 * nx);
    to_float(dout, c, nx);
    const nb_backend *be = nb_backend_default();
    moe_state *s = moe_state_create(be, &m);
    CHECK(s != NULL, "state: %s", s ? "ok" : nb_last_error());
    if (!s) exit(1);
    moe_forward(be, s, r->out, r->x, r->wr, r->wg, r->wd, r->load);
    memset(s->dy, 0xff, moe_scratch_bytes(&m));  /* the scratch (dy first) as a stage's: another pass's values (NaN here) */
    r->aux = s->aux;
    r->top = malloc(sizeof(int) * (size_t)m.N * m.k);
    memcpy(r->top, s->top, sizeof(int) * (size_t)m.N * m.k);
    moe_backward(be, s, r->dx, r->gr, r->gg, r->gd, dout, (float)a, r->x, r->wr, r->wg, r->wd);
    CHECK(nb_backend_check(be) == 0, "the backend's products: %s", nb_last_error());
    moe_state_free(be, s);
    free(dout);
}

static void free_run(run_out *r) {
    free(r->x), free(r->wr), free(r->wg), free(r->wd), free(r->out), free(r->dx), free(r->gr), free(r->gg), free(r->gd);
    free(r->load), free(r->top);
}

/* Central differences of the objective on every element of v (n of them), against the layer's g. */
static double fd_error(ref_block *b, double *v, size_t n, const float *g, const double *c, double a) {
    const double h = 1e-6;
    double worst = 0, scale = 1e-3;
    for (size_t i = 0; i < n; i++) scale = fmax(scale, fabs(g[i]));
    for (size_t i = 0; i < n; i++) {
        const double keep = v[i];
        v[i] = keep + h;
        const double up = objective(b, c, a);
        v[i] = keep - h;
        const double down = objective(b, c, a);
        v[i] = keep;
        worst = fmax(worst, fabs((up - down) / (2 * h) - g[i]) / scale);
    }
    return worst;
}

static void make_block(ref_block *b, moe_dims m, double router_scale) {
    b->m = m;
    b->x = malloc(sizeof(double) * m.N * m.d), b->wr = malloc(sizeof(double) * m.E * m.d);
    b->wg = malloc(sizeof(double) * m.E * 2 * m.F * m.d), b->wd = malloc(sizeof(double) * m.E * m.d * m.F);
    for (int i = 0; i < m.N * m.d; i++) b->x[i] = uniform();
    for (int i = 0; i < m.E * m.d; i++) b->wr[i] = router_scale * uniform();
    for (int i = 0; i < m.E * 2 * m.F * m.d; i++) b->wg[i] = 0.5 * uniform();
    for (int i = 0; i < m.E * m.d * m.F; i++) b->wd[i] = 0.5 * uniform();
}

static void free_block(ref_block *b) { free(b->x), free(b->wr), free(b->wg), free(b->wd); }

static void check_against_reference(moe_dims m) {
    ref_block b = {0};
    double margin = 0;
    double *out = malloc(sizeof(double) * m.N * m.d);
    int *top = malloc(sizeof(int) * m.N * m.k);
    /* draw until no token sits near a routing boundary, so that the differences never cross one */
    for (int tries = 0; tries < 100; tries++) {
        if (tries) free_block(&b);
        make_block(&b, m, 2.0);
        ref_forward(&b, out, top, &margin);
        if (margin > 1e-3) break;
    }
    const double aux_ref = ref_forward(&b, out, top, &margin);
    double *c = calloc((size_t)m.N * m.d, sizeof(double));
    for (int i = 0; i < m.N * m.d; i++) c[i] = uniform();
    const double a = 0.37;
    run_out r;
    run_layer(&b, c, a, &r);
    double err = 0;
    for (int i = 0; i < m.N * m.d; i++) err = fmax(err, fabs(r.out[i] - out[i]) / (1 + fabs(out[i])));
    CHECK(err < 1e-5, "E=%d k=%d: output within %.2g of the double reference", m.E, m.k, err);
    CHECK(fabs(r.aux - aux_ref) < 1e-6 * fmax(1, aux_ref), "E=%d k=%d: aux %.9g, reference %.9g", m.E, m.k, r.aux, aux_ref);
    double load_sum = 0;
    int load_ok = 1;
    for (int e = 0; e < m.E; e++) {
        int n = 0;
        for (int i = 0; i < m.N * m.k; i++) n += top[i] == e;
        load_ok &= fabs(r.load[e] - (double)n / (m.N * m.k)) < 1e-6;
        load_sum += r.load[e];
    }
    CHECK(load_ok && fabs(load_sum - 1) < 1e-6, "E=%d k=%d: loads are the reference's shares (sum %.7f)", m.E, m.k, load_sum);
    const double ex = fd_error(&b, b.x, (size_t)m.N * m.d, r.dx, c, a);
    const double er = fd_error(&b, b.wr, (size_t)m.E * m.d, r.gr, c, a);
    const double eg = fd_error(&b, b.wg, (size_t)m.E * 2 * m.F * m.d, r.gg, c, a);
    const double ed = fd_error(&b, b.wd, (size_t)m.E * m.d * m.F, r.gd, c, a);
    CHECK(ex < 1e-4 && er < 1e-4 && eg < 1e-4 && ed < 1e-4,
          "E=%d k=%d: gradients against finite differences: input %.2g, router %.2g, gate|up %.2g, down %.2g", m.E,
          m.k, ex, er, eg, ed);
    /* without the aux term the router still learns, through the renormalized weights alone (1 < k < E; with
     * k = 1 the one weight is always 1, with k = E every expert is chosen) */
    if (m.k > 1 && m.k < m.E) {
        run_out r0;
        run_layer(&b, c, 0.0, &r0);
        const double e0 = fd_error(&b, b.wr, (size_t)m.E * m.d, r0.gr, c, 0.0);
        double norm = 0;
        for (int i = 0; i < m.E * m.d; i++) norm += fabs(r0.gr[i]);
        CHECK(e0 < 1e-4 && norm > 0, "E=%d k=%d: the router's gradient through the weights alone (%.2g, norm %.3g)", m.E,
              m.k, e0, norm);
        free_run(&r0);
    }
    free_run(&r);
    free(c), free(out), free(top);
    free_block(&b);
}

static void check_threads_and_collapse(void) {
    const moe_dims m = {.N = 40, .d = 16, .F = 12, .E = 6, .k = 2};
    ref_block b;
    make_block(&b, m, 2.0);
    double *c = malloc(sizeof(double) * m.N * m.d);
    for (int i = 0; i < m.N * m.d; i++) c[i] = uniform();
    run_out one, three;
    omp_set_num_threads(1);
    run_layer(&b, c, 0.5, &one);
    omp_set_num_threads(3);
    run_layer(&b, c, 0.5, &three);
    omp_set_num_threads(2);
    const size_t nx = (size_t)m.N * m.d;
    CHECK(!memcmp(one.out, three.out, 4 * nx) && !memcmp(one.dx, three.dx, 4 * nx) &&
              !memcmp(one.gr, three.gr, 4 * (size_t)m.E * m.d) && !memcmp(one.gg, three.gg, 4 * (size_t)m.E * 2 * m.F * m.d) &&
              !memcmp(one.gd, three.gd, 4 * (size_t)m.E * m.d * m.F) && one.aux == three.aux,
          "1 and 3 threads: bitwise the same forward and backward");
    free_run(&one), free_run(&three);
    /* a collapsed router: every token prefers experts 4 then 1 */
    for (int e = 0; e < m.E; e++)
        for (int i = 0; i < m.d; i++) b.wr[(size_t)e * m.d + i] = 0;
    for (int t = 0; t < m.N; t++) b.x[(size_t)t * m.d] = 1.0 + 0.1 * fabs(uniform());
    b.wr[4 * m.d] = 8.0, b.wr[1 * m.d] = 4.0;
    run_out r;
    run_layer(&b, c, 0.5, &r);
    int zero_unused = 1;
    for (int e = 0; e < m.E; e++) {
        if (e == 1 || e == 4) continue;
        for (size_t i = 0; i < (size_t)2 * m.F * m.d; i++) zero_unused &= r.gg[(size_t)e * 2 * m.F * m.d + i] == 0;
        zero_unused &= r.load[e] == 0;
    }
    CHECK(r.load[4] == 0.5f && r.load[1] == 0.5f && zero_unused, "a collapsed router: loads 0.5 and 0.5 (%g, %g), the "
          "unused experts no load and no gradient", r.load[4], r.load[1]);
    CHECK(fabs(r.aux - m.E * (1.0 * 1.0)) < m.E, "a collapsed router: aux %.4g (near E (f=1) x (P of two experts))", r.aux);
    free_run(&r);
    /* ties: two experts with the same router row; the lower index is chosen first */
    const moe_dims t2 = {.N = 4, .d = 3, .F = 2, .E = 3, .k = 1};
    float x[12], wr[9] = {1, 0, 0, 1, 0, 0, 0, 0, 0}, wg[36] = {0}, wd[18] = {0}, out[12] = {0}, load[3];
    for (int i = 0; i < 12; i++) x[i] = 1.0f;
    moe_state *s = moe_state_create(nb_backend_default(), &t2);
    moe_forward(nb_backend_default(), s, out, x, wr, wg, wd, load);
    CHECK(s->top[0] == 0 && s->top[1] == 0 && load[0] == 1.0f, "a tie goes to the lower index (%d)", s->top[0]);
    moe_state_free(nb_backend_default(), s);
    free(c);
    free_block(&b);
}

/* ---- bf16 ---- */
static void round_bf16(double *v, size_t n) {
    for (size_t i = 0; i < n; i++) v[i] = nb_bf16_to_float(nb_bf16_from_float((float)v[i]));
}

static nb_bf16 *cast_bf16(const double *v, size_t n) {
    nb_bf16 *o = malloc(sizeof(nb_bf16) * n);
    for (size_t i = 0; i < n; i++) o[i] = nb_bf16_from_float((float)v[i]);
    return o;
}

/* ||a - b|| / ||b|| */
static double rel_diff(const float *a, const float *b, size_t n) {
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) num += ((double)a[i] - b[i]) * ((double)a[i] - b[i]), den += (double)b[i] * b[i];
    return sqrt(num / fmax(den, 1e-30));
}

/* The bf16 layer's forward and backward on b's (bf16-valued) arrays, at `threads` threads. */
static void run_layer_bf16(const ref_block *b, const double *c, double a, int threads, run_out *r) {
    moe_dims m = b->m;
    m.bf16 = 1;
    const size_t nx = (size_t)m.N * m.d, nr = (size_t)m.E * m.d, ng = (size_t)m.E * 2 * m.F * m.d,
                 nd = (size_t)m.E * m.d * m.F;
    nb_bf16 *x = cast_bf16(b->x, nx), *wr = cast_bf16(b->wr, nr), *wg = cast_bf16(b->wg, ng), *wd = cast_bf16(b->wd, nd);
    memset(r, 0, sizeof *r);
    r->out = calloc(nx, 4), r->dx = malloc(4 * nx), r->gr = calloc(nr, 4), r->gg = calloc(ng, 4), r->gd = calloc(nd, 4);
    r->load = malloc(4 * (size_t)m.E), r->top = malloc(sizeof(int) * (size_t)m.N * m.k);
    float *dout = malloc(4 * nx);
    to_float(dout, c, nx);
    const nb_backend *be = nb_backend_default();
    const int keep = omp_get_max_threads();
    omp_set_num_threads(threads);
    moe_state *s = moe_state_create(be, &m);
    CHECK(s != NULL, "bf16 state: %s", s ? "ok" : nb_last_error());
    if (!s) exit(1);
    moe_forward_bf16(be, s, r->out, x, wr, wg, wd, r->load);
    memset(s->dy, 0xff, moe_scratch_bytes(&m));  /* the scratch (dy first) holding another pass's values */
    r->aux = s->aux;
    memcpy(r->top, s->top, sizeof(int) * (size_t)m.N * m.k);
    moe_backward_bf16(be, s, r->dx, r->gr, r->gg, r->gd, dout, (float)a, x, wr, wg, wd);
    CHECK(nb_backend_check(be) == 0, "the backend's bf16 products: %s", nb_last_error());
    omp_set_num_threads(keep);
    moe_state_free(be, s);
    free(dout), free(x), free(wr), free(wg), free(wd);
}

static void check_bf16(moe_dims m) {
    ref_block b = {0};
    double margin = 0;
    double *out = malloc(sizeof(double) * m.N * m.d);
    int *top = malloc(sizeof(int) * m.N * m.k);
    for (int tries = 0; tries < 100; tries++) {  /* bf16 values, no token near a routing boundary */
        if (tries) free_block(&b);
        make_block(&b, m, 2.0);
        round_bf16(b.x, (size_t)m.N * m.d), round_bf16(b.wr, (size_t)m.E * m.d);
        round_bf16(b.wg, (size_t)m.E * 2 * m.F * m.d), round_bf16(b.wd, (size_t)m.E * m.d * m.F);
        ref_forward(&b, out, top, &margin);
        if (margin > 1e-3) break;
    }
    double *c = calloc((size_t)m.N * m.d, sizeof(double));
    for (int i = 0; i < m.N * m.d; i++) c[i] = uniform();
    const double a = 0.37;
    run_out f, h, h3;
    run_layer(&b, c, a, &f);  /* the float layer on the same values */
    run_layer_bf16(&b, c, a, 1, &h);
    run_layer_bf16(&b, c, a, 3, &h3);
    const size_t nx = (size_t)m.N * m.d, nr = (size_t)m.E * m.d, ng = (size_t)m.E * 2 * m.F * m.d,
                 nd = (size_t)m.E * m.d * m.F;
    CHECK(memcmp(h.top, top, sizeof(int) * (size_t)m.N * m.k) == 0, "bf16 E=%d k=%d: the reference's experts", m.E, m.k);
    CHECK(fabs(h.aux - f.aux) < 1e-5 * fmax(1, f.aux), "bf16 E=%d k=%d: aux %.9g, float %.9g", m.E, m.k, h.aux, f.aux);
    const double eo = rel_diff(h.out, f.out, nx), ex = rel_diff(h.dx, f.dx, nx), er = rel_diff(h.gr, f.gr, nr),
                 eg = rel_diff(h.gg, f.gg, ng), ed = rel_diff(h.gd, f.gd, nd);
    /* bf16 keeps 8 bits: gate|up, SwiGLU's output and the backward's operands each round by up to 2^-9 */
    CHECK(eo < 1e-2 && ex < 1e-2 && er < 1e-2 && eg < 1e-2 && ed < 1e-2,
          "bf16 E=%d k=%d: within a bf16 tolerance of the float layer: out %.2g, input %.2g, router %.2g, gate|up %.2g, "
          "down %.2g", m.E, m.k, eo, ex, er, eg, ed);
    CHECK(eo > 0 && eg > 0, "bf16 E=%d k=%d: the products did round (out %.2g)", m.E, m.k, eo);
    CHECK(!memcmp(h.out, h3.out, 4 * nx) && !memcmp(h.dx, h3.dx, 4 * nx) && !memcmp(h.gr, h3.gr, 4 * nr) &&
              !memcmp(h.gg, h3.gg, 4 * ng) && !memcmp(h.gd, h3.gd, 4 * nd),
          "bf16 E=%d k=%d: the same bits at 1 and 3 threads", m.E, m.k);
    free_run(&f), free_run(&h), free_run(&h3);
    free(c), free(out), free(top);
    free_block(&b);
}

static void check_refusals(void) {
    struct { moe_dims m; const char *want; } bad[] = {
        {{8, 4, 4, 0, 1, 0}, "n_experts = 0: expected 1 to 1024"},
        {{8, 4, 4, 1025, 1, 0}, "n_experts = 1025: expected 1 to 1024"},
        {{8, 4, 4, 4, 0, 0}, "experts_per_token = 0: expected 1 to n_experts (4)"},
        {{8, 4, 4, 4, 5, 0}, "experts_per_token = 5: expected 1 to n_experts (4)"},
        {{0, 4, 4, 4, 2, 0}, "MoE block of 0 tokens"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        CHECK(moe_state_create(nb_backend_default(), &bad[i].m) == NULL && strstr(nb_last_error(), bad[i].want),
              "refused: %s (%s)", bad[i].want, nb_last_error());
}

/* The fixture's double arrays as a reference block; NULL entries fail the check. */
static const double *entry(const nbfx *f, const char *name, size_t numel) {
    const nbfx_entry *e = nbfx_get(f, name);
    const int ok = e && e->f64 && e->numel == numel;
    CHECK(ok, "moe_block.nbfx has %s (%zu values)", name, numel);
    return ok ? e->f64 : NULL;
}

static void check_against_pytorch(void) {
    nbfx *f = nbfx_load("tests/fixtures/moe_block.nbfx");
    CHECK(f != NULL, "load tests/fixtures/moe_block.nbfx");
    if (!f) return;
    const nbfx_entry *dims = nbfx_get(f, "dims"), *top = nbfx_get(f, "top");
    if (!dims || !dims->i32 || dims->numel != 5 || !top || !top->i32) {
        CHECK(0, "moe_block.nbfx: dims and top");
        nbfx_free(f);
        return;
    }
    const moe_dims m = {.N = dims->i32[0], .d = dims->i32[1], .F = dims->i32[2], .E = dims->i32[3], .k = dims->i32[4]};
    const size_t nx = (size_t)m.N * m.d, nr = (size_t)m.E * m.d, ng = (size_t)m.E * 2 * m.F * m.d,
                 nd = (size_t)m.E * m.d * m.F;
    const double *x = entry(f, "x", nx), *wr = entry(f, "w_router", nr), *wg = entry(f, "w_gu", ng),
                 *wd = entry(f, "w_down", nd), *c = entry(f, "c", nx), *a = entry(f, "a", 1), *out = entry(f, "out", nx),
                 *aux = entry(f, "aux", 1), *gx = entry(f, "grad:x", nx), *gr = entry(f, "grad:w_router", nr),
                 *gg = entry(f, "grad:w_gu", ng), *gd = entry(f, "grad:w_down", nd);
    if (x && wr && wg && wd && c && a && out && aux && gx && gr && gg && gd) {
        ref_block b = {m, (double *)x, (double *)wr, (double *)wg, (double *)wd};
        run_out r;
        run_layer(&b, c, a[0], &r);
        int same = 1;
        for (size_t i = 0; i < (size_t)m.N * m.k; i++) same &= r.top[i] == top->i32[i];
        CHECK(same, "the layer's experts, slot by slot, are torch.topk's");
        CHECK(check_rel_err_d(r.out, out, nx, 1e-3) < 1e-5 && fabs(r.aux - aux[0]) < 1e-6 * fabs(aux[0]),
              "the output (%.2g) and aux (%.9g, torch %.9g) against PyTorch", check_rel_err_d(r.out, out, nx, 1e-3), r.aux,
              aux[0]);
        const double ex = check_rel_err_d(r.dx, gx, nx, 1e-3), er = check_rel_err_d(r.gr, gr, nr, 1e-3),
                     eg = check_rel_err_d(r.gg, gg, ng, 1e-3), ed = check_rel_err_d(r.gd, gd, nd, 1e-3);
        CHECK(ex < 1e-4 && er < 1e-4 && eg < 1e-4 && ed < 1e-4,
              "gradients against PyTorch's autograd: input %.2g, router %.2g, gate|up %.2g, down %.2g", ex, er, eg, ed);
        free_run(&r);
    }
    nbfx_free(f);
}

int main(void) {
    check_against_pytorch();
    check_against_reference((moe_dims){.N = 10, .d = 6, .F = 5, .E = 4, .k = 2});
    check_against_reference((moe_dims){.N = 9, .d = 5, .F = 4, .E = 5, .k = 1});
    check_against_reference((moe_dims){.N = 7, .d = 4, .F = 3, .E = 3, .k = 3});
    check_threads_and_collapse();
    check_bf16((moe_dims){.N = 24, .d = 16, .F = 12, .E = 4, .k = 2});
    check_bf16((moe_dims){.N = 17, .d = 8, .F = 6, .E = 3, .k = 1});
    check_refusals();
    return check_summary();
}
