/* Internal: what a run writes as it goes and at its end, in its --out: metrics.jsonl (metrics.c) and
 * summary.json (summary.c); the TensorBoard event files are tensorboard.h's. */
#ifndef NB_TRAIN_OUTPUTS_OUTPUTS_H
#define NB_TRAIN_OUTPUTS_OUTPUTS_H
#include <stdio.h>
#include "nobubble/train.h"

/* summary.json; extra (NULL: none) is one more `"key": value` member, written as given. */
int train_write_summary(const nb_train_options *o, const nb_train_result *res, int T, const char *extra);

/* One line of metrics.jsonl (grad_norm, val_loss and taylor_ratio NAN when absent). */
typedef struct {
    int step;
    double loss, lr, tokens, time_s, tokens_per_s, update_norm;
    int tau;
    double version_distance, grad_norm, val_loss;
    double taylor_ratio;   /* ||Taylor correction|| / ||gradient|| with --taylor; NAN without */
    /* A mixture of experts (NAN and 0 without): the mean of the MoE blocks' load-balancing losses, and
     * each MoE block's largest and smallest expert load, blocks in model order */
    double aux_loss;
    int moe_blocks;
    const float *load_max, *load_min;
    double router_staleness;  /* with a validation loss, under a delay (NAN: not measured; docs/moe.md) */
} train_metrics;
/* Writes and flushes the line; a failed write (a full disk) is an error naming OUT_DIR/metrics.jsonl,
 * which stops the run at once. */
int train_write_metrics(FILE *f, const char *out_dir, const train_metrics *m);
/* Flushes the lines to disk (fdatasync): before the checkpoint that covers them is committed, so that
 * no checkpoint is ever ahead of the metrics of the steps it holds. f NULL: nothing to do. */
int train_sync_metrics(FILE *f, const char *out_dir);
/* Opens OUT_DIR/metrics.jsonl (src/train/outputs/metrics.c): emptied for a new run (resumed_at < 0); for a
 * run resumed at step resumed_at, first rewritten atomically with only the whole lines of steps
 * 1..resumed_at (the steps before the checkpoint), then opened to append. NULL on failure (nb_fail). */
FILE *train_open_metrics(const char *out_dir, int resumed_at);
/* The results summary.json holds, read back from OUT_DIR/metrics.jsonl, for a run whose last step is done
 * but whose summary is missing (a kill between the final checkpoint and the summary): the last line's
 * training loss (it must be of last_step), the newest validation loss, and the seconds and tokens/s of
 * the steps since the last resume, as the run would have written them. */
int train_metrics_final(const char *out_dir, int last_step, double tokens_per_step, nb_train_result *res);
#endif
