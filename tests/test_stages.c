/* Splitting the model into 1, 2 and 3 stages gives bitwise identical loss and gradients
 * (tied and untied, with two accumulated micro-batches); micro-batches in flight (sharing the
 * stage's scratch) give those of one at a time; seeded initialization does not
 * depend on the split; activation memory grows linearly with the context; bad
 * configurations and inputs are refused with a clear error. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "check.h"
#include "model_pass.h"
#include "model/stage.h"
#include "nobubble/model.h"

enum { B = 2, T = 16, M = 2 };

/* Runs M micro-batches through a model split by `split` and returns the mean loss; the
 * gradients are left in the stages. */
static float run(nb_model *m, const int *tok, const int *tgt) {
    nb_acts *acts[3];
    for (int i = 0; i < m->n_stages; i++) acts[i] = nb_acts_create(&m->stages[i], B, T);
    nb_model_zero_grads(m);
    float total = 0;
    for (int mb = 0; mb < M; mb++) {
        float loss = 0;
        CHECK(model_forward(m, acts, tok + mb * B * T, tgt + mb * B * T, &loss) == 0, "%s", nb_last_error());
        CHECK(model_backward(m, acts, 1.0f / M) == 0, "%s", nb_last_error());
        total += loss;
    }
    model_sum_tied_grads(m);
    for (int i = 0; i < m->n_stages; i++) nb_acts_free(acts[i]);
    return total;
}

/* Every tensor of b (found by name in a) has bitwise equal weights and gradients. */
static void compare_models(const nb_model *a, const nb_model *b, const char *what) {
    int compared = 0;
    for (int si = 0; si < b->n_stages; si++) {
        const nb_stage *sb = &b->stages[si];
        for (int ti = 0; ti < sb->n_tensors; ti++) {
            const nb_tensor *tb = &sb->tensors[ti];
            const char *name = tb->tied_copy ? "model.embed_tokens.weight" : tb->name;
            nb_stage *sa;
            const nb_tensor *ta = nb_model_find(a, name, &sa);
            CHECK(ta != NULL, "%s: tensor %s missing from the unsplit model", what, name);
            if (!ta) continue;
            CHECK(memcmp(sa->params + ta->offset, sb->params + tb->offset, sizeof(float) * ta->numel) == 0,
                  "%s: weights of %s differ", what, tb->name);
            CHECK(memcmp(sa->grads + ta->offset, sb->grads + tb->offset, sizeof(float) * ta->numel) == 0,
                  "%s: gradient of %s differs", what, tb->name);
            compared++;
        }
    }
    CHECK(compared >= 3 * 9 + 2, "%s: compared %d tensors", what, compared);
}

