/* Internal helpers of the experiments part: string lists, reading a run's files, the results
 * table. Prefixed nbx_ (the report, src/report/, shares the prefix and reads runs through these). */
#ifndef NB_EXPERIMENTS_EXP_H
#define NB_EXPERIMENTS_EXP_H
#include <stddef.h>
#include <stdio.h>
#include "util/json.h"

/* A growable list of malloc'ed strings; line is where it came from in a grid file. */
typedef struct { char **v; int n, cap, line; } nbx_strv;
int nbx_strv_push(nbx_strv *s, const char *text, size_t len);
void nbx_strv_free(nbx_strv *s);

/* Splits text at blanks; "..." and '...' group (a double-quoted part may escape \" and \\).
 * On an unbalanced quote returns -1 and writes why to err. */
int nbx_tokenize(const char *text, nbx_strv *out, char *err, size_t err_size);
/* Appends arg to b quoted for a POSIX shell when it needs quoting. */
int nbx_shell_quote(nb_buf *b, const char *arg);

/* What one finished run left behind: its metrics (one entry per line of metrics.jsonl; val_loss
 * NAN where a line has none) and its summary. */
typedef struct {
    int n;
    double *step, *train_loss, *tokens, *time_s, *val_loss;
    double final_train_loss, final_val_loss, best_val_loss, seconds, tokens_per_s;
    char delay_mode[16], optimizer[16];
    int tau, ef, sync_start, sync_cooldown;
    double taylor;
    double params;          /* the model's parameter count from summary.json's model; NAN without one */
    double whole_split_loss; /* dir/final_eval.json's val_loss: a study's evaluation of the exported final
                              * model on the whole validation split (experiments/evaluate_whole.sh);
                              * NAN without that file */
} nbx_run;
/* Reads dir/summary.json, dir/metrics.jsonl and, where there is one, dir/final_eval.json; errors name
 * the file (and line). */
int nbx_run_read(const char *dir, nbx_run *r);
void nbx_run_free(nbx_run *r);
/* A synchronous run: no delay at any step (sync, or fixed:0). */
int nbx_run_is_sync(const nbx_run *r);
/* Delayed with no mitigation: no EF, no Taylor, no synchronous start or cooldown. */
int nbx_run_is_plain_async(const nbx_run *r);

/* The columns of results.csv after the point name and the axes. */
#define NBX_RESULT_COLUMNS "final_train_loss,final_val_loss,best_val_loss,tokens,seconds,status,exit_status"

#endif
