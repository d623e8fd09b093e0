/* nobubble sample: text from a saved model (a folder with model.safetensors and config.json),
 * token by token with a key/value cache; temperature and top-k sampling from a seeded generator,
 * so that the same seed gives the same text. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "cli/args.h"
#include "cli/commands.h"
#include "nobubble/checkpoint.h"
#include "nobubble/data.h"
#include "nobubble/model.h"
#include "nobubble/train.h"
#include "util/rng.h"

static const char usage[] =
    "usage: nobubble sample --checkpoint DIR --prompt TEXT [--tokens N] [--temperature T] [--top-k K] [--seed S]\n"
    "                       [--tokenizer FILE] [--no-memory-check]\n"
    "Generates text from a saved model; --temperature 0 is greedy.";

/* The next token from logits: greedy at temperature 0, else softmax(logits / T) over the top k. */
static int pick(float *logits, int V, float temperature, int top_k, nb_rng *rng) {
    int best = 0;
    for (int i = 1; i < V; i++)
        if (logits[i] > logits[best]) best = i;
    if (temperature <= 0) return best;
    float cut = -INFINITY;
    if (top_k > 0 && top_k < V) {
        /* the k-th largest value: a partial selection on a copy */
        float *copy = malloc(sizeof(float) * (size_t)V);
        memcpy(copy, logits, sizeof(float) * (size_t)V);
        for (int k = 0; k < top_k; k++) {
            int arg = k;
            for (int i = k + 1; i < V; i++)
                if (copy[i] > copy[arg]) arg = i;
            float t = copy[k]; copy[k] = copy[arg]; copy[arg] = t;
        }
        cut = copy[top_k - 1];
        free(copy);
    }
    double sum = 0;
    for (int i = 0; i < V; i++) sum += logits[i] >= cut ? exp((logits[i] - logits[best]) / temperature) : 0.0;
    double u = nb_rng_uniform(rng) * sum, acc = 0;
    for (int i = 0; i < V; i++) {
        if (logits[i] < cut) continue;
        acc += exp((logits[i] - logits[best]) / temperature);
        if (acc >= u) return i;
    }
    return best;
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
    if (!ckpt || !prompt) {
        fprintf(stderr, "nobubble sample: --checkpoint DIR and --prompt TEXT are required\n");
        return 2;
    }
    if (n_new < 1 || top_k < 0 || !(temperature >= 0)) {
        fprintf(stderr, "nobubble sample: --tokens %d, --top-k %d, --temperature %g: expected >= 1, >= 0 and >= 0\n", n_new,
                top_k, temperature);
        return 2;
    }
    char own[4096];
    snprintf(own, sizeof own, "%s/tokenizer.json", ckpt);
    if (!tok_path) tok_path = access(own, R_OK) == 0 ? own : "data/bible/tokenizer.json";
    nb_config cfg;
    nb_model m;
    nb_tokenizer *tok = NULL;
    if (nb_hf_read_config(ckpt, &cfg) || nb_tokenizer_load(&tok, tok_path)) {
        fprintf(stderr, "nobubble sample: %s\n", nb_last_error());
        return 1;
    }
    /* A tokenizer of another vocabulary would turn the model's ids into the wrong text (or none). */
    if (nb_tokenizer_vocab_size(tok) != cfg.vocab_size) {
        fprintf(stderr, "nobubble sample: the tokenizer %s has %d tokens but the model %s/config.json has "
                "vocab_size %d: expected the tokenizer the model was trained with (--tokenizer FILE)\n", tok_path,
                nb_tokenizer_vocab_size(tok), ckpt, cfg.vocab_size);
        nb_tokenizer_free(tok);
        return 2;
    }
    size_t plen = strlen(prompt);
    uint32_t *ids = malloc(sizeof(uint32_t) * (plen + 1));
    size_t n_prompt = ids ? nb_tokenizer_encode(tok, prompt, plen, ids + 1) : NB_ENCODE_FAILED;
    if (n_prompt == NB_ENCODE_FAILED) {
        fprintf(stderr, "nobubble sample: cannot encode the prompt with the tokenizer %s: %s\n", tok_path,
                ids ? nb_last_error() : "out of memory");
        free(ids);
        nb_tokenizer_free(tok);
        return 1;
    }
    ids[0] = (uint32_t)nb_tokenizer_eot(tok);  /* documents start after an end-of-text token */
    n_prompt += 1;
    if ((int)n_prompt + n_new > cfg.context) {
        fprintf(stderr, "nobubble sample: %zu prompt tokens + --tokens %d exceed the model's context (%d)\n", n_prompt - 1,
                n_new, cfg.context);
        free(ids);
        nb_tokenizer_free(tok);
        return 2;
    }
    nb_memory_estimate mem;
    int refused = nb_infer_memory_estimate(&cfg, 0, 0, (int)n_prompt + n_new, &mem);
    if (refused) fprintf(stderr, "nobubble sample: %s\n", nb_last_error());
    else refused = cli_memory_check("sample", &mem, !no_memory_check);
    if (refused) {
        free(ids);
        nb_tokenizer_free(tok);
        return 1;
    }
    rc = 1;
    nb_kv_cache *kv = NULL;
    float *logits = malloc(sizeof(float) * (size_t)cfg.vocab_size);
    if (nb_model_create(&m, &cfg, 1, NULL, cli_backend())) goto out_tok;
    if (nb_import_hf(&m, ckpt) || !(kv = nb_kv_cache_create(&m, (int)n_prompt + n_new))) goto out;
    for (size_t i = 0; i < n_prompt; i++)
        if (nb_decode_step(&m, kv, (int)ids[i], logits)) goto out;
    nb_rng rng = nb_rng_keyed(seed, "sample");
    fwrite(prompt, 1, plen, stdout);
    for (int i = 0; i < n_new; i++) {
        int next = pick(logits, cfg.vocab_size, temperature, top_k, &rng);
        if (next == nb_tokenizer_eot(tok)) break;
        size_t len;
        const char *bytes = nb_tokenizer_token_bytes(tok, next, &len);
        if (bytes) fwrite(bytes, 1, len, stdout);
        fflush(stdout);
        if (i + 1 < n_new && nb_decode_step(&m, kv, next, logits)) goto out;
    }
    printf("\n");
    rc = 0;
out:
    nb_model_free(&m);
out_tok:
    if (rc) fprintf(stderr, "nobubble sample: %s\n", nb_last_error());
    nb_kv_cache_free(kv);
    free(logits);
    free(ids);
    nb_tokenizer_free(tok);
    return rc;
}