/* moe_every 0: dense; else 4 experts, 2 per token, in every block (1) or every other (2). */
static void check_splits(int tied, int moe_every) {
    nb_config cfg = {64, 32, 3, 4, 2, 48, 16, 10000.0, 1e-5, tied, 0, 0, 0, 0.0};
    if (moe_every) {
        cfg.n_experts = 4;
        cfg.experts_per_token = 2;
        cfg.moe_every = moe_every;
        cfg.aux_coef = 0.01;
    }
    int tok[M * B * T], tgt[M * B * T];
    srand(7);
    for (int i = 0; i < M * B * T; i++) { tok[i] = rand() % 64; tgt[i] = rand() % 64; }
    nb_model one, two, three;
    int split2[2] = {2, 1}, split3[3] = {1, 1, 1};
    CHECK(nb_model_create(&one, &cfg, 1, NULL, NULL) == 0, "%s", nb_last_error());
    CHECK(nb_model_create(&two, &cfg, 2, split2, NULL) == 0, "%s", nb_last_error());
    CHECK(nb_model_create(&three, &cfg, 3, split3, NULL) == 0, "%s", nb_last_error());
    nb_model_init(&one, 42);
    nb_model_init(&two, 42);
    nb_model_init(&three, 42);
    float l1 = run(&one, tok, tgt), l2 = run(&two, tok, tgt), l3 = run(&three, tok, tgt);
    printf("tied=%d, moe_every=%d: loss 1 stage %.9g, 2 stages %.9g, 3 stages %.9g\n", tied, moe_every, l1, l2, l3);
    CHECK(memcmp(&l1, &l2, sizeof l1) == 0 && memcmp(&l1, &l3, sizeof l1) == 0,
          "tied=%d: losses differ across splits", tied);
    compare_models(&one, &two, tied ? "tied, 2 stages" : "untied, 2 stages");
    compare_models(&one, &three, tied ? "tied, 3 stages" : "untied, 3 stages");
    if (tied) {  /* the last stage's copy of the embedding carries the summed gradient */
        const nb_stage *last = &three.stages[2];
        const nb_tensor *copy = &last->tensors[last->n_tensors - 1];
        CHECK(copy->tied_copy == 1, "the last stage of a tied split holds a tied copy");
    }
    /* Different seeds give different weights (the seed is used). */
    nb_model other;
    nb_model_create(&other, &cfg, 1, NULL, NULL);
    nb_model_init(&other, 43);
    CHECK(nb_model_weights_hash(&other) != nb_model_weights_hash(&one), "seed changes the weights");
    nb_model_free(&other);
    nb_model_free(&one);
    nb_model_free(&two);
    nb_model_free(&three);
}

static void check_init_statistics(const char *preset) {
    nb_config cfg;
    nb_config_preset(preset, &cfg);
    nb_model m;
    nb_model_create(&m, &cfg, 1, NULL, NULL);
    nb_model_init(&m, 1);
    const nb_stage *s = &m.stages[0];
    for (int ti = 0; ti < s->n_tensors; ti++) {
        const nb_tensor *t = &s->tensors[ti];
        double sum = 0, sq = 0;
        for (size_t i = 0; i < t->numel; i++) {
            sum += s->params[t->offset + i];
            sq += (double)s->params[t->offset + i] * s->params[t->offset + i];
        }
        double mean = sum / t->numel, sd = sqrt(sq / t->numel - mean * mean);
        if (t->group == NB_GROUP_GAIN) {
            CHECK(mean == 1.0 && sd < 1e-12, "%s: gains start at 1", t->name);
        } else {
            int out_proj = strstr(t->name, "o_proj") || strstr(t->name, "down_proj") || strstr(t->name, ".w2.");
            double want = 0.02 / (out_proj ? sqrt(2.0 * cfg.n_layers) : 1.0);
            CHECK(fabs(sd - want) < 0.05 * want && fabs(mean) < 0.05 * want,
                  "%s: std %.5f mean %.5f, expected N(0, %.5f)", t->name, sd, mean, want);
        }
    }
    nb_model_free(&m);
}

static void check_activation_memory(void) {
    nb_config cfg;
    nb_config_preset("tiny", &cfg);
    cfg.context = 4096;
    nb_model m;
    nb_model_create(&m, &cfg, 1, NULL, NULL);
    double per_token_1k = nb_acts_bytes(&m.stages[0], 1, 1024) / 1024.0;
    double per_token_4k = nb_acts_bytes(&m.stages[0], 1, 4096) / 4096.0;
    printf("activation bytes per token: T=1024 %.0f, T=4096 %.0f\n", per_token_1k, per_token_4k);
    CHECK(per_token_4k <= per_token_1k * 1.01, "activation memory grows linearly with T (no T x T matrix)");
    nb_model_free(&m);
}

