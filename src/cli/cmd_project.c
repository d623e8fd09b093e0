/* nobubble project: where an asynchronous pipeline wins on a cluster, and how well the simulator predicts a
 * real run (docs/projection.md).
 *
 * With --shape (a preset, or dense-10b) it projects every pipeline kind for each number of stages P,
 * replicas D and link bandwidth: per-stage costs from the shape's products at a device's achieved rate,
 * messages of latency + bytes / bandwidth, a ring all-reduce per stage and step (nb_proj_run), and prints
 * 2BW's tokens/s over the best synchronous schedule's. With --run it reads a finished run folder, takes
 * the per-stage costs the run measured (or another run's, --costs-from), simulates the run's schedule
 * and prints the predicted steady-state step time beside the one the run measured. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cli/args.h"
#include "cli/commands.h"
#include "experiments/exp.h"
#include "nobubble/model.h"
#include "nobubble/pipeline.h"
#include "util/decimal.h"
#include "util/error.h"
#include "util/json.h"

static const char usage[] =
    "usage: nobubble project --shape NAME [--set field=value ...] [--seq T] [--batch-tokens N] [--micro-batch B]\n"
    "                        [--stages P[,P...]] [--data-parallel D[,D...]] [--bandwidth-gbps G[,G...]]\n"
    "                        [--latency-us L] [--tflops F] [--update-ns U] [--grad-bytes 2|4]\n"
    "                        [--memory-gib G] [--all] [--json]\n"
    "       nobubble project --run DIR [--costs-from DIR] [--pipeline K] [--latency-us L] [--bandwidth-gbps G] [--json]\n"
    "Projects pipeline schedules onto a cluster with the schedule simulator: per-stage costs from the model's\n"
    "products at a device's achieved rate, messages of latency + bytes / bandwidth between stages, and a ring\n"
    "all-reduce of each stage's gradient across the D replicas at every update (not overlapped). Prints, for\n"
    "each bandwidth, P and D, the best synchronous schedule (gpipe, 1f1b, interleaved with 2 chunks, zbh1),\n"
    "PipeDream-2BW, and 2BW's tokens/s over the best synchronous one, among the layouts whose largest stage\n"
    "fits in --memory-gib; --all prints every kind's row.\n"
    "--run predicts a finished run's steady-state step time from the per-stage costs it measured (or those\n"
    "of --costs-from, a run of the same model, P and M) and prints it beside the measured one.";

#define MAX_LIST 32
/* Stages x micro-batches x steps x chunks simulated at most (as `schedule`'s cap: about 4 GB, 15 s). */
#define MAX_PASSES 10000000LL

/* A comma list of integers in [lo, hi] into out; the count, or -1 after printing the error. */
static int parse_int_list(const char *flag, const char *text, long lo, long hi, int *out) {
    int n = 0;
    const char *p = text;
    for (;;) {
        char *end;
        errno = 0;
        long v = strtol(p, &end, 10);
        if (end == p || errno || v < lo || v > hi || (*end && *end != ',') || n == MAX_LIST) {
            fprintf(stderr, "nobubble project: %s '%s': expected up to %d comma-separated integers from %ld to %ld\n",
                    flag, text, MAX_LIST, lo, hi);
            return -1;
        }
        for (int i = 0; i < n; i++)
            if (out[i] == v) {  /* a repeated value would only print its rows twice */
                fprintf(stderr, "nobubble project: %s '%s': %ld given twice\n", flag, text, v);
                return -1;
            }
        out[n++] = (int)v;
        if (!*end) return n;
        p = end + 1;
    }
}

