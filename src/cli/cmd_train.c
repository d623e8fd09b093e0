/* nobubble train: the command-line face of nb_train. */
#include <glob.h>
#include <limits.h>
#include <math.h>
#include <omp.h>
#include <signal.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include "cli/args.h"
#include "cli/commands.h"
#include "nobubble/data.h"
#include "nobubble/pipeline.h"
#include "nobubble/runtime.h"
#include "nobubble/train.h"
#include "util/signals.h"

static const char usage[] =
    "usage: nobubble train [--data DIR | --train GLOB [--val GLOB]] [--model PRESET] [--set FIELD=VALUE]...\n"
    "                      [--batch B] [--seq T] [--microbatches M] [--steps N] [--optimizer NAME] [--lr LR] [--out DIR] ...\n"
    "Trains a model, accumulating M micro-batches of B sequences per optimizer step.";

/* Reads the vocabulary size of DIR/tokenizer.json; 0 when there is none. */
static int data_vocab(const char *dir) {
    char path[4096];
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    if (access(path, R_OK)) return 0;
    nb_tokenizer *t;
    if (nb_tokenizer_load(&t, path)) return -1;
    int v = nb_tokenizer_vocab_size(t);
    nb_tokenizer_free(t);
    return v;
}

/* SIGINT and SIGTERM finish the current step (a pipeline: a few steps more, see docs/pipeline.md),
 * save a checkpoint (with --save-dir) and exit. SIGUSR1 too: Open MPI's mpirun forwards it to every
 * rank, while it answers SIGINT and SIGTERM by killing the job after a few seconds. A second SIGINT
 * or SIGTERM exits at once with 128 + the signal (the checkpoints saved before are intact: saves are
 * atomic). Called on the signal thread (util/signals.h), never in signal context. */
static void on_signal(int sig, int count) {
    const char *name = sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM" : "SIGUSR1";
    if (count > 1 && sig != SIGUSR1) {
        fprintf(stderr, "nobubble train: %s again: exiting at once, without a checkpoint\n", name);
        _exit(128 + sig);
    }
    if (count == 1)
        fprintf(stderr, "nobubble train: %s: stopping at the end of a step, with a checkpoint (with --save-dir); "
                "a second SIGINT or SIGTERM exits at once\n", name);
    nb_train_request_stop();
}

static int matches_any(const char *pattern) {
    glob_t g;
    memset(&g, 0, sizeof g);
    int found = glob(pattern, 0, NULL, &g) == 0 && g.gl_pathc > 0;
    globfree(&g);
    return found;
}

/* "--split 3,1": exactly `stages` block counts (their sum is checked with the model). */
static int parse_split(const char *text, int stages, int *blocks) {
    const char *p = text;
    int n = 0;
    while (*p) {
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p || v < 0 || v > 100000 || (*end && *end != ',') || n >= 256) break;
        blocks[n++] = (int)v;
        p = *end ? end + 1 : end;
        if (!*end) {
            if (n == stages) return 0;
            break;
        }
    }
    fprintf(stderr, "nobubble train: --split '%s': expected %d comma-separated block counts (one per stage of --stages)\n",
            text, stages);
    return -1;
}

/* --pipeline sets the delay its schedule imposes; an explicit --delay must agree with it. */
static int pipeline_options(const char *pipeline, const char *transport, const char *delay, nb_train_options *o) {
    nb_pipe_kind kind;
    nb_transport_kind tk;
    if (nb_delay_parse(delay ? delay : "sync", &o->delay) ||
        (pipeline && (nb_pipe_kind_parse(pipeline, &kind) || nb_transport_parse(transport, &tk)))) {
        fprintf(stderr, "nobubble train: %s\n", nb_last_error());
        return -1;
    }
    if (!pipeline) {
        if (strcmp(transport, "threads") || nb_mpi_launched()) {
            fprintf(stderr, "nobubble train: --transport and mpirun need --pipeline KIND (one process per stage)\n");
            return -1;
        }
        return 0;
    }
    const char *own = nb_pipe_delay_name(kind);
    if (delay && strcmp(delay, own)) {
        fprintf(stderr, "nobubble train: --pipeline %s runs with the delay %s, not --delay %s (leave --delay out)\n",
                pipeline, own, delay);
        return -1;
    }
    nb_delay_parse(own, &o->delay);
    o->pipeline = (int)kind;
    o->transport = (int)tk;
    return 0;
}

