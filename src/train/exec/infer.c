/* Using a saved model (a Hugging Face folder: train --export, nobubble export, an imported model): its
 * validation loss, and text continued from a prompt. What `nobubble eval` and `nobubble sample` run, and
 * what a program (the Python package) calls. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "backend/backend.h"
#include "nobubble/backend.h"
#include "nobubble/checkpoint.h"
#include "nobubble/data.h"
#include "nobubble/model.h"
#include "nobubble/train.h"
#include "train/run/run.h"
#include "util/error.h"
#include "util/rng.h"

void nb_eval_defaults(nb_eval_options *o) {
    memset(o, 0, sizeof *o);
    o->batch = 8;
    o->batches = 8;
    o->memory_check = 1;
}

int nb_eval(const nb_eval_options *o, nb_eval_result *r) {
    memset(r, 0, sizeof *r);
    r->val_loss = NAN;
    nb_config cfg;
    if (!o->checkpoint) return nb_fail("eval: a checkpoint folder is required");
    if (nb_hf_read_config(o->checkpoint, &cfg)) return -1;
    const int B = o->batch, T = o->seq ? o->seq : cfg.context;
    if (o->batches < 1) return nb_fail("--batches %d: expected >= 1", o->batches);
    if (nb_config_check_batch(&cfg, B, T)) return -1;
    char glob_buf[4200];
    const char *val = o->val_pattern;
    if (!val) {
        snprintf(glob_buf, sizeof glob_buf, "%s/*_val_*.bin", o->data_dir ? o->data_dir : NB_TRAIN_DEFAULT_DATA);
        val = glob_buf;
    }
    snprintf(r->val_pattern, sizeof r->val_pattern, "%s", val);
    /* Before the model is built: the shards exist, and the model fits. */
    nb_memory_estimate mem;
    if (nb_loader_check_pattern(val) || nb_infer_memory_estimate(&cfg, B, T, 0, &mem)) return -1;
    if (o->memory_check && nb_memory_check(&mem, "--no-memory-check")) return -1;
    if (o->device && !strcmp(o->device, "cuda") && nb_config_moe_blocks(&cfg) > 0 && !nb_backend_cuda_next_asked())
        return nb_fail("--device cuda: %s is a mixture of experts, which is written for the GPU but has not yet run on "
                       "one (docs/gpu.md): NB_CUDA_KERNELS=next runs it", o->checkpoint);
    nb_backend *be = NULL;
    if (nb_backend_open_device(o->device, o->gemm, &be)) return nb_fail("--device: %s", nb_last_error());
    nb_model m;
    nb_loader *loader = NULL;
    nb_acts *acts = NULL;
    int *inputs = malloc(sizeof(int) * (size_t)B * T), *targets = malloc(sizeof(int) * (size_t)B * T);
    double loss = NAN;
    int rc = -1, made = 0, batches = o->batches;
    if (!inputs || !targets) nb_fail("out of memory for %d x %d tokens", B, T);
    else if (nb_model_create(&m, &cfg, 1, NULL, be)) ;
    else if ((made = 1), nb_import_hf(&m, o->checkpoint) || nb_loader_open(&loader, val, B, T, cfg.vocab_size, 0, 0, 1) ||
             !(acts = nb_acts_create(&m.stages[0], B, T)) ||
             nb_evaluate(&m, acts, loader, (batches = train_eval_batches(loader, o->batches, B, T, "--batches", val, 1)),
                         inputs, targets, &loss)) ;
    else if (!isfinite(loss))  /* weights that diverged: a number, but no answer */
        nb_fail("%s: the validation loss is %g: the model's weights or outputs are not finite", o->checkpoint, loss);
    else {
        r->val_loss = loss;
        r->tokens = B * T * batches;
        rc = 0;
    }
    nb_acts_free(acts);
    if (loader) nb_loader_free(loader);
    if (made) nb_model_free(&m);
    nb_backend_close(be);
    free(inputs);
    free(targets);
    return rc;
}

/* ---- sample ---- */

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

void nb_sample_defaults(nb_sample_options *o) {
    memset(o, 0, sizeof *o);
    o->tokens = 64;
    o->top_k = 40;
    o->temperature = 0.8f;
    o->seed = 1;
    o->memory_check = 1;
}

/* refused: the input cannot be sampled (a usage error), as opposed to a failure of a file or the run. */
static int refuse(nb_sample_result *r, const char *what) {
    r->refused = 1;
    return nb_fail("%s", what);
}