static void check_bad_input(void) {
    nb_config base;
    CHECK(nb_config_preset("tiny", &base) == 0, "preset tiny");
    nb_config c = base;
    CHECK(nb_config_preset("huge", &c) == -1 && strstr(nb_last_error(), "huge"), "unknown preset named: %s", nb_last_error());
    c = base; c.d_model = 130;
    CHECK(nb_config_validate(&c) == -1 && strstr(nb_last_error(), "n_heads"), "d_model %% heads: %s", nb_last_error());
    c = base; c.n_kv_heads = 3;
    CHECK(nb_config_validate(&c) == -1 && strstr(nb_last_error(), "n_kv_heads"), "kv heads: %s", nb_last_error());
    c = base; c.n_layers = 0;
    CHECK(nb_config_validate(&c) == -1 && strstr(nb_last_error(), "n_layers"), "zero layers: %s", nb_last_error());
    c = base; c.d_ffn = -4;
    CHECK(nb_config_validate(&c) == -1 && strstr(nb_last_error(), "d_ffn"), "negative ffn: %s", nb_last_error());
    c = base;   /* found by fuzzing: an infinite theta was accepted and then written into config.json as inf;
                 * "inf" is no longer a number a field takes, and the check stays for other sources */
    CHECK(nb_config_override(&c, "rope_theta=inf") == -1 && strstr(nb_last_error(), "not a decimal number"),
          "rope_theta=inf: %s", nb_last_error());
    c.rope_theta = INFINITY;
    CHECK(nb_config_validate(&c) == -1 &&
              strstr(nb_last_error(), "rope_theta = inf: expected a finite number > 1"), "infinite rope_theta: %s",
          nb_last_error());
    c = base;
    CHECK(nb_config_override(&c, "d_model=abc") == -1 && strstr(nb_last_error(), "d_model"), "%s", nb_last_error());
    CHECK(nb_config_override(&c, "width=3") == -1 && strstr(nb_last_error(), "width"), "%s", nb_last_error());
    CHECK(nb_config_override(&c, "n_layers=2") == 0 && c.n_layers == 2, "override n_layers");
    nb_model m;
    CHECK(nb_model_create(&m, &base, 1, NULL, NULL) == 0, "%s", nb_last_error());
    CHECK(nb_acts_create(&m.stages[0], 1, base.context + 1) == NULL && strstr(nb_last_error(), "context"),
          "sequence longer than the context: %s", nb_last_error());
    nb_acts *a = nb_acts_create(&m.stages[0], 1, 4);
    int tok[4] = {1, 2, base.vocab_size, 3}, tgt[4] = {1, 2, 3, 4};
    float loss;
    CHECK(nb_stage_forward(&m.stages[0], m.stages[0].params, NB_VERSION_NONE, a, tok, NULL, tgt, &loss) == -1 &&
              strstr(nb_last_error(), "vocabulary"), "token outside the vocabulary: %s", nb_last_error());
    tok[2] = -1;
    CHECK(nb_stage_forward(&m.stages[0], m.stages[0].params, NB_VERSION_NONE, a, tok, NULL, tgt, &loss) == -1, "negative token id");
    int split[2] = {3, 3};
    nb_model bad;
    CHECK(nb_model_create(&bad, &base, 2, split, NULL) == -1 && strstr(nb_last_error(), "n_layers"), "bad split: %s", nb_last_error());
    CHECK(nb_model_create(&bad, &base, 9, NULL, NULL) == -1 && strstr(nb_last_error(), "stages"), "too many stages: %s", nb_last_error());
    nb_acts_free(a);
    nb_model_free(&m);
}

/* A last stage that computes its logits in chunks of rows (recomputed in backward) gives the loss and
 * gradients of the whole micro-batch's logits within rounding: a GEMM of 7 rows may add in another
 * order than one of 32, so logits can differ in their last bit; in fp32 that stays at float32's
 * rounding, under bf16 a last-bit change can move a gradient operand to the next bf16 value (2^-8
 * relative), hence the bf16 tolerance. A chunked slot keeps no logits (the chunk is the stage's
 * scratch): it is smaller by exactly the whole slot's logits (fp32: 4 bytes each) or their bf16
 * gradient (bf16: 2 bytes each). */
