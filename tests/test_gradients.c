/* Gradients of every parameter tensor against central finite differences of an independent,
 * naive double-precision implementation of the same model (written here from the formulas,
 * sharing nothing with src/ but the tensor table's offsets). Then the float32 engine's loss
 * and logits against the double model. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "check.h"
#include "model_pass.h"
#include "nobubble/model.h"

typedef struct {
    const nb_config *c;
    const nb_stage *s;  /* one-stage layout: offsets by name */
    const double *w;
} ref_model;

static const double *W(const ref_model *r, const char *fmt, int layer) {
    char name[96];
    snprintf(name, sizeof name, fmt, layer);
    for (int i = 0; i < r->s->n_tensors; i++)
        if (!strcmp(r->s->tensors[i].name, name)) return r->w + r->s->tensors[i].offset;
    fprintf(stderr, "reference: no tensor %s\n", name);
    exit(2);
}

static void rms(double *y, const double *x, const double *g, int d, double eps) {
    double ss = 0;
    for (int i = 0; i < d; i++) ss += x[i] * x[i];
    double r = 1.0 / sqrt(ss / d + eps);
    for (int i = 0; i < d; i++) y[i] = x[i] * r * g[i];
}

/* y[out] = W[out][in] x[in] */
static void matvec(double *y, const double *w, const double *x, int out, int in) {
    for (int o = 0; o < out; o++) {
        double s = 0;
        for (int i = 0; i < in; i++) s += w[(size_t)o * in + i] * x[i];
        y[o] = s;
    }
}

static void rotate(double *v, int pos, int hd, double theta) {
    for (int i = 0; i < hd / 2; i++) {
        double a = pos * pow(theta, -2.0 * i / hd), c = cos(a), s = sin(a);
        double x1 = v[i], x2 = v[i + hd / 2];
        v[i] = x1 * c - x2 * s;
        v[i + hd / 2] = x2 * c + x1 * s;
    }
}

/* Expert e's matrix w1, w2 or w3 of MoE layer l. */
static const double *expert_w(const ref_model *r, int l, int e, int which) {
    char fmt[96];
    snprintf(fmt, sizeof fmt, "model.layers.%%d.block_sparse_moe.experts.%d.w%d.weight", e, which);
    return W(r, fmt, l);
}

/* A MoE layer (docs/moe.md) on the rows x[N][d] in place: x += sum over each token's k experts of its
 * renormalized weight times the expert's SwiGLU of the normalized row; returns the layer's
 * load-balancing loss E sum_e f_e P_e (f: the share of the assignments, P: the mean probability). */
static double moe_ref_layer(const ref_model *r, int l, double *x, int N) {
    const nb_config *c = r->c;
    const int d = c->d_model, F = c->d_ffn, E = c->n_experts, K = c->experts_per_token;
    double *h = calloc((size_t)d, sizeof(double)), *p = calloc((size_t)E, sizeof(double));
    double *g = calloc((size_t)F, sizeof(double)), *u = calloc((size_t)F, sizeof(double));
    double *y = calloc((size_t)d, sizeof(double)), *f = calloc((size_t)E, sizeof(double));
    double *P = calloc((size_t)E, sizeof(double));
    int *chosen = calloc((size_t)E, sizeof(int));
    for (int n = 0; n < N; n++) {
        double *xr = x + (size_t)n * d;
        rms(h, xr, W(r, "model.layers.%d.post_attention_layernorm.weight", l), d, c->norm_eps);
        matvec(p, W(r, "model.layers.%d.block_sparse_moe.gate.weight", l), h, E, d);
        double mx = -1e300, sum = 0, picked = 0;
        for (int e = 0; e < E; e++) mx = p[e] > mx ? p[e] : mx;
        for (int e = 0; e < E; e++) sum += (p[e] = exp(p[e] - mx));
        for (int e = 0; e < E; e++) P[e] += (p[e] /= sum) / N;
        memset(chosen, 0, sizeof(int) * (size_t)E);
        for (int j = 0; j < K; j++) {  /* the largest remaining, ties to the lower index */
            int best = -1;
            for (int e = 0; e < E; e++)
                if (!chosen[e] && (best < 0 || p[e] > p[best])) best = e;
            chosen[best] = 1;
            picked += p[best];
            f[best] += 1.0 / N;
        }
        for (int e = 0; e < E; e++) {
            if (!chosen[e]) continue;
            matvec(g, expert_w(r, l, e, 1), h, F, d);
            matvec(u, expert_w(r, l, e, 3), h, F, d);
            for (int i = 0; i < F; i++) g[i] = g[i] / (1 + exp(-g[i])) * u[i];
            matvec(y, expert_w(r, l, e, 2), g, d, F);
            for (int i = 0; i < d; i++) xr[i] += p[e] / picked * y[i];
        }
    }
    double aux = 0;
    for (int e = 0; e < E; e++) aux += f[e] * P[e];
    free(h); free(p); free(g); free(u); free(y); free(f); free(P); free(chosen);
    return E * aux;
}

