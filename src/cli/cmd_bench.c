/* nobubble bench: per thread count, preset, optimizer and delay, the median time of a full
 * training step (forward, backward, optimizer, update) on random tokens, tokens/s, achieved
 * GFLOP/s (the FLOP count of nb_model_train_flops_per_token), the fraction of the fp32 peak
 * measured in the same run, the optimizer's share of the step, the share spent outside GEMMs,
 * activation memory per token (what each micro-batch in flight holds; the stage's scratch, shared by
 * them, apart) and the memory the delay keeps (weight versions, EF buffer). */
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "backend/backend.h"
#include "backend/peak.h"
#include "cli/args.h"
#include "cli/commands.h"
#include "util/clock.h"
#include "nobubble/delay.h"
#include "nobubble/model.h"
#include "nobubble/optim.h"
#include "nobubble/train.h"

static const char usage[] =
    "usage: nobubble bench [--models tiny,small,medium] [--threads 1,2] [--optimizers adamw] [--delays sync]\n"
    "                      [--precisions fp32,bf16] [--steps N] [--seq T] [--batch B | --tokens N] [--json]\n"
    "                      [--no-memory-check]\n"
    "Times full training steps (forward, backward, optimizer, update) of each preset on random tokens.\n"
    "A step is B sequences of T tokens: T = --seq (default: each preset's context), B = --batch, or\n"
    "--tokens / T (default 2048 / T). A --seq above a preset's context raises that preset's context to it\n"
    "for the benchmark (only the RoPE tables depend on it; no weight does).\n"
    "--delays takes sync, 2bw, pipedream, fixed:TAU, each optionally with +ef (e.g. sync,2bw,2bw+ef).\n"
    "--precisions takes fp32, bf16 and auto (bf16 where the CPU has bf16 instructions, as train's --precision).";


static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median_of(double *x, int n) {
    qsort(x, (size_t)n, sizeof(double), cmp_double);
    return n % 2 ? x[n / 2] : 0.5 * (x[n / 2 - 1] + x[n / 2]);
}

typedef struct {
    double median_s, tokens_per_s, gflops, act_bytes_per_token, scratch_bytes, optimizer_s, weight_bytes, delay_bytes;
    double gemm_s, outside_gemm_share;
    int B, T;
    nb_precision precision;
} bench_result;

/* Median over `steps` timed steps after two warm-up steps; the optimizer's part (computing d and
 * applying it through the delay's stash) is timed on its own too, and so is the time inside GEMMs
 * (nb_gemm_timing, src/backend/backend.h: per-thread GEMMs, Muon's, count wall / threads;
 * attention's register tiles are not GEMM time). */
/* Whether a measurement fits: bench_one's model, slot, optimizer and versions are one training process's
 * with one stage and no validation, which nb_train_memory_estimate counts. */
static int bench_fits(const nb_config *cfg, const nb_optim_params *op, const nb_delay_options *delay,
                      nb_precision precision, int B, int T, int steps, int check) {
    nb_train_options o;
    nb_train_defaults(&o);
    o.model = *cfg;
    o.optim = *op;
    o.delay = *delay;
    o.precision = precision;
    o.batch = B;
    o.seq_len = T;
    o.steps = steps + 2;
    nb_memory_estimate mem;
    if (nb_train_memory_estimate(&o, &mem)) {
        fprintf(stderr, "nobubble bench: %s\n", nb_last_error());
        return -1;
    }
    return cli_memory_check("bench", &mem, check);
}