static void check_logit_chunks(nb_precision precision) {
    nb_config cfg;
    nb_config_preset("tiny", &cfg);
    cfg.n_layers = 1;
    cfg.vocab_size = 300;
    nb_model whole, chunked;
    CHECK(nb_model_create(&whole, &cfg, 1, NULL, NULL) == 0 && nb_model_create(&chunked, &cfg, 1, NULL, NULL) == 0, "create");
    nb_model_init(&whole, 5);
    nb_model_init(&chunked, 5);
    chunked.stages[0].logit_rows = 7;  /* 32 rows: chunks of 7, 7, 7, 7, 4 */
    nb_model_set_precision(&whole, precision, 2);
    nb_model_set_precision(&chunked, precision, 2);
    int tok[M * B * T], tgt[M * B * T];
    for (int i = 0; i < M * B * T; i++) tok[i] = (i * 31 + 7) % 300, tgt[i] = (i * 17 + 3) % 300;
    float lw = run(&whole, tok, tgt), lc = run(&chunked, tok, tgt);
    const double tol = precision == NB_PRECISION_BF16 ? 1e-2 : 1e-5;
    CHECK(fabsf(lw - lc) <= 1e-6f * lw, "%s: loss with chunks of 7 rows %.9g, whole %.9g", nb_precision_name(precision),
          lc, lw);
    const nb_stage *a = &whole.stages[0], *b = &chunked.stages[0];
    for (int ti = 0; ti < a->n_tensors; ti++) {
        const nb_tensor *t = &a->tensors[ti];
        double err = check_rel_err_f(b->grads + t->offset, a->grads + t->offset, t->numel, 1e-12);
        CHECK(err < tol, "%s: %s: gradient with logit chunks: relative error %.3g", nb_precision_name(precision), t->name,
              err);
    }
    nb_acts *slot = nb_acts_create(b, B, T);
    CHECK(nb_acts_logits(slot) == NULL, "a chunked slot gives no whole logits");
    /* (32 rows of 300 values: 9600 of them, 64-byte aligned in either precision) */
    const size_t kept = 32 * 300 * (precision == NB_PRECISION_BF16 ? 2 : 4);
    CHECK(nb_acts_bytes(a, B, T) - nb_acts_bytes(b, B, T) == kept, "%s: chunked slot bytes %zu, whole %zu",
          nb_precision_name(precision), nb_acts_bytes(b, B, T), nb_acts_bytes(a, B, T));
    nb_acts_free(slot);
    /* the automatic rule: whole logits up to 64 MiB, else chunks that fit (vocabulary 2^20: 16 rows), the
     * chunk held once in the stage's scratch, not in each slot */
    nb_config big = cfg;
    big.vocab_size = 1 << 20;
    big.d_model = 16;
    big.n_heads = 2;
    big.n_kv_heads = 2;
    big.d_ffn = 16;
    nb_model m;
    CHECK(nb_model_create(&m, &big, 1, NULL, NULL) == 0, "create big vocabulary");
    const size_t chunk = (size_t)16 << 22;  /* 16 rows of 2^20 floats: 64 MiB */
    size_t b16 = nb_acts_bytes(&m.stages[0], 1, 16), b32 = nb_acts_bytes(&m.stages[0], 2, 16);
    size_t s32 = nb_stage_scratch_bytes(&m.stages[0], 2, 16);
    CHECK(b16 >= chunk && b32 < (size_t)1 << 20, "16 rows of 2^20 logits are kept whole (%zu), 2 x 16 rows not (%zu)",
          b16, b32);
    CHECK(s32 >= chunk && s32 < chunk + ((size_t)1 << 20), "2 x 16 rows: one chunk of 16 rows in the scratch (%zu)", s32);
    nb_model_free(&m);
    nb_model_free(&whole);
    nb_model_free(&chunked);
}

