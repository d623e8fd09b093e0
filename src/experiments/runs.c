/* Reading what a finished `nobubble train --out DIR` left: DIR/summary.json and
 * DIR/metrics.jsonl (formats in docs/experiments.md). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "experiments/exp.h"
#include "util/error.h"
#include "util/fs.h"

/* A number field; NAN when absent or null (final_val_loss is null without validation data). */
static double num(const nb_json *obj, const char *key) {
    const nb_json *v = nb_json_get(obj, key);
    return v && v->type == NB_JNUM ? v->num : NAN;
}

/* The parameter count of the summary's model (a Llama-style decoder: embedding, blocks of two norms,
 * attention with grouped key/value heads and a SwiGLU, a final norm, a head unless tied); NAN when
 * the summary has no complete model object (docs/experiments.md, "Tuned rates and scaling"). */
static double model_params(const nb_json *m) {
    double V = num(m, "vocab_size"), d = num(m, "d_model"), L = num(m, "n_layers"), h = num(m, "n_heads");
    double kv = num(m, "n_kv_heads"), f = num(m, "d_ffn");
    const nb_json *tied = nb_json_get(m, "tied");
    if (!(V > 0 && d > 0 && L > 0 && h > 0 && kv > 0 && f > 0) || !tied || tied->type != NB_JBOOL) return NAN;
    double hd = floor(d / h), dq = hd * h, dkv = hd * kv;
    double block = 2 * d + d * (dq + 2 * dkv) + dq * d + 3 * f * d;
    return V * d * (tied->b ? 1 : 2) + L * block + d;
}

/* A count field of the summary's delay: absent or null reads 0 (older summaries lack some); anything
 * but a whole number from 0 to 1e9 is an error naming the file and the field. */
static int count_field(const nb_json *obj, const char *key, const char *path, int *out) {
    double v = num(obj, key);
    *out = 0;
    if (isnan(v) && (!nb_json_get(obj, key) || nb_json_get(obj, key)->type == NB_JNULL)) return 0;
    if (!(v >= 0 && v <= 1e9) || v != floor(v))
        return nb_fail("%s: delay.%s must be a whole number from 0 to 1e9 (a summary written by nobubble train)", path, key);
    *out = (int)v;
    return 0;
}

static int read_summary(const char *dir, nbx_run *r) {
    char path[4200];
    snprintf(path, sizeof path, "%s/summary.json", dir);
    nb_json js;
    if (nb_json_read_file(path, "run summary", 0, &js)) return -1;
    const nb_json *run = nb_json_get(&js, "run"), *delay = nb_json_get(&js, "delay");
    const nb_json *opt = nb_json_get(run, "optimizer"), *mode = nb_json_get(delay, "mode"), *ef = nb_json_get(delay, "ef");
    r->final_train_loss = num(&js, "final_train_loss");
    r->final_val_loss = num(&js, "final_val_loss");
    r->seconds = num(&js, "seconds");
    r->tokens_per_s = num(&js, "tokens_per_s");
    if (!opt || opt->type != NB_JSTR || !mode || mode->type != NB_JSTR || !ef || ef->type != NB_JBOOL ||
        isnan(r->final_train_loss) || isnan(r->seconds)) {
        nb_json_free(&js);
        return nb_fail("%s: expected final_train_loss, seconds, run.optimizer, delay.mode and delay.ef "
                       "(a summary written by nobubble train)", path);
    }
    snprintf(r->optimizer, sizeof r->optimizer, "%s", opt->str);
    snprintf(r->delay_mode, sizeof r->delay_mode, "%s", mode->str);
    r->ef = ef->b;
    r->taylor = num(delay, "taylor");
    int rc = count_field(delay, "tau", path, &r->tau) || count_field(delay, "sync_start", path, &r->sync_start) ||
         count_field(delay, "sync_cooldown", path, &r->sync_cooldown);
    r->params = model_params(nb_json_get(&js, "model"));
    nb_json_free(&js);
    return rc ? -1 : 0;
}

