/* bf16 (docs/rules.md, section 5): the cast against hand-worked bit patterns, nb_gemm_bf16 against a
 * double-precision product of the same bf16 values (both of its paths: ctest runs this file again with
 * NB_GEMM=tiles:onednn), the bf16 model's gradients against the fp32 model's within a bf16 tolerance,
 * and the stage's cache of cast weight versions. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "backend/backend.h"
#include "check.h"
#include "model_pass.h"
#include "nobubble/model.h"
#include "util/error.h"

static float from_bits(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static void test_cast(void) {
    /* 1 + 2^-8 lies halfway between 1 (0x3f80) and 1 + 2^-7 (0x3f81): ties go to the even one, 0x3f80;
     * 1 + 3 * 2^-8 lies halfway between 0x3f81 and 0x3f82: to 0x3f82. Just past a tie rounds up. */
    CHECK(nb_bf16_from_float(1.0f) == 0x3f80, "1.0 -> %04x", nb_bf16_from_float(1.0f));
    CHECK(nb_bf16_from_float(1.0f + 0x1p-8f) == 0x3f80, "tie to even (down): %04x", nb_bf16_from_float(1.0f + 0x1p-8f));
    CHECK(nb_bf16_from_float(1.0f + 3 * 0x1p-8f) == 0x3f82, "tie to even (up): %04x",
          nb_bf16_from_float(1.0f + 3 * 0x1p-8f));
    CHECK(nb_bf16_from_float(from_bits(0x3f808001)) == 0x3f81, "past a tie rounds up");
    CHECK(nb_bf16_from_float(from_bits(0x3f807fff)) == 0x3f80, "below a tie rounds down");
    CHECK(nb_bf16_from_float(-2.5f) == 0xc020, "-2.5 -> %04x", nb_bf16_from_float(-2.5f));
    CHECK(nb_bf16_from_float(INFINITY) == 0x7f80 && nb_bf16_from_float(-INFINITY) == 0xff80, "infinities");
    CHECK(nb_bf16_from_float(from_bits(0x7f7fffff)) == 0x7f80, "FLT_MAX rounds to infinity");
    nb_bf16 nan = nb_bf16_from_float(from_bits(0x7f800001));  /* a signalling NaN whose payload is low */
    CHECK(isnan(nb_bf16_to_float(nan)) && (nan & 0x40), "a NaN stays a quiet NaN: %04x", nan);
    CHECK(nb_bf16_to_float(0x4049) == 3.140625f, "0x4049 -> %g", nb_bf16_to_float(0x4049));
    float x[3] = {1.0f + 0x1p-8f, 3.14159265f, -1e-3f};
    nb_bf16_round(x, 3);
    CHECK(x[0] == 1.0f && x[1] == 3.140625f && x[2] == nb_bf16_to_float(nb_bf16_from_float(-1e-3f)), "nb_bf16_round");
}

/* C = alpha op(A) op(B) + beta C on stored bf16 matrices with padded rows, against a double product of the
 * same values: the products are exact, so only float32 accumulation separates the two. */
static nb_backend *be;

