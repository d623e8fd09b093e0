/* nobubble bench: per preset and thread count, the median time of a full training step
 * (forward, backward, AdamW, update) on random tokens, tokens/s, achieved GFLOP/s (the FLOP
 * count of nb_model_train_flops_per_token), the fraction of the fp32 peak measured in the same
 * run, and activation memory per token. */
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "backend/gemm.h"
#include "backend/peak.h"
#include "cli/args.h"
#include "cli/commands.h"
#include "nobubble/model.h"
#include "nobubble/optim.h"

static const char usage[] =
    "usage: nobubble bench [--models tiny,small,medium] [--threads 1,2] [--optimizer NAME] [--steps N] [--tokens N] [--json]\n"
    "Times full training steps (forward, backward, optimizer) of each preset on random tokens.";

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

typedef struct {
    double median_s, min_s, tokens_per_s, gflops, act_bytes_per_token, optimizer_s;
    int B, T;
} bench_result;

static double median_of(double *x, int n) {
    qsort(x, (size_t)n, sizeof(double), cmp_double);
    return n % 2 ? x[n / 2] : 0.5 * (x[n / 2 - 1] + x[n / 2]);
}

/* Median over `steps` timed steps after two warm-up steps; the optimizer's part (computing d
 * and applying it) is timed on its own too. */
static int bench_preset(const nb_config *cfg, const nb_optim_params *op, int tokens, int steps, bench_result *out) {
    nb_model m;
    if (nb_model_create(&m, cfg, 1, NULL)) return -1;
    nb_model_init(&m, 1);
    nb_stage *s = &m.stages[0];
    int T = cfg->context, B = tokens / T > 0 ? tokens / T : 1;
    nb_acts *a = nb_acts_create(s, B, T);
    nb_optimizer *opt;
    if (nb_optimizer_create(&opt, op, s->tensors, s->n_tensors, s->n_params)) {
        nb_acts_free(a);
        nb_model_free(&m);
        return -1;
    }
    float *d = calloc(s->n_params, sizeof(float));
    int *tok = malloc(sizeof(int) * (size_t)B * T), *tgt = malloc(sizeof(int) * (size_t)B * T);
    srand(1);
    for (int i = 0; i < B * T; i++) { tok[i] = rand() % cfg->vocab_size; tgt[i] = rand() % cfg->vocab_size; }
    double *times = malloc(sizeof(double) * (size_t)(steps + 2)), *opt_times = malloc(sizeof(double) * (size_t)(steps + 2));
    for (int i = 0; i < steps + 2; i++) {
        double t0 = now();
        float loss;
        nb_model_zero_grads(&m);
        nb_model_forward(&m, NULL, &a, tok, tgt, &loss);
        nb_model_backward(&m, NULL, &a, 1.0f);
        nb_model_sum_tied_grads(&m);
        double t1 = now();
        nb_optimizer_step(opt, s->grads, s->params, 1e-4f, 1e-4f, d);
        for (size_t k = 0; k < s->n_params; k++) s->params[k] -= d[k];
        times[i] = now() - t0;
        opt_times[i] = now() - t1;
    }
    out->B = B;
    out->T = T;
    out->median_s = median_of(times + 2, steps);
    out->min_s = times[2];
    out->optimizer_s = median_of(opt_times + 2, steps);
    out->tokens_per_s = B * T / out->median_s;
    out->gflops = out->tokens_per_s * nb_model_train_flops_per_token(cfg, T) * 1e-9;
    out->act_bytes_per_token = (double)nb_acts_bytes(s, B, T) / (B * T);
    free(times); free(opt_times); free(tok); free(tgt); free(d);
    nb_optimizer_free(opt);
    nb_acts_free(a);
    nb_model_free(&m);
    return 0;
}

