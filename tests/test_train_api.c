/* The library does what the command line does with a data folder (nb_train_options.data_dir, the CLI's
 * --data): the same small run through nb_train and through `nobubble train` (NB_BIN) gives the same
 * summary.json (weights hash, vocabulary taken from the folder's tokenizer, losses) and the same export
 * with the tokenizer beside it, and so does nb_run (the flags as text, one by one); vocab_from_data 0 keeps the model's own vocabulary; a data folder with a
 * train pattern is refused naming both; a stop request is consumed by the run it stops. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "check.h"
#include "nobubble/data.h"
#include "nobubble/train.h"

static char work[] = "/tmp/nb_test_train_api_XXXXXX";

/* The value text after "KEY": in a summary.json (up to a comma or brace), or "" */
static void summary_value(const char *run, const char *key, char *out, size_t size) {
    char path[512], want[128];
    snprintf(path, sizeof path, "%s/%s/summary.json", work, run);
    snprintf(want, sizeof want, "\"%s\": ", key);
    size_t n = 0;
    unsigned char *text = check_slurp(path, &n);
    const char *at = text ? strstr((const char *)text, want) : NULL;
    out[0] = 0;
    if (at) snprintf(out, size, "%.*s", (int)strcspn(at + strlen(want), ",}\n"), at + strlen(want));
    free(text);
}

static int prepare_data(void) {
    char text_path[512], data[512];
    snprintf(text_path, sizeof text_path, "%s/text.txt", work);
    snprintf(data, sizeof data, "%s/data", work);
    FILE *f = fopen(text_path, "w");
    if (!f) return -1;
    for (int i = 1; i <= 40; i++)
        fprintf(f, "In the beginning God created the heaven and the earth. Paragraph %d.\n\nAnd the earth was without "
                   "form, and void; and darkness was upon the face of the deep. %d\n\n", i, i * 7);
    fclose(f);
    nb_prepare_opts p;
    nb_prepare_defaults(&p);
    const char *inputs[] = {text_path};
    p.inputs = inputs, p.n_inputs = 1, p.out_dir = data, p.vocab_size = 300, p.val_fraction = 0.1, p.verbose = 0;
    return nb_prepare(&p, NULL);
}

static nb_train_options small_run(const char *data, const char *out, const char *export_dir) {
    nb_train_options o;
    nb_train_defaults(&o);
    o.data_dir = data, o.steps = 4, o.batch = 2, o.seq_len = 32, o.eval_batches = 1, o.quiet = 1;
    o.out_dir = out, o.export_dir = export_dir, o.memory_check = 0;
    return o;
}