/* The same for positive finite numbers. */
static int parse_num_list(const char *flag, const char *text, double *out) {
    int n = 0;
    char *buf = strdup(text);
    if (!buf) return -1;
    for (char *p = buf;;) {
        char *comma = strchr(p, ','), *end;
        if (comma) *comma = 0;
        errno = 0;
        double v = strtod(p, &end);
        if (!nb_is_decimal(p, 0) || end == p || *end || errno || !(v > 0) || !isfinite(v) || n == MAX_LIST) {
            fprintf(stderr, "nobubble project: %s '%s': expected up to %d comma-separated numbers > 0\n", flag, text,
                    MAX_LIST);
            free(buf);
            return -1;
        }
        for (int i = 0; i < n; i++)
            if (out[i] == v) {
                fprintf(stderr, "nobubble project: %s '%s': %g given twice\n", flag, text, v);
                free(buf);
                return -1;
            }
        out[n++] = v;
        if (!comma) break;
        p = comma + 1;
    }
    free(buf);
    return n;
}

/* A shape: a trainer preset with --set overrides, or dense-10b (a Llama of 10.2B parameters: 36 blocks of
 * width 5120, SwiGLU 13824, 40 heads over 8 key/value heads, 32000 tokens, untied). */
static int shape_of(const char *name, const opt_list *sets, int seq, nb_proj_shape *out) {
    nb_config c;
    if (!strcmp(name, "dense-10b")) {
        memset(&c, 0, sizeof c);
        c.vocab_size = 32000, c.d_model = 5120, c.n_layers = 36, c.n_heads = 40, c.n_kv_heads = 8, c.d_ffn = 13824;
        c.context = 4096, c.rope_theta = 10000, c.norm_eps = 1e-5, c.tied = 0;
    } else if (nb_config_preset(name, &c)) {
        fprintf(stderr, "nobubble project: --shape %s: expected dense-10b or a preset (%s)\n", name,
                nb_config_preset_names());
        return -1;
    }
    for (int i = 0; i < sets->n; i++)
        if (nb_config_override(&c, sets->items[i])) {
            fprintf(stderr, "nobubble project: --set %s: %s\n", sets->items[i], nb_last_error());
            return -1;
        }
    if (nb_config_validate(&c)) {
        fprintf(stderr, "nobubble project: --shape %s: %s\n", name, nb_last_error());
        return -1;
    }
    if (c.n_experts > 0) {
        fprintf(stderr, "nobubble project: --shape %s has experts: the projection models dense models only\n", name);
        return -1;
    }
    *out = (nb_proj_shape){c.n_layers, c.d_model, c.d_ffn, c.n_heads, c.n_kv_heads, c.vocab_size, seq ? seq : c.context,
                           c.tied};
    return 0;
}

static const nb_pipe_kind sync_kinds[] = {NB_PIPE_GPIPE, NB_PIPE_1F1B, NB_PIPE_INTERLEAVED, NB_PIPE_ZBH1};

typedef struct {
    nb_proj_shape shape;
    nb_proj_device dev;
    long long batch_tokens;
    double memory_bytes;  /* a device's memory: layouts that need more do not fit */
    int micro_batch, all, json;
} project_args;

static void print_row(const project_args *a, double gbps, int P, int D, int M, nb_pipe_kind kind,
                      const nb_proj_result *r) {
    if (a->json)
        printf("{\"bandwidth_gbps\": %g, \"stages\": %d, \"replicas\": %d, \"microbatches\": %d, \"pipeline\": \"%s\", "
               "\"step_s\": %.6g, \"tokens_per_s\": %.6g, \"idle_fraction\": %.4f, \"allreduce_s\": %.6g, "
               "\"memory_bytes\": %.6g, \"fits\": %s, \"peak_activations\": %d}\n", gbps, P, D, M,
               nb_pipe_kind_name(kind), r->step_s, r->tokens_per_s, r->idle_fraction, r->reduce_s, r->memory_bytes,
               r->memory_bytes <= a->memory_bytes ? "true" : "false", r->peak_activations);
    else
        printf("%8g %4d %4d %5d  %-11s %10.1f %12.0f %6.1f%% %11.1f %8.1f%s\n", gbps, P, D, M, nb_pipe_kind_name(kind),
               1e3 * r->step_s, r->tokens_per_s, 100 * r->idle_fraction, 1e3 * r->reduce_s, r->memory_bytes / 1073741824.0,
               r->memory_bytes <= a->memory_bytes ? "" : " (does not fit)");
}

