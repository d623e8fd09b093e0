/* What every run shares before and after the executor runs it (launch.c sets a run up, exec.c drives
 * it): the options' defaults and checks, the run's folders and their locks, checkpoint messages and
 * pruning, the divergence and stop rules, summary.json. */
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <omp.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "backend/gemm.h"
#include "nobubble/checkpoint.h"
#include "nobubble/data.h"
#include "nobubble/delay.h"
#include "nobubble/train.h"
#include "train/run.h"
#include "train/state.h"
#include "util/clock.h"
#include "util/error.h"
#include "util/fs.h"

/* Set by the CLI's signal thread (or a handler: a lock-free atomic is async-signal-safe). */
static atomic_int stop_requested;

void nb_train_request_stop(void) { atomic_store(&stop_requested, 1); }
int train_stop_requested(void) { return atomic_load(&stop_requested); }

/* "saved DIR: 123.4 MB in 0.12 s (1000 MB/s)": the size of the folder's files over the time. */
void train_report_checkpoint(const char *what, const char *dir, double seconds) {
    double bytes = 0;
    DIR *d = opendir(dir);
    for (struct dirent *e; d && (e = readdir(d));) {
        char path[4400];
        struct stat st;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (!stat(path, &st) && S_ISREG(st.st_mode)) bytes += (double)st.st_size;
    }
    if (d) closedir(d);
    printf("checkpoint %s %s: %.1f MB in %.3f s (%.0f MB/s)\n", what, dir, bytes / 1e6, seconds,
           seconds > 0 ? bytes / 1e6 / seconds : 0.0);
}

/* A failed save (a full disk, say) leaves the checkpoints before it as they were: the message says so
 * first, naming the one to resume from, then why the save failed. */
void train_save_failed(const char *dir, const char *previous) {
    char why[1024];
    snprintf(why, sizeof why, "%s", nb_last_error());
    if (previous[0])
        nb_fail("checkpoint %s not saved; the previous checkpoint at %s is intact (resume with --resume %s): %s", dir,
                previous, previous, why);
    else
        nb_fail("checkpoint %s not saved, and this run has no earlier checkpoint: %s", dir, why);
}

int train_diverged(int step, const char *what, double value, const char *newest) {
    if (newest && newest[0])
        return nb_fail("%s became %g at step %d: the run stopped before applying that step or saving anything after "
                       "it; the checkpoints before it are kept, the newest being %s (resume from it, or an earlier one, "
                       "with a lower --lr and --override)", what, value, step + 1, newest);
    return nb_fail("%s became %g at step %d: the run stopped before applying that step, and saved nothing of it or "
                   "after it (resume from an earlier checkpoint with a lower --lr and --override, or start again with "
                   "a lower --lr)", what, value, step + 1);
}

int train_evaluates(const nb_train_options *o, int step, int last) {
    const int periodic_save = o->save_every && (step + 1) % o->save_every == 0;
    return last || (o->eval_every && (step + 1) % o->eval_every == 0) || (o->keep > 0 && periodic_save);
}

void train_weights_proven(const nb_train_options *o, int version, int *proven) {
    const int every = o->save_every;
    if (o->keep <= 0 || every <= 0 || version < every) return;
    const int newest = version - version % every;  /* the newest periodic checkpoint at or before it */
    if (newest <= *proven) return;
    *proven = newest;
    train_prune_checkpoints(o, newest, every);
}

/* Removes step folders of save_dir older than the newest `keep` this run wrote. */
void train_prune_checkpoints(const nb_train_options *o, int saved_step, int every) {
    if (o->keep <= 0 || every <= 0) return;
    for (int k = o->keep; ; k++) {
        int old = saved_step - k * every;
        char dir[4200];
        struct stat st;
        snprintf(dir, sizeof dir, "%s/step_%06d", o->save_dir, old);
        if (old <= 0 || lstat(dir, &st)) break;
        /* A link where this run's folder was is not pruned (nor what it points to): said, and left. */
        if (train_state_remove(dir)) fprintf(stderr, "warning: --keep %d: %s\n", o->keep, nb_last_error());
    }
}