int main(void) {
    if (!mkdtemp(work) || prepare_data()) {
        CHECK(0, "prepare the data: %s", nb_last_error());
        return check_summary();
    }
    char data[512], out[512], hf[512], path[600];
    snprintf(data, sizeof data, "%s/data", work);
    snprintf(out, sizeof out, "%s/api", work);
    snprintf(hf, sizeof hf, "%s/api_hf", work);
    nb_train_options o = small_run(data, out, hf);
    nb_train_result r;
    CHECK(nb_train(&o, &r) == 0, "nb_train with data_dir: %s", nb_last_error());
    CHECK(r.tokenizer_exported, "the data's tokenizer went beside the export");
    snprintf(path, sizeof path, "%s/tokenizer.json", hf);
    CHECK(access(path, R_OK) == 0, "%s exists", path);

    const char *bin = getenv("NB_BIN");
    CHECK(bin != NULL, "NB_BIN (the nobubble binary) is set");
    if (bin) {
        char cmd[2048];
        snprintf(cmd, sizeof cmd, "%s train --data %s --steps 4 --batch 2 --seq 32 --eval-batches 1 --quiet --no-memory-check "
                 "--out %s/cli --export %s/cli_hf > %s/cli.log 2>&1", bin, data, work, work, work);
        CHECK(check_run(cmd) == 0, "the same run from the command line (%s/cli.log)", work);
        static const char *const keys[] = {"weights_hash", "vocab_size", "final_train_loss", "final_val_loss"};
        for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++) {
            char a[128], c[128];
            summary_value("api", keys[k], a, sizeof a);
            summary_value("cli", keys[k], c, sizeof c);
            CHECK(a[0] && !strcmp(a, c), "summary.json's %s: the library's %s, the command line's %s", keys[k], a, c);
        }
        char v[64];
        summary_value("api", "vocab_size", v, sizeof v);
        CHECK(!strcmp(v, "300"), "the vocabulary is the data's tokenizer's (300), not tiny's 2048: %s", v);
        snprintf(cmd, sizeof cmd, "cmp -s %s/api_hf/tokenizer.json %s/cli_hf/tokenizer.json", work, work);
        CHECK(check_run(cmd) == 0, "both exports carry the same tokenizer.json");
    }

    /* nb_run: the same run as flags given one by one, as a binding gives them */
    nb_run *run = nb_run_new();
    snprintf(out, sizeof out, "%s/flags", work);
    const char *flags[][2] = {{"--data", data}, {"--steps", "4"}, {"--batch", "2"}, {"--seq", "32"},
                              {"--eval-batches", "1"}, {"--quiet", NULL}, {"--no-memory-check", NULL}, {"--out", out}};
    int set_ok = run != NULL;
    for (size_t i = 0; set_ok && i < sizeof flags / sizeof flags[0]; i++) set_ok = !nb_run_set(run, flags[i][0], flags[i][1]);
    CHECK(set_ok, "nb_run_set: %s", nb_last_error());
    CHECK(set_ok && nb_run_train(run, &r) == 0, "nb_run_train: %s", nb_last_error());
    char a[128], b[128];
    summary_value("api", "weights_hash", a, sizeof a);
    summary_value("flags", "weights_hash", b, sizeof b);
    CHECK(a[0] && !strcmp(a, b), "nb_run's weights %s, nb_train's %s", b, a);
    CHECK(nb_run_set(run, "--lr", "0") == -1 && strstr(nb_last_error(), "--lr"), "a started run refuses flags: %s",
          nb_last_error());
    CHECK(set_ok && nb_run_train(run, &r) == -1 && strstr(nb_last_error(), "trained already"),
          "a run is trained once (a second nb_run_train trained again): %s", nb_last_error());
    nb_run_free(run);
    run = nb_run_new();
    CHECK(nb_run_set(run, "--batch", "0") == -1 && strstr(nb_last_error(), "--batch 0"), "--batch 0 refused: %s",
          nb_last_error());
    CHECK(nb_run_set(run, "--model", "huge") == -1 && strstr(nb_last_error(), "huge"), "--model huge refused: %s",
          nb_last_error());
    CHECK(nb_run_set(run, "--set", "n_layers") == -1, "--set without a value refused: %s", nb_last_error());
    nb_run_free(run);

    /* vocab_from_data 0: the model's own vocabulary (2048, tiny's), larger than the data's ids */
    snprintf(out, sizeof out, "%s/own_vocab", work);
    o = small_run(data, out, NULL);
    o.vocab_from_data = 0;
    CHECK(nb_train(&o, &r) == 0, "vocab_from_data 0: %s", nb_last_error());
    char v[64];
    summary_value("own_vocab", "vocab_size", v, sizeof v);
    CHECK(!strcmp(v, "2048"), "vocab_from_data 0 keeps vocab_size 2048: %s", v);

    o = small_run(data, NULL, NULL);
    o.train_pattern = "/nowhere/*_train_*.bin";
    CHECK(nb_train(&o, &r) == -1 && strstr(nb_last_error(), "give one of them"), "data_dir and a train pattern: %s",
          nb_last_error());

    /* A stop request stops the run it reaches (here the next one: none is running) and is consumed by it: a
     * later run of the same process trains to its end (it stopped at its first step while the request stayed). */
    snprintf(out, sizeof out, "%s/stopped", work);
    o = small_run(data, out, NULL);
    nb_train_request_stop();
    CHECK(nb_train(&o, &r) == -1 && strstr(nb_last_error(), "stopped on request after step"),
          "a requested stop stops the next run: %s", nb_last_error());
    snprintf(out, sizeof out, "%s/after_stop", work);
    o = small_run(data, out, NULL);
    CHECK(nb_train(&o, &r) == 0, "the run after a stopped one trains to its end: %s", nb_last_error());
    summary_value("after_stop", "weights_hash", b, sizeof b);
    CHECK(a[0] && !strcmp(a, b), "... to the same weights as the first run (%s, %s)", b, a);

    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf %s", work);
    check_run(cmd);
    return check_summary();
}
