/* The run's configuration as recorded in a checkpoint, and the rules for resuming with another
 * one (see run_fields.h and docs/checkpoints.md). */
#include "train/run_fields.h"
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "nobubble/checkpoint.h"
#include "util/error.h"

static void put(run_field *f, int *n, const char *key, const char *shown, run_field_kind kind, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));
static void put(run_field *f, int *n, const char *key, const char *shown, run_field_kind kind, const char *fmt, ...) {
    if (*n >= RUN_FIELDS_MAX) return;
    run_field *x = &f[(*n)++];
    x->key = key;
    x->shown = shown;
    x->kind = kind;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(x->value, sizeof x->value, fmt, ap);
    va_end(ap);
}

/* The shortest decimal that reads back as the same float, so that messages show 0.002, not 0.00200000009. */
static void fmt_float(char *buf, size_t size, float v) {
    for (int p = 1; p <= 9; p++) {
        snprintf(buf, size, "%.*g", p, (double)v);
        if (strtof(buf, NULL) == v) return;
    }
}

static void putf(run_field *f, int *n, const char *key, const char *shown, run_field_kind kind, float v) {
    char buf[32];
    fmt_float(buf, sizeof buf, v);
    put(f, n, key, shown, kind, "%s", buf);
}

/* The model: its shape fixes the saved tensors' sizes; context, rope theta and the norm's epsilon
 * do not (they change what the weights compute, so they may change only with --override). */
static void model_fields(const nb_config *c, run_field *f, int *n) {
    put(f, n, "vocab_size", "model vocab_size", RUN_FIELD_FIXED, "%d", c->vocab_size);
    put(f, n, "d_model", "model d_model", RUN_FIELD_FIXED, "%d", c->d_model);
    put(f, n, "n_layers", "model n_layers", RUN_FIELD_FIXED, "%d", c->n_layers);
    put(f, n, "n_heads", "model n_heads", RUN_FIELD_FIXED, "%d", c->n_heads);
    put(f, n, "n_kv_heads", "model n_kv_heads", RUN_FIELD_FIXED, "%d", c->n_kv_heads);
    put(f, n, "d_ffn", "model d_ffn", RUN_FIELD_FIXED, "%d", c->d_ffn);
    put(f, n, "tied", "model tied", RUN_FIELD_FIXED, "%d", c->tied);
    put(f, n, "context", "model context", RUN_FIELD_OVERRIDE, "%d", c->context);
    put(f, n, "rope_theta", "model rope_theta", RUN_FIELD_OVERRIDE, "%.17g", c->rope_theta);
    put(f, n, "norm_eps", "model norm_eps", RUN_FIELD_OVERRIDE, "%.17g", c->norm_eps);
}

/* The optimizer: its kind (and SOAP's largest preconditioned side) fixes which buffers exist. */
static void optim_fields(const nb_train_options *o, run_field *f, int *n) {
    const nb_optim_params *p = &o->optim;
    const run_field_kind V = RUN_FIELD_OVERRIDE;
    put(f, n, "optimizer", "--optimizer", RUN_FIELD_FIXED, "%s", nb_optimizer_name(p->kind));
    put(f, n, "max_precond_dim", "--max-precond-dim", RUN_FIELD_FIXED, "%d", p->max_precond_dim);
    put(f, n, "schedule", "--schedule", V, "%s", nb_schedule_name(o->schedule.kind));
    putf(f, n, "lr", "--lr", V, o->schedule.lr);
    putf(f, n, "lr_min", "--lr-min", V, o->schedule.lr_min);
    put(f, n, "warmup", "--warmup", V, "%d", o->schedule.warmup);
    putf(f, n, "cooldown", "--cooldown", V, o->schedule.cooldown);
    putf(f, n, "aux_lr", "--aux-lr", V, o->aux_lr);
    putf(f, n, "clip", "--clip", V, o->clip);
    putf(f, n, "beta1", "--beta1", V, p->beta1);
    putf(f, n, "beta2", "--beta2", V, p->beta2);
    putf(f, n, "beta3", "--beta3", V, p->beta3);
    putf(f, n, "eps", "--eps", V, p->eps);
    putf(f, n, "wd", "--wd", V, p->weight_decay);
    putf(f, n, "momentum", "--momentum", V, p->momentum);
    put(f, n, "nesterov", "--nesterov", V, "%d", p->nesterov);
    put(f, n, "ns_steps", "--ns-steps", V, "%d", p->ns_steps);
    putf(f, n, "gamma", "--gamma", V, p->gamma);
    put(f, n, "precond_every", "--precond-every", V, "%d", p->precond_every);
    putf(f, n, "aux_beta1", "--aux-beta1", V, p->aux_beta1);
    putf(f, n, "aux_beta2", "--aux-beta2", V, p->aux_beta2);
}