/* Mean cross-entropy of the model in double; logits_out (optional) receives [B*T*V]. */
static double ref_loss_aux(const ref_model *r, const int *tok, const int *tgt, int B, int T, double *logits_out,
                           double *with_aux) {
    const nb_config *c = r->c;
    int d = c->d_model, H = c->n_heads, Hkv = c->n_kv_heads, hd = d / H, F = c->d_ffn, V = c->vocab_size;
    int N = B * T;
    double *x = calloc((size_t)N * d, sizeof(double)), *h = calloc((size_t)N * d, sizeof(double));
    double *q = calloc((size_t)N * H * hd, sizeof(double)), *k = calloc((size_t)N * Hkv * hd, sizeof(double));
    double *v = calloc((size_t)N * Hkv * hd, sizeof(double)), *att = calloc((size_t)N * H * hd, sizeof(double));
    double *tmp = calloc((size_t)(d > F ? d : F) * 2 + V, sizeof(double));
    double *g = calloc(F, sizeof(double)), *u = calloc(F, sizeof(double)), *p = calloc(T, sizeof(double));
    const double *emb = W(r, "model.embed_tokens.weight", 0);
    for (int n = 0; n < N; n++) memcpy(x + (size_t)n * d, emb + (size_t)tok[n] * d, sizeof(double) * d);
    double aux = 0;  /* the load-balancing term of a mixture of experts */
    for (int l = 0; l < c->n_layers; l++) {
        for (int n = 0; n < N; n++) {
            rms(h + (size_t)n * d, x + (size_t)n * d, W(r, "model.layers.%d.input_layernorm.weight", l), d, c->norm_eps);
            matvec(q + (size_t)n * H * hd, W(r, "model.layers.%d.self_attn.q_proj.weight", l), h + (size_t)n * d, H * hd, d);
            matvec(k + (size_t)n * Hkv * hd, W(r, "model.layers.%d.self_attn.k_proj.weight", l), h + (size_t)n * d, Hkv * hd, d);
            matvec(v + (size_t)n * Hkv * hd, W(r, "model.layers.%d.self_attn.v_proj.weight", l), h + (size_t)n * d, Hkv * hd, d);
            for (int hh = 0; hh < H; hh++) rotate(q + (size_t)n * H * hd + hh * hd, n % T, hd, c->rope_theta);
            for (int hh = 0; hh < Hkv; hh++) rotate(k + (size_t)n * Hkv * hd + hh * hd, n % T, hd, c->rope_theta);
        }
        for (int b = 0; b < B; b++)
            for (int hh = 0; hh < H; hh++) {
                int kv = hh / (H / Hkv);
                for (int t = 0; t < T; t++) {
                    const double *qr = q + ((size_t)b * T + t) * H * hd + hh * hd;
                    double mx = -1e300, sum = 0;
                    for (int s = 0; s <= t; s++) {
                        const double *kr = k + ((size_t)b * T + s) * Hkv * hd + kv * hd;
                        double sc = 0;
                        for (int i = 0; i < hd; i++) sc += qr[i] * kr[i];
                        p[s] = sc / sqrt((double)hd);
                        if (p[s] > mx) mx = p[s];
                    }
                    for (int s = 0; s <= t; s++) sum += (p[s] = exp(p[s] - mx));
                    double *o = att + ((size_t)b * T + t) * H * hd + hh * hd;
                    for (int i = 0; i < hd; i++) {
                        double acc = 0;
                        for (int s = 0; s <= t; s++) acc += p[s] / sum * v[((size_t)b * T + s) * Hkv * hd + kv * hd + i];
                        o[i] = acc;
                    }
                }
            }
        for (int n = 0; n < N; n++) {
            double *xr = x + (size_t)n * d;
            matvec(tmp, W(r, "model.layers.%d.self_attn.o_proj.weight", l), att + (size_t)n * H * hd, d, H * hd);
            for (int i = 0; i < d; i++) xr[i] += tmp[i];
        }
        if (nb_config_block_is_moe(c, l)) {  /* the objective adds aux_coef times the layers' mean aux */
            aux += c->aux_coef / nb_config_moe_blocks(c) * moe_ref_layer(r, l, x, N);
            continue;
        }
        for (int n = 0; n < N; n++) {
            double *xr = x + (size_t)n * d;
            rms(h, xr, W(r, "model.layers.%d.post_attention_layernorm.weight", l), d, c->norm_eps);
            matvec(g, W(r, "model.layers.%d.mlp.gate_proj.weight", l), h, F, d);
            matvec(u, W(r, "model.layers.%d.mlp.up_proj.weight", l), h, F, d);
            for (int i = 0; i < F; i++) g[i] = g[i] / (1 + exp(-g[i])) * u[i];
            matvec(tmp, W(r, "model.layers.%d.mlp.down_proj.weight", l), g, d, F);
            for (int i = 0; i < d; i++) xr[i] += tmp[i];
        }
    }
    const double *head = c->tied ? emb : W(r, "lm_head.weight", 0);
    double total = 0;
    for (int n = 0; n < N; n++) {
        rms(h, x + (size_t)n * d, W(r, "model.norm.weight", 0), d, c->norm_eps);
        double *z = tmp;
        matvec(z, head, h, V, d);
        double mx = -1e300, sum = 0;
        for (int i = 0; i < V; i++) mx = z[i] > mx ? z[i] : mx;
        for (int i = 0; i < V; i++) sum += exp(z[i] - mx);
        total += mx + log(sum) - z[tgt[n]];
        if (logits_out) memcpy(logits_out + (size_t)n * V, z, sizeof(double) * V);
    }
    free(x); free(h); free(q); free(k); free(v); free(att); free(tmp); free(g); free(u); free(p);
    if (with_aux) *with_aux = total / N + aux;
    return total / N;
}

