/* nobubble sample: text from a saved model (a folder with model.safetensors and config.json),
 * token by token with a key/value cache; temperature and top-k sampling from a seeded generator,
 * so that the same seed gives the same text. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cli/args.h"
#include "cli/commands.h"
#include "nobubble/train.h"

static const char usage[] =
    "usage: nobubble sample --checkpoint DIR --prompt TEXT [--tokens N] [--temperature T] [--top-k K] [--seed S]\n"
    "                       [--tokenizer FILE] [--no-memory-check]\n"
    "Generates text from a saved model; --temperature 0 is greedy.";

/* Each piece of text to standard output as it comes, after the prompt (printed once the model runs). */
typedef struct {
    const char *prompt;
    int printed;
} output;

static void print_prompt(output *out) {
    if (out->printed) return;
    fwrite(out->prompt, 1, strlen(out->prompt), stdout);
    out->printed = 1;
}

static void print_text(const char *bytes, size_t n, void *ctx) {
    print_prompt(ctx);
    fwrite(bytes, 1, n, stdout);
    fflush(stdout);
}

int cmd_sample(int argc, char **argv) {
    const char *ckpt = NULL, *prompt = NULL, *tok_path = NULL;
    int n_new = 64, top_k = 40, no_memory_check = 0;
    float temperature = 0.8f;
    unsigned long long seed = 1;
    const cli_option opts[] = {
        {"--checkpoint", OPT_STR, &ckpt, "DIR    model.safetensors + config.json (required)"},
        {"--prompt", OPT_STR, &prompt, "TEXT   the text to continue (required)"},
        {"--tokens", OPT_INT, &n_new, "N      tokens to generate (64) " CLI_RANGE(1, 1048576)},
        {"--temperature", OPT_FLOAT, &temperature, "T      sampling temperature; 0 = greedy (0.8) " CLI_RANGE(0, 100)},
        {"--top-k", OPT_INT, &top_k, "K      sample among the K most likely tokens; 0 = all (40) " CLI_RANGE(0, 1000000000)},
        {"--seed", OPT_U64, &seed, "S      sampling seed (1)"},
        {"--tokenizer", OPT_STR, &tok_path, "FILE   tokenizer (DIR/tokenizer.json if present, else data/bible/tokenizer.json)"},
        CLI_MEMORY_OPTION(no_memory_check),
    };
    int rc = cli_parse(usage, argc, argv, opts, (int)(sizeof opts / sizeof opts[0]));
    if (rc) return rc > 0 ? 0 : 2;
    if (!ckpt || !prompt || !*ckpt) {
        fprintf(stderr, "nobubble sample: --checkpoint DIR (not empty) and --prompt TEXT are required\n");
        return 2;
    }
    if (n_new < 1 || top_k < 0 || !(temperature >= 0)) {
        fprintf(stderr, "nobubble sample: --tokens %d, --top-k %d, --temperature %g: expected >= 1, >= 0 and >= 0\n", n_new,
                top_k, temperature);
        return 2;
    }
    nb_sample_options o;
    nb_sample_defaults(&o);
    o.checkpoint = ckpt, o.prompt = prompt, o.tokenizer = tok_path, o.tokens = n_new, o.top_k = top_k;
    o.temperature = temperature, o.seed = seed, o.memory_check = !no_memory_check;
    output out = {prompt, 0};
    o.gemm = nb_backend_name(cli_backend()), o.on_text = print_text, o.ctx = &out;
    nb_sample_result r;
    if (nb_sample(&o, &r)) {
        if (out.printed) printf("\n");
        fprintf(stderr, "nobubble sample: %s\n", nb_last_error());
        return r.refused ? 2 : 1;
    }
    print_prompt(&out);
    printf("\n");
    return 0;
}