/* Micro-batches in flight share their stage's scratch (model/acts.c) but not their slots: a pipeline's
 * order (forward 0, forward 1, backward 0, backward 1) gives bitwise the gradients and losses of one
 * micro-batch at a time (forward 0, backward 0, forward 1, backward 1), on two stages, whole logits and
 * chunks, in both precisions. Anything a backward reads that a later forward overwrote would differ. */
static void check_in_flight(nb_precision precision, int logit_rows) {
    nb_config cfg;
    nb_config_preset("tiny", &cfg);
    cfg.n_layers = 2;
    cfg.vocab_size = 300;
    nb_model one, both;
    CHECK(nb_model_create(&one, &cfg, 2, NULL, NULL) == 0 && nb_model_create(&both, &cfg, 2, NULL, NULL) == 0, "create");
    nb_model *ms[2] = {&one, &both};
    nb_acts *acts[2][2][2];  /* model, micro-batch, stage */
    int tok[2 * B * T], tgt[2 * B * T];
    for (int i = 0; i < 2 * B * T; i++) tok[i] = (i * 29 + 3) % 300, tgt[i] = (i * 13 + 8) % 300;
    for (int k = 0; k < 2; k++) {
        nb_model_init(ms[k], 11);
        ms[k]->stages[1].logit_rows = logit_rows;
        nb_model_set_precision(ms[k], precision, 2);
        nb_model_zero_grads(ms[k]);
        for (int mb = 0; mb < 2; mb++)
            for (int i = 0; i < 2; i++) acts[k][mb][i] = nb_acts_create(&ms[k]->stages[i], B, T);
    }
    float loss[2][2];
    for (int mb = 0; mb < 2; mb++) {
        CHECK(model_forward(&one, acts[0][mb], tok + mb * B * T, tgt + mb * B * T, &loss[0][mb]) == 0, "fwd");
        CHECK(model_backward(&one, acts[0][mb], 0.5f) == 0, "bwd");
    }
    for (int mb = 0; mb < 2; mb++)
        CHECK(model_forward(&both, acts[1][mb], tok + mb * B * T, tgt + mb * B * T, &loss[1][mb]) == 0, "fwd");
    for (int mb = 0; mb < 2; mb++) CHECK(model_backward(&both, acts[1][mb], 0.5f) == 0, "bwd");
    CHECK(loss[0][0] == loss[1][0] && loss[0][1] == loss[1][1], "%s: losses in flight", nb_precision_name(precision));
    for (int i = 0; i < 2; i++)
        CHECK(!memcmp(one.stages[i].grads, both.stages[i].grads, sizeof(float) * one.stages[i].n_params),
              "%s, logit rows %d: stage %d's gradients with two micro-batches in flight equal one at a time",
              nb_precision_name(precision), logit_rows, i);
    for (int k = 0; k < 2; k++) {
        for (int mb = 0; mb < 2; mb++)
            for (int i = 0; i < 2; i++) nb_acts_free(acts[k][mb][i]);
        nb_model_free(ms[k]);
    }
}

/* A stage without the head (the first of two) holds, per row of a micro-batch, one block's backward
 * gradients in float32: the residual stream's and the norm's (d each), q/k/v's, attention output's, and
 * SwiGLU's input and output gradients (2F and F); under bf16 the gate/up gradient goes straight to its
 * bf16 operand, so instead of the float32 2F it holds float32 q/k/v, attention's output and gate/up
 * while a pass runs, and a bf16 product gradient as wide as the widest of q/k/v and gate/up. */