/* The language-model loss (what training reports); ref_objective: with the auxiliary term (what the
 * gradients are of). */
static double ref_loss(const ref_model *r, const int *tok, const int *tgt, int B, int T, double *logits_out) {
    return ref_loss_aux(r, tok, tgt, B, T, logits_out, NULL);
}
static double ref_objective(const ref_model *r, const int *tok, const int *tgt, int B, int T) {
    double objective;
    ref_loss_aux(r, tok, tgt, B, T, NULL, &objective);
    return objective;
}

static void check_config(nb_config cfg, int B, int T, unsigned seed) {
    nb_model m;
    CHECK(nb_model_create(&m, &cfg, 1, NULL, NULL) == 0, "create: %s", nb_last_error());
    nb_stage *s = &m.stages[0];
    /* Weights large enough that every path matters (attention far from uniform). */
    srand(seed);
    for (int ti = 0; ti < s->n_tensors; ti++) {
        const nb_tensor *t = &s->tensors[ti];
        for (size_t i = 0; i < t->numel; i++) {
            double z = (rand() / (double)RAND_MAX - 0.5) * 2.0;
            s->params[t->offset + i] = (float)(t->group == NB_GROUP_GAIN ? 1.0 + 0.3 * z : 0.5 * z);
        }
    }
    int N = B * T;
    int *tok = malloc(sizeof(int) * N), *tgt = malloc(sizeof(int) * N);
    for (int n = 0; n < N; n++) { tok[n] = rand() % cfg.vocab_size; tgt[n] = rand() % cfg.vocab_size; }
    tok[1] = tok[3];  /* a repeated token: its embedding rows must accumulate */

    /* float32 engine: loss, logits, gradients */
    nb_acts *a = nb_acts_create(s, B, T);
    float loss;
    nb_model_zero_grads(&m);
    CHECK(model_forward(&m, &a, tok, tgt, &loss) == 0, "forward: %s", nb_last_error());
    float *logits = malloc(sizeof(float) * (size_t)N * cfg.vocab_size);
    memcpy(logits, nb_acts_logits(a), sizeof(float) * (size_t)N * cfg.vocab_size);
    CHECK(model_backward(&m, &a, 1.0f) == 0, "backward: %s", nb_last_error());
    model_sum_tied_grads(&m);

    /* double reference on the same (float-rounded) weights */
    double *w = malloc(sizeof(double) * s->n_params);
    for (size_t i = 0; i < s->n_params; i++) w[i] = s->params[i];
    ref_model r = {&cfg, s, w};
    double *ref_logits = malloc(sizeof(double) * (size_t)N * cfg.vocab_size);
    double ref = ref_loss(&r, tok, tgt, B, T, ref_logits);
    CHECK(fabs(loss - ref) <= 2e-6 * fabs(ref), "loss float %.9g vs double %.9g", loss, ref);
    double lerr = check_rel_err_d(logits, ref_logits, (size_t)N * cfg.vocab_size, 1e-12);
    CHECK(lerr < 1e-5, "logits: float32 vs double relative error %.3g", lerr);
    printf("config tied=%d: loss float %.9g double %.12g, logits rel err %.3g\n", cfg.tied, loss, ref, lerr);

    /* central differences in double, every parameter */
    double *fd = malloc(sizeof(double) * s->n_params);
    for (size_t i = 0; i < s->n_params; i++) {
        double keep = w[i], step = 1e-5;
        w[i] = keep + step;
        double up = ref_objective(&r, tok, tgt, B, T);
        w[i] = keep - step;
        double down = ref_objective(&r, tok, tgt, B, T);
        w[i] = keep;
        fd[i] = (up - down) / (2 * step);
    }
    for (int ti = 0; ti < s->n_tensors; ti++) {
        const nb_tensor *t = &s->tensors[ti];
        double err = check_rel_err_d(s->grads + t->offset, fd + t->offset, t->numel, 1e-12);
        printf("  %-45s rel err %.3g\n", t->name, err);
        CHECK(err < 2e-5, "gradient of %s: relative error %.3g against finite differences", t->name, err);
    }
    free(fd); free(w); free(ref_logits); free(logits); free(tok); free(tgt);
    nb_acts_free(a);
    nb_model_free(&m);
}

int main(void) {
    nb_config untied = {23, 16, 2, 4, 2, 20, 8, 10000.0, 1e-5, 0, 0, 0, 0, 0.0};  /* grouped-query, untied head */
    check_config(untied, 2, 7, 1);
    nb_config tied = {19, 12, 3, 2, 1, 14, 6, 300.0, 1e-5, 1, 0, 0, 0, 0.0};  /* multi-query, tied, other theta */
    check_config(tied, 3, 5, 2);
    /* Mixtures of experts: every block (4 experts, 2 per token, a large aux_coef so that its gradient
     * weighs), and every other block (3 experts, 1 per token: the router learns from the aux alone). */
    nb_config moe = {17, 12, 2, 2, 1, 10, 6, 10000.0, 1e-5, 0, 4, 2, 1, 0.3};
    check_config(moe, 2, 5, 3);
    nb_config moe_every_other = {15, 8, 3, 2, 2, 6, 5, 10000.0, 1e-5, 1, 3, 1, 2, 0.5};
    check_config(moe_every_other, 2, 4, 4);
    return check_summary();
}