int cmd_bench(int argc, char **argv) {
    const char *models = "tiny,small,medium", *threads_list = "1,2";
    int steps = 5, tokens = 2048, json = 0;
    const char *optimizer = "adamw";
    const cli_option opts[] = {
        {"--models", OPT_STR, &models, "LIST   comma-separated presets (tiny,small,medium)"},
        {"--threads", OPT_STR, &threads_list, "LIST   comma-separated thread counts (1,2)"},
        {"--steps", OPT_INT, &steps, "N      timed steps per measurement, after 2 warm-up steps (5)"},
        {"--tokens", OPT_INT, &tokens, "N      tokens per step: B = N / context sequences (2048)"},
        {"--optimizer", OPT_STR, &optimizer, "NAME   the optimizer of the timed steps (adamw)"},
        {"--json", OPT_FLAG, &json, "       print the results as JSON"},
    };
    int rc = cli_parse(usage, argc, argv, opts, (int)(sizeof opts / sizeof opts[0]));
    if (rc) return rc > 0 ? 0 : 2;
    if (steps < 1 || tokens < 1) {
        fprintf(stderr, "nobubble bench: --steps and --tokens must be >= 1\n");
        return 2;
    }
    nb_optimizer_kind kind;
    if (nb_optimizer_parse(optimizer, &kind)) {
        fprintf(stderr, "nobubble bench: %s\n", nb_last_error());
        return 2;
    }
    nb_optim_params op = nb_optim_defaults(kind);
    op.weight_decay = 0.1f;
    int threads[16], n_threads = 0;
    char buf[256];
    snprintf(buf, sizeof buf, "%s", threads_list);
    for (char *t = strtok(buf, ","); t && n_threads < 16; t = strtok(NULL, ",")) {
        char *end;
        long v = strtol(t, &end, 10);
        if (*end || v < 1 || v > 1024) {
            fprintf(stderr, "nobubble bench: --threads '%s': expected a comma-separated list of positive integers\n", threads_list);
            return 2;
        }
        threads[n_threads++] = (int)v;
    }
    char mbuf[256];
    snprintf(mbuf, sizeof mbuf, "%s", models);
    const char *names[16];
    int n_models = 0;
    for (char *t = strtok(mbuf, ","); t && n_models < 16; t = strtok(NULL, ",")) {
        nb_config c;
        if (nb_config_preset(t, &c)) {
            fprintf(stderr, "nobubble bench: --models: %s\n", nb_last_error());
            return 2;
        }
        names[n_models++] = t;
    }
    if (json) printf("{\"gemm\": \"%s\", \"results\": [", nb_gemm_backend());
    else printf("GEMM backend: %s; FLOPs per token = 6 x matrix params (head included) + 6 x layers x d_attn x (T+1)\n", nb_gemm_backend());
    int first = 1;
    for (int ti = 0; ti < n_threads; ti++) {
        const char *isa;
        double peak = nb_measure_fp32_peak(threads[ti], 0.5, &isa);
        omp_set_num_threads(threads[ti]);
        for (int mi = 0; mi < n_models; mi++) {
            nb_config c;
            nb_config_preset(names[mi], &c);
            bench_result r;
            if (bench_preset(&c, &op, tokens, steps, &r)) {
                fprintf(stderr, "nobubble bench: %s\n", nb_last_error());
                return 1;
            }
            if (json) {
                printf("%s\n  {\"model\": \"%s\", \"threads\": %d, \"optimizer\": \"%s\", \"batch\": %d, \"seq\": %d, "
                       "\"median_step_s\": %.6f, \"median_optimizer_s\": %.6f, \"tokens_per_s\": %.1f, \"gflops\": %.2f, "
                       "\"peak_gflops\": %.2f, \"peak_isa\": \"%s\", \"fraction_of_peak\": %.4f, "
                       "\"activation_bytes_per_token\": %.0f}",
                       first ? "" : ",", names[mi], threads[ti], optimizer, r.B, r.T, r.median_s, r.optimizer_s,
                       r.tokens_per_s, r.gflops, peak, isa, r.gflops / peak, r.act_bytes_per_token);
            } else {
                printf("%-12s threads %d  B %2d x T %4d  step %8.1f ms (median of %d; %s %.1f%%)  %8.0f tok/s  %6.1f GFLOP/s  "
                       "%5.1f%% of measured peak %.0f GFLOP/s (%s)  activations %.1f KiB/token\n",
                       names[mi], threads[ti], r.B, r.T, r.median_s * 1e3, steps, optimizer, 100 * r.optimizer_s / r.median_s,
                       r.tokens_per_s, r.gflops, 100 * r.gflops / peak, peak, isa, r.act_bytes_per_token / 1024);
            }
            fflush(stdout);
            first = 0;
        }
    }
    if (json) printf("\n]}\n");
    return 0;
}