static void check_gemm(int ta, int tb, int M, int N, int K, float alpha, float beta) {
    const int a_rows = ta ? K : M, a_cols = ta ? M : K, b_rows = tb ? N : K, b_cols = tb ? K : N;
    const int lda = a_cols + 3, ldb = b_cols + 5, ldc = N + 2;
    nb_bf16 *A = malloc(sizeof(nb_bf16) * (size_t)a_rows * lda), *B = malloc(sizeof(nb_bf16) * (size_t)b_rows * ldb);
    float *C = malloc(sizeof(float) * (size_t)M * ldc), *C0 = malloc(sizeof(float) * (size_t)M * ldc);
    for (int i = 0; i < a_rows * lda; i++) A[i] = nb_bf16_from_float(sinf(0.37f * i) * 2.0f);
    for (int i = 0; i < b_rows * ldb; i++) B[i] = nb_bf16_from_float(cosf(0.11f * i + 1.0f));
    for (int i = 0; i < M * ldc; i++) C[i] = C0[i] = 0.25f * (float)(i % 7) - 0.5f;
    nb_gemm_bf16(be, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    double worst = 0;
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double sum = 0, mag = 0;
            for (int k = 0; k < K; k++) {
                double a = nb_bf16_to_float(ta ? A[(size_t)k * lda + i] : A[(size_t)i * lda + k]);
                double b = nb_bf16_to_float(tb ? B[(size_t)j * ldb + k] : B[(size_t)k * ldb + j]);
                sum += a * b;
                mag += fabs(a * b);
            }
            double want = alpha * sum + beta * C0[(size_t)i * ldc + j];
            double bound = 2.0 * K * 0x1p-24 * (fabs(alpha) * mag + fabs(beta * C0[(size_t)i * ldc + j])) + 1e-30;
            double err = fabs(C[(size_t)i * ldc + j] - want) / bound;
            if (err > worst) worst = err;
        }
    /* the padding between rows stays untouched */
    int pad_ok = 1;
    for (int i = 0; i < M; i++)
        for (int j = N; j < ldc; j++) pad_ok &= C[(size_t)i * ldc + j] == C0[(size_t)i * ldc + j];
    CHECK(worst <= 1.0, "gemm_bf16 ta=%d tb=%d %dx%dx%d alpha %g beta %g: error %.3g of the float32 bound", ta, tb, M,
          N, K, alpha, beta, worst);
    CHECK(pad_ok, "gemm_bf16 ta=%d tb=%d wrote past N into the row padding", ta, tb);
    free(A);
    free(B);
    free(C);
    free(C0);
}

static void test_gemm(void) {
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++) {
            check_gemm(ta, tb, 17, 23, 40, 1.0f, 0.0f);
            check_gemm(ta, tb, 64, 33, 129, 0.5f, 1.0f);
            check_gemm(ta, tb, 5, 7, 3, -2.0f, 0.75f);
        }
    check_gemm(0, 1, 1, 1, 1, 1.0f, 0.0f);
    /* the same shape twice (the cached primitive): bitwise the same result */
    nb_bf16 A[12], B[12];
    float C1[9] = {0}, C2[9] = {0};
    for (int i = 0; i < 12; i++) A[i] = B[i] = nb_bf16_from_float(0.1f * i - 0.3f);
    nb_gemm_bf16(be, 0, 1, 3, 3, 4, 1.0f, A, 4, B, 4, 0.0f, C1, 3);
    nb_gemm_bf16(be, 0, 1, 3, 3, 4, 1.0f, A, 4, B, 4, 0.0f, C2, 3);
    CHECK(!memcmp(C1, C2, sizeof C1), "a repeated bf16 GEMM is bitwise the same");
}

/* tiny's settings with another shape. */
static nb_config small_config(int vocab, int d, int layers, int heads, int kv_heads, int ffn, int context) {
    nb_config cfg;
    nb_config_preset("tiny", &cfg);
    cfg.vocab_size = vocab;
    cfg.d_model = d;
    cfg.n_layers = layers;
    cfg.n_heads = heads;
    cfg.n_kv_heads = kv_heads;
    cfg.d_ffn = ffn;
    cfg.context = context;
    return cfg;
}

/* One forward and backward of a small model; its loss and per-tensor gradients. */
static float run_model(nb_model *m, nb_precision p, const int *tok, const int *tgt, int B, int T, float loss_scale,
                       float **grads) {
    CHECK(nb_model_set_precision(m, p, 2) == 0, "set precision: %s", nb_last_error());
    nb_acts *a = nb_acts_create(&m->stages[0], B, T);
    float loss = 0;
    nb_model_zero_grads(m);
    CHECK(model_forward(m, &a, tok, tgt, &loss) == 0, "forward: %s", nb_last_error());
    CHECK(model_backward(m, &a, loss_scale) == 0, "backward: %s", nb_last_error());
    model_sum_tied_grads(m);
    *grads = malloc(sizeof(float) * m->stages[0].n_params);
    memcpy(*grads, m->stages[0].grads, sizeof(float) * m->stages[0].n_params);
    nb_acts_free(a);
    return loss;
}

/* bf16 keeps 8 significant bits: each product's operands carry a relative error up to 2^-9, which over a
 * few layers leaves gradients within a few percent of fp32's (the tolerance stated in docs/precision.md:
 * 5% of each tensor's largest gradient). Errors of a wrong bf16 path (a missing cast, a wrong weight
 * version, a transposed operand) are of the order of the gradient itself. */
