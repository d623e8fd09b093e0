/* nobubble bench: per thread count, preset, optimizer and delay, the median time of the trainer's own
 * step: each measurement is `nobubble train` (nb_train, the executor that every run goes through) on
 * random tokens, and its figures are the executor's timings of each step (nb_train_options.step_times):
 * the step's wall time, tokens/s, achieved GFLOP/s (the FLOP count of nb_model_train_flops_per_token),
 * the fraction of the fp32 peak measured in the same run, the update's share of the step (the
 * gradient's completion, clipping, the optimizer, the delay's apply), the share spent outside GEMMs (and, for
 * a mixture of experts, in its routing: nb_routing_seconds),
 * activation memory per token (what each micro-batch in flight holds; the stage's scratch, shared by
 * them, apart) and the memory the delay keeps (weight versions, EF buffer). */
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "backend/backend.h"
#include "backend/peak.h"
#include "cli/args.h"
#include "cli/commands.h"
#include "nobubble/data.h"
#include "nobubble/delay.h"
#include "nobubble/model.h"
#include "nobubble/optim.h"
#include "nobubble/train.h"
#include "util/error.h"
#include "util/fs.h"
#include "util/rng.h"

static const char usage[] =
    "usage: nobubble bench [--models tiny,small,medium] [--threads 1,2] [--optimizers adamw] [--delays sync]\n"
    "                      [--precisions fp32,bf16] [--steps N] [--seq T] [--batch B | --tokens N] [--json]\n"
    "                      [--no-memory-check]\n"
    "Times the trainer's own step: each measurement is `nobubble train` (its defaults for the optimizer, one\n"
    "process, one stage) on random tokens in a temporary shard, 2 warm-up steps and N timed ones, and reports\n"
    "the medians of the executor's per-step timings: the step (forward, backward, the gradient's completion,\n"
    "clipping, the optimizer and the update), the update's part (\"optimizer\", median_optimizer_s: every\n"
    "action after the backwards, not only the optimizer's as before issue 37), and the part in GEMMs.\n"
    "A step is B sequences of T tokens: T = --seq (default: each preset's context), B = --batch, or\n"
    "--tokens / T (default 2048 / T). A --seq above a preset's context raises that preset's context to it\n"
    "for the benchmark (only the RoPE tables depend on it; no weight does).\n"
    "--delays takes sync, 2bw, pipedream, fixed:TAU, each optionally with +ef (e.g. sync,2bw,2bw+ef).\n"
    "--precisions takes fp32, bf16 and auto (bf16 where the CPU has bf16 instructions, as train's --precision).";

/* Warm-up steps before the timed ones (the first steps touch fresh memory and fill caches). */
enum { WARMUP_STEPS = 2 };

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
    double gemm_s, outside_gemm_share, routing_share;
    uint64_t weights_hash;  /* the run's final weights: those of the same `nobubble train` (tests/cli_bench.sh) */
    int B, T;
    nb_precision precision;
} bench_result;

/* The run a measurement makes: `nobubble train --optimizer NAME` (run_of_optimizer: the settings
 * table's defaults for it) with the model, delay, precision and step shape given, WARMUP_STEPS + steps
 * steps, one process and one stage, quiet; the data comes later (bench_one). */
static nb_train_options bench_run(const nb_train_options *run_of_optimizer, const nb_config *cfg,
                                  const nb_delay_options *delay, nb_precision precision, int B, int T, int steps) {
    nb_train_options o = *run_of_optimizer;
    o.model = *cfg;
    o.delay = *delay;
    o.precision = precision;
    o.batch = B;
    o.seq_len = T;
    o.steps = steps + WARMUP_STEPS;
    o.gemm = cli_backend_env();  /* NB_GEMM's backend, as every command's (NULL: the build's default) */
    o.quiet = 1;
    o.memory_check = 0;          /* checked before the first measurement (bench_fits), --no-memory-check obeyed */
    return o;
}

/* Whether a measurement fits: the run's own estimate (nb_train_memory_estimate). */
static int bench_fits(const nb_train_options *o, int check) {
    nb_memory_estimate mem;
    if (nb_train_memory_estimate(o, &mem)) {
        fprintf(stderr, "nobubble bench: %s\n", nb_last_error());
        return -1;
    }
    return cli_memory_check("bench", &mem, check);
}