static void check_scratch_sizes(void) {
    nb_config cfg;
    nb_config_preset("tiny", &cfg);
    nb_model m;
    CHECK(nb_model_create(&m, &cfg, 2, NULL, NULL) == 0, "create two stages");
    const size_t N = 2 * 16, d = (size_t)cfg.d_model, hd = d / cfg.n_heads, dq = hd * cfg.n_heads;
    const size_t qkv = dq + 2 * hd * cfg.n_kv_heads, F = (size_t)cfg.d_ffn, widest = qkv > 2 * F ? qkv : 2 * F;
    const size_t fp32 = 4 * N * (d + d + qkv + dq + 2 * F + F);
    const size_t bf16 = 4 * N * (d + d + qkv + dq + F) + 4 * N * (qkv + dq + 2 * F) + 2 * N * widest;
    CHECK(nb_stage_scratch_bytes(&m.stages[0], 2, 16) == fp32, "fp32 scratch of a stage without the head: %zu, want %zu",
          nb_stage_scratch_bytes(&m.stages[0], 2, 16), fp32);
    CHECK(nb_model_set_precision(&m, NB_PRECISION_BF16, 2) == 0, "bf16");
    CHECK(nb_stage_scratch_bytes(&m.stages[0], 2, 16) == bf16,
          "bf16 scratch of a stage without the head: %zu, want %zu (no float32 gate/up gradient)",
          nb_stage_scratch_bytes(&m.stages[0], 2, 16), bf16);
    nb_model_free(&m);
}

/* nb_stage.grads_done: during a whole backward each stage is told ranges that tile its gradient from the end to
 * the start, the ones nb_stage_grad_ranges lists, and each range's values when told are its values once the
 * backward is over (final: what data parallelism's buckets send), over splits into 1, 2 and 3 stages, tied and
 * untied, dense and MoE, fp32 and bf16. A split backward's B tells nothing (its W computes weight gradients). */
typedef struct {
    const nb_stage *st;
    size_t end;             /* the next range must end here (n_params at the start) */
    size_t starts[16];
    int n;
    float *seen;            /* the gradient's values as each range was told */
    int failed;
} grads_told;

static int record_grads(void *ctx, size_t offset, size_t n) {
    grads_told *g = ctx;
    if (offset + n != g->end || g->n == 16) g->failed = 1;
    else memcpy(g->seen + offset, g->st->grads + offset, sizeof(float) * n);
    g->end = offset;
    if (g->n < 16) g->starts[g->n++] = offset;
    return 0;
}

/* The backward split in two (ZB-H1): for M micro-batches in flight on 1 and 3 stages, every B (input
 * gradient) in the pipeline's order, then every W (weight gradients) in micro-batch order, against the
 * whole backward one micro-batch at a time: bitwise the same gradients and inputs' gradients. After the
 * B's alone the linear layers' weight gradients are still zero (W computes them) while the norms' are
 * not. logit_rows: the head's rows per chunk (0: whole); prec: fp32 or bf16. */
