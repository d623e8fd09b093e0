/* nobubble train: the command-line face of nb_train. */
#include <glob.h>
#include <omp.h>
#include <signal.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include "cli/args.h"
#include "cli/commands.h"
#include "nobubble/checkpoint.h"
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

/* The command's options: what only the command line has (data folders, the model preset and --set,
 * the split, OpenMP threads), then every setting of the run, from the settings table (train.h),
 * which parses, checks and documents them. help: room for each row's generated --help line. */
enum { CLI_ONLY = 5, HELP_SIZE = 256 };
typedef struct {
    const char *data, *preset, *split;
    opt_list sets;
    int threads;
    nb_settings_args settings;
    cli_option opts[CLI_ONLY + 2 * NB_SETTINGS_MAX];
    char help[2 * NB_SETTINGS_MAX][HELP_SIZE];
    int n_opts;
} train_args;

static void add_setting_flag(train_args *t, const char *flag, const char *help) {
    char *line = t->help[t->n_opts - CLI_ONLY];
    snprintf(line, HELP_SIZE, "%s", help);
    t->opts[t->n_opts++] = (cli_option){flag, OPT_SETTING, &t->settings, line};
}

static void train_options(train_args *t, nb_train_options *o) {
    const cli_option own[CLI_ONLY] = {
        {"--data", OPT_STR, &t->data, "DIR    prepared data: DIR/*_train_*.bin, DIR/*_val_*.bin (data/bible)"},
        {"--model", OPT_STR, &t->preset, "NAME   tiny | small | medium | smollm-135m | smollm-360m (tiny)"},
        {"--set", OPT_LIST, &t->sets, "F=V    override a model field, e.g. --set n_layers=2 (repeatable)"},
        {"--split", OPT_STR, &t->split, "A,B,.. blocks of each stage (even; with --pipeline: balanced by FLOPs, the head counted)"},
        {"--threads", OPT_INT, &t->threads, "N      OpenMP threads (all cores) " CLI_RANGE(0, 1024)},
    };
    memcpy(t->opts, own, sizeof own);
    t->n_opts = CLI_ONLY;
    nb_settings_begin(&t->settings, o);
    for (int i = 0; i < nb_settings_count; i++) {
        const nb_setting *s = &nb_settings[i];
        char help[HELP_SIZE];
        if (!s->flag) continue;
        nb_setting_help(s, help, sizeof help);
        add_setting_flag(t, s->flag, help);
        if (s->off_flag) add_setting_flag(t, s->off_flag, "       the opposite of the flag above");
    }
}

/* The model of a fresh run: --model's preset (tiny), then each --set. */
static int model_from_flags(const train_args *t, nb_train_options *o) {
    if (nb_config_preset(t->preset ? t->preset : "tiny", &o->model)) {
        fprintf(stderr, "nobubble train: %s\n", nb_last_error());
        return 2;
    }
    for (int i = 0; i < t->sets.n; i++)
        if (nb_config_override(&o->model, t->sets.items[i])) {
            fprintf(stderr, "nobubble train: --set %s\n", nb_last_error());
            return 2;
        }
    return 0;
}

/* --init-from DIR: the model is DIR/config.json's. --model is refused; a --set is accepted only where it
 * repeats the file's value (it cannot change a model whose weights are given). */
static int model_from_hf(const train_args *t, nb_train_options *o) {
    if (t->preset) {
        fprintf(stderr, "nobubble train: --model %s and --init-from %s: the model comes from %s/config.json; drop "
                "--model\n", t->preset, o->init_from, o->init_from);
        return 2;
    }
    if (nb_hf_read_config(o->init_from, &o->model)) {
        fprintf(stderr, "nobubble train: --init-from: %s\n", nb_last_error());
        return 1;
    }
    for (int i = 0; i < t->sets.n; i++) {
        nb_train_options set = *o;
        if (nb_config_override(&set.model, t->sets.items[i])) {
            fprintf(stderr, "nobubble train: --set %s\n", nb_last_error());
            return 2;
        }
        char key[64], file_value[64];
        snprintf(key, sizeof key, "%.*s", (int)strcspn(t->sets.items[i], "="), t->sets.items[i]);
        const nb_setting *row = nb_setting_by_name(key);
        if (!row) continue;   /* nb_config_override knows only the model's fields, each a row */
        nb_setting_format(row, o, file_value, sizeof file_value);
        char wanted[64];
        nb_setting_format(row, &set, wanted, sizeof wanted);
        if (strcmp(wanted, file_value)) {
            fprintf(stderr, "nobubble train: --set %s: %s/config.json gives %s = %s; with --init-from the model comes "
                    "from the file (drop --set, or change the file)\n", t->sets.items[i], o->init_from, key, file_value);
            return 2;
        }
    }
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
    static train_args t;   /* about 50 KB of help lines: not on the stack */
    memset(&t, 0, sizeof t);
    train_options(&t, &o);
    int rc = cli_parse(usage, argc, argv, t.opts, t.n_opts);
    if (rc) return rc > 0 ? 0 : 2;
    if (nb_settings_finish(&t.settings)) {
        fprintf(stderr, "nobubble train: %s\n", nb_last_error());
        return 2;
    }
    if (cli_check_threads("train", "--threads", t.threads) ||
        cli_check_threads("train", "--threads-per-stage", o.threads_per_stage))
        return 2;
    if (t.threads) omp_set_num_threads(t.threads);
    int split_blocks[256];
    if (t.split && parse_split(t.split, o.stages, split_blocks)) return 2;
    if (t.split) o.split = split_blocks;
    if (o.delay.ef && (o.delay.mode == NB_DELAY_SYNC || (o.delay.mode == NB_DELAY_FIXED && o.delay.tau == 0)))
        fprintf(stderr, "nobubble train: warning: --ef with no delay does nothing (it corrects delayed steps only)\n");
    rc = o.init_from ? model_from_hf(&t, &o) : model_from_flags(&t, &o);
    if (rc) return rc;
    if (o.init_from && o.resume_dir)
        fprintf(stderr, "nobubble train: note: --resume %s continues that run's weights and state; --init-from %s gives "
                "only the model's configuration\n", o.resume_dir, o.init_from);
    int has_vocab_override = o.init_from != NULL;   /* an imported model keeps its vocabulary */
    for (int i = 0; i < t.sets.n; i++)
        if (!strncmp(t.sets.items[i], "vocab_size=", 11)) has_vocab_override = 1;
    const char *data = t.data;
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
        if (v > o.model.vocab_size && o.init_from) {
            fprintf(stderr, "nobubble train: --data %s: its tokenizer has %d tokens, more than the vocab_size %d of "
                    "%s/config.json: the data was not tokenized for this model\n", data, v, o.model.vocab_size, o.init_from);
            return 2;
        }
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