int train_lock_run(const nb_train_options *o, nb_fs_lock locks[2]) {
    nb_fs_lock_init(&locks[0]);
    nb_fs_lock_init(&locks[1]);
    if (o->save_dir && (nb_fs_mkdirs(o->save_dir, "--save-dir") || nb_fs_lock_dir(&locks[0], o->save_dir, "--save-dir")))
        return -1;
    if (o->out_dir && (nb_fs_mkdirs(o->out_dir, "--out") || nb_fs_lock_dir(&locks[1], o->out_dir, "--out"))) {
        nb_fs_unlock(&locks[0]);
        return -1;
    }
    return 0;
}

void train_unlock_run(nb_fs_lock locks[2]) {
    nb_fs_unlock(&locks[1]);
    nb_fs_unlock(&locks[0]);
}

void nb_train_defaults(nb_train_options *o) {
    memset(o, 0, sizeof *o);
    nb_config_preset("tiny", &o->model);
    o->stages = 1;
    o->pipeline = -1;
    o->batch = 8;
    o->microbatches = 1;
    o->steps = 100;
    o->optim = nb_optim_defaults(NB_OPT_ADAMW);
    o->optim.weight_decay = 0.1f;
    o->schedule.kind = NB_SCHEDULE_COSINE;
    o->schedule.lr = 1e-3f;
    o->schedule.cooldown = 0.2f;
    o->aux_lr = 1e-3f;
    o->delay.mode = NB_DELAY_SYNC;
    o->delay.ef_alpha = 1.0f;
    o->eval_every = 0;
    o->eval_batches = 8;
    o->log_every = 10;
    o->seed = 1;
    o->peer_timeout = 300;
}

/* An int option in [lo, hi] (the ranges of train.h), else an error naming the flag. */
static int in_range(const char *flag, int v, int lo, int hi) {
    if (v >= lo && v <= hi) return 0;
    return nb_fail("%s %d: expected %d to %d", flag, v, lo, hi);
}

int train_check_options(const nb_train_options *o, int T) {
    if (in_range("--batch", o->batch, 1, NB_TRAIN_MAX_BATCH)) return -1;
    if (T < 1 || T > o->model.context)
        return nb_fail("--seq %d: expected 1 <= seq <= the model's context (%d)", T, o->model.context);
    if (nb_config_check_batch(&o->model, o->batch, T)) return -1;
    if (in_range("--microbatches", o->microbatches, 1, NB_TRAIN_MAX_MICROBATCHES) ||
        in_range("--steps", o->steps, 1, NB_TRAIN_MAX_STEPS) ||
        in_range("--warmup", o->schedule.warmup, 0, NB_TRAIN_MAX_STEPS) ||
        in_range("--sync-start", o->delay.sync_start, 0, NB_TRAIN_MAX_STEPS) ||
        in_range("--sync-cooldown", o->delay.sync_cooldown, 0, NB_TRAIN_MAX_STEPS) ||
        in_range("--eval-every", o->eval_every, 0, NB_TRAIN_MAX_STEPS) ||
        in_range("--eval-batches", o->eval_batches, 1, NB_TRAIN_MAX_MICROBATCHES) ||
        in_range("--log-every", o->log_every, 1, NB_TRAIN_MAX_STEPS) ||
        in_range("--save-every", o->save_every, 0, NB_TRAIN_MAX_STEPS))
        return -1;
    if (nb_schedule_validate(&o->schedule) || nb_optim_validate(&o->optim)) return -1;
    if (!(o->aux_lr > 0) || !isfinite(o->aux_lr)) return nb_fail("--aux-lr %g: expected a positive number", o->aux_lr);
    if (!(o->clip >= 0) || !isfinite(o->clip)) return nb_fail("--clip %g: expected a number >= 0 (0: off)", o->clip);
    if (o->eval_every < 0 || o->eval_batches < 1)
        return nb_fail("--eval-every %d / --eval-batches %d: expected >= 0 and >= 1", o->eval_every, o->eval_batches);
    if (o->log_every < 1) return nb_fail("--log-every %d: expected >= 1", o->log_every);
    if (!o->train_pattern) return nb_fail("no training data given");
    if (o->save_every < 0) return nb_fail("--save-every %d: expected >= 0", o->save_every);
    if (o->save_every > 0 && !o->save_dir) return nb_fail("--save-every needs --save-dir");
    if (o->keep < 0) return nb_fail("--keep %d: expected >= 0 (0: keep every checkpoint)", o->keep);
    if (o->keep > 0 && o->save_every <= 0) return nb_fail("--keep needs --save-every");
    if (o->resume_override && !o->resume_dir) return nb_fail("--override needs --resume");
    return 0;
}