/* One (bandwidth, P, D): every kind; the summary line (or every row with --all). 1 when projected, 0 when
 * skipped (M < P, P above the blocks, no whole number of micro-batches, too large to simulate), -1 on a failure. */
static int project_point(const project_args *a, double gbps, int P, int D) {
    const long long per_replica = a->batch_tokens / D, micro_tokens = (long long)a->micro_batch * a->shape.seq;
    if (a->batch_tokens % D || per_replica % micro_tokens) {
        if (!a->json)
            printf("%8g %4d %4d %5s  skipped: %lld tokens over %d replicas is no whole number of %lld-token "
                   "micro-batches\n", gbps, P, D, "-", a->batch_tokens, D, micro_tokens);
        return 0;
    }
    const long long M = per_replica / micro_tokens;
    if (M < P || P > a->shape.n_layers) {
        if (!a->json)
            printf("%8g %4d %4d %5lld  skipped: %s\n", gbps, P, D, M,
                   P > a->shape.n_layers ? "more stages than blocks (--set n_layers=...)"
                                         : "M < P (1f1b, 2bw and zbh1 need M >= P; --batch-tokens)");
        return 0;
    }
    if ((long long)P * M * 6 * 2 > MAX_PASSES) {  /* 6 steps, 2 chunks at most */
        printf("%8g %4d %4d %5lld  too large to simulate: P x M = %lld (at most %lld)\n", gbps, P, D, M, (long long)P * M,
               MAX_PASSES / 12);
        return 0;
    }
    nb_proj_device dev = a->dev;
    dev.bytes_per_second = gbps * 1e9 / 8;
    nb_proj_result best = {0}, async = {0}, r;
    nb_pipe_kind best_kind = NB_PIPE_GPIPE;
    for (size_t i = 0; i < sizeof sync_kinds / sizeof sync_kinds[0]; i++) {
        const nb_pipe_kind k = sync_kinds[i];
        if (k == NB_PIPE_INTERLEAVED && (M % P || 2 * P > a->shape.n_layers)) continue;
        const nb_proj_layout l = {k, P, D, (int)M, a->micro_batch, 2};
        if (nb_proj_run(&a->shape, &dev, &l, &r)) {
            fprintf(stderr, "nobubble project: %s at P = %d, D = %d: %s\n", nb_pipe_kind_name(k), P, D, nb_last_error());
            return -1;
        }
        if (a->all || a->json) print_row(a, gbps, P, D, (int)M, k, &r);
        if (r.memory_bytes <= a->memory_bytes && r.tokens_per_s > best.tokens_per_s) best = r, best_kind = k;
    }
    const nb_proj_layout l = {NB_PIPE_2BW, P, D, (int)M, a->micro_batch, 0};
    if (nb_proj_run(&a->shape, &dev, &l, &async)) {
        fprintf(stderr, "nobubble project: 2bw at P = %d, D = %d: %s\n", P, D, nb_last_error());
        return -1;
    }
    if (a->all || a->json) print_row(a, gbps, P, D, (int)M, NB_PIPE_2BW, &async);
    if (a->json) return 1;
    const int sync_fits = best.tokens_per_s > 0, async_fits = async.memory_bytes <= a->memory_bytes;
    if (a->all) {
        if (sync_fits && async_fits)
            printf("%8g %4d %4d %5lld  2bw over the best synchronous that fits (%s): %.3f\n", gbps, P, D, M,
                   nb_pipe_kind_name(best_kind), async.tokens_per_s / best.tokens_per_s);
        return 1;
    }
    if (!sync_fits || !async_fits) {
        printf("%8g %4d %4d %5lld  %s", gbps, P, D, M,
               sync_fits ? "2bw does not fit in the memory" : async_fits ? "no synchronous pipeline fits; 2bw"
                                                                         : "no pipeline fits in the memory");
        if (async_fits) printf(" %.0f tokens/s", async.tokens_per_s);
        printf("\n");
        return 1;
    }
    printf("%8g %4d %4d %5lld  %-11s %12.0f %6.1f%% %12.0f %6.1f%% %8.3f %9.1f %9.1f\n", gbps, P, D, M,
           nb_pipe_kind_name(best_kind), best.tokens_per_s, 100 * best.idle_fraction, async.tokens_per_s,
           100 * async.idle_fraction, async.tokens_per_s / best.tokens_per_s, best.memory_bytes / 1073741824.0,
           async.memory_bytes / 1073741824.0);
    return 1;
}