/* The data of a measurement: random tokens written as one shard into dir, which the run reads with the
 * real loader, as `train` reads its data. A shard rather than an in-memory source so that the timed
 * step is the trainer's in every part, the loader's copy of each batch included, and the library
 * keeps no data path of the benchmark's own; it is a few MB at most (page cache, not disk speed). It
 * holds the batches of at most DATA_STEPS steps; a longer run reads them again (the loader's next
 * epoch, which costs the same). The tokens are uniform over the vocabulary, seeded (every run of the
 * bench reads the same ones). The shard's path goes to path. */
enum { DATA_STEPS = 8 };
static void shard_path(const char *dir, char *path, size_t size) {
    snprintf(path, size, "%s/random_train_000000.bin", dir);
}

static int write_random_shard(const char *dir, const nb_train_options *o, char *path, size_t size) {
    const int steps = o->steps < DATA_STEPS ? o->steps : DATA_STEPS;
    const size_t n = (size_t)steps * o->batch * o->seq_len + 1;  /* windows of T + 1 tokens share one */
    uint32_t *tokens = malloc(sizeof(uint32_t) * n);
    if (!tokens) return nb_fail("out of memory for %zu random tokens", n);
    nb_rng rng = nb_rng_keyed(1, "bench tokens");
    for (size_t i = 0; i < n; i++) tokens[i] = (uint32_t)(nb_rng_u64(&rng) % (uint64_t)o->model.vocab_size);
    shard_path(dir, path, size);
    const int rc = nb_shard_write(path, tokens, n, o->model.vocab_size);
    free(tokens);
    return rc;
}

/* What the run holds, from the stage's layout (nothing allocated): an activation slot per token, the
 * stage's scratch, the weights, the delay's versions and EF buffer. */
static int bench_memory(const nb_train_options *o, bench_result *out) {
    nb_model m;
    if (nb_model_layout(&m, &o->model, 1, NULL)) return -1;
    nb_stage *s = &m.stages[0];
    s->precision = o->precision;  /* what the slot's and the scratch's sizes read */
    const int B = o->batch, T = o->seq_len;
    out->act_bytes_per_token = (double)nb_acts_bytes(s, B, T) / ((double)B * T);  /* per micro-batch in flight */
    out->scratch_bytes = (double)nb_stage_scratch_bytes(s, B, T);                  /* once per stage */
    out->weight_bytes = sizeof(float) * (double)s->n_params;
    out->delay_bytes = (double)nb_stash_bytes_for(&o->delay, 0, 1, s->n_params);
    nb_model_free(&m);
    return 0;
}

/* The medians over the timed steps (after the warm-up) of the executor's timings: the step, its update,
 * its GEMMs, and the share outside them. */
static int bench_figures(const nb_step_time *times, int steps, bench_result *out) {
    double *x = malloc(sizeof(double) * 5 * (size_t)steps);
    if (!x) return nb_fail("out of memory");
    double *wall = x, *update = x + steps, *gemm = x + 2 * steps, *outside = x + 3 * steps, *routing = x + 4 * steps;
    for (int i = 0; i < steps; i++) {
        const nb_step_time *t = &times[WARMUP_STEPS + i];
        wall[i] = t->wall, update[i] = t->update, gemm[i] = t->gemm, outside[i] = 1.0 - t->gemm / t->wall;
        routing[i] = t->routing / t->wall;
    }
    out->routing_share = median_of(routing, steps);
    out->median_s = median_of(wall, steps);
    out->optimizer_s = median_of(update, steps);
    out->gemm_s = median_of(gemm, steps);
    out->outside_gemm_share = median_of(outside, steps);
    free(x);
    return 0;
}

