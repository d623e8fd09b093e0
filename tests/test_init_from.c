/* train --init-from (nb_train_options.init_from): a run started from a folder transformers saved
 * (tests/fixtures/hf5_untied, hf5_tied, and the mixture of experts hf5_mixtral:
 * tools/reference/hf_import_reference.py). The training data is
 * the fixture's token stream, so the first step's batch is exactly the fixture's tokens and targets:
 * step 0's loss (on the imported weights, before any update) must be transformers' loss for them.
 * `nobubble eval` of the folder on the same tokens gives it too. Then: the steps that follow train (the loss falls on this one batch), a run from the seed instead
 * differs, a 2BW pipeline on threads (each stage loading its own layers) ends bitwise equal to the
 * one-process run with the same delay, and a model that contradicts config.json is refused. */
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "check.h"
#include "fixture.h"
#include "nobubble/checkpoint.h"
#include "nobubble/data.h"
#include "nobubble/pipeline.h"
#include "nobubble/runtime.h"
#include "nobubble/train.h"

static char work[64], train_glob[128];

/* The train_loss of each line of DIR/metrics.jsonl (up to n); returns the count. */
static int read_losses(const char *dir, double *loss, int n) {
    char path[256], line[1024];
    snprintf(path, sizeof path, "%s/metrics.jsonl", dir);
    FILE *f = fopen(path, "r");
    int k = 0;
    while (f && k < n && fgets(line, sizeof line, f)) {
        const char *p = strstr(line, "\"train_loss\": ");
        if (p) loss[k++] = strtod(p + 14, NULL);
    }
    if (f) fclose(f);
    return k;
}

/* A run of `steps` on the fixture's stream from folder (NULL: from the seed), its metrics in work/out. */
static nb_train_options run_options(const char *folder, const nb_config *cfg, int B, int T, int steps, char *out) {
    nb_train_options o;
    nb_train_defaults(&o);
    o.model = *cfg;
    o.init_from = folder;
    o.batch = B;
    o.seq_len = T;
    o.steps = steps;
    o.schedule.lr = 1e-2f;
    o.schedule.kind = NB_SCHEDULE_CONSTANT;
    o.train_pattern = train_glob;
    o.val_pattern = NULL;
    o.out_dir = out;
    o.quiet = 1;
    return o;
}

/* `nobubble eval` of the folder on the stream (work's validation shard) gives transformers' loss. */
static void check_eval(const char *dir, int B, int T, double ref) {
    const char *bin = getenv("NB_BIN");
    if (!bin) {
        CHECK(0, "NB_BIN (the nobubble binary) is not set");
        return;
    }
    char cmd[512], line[512] = "";
    snprintf(cmd, sizeof cmd, "%s eval --checkpoint %s --data %s --batch %d --seq %d --batches 1 --json", bin, dir, work,
             B, T);
    FILE *p = popen(cmd, "r");
    if (p && !fgets(line, sizeof line, p)) line[0] = 0;
    int rc = p ? pclose(p) : -1;
    const char *at = strstr(line, "\"val_loss\": ");
    const double loss = at ? strtod(at + 12, NULL) : NAN;
    printf("%s: nobubble eval %.7f (transformers %.7f)\n", dir, loss, ref);
    CHECK(rc == 0 && fabs(loss - ref) <= 1e-5 * ref, "%s: eval's loss %.7f is transformers' %.7f (exit %d)", dir, loss,
          ref, rc);
}