static int bench_one(const nb_config *cfg, const nb_optim_params *op, const nb_delay_options *delay,
                     nb_precision precision, int B, int T, int steps, bench_result *out) {
    memset(out, 0, sizeof *out);
    nb_model m;
    if (nb_model_create(&m, cfg, 1, NULL, cli_backend())) return -1;
    nb_model_init(&m, 1);
    nb_stage *s = &m.stages[0];
    /* as training runs it: each weight version cast to bf16 once (by its number, below) */
    if (nb_stage_set_precision(s, precision, nb_delay_tau_max(delay, 0, 1) + 2)) {
        nb_model_free(&m);
        return -1;
    }
    nb_acts *a = nb_acts_create(s, B, T);
    nb_optimizer *opt = NULL;
    nb_stash *stash = NULL;
    if (!a || nb_optimizer_create(&opt, op, s->tensors, s->n_tensors, s->n_params, s->backend) ||
        nb_optimizer_set_precision(opt, precision) ||
        nb_stash_create(&stash, delay, 0, 1, steps + 2, s->params, s->n_params)) {
        nb_optimizer_free(opt);
        nb_acts_free(a);
        nb_model_free(&m);
        return -1;
    }
    float *d = calloc(s->n_params, sizeof(float));
    int *tok = malloc(sizeof(int) * (size_t)B * T), *tgt = malloc(sizeof(int) * (size_t)B * T);
    srand(1);
    for (int i = 0; i < B * T; i++) { tok[i] = rand() % cfg->vocab_size; tgt[i] = rand() % cfg->vocab_size; }
    double *times = malloc(sizeof(double) * (size_t)(steps + 2)), *opt_times = malloc(sizeof(double) * (size_t)(steps + 2));
    double *gemm_times = malloc(sizeof(double) * (size_t)(steps + 2)), *outside = malloc(sizeof(double) * (size_t)(steps + 2));
    int rc = 0;
    for (int i = 0; i < steps + 2; i++) {
        nb_gemm_timing(1);
        double t0 = nb_now(), upd = 0, dist = 0;
        const float *w = nb_stash_weights(stash, s->params, i);
        const int version = i - nb_stash_tau(stash, i) > 0 ? i - nb_stash_tau(stash, i) : 0;
        float loss;
        nb_model_zero_grads(&m);
        if (nb_stage_forward(s, w, version, a, tok, NULL, tgt, &loss) || nb_stage_backward(s, w, version, a, NULL, 1.0f)) {
            rc = -1;
            break;
        }
        nb_model_sum_tied_grads(&m);
        nb_stash_taylor(stash, s->grads, s->params, i);
        double t1 = nb_now();
        if ((rc = nb_optimizer_step(opt, s->grads, s->params, 1e-4f, 1e-4f, d))) break;
        nb_stash_apply(stash, s->params, d, i, &upd, &dist);
        times[i] = nb_now() - t0;
        opt_times[i] = nb_now() - t1;
        gemm_times[i] = nb_gemm_seconds();
        outside[i] = 1.0 - gemm_times[i] / times[i];
    }
    nb_gemm_timing(0);
    if (rc) goto done;  /* nb_last_error says why */
    out->B = B;
    out->T = T;
    out->precision = precision;
    out->median_s = median_of(times + 2, steps);
    out->optimizer_s = median_of(opt_times + 2, steps);
    out->gemm_s = median_of(gemm_times + 2, steps);
    out->outside_gemm_share = median_of(outside + 2, steps);
    out->tokens_per_s = B * T / out->median_s;
    out->gflops = out->tokens_per_s * nb_model_train_flops_per_token(cfg, T) * 1e-9;
    out->act_bytes_per_token = (double)nb_acts_bytes(s, B, T) / (B * T);  /* one slot: per micro-batch in flight */
    out->scratch_bytes = (double)nb_stage_scratch_bytes(s, B, T);           /* once per stage */
    out->weight_bytes = sizeof(float) * (double)s->n_params;
    out->delay_bytes = (double)nb_stash_bytes(stash);
done:
    free(times); free(opt_times); free(gemm_times); free(outside); free(tok); free(tgt); free(d);
    nb_stash_free(stash);
    nb_optimizer_free(opt);
    nb_acts_free(a);
    nb_model_free(&m);
    return rc;
}

/* Splits flag's comma-separated list into buf (size bytes) and items; returns the count, 1 to max, or
 * -1 after printing why (an empty list or item, too many items, too long). */