static int project_shape(const project_args *a, const int *Ps, int nP, const int *Ds, int nD, const double *bws,
                         int nB, const char *name) {
    if (!a->json) {
        printf("shape %s: %.1fM parameters, %d blocks, d_model %d, seq %d; global batch %lld tokens in micro-batches "
               "of %d sequences\n", name, nb_proj_params(&a->shape) / 1e6, a->shape.n_layers, a->shape.d_model,
               a->shape.seq, a->batch_tokens, a->micro_batch);
        printf("device: %.0f TFLOP/s achieved on the forward, backward %.2gx, update %.3g ns per parameter; "
               "latency %.3g us per message; all-reduce of %g-byte gradients, not overlapped\n",
               a->dev.flops_per_second / 1e12, a->dev.backward_ratio, a->dev.update_seconds_per_param * 1e9,
               a->dev.latency * 1e6, a->dev.grad_bytes);
        if (a->all)
            printf("%8s %4s %4s %5s  %-11s %10s %12s %7s %11s %8s\n", "Gb/s", "P", "D", "M", "pipeline", "step ms",
                   "tokens/s", "idle", "allreduce ms", "mem GiB");
        else
            printf("%8s %4s %4s %5s  %-11s %12s %7s %12s %7s %8s %9s %9s\n", "Gb/s", "P", "D", "M", "best sync",
                   "tokens/s", "idle", "2bw tok/s", "idle", "2bw/sync", "sync GiB", "2bw GiB");
    }
    int projected = 0;
    for (int b = 0; b < nB; b++)
        for (int i = 0; i < nP; i++)
            for (int j = 0; j < nD; j++) {
                const int rc = project_point(a, bws[b], Ps[i], Ds[j]);
                if (rc < 0) return 1;
                projected += rc;
            }
    if (projected) return 0;
    fprintf(stderr, "nobubble project: no layout of shape %s could be projected (each was skipped%s): give other "
            "--stages, --data-parallel or --batch-tokens\n", name, a->json ? "" : ": the lines above say why");
    return 1;
}

/* ---- --run: a real run predicted ---- */

static const nb_json *path_get(const nb_json *root, const char *a, const char *b) {
    const nb_json *v = nb_json_get(root, a);
    return v && b ? (v->type == NB_JOBJ ? nb_json_get(v, b) : NULL) : v;
}

typedef struct {
    int P, M, D, batch, seq, d_model, steady[2];
    int chunks;  /* an interleaved run's chunks per worker (its costs are its workers': their chunks' summed) */
    nb_pipe_kind kind;
    double forward[64], backward[64], update[64];
} run_facts;

/* What --run needs from DIR/summary.json: the schedule and the per-stage mean costs; an interleaved run's
 * per worker (worker w's P x v virtual stages w, w + P, ... run one after another: their costs add, and the
 * simulator gives each chunk 1/v of its worker's). */
