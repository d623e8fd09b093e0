/* nobubble export: writes a freshly initialized model (a preset with overrides, a seed) as a
 * Hugging Face folder: model.safetensors + config.json + generation_config.json (see docs/checkpoints.md). Exporting a
 * trained model needs the checkpoints of issue 7; this is the format's smoke test. */
#include <stdio.h>
#include <string.h>
#include "cli/args.h"
#include "cli/commands.h"
#include "nobubble/checkpoint.h"
#include "nobubble/train.h"

static const char usage[] =
    "usage: nobubble export [--model tiny] [--set FIELD=VALUE]... [--seed S] --out DIR [--force] [--no-memory-check]\n"
    "Writes a freshly initialized model as DIR/model.safetensors, DIR/config.json and\n"
    "DIR/generation_config.json\n"
    "(Hugging Face LlamaForCausalLM; MixtralForCausalLM for a mixture of experts).";

int cmd_export(int argc, char **argv) {
    const char *preset = "tiny", *out = NULL;
    opt_list sets = {0};
    unsigned long long seed = 1;
    int no_memory_check = 0, force = 0;
    const cli_option opts[] = {
        {"--model", OPT_STR, &preset, "NAME   tiny | small | medium | smollm-135m | smollm-360m | moe-tiny | moe-small (tiny)"},
        {"--set", OPT_LIST, &sets, "F=V    override a model field, e.g. --set n_layers=2 (repeatable)"},
        {"--seed", OPT_U64, &seed, "S      initialization seed (1)"},
        {"--out", OPT_STR, &out, "DIR    the folder to write (created if needed)"},
        {"--force", OPT_FLAG, &force, "       replace the model a DIR already holds (its export's files go first)"},
        CLI_MEMORY_OPTION(no_memory_check),
    };
    int n_opts = (int)(sizeof opts / sizeof opts[0]);
    int r = cli_parse(usage, argc, argv, opts, n_opts);
    if (r) return r > 0 ? 0 : 2;
    if (!out) {
        fprintf(stderr, "nobubble export: --out DIR is required\n");
        return 2;
    }
    nb_config c;
    if (nb_config_preset(preset, &c)) {
        fprintf(stderr, "nobubble export: %s\n", nb_last_error());
        return 2;
    }
    for (int i = 0; i < sets.n; i++)
        if (nb_config_override(&c, sets.items[i])) {
            fprintf(stderr, "nobubble export: --set %s\n", nb_last_error());
            return 2;
        }
    nb_memory_estimate mem;
    if (nb_config_validate(&c) || nb_infer_memory_estimate(&c, 0, 0, 0, &mem)) {
        fprintf(stderr, "nobubble export: %s\n", nb_last_error());
        return 2;
    }
    if (cli_memory_check("export", &mem, !no_memory_check)) return 1;
    /* A folder that holds a model is not written over by accident; --force removes all of the old export's
     * files first, so that none of them (a tokenizer of another vocabulary) outlives it. */
    if (nb_export_hf_refuse_occupied(out, "--out", force) < 0) {
        fprintf(stderr, "nobubble export: %s\n", nb_last_error());
        return 2;
    }
    nb_model m;
    if (nb_model_create(&m, &c, 1, NULL, cli_backend())) {
        fprintf(stderr, "nobubble export: %s\n", nb_last_error());
        return 2;
    }
    nb_model_init(&m, (uint64_t)seed);
    r = nb_export_hf_locked(&m, out, force, "--out");  /* checked again under the lock a train --export run holds */
    if (r) fprintf(stderr, "nobubble export: %s\n", nb_last_error());
    else printf("wrote %s/model.safetensors, config.json and generation_config.json (weights hash %016llx)\n", out,
                (unsigned long long)nb_model_weights_hash(&m));
    nb_model_free(&m);
    return r ? 1 : 0;
}
