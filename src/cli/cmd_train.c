/* nobubble train: the command-line face of nb_train. */
#include <math.h>
#include <omp.h>
#include <signal.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "cli/args.h"
#include "cli/commands.h"
#include "nobubble/checkpoint.h"
#include "nobubble/data.h"
#include "nobubble/mpi.h"
#include "nobubble/optim.h"
#include "nobubble/pipeline.h"
#include "nobubble/runtime.h"
#include "nobubble/train.h"
#include "util/signals.h"

static const char usage[] =
    "usage: nobubble train [--data DIR | --train GLOB [--val GLOB]] [--model PRESET] [--set FIELD=VALUE]...\n"
    "                      [--batch B] [--seq T] [--microbatches M] [--steps N] [--optimizer NAME] [--lr LR] [--out DIR] ...\n"
    "Trains a model, accumulating M micro-batches of B sequences per optimizer step.";

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

/* "--split 3,1": exactly `stages` block counts (their sum is checked with the model); room for as many as
 * --stages allows (NB_TRAIN_MAX_STAGES). */
enum { SPLIT_MAX = NB_TRAIN_MAX_STAGES };
static int parse_split(const char *text, int stages, int *blocks) {
    const char *p = text;
    int n = 0;
    while (*p) {
        char *end;
        errno = 0;
        long v = strtol(p, &end, 10);
        if (end != p && (!*end || *end == ',') && (errno || v < 0 || v > 100000)) {
            fprintf(stderr, "nobubble train: --split '%s': block count %.*s is out of range (expected 0 to 100000)\n",
                    text, (int)(end - p), p);
            return -1;
        }
        if (end == p || (*end && *end != ',') || n >= SPLIT_MAX) break;
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
enum { CLI_ONLY = 6, HELP_SIZE = 256 };
typedef struct {
    const char *data, *preset, *split, *config;
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
        {"--data", OPT_STR, &t->data, "DIR    prepared data: DIR/*_train_*.bin, DIR/*_val_*.bin, or llm.c's DIR/*_train.bin, DIR/*_val.bin (data/bible)"},
        {"--model", OPT_STR, &t->preset, "NAME   tiny | small | medium | smollm-135m | smollm-360m | moe-tiny | moe-small (tiny)"},
        {"--set", OPT_LIST, &t->sets, "F=V    override a model field, e.g. --set n_layers=2 (repeatable)"},
        {"--split", OPT_STR, &t->split, "A,B,.. blocks of each stage (even; with --pipeline: balanced by FLOPs, the head counted)"},
        {"--threads", OPT_INT, &t->threads, "N      OpenMP threads (all cores) " CLI_RANGE(0, 1024)},
        {"--config", OPT_STR, &t->config, "FILE   settings from a JSON file (a run's --out/" NB_TRAIN_CONFIG_FILE
                                          " too); flags given here override it"},
    };
    memcpy(t->opts, own, sizeof own);
    t->n_opts = CLI_ONLY;
    nb_settings_begin(&t->settings, o);
    for (int i = 0; i < nb_settings_count; i++) {
        const nb_setting *s = &nb_settings[i];
        char help[HELP_SIZE];
        if (!s->flag) continue;
        nb_setting_help(s, help, sizeof help);
        /* the backends are the build's (cuda only with -DNB_CUDA=ON): asked of the backend, which the settings
         * table (linked without it, e.g. by the fuzzers) does not call */
        if (s->offset == offsetof(nb_train_options, gemm))
            snprintf(help, sizeof help, "%-6s the backend of the products: %s (not given: the environment's NB_GEMM, else "
                     "the build's default)", s->metavar, nb_backend_choices());
        add_setting_flag(t, s->flag, help);
        if (s->off_flag) add_setting_flag(t, s->off_flag, "       the opposite of the flag above");
    }
}

/* --config FILE (or --config=FILE), found before the flags are parsed: the file is applied first, so
 * that every flag given, wherever it stands, overrides it. */
static const char *config_arg(int argc, char **argv) {
    const char *found = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--")) break;
        if (!strcmp(argv[i], "--config") && i + 1 < argc) found = argv[++i];
        else if (!strncmp(argv[i], "--config=", 9)) found = argv[i] + 9;
    }
    return found;
}

/* The file's model fields, after the preset and before --set; whether one was vocab_size. */
static int apply_config_model(const nb_train_config_file *f, const char *path, nb_config *model, int *has_vocab) {
    for (int i = 0; i < nb_train_config_model_count(f); i++) {
        const char *set = nb_train_config_model_set(f, i);
        if (nb_config_override(model, set)) {
            fprintf(stderr, "nobubble train: --config %s: %s\n", path, nb_last_error());
            return -1;
        }
        if (!strncmp(set, "vocab_size=", 11)) *has_vocab = 1;
    }
    return 0;
}