static void check_model(const char *name) {
    char dir[128], path[128], out[128];
    snprintf(dir, sizeof dir, "tests/fixtures/%s", name);
    snprintf(path, sizeof path, "tests/fixtures/%s.nbfx", name);
    nbfx *f = nbfx_load(path);
    nb_config cfg;
    int B, T;
    if (!f || nbfx_model_config(f, &cfg, &B, &T) || nb_hf_read_config(dir, &cfg)) {
        CHECK(0, "%s: fixture and config: %s", name, nb_last_error());
        nbfx_free(f);
        return;
    }
    /* the stream as the only training shard: one batch, the fixture's */
    const nbfx_entry *s = nbfx_get(f, "stream");
    uint32_t *tokens = malloc(sizeof *tokens * s->numel);
    for (size_t i = 0; i < s->numel; i++) tokens[i] = (uint32_t)s->i32[i];
    snprintf(path, sizeof path, "%s/d_train_000000.bin", work);
    CHECK(nb_shard_write(path, tokens, s->numel, cfg.vocab_size) == 0, "shard: %s", nb_last_error());
    snprintf(path, sizeof path, "%s/d_val_000000.bin", work);
    CHECK(nb_shard_write(path, tokens, s->numel, cfg.vocab_size) == 0, "shard: %s", nb_last_error());
    free(tokens);
    const double ref = nbfx_get(f, "loss")->f64[0];
    check_eval(dir, B, T, ref);

    /* from the folder: step 0 is transformers' loss; later steps train */
    double loss[4] = {0}, fresh[4] = {0};
    nb_train_result a, b, p, q;
    snprintf(out, sizeof out, "%s/%s_a", work, name);
    nb_train_options o = run_options(dir, &cfg, B, T, 4, out);
    CHECK(nb_train(&o, &a) == 0, "%s: run from the folder: %s", name, nb_last_error());
    CHECK(read_losses(out, loss, 4) == 4, "%s: 4 metrics lines", name);
    printf("%s: from the folder, losses %.7f %.7f %.7f %.7f (transformers %.7f)\n", name, loss[0], loss[1], loss[2],
           loss[3], ref);
    CHECK(fabs(loss[0] - ref) <= 1e-5 * ref, "%s: step 0's loss %.7f is transformers' %.7f", name, loss[0], ref);
    CHECK(loss[3] < loss[0] - 0.05, "%s: the steps train (loss %.5f -> %.5f)", name, loss[0], loss[3]);

    /* from the seed: other losses and weights */
    snprintf(out, sizeof out, "%s/%s_b", work, name);
    o = run_options(NULL, &cfg, B, T, 4, out);
    CHECK(nb_train(&o, &b) == 0, "%s: run from the seed: %s", name, nb_last_error());
    CHECK(read_losses(out, fresh, 4) == 4 && fabs(fresh[0] - loss[0]) > 1e-3, "%s: a fresh init starts elsewhere (%.5f)",
          name, fresh[0]);
    CHECK(b.weights_hash != a.weights_hash, "%s: a fresh init ends with other weights", name);

    /* a 2BW pipeline on threads, each stage loading its layers, against one process with the delay */
    omp_set_num_threads(1);
    snprintf(out, sizeof out, "%s/%s_p", work, name);
    o = run_options(dir, &cfg, B, T, 4, out);
    o.stages = 2;
    o.batch = B / 2;   /* 2BW needs a micro-batch per stage: the same rows, the same mean loss */
    o.microbatches = 2;
    o.delay.mode = NB_DELAY_2BW;
    CHECK(nb_train(&o, &p) == 0, "%s: one process, 2bw: %s", name, nb_last_error());
    snprintf(out, sizeof out, "%s/%s_q", work, name);
    o.out_dir = out;
    o.pipeline = NB_PIPE_2BW;
    o.transport = NB_TRANSPORT_THREADS;
    o.threads_per_stage = 1;
    CHECK(nb_train(&o, &q) == 0, "%s: pipeline: %s", name, nb_last_error());
    omp_set_num_threads(2);
    CHECK(read_losses(out, fresh, 1) == 1 && fabs(fresh[0] - ref) <= 1e-5 * ref,
          "%s: the pipeline's step 0 is transformers' loss (%.7f)", name, fresh[0]);
    CHECK(p.weights_hash == q.weights_hash, "%s: pipeline %016llx vs one process %016llx", name,
          (unsigned long long)q.weights_hash, (unsigned long long)p.weights_hash);
    CHECK(p.weights_hash != a.weights_hash, "%s: the 2bw delay changes the run", name);

    /* a model that contradicts the folder's config.json is refused, naming the field */
    nb_config other = cfg;
    other.d_ffn += 2;
    snprintf(out, sizeof out, "%s/%s_c", work, name);
    o = run_options(dir, &other, B, T, 1, out);
    char want[64];
    snprintf(want, sizeof want, "\"intermediate_size\" is %d", cfg.d_ffn);
    CHECK(nb_train(&o, &b) == -1 && strstr(nb_last_error(), want), "%s: a contradicting model: %s", name, nb_last_error());
    if (cfg.n_experts > 0) {  /* a mixture of experts: another k is refused naming Mixtral's field */
        other = cfg;
        other.experts_per_token = 1;
        o = run_options(dir, &other, B, T, 1, out);
        CHECK(nb_train(&o, &b) == -1 && strstr(nb_last_error(), "\"num_experts_per_tok\" is 2"),
              "%s: another experts_per_token: %s", name, nb_last_error());
    }
    nbfx_free(f);
}

int main(void) {
    snprintf(work, sizeof work, "/tmp/nb_init_from_XXXXXX");
    if (!mkdtemp(work)) return 1;
    snprintf(train_glob, sizeof train_glob, "%s/*_train_*.bin", work);
    check_model("hf5_untied");
    check_model("hf5_tied");
    check_model("hf5_mixtral");
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", work);
    check_run(cmd);
    return check_summary();
}
