/* Fuzz target: the reader of a finished run's files that `nobubble report` and `sweep` use
 * (nbx_run_read, src/experiments/runs.c) on arbitrary bytes. The input is split at its first NUL byte
 * (none: all of it) into summary.json and metrics.jsonl, both written into one folder. What it accepts
 * must have at least one metrics line, finite step/train_loss/tokens/time_s values, and delay fields in
 * range (else abort, which the fuzzer reports). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "fuzz_input.h"
#include "experiments/exp.h"

static volatile double sink;

static void violated(const char *what) {
    fprintf(stderr, "fuzz_run_files: an accepted run %s\n", what);
    abort();
}

/* fuzz_write keeps one file at a time (it removes the previous name's), so the second file is
 * written here and removed after each input. */
static const char *write_metrics(const uint8_t *data, size_t size) {
    static char path[700];
    snprintf(path, sizeof path, "%s/metrics.jsonl", fuzz_dir());
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(data, 1, size, f) != size || fclose(f) != 0) {
        perror("fuzz_run_files: writing metrics.jsonl");
        exit(2);
    }
    return path;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const uint8_t *nul = memchr(data, 0, size);
    size_t n_summary = nul ? (size_t)(nul - data) : size;
    fuzz_write(data, n_summary, "summary.json");
    const char *metrics = write_metrics(nul ? nul + 1 : data + size, nul ? size - n_summary - 1 : 0);
    nbx_run r;
    int rc = nbx_run_read(fuzz_dir(), &r);
    remove(metrics);
    if (rc) return 0;
    if (r.n < 1 || !r.step || !r.train_loss || !r.tokens || !r.time_s || !r.val_loss) violated("has no metrics");
    double total = 0;
    for (int i = 0; i < r.n; i++) {
        if (isnan(r.step[i]) || isnan(r.train_loss[i]) || isnan(r.tokens[i]) || isnan(r.time_s[i]))
            violated("has a metrics line without step, train_loss, tokens or time_s");
        total += r.step[i] + r.val_loss[i];
    }
    if (r.tau < 0 || r.sync_start < 0 || r.sync_cooldown < 0) violated("has a negative delay field");
    if (!memchr(r.optimizer, 0, sizeof r.optimizer) || !memchr(r.delay_mode, 0, sizeof r.delay_mode))
        violated("has an unterminated name");
    total += nbx_run_is_sync(&r) + nbx_run_is_plain_async(&r) + r.best_val_loss + r.params;
    sink = total;
    nbx_run_free(&r);
    return 0;
}