static void check_split_backward(int n_stages, int tied, int logit_rows, nb_precision prec, int moe_every) {
    nb_config cfg = {64, 32, 3, 4, 2, 48, 16, 10000.0, 1e-5, tied, 0, 0, 0, 0.0};
    if (moe_every) {  /* 4 experts, 2 per token, in every block (1) or every other (2) */
        cfg.n_experts = 4, cfg.experts_per_token = 2, cfg.moe_every = moe_every;
        cfg.aux_coef = 0.01;
    }
    int tok[M * B * T], tgt[M * B * T], split3[3] = {1, 1, 1};
    srand(11);
    for (int i = 0; i < M * B * T; i++) { tok[i] = rand() % 64; tgt[i] = rand() % 64; }
    nb_model whole, parts;
    const int *split = n_stages == 3 ? split3 : NULL;
    CHECK(nb_model_create(&whole, &cfg, n_stages, split, NULL) == 0, "%s", nb_last_error());
    CHECK(nb_model_create(&parts, &cfg, n_stages, split, NULL) == 0, "%s", nb_last_error());
    nb_model_init(&whole, 5);
    nb_model_init(&parts, 5);
    for (int i = 0; i < n_stages; i++) whole.stages[i].logit_rows = parts.stages[i].logit_rows = logit_rows;
    CHECK(nb_model_set_precision(&whole, prec, 2) == 0 && nb_model_set_precision(&parts, prec, 2) == 0, "%s",
          nb_last_error());
    run(&whole, tok, tgt);
    nb_acts *acts[M][3];
    nb_wgrad *g[M][3];
    nb_model_zero_grads(&parts);
    for (int mb = 0; mb < M; mb++)
        for (int i = 0; i < n_stages; i++) {
            acts[mb][i] = nb_acts_create(&parts.stages[i], B, T);
            g[mb][i] = nb_wgrad_create();
        }
    float loss;
    for (int mb = 0; mb < M; mb++)
        CHECK(model_forward(&parts, acts[mb], tok + mb * B * T, tgt + mb * B * T, &loss) == 0, "%s", nb_last_error());
    grads_told none = {.end = (size_t)-1};  /* B tells no range final: W has yet to add the weight gradients */
    for (int mb = 0; mb < M; mb++)
        for (int i = n_stages - 1; i >= 0; i--) {
            nb_stage *s = &parts.stages[i];
            const float *dout = i < n_stages - 1 ? nb_acts_input_grad(acts[mb][i + 1]) : NULL;
            s->grads_done = record_grads, s->grads_done_ctx = &none;
            CHECK(nb_stage_backward_input(s, s->params, NB_VERSION_NONE, acts[mb][i], dout, 1.0f / M, g[mb][i]) == 0,
                  "B: %s", nb_last_error());
            s->grads_done = NULL;
        }
    CHECK(none.n == 0, "B told %d ranges final", none.n);
    nb_stage *s0 = &parts.stages[0];
    const nb_tensor *qkv = nb_model_find(&parts, "model.layers.0.self_attn.q_proj.weight", NULL),
                    *ln = nb_model_find(&parts, "model.layers.0.input_layernorm.weight", NULL);
    CHECK(qkv && ln, "tensors found");
    if (qkv && ln) {
        double wq = 0, wl = 0;
        for (size_t k = 0; k < qkv->numel; k++) wq += fabs(s0->grads[qkv->offset + k]);
        for (size_t k = 0; k < ln->numel; k++) wl += fabs(s0->grads[ln->offset + k]);
        CHECK(wq == 0 && wl > 0, "after the B's: |dW_qkv| %g (expected 0), |d ln1| %g (expected > 0)", wq, wl);
    }
    for (int mb = 0; mb < M; mb++)
        for (int i = 0; i < n_stages; i++)
            CHECK(nb_stage_backward_weight(&parts.stages[i], g[mb][i]) == 0, "W: %s", nb_last_error());
    model_sum_tied_grads(&parts);
    char what[128];
    snprintf(what, sizeof what, "split backward, %d stage(s), tied %d, logit rows %d, %s, moe_every %d", n_stages, tied,
             logit_rows, nb_precision_name(prec), moe_every);
    compare_models(&whole, &parts, what);
    for (int mb = 0; mb < M; mb++)
        for (int i = 0; i < n_stages; i++) {
            nb_acts_free(acts[mb][i]);
            nb_wgrad_free(g[mb][i]);
        }
    nb_model_free(&whole);
    nb_model_free(&parts);
}