int nb_evaluate(nb_model *m, nb_acts **acts, nb_loader *val, int batches, int *inputs, int *targets, double *loss) {
    double total = 0;
    nb_loader_reset(val);
    for (int b = 0; b < batches; b++) {
        float l;
        if (nb_loader_next(val, inputs, targets)) return -1;
        if (nb_model_forward(m, NULL, acts, inputs, targets, &l)) return -1;
        total += l;
    }
    *loss = total / batches;
    return 0;
}

int train_write_summary(const nb_train_options *o, const nb_train_result *res, int T, const char *extra) {
    char path[4096], cfg[1024];
    snprintf(path, sizeof path, "%s/summary.json", o->out_dir);
    nb_afile a;
    if (nb_afile_open(&a, path)) return -1;
    FILE *f = a.f;
    nb_config_json(&o->model, cfg, sizeof cfg);
    fprintf(f, "{\n  \"nobubble\": \"%s\",\n  \"model\": %s,\n", NB_VERSION, cfg);
    fprintf(f, "  \"run\": {\"stages\": %d, \"batch\": %d, \"seq_len\": %d, \"microbatches\": %d, \"steps\": %d, "
               "\"optimizer\": \"%s\", \"lr\": %.7g, \"aux_lr\": %.7g, \"lr_min\": %.7g, \"warmup\": %d, "
               "\"schedule\": \"%s\", \"cooldown\": %.7g, \"clip\": %.7g, \"beta1\": %.7g, \"beta2\": %.7g, "
               "\"beta3\": %.7g, \"eps\": %.7g, \"wd\": %.7g, \"momentum\": %.7g, \"nesterov\": %s, "
               "\"ns_steps\": %d, \"gamma\": %.7g, \"precond_every\": %d, \"seed\": %llu, \"data_seed\": %llu, "
               "\"train\": \"%s\", \"val\": \"%s\", \"threads\": %d, \"gemm\": \"%s\"},\n",
            o->stages, o->batch, T, o->microbatches, o->steps, nb_optimizer_name(o->optim.kind),
            (double)o->schedule.lr, (double)o->aux_lr, (double)o->schedule.lr_min, o->schedule.warmup,
            nb_schedule_name(o->schedule.kind), (double)o->schedule.cooldown, (double)o->clip,
            (double)o->optim.beta1, (double)o->optim.beta2, (double)o->optim.beta3, (double)o->optim.eps,
            (double)o->optim.weight_decay, (double)o->optim.momentum, o->optim.nesterov ? "true" : "false",
            o->optim.ns_steps, (double)o->optim.gamma, o->optim.precond_every, (unsigned long long)o->seed,
            (unsigned long long)o->data_seed, o->train_pattern, o->val_pattern ? o->val_pattern : "",
            omp_get_max_threads(), nb_gemm_backend());
    fprintf(f, "  \"delay\": {\"mode\": \"%s\", \"tau\": %d, \"ef\": %s, \"ef_alpha\": %.7g, \"taylor\": %.7g, "
               "\"sync_start\": %d, \"sync_cooldown\": %d},\n",
            nb_delay_mode_name(o->delay.mode), o->delay.tau, o->delay.ef ? "true" : "false", (double)o->delay.ef_alpha,
            (double)o->delay.taylor, o->delay.sync_start, o->delay.sync_cooldown);
    if (extra) fprintf(f, "  %s,\n", extra);
    /* NaN when a resumed run had no step left to run: JSON has no NaN. */
    if (isnan(res->final_train_loss)) fprintf(f, "  \"final_train_loss\": null,\n");
    else fprintf(f, "  \"final_train_loss\": %.9g,\n", res->final_train_loss);
    if (isnan(res->final_val_loss)) fprintf(f, "  \"final_val_loss\": null,\n");
    else fprintf(f, "  \"final_val_loss\": %.9g,\n", res->final_val_loss);
    fprintf(f, "  \"tokens_per_s\": %.1f,\n  \"seconds\": %.3f,\n  \"weights_hash\": \"%016llx\"\n}\n",
            res->tokens_per_s, res->seconds, (unsigned long long)res->weights_hash);
    return nb_afile_commit(&a);   /* "PATH: write failed: ..." */
}
