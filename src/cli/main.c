/* nobubble: the command line. One binary, one subcommand per job. */
#include <stdio.h>
#include <string.h>
#include "cli/commands.h"
#include "nobubble/common.h"

typedef struct {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
} subcommand;

static const subcommand subcommands[] = {
    {"prepare", cmd_prepare, "tokenize text into train/validation token shards"},
    {"train", cmd_train, "train a model (any optimizer, micro-batch accumulation)"},
    {"eval", cmd_eval, "validation loss and perplexity of a saved model"},
    {"sample", cmd_sample, "generate text from a saved model (key/value cache)"},
    {"bench", cmd_bench, "measure step time, tokens/s and GFLOP/s per preset"},
    {"schedule", cmd_schedule, "simulate a pipeline schedule: timeline, bubble, memory (text, SVG, JSON)"},
    {"export", cmd_export, "write a freshly initialized model as a Hugging Face folder (safetensors)"},
    {"sweep", cmd_sweep, "run a grid of training runs (child processes, resumable) into a results table"},
    {"report", cmd_report, "an HTML page of a sweep's runs: loss curves, gaps to sync, recovery"},
};

static void usage(FILE *f) {
    fprintf(f, "usage: nobubble <command> [options]   (nobubble <command> --help for each)\n\ncommands:\n");
    for (size_t i = 0; i < sizeof subcommands / sizeof subcommands[0]; i++)
        fprintf(f, "  %-9s %s\n", subcommands[i].name, subcommands[i].summary);
    fprintf(f, "  %-9s %s\n", "version", "print the version");
}

int main(int argc, char **argv) {
    if (argc < 2) { usage(stderr); return 2; }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "--help") || !strcmp(cmd, "-h") || !strcmp(cmd, "help")) { usage(stdout); return 0; }
    if (!strcmp(cmd, "version") || !strcmp(cmd, "--version")) { printf("nobubble %s\n", NB_VERSION); return 0; }
    for (size_t i = 0; i < sizeof subcommands / sizeof subcommands[0]; i++)
        if (!strcmp(cmd, subcommands[i].name)) return subcommands[i].run(argc - 1, argv + 1);
    fprintf(stderr, "nobubble: unknown command '%s'\n", cmd);
    usage(stderr);
    return 2;
}