/* One measurement: the run o on random tokens written into data_dir, `steps` timed steps. */
static int bench_one(const nb_train_options *run, const char *data_dir, int steps, bench_result *out) {
    memset(out, 0, sizeof *out);
    nb_train_options o = *run;
    char shard[4200];
    nb_step_time *times = calloc((size_t)o.steps, sizeof *times);
    if (!times) return nb_fail("out of memory");
    nb_train_result res;
    int rc = write_random_shard(data_dir, &o, shard, sizeof shard);
    o.train_pattern = shard;
    o.step_times = times;
    rc = rc || nb_train(&o, &res) || bench_figures(times, steps, out) || bench_memory(&o, out);
    free(times);
    if (rc) return -1;  /* nb_last_error says why */
    out->B = o.batch;
    out->T = o.seq_len;
    out->precision = o.precision;
    out->weights_hash = res.weights_hash;
    out->tokens_per_s = o.batch * o.seq_len / out->median_s;
    out->gflops = out->tokens_per_s * nb_model_train_flops_per_token(&o.model, o.seq_len) * 1e-9;
    return 0;
}

/* The folder the measurements' data is written to: a new temporary one, removed at the end (*keep 0);
 * or, for tests, NB_BENCH_DATA's, kept (*keep 1), so that a `train` can read the same tokens
 * (tests/cli_bench.sh: the last measurement's). */
static int open_data_dir(char *dir, size_t size, int *keep) {
    const char *given = getenv("NB_BENCH_DATA");
    *keep = given && *given;
    if (*keep) {
        snprintf(dir, size, "%s", given);
        return nb_fs_mkdirs(dir, "NB_BENCH_DATA");
    }
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, size, "%s/nobubble-bench-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    return mkdtemp(dir) ? 0 : nb_fail("%s: cannot create a temporary folder for the random tokens", dir);
}