static void test_gradients(int tied, float loss_scale, int moe_every) {
    nb_config cfg = small_config(96, 64, 2, 4, 2, 160, 80);
    cfg.tied = tied;
    if (moe_every) {  /* a mixture of experts: 4 experts of width 80, 2 per token, in every (other) block */
        cfg.n_experts = 4, cfg.experts_per_token = 2, cfg.moe_every = moe_every, cfg.aux_coef = 0.01, cfg.d_ffn = 80;
    }
    nb_model m;
    CHECK(nb_model_create(&m, &cfg, 1, NULL, be) == 0, "create: %s", nb_last_error());
    nb_model_init(&m, 7);
    const int B = 2, T = 80, N = B * T;  /* T > 64: attention's query blocks of 64 rows both used */
    int *tok = malloc(sizeof(int) * N), *tgt = malloc(sizeof(int) * N);
    for (int n = 0; n < N; n++) {
        tok[n] = (n * 37 + 11) % cfg.vocab_size;
        tgt[n] = (n * 53 + 5) % cfg.vocab_size;
    }
    float *g32, *g16, *g16b;
    float l32 = run_model(&m, NB_PRECISION_FP32, tok, tgt, B, T, loss_scale, &g32);
    float l16 = run_model(&m, NB_PRECISION_BF16, tok, tgt, B, T, loss_scale, &g16);
    float l16b = run_model(&m, NB_PRECISION_BF16, tok, tgt, B, T, loss_scale, &g16b);
    const nb_stage *s = &m.stages[0];
    CHECK(fabsf(l16 - l32) < 5e-3f * l32 && l16 != l32, "loss bf16 %.7f vs fp32 %.7f", l16, l32);
    CHECK(l16 == l16b && !memcmp(g16, g16b, sizeof(float) * s->n_params), "bf16 twice: bitwise the same");
    double worst = 0;
    const char *worst_name = "";
    for (int ti = 0; ti < s->n_tensors; ti++) {
        const nb_tensor *t = &s->tensors[ti];
        double err = check_rel_err_f(g16 + t->offset, g32 + t->offset, t->numel, 1e-12);
        CHECK(err < 0.05, "%s: bf16 gradient vs fp32: relative error %.3g", t->name, err);
        CHECK(err > 1e-5, "%s: bf16 gradient equals fp32's (%.3g): the bf16 path did not run", t->name, err);
        if (err > worst) worst = err, worst_name = t->name;
    }
    printf("tied=%d, loss scale %g, moe_every %d: loss fp32 %.7f bf16 %.7f; largest gradient error %.3g (%s)\n",
           tied, loss_scale, moe_every, l32, l16, worst, worst_name);
    free(g32);
    free(g16);
    free(g16b);
    free(tok);
    free(tgt);
    nb_model_free(&m);
}