static int read_run(const char *dir, run_facts *f) {
    char path[4096];
    snprintf(path, sizeof path, "%s/summary.json", dir);
    nb_json root;
    if (nb_json_read_file(path, "run summary", 0, &root)) return -1;
    const nb_json *P = path_get(&root, "run", "stages"), *M = path_get(&root, "run", "microbatches"),
                  *D = path_get(&root, "run", "data_parallel"), *B = path_get(&root, "run", "batch"),
                  *T = path_get(&root, "run", "seq_len"), *d = path_get(&root, "model", "d_model"),
                  *kind = path_get(&root, "pipeline", "kind"), *stages = path_get(&root, "pipeline", "stages"),
                  *steady = path_get(&root, "pipeline", "steady_steps");
    int rc = -1;
    if (!P || !M || !B || !T || !d || !kind || kind->type != NB_JSTR || !steady || steady->type != NB_JARR ||
        steady->n != 2) {
        nb_fail("%s/summary.json: expected run.stages, run.microbatches, run.batch, run.seq_len, model.d_model, "
                "pipeline.kind and pipeline.steady_steps (a pipeline run's summary)", dir);
        goto done;
    }
    const int interleaved = !strcmp(kind->str, "interleaved"), V = stages && stages->type == NB_JARR ? (int)stages->n : 0;
    if (!V || P->num < 1 || P->num > 64 || V > 1024 || (interleaved ? V % (int)P->num || V == (int)P->num : V != (int)P->num)) {
        nb_fail("%s/summary.json: no per-stage costs (pipeline.stages, one per stage, or %s): a run stopped before "
                "it measured any, or more than 64 stages", dir, interleaved ? "chunks x stages" : "run.stages");
        goto done;
    }
    *f = (run_facts){(int)P->num, (int)M->num, D ? (int)D->num : 1, (int)B->num, (int)T->num, (int)d->num,
                     {(int)steady->items[0].num, (int)steady->items[1].num}, interleaved ? V / (int)P->num : 0,
                     NB_PIPE_GPIPE, {0}, {0}, {0}};
    if (nb_pipe_kind_parse(kind->str, &f->kind)) goto done;
    for (int s = 0; s < V; s++) {
        const nb_json *st = &stages->items[s], *fw = nb_json_get(st, "forward_s"), *bw = nb_json_get(st, "backward_s"),
                      *up = nb_json_get(st, "update_s");
        if (!fw || !bw || !up || fw->type != NB_JNUM || bw->type != NB_JNUM || up->type != NB_JNUM) {
            nb_fail("%s/summary.json: stage %d has no forward_s, backward_s and update_s", dir, s);
            goto done;
        }
        f->forward[s % f->P] += fw->num, f->backward[s % f->P] += bw->num, f->update[s % f->P] += up->num;
    }
    rc = 0;
done:
    nb_json_free(&root);
    return rc;
}

/* The run's measured seconds per step over its steady window [a, b] (1-based, inclusive): from the end of
 * step a - 1 to the end of step b, in metrics.jsonl (read as the experiments read a run). */
static int measured_step(const char *dir, const int steady[2], double *out) {
    nbx_run r;
    if (nbx_run_read(dir, &r)) return -1;
    double t0 = NAN, t1 = NAN;
    for (int i = 0; i < r.n; i++) {
        if ((int)r.step[i] == steady[0] - 1) t0 = r.time_s[i];
        if ((int)r.step[i] == steady[1]) t1 = r.time_s[i];
    }
    nbx_run_free(&r);
    if (!isfinite(t0) || !isfinite(t1) || steady[1] < steady[0])
        return nb_fail("%s/metrics.jsonl: no time_s at steps %d and %d, the ends of the steady window (a run of at "
                       "least 4 steps with --log-every 1 has them)", dir, steady[0] - 1, steady[1]);
    *out = (t1 - t0) / (steady[1] - steady[0] + 1);
    return 0;
}

/* A summary.json value as text, for comparing two runs' and naming a difference. */
static void json_text(const nb_json *v, char *buf, size_t size) {
    if (!v) snprintf(buf, size, "(absent)");
    else if (v->type == NB_JNUM) snprintf(buf, size, "%.17g", v->num);
    else if (v->type == NB_JSTR) snprintf(buf, size, "'%s'", v->str);
    else if (v->type == NB_JBOOL) snprintf(buf, size, "%s", v->b ? "true" : "false");
    else snprintf(buf, size, "(not a number, string or boolean)");
}