static int grow_metrics(nbx_run *r, int *cap) {
    if (r->n < *cap) return 0;
    int nc = *cap ? *cap * 2 : 256;
    double **cols[] = {&r->step, &r->train_loss, &r->tokens, &r->time_s, &r->val_loss};
    for (size_t c = 0; c < sizeof cols / sizeof cols[0]; c++) {
        double *p = realloc(*cols[c], (size_t)nc * sizeof *p);
        if (!p) return nb_fail("out of memory");
        *cols[c] = p;
    }
    *cap = nc;
    return 0;
}

static int read_metrics_line(nbx_run *r, const char *line, size_t len, const char *path, int lineno) {
    char what[4300];
    snprintf(what, sizeof what, "%s line %d", path, lineno);
    nb_json js;
    if (nb_json_parse(line, len, &js, what)) return -1;
    int i = r->n;
    r->step[i] = num(&js, "step");
    r->train_loss[i] = num(&js, "train_loss");
    r->tokens[i] = num(&js, "tokens");
    r->time_s[i] = num(&js, "time_s");
    r->val_loss[i] = num(&js, "val_loss");
    nb_json_free(&js);
    if (isnan(r->step[i]) || isnan(r->train_loss[i]) || isnan(r->tokens[i]) || isnan(r->time_s[i]))
        return nb_fail("%s: expected the numbers step, train_loss, tokens and time_s", what);
    r->n++;
    return 0;
}

static int read_metrics(const char *dir, nbx_run *r) {
    char path[4200];
    snprintf(path, sizeof path, "%s/metrics.jsonl", dir);
    char *text;
    size_t n;
    if (nb_fs_read_file(path, &text, &n, "run metrics")) return -1;
    int cap = 0, lineno = 1, rc = 0;
    for (char *p = text; *p && !rc; lineno++) {
        char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        if (len) rc = grow_metrics(r, &cap) || read_metrics_line(r, p, len, path, lineno);
        if (!nl) break;
        p = nl + 1;
    }
    free(text);
    if (!rc && r->n == 0) rc = nb_fail("%s: no lines (expected one JSON object per step)", path);
    return rc ? -1 : 0;
}

/* A study's measurement of the final model (experiments/evaluate_whole.sh), where it made one: NAN
 * without the file; a file without a finite val_loss is an error naming it. */
static int read_final_eval(const char *dir, nbx_run *r) {
    char path[4200];
    snprintf(path, sizeof path, "%s/final_eval.json", dir);
    r->whole_split_loss = NAN;
    if (access(path, F_OK)) return 0;
    nb_json js;
    if (nb_json_read_file(path, "final evaluation", 0, &js)) return -1;
    double v = num(&js, "val_loss");
    nb_json_free(&js);
    if (!isfinite(v))
        return nb_fail("%s: expected a finite number val_loss (written by experiments/evaluate_whole.sh)", path);
    r->whole_split_loss = v;
    return 0;
}

int nbx_run_read(const char *dir, nbx_run *r) {
    memset(r, 0, sizeof *r);
    if (read_summary(dir, r) || read_metrics(dir, r) || read_final_eval(dir, r)) {
        nbx_run_free(r);
        return -1;
    }
    r->best_val_loss = NAN;
    for (int i = 0; i < r->n; i++)
        if (!isnan(r->val_loss[i]) && !(r->val_loss[i] >= r->best_val_loss)) r->best_val_loss = r->val_loss[i];
    return 0;
}

void nbx_run_free(nbx_run *r) {
    free(r->step);
    free(r->train_loss);
    free(r->tokens);
    free(r->time_s);
    free(r->val_loss);
    memset(r, 0, sizeof *r);
}

int nbx_run_is_sync(const nbx_run *r) {
    return !strcmp(r->delay_mode, "sync") || (!strcmp(r->delay_mode, "fixed") && r->tau == 0);
}

int nbx_run_is_plain_async(const nbx_run *r) {
    return !nbx_run_is_sync(r) && !r->ef && !(r->taylor > 0) && r->sync_start == 0 && r->sync_cooldown == 0;
}