/* The delay and its mitigations. The split changes nothing a run computes (splits are bitwise
 * identical) except under PipeDream, where stage s runs on weights P-1-s steps old. */
static void delay_fields(const nb_train_options *o, int n_stages, run_field *f, int *n) {
    const nb_delay_options *d = &o->delay;
    const run_field_kind V = RUN_FIELD_OVERRIDE;
    if (d->mode == NB_DELAY_FIXED) put(f, n, "delay", "--delay", V, "fixed:%d", d->tau);
    else put(f, n, "delay", "--delay", V, "%s", nb_delay_mode_name(d->mode));
    if (d->ef) putf(f, n, "ef", "--ef", V, d->ef_alpha);
    else put(f, n, "ef", "--ef", V, "off");
    putf(f, n, "taylor", "--taylor", V, d->taylor);
    put(f, n, "sync_start", "--sync-start", V, "%d", d->sync_start);
    put(f, n, "sync_cooldown", "--sync-cooldown", V, "%d", d->sync_cooldown);
    put(f, n, "stages", "--stages", d->mode == NB_DELAY_PIPEDREAM ? V : RUN_FIELD_FREE, "%d", n_stages);
}

int run_fields(const nb_train_options *o, int n_stages, run_field *f) {
    int n = 0;
    model_fields(&o->model, f, &n);
    optim_fields(o, f, &n);
    delay_fields(o, n_stages, f, &n);
    const run_field_kind V = RUN_FIELD_OVERRIDE;
    put(f, &n, "batch", "--batch", V, "%d", o->batch);
    put(f, &n, "seq", "--seq", V, "%d", o->seq_len ? o->seq_len : o->model.context);
    put(f, &n, "microbatches", "--microbatches", V, "%d", o->microbatches);
    put(f, &n, "data_seed", "--data-seed", V, "%llu", (unsigned long long)o->data_seed);
    put(f, &n, "seed", "--seed", V, "%llu", (unsigned long long)o->seed);
    return n;
}

/* Appends "; FIELD VALUE (checkpoint: SAVED)" to a growing list. */
static void append_diff(char *list, size_t size, const run_field *x, const char *saved) {
    size_t at = strlen(list);
    if (at < size)
        snprintf(list + at, size - at, "%s%s %s (checkpoint: %s)", at ? "; " : "", x->shown, x->value,
                 saved ? saved : "not recorded");
}

static int is_data_layout(const char *key) {
    return !strcmp(key, "batch") || !strcmp(key, "seq") || !strcmp(key, "data_seed");
}

int run_fields_check(const nb_st_file *f, const nb_train_options *o, int n_stages, const uint64_t *fingerprint,
                     char *overridden, size_t size) {
    run_field fields[RUN_FIELDS_MAX];
    int n = run_fields(o, n_stages, fields), data_same_shape = 1;
    char fixed[1024] = "", changed[1024] = "", key[64];
    for (int i = 0; i < n; i++) {
        if (fields[i].kind == RUN_FIELD_FREE) continue;
        snprintf(key, sizeof key, "run.%s", fields[i].key);
        const char *saved = nb_st_meta(f, key);
        if (saved && !strcmp(saved, fields[i].value)) continue;
        if (is_data_layout(fields[i].key)) data_same_shape = 0;
        append_diff(fields[i].kind == RUN_FIELD_FIXED ? fixed : changed, sizeof fixed, &fields[i], saved);
    }
    /* The loader's fingerprint covers the shards' names and sizes besides batch, seq and data seed:
     * with those equal, a different fingerprint means other training data. */
    const char *fp = nb_st_meta(f, "loader_fingerprint");
    char now[32];
    if (fingerprint) snprintf(now, sizeof now, "%" PRIu64, *fingerprint);
    if (fingerprint && data_same_shape && (!fp || strcmp(fp, now))) {
        size_t at = strlen(changed);
        snprintf(changed + at, sizeof changed - at, "%straining data (the shards' names or sizes differ)", at ? "; " : "");
    }
    if (fixed[0])
        return nb_fail("--resume %s: the checkpoint cannot continue as this run: %s. These fix the saved tensors' "
                       "shapes; not even --override changes them", o->resume_dir, fixed);
    if (changed[0] && !o->resume_override)
        return nb_fail("--resume %s: this run's configuration differs from the checkpoint's: %s. Resume with the "
                       "checkpoint's values, or give --override to continue with these", o->resume_dir, changed);
    snprintf(overridden, size, "%s", changed);
    return 0;
}