/* --costs-from's run must have measured the same work as --run's: every model field, and each run setting that
 * changes a stage's costs (the pipeline's kind may differ: that is what the costs are borrowed for). 0, or -1 with
 * nb_fail naming the first difference. */
static int same_work(const char *run_dir, const char *costs_dir) {
    static const char *const run_keys[] = {"stages", "microbatches", "batch", "seq_len", "data_parallel", "optimizer",
                                           "precision", "gemm", "device", "threads"};
    char path[2][4096];
    nb_json root[2];
    snprintf(path[0], sizeof path[0], "%s/summary.json", run_dir);
    snprintf(path[1], sizeof path[1], "%s/summary.json", costs_dir);
    if (nb_json_read_file(path[0], "run summary", 0, &root[0])) return -1;
    if (nb_json_read_file(path[1], "run summary", 0, &root[1])) {
        nb_json_free(&root[0]);
        return -1;
    }
    const nb_json *model = nb_json_get(&root[0], "model");
    int rc = 0;
    char a[256], b[256];
    for (size_t i = 0; !rc && model && model->type == NB_JOBJ && i < model->n; i++) {
        json_text(&model->items[i], a, sizeof a);
        json_text(path_get(&root[1], "model", model->keys[i]), b, sizeof b);
        if (strcmp(a, b))
            rc = nb_fail("--costs-from %s: model.%s = %s, --run %s has %s: expected the same model, stages and batch",
                         costs_dir, model->keys[i], b, run_dir, a);
    }
    for (size_t i = 0; !rc && i < sizeof run_keys / sizeof run_keys[0]; i++) {
        json_text(path_get(&root[0], "run", run_keys[i]), a, sizeof a);
        json_text(path_get(&root[1], "run", run_keys[i]), b, sizeof b);
        if (strcmp(a, b))
            rc = nb_fail("--costs-from %s: run.%s = %s, --run %s has %s: expected the same model, stages and batch",
                         costs_dir, run_keys[i], b, run_dir, a);
    }
    nb_json_free(&root[0]);
    nb_json_free(&root[1]);
    return rc;
}

static int project_run(const char *dir, const char *costs_dir, const char *kind_s, const nb_proj_device *dev0,
                       int json) {
    run_facts f, c;
    double measured = NAN;
    if (read_run(dir, &f) || read_run(costs_dir ? costs_dir : dir, &c) || measured_step(dir, f.steady, &measured)) {
        fprintf(stderr, "nobubble project: %s\n", nb_last_error());
        return 1;
    }
    if (costs_dir && same_work(dir, costs_dir)) {
        fprintf(stderr, "nobubble project: %s\n", nb_last_error());
        return 2;
    }
    nb_pipe_kind kind = f.kind;
    if (kind_s && nb_pipe_kind_parse(kind_s, &kind)) {
        fprintf(stderr, "nobubble project: --pipeline %s\n", nb_last_error());
        return 2;
    }
    /* --batch is a micro-batch's sequences; --microbatches the step's over all replicas: each replica's
     * pipeline runs M / D of them. */
    if (f.M % f.D) {
        fprintf(stderr, "nobubble project: %s: %d micro-batches over %d replicas: expected a multiple\n", dir, f.M, f.D);
        return 1;
    }
    const int micro_batch = f.batch;
    nb_proj_device dev = *dev0;
    dev.act_bytes = 4;  /* a real run here sends float32 activations */
    /* The costs measured: each update's time already holds its REDUCE, so the replicas add none here. */
    const nb_proj_stages st = {c.forward, c.backward, c.update, NULL, NULL, NULL,
                               (double)micro_batch * f.seq * f.d_model * dev.act_bytes};
    /* interleaved: the run's chunks (or, from another kind's run, 2) */
    const int chunks = kind != NB_PIPE_INTERLEAVED ? 0 : f.kind == NB_PIPE_INTERLEAVED ? f.chunks : 2;
    const nb_proj_layout l = {kind, f.P, 1, f.M / f.D, micro_batch, chunks};
    nb_proj_result r;
    if (nb_proj_simulate(&l, &dev, &st, f.seq, &r)) {
        fprintf(stderr, "nobubble project: %s\n", nb_last_error());
        return 1;
    }
    const double err = r.step_s / measured - 1;
    if (json)
        printf("{\"run\": \"%s\", \"costs_from\": \"%s\", \"pipeline\": \"%s\", \"stages\": %d, \"replicas\": %d, "
               "\"chunks\": %d, \"microbatches\": %d, \"predicted_step_s\": %.6g, \"measured_step_s\": %.6g, "
               "\"error\": %.4f, \"predicted_idle_fraction\": %.4f}\n", dir, costs_dir ? costs_dir : dir,
               nb_pipe_kind_name(kind), f.P, f.D, chunks, f.M, r.step_s, measured, err, r.idle_fraction);
    else
        printf("%s (%s, P = %d, D = %d, M = %d; costs from %s): predicted %.1f ms per step, measured %.1f ms "
               "(steps %d..%d): %+.1f%%; predicted idle %.1f%%\n", dir, nb_pipe_kind_name(kind), f.P, f.D, f.M,
               costs_dir ? costs_dir : "the run", 1e3 * r.step_s, 1e3 * measured, f.steady[0], f.steady[1], 100 * err,
               100 * r.idle_fraction);
    return 0;
}

