/* train_tiny: nobubble used as a library. Prepares a corpus from one text file (a small BPE
 * tokenizer, token shards, a validation split) and trains a small Llama-style model on it for a few
 * steps with PipeDream-2BW's one-step weight delay and error feedback, then prints the losses.
 *
 * Build against an installed nobubble (docs/library.md):
 *   cc examples/train_tiny.c $(pkg-config --cflags --libs nobubble) -o train_tiny
 *   ./train_tiny TEXT_FILE WORK_DIR        # WORK_DIR must not exist; it receives data/ and run/
 *
 * Exit status 0 when the run finished and its validation loss is finite. */
#include <math.h>
#include <stdio.h>
#include <nobubble/data.h>
#include <nobubble/train.h>

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s TEXT_FILE WORK_DIR\n", argv[0]);
        return 2;
    }
    char data_dir[4096], run_dir[4096], train_glob[4200], val_glob[4200];
    snprintf(data_dir, sizeof data_dir, "%s/data", argv[2]);
    snprintf(run_dir, sizeof run_dir, "%s/run", argv[2]);

    /* 1. The corpus: one document per blank-line-separated paragraph, 5% held out. */
    const char *inputs[1] = {argv[1]};
    nb_prepare_opts p;
    nb_prepare_defaults(&p);
    p.inputs = inputs;
    p.n_inputs = 1;
    p.out_dir = data_dir;
    p.name = "tiny";
    p.vocab_size = 300;
    p.val_fraction = 0.1;
    nb_prepare_stats ps;
    if (nb_prepare(&p, &ps)) {
        fprintf(stderr, "prepare: %s\n", nb_last_error());
        return 1;
    }
    printf("prepared %zu training and %zu validation tokens\n", ps.train_tokens, ps.val_tokens);

    /* 2. The run: the settings table's defaults, then a model small enough for seconds. */
    nb_train_options o;
    nb_train_defaults(&o);
    if (nb_config_preset("tiny", &o.model) || nb_config_override(&o.model, "n_layers=2") ||
        nb_config_override(&o.model, "d_model=64") || nb_config_override(&o.model, "d_ffn=128") ||
        nb_config_override(&o.model, "context=32") || nb_config_override(&o.model, "vocab_size=300")) {
        fprintf(stderr, "model: %s\n", nb_last_error());
        return 1;
    }
    snprintf(train_glob, sizeof train_glob, "%s/*_train_*.bin", data_dir);
    snprintf(val_glob, sizeof val_glob, "%s/*_val_*.bin", data_dir);
    o.train_pattern = train_glob;
    o.val_pattern = val_glob;
    o.batch = 4;
    o.seq_len = 32;
    o.steps = 30;
    o.schedule.lr = 3e-3f;
    o.delay.mode = NB_DELAY_2BW;   /* PipeDream-2BW: gradients computed on the weights of one step before */
    o.delay.ef = 1;
    o.delay.ef_alpha = 0.5f;
    o.out_dir = run_dir;           /* metrics.jsonl and summary.json */
    nb_train_result r;
    if (nb_train(&o, &r)) {
        fprintf(stderr, "train: %s\n", nb_last_error());
        return 1;
    }
    printf("trained %d steps: train loss %.4f, validation loss %.4f (uniform guessing: %.4f), weights %016llx\n",
           r.steps, r.final_train_loss, r.final_val_loss, log(300.0), (unsigned long long)r.weights_hash);
    return isfinite(r.final_val_loss) ? 0 : 1;
}