static int split_list(const char *flag, const char *text, char *buf, size_t size, const char **items, int max) {
    if ((size_t)snprintf(buf, size, "%s", text) >= size) {
        fprintf(stderr, "nobubble bench: %s '%.40s...': longer than %zu characters\n", flag, text, size - 1);
        return -1;
    }
    int n = 0;
    for (char *p = buf;; n++) {
        char *comma = strchr(p, ',');
        if (comma) *comma = 0;
        if (!*p || n == max) {
            fprintf(stderr, "nobubble bench: %s '%s': %s\n", flag, text,
                    n == max ? "too many items (at most 16)" : "expected a comma-separated list of non-empty items");
            return -1;
        }
        items[n] = p;
        if (!comma) return n + 1;
        p = comma + 1;
    }
}

/* The step's shape for one preset: T = seq (0: the preset's context; above it, the context is raised
 * to T, which changes no weight), B = batch, or tokens / T (at least 1). -1 after printing why. */
static int bench_shape(const char *model, nb_config *cfg, int seq, int batch, int tokens, int *B, int *T) {
    *T = seq ? seq : cfg->context;
    if (*T > cfg->context) cfg->context = *T;
    *B = batch ? batch : (tokens / *T > 0 ? tokens / *T : 1);
    if (nb_config_validate(cfg) || nb_config_check_batch(cfg, *B, *T)) {
        fprintf(stderr, "nobubble bench: --models %s with --seq %d and --batch %d: %s\n", model, *T, *B, nb_last_error());
        return -1;
    }
    return 0;
}