int cmd_project(int argc, char **argv) {
    const char *shape_s = NULL, *run_s = NULL, *costs_s = NULL, *kind_s = NULL, *stages_s = NULL,
               *dp_s = NULL, *bw_s = NULL;
    opt_list sets = {0};
    /* 0 or -1: not given (each range excludes it); the defaults are set once --run has been told apart */
    int seq = 0, micro_batch = 0, all = 0, json = 0;
    unsigned long long batch_tokens = 0;
    float tflops = -1, update_ns = -1, latency_us = -1, grad_bytes = -1, memory_gib = -1;
    const cli_option opts[] = {
        {"--shape", OPT_STR, &shape_s, "NAME   the model: dense-10b or a preset (smollm-360m, ...)"},
        {"--set", OPT_LIST, &sets, "F=V    change a field of the shape (n_layers=48); repeatable"},
        {"--seq", OPT_INT, &seq, "T      tokens per sequence (2048) " CLI_RANGE(1, 1048576)},
        {"--batch-tokens", OPT_U64, &batch_tokens, "N      tokens per optimizer step, all replicas (4194304) " CLI_RANGE(1, 1099511627776)},
        {"--micro-batch", OPT_INT, &micro_batch, "B      sequences per micro-batch (1) " CLI_RANGE(1, 65536)},
        {"--stages", OPT_STR, &stages_s, "P,..   pipeline stages (4,8,16,32)"},
        {"--data-parallel", OPT_STR, &dp_s, "D,..   pipeline replicas (1,4,16,64)"},
        {"--bandwidth-gbps", OPT_STR, &bw_s, "G,..   link bandwidth in Gb/s (25,100,200,400; --run: 40)"},
        {"--latency-us", OPT_FLOAT, &latency_us, "L      microseconds per message and ring hop (5; --run: 20) " CLI_RANGE(0, 1000000)},
        {"--tflops", OPT_FLOAT, &tflops, "F      achieved TFLOP/s of a forward's products per device (400) " CLI_RANGE(0, 1000000)},
        {"--update-ns", OPT_FLOAT, &update_ns, "U      optimizer step, nanoseconds per parameter (0.01) " CLI_RANGE(0, 1000000)},
        {"--memory-gib", OPT_FLOAT, &memory_gib, "G      a device's memory; layouts that need more do not fit (80) " CLI_RANGE(0, 1000000)},
        {"--grad-bytes", OPT_FLOAT, &grad_bytes, "N      bytes per gradient value in the all-reduce (4) " CLI_RANGE(1, 8)},
        {"--all", OPT_FLAG, &all, "       every kind's row, not only the best synchronous one and 2BW"},
        {"--json", OPT_FLAG, &json, "       one JSON object per row"},
        {"--run", OPT_STR, &run_s, "DIR    predict this finished pipeline run's step time"},
        {"--costs-from", OPT_STR, &costs_s, "DIR    --run: the per-stage costs of this run instead (same model, P, M)"},
        {"--pipeline", OPT_STR, &kind_s, "K      --run: simulate this kind instead of the run's"},
    };
    int rc = cli_parse(usage, argc, argv, opts, (int)(sizeof opts / sizeof opts[0]));
    if (rc) return rc > 0 ? 0 : 2;
    if (!!shape_s == !!run_s) {
        fprintf(stderr, "nobubble project: expected one of --shape NAME (a projection) or --run DIR (a run predicted)\n");
        return 2;
    }
    /* --run predicts from the run's own model, layout and measured costs: a flag of the projection would be
     * ignored there, so it is refused, named. */
    const char *shape_only = stages_s ? "--stages" : dp_s ? "--data-parallel" : seq ? "--seq" : batch_tokens ? "--batch-tokens"
                             : micro_batch ? "--micro-batch" : tflops >= 0 ? "--tflops" : update_ns >= 0 ? "--update-ns"
                             : memory_gib >= 0 ? "--memory-gib" : grad_bytes >= 0 ? "--grad-bytes" : all ? "--all" : NULL;
    if (run_s && shape_only) {
        fprintf(stderr, "nobubble project: %s goes with --shape: --run %s predicts from the run's own model, layout and "
                "measured costs\n", shape_only, run_s);
        return 2;
    }
    if (!stages_s) stages_s = "4,8,16,32";
    if (!dp_s) dp_s = "1,4,16,64";
    if (!seq) seq = 2048;
    if (!micro_batch) micro_batch = 1;
    if (!batch_tokens) batch_tokens = 4194304;
    if (tflops < 0) tflops = 400;
    if (update_ns < 0) update_ns = 0.01f;
    if (grad_bytes < 0) grad_bytes = 4;
    if (memory_gib < 0) memory_gib = 80;
    if (tflops <= 0) {
        fprintf(stderr, "nobubble project: --tflops %g: expected a number > 0\n", tflops);
        return 2;
    }
    nb_proj_device dev = {tflops * 1e12, 2, 0.5, update_ns * 1e-9, 2, grad_bytes, 16, 4, 0, 0};
    double bws[MAX_LIST];
    int nB = parse_num_list("--bandwidth-gbps", bw_s ? bw_s : run_s ? "40" : "25,100,200,400", bws);
    if (nB < 0) return 2;
    if (run_s) {
        if (sets.n || nB > 1) {
            fprintf(stderr, "nobubble project: --run takes one --bandwidth-gbps and no --set\n");
            return 2;
        }
        dev.latency = (latency_us < 0 ? 20 : latency_us) * 1e-6;
        dev.bytes_per_second = bws[0] * 1e9 / 8;
        return project_run(run_s, costs_s, kind_s, &dev, json);
    }
    if (costs_s || kind_s) {
        fprintf(stderr, "nobubble project: --costs-from and --pipeline go with --run\n");
        return 2;
    }
    dev.latency = (latency_us < 0 ? 5 : latency_us) * 1e-6;
    project_args a = {{0}, dev, (long long)batch_tokens, memory_gib * 1073741824.0, micro_batch, all, json};
    if (shape_of(shape_s, &sets, seq, &a.shape)) return 2;
    int Ps[MAX_LIST], Ds[MAX_LIST];
    const int nP = parse_int_list("--stages", stages_s, 1, 1024, Ps), nD = parse_int_list("--data-parallel", dp_s, 1,
                                                                                          65536, Ds);
    if (nP < 0 || nD < 0) return 2;
    return project_shape(&a, Ps, nP, Ds, nD, bws, nB, shape_s);
}