int cmd_train(int argc, char **argv) {
    /* First, before any thread exists (OpenMP's, oneDNN's, MPI's, the pipeline's): every thread
     * then inherits the mask that blocks the stop signals, and only the signal thread takes them. */
    if (nb_signals_start(on_signal)) {
        fprintf(stderr, "nobubble train: %s\n", nb_last_error());
        return 1;
    }
    nb_train_options o;
    nb_train_defaults(&o);
    const char *data = NULL, *preset = "tiny", *schedule = "cosine", *optimizer = "adamw";
    /* Optimizer hyperparameters: NAN / -1 until given, then the optimizer's own defaults. */
    float lr = NAN, beta1 = NAN, beta2 = NAN, beta3 = NAN, eps = NAN, wd = NAN, momentum = NAN, gamma = NAN;
    float aux_beta1 = NAN, aux_beta2 = NAN;
    int ns_steps = INT_MIN, precond_every = INT_MIN, nesterov = 0, no_nesterov = 0, max_precond_dim = INT_MIN;
    opt_list sets = {0};
    int threads = 0, has_vocab_override = 0;
    const char *split = NULL;
    int split_blocks[256];
    const char *delay = NULL, *ef = NULL, *pipeline = NULL, *transport = "threads";
    unsigned long long seed = o.seed, data_seed = o.data_seed;
    const cli_option opts[] = {
        {"--data", OPT_STR, &data, "DIR    prepared data: DIR/*_train_*.bin, DIR/*_val_*.bin (data/bible)"},
        {"--train", OPT_STR, &o.train_pattern, "GLOB   training shards (instead of --data)"},
        {"--val", OPT_STR, &o.val_pattern, "GLOB   validation shards"},
        {"--model", OPT_STR, &preset, "NAME   tiny | small | medium | smollm-135m | smollm-360m (tiny)"},
        {"--set", OPT_LIST, &sets, "F=V    override a model field, e.g. --set n_layers=2 (repeatable)"},
        {"--stages", OPT_INT, &o.stages, "P      split the model into P stages (1) " CLI_RANGE(1, 1024)},
        {"--split", OPT_STR, &split, "A,B,.. blocks of each stage (even; with --pipeline: balanced by FLOPs, the head counted)"},
        {"--batch", OPT_INT, &o.batch, "B      sequences per micro-batch (8) " CLI_RANGE(1, 65536)},
        {"--seq", OPT_INT, &o.seq_len, "T      tokens per sequence (the model's context) " CLI_RANGE(0, 1048576)},
        {"--microbatches", OPT_INT, &o.microbatches, "M      micro-batches accumulated per step (1) " CLI_RANGE(1, 4096)},
        {"--steps", OPT_INT, &o.steps, "N      optimizer steps (100) " CLI_RANGE(1, 100000000)},
        {"--optimizer", OPT_STR, &optimizer, "NAME   sgd | adamw | muon | lion | adan | mars | soap (adamw)"},
        {"--lr", OPT_FLOAT, &lr, "LR     peak learning rate (sgd 0.05, adamw/adan/mars/soap 1e-3, muon 0.02, lion 3e-4)"},
        {"--aux-lr", OPT_FLOAT, &o.aux_lr, "LR     AdamW lr of embeddings and gains under muon, soap, mars (1e-3)"},
        {"--lr-min", OPT_FLOAT, &o.schedule.lr_min, "LR     final learning rate of cosine and wsd (0)"},
        {"--warmup", OPT_INT, &o.schedule.warmup, "N      linear warmup steps (0) " CLI_RANGE(0, 100000000)},
        {"--schedule", OPT_STR, &schedule, "NAME   cosine | wsd | constant (cosine)"},
        {"--cooldown", OPT_FLOAT, &o.schedule.cooldown, "F      wsd: fraction of the steps spent decaying (0.2) " CLI_RANGE(0, 1)},
        {"--clip", OPT_FLOAT, &o.clip, "C      clip the global gradient norm to C (0: off)"},
        {"--beta1", OPT_FLOAT, &beta1, "B1     beta1 (adamw 0.9, lion 0.9, adan 0.98, mars 0.95, soap 0.95)"},
        {"--beta2", OPT_FLOAT, &beta2, "B2     beta2 (adamw 0.95, lion 0.99, adan 0.92, mars 0.99, soap 0.95)"},
        {"--beta3", OPT_FLOAT, &beta3, "B3     adan beta3 (0.99)"},
        {"--momentum", OPT_FLOAT, &momentum, "MU     sgd (0.9) and muon (0.95) momentum"},
        {"--nesterov", OPT_FLAG, &nesterov, "       Nesterov momentum (default for muon)"},
        {"--no-nesterov", OPT_FLAG, &no_nesterov, "       plain momentum (default for sgd)"},
        {"--eps", OPT_FLOAT, &eps, "EPS    epsilon (1e-8)"},
        {"--wd", OPT_FLOAT, &wd, "WD     decoupled weight decay, matrices and embeddings (0.1)"},
        {"--ns-steps", OPT_INT, &ns_steps, "N      muon Newton-Schulz iterations (5) " CLI_RANGE(1, 100)},
        {"--gamma", OPT_FLOAT, &gamma, "G      mars gradient-correction scale (0.025)"},
        {"--precond-every", OPT_INT, &precond_every, "N      soap eigenbasis refresh interval (10) " CLI_RANGE(1, 100000000)},
        {"--max-precond-dim", OPT_INT, &max_precond_dim, "N      soap: larger sides are not preconditioned (10000) " CLI_RANGE(1, 1000000)},
        {"--aux-beta1", OPT_FLOAT, &aux_beta1, "B1     beta1 of the auxiliary AdamW (0.9)"},
        {"--aux-beta2", OPT_FLOAT, &aux_beta2, "B2     beta2 of the auxiliary AdamW (0.95)"},
        {"--eval-every", OPT_INT, &o.eval_every, "N      validation loss every N steps, and at the end (0: end only) " CLI_RANGE(0, 100000000)},
        {"--eval-batches", OPT_INT, &o.eval_batches, "N      validation micro-batches per evaluation (8) " CLI_RANGE(1, 4096)},
        {"--log-every", OPT_INT, &o.log_every, "N      progress line every N steps (10) " CLI_RANGE(1, 100000000)},
        {"--seed", OPT_U64, &seed, "S      weight initialization seed (1)"},
        {"--data-seed", OPT_U64, &data_seed, "S      order of training windows, 0 = sequential (0)"},
        {"--delay", OPT_STR, &delay, "MODE   sync | 2bw | pipedream | fixed:TAU (sync); per stage of --stages"},
        {"--ef", OPT_STR, &ef, "ALPHA  error feedback on the step (the paper's correction: 1)"},
        {"--taylor", OPT_FLOAT, &o.delay.taylor, "LAMBDA delay-compensated gradient (DC-ASGD; 0: off)"},
        {"--sync-start", OPT_INT, &o.delay.sync_start, "K      no delay for the first K steps (0) " CLI_RANGE(0, 100000000)},
        {"--sync-cooldown", OPT_INT, &o.delay.sync_cooldown, "K      no delay for the last K steps (0) " CLI_RANGE(0, 100000000)},
        {"--threads", OPT_INT, &threads, "N      OpenMP threads (all cores) " CLI_RANGE(0, 1024)},
        {"--out", OPT_STR, &o.out_dir, "DIR    write DIR/metrics.jsonl and DIR/summary.json"},
        {"--save-dir", OPT_STR, &o.save_dir, "DIR    checkpoints DIR/step_NNNNNN (weights + full training state) at the end"},
        {"--save-every", OPT_INT, &o.save_every, "N      also a checkpoint every N steps (needs --save-dir) " CLI_RANGE(0, 100000000)},
        {"--keep", OPT_INT, &o.keep, "K      keep only the newest K periodic checkpoints (0: all) " CLI_RANGE(0, 1000000)},
        {"--resume", OPT_STR, &o.resume_dir, "DIR    continue from a checkpoint folder (same model, optimizer, delay, data; any --stages)"},
        {"--override", OPT_FLAG, &o.resume_override, "       --resume even where this run's settings differ (a warning lists them)"},
        {"--export", OPT_STR, &o.export_dir, "DIR    write the final weights as a Hugging Face folder (model.safetensors, config.json)"},
        {"--pipeline", OPT_STR, &pipeline, "KIND   real workers, one per stage: gpipe | 1f1b | pipedream | 2bw (sets --delay)"},
        {"--transport", OPT_STR, &transport, "NAME   threads (one process) | mpi (mpirun -np P, one process per stage) (threads)"},
        {"--threads-per-stage", OPT_INT, &o.threads_per_stage, "N      GEMM threads of each pipeline worker (cores / stages) " CLI_RANGE(0, 1024)},
        {"--peer-timeout", OPT_FLOAT, &o.peer_timeout, "S      a pipeline stage waiting S seconds for another fails the run, naming it (300; 0: no limit) " CLI_RANGE(0, 1000000)},
        {"--quiet", OPT_FLAG, &o.quiet, "       no progress lines"},
    };
    int rc = cli_parse(usage, argc, argv, opts, (int)(sizeof opts / sizeof opts[0]));
    if (rc) return rc > 0 ? 0 : 2;
    o.seed = seed;
    o.data_seed = data_seed;
    if (cli_check_threads("train", "--threads", threads) ||
        cli_check_threads("train", "--threads-per-stage", o.threads_per_stage))
        return 2;
    if (threads) omp_set_num_threads(threads);
    if (pipeline_options(pipeline, transport, delay, &o)) return 2;
    if (split && parse_split(split, o.stages, split_blocks)) return 2;
    if (split) o.split = split_blocks;
    if (ef) {
        char *end;
        o.delay.ef = 1;
        o.delay.ef_alpha = strtof(ef, &end);
        if (end == ef || *end || !isfinite(o.delay.ef_alpha) || o.delay.ef_alpha < 0) {
            fprintf(stderr, "nobubble train: --ef '%s': expected alpha >= 0 (the paper's correction is --ef 1)\n", ef);
            return 2;
        }
        if (o.delay.mode == NB_DELAY_SYNC || (o.delay.mode == NB_DELAY_FIXED && o.delay.tau == 0))
            fprintf(stderr, "nobubble train: warning: --ef with no delay does nothing (it corrects delayed steps only)\n");
    }
    nb_optimizer_kind kind;
    if (nb_config_preset(preset, &o.model) || nb_schedule_parse(schedule, &o.schedule.kind) ||
        nb_optimizer_parse(optimizer, &kind)) {
        fprintf(stderr, "nobubble train: %s\n", nb_last_error());
        return 2;
    }
    if (nesterov && no_nesterov) {
        fprintf(stderr, "nobubble train: give --nesterov or --no-nesterov, not both\n");
        return 2;
    }
    static const float default_lr[NB_OPT_COUNT] = {0.05f, 1e-3f, 0.02f, 3e-4f, 1e-3f, 1e-3f, 1e-3f};
    o.optim = nb_optim_defaults(kind);
    o.optim.weight_decay = 0.1f;
    o.schedule.lr = isnan(lr) ? default_lr[kind] : lr;
    struct { float given, *field; } overrides[] = {
        {beta1, &o.optim.beta1}, {beta2, &o.optim.beta2}, {beta3, &o.optim.beta3}, {eps, &o.optim.eps},
        {wd, &o.optim.weight_decay}, {momentum, &o.optim.momentum}, {gamma, &o.optim.gamma},
        {aux_beta1, &o.optim.aux_beta1}, {aux_beta2, &o.optim.aux_beta2},
    };
    for (size_t i = 0; i < sizeof overrides / sizeof overrides[0]; i++)
        if (!isnan(overrides[i].given)) *overrides[i].field = overrides[i].given;
    if (ns_steps != INT_MIN) o.optim.ns_steps = ns_steps;
    if (precond_every != INT_MIN) o.optim.precond_every = precond_every;
    if (max_precond_dim != INT_MIN) o.optim.max_precond_dim = max_precond_dim;
    if (nesterov) o.optim.nesterov = 1;
    if (no_nesterov) o.optim.nesterov = 0;
    for (int i = 0; i < sets.n; i++) {
        if (nb_config_override(&o.model, sets.items[i])) {
            fprintf(stderr, "nobubble train: --set %s\n", nb_last_error());
            return 2;
        }
        if (!strncmp(sets.items[i], "vocab_size=", 11)) has_vocab_override = 1;
    }
    char train_glob[4096], val_glob[4096];
    if (!o.train_pattern) {
        if (!data) data = "data/bible";
        snprintf(train_glob, sizeof train_glob, "%s/*_train_*.bin", data);
        snprintf(val_glob, sizeof val_glob, "%s/*_val_*.bin", data);
        o.train_pattern = train_glob;
        if (!o.val_pattern) {
            /* prepare --val-fraction 0 writes no validation shards: train without validation, and say so. */
            if (matches_any(val_glob) || !matches_any(train_glob)) o.val_pattern = val_glob;
            else fprintf(stderr, "nobubble train: note: %s has no validation shards (%s; prepared with "
                                 "--val-fraction 0?): training without a validation loss\n", data, val_glob);
        }
        /* The model's vocabulary follows the data's tokenizer unless set explicitly. */
        int v = data_vocab(data);
        if (v < 0) {
            fprintf(stderr, "nobubble train: %s\n", nb_last_error());
            return 1;
        }
        if (v > 0 && !has_vocab_override) o.model.vocab_size = v;
    } else if (data) {
        fprintf(stderr, "nobubble train: give --data or --train, not both\n");
        return 2;
    }
    /* Past a file-size limit a write then fails (EFBIG) and the run reports it like a full disk,
     * instead of being killed mid-checkpoint. */
    signal(SIGXFSZ, SIG_IGN);
    nb_train_result res;
    int failed = nb_train(&o, &res);
    nb_mpi_finish();
    if (failed) {
        fprintf(stderr, "nobubble train: %s\n", nb_last_error());
        return 1;
    }
    if (!res.primary) return 0;  /* an MPI rank > 0: the first stage reports the run */
    char val_loss[32] = "none (no validation data)";
    if (o.val_pattern) snprintf(val_loss, sizeof val_loss, "%.4f", res.final_val_loss);
    printf("done: %d steps, final train loss %.4f, val loss %s, %.0f tokens/s, weights %016llx\n", res.steps,
           res.final_train_loss, val_loss, res.tokens_per_s, (unsigned long long)res.weights_hash);
    if (o.out_dir) printf("wrote %s/metrics.jsonl and %s/summary.json\n", o.out_dir, o.out_dir);
    if (o.export_dir) {
        /* The data's tokenizer goes with the model, so that `nobubble sample` finds it. */
        char from[4096], to[4096];
        snprintf(from, sizeof from, "%s/tokenizer.json", data ? data : "");
        snprintf(to, sizeof to, "%s/tokenizer.json", o.export_dir);
        nb_tokenizer *t;
        if (data && access(from, R_OK) == 0) {
            if (nb_tokenizer_load(&t, from) || nb_tokenizer_save(t, to)) {
                fprintf(stderr, "nobubble train: %s\n", nb_last_error());
                return 1;
            }
            nb_tokenizer_free(t);
        }
        printf("wrote %s/model.safetensors and %s/config.json%s\n", o.export_dir, o.export_dir,
               data && access(to, R_OK) == 0 ? " (and the data's tokenizer.json)" : "");
    }
    return 0;
}