/* A weight version is cast once: the stage keeps its bf16 copy by the version's number. */
static void test_version_cache(void) {
    nb_config cfg = small_config(64, 32, 1, 2, 2, 64, 16);
    nb_model m;
    CHECK(nb_model_create(&m, &cfg, 1, NULL, be) == 0, "create: %s", nb_last_error());
    nb_model_init(&m, 3);
    nb_stage *s = &m.stages[0];
    CHECK(nb_stage_set_precision(s, NB_PRECISION_BF16, 2) == 0, "bf16: %s", nb_last_error());
    nb_acts *a = nb_acts_create(s, 1, 16);
    int tok[16], tgt[16];
    for (int i = 0; i < 16; i++) tok[i] = (i * 5) % 64, tgt[i] = (i * 7 + 1) % 64;
    float l_v1, l_v1_again, l_v2, l_none;
    CHECK(nb_stage_forward(s, s->params, 1, a, tok, NULL, tgt, &l_v1) == 0, "%s", nb_last_error());
    /* The blocks' matrices change (their products read the bf16 copy); gains and the embedding rows,
     * which are read in float32, do not. */
    for (int ti = 0; ti < s->n_tensors; ti++)
        if (s->tensors[ti].group == NB_GROUP_MATRIX)
            for (size_t i = 0; i < s->tensors[ti].numel; i++) s->params[s->tensors[ti].offset + i] *= 1.5f;
    CHECK(nb_stage_forward(s, s->params, 1, a, tok, NULL, tgt, &l_v1_again) == 0, "%s", nb_last_error());
    CHECK(nb_stage_forward(s, s->params, 2, a, tok, NULL, tgt, &l_v2) == 0, "%s", nb_last_error());
    CHECK(nb_stage_forward(s, s->params, NB_VERSION_NONE, a, tok, NULL, tgt, &l_none) == 0, "%s", nb_last_error());
    CHECK(l_v1 == l_v1_again, "version 1 reused its bf16 copy: %.7f vs %.7f", l_v1, l_v1_again);
    CHECK(l_v2 != l_v1 && l_none == l_v2, "a new version (%.7f) and an unnamed one (%.7f) are cast anew", l_v2, l_none);
    /* A slot made for fp32 is refused by a bf16 stage. */
    nb_acts *a32;
    CHECK(nb_stage_set_precision(s, NB_PRECISION_FP32, 1) == 0 && (a32 = nb_acts_create(s, 1, 16)), "fp32 slot");
    CHECK(nb_stage_set_precision(s, NB_PRECISION_BF16, 2) == 0, "bf16 again");
    CHECK(nb_stage_forward(s, s->params, 1, a32, tok, NULL, tgt, &l_v1) == -1 && strstr(nb_last_error(), "fp32"),
          "an fp32 slot on a bf16 stage is refused: %s", nb_last_error());
    CHECK(nb_stage_set_precision(s, NB_PRECISION_AUTO, 2) == -1, "a stage is fp32 or bf16, not auto");
    CHECK(nb_acts_logits(a) == NULL, "a bf16 slot keeps no float32 logits");
    /* What a slot holds per token, counted by hand for d = 32, 2 heads of 16 (q/k/v 96 wide, attention's
     * output 32), F = 64, V = 64, one block, the whole stage: tokens and targets (4 bytes each), the
     * residual stream (the block's input and output, and the stream after attention: 3 d floats),
     * RMSNorm's 1/rms (3 floats), the attention's log-sum-exp per head (2 floats), the final log-sum-exp
     * (1 float); then fp32 keeps ln1, ln2, the final norm (3 d), q/k/v, attention's output, gate/up,
     * SwiGLU's output and the logits in float32, bf16 keeps them in bf16 (the logits as their gradient).
     * Nothing else: a backward's gradients live in the stage's scratch, once per stage. Slots of 64 and
     * of 32 rows differ by 32 rows (every array is a multiple of 64 bytes at both sizes). */
    const size_t common = 4 * 2 + 4 * 3 * 32 + 4 * 3 + 4 * 2 + 4;
    const size_t halved = 3 * 32 + 96 + 32 + 2 * 64 + 64 + 64;
    const size_t per_token16 = common + 2 * halved, per_token32 = common + 4 * halved;
    size_t b16 = nb_acts_bytes(s, 4, 16), b16_half = nb_acts_bytes(s, 2, 16);
    CHECK(nb_stage_set_precision(s, NB_PRECISION_FP32, 1) == 0, "fp32");
    size_t b32 = nb_acts_bytes(s, 4, 16), b32_half = nb_acts_bytes(s, 2, 16);
    CHECK(b16 - b16_half == 32 * per_token16, "bf16 slot: %zu bytes per token, by hand %zu", (b16 - b16_half) / 32,
          per_token16);
    CHECK(b32 - b32_half == 32 * per_token32, "fp32 slot: %zu bytes per token, by hand %zu", (b32 - b32_half) / 32,
          per_token32);
    CHECK(b32 - b16 == 64 * 2 * halved, "activation bytes fp32 %zu, bf16 %zu", b32, b16);
    nb_acts_free(a);
    nb_acts_free(a32);
    nb_model_free(&m);
}

int main(void) {
    /* NB_GEMM picks the backend (ctest runs this file with tiles:onednn too: the other bf16 path) */
    int exit_code;
    if (!(be = check_env_backend(&exit_code))) return exit_code;
    printf("backend %s: bf16 products %s\n", nb_backend_name(be), be->bf16_native ? "on oneDNN's bf16 matmul" : "widened");
    test_cast();
    test_gemm();
    test_gradients(0, 1.0f, 0);
    test_gradients(1, 1.0f, 0);
    test_gradients(0, 0.25f, 0);  /* the loss scale of 4 micro-batches (bf16: the head products' alpha) */
    test_gradients(0, 1.0f, 1);   /* MoE in every block */
    test_gradients(1, 0.25f, 2);  /* MoE in every other block */
    test_version_cache();
    nb_backend_close(be);
    return check_summary();
}