/* --resume and the run's folders (nb_train_resolve_folders): a folder holding an earlier run is refused here,
 * a usage error, before anything starts; nb_train checks again once it holds the folders' locks, and
 * removes the old files under --force. */
static int resolve_run_folders(nb_train_options *o) {
    static char resume_path[4400];
    if (!nb_train_resolve_folders(o, resume_path, sizeof resume_path)) return 0;
    fprintf(stderr, "nobubble train: %s\n", nb_last_error());
    return -1;
}

/* The model of a fresh run: --model's preset (tiny), then --config's model fields, then each --set;
 * *has_vocab: whether the file or a --set gave vocab_size. */
static int model_from_flags(const train_args *t, const nb_train_config_file *file, const char *config,
                            nb_train_options *o, int *has_vocab) {
    if (nb_config_preset(t->preset ? t->preset : "tiny", &o->model)) {
        fprintf(stderr, "nobubble train: %s\n", nb_last_error());
        return 2;
    }
    if (apply_config_model(file, config, &o->model, has_vocab)) return 2;
    for (int i = 0; i < t->sets.n; i++) {
        if (nb_config_override(&o->model, t->sets.items[i])) {
            fprintf(stderr, "nobubble train: --set %s\n", nb_last_error());
            return 2;
        }
        if (!strncmp(t->sets.items[i], "vocab_size=", 11)) *has_vocab = 1;
    }
    /* The file's model fields, checked together with --set's, naming the file. */
    if (nb_train_config_model_count(file) && nb_config_validate(&o->model)) {
        fprintf(stderr, "nobubble train: --config %s%s: %s\n", config, t->sets.n ? " with --set" : "", nb_last_error());
        return 2;
    }
    return 0;
}


/* One model field given beside --init-from ("FIELD=VALUE", from --set or a --config file, named by what): accepted
 * only where it repeats DIR/config.json's value (a run's own train_config.json holds every field). 0, or 2 after
 * the message. */
static int repeats_hf_field(const nb_train_options *o, const char *item, const char *what, const char *drop) {
    nb_train_options set = *o;
    if (nb_config_override(&set.model, item)) {
        fprintf(stderr, "nobubble train: %s %s\n", what, nb_last_error());
        return 2;
    }
    char key[64], file_value[64];
    snprintf(key, sizeof key, "%.*s", (int)strcspn(item, "="), item);
    const nb_setting *row = nb_setting_by_name(key);
    if (!row) return 0;   /* nb_config_override knows only the model's fields, each a row */
    nb_setting_format(row, o, file_value, sizeof file_value);
    char wanted[64];
    nb_setting_format(row, &set, wanted, sizeof wanted);
    if (strcmp(wanted, file_value)) {
        fprintf(stderr, "nobubble train: %s %s: %s/config.json gives %s = %s; with --init-from the model comes "
                "from the file (drop %s, or change the file)\n", what, item, o->init_from, key, file_value, drop);
        return 2;
    }
    return 0;
}

/* --init-from DIR: the model is DIR/config.json's. --model is refused; a --set, or a model field of
 * --config's file, is accepted only where it
 * repeats the file's value (it cannot change a model whose weights are given). */
static int model_from_hf(const train_args *t, const nb_train_config_file *file, const char *config,
                         nb_train_options *o) {
    if (t->preset) {
        fprintf(stderr, "nobubble train: --model %s and --init-from %s: the model comes from %s/config.json; drop "
                "--model\n", t->preset, o->init_from, o->init_from);
        return 2;
    }
    if (nb_hf_read_config(o->init_from, &o->model)) {
        fprintf(stderr, "nobubble train: --init-from: %s\n", nb_last_error());
        return 1;
    }
    char what[4200];
    snprintf(what, sizeof what, "--config %s: model field", config ? config : "");
    for (int i = 0; i < nb_train_config_model_count(file); i++)
        if (repeats_hf_field(o, nb_train_config_model_set(file, i), what, "the field from --config")) return 2;
    for (int i = 0; i < t->sets.n; i++)
        if (repeats_hf_field(o, t->sets.items[i], "--set", "--set")) return 2;
    return 0;
}

static int train_command(int argc, char **argv, nb_train_config_file **file);

int cmd_train(int argc, char **argv) {
    nb_train_config_file *file = NULL;
    int rc = train_command(argc, argv, &file);
    nb_train_config_free(file);
    return rc;
}

/* Whether the row of flag was given on the command line (a --config file, often a run's own
 * train_config.json, holds every row: its values are not the user's choice of flags). */
