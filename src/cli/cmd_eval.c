/* nobubble eval: the validation loss and perplexity of a model saved in the Hugging Face format
 * (train --export, a checkpoint folder, or nobubble export), measured as training measures it. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include "cli/args.h"
#include "cli/commands.h"
#include "nobubble/checkpoint.h"
#include "nobubble/data.h"
#include "nobubble/train.h"

static const char usage[] =
    "usage: nobubble eval --checkpoint DIR [--data DIR | --val GLOB] [--batch B] [--seq T] [--batches N] [--json]\n"
    "                     [--no-memory-check]\n"
    "Validation loss and perplexity of a saved model (a folder with model.safetensors and config.json).";

int cmd_eval(int argc, char **argv) {
    const char *ckpt = NULL, *data = NULL, *val = NULL;
    int B = 8, T = 0, batches = 8, json = 0, no_memory_check = 0;
    const cli_option opts[] = {
        {"--checkpoint", OPT_STR, &ckpt, "DIR    model.safetensors + config.json (required)"},
        {"--data", OPT_STR, &data, "DIR    prepared data: DIR/*_val_*.bin (data/bible)"},
        {"--val", OPT_STR, &val, "GLOB   validation shards (instead of --data)"},
        {"--batch", OPT_INT, &B, "B      sequences per micro-batch (8) " CLI_RANGE(1, 65536)},
        {"--seq", OPT_INT, &T, "T      tokens per sequence (the model's context) " CLI_RANGE(0, 1048576)},
        {"--batches", OPT_INT, &batches, "N      micro-batches evaluated (8) " CLI_RANGE(1, 4096)},
        {"--json", OPT_FLAG, &json, "       print the result as JSON"},
        CLI_MEMORY_OPTION(no_memory_check),
    };
    int rc = cli_parse(usage, argc, argv, opts, (int)(sizeof opts / sizeof opts[0]));
    if (rc) return rc > 0 ? 0 : 2;
    if (!ckpt) {
        fprintf(stderr, "nobubble eval: --checkpoint DIR is required\n");
        return 2;
    }
    nb_config cfg;
    if (nb_hf_read_config(ckpt, &cfg)) {
        fprintf(stderr, "nobubble eval: %s\n", nb_last_error());
        return 1;
    }
    if (!T) T = cfg.context;
    if (batches < 1 || nb_config_check_batch(&cfg, B, T)) {
        if (batches < 1) fprintf(stderr, "nobubble eval: --batches %d: expected >= 1\n", batches);
        else fprintf(stderr, "nobubble eval: %s\n", nb_last_error());
        return 2;
    }
    char glob_buf[4096];
    if (!val) {
        snprintf(glob_buf, sizeof glob_buf, "%s/*_val_*.bin", data ? data : "data/bible");
        val = glob_buf;
    }
    /* Before the model is built: the shards exist, and the model fits. */
    nb_memory_estimate mem;
    if (nb_loader_check_pattern(val) || nb_infer_memory_estimate(&cfg, B, T, 0, &mem)) {
        fprintf(stderr, "nobubble eval: %s\n", nb_last_error());
        return 1;
    }
    if (cli_memory_check("eval", &mem, !no_memory_check)) return 1;
    nb_model m;
    nb_loader *loader = NULL;
    nb_acts *acts = NULL;
    int *inputs = malloc(sizeof(int) * (size_t)B * T), *targets = malloc(sizeof(int) * (size_t)B * T);
    double loss = NAN;
    rc = 1;
    if (nb_model_create(&m, &cfg, 1, NULL, cli_backend())) goto fail_model;
    if (nb_import_hf(&m, ckpt) || nb_loader_open(&loader, val, B, T, cfg.vocab_size, 0, 0, 1) ||
        !(acts = nb_acts_create(&m.stages[0], B, T)) || !inputs || !targets ||
        nb_evaluate(&m, acts, loader, batches, inputs, targets, &loss))
        goto fail;
    if (!isfinite(loss)) {  /* weights that diverged: a number, but no answer */
        fprintf(stderr, "nobubble eval: %s: the validation loss is %g: the model's weights or outputs are not finite\n",
                ckpt, loss);
        goto release;
    }
    if (json)
        printf("{\"checkpoint\": \"%s\", \"val_loss\": %.9g, \"perplexity\": %.9g, \"tokens\": %d}\n", ckpt, loss, exp(loss),
               B * T * batches);
    else
        printf("val loss %.9g, perplexity %.4f (%d tokens of %s)\n", loss, exp(loss), B * T * batches, val);
    rc = 0;
fail:
    if (rc) fprintf(stderr, "nobubble eval: %s\n", nb_last_error());
release:
    nb_acts_free(acts);
    if (loader) nb_loader_free(loader);
    nb_model_free(&m);
    free(inputs);
    free(targets);
    return rc;
fail_model:
    fprintf(stderr, "nobubble eval: %s\n", nb_last_error());
    free(inputs);
    free(targets);
    return 1;
}
