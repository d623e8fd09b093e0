/* nobubble: the command line. One binary, one subcommand per job. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "backend/backend.h"
#include "cli/commands.h"
#include "nobubble/common.h"
#include "util/error.h"
#include "util/signals.h"

typedef struct {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
    int stops;   /* 1: the command takes the stop signals itself (a clean stop); 0: main's thread exits */
} subcommand;

static const subcommand subcommands[] = {
    {"prepare", cmd_prepare, "tokenize text into train/validation token shards", 0},
    {"tokenize", cmd_tokenize, "a tokenizer's ids of a text, or the text of ids", 0},
    {"train", cmd_train, "train a model (any optimizer, micro-batch accumulation)", 1},
    {"eval", cmd_eval, "validation loss and perplexity of a saved model", 0},
    {"sample", cmd_sample, "generate text from a saved model (key/value cache)", 0},
    {"bench", cmd_bench, "measure step time, tokens/s and GFLOP/s per preset", 0},
    {"schedule", cmd_schedule, "simulate a pipeline schedule: timeline, bubble, memory (text, SVG, JSON)", 0},
    {"project", cmd_project, "project pipelines onto a cluster (tokens/s of 2BW over the best synchronous schedule); predict a run", 0},
    {"export", cmd_export, "write a freshly initialized model as a Hugging Face folder (safetensors)", 0},
    {"sweep", cmd_sweep, "run a grid of training runs (child processes, resumable) into a results table", 1},
    {"report", cmd_report, "an HTML page of a sweep's runs: loss curves, gaps to sync, recovery", 0},
    {"verify", cmd_verify, "read checkpoints, exports and save folders whole against their checksums", 0},
};

static const char *running = "nobubble";

/* A command with no clean stop ends on the first stop signal, as the default disposition would, but
 * saying so: 128 + the signal. Called on the signal thread (util/signals.h). */
static void exit_on_signal(int sig, int count) {
    (void)count;
    const char *name = sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM" : "SIGUSR1";
    fprintf(stderr, "nobubble %s: %s: exiting\n", running, name);
    _exit(128 + sig);
}


static void usage(FILE *f) {
    fprintf(f, "usage: nobubble <command> [options]   (nobubble <command> --help for each)\n\ncommands:\n");
    for (size_t i = 0; i < sizeof subcommands / sizeof subcommands[0]; i++)
        fprintf(f, "  %-9s %s\n", subcommands[i].name, subcommands[i].summary);
    fprintf(f, "  %-9s %s\n", "version", "print the version");
}

/* NB_GEMM names the backend of every command (train's --gemm overrides it): a name that is not a
 * backend is an error, not the default. */
static nb_backend *env_backend;

static int open_env_backend(void) {
    if (getenv("NB_BF16_GEMM")) {  /* its choice is now a suffix of the backend's name: never ignore it */
        fprintf(stderr, "nobubble: environment variable NB_BF16_GEMM is no longer read: name the bf16 path in NB_GEMM "
                        "or train's --gemm (e.g. NB_GEMM=tiles:widen or hybrid:onednn), and unset it\n");
        return 2;
    }
    if (nb_backend_known(getenv("NB_GEMM"))) {
        fprintf(stderr, "nobubble: environment variable NB_GEMM: %s\n", nb_last_error());
        return 2;
    }
    if (!nb_backend_open(getenv("NB_GEMM"), &env_backend)) return 0;
    fprintf(stderr, "nobubble: environment variable NB_GEMM: %s\n", nb_last_error());
    return 1;  /* a good name that could not be opened (memory, no GPU): not a usage error */
}

const nb_backend *cli_backend(void) { return env_backend; }

const char *cli_backend_env(void) {
    const char *e = getenv("NB_GEMM");
    return e && *e ? e : NULL;
}

/* The command's run, after its signal thread: train and sweep start their own (a clean stop), every
 * other command main's, which exits. */
static int run_command(const subcommand *c, int argc, char **argv) {
    running = c->name;
    if (!c->stops && nb_signals_start(exit_on_signal)) {
        fprintf(stderr, "nobubble %s: %s\n", c->name, nb_last_error());
        return 1;
    }
    int env_rc = open_env_backend();
    if (env_rc) return env_rc;
    const int rc = c->run(argc, argv);
    nb_backend_close(env_backend);
    return rc;
}

int main(int argc, char **argv) {
    /* First: the stop signals blocked (the launcher, src/cli/launcher/, blocked them before this binary
     * was loaded; this covers a run of nobubble-core itself). From here a signal waits, pending, for the
     * command's signal thread: none meets the default disposition, which killed without a message. */
    nb_signals_block(NULL);
    if (argc < 2) { usage(stderr); return 2; }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "--help") || !strcmp(cmd, "-h") || !strcmp(cmd, "help")) { usage(stdout); return 0; }
    if (!strcmp(cmd, "version") || !strcmp(cmd, "--version")) {
        if (argc == 3 && (!strcmp(argv[2], "--help") || !strcmp(argv[2], "-h"))) {  /* every command has --help */
            printf("usage: nobubble version\n\nPrints nobubble's version.\n");
            return 0;
        }
        if (argc > 2) {
            fprintf(stderr, "nobubble %s: takes no arguments (got '%s')\n", cmd, argv[2]);
            return 2;
        }
        printf("nobubble %s\n", NB_VERSION);
        return 0;
    }
    for (size_t i = 0; i < sizeof subcommands / sizeof subcommands[0]; i++)
        if (!strcmp(cmd, subcommands[i].name)) return run_command(&subcommands[i], argc - 1, argv + 1);
    fprintf(stderr, "nobubble: unknown command '%s'\n", cmd);
    usage(stderr);
    return 2;
}