static int given(const train_args *t, const char *flag) {
    const nb_setting *row = nb_setting_by_flag(flag);
    return row && t->settings.given[row - nb_settings] == 1;
}

/* Flags given that this run does not read, or cannot use as asked: said on stderr, since the run goes on (a
 * typo in another flag, or a misunderstanding, would otherwise pass unnoticed). */
static void warn_unused(const train_args *t, const nb_train_options *o) {
    const int undelayed = o->delay.mode == NB_DELAY_SYNC || (o->delay.mode == NB_DELAY_FIXED && o->delay.tau == 0);
    const int mpi_replicas = o->data_parallel > 1 && o->pipeline >= 0 && o->transport == NB_TRANSPORT_MPI;
    const int on_device = o->device && *o->device && strcmp(o->device, "cpu");
    const int buckets = mpi_replicas && o->pipeline != NB_PIPE_ZBH1 && !on_device;  /* as the executor decides */
    /* the schedule's updates: under PipeDream one per micro-batch of a replica */
    const int share = o->data_parallel > 0 ? o->microbatches / o->data_parallel : o->microbatches;
    const long long updates = (long long)o->steps * (o->pipeline == NB_PIPE_PIPEDREAM && share > 1 ? share : 1);
    const struct {
        const char *flag;
        int unused;
        const char *why;
    } rows[] = {
        /* (where the run refuses a flag, it is not warned of first: zbh1 refuses --ef and --taylor, a pipeline other
         * than interleaved --chunks) */
        {"--ef", undelayed && o->pipeline != NB_PIPE_ZBH1, "with no delay does nothing (it corrects delayed steps only)"},
        {"--taylor", undelayed && o->pipeline != NB_PIPE_ZBH1,
         "with no delay does nothing (it compensates delayed gradients only)"},
        {"--chunks", o->pipeline < 0, "does nothing here: only --pipeline interleaved has chunks"},
        {"--threads-per-stage", o->pipeline < 0,
         "does nothing here: only a real pipeline (--pipeline) gives its stages threads of their own"},
        {"--dp-bucket-mib", !buckets, "does nothing here: only replicas that are MPI ranks (--data-parallel D with "
                                       "--transport mpi), on the CPU and outside zbh1, sum their gradients in buckets"},
        {"--warmup", o->schedule.warmup > updates, "is longer than the run's updates: the rate never reaches its peak"},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
        if (rows[i].unused && given(t, rows[i].flag))
            fprintf(stderr, "nobubble train: warning: %s %s\n", rows[i].flag, rows[i].why);
    if (t->threads && o->pipeline >= 0)   /* a command-line flag, not a setting: not in the rows */
        fprintf(stderr, "nobubble train: warning: --threads does nothing with --pipeline: each stage's products take "
                "--threads-per-stage threads (without it, the cores shared over the stages)\n");
    /* A run whose every update has rate 0 trains nothing, whatever its flags: cosine (and wsd where its decay
     * rounds to a step or more) ends at --lr-min on its last update, so a schedule of one update (without warm-up)
     * is that update alone. nb_schedule_lr decides, so no schedule is judged by a rule of its own here. */
    float top = 1.0f;  /* a long run has updates at its peak rate: only short ones are looked at */
    if (updates < 4 && o->schedule.lr > 0) {
        nb_schedule sched = o->schedule;
        sched.total_steps = (int)updates;
        top = 0.0f;
        for (int i = 0; i < sched.total_steps; i++) top = fmaxf(top, nb_schedule_lr(&sched, i));
    }
    if (top == 0.0f)
        fprintf(stderr, "nobubble train: warning: every update of this run has learning rate 0 (--schedule %s ends at "
                "--lr-min %g on its last update, and the run has %lld update%s): give more --steps, a --warmup, or "
                "--schedule constant\n", nb_schedule_name(o->schedule.kind), o->schedule.lr_min, updates,
                updates == 1 ? "" : "s");
    /* An optimizer's own hyperparameters given to another (--eps and the --aux-* go to the auxiliary AdamW
     * of any tensor a rule leaves to it, so they are not judged here; --nesterov's row is --no-nesterov's too). */
    static const char *const own[] = {"--beta1", "--beta2", "--beta3", "--momentum", "--nesterov", "--ns-steps",
                                      "--gamma", "--precond-every", "--max-precond-dim"};
    const nb_optimizer_desc *d = nb_optimizer_desc_of(o->optim.kind);
    char reads[160], word[40];
    snprintf(reads, sizeof reads, " %s ", d ? d->reads : "");
    for (size_t i = 0; d && i < sizeof own / sizeof own[0]; i++) {
        snprintf(word, sizeof word, " %s ", own[i]);
        if (given(t, own[i]) && !strstr(reads, word))
            fprintf(stderr, "nobubble train: warning: %s does nothing with --optimizer %s (its rule reads %s)\n", own[i],
                    d->name, d->reads);
    }
}

static int train_command(int argc, char **argv, nb_train_config_file **file) {
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
    const char *config = config_arg(argc, argv);
    if (config && nb_settings_read_config(&t.settings, config, file)) {
        fprintf(stderr, "nobubble train: %s\n", nb_last_error());
        return 2;
    }
    int rc = cli_parse(usage, argc, argv, t.opts, t.n_opts);
    if (rc) return rc > 0 ? 0 : 2;
    if (nb_settings_finish(&t.settings)) {
        fprintf(stderr, "nobubble train: %s\n", nb_last_error());
        return 2;
    }
    if (!o.gemm) o.gemm = cli_backend_env();
    if (nb_backend_known(o.gemm)) {
        fprintf(stderr, "nobubble train: --gemm: %s\n", nb_last_error());
        return 2;
    }
    if (cli_check_threads("train", "--threads", t.threads) ||
        cli_check_threads("train", "--threads-per-stage", o.threads_per_stage))
        return 2;
    if (t.threads) omp_set_num_threads(t.threads);
    static int split_blocks[SPLIT_MAX];
    if (t.split && parse_split(t.split, o.stages, split_blocks)) return 2;
    if (t.split) o.split = split_blocks;
    int has_vocab_override = o.init_from != NULL;   /* an imported model keeps its vocabulary */
    rc = o.init_from ? model_from_hf(&t, *file, config, &o) : model_from_flags(&t, *file, config, &o, &has_vocab_override);
    if (rc) return rc;
    if (o.init_from && o.resume_dir)
        fprintf(stderr, "nobubble train: note: --resume %s continues that run's weights and state; --init-from %s gives "
                "only the model's configuration\n", o.resume_dir, o.init_from);
    const char *data = t.data;
    /* --data here overrides the file's shards. */
    const nb_setting *train_row = nb_setting_by_name("train"), *val_row = nb_setting_by_name("val");
    if (data && t.settings.given[train_row - nb_settings] == 2) o.train_pattern = NULL;
    if (data && t.settings.given[val_row - nb_settings] == 2) o.val_pattern = NULL;
    /* The data folder's shards, vocabulary and tokenizer: nb_train's (train_resolve_data), as for any
     * program that calls the library. */
    o.data_dir = data;
    o.vocab_from_data = !has_vocab_override;
    if (data && o.train_pattern) {
        fprintf(stderr, "nobubble train: give --data or --train, not both\n");
        return 2;
    }
    if (resolve_run_folders(&o)) return 2;
    warn_unused(&t, &o);   /* after the command line's own refusals: a refused run needs no warning */
    /* Past a file-size limit a write then fails (EFBIG) and the run reports it like a full disk,
     * instead of being killed mid-checkpoint. */
    signal(SIGXFSZ, SIG_IGN);
    nb_train_result res;
    nb_mpi_register();  /* --transport mpi; without MPI in the build the run says so if asked for it */
    int failed = nb_train(&o, &res);
    nb_mpi_finish();
    if (failed) {
        fprintf(stderr, "nobubble train: %s\n", nb_last_error());
        return 1;
    }
    if (!res.primary) return 0;  /* an MPI rank > 0: the first stage reports the run */
    if (res.already_complete) {
        printf("the run is already complete: --resume %s is at its last step, %d; nothing to do, nothing changed",
               o.resume_dir, res.steps);
        if (o.out_dir) printf(" (its results: %s/summary.json)", o.out_dir);
        printf("\n");
        return 0;
    }
    if (res.summary_rebuilt)
        printf("%s/summary.json was missing (the run was stopped after its final checkpoint): rebuilt from %s/metrics.jsonl "
               "and the checkpoint's weights\n", o.out_dir, o.out_dir);
    char val_loss[32] = "none (no validation data)";
    if (!isnan(res.final_val_loss)) snprintf(val_loss, sizeof val_loss, "%.4f", res.final_val_loss);
    printf("done: %d steps, final train loss %.4f, val loss %s, %.0f tokens/s, weights %016llx\n", res.steps,
           res.final_train_loss, val_loss, res.tokens_per_s, (unsigned long long)res.weights_hash);
    if (o.out_dir) printf("wrote %s/metrics.jsonl and %s/summary.json\n", o.out_dir, o.out_dir);
    if (o.export_dir)
        printf("wrote %s/model.safetensors, config.json and generation_config.json%s\n", o.export_dir,
               res.tokenizer_exported ? " (and the data's tokenizer.json and tokenizer_config.json)" : "");
    return 0;
}
