/* nobubble train: the command-line face of nb_train. */
#include <omp.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include "cli/args.h"
#include "cli/commands.h"
#include "nobubble/data.h"
#include "nobubble/train.h"

static const char usage[] =
    "usage: nobubble train [--data DIR | --train GLOB [--val GLOB]] [--model PRESET] [--set FIELD=VALUE]...\n"
    "                      [--batch B] [--seq T] [--microbatches M] [--steps N] [--lr LR] [--out DIR] ...\n"
    "Trains a model with AdamW, accumulating M micro-batches of B sequences per step.";

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

int cmd_train(int argc, char **argv) {
    nb_train_options o;
    nb_train_defaults(&o);
    const char *data = NULL, *preset = "tiny", *schedule = "cosine";
    opt_list sets = {0};
    int threads = 0, has_vocab_override = 0;
    unsigned long long seed = o.seed, data_seed = o.data_seed;
    const cli_option opts[] = {
        {"--data", OPT_STR, &data, "DIR    prepared data: DIR/*_train_*.bin, DIR/*_val_*.bin (data/bible)"},
        {"--train", OPT_STR, &o.train_pattern, "GLOB   training shards (instead of --data)"},
        {"--val", OPT_STR, &o.val_pattern, "GLOB   validation shards"},
        {"--model", OPT_STR, &preset, "NAME   tiny | small | medium | smollm-135m | smollm-360m (tiny)"},
        {"--set", OPT_LIST, &sets, "F=V    override a model field, e.g. --set n_layers=2 (repeatable)"},
        {"--stages", OPT_INT, &o.stages, "P      split the model into P stages in this process (1)"},
        {"--batch", OPT_INT, &o.batch, "B      sequences per micro-batch (8)"},
        {"--seq", OPT_INT, &o.seq_len, "T      tokens per sequence (the model's context)"},
        {"--microbatches", OPT_INT, &o.microbatches, "M      micro-batches accumulated per step (1)"},
        {"--steps", OPT_INT, &o.steps, "N      optimizer steps (100)"},
        {"--lr", OPT_FLOAT, &o.schedule.lr, "LR     peak learning rate (1e-3)"},
        {"--lr-min", OPT_FLOAT, &o.schedule.lr_min, "LR     final learning rate of the cosine (0)"},
        {"--warmup", OPT_INT, &o.schedule.warmup, "N      linear warmup steps (0)"},
        {"--schedule", OPT_STR, &schedule, "NAME   cosine | constant (cosine)"},
        {"--beta1", OPT_FLOAT, &o.adamw.beta1, "B1     AdamW beta1 (0.9)"},
        {"--beta2", OPT_FLOAT, &o.adamw.beta2, "B2     AdamW beta2 (0.95)"},
        {"--eps", OPT_FLOAT, &o.adamw.eps, "EPS    AdamW epsilon (1e-8)"},
        {"--wd", OPT_FLOAT, &o.adamw.weight_decay, "WD     decoupled weight decay, matrices and embeddings (0.1)"},
        {"--eval-every", OPT_INT, &o.eval_every, "N      validation loss every N steps, and at the end (0: end only)"},
        {"--eval-batches", OPT_INT, &o.eval_batches, "N      validation micro-batches per evaluation (8)"},
        {"--log-every", OPT_INT, &o.log_every, "N      progress line every N steps (10)"},
        {"--seed", OPT_U64, &seed, "S      weight initialization seed (1)"},
        {"--data-seed", OPT_U64, &data_seed, "S      order of training windows, 0 = sequential (0)"},
        {"--threads", OPT_INT, &threads, "N      OpenMP threads (all cores)"},
        {"--out", OPT_STR, &o.out_dir, "DIR    write DIR/metrics.jsonl and DIR/summary.json"},
        {"--quiet", OPT_FLAG, &o.quiet, "       no progress lines"},
    };
    int rc = cli_parse(usage, argc, argv, opts, (int)(sizeof opts / sizeof opts[0]));
    if (rc) return rc > 0 ? 0 : 2;
    o.seed = seed;
    o.data_seed = data_seed;
    if (threads < 0) {
        fprintf(stderr, "nobubble train: --threads %d: expected >= 1\n", threads);
        return 2;
    }
    if (threads) omp_set_num_threads(threads);
    if (nb_config_preset(preset, &o.model) || nb_schedule_parse(schedule, &o.schedule.kind)) {
        fprintf(stderr, "nobubble train: %s\n", nb_last_error());
        return 2;
    }
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
        if (!o.val_pattern) o.val_pattern = val_glob;
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
    nb_train_result res;
    if (nb_train(&o, &res)) {
        fprintf(stderr, "nobubble train: %s\n", nb_last_error());
        return 1;
    }
    printf("done: %d steps, final train loss %.4f, val loss %.4f, %.0f tokens/s, weights %016llx\n", res.steps,
           res.final_train_loss, res.final_val_loss, res.tokens_per_s, (unsigned long long)res.weights_hash);
    if (o.out_dir) printf("wrote %s/metrics.jsonl and %s/summary.json\n", o.out_dir, o.out_dir);
    return 0;
}
