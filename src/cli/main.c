/* nobubble: the command line. One binary, one subcommand per job. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "backend/gemm.h"
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

/* NB_GEMM picks the GEMM of every command: a name that is not a backend is an error, not the default
 * (the library keeps its default for a caller that sets a wrong one). */
static int check_gemm_env(void) {
    const char *name = getenv("NB_GEMM");
    if (!name || !*name || !nb_gemm_select(name)) return 0;
    fprintf(stderr, "nobubble: environment variable NB_GEMM: %s\n", nb_last_error());
    return -1;
}

/* NB_BF16_GEMM forces one path of the bf16 GEMM (src/backend/gemm_bf16.c): anything else is an error. */
static int check_bf16_env(void) {
    const char *name = getenv("NB_BF16_GEMM");
    if (!name || !*name || !strcmp(name, "onednn") || !strcmp(name, "widen")) return 0;
    fprintf(stderr, "nobubble: environment variable NB_BF16_GEMM: '%s': expected onednn or widen (or unset: oneDNN "
                    "where the CPU has bf16 instructions, widened fp32 GEMMs elsewhere)\n", name);
    return -1;
}

int main(int argc, char **argv) {
    if (argc < 2) { usage(stderr); return 2; }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "--help") || !strcmp(cmd, "-h") || !strcmp(cmd, "help")) { usage(stdout); return 0; }
    if (!strcmp(cmd, "version") || !strcmp(cmd, "--version")) { printf("nobubble %s\n", NB_VERSION); return 0; }
    for (size_t i = 0; i < sizeof subcommands / sizeof subcommands[0]; i++)
        if (!strcmp(cmd, subcommands[i].name)) return check_gemm_env() || check_bf16_env() ? 2 : subcommands[i].run(argc - 1, argv + 1);
    fprintf(stderr, "nobubble: unknown command '%s'\n", cmd);
    usage(stderr);
    return 2;
}