int cmd_bench(int argc, char **argv) {
    const char *models = "tiny,small,medium", *threads_list = "1,2", *optimizers = "adamw", *delays = "sync";
    const char *precisions = "fp32";
    int steps = 5, tokens = 0, seq = 0, batch = 0, json = 0, no_memory_check = 0;
    const cli_option opts[] = {
        {"--models", OPT_STR, &models, "LIST   comma-separated presets (tiny,small,medium)"},
        {"--threads", OPT_STR, &threads_list, "LIST   comma-separated thread counts (1,2)"},
        {"--optimizers", OPT_STR, &optimizers, "LIST   optimizers of the timed steps (adamw)"},
        {"--delays", OPT_STR, &delays, "LIST   delays of the timed steps, e.g. sync,2bw,2bw+ef (sync)"},
        {"--precisions", OPT_STR, &precisions, "LIST   fp32, bf16, auto (fp32)"},
        {"--steps", OPT_INT, &steps, "N      timed steps per measurement, after 2 warm-up steps (5) " CLI_RANGE(1, 10000)},
        {"--seq", OPT_INT, &seq, "T      tokens per sequence (each preset's context; above it, the context is raised) "
                                 CLI_RANGE(1, 1048576)},
        {"--batch", OPT_INT, &batch, "B      sequences per step (--tokens / T) " CLI_RANGE(1, 65536)},
        {"--tokens", OPT_INT, &tokens, "N      tokens per step when --batch is not given: B = N / T (2048) "
                                       CLI_RANGE(1, 16777216)},
        {"--json", OPT_FLAG, &json, "       print the results as JSON"},
        CLI_MEMORY_OPTION(no_memory_check),
    };
    int rc = cli_parse(usage, argc, argv, opts, (int)(sizeof opts / sizeof opts[0]));
    if (rc) return rc > 0 ? 0 : 2;
    if (batch && tokens) {
        fprintf(stderr, "nobubble bench: --batch %d and --tokens %d: give one of them (--tokens N means --batch N / T)\n",
                batch, tokens);
        return 2;
    }
    if (!tokens) tokens = 2048;
    char tbuf[256], mbuf[256], obuf[256], dbuf[256], pbuf[256];
    const char *titems[16], *mitems[16], *oitems[16], *ditems[16], *pitems[16];
    int nt = split_list("--threads", threads_list, tbuf, sizeof tbuf, titems, 16);
    int nm = nt < 0 ? -1 : split_list("--models", models, mbuf, sizeof mbuf, mitems, 16);
    int no = nm < 0 ? -1 : split_list("--optimizers", optimizers, obuf, sizeof obuf, oitems, 16);
    int nd = no < 0 ? -1 : split_list("--delays", delays, dbuf, sizeof dbuf, ditems, 16);
    int np = nd < 0 ? -1 : split_list("--precisions", precisions, pbuf, sizeof pbuf, pitems, 16);
    if (np < 0) return 2;
    nb_precision precs[16];
    for (int i = 0; i < np; i++) {
        if (!strcmp(pitems[i], "fp32")) precs[i] = NB_PRECISION_FP32;
        else if (!strcmp(pitems[i], "bf16")) precs[i] = NB_PRECISION_BF16;
        else if (!strcmp(pitems[i], "auto")) precs[i] = nb_precision_choose(NB_PRECISION_AUTO);
        else {
            fprintf(stderr, "nobubble bench: --precisions '%s': expected a comma-separated list of fp32, bf16, auto\n",
                    precisions);
            return 2;
        }
    }
    int threads[16];
    nb_config cfgs[16];
    int Bs[16], Ts[16], contexts[16];
    nb_optim_params ops[16];
    nb_delay_options dls[16];
    for (int i = 0; i < nt; i++) {
        char *end;
        long v = strtol(titems[i], &end, 10);
        if (end == titems[i] || *end || v < 1 || v > 1024) {
            fprintf(stderr, "nobubble bench: --threads '%s': expected a comma-separated list of positive integers\n",
                    threads_list);
            return 2;
        }
        if (cli_check_threads("bench", "--threads", (int)v)) return 2;
        threads[i] = (int)v;
    }
    for (int i = 0; i < nm; i++) {
        if (nb_config_preset(mitems[i], &cfgs[i])) {
            fprintf(stderr, "nobubble bench: --models: %s\n", nb_last_error());
            return 2;
        }
        contexts[i] = cfgs[i].context;
        if (bench_shape(mitems[i], &cfgs[i], seq, batch, tokens, &Bs[i], &Ts[i])) return 2;
    }
    for (int i = 0; i < no; i++) {
        /* The optimizer as `nobubble train --optimizer NAME` runs it: the settings table's defaults. */
        nb_train_options run;
        nb_settings_args given;
        nb_train_defaults(&run);
        nb_settings_begin(&given, &run);
        if (nb_settings_arg(&given, "--optimizer", oitems[i]) || nb_settings_finish(&given)) {
            fprintf(stderr, "nobubble bench: --optimizers: %s\n", nb_last_error());
            return 2;
        }
        ops[i] = run.optim;
    }
    for (int i = 0; i < nd; i++) {
        char mode[64];
        snprintf(mode, sizeof mode, "%s", ditems[i]);
        char *plus = strstr(mode, "+ef");
        memset(&dls[i], 0, sizeof dls[i]);
        dls[i].ef_alpha = 1.0f;
        if (plus && !plus[3]) {
            *plus = 0;
            dls[i].ef = 1;
        }
        if (nb_delay_parse(mode, &dls[i])) {
            fprintf(stderr, "nobubble bench: --delays: %s\n", nb_last_error());
            return 2;
        }
    }
    /* Every measurement checked before the first runs (a refusal after minutes of others helps no one). */
    for (int mi = 0; mi < nm; mi++)
        for (int oi = 0; oi < no; oi++)
            for (int di = 0; di < nd; di++)
                for (int pi = 0; pi < np; pi++)
                    if (bench_fits(&cfgs[mi], &ops[oi], &dls[di], precs[pi], Bs[mi], Ts[mi], steps, !no_memory_check))
                        return 1;
    const char *bf16_how = nb_backend_bf16_native(cli_backend()) ? "oneDNN bf16 matmul (bf16 instructions)"
                                            : "emulated: widened to fp32 GEMMs (no bf16 instructions)";
    if (json)
        printf("{\"gemm\": \"%s\", \"cpu_isa\": \"%s\", \"bf16_native\": %s, \"results\": [", nb_backend_label(cli_backend()),
               nb_cpu_isa_name(), nb_bf16_native() ? "true" : "false");
    else
        printf("GEMM backend: %s; oneDNN ISA %s, bf16 %s; auto chooses %s\n"
               "FLOPs per token = 6 x matrix params (head included) + 6 x layers x d_attn x (T+1)\n",
               nb_backend_label(cli_backend()), nb_cpu_isa_name(), bf16_how, nb_precision_name(nb_precision_choose(NB_PRECISION_AUTO)));
    for (int i = 0; i < nm && !json; i++)
        if (cfgs[i].context != contexts[i])
            printf("%s: context raised from %d to --seq %d for the benchmark (no weight depends on it)\n", mitems[i],
                   contexts[i], cfgs[i].context);
    int first = 1;
    for (int ti = 0; ti < nt; ti++) {
        const char *isa;
        double peak = nb_measure_fp32_peak(threads[ti], 0.5, &isa);
        omp_set_num_threads(threads[ti]);
        for (int mi = 0; mi < nm; mi++)
            for (int oi = 0; oi < no; oi++)
                for (int di = 0; di < nd; di++)
                for (int pi = 0; pi < np; pi++) {
                    bench_result r;
                    if (bench_one(&cfgs[mi], &ops[oi], &dls[di], precs[pi], Bs[mi], Ts[mi], steps, &r)) {
                        fprintf(stderr, "nobubble bench: %s\n", nb_last_error());
                        return 1;
                    }
                    if (json) {
                        printf("%s\n  {\"model\": \"%s\", \"threads\": %d, \"optimizer\": \"%s\", \"delay\": \"%s\", "
                               "\"precision\": \"%s\", "
                               "\"batch\": %d, \"seq\": %d, \"median_step_s\": %.6f, \"median_optimizer_s\": %.6f, "
                               "\"tokens_per_s\": %.1f, \"gflops\": %.2f, \"peak_gflops\": %.2f, \"peak_isa\": \"%s\", "
                               "\"fraction_of_peak\": %.4f, \"activation_bytes_per_token\": %.0f, \"scratch_bytes\": %.0f, "
                               "\"weight_bytes\": %.0f, "
                               "\"delay_bytes\": %.0f, \"median_gemm_s\": %.6f, \"outside_gemm_share\": %.4f, "
                               "\"context\": %d, \"preset_context\": %d}",
                               first ? "" : ",", mitems[mi], threads[ti], oitems[oi], ditems[di],
                               nb_precision_name(r.precision), r.B, r.T, r.median_s,
                               r.optimizer_s, r.tokens_per_s, r.gflops, peak, isa, r.gflops / peak,
                               r.act_bytes_per_token, r.scratch_bytes, r.weight_bytes, r.delay_bytes, r.gemm_s,
                               r.outside_gemm_share,
                               cfgs[mi].context, contexts[mi]);
                    } else {
                        printf("%-12s threads %d  %-6s %-10s %-4s B %2d x T %4d  step %8.1f ms (median of %d; optimizer %4.1f%%, outside GEMMs %4.1f%%)  "
                               "%7.0f tok/s  %6.1f GFLOP/s = %4.1f%% of measured peak %.0f (%s)  activations %.1f KiB/token "
                               "(+ scratch %.1f MiB)  delay memory %.2f x weights\n",
                               mitems[mi], threads[ti], oitems[oi], ditems[di], nb_precision_name(r.precision), r.B, r.T,
                               r.median_s * 1e3, steps,
                               100 * r.optimizer_s / r.median_s, 100 * r.outside_gemm_share, r.tokens_per_s, r.gflops, 100 * r.gflops / peak, peak, isa,
                               r.act_bytes_per_token / 1024, r.scratch_bytes / (1 << 20), r.delay_bytes / r.weight_bytes);
                    }
                    fflush(stdout);
                    first = 0;
                }
    }
    if (json) printf("\n]}\n");
    return 0;
}