static void close_data_dir(const char *dir, int keep) {
    if (keep) return;
    char shard[4200];
    shard_path(dir, shard, sizeof shard);
    unlink(shard);
    rmdir(dir);
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

/* What the command line asks for: each list's items, parsed. */
typedef struct {
    int nt, nm, no, nd, np;
    const char *titems[16], *mitems[16], *oitems[16], *ditems[16], *pitems[16];
    char tbuf[256], mbuf[256], obuf[256], dbuf[256], pbuf[256];
    int threads[16];
    nb_config cfgs[16];
    int Bs[16], Ts[16], contexts[16];
    nb_train_options runs[16];  /* `train --optimizer NAME`'s options, per optimizer */
    nb_delay_options dls[16];
    nb_precision precs[16];
    int steps, json;
    const char *device;  /* --device: where the stages' memory is (NULL: the CPU's) */
    double peak_gflops;  /* --peak-gflops: the device's peak to report against (0: the CPU's, measured) */
} bench_plan;

static int split_lists(bench_plan *p, const char *threads, const char *models, const char *optimizers,
                       const char *delays, const char *precisions) {
    p->nt = split_list("--threads", threads, p->tbuf, sizeof p->tbuf, p->titems, 16);
    p->nm = p->nt < 0 ? -1 : split_list("--models", models, p->mbuf, sizeof p->mbuf, p->mitems, 16);
    p->no = p->nm < 0 ? -1 : split_list("--optimizers", optimizers, p->obuf, sizeof p->obuf, p->oitems, 16);
    p->nd = p->no < 0 ? -1 : split_list("--delays", delays, p->dbuf, sizeof p->dbuf, p->ditems, 16);
    p->np = p->nd < 0 ? -1 : split_list("--precisions", precisions, p->pbuf, sizeof p->pbuf, p->pitems, 16);
    return p->np < 0 ? -1 : 0;
}

static int parse_precisions(bench_plan *p, const char *list) {
    for (int i = 0; i < p->np; i++) {
        if (!strcmp(p->pitems[i], "fp32")) p->precs[i] = NB_PRECISION_FP32;
        else if (!strcmp(p->pitems[i], "bf16")) p->precs[i] = NB_PRECISION_BF16;
        else if (!strcmp(p->pitems[i], "auto")) p->precs[i] = nb_precision_choose(NB_PRECISION_AUTO);
        else {
            fprintf(stderr, "nobubble bench: --precisions '%s': expected a comma-separated list of fp32, bf16, auto\n",
                    list);
            return -1;
        }
    }
    return 0;
}

static int parse_threads(bench_plan *p, const char *list) {
    for (int i = 0; i < p->nt; i++) {
        char *end;
        long v = strtol(p->titems[i], &end, 10);
        if (end == p->titems[i] || *end || v < 1 || v > 1024) {
            fprintf(stderr, "nobubble bench: --threads '%s': expected a comma-separated list of integers from 1 to 1024\n",
                    list);
            return -1;
        }
        if (cli_check_threads("bench", "--threads", (int)v)) return -1;
        p->threads[i] = (int)v;
    }
    return 0;
}

static int parse_models(bench_plan *p, int seq, int batch, int tokens) {
    for (int i = 0; i < p->nm; i++) {
        if (nb_config_preset(p->mitems[i], &p->cfgs[i])) {
            fprintf(stderr, "nobubble bench: --models: %s\n", nb_last_error());
            return -1;
        }
        p->contexts[i] = p->cfgs[i].context;
        if (bench_shape(p->mitems[i], &p->cfgs[i], seq, batch, tokens, &p->Bs[i], &p->Ts[i])) return -1;
    }
    return 0;
}

/* Each optimizer as `nobubble train --optimizer NAME` runs it: the settings table's defaults, for it. */
static int parse_optimizers(bench_plan *p) {
    for (int i = 0; i < p->no; i++) {
        nb_settings_args given;
        nb_train_defaults(&p->runs[i]);
        nb_settings_begin(&given, &p->runs[i]);
        if (nb_settings_arg(&given, "--optimizer", p->oitems[i]) || nb_settings_finish(&given)) {
            fprintf(stderr, "nobubble bench: --optimizers: %s\n", nb_last_error());
            return -1;
        }
    }
    return 0;
}

/* MODE or MODE+ef; +ef is error feedback with alpha 1 (train's --ef 1). */
static int parse_delays(bench_plan *p) {
    for (int i = 0; i < p->nd; i++) {
        char mode[64];
        snprintf(mode, sizeof mode, "%s", p->ditems[i]);
        char *plus = strstr(mode, "+ef");
        memset(&p->dls[i], 0, sizeof p->dls[i]);
        p->dls[i].ef_alpha = 1.0f;
        if (plus && !plus[3]) {
            *plus = 0;
            p->dls[i].ef = 1;
        }
        if (nb_delay_parse(mode, &p->dls[i])) {
            fprintf(stderr, "nobubble bench: --delays: %s\n", nb_last_error());
            return -1;
        }
    }
    return 0;
}

/* The run of measurement (model mi, optimizer oi, delay di, precision pi). */
static nb_train_options plan_run(const bench_plan *p, int mi, int oi, int di, int pi) {
    nb_train_options o = bench_run(&p->runs[oi], &p->cfgs[mi], &p->dls[di], p->precs[pi], p->Bs[mi], p->Ts[mi], p->steps);
    o.device = p->device;
    return o;
}

/* A run on a device has no CPU peak to compare with: the --peak-gflops given (a data sheet's), else none. */
static int on_device(const bench_plan *p) { return p->device && *p->device && strcmp(p->device, "cpu"); }
/* The GPU queues its work: a product's or the update's host time there is its launch (or a wait for earlier
 * work), not its own time, so those figures are not reported for it (the step's time is: it ends on the loss's
 * read-back). The guarded device runs on the CPU, timed as the CPU is. */
static int queued(const bench_plan *p) { return p->device && !strcmp(p->device, "cuda"); }

/* Every measurement checked before the first runs (a refusal after minutes of others helps no one). */
static int plan_fits(const bench_plan *p, int check) {
    for (int mi = 0; mi < p->nm; mi++)
        for (int oi = 0; oi < p->no; oi++)
            for (int di = 0; di < p->nd; di++)
                for (int pi = 0; pi < p->np; pi++) {
                    const nb_train_options o = plan_run(p, mi, oi, di, pi);
                    if (bench_fits(&o, check)) return -1;
                }
    return 0;
}

static void print_header(const bench_plan *p) {
    const char *bf16_how = nb_backend_bf16_native(cli_backend()) ? "oneDNN bf16 matmul (bf16 instructions)"
                                            : "emulated: widened to fp32 GEMMs (no bf16 instructions)";
    if (p->json) {
        printf("{\"gemm\": \"%s\", \"cpu_isa\": \"%s\", \"bf16_native\": %s, \"results\": [", nb_backend_label(cli_backend()),
               nb_cpu_isa_name(), nb_bf16_native() ? "true" : "false");
        return;
    }
    printf("GEMM backend: %s; oneDNN ISA %s, bf16 %s; auto chooses %s\n"
           "FLOPs per token = 6 x matrix params (head included) + 6 x layers x d_attn x (T+1)\n",
           nb_backend_label(cli_backend()), nb_cpu_isa_name(), bf16_how, nb_precision_name(nb_precision_choose(NB_PRECISION_AUTO)));
    for (int i = 0; i < p->nm; i++)
        if (p->cfgs[i].context != p->contexts[i])
            printf("%s: context raised from %d to --seq %d for the benchmark (no weight depends on it)\n", p->mitems[i],
                   p->contexts[i], p->cfgs[i].context);
}

/* One result, as JSON (first: the list's first) or as a line. */
static void print_result(const bench_plan *p, int ti, int mi, int oi, int di, const bench_result *r, double peak,
                         const char *isa, int first) {
    char peak_text[32] = "null", fraction_text[32] = "null";  /* none where a device's peak was not given */
    if (peak > 0) snprintf(peak_text, sizeof peak_text, "%.2f", peak);
    if (peak > 0) snprintf(fraction_text, sizeof fraction_text, "%.4f", r->gflops / peak);
    char opt_text[32] = "null", gemm_text[32] = "null", outside_text[32] = "null";  /* none where queued(p) */
    if (!queued(p)) {
        snprintf(opt_text, sizeof opt_text, "%.6f", r->optimizer_s);
        snprintf(gemm_text, sizeof gemm_text, "%.6f", r->gemm_s);
        snprintf(outside_text, sizeof outside_text, "%.4f", r->outside_gemm_share);
    }
    if (p->json) {
        printf("%s\n  {\"model\": \"%s\", \"threads\": %d, \"optimizer\": \"%s\", \"delay\": \"%s\", "
               "\"precision\": \"%s\", "
               "\"batch\": %d, \"seq\": %d, \"median_step_s\": %.6f, \"median_optimizer_s\": %s, "
               "\"tokens_per_s\": %.1f, \"gflops\": %.2f, \"peak_gflops\": %s, \"peak_isa\": \"%s\", "
               "\"fraction_of_peak\": %s, \"device\": \"%s\", \"activation_bytes_per_token\": %.0f, \"scratch_bytes\": %.0f, "
               "\"weight_bytes\": %.0f, "
               "\"delay_bytes\": %.0f, \"median_gemm_s\": %s, \"outside_gemm_share\": %s, "
               "\"moe_routing_share\": %.4f, \"context\": %d, \"preset_context\": %d, \"weights_hash\": \"%016llx\"}",
               first ? "" : ",", p->mitems[mi], p->threads[ti], p->oitems[oi], p->ditems[di],
               nb_precision_name(r->precision), r->B, r->T, r->median_s, opt_text, r->tokens_per_s, r->gflops,
               peak_text, isa, fraction_text, on_device(p) ? p->device : "cpu", r->act_bytes_per_token, r->scratch_bytes, r->weight_bytes, r->delay_bytes,
               gemm_text, outside_text, r->routing_share, p->cfgs[mi].context, p->contexts[mi],
               (unsigned long long)r->weights_hash);
    } else {
        char routing[48] = "", share[96] = "no peak given (--peak-gflops)", parts[64] = "queued on the GPU: no shares";
        if (!queued(p))
            snprintf(parts, sizeof parts, "optimizer %4.1f%%, outside GEMMs %4.1f%%", 100 * r->optimizer_s / r->median_s,
                     100 * r->outside_gemm_share);
        if (peak > 0)
            snprintf(share, sizeof share, "%4.1f%% of %s peak %.0f (%s)", 100 * r->gflops / peak,
                     p->peak_gflops > 0 ? "the given" : "measured", peak, isa);
        if (p->cfgs[mi].n_experts > 0) snprintf(routing, sizeof routing, ", MoE routing %4.1f%%", 100 * r->routing_share);
        printf("%-12s threads %d  %-6s %-10s %-4s B %2d x T %4d  step %8.1f ms (median of %d; %s%s)  "
               "%7.0f tok/s  %6.1f GFLOP/s = %s  activations %.1f KiB/token "
               "(+ scratch %.1f MiB)  delay memory %.2f x weights\n",
               p->mitems[mi], p->threads[ti], p->oitems[oi], p->ditems[di], nb_precision_name(r->precision), r->B, r->T,
               r->median_s * 1e3, p->steps, parts, routing,
               r->tokens_per_s, r->gflops, share, r->act_bytes_per_token / 1024,
               r->scratch_bytes / (1 << 20), r->delay_bytes / r->weight_bytes);
    }
    fflush(stdout);
}

/* Every measurement, thread count after thread count (each with its fp32 peak); the data in data_dir. */
static int measure_all(const bench_plan *p, const char *data_dir) {
    int first = 1;
    for (int ti = 0; ti < p->nt; ti++) {
        const char *isa = on_device(p) ? p->device : "given";
        const double peak = p->peak_gflops > 0 ? p->peak_gflops
                            : on_device(p)     ? 0.0
                                               : nb_measure_fp32_peak(p->threads[ti], 0.5, &isa);
        omp_set_num_threads(p->threads[ti]);  /* the one-process run's GEMM threads (omp_get_max_threads) */
        for (int mi = 0; mi < p->nm; mi++)
            for (int oi = 0; oi < p->no; oi++)
                for (int di = 0; di < p->nd; di++)
                    for (int pi = 0; pi < p->np; pi++) {
                        const nb_train_options o = plan_run(p, mi, oi, di, pi);
                        bench_result r;
                        if (bench_one(&o, data_dir, p->steps, &r)) return -1;
                        print_result(p, ti, mi, oi, di, &r, peak, isa, first);
                        first = 0;
                    }
    }
    if (p->json) printf("\n]}\n");
    return 0;
}

int cmd_bench(int argc, char **argv) {
    const char *models = "tiny,small,medium", *threads_list = "1,2", *optimizers = "adamw", *delays = "sync";
    const char *precisions = "fp32";
    int steps = 5, tokens = 0, seq = 0, batch = 0, json = 0, no_memory_check = 0;
    const char *device = NULL;
    float peak_gflops = 0;
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
        {"--tokens", OPT_INT, &tokens, "N      tokens per step when --batch is not given: B = N / T, at least 1 (2048) "
                                       CLI_RANGE(1, 16777216)},
        {"--json", OPT_FLAG, &json, "       print the results as JSON"},
        {"--device", OPT_STR, &device, "DEV    where the stages' memory is: cpu, cuda, guarded (cpu)"},
        {"--peak-gflops", OPT_FLOAT, &peak_gflops, "G      the peak to report against (a device's data sheet; default: "
                                                  "the CPU's fp32 peak, measured) " CLI_RANGE(0, 1000000000)},
        CLI_MEMORY_OPTION(no_memory_check),
    };
    int rc = cli_parse(usage, argc, argv, opts, (int)(sizeof opts / sizeof opts[0]));
    if (rc) return rc > 0 ? 0 : 2;
    if (batch && tokens) {
        fprintf(stderr, "nobubble bench: --batch %d and --tokens %d: give one of them (--tokens N means --batch N / T)\n",
                batch, tokens);
        return 2;
    }
    if (device && !nb_backend_device_named(device)) {
        fprintf(stderr, "nobubble bench: --device '%s': expected %s\n", device, nb_backend_devices());
        return 2;
    }
    static bench_plan plan;  /* 16 train options per list: kept off the stack */
    bench_plan *p = &plan;
    memset(p, 0, sizeof *p);
    p->steps = steps;
    p->json = json;
    p->device = device;
    p->peak_gflops = peak_gflops;
    if (split_lists(p, threads_list, models, optimizers, delays, precisions) || parse_precisions(p, precisions) ||
        parse_threads(p, threads_list) || parse_models(p, seq, batch, tokens ? tokens : 2048) || parse_optimizers(p) ||
        parse_delays(p))
        return 2;
    if (plan_fits(p, !no_memory_check)) return 1;
    char data_dir[4096];
    int keep;
    if (open_data_dir(data_dir, sizeof data_dir, &keep)) {
        fprintf(stderr, "nobubble bench: %s\n", nb_last_error());
        return 1;
    }
    print_header(p);
    rc = measure_all(p, data_dir);
    if (rc) fprintf(stderr, "nobubble bench: %s\n", nb_last_error());
    close_data_dir(data_dir, keep);
    return rc ? 1 : 0;
}