static int sample_tokens(const nb_sample_options *o, const nb_config *cfg, nb_tokenizer *tok, const uint32_t *ids,
                         size_t n_prompt, nb_sample_result *r) {
    nb_backend *be = NULL;
    if (nb_backend_open(o->gemm, &be)) return -1;
    nb_model m;
    nb_kv_cache *kv = NULL;
    float *logits = malloc(sizeof(float) * (size_t)cfg->vocab_size);
    int rc = -1, made = 0;
    if (!logits) nb_fail("out of memory for %d logits", cfg->vocab_size);
    else if (nb_model_create(&m, cfg, 1, NULL, be)) ;
    else if ((made = 1), nb_import_hf(&m, o->checkpoint) || !(kv = nb_kv_cache_create(&m, (int)n_prompt + o->tokens))) ;
    else {
        rc = 0;
        for (size_t i = 0; i < n_prompt && !rc; i++) rc = nb_decode_step(&m, kv, (int)ids[i], logits);
        nb_rng rng = nb_rng_keyed(o->seed, "sample");
        for (int i = 0; i < o->tokens && !rc; i++) {
            const int next = pick(logits, cfg->vocab_size, o->temperature, o->top_k, &rng);
            if (next == nb_tokenizer_eot(tok)) break;
            size_t len;
            const char *bytes = nb_tokenizer_token_bytes(tok, next, &len);
            if (bytes && o->on_text) o->on_text(bytes, len, o->ctx);
            r->generated++;
            if (i + 1 < o->tokens) rc = nb_decode_step(&m, kv, next, logits);
        }
    }
    nb_kv_cache_free(kv);
    if (made) nb_model_free(&m);
    nb_backend_close(be);
    free(logits);
    return rc;
}

int nb_sample(const nb_sample_options *o, nb_sample_result *r) {
    memset(r, 0, sizeof *r);
    if (!o->checkpoint || !o->prompt) return refuse(r, "sample: a checkpoint folder and a prompt are required");
    if (o->tokens < 1 || o->top_k < 0 || !(o->temperature >= 0)) {
        r->refused = 1;
        return nb_fail("--tokens %d, --top-k %d, --temperature %g: expected >= 1, >= 0 and >= 0", o->tokens, o->top_k,
                       o->temperature);
    }
    char own[4200];
    snprintf(own, sizeof own, "%s/tokenizer.json", o->checkpoint);
    const char *tok_path = o->tokenizer ? o->tokenizer : access(own, R_OK) == 0 ? own : NB_TRAIN_DEFAULT_DATA "/tokenizer.json";
    nb_config cfg;
    nb_tokenizer *tok = NULL;
    if (nb_hf_read_config(o->checkpoint, &cfg) || nb_tokenizer_load(&tok, tok_path)) return -1;
    int rc = -1;
    const size_t plen = strlen(o->prompt);
    uint32_t *ids = NULL;
    size_t n_prompt = 0;
    nb_memory_estimate mem;
    /* A tokenizer of another vocabulary would turn the model's ids into the wrong text (or none). */
    if (nb_tokenizer_vocab_size(tok) != cfg.vocab_size) {
        r->refused = 1;
        nb_fail("the tokenizer %s has %d tokens but the model %s/config.json has vocab_size %d: expected the tokenizer "
                "the model was trained with (--tokenizer FILE)", tok_path, nb_tokenizer_vocab_size(tok), o->checkpoint,
                cfg.vocab_size);
    } else if (!(ids = malloc(sizeof(uint32_t) * (plen + 1)))) {
        nb_fail("out of memory for the prompt");
    } else if ((n_prompt = nb_tokenizer_encode(tok, o->prompt, plen, ids + 1)) == NB_ENCODE_FAILED) {
        nb_fail("cannot encode the prompt with the tokenizer %s: %s", tok_path, nb_last_error());
    } else if ((ids[0] = (uint32_t)nb_tokenizer_eot(tok)), ++n_prompt + (size_t)o->tokens > (size_t)cfg.context) {
        r->refused = 1;  /* documents start after an end-of-text token, hence ids[0] */
        nb_fail("the end-of-text token that starts a document + %zu prompt tokens + --tokens %d = %zu: more than the "
                "model's context (%d)", n_prompt - 1, o->tokens, n_prompt + (size_t)o->tokens, cfg.context);
    } else if (nb_infer_memory_estimate(&cfg, 0, 0, (int)n_prompt + o->tokens, &mem) ||
               (o->memory_check && nb_memory_check(&mem, "--no-memory-check"))) {
        ;
    } else {
        rc = sample_tokens(o, &cfg, tok, ids, n_prompt, r);
    }
    free(ids);
    nb_tokenizer_free(tok);
    return rc;
}