static void check_grads_done(int tied, int moe_every, nb_precision prec) {
    nb_config cfg = {64, 32, 3, 4, 2, 48, 16, 10000.0, 1e-5, tied, 0, 0, 0, 0.0};
    if (moe_every) cfg.n_experts = 4, cfg.experts_per_token = 2, cfg.moe_every = moe_every, cfg.aux_coef = 0.01;
    int tok[M * B * T], tgt[M * B * T];
    srand(11);
    for (int i = 0; i < M * B * T; i++) { tok[i] = rand() % 64; tgt[i] = rand() % 64; }
    for (int P = 1; P <= 3; P++) {
        nb_model m;
        const int split[3][3] = {{3}, {2, 1}, {1, 1, 1}};
        CHECK(nb_model_create(&m, &cfg, P, split[P - 1], NULL) == 0, "%s", nb_last_error());
        nb_model_init(&m, 5);
        nb_acts *acts[3];
        grads_told told[3];
        for (int i = 0; i < P; i++) {
            CHECK(nb_stage_set_precision(&m.stages[i], prec, 2) == 0, "%s", nb_last_error());
            acts[i] = nb_acts_create(&m.stages[i], B, T);
            told[i] = (grads_told){&m.stages[i], m.stages[i].n_params, {0}, 0,
                                   calloc(m.stages[i].n_params, sizeof(float)), 0};
        }
        nb_model_zero_grads(&m);
        for (int mb = 0; mb < M; mb++) {  /* the hook on the last micro-batch's backward: the values accumulate */
            for (int i = 0; mb == M - 1 && i < P; i++) m.stages[i].grads_done = record_grads, m.stages[i].grads_done_ctx = &told[i];
            float loss;
            CHECK(model_forward(&m, acts, tok + mb * B * T, tgt + mb * B * T, &loss) == 0, "%s", nb_last_error());
            CHECK(model_backward(&m, acts, 1.0f / M) == 0, "%s", nb_last_error());
        }
        for (int i = 0; i < P; i++) {
            const nb_stage *st = &m.stages[i];
            size_t want[16];
            const int n = nb_stage_grad_ranges(st, want);
            CHECK(!told[i].failed && told[i].end == 0 && told[i].n == n && n == st->n_blocks + st->has_embed + st->has_head,
                  "tied %d, moe %d, %s, stage %d of %d: ranges that tile the gradient from its end (%d told, %d listed)",
                  tied, moe_every, nb_precision_name(prec), i, P, told[i].n, n);
            for (int k = 0; k < n && k < told[i].n; k++)
                CHECK(told[i].starts[k] == want[k], "stage %d of %d: range %d starts at %zu, listed %zu", i, P, k,
                      told[i].starts[k], want[k]);
            CHECK(memcmp(told[i].seen, st->grads, sizeof(float) * st->n_params) == 0,
                  "tied %d, moe %d, %s, stage %d of %d: every range final when told", tied, moe_every,
                  nb_precision_name(prec), i, P);
            m.stages[i].grads_done = NULL;
            free(told[i].seen);
            nb_acts_free(acts[i]);
        }
        nb_model_free(&m);
    }
}

int main(void) {
    check_grads_done(0, 0, NB_PRECISION_FP32);
    check_grads_done(1, 0, NB_PRECISION_FP32);
    check_grads_done(1, 2, NB_PRECISION_FP32);
    check_grads_done(0, 1, NB_PRECISION_BF16);
    for (int p = 0; p < 2; p++) {
        const nb_precision prec = p ? NB_PRECISION_BF16 : NB_PRECISION_FP32;
        check_split_backward(1, 1, 0, prec, 0);
        check_split_backward(3, 0, 0, prec, 0);
        check_split_backward(3, 1, 24, prec, 0);
        check_split_backward(1, 0, 0, prec, 1);
        check_split_backward(3, 1, 0, prec, 2);
    }
    check_scratch_sizes();
    check_in_flight(NB_PRECISION_FP32, 0);
    check_in_flight(NB_PRECISION_FP32, 7);
    check_in_flight(NB_PRECISION_BF16, 0);
    check_in_flight(NB_PRECISION_BF16, 7);
    check_logit_chunks(NB_PRECISION_FP32);
    check_logit_chunks(NB_PRECISION_BF16);
    check_splits(0, 0);
    check_splits(1, 0);
    check_splits(0, 1);
    check_splits(1, 2);
    check_init_statistics("tiny");
    check_init_statistics("moe-tiny");
    check_activation_memory();
    check_bad_input();
    return check_summary();
}
