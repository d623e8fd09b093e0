/* nobubble eval: the validation loss and perplexity of a model saved in the Hugging Face format
 * (train --export, a checkpoint folder, or nobubble export), measured as training measures it. */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <stdlib.h>
#include "cli/args.h"
#include "cli/commands.h"
#include "backend/backend.h"
#include "nobubble/backend.h"
#include "nobubble/checkpoint.h"
#include "nobubble/data.h"
#include "nobubble/train.h"

static const char usage[] =
    "usage: nobubble eval --checkpoint DIR [--data DIR | --val GLOB] [--batch B] [--seq T] [--batches N] [--json]\n"
    "                     [--no-memory-check]\n"
    "Validation loss and perplexity of a saved model (a folder with model.safetensors and config.json).";

int cmd_eval(int argc, char **argv) {
    const char *ckpt = NULL, *data = NULL, *val = NULL, *device = NULL;
    int B = 8, T = 0, batches = 8, json = 0, no_memory_check = 0;
    const cli_option opts[] = {
        {"--checkpoint", OPT_STR, &ckpt, "DIR    model.safetensors + config.json (required)"},
        {"--data", OPT_STR, &data, "DIR    prepared data: DIR/*_val_*.bin (data/bible)"},
        {"--val", OPT_STR, &val, "GLOB   validation shards (instead of --data)"},
        {"--batch", OPT_INT, &B, "B      sequences per micro-batch (8) " CLI_RANGE(1, 65536)},
        {"--seq", OPT_INT, &T, "T      tokens per sequence (the model's context) " CLI_RANGE(0, 1048576)},
        {"--batches", OPT_INT, &batches, "N      micro-batches evaluated (8; at most what the split holds: each window once) " CLI_RANGE(1, 4096)},
        {"--json", OPT_FLAG, &json, "       print the result as JSON"},
        {"--device", OPT_STR, &device, "DEV    where the model's memory is: cpu, cuda, guarded (cpu)"},
        CLI_MEMORY_OPTION(no_memory_check),
    };
    int rc = cli_parse(usage, argc, argv, opts, (int)(sizeof opts / sizeof opts[0]));
    if (rc) return rc > 0 ? 0 : 2;
    if (!ckpt || !*ckpt) {
        fprintf(stderr, "nobubble eval: --checkpoint DIR is required\n");
        return 2;
    }
    if (device && !nb_backend_device_named(device)) {  /* '' too, as bench */
        fprintf(stderr, "nobubble eval: --device '%s': expected %s\n", device, nb_backend_devices());
        return 2;
    }
    /* The shape against the model: a usage error, before any file but config.json is read. */
    nb_config cfg;
    if (nb_hf_read_config(ckpt, &cfg)) {
        fprintf(stderr, "nobubble eval: %s\n", nb_last_error());
        return 1;
    }
    if (batches < 1 || nb_config_check_batch(&cfg, B, T ? T : cfg.context)) {
        if (batches < 1) fprintf(stderr, "nobubble eval: --batches %d: expected >= 1\n", batches);
        else fprintf(stderr, "nobubble eval: %s\n", nb_last_error());
        return 2;
    }
    nb_eval_options o;
    nb_eval_defaults(&o);
    o.checkpoint = ckpt, o.data_dir = data, o.val_pattern = val, o.batch = B, o.seq = T, o.batches = batches;
    o.memory_check = !no_memory_check, o.device = device;
    /* the CPU's products (NB_GEMM's) unless the GPU runs them */
    o.gemm = device && !strcmp(device, "cuda") ? NULL : nb_backend_name(cli_backend());
    nb_eval_result r;
    if (nb_eval(&o, &r)) {
        fprintf(stderr, "nobubble eval: %s\n", nb_last_error());
        return 1;
    }
    if (json)
        printf("{\"checkpoint\": \"%s\", \"val_loss\": %.9g, \"perplexity\": %.9g, \"tokens\": %d}\n", ckpt, r.val_loss,
               exp(r.val_loss), r.tokens);
    else
        printf("val loss %.9g, perplexity %.4f (%d tokens of %s)\n", r.val_loss, exp(r.val_loss), r.tokens, r.val_pattern);
    return 0;
}
