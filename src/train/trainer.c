/* The one-process trainer: data -> stages -> AdamW, with evaluation, progress lines and the
 * run's files (metrics.jsonl, summary.json). */
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

int train_check_options(const nb_train_options *o, int T) {
    /* Every flag's range (the settings table), then what depends on other values. */
    if (nb_settings_check(o)) return -1;
    if (T < 1 || T > o->model.context)
        return nb_fail("--seq %d: expected 1 <= seq <= the model's context (%d)", T, o->model.context);
    if (nb_config_check_batch(&o->model, o->batch, T)) return -1;
    if (nb_schedule_validate(&o->schedule) || nb_optim_validate(&o->optim)) return -1;
    if (!o->train_pattern) return nb_fail("no training data given");
    if (o->save_every > 0 && !o->save_dir) return nb_fail("--save-every needs --save-dir");
    if (o->keep > 0 && o->save_every <= 0) return nb_fail("--keep needs --save-every");
    if (o->resume_override && !o->resume_dir) return nb_fail("--override needs --resume");
    return 0;
}

/* Everything a run holds, so that one cleanup path frees it whatever failed. */
typedef struct {
    nb_model model;
    nb_acts **acts;
    nb_optimizer **opt;
    nb_stash **stash;          /* per stage: older weight versions, EF buffer */
    const float **weights;     /* per stage: the version this step runs on */
    float **step_buf;
    nb_loader *train, *val;
    int *inputs, *targets;
    FILE *metrics;
    const char *last_saved;    /* the newest complete checkpoint ("" when none), named if the run diverges */
} run_state;

static void run_free(run_state *r) {
    for (int i = 0; r->acts && i < r->model.n_stages; i++) nb_acts_free(r->acts[i]);
    for (int i = 0; r->opt && i < r->model.n_stages; i++) nb_optimizer_free(r->opt[i]);
    for (int i = 0; r->step_buf && i < r->model.n_stages; i++) free(r->step_buf[i]);
    for (int i = 0; r->stash && i < r->model.n_stages; i++) nb_stash_free(r->stash[i]);
    free(r->stash);
    free(r->weights);
    free(r->acts);
    free(r->opt);
    free(r->step_buf);
    nb_model_free(&r->model);
    if (r->train) nb_loader_free(r->train);
    if (r->val) nb_loader_free(r->val);
    free(r->inputs);
    free(r->targets);
    if (r->metrics) fclose(r->metrics);
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

static int evaluate(run_state *r, const nb_train_options *o, double *loss_out) {
    return nb_evaluate(&r->model, r->acts, r->val, o->eval_batches, r->inputs, r->targets, loss_out);
}

/* Finite exactly when every weight is: squares of floats cannot overflow a double. */
static double weights_sum_squares(const nb_model *m) {
    double sq = 0;
    for (int i = 0; i < m->n_stages; i++) sq += nb_grad_sum_squares(m->stages[i].params, m->stages[i].tensors, m->stages[i].n_tensors);
    return sq;
}

/* Clips the gradients of all stages together to global norm `clip` (0: not at all); returns the norm
 * before clipping. */
static double clip_gradients(nb_model *m, float clip) {
    double sq = 0.0;
    for (int i = 0; i < m->n_stages; i++)
        sq += nb_grad_sum_squares(m->stages[i].grads, m->stages[i].tensors, m->stages[i].n_tensors);
    double norm = sqrt(sq);
    if (clip > 0 && norm > clip)
        for (int i = 0; i < m->n_stages; i++) nb_scale(m->stages[i].grads, m->stages[i].n_params, (float)(clip / norm));
    return norm;
}

/* What one step measured, for the metrics file. */
typedef struct {
    double loss, update_norm, version_distance, grad_norm;
    int max_tau;
} step_stats;

/* One optimizer step t: M micro-batches forward and backward on each stage's weight version
 * w_{t - tau_s}, the tied sum, Taylor compensation, clipping, the optimizer's d on the current
 * weights, then the (error-feedback corrected) step applied and w_t kept as a version. */
static int train_step(run_state *r, const nb_train_options *o, int step, float lr, step_stats *st) {
    nb_model *m = &r->model;
    double total = 0;
    memset(st, 0, sizeof *st);
    for (int i = 0; i < m->n_stages; i++) {
        r->weights[i] = nb_stash_weights(r->stash[i], m->stages[i].params, step);
        int tau = nb_stash_tau(r->stash[i], step);
        st->max_tau = tau > st->max_tau ? tau : st->max_tau;
    }
    nb_model_zero_grads(m);
    for (int mb = 0; mb < o->microbatches; mb++) {
        float loss;
        if (nb_loader_next(r->train, r->inputs, r->targets)) return -1;
        if (nb_model_forward(m, r->weights, r->acts, r->inputs, r->targets, &loss)) return -1;
        if (nb_model_backward(m, r->weights, r->acts, 1.0f / o->microbatches)) return -1;
        total += loss;
    }
    nb_model_sum_tied_grads(m);
    for (int i = 0; i < m->n_stages; i++) nb_stash_taylor(r->stash[i], m->stages[i].grads, m->stages[i].params, step);
    st->loss = total / o->microbatches;
    if (!isfinite(st->loss)) return train_diverged(step, "training loss", st->loss, r->last_saved);
    /* The norm before clipping: a non-finite gradient stops the run before the optimizer sees it. */
    st->grad_norm = clip_gradients(m, o->clip);
    if (!isfinite(st->grad_norm)) return train_diverged(step, "the gradient norm", st->grad_norm, r->last_saved);
    const float aux_lr = o->aux_lr * (lr / o->schedule.lr);
    /* The norms skip the last stage's copy of a tied embedding, so they do not depend on the split. */
    double update_sq = 0, version_sq = 0;
    for (int i = 0; i < m->n_stages; i++) {
        nb_stage *s = &m->stages[i];
        float *d = r->step_buf[i];
        if (r->weights[i] != s->params) version_sq += nb_distance_sq(s->params, r->weights[i], s->tensors, s->n_tensors);
        nb_optimizer_step(r->opt[i], s->grads, s->params, lr, aux_lr, d);
        nb_stash_apply(r->stash[i], s->params, d, step, NULL, NULL);
        update_sq += nb_grad_sum_squares(d, s->tensors, s->n_tensors);
    }
    nb_model_sync_tied_copy(m);
    if (!isfinite(update_sq)) return train_diverged(step, "the update's norm", sqrt(update_sq), r->last_saved);
    st->update_norm = sqrt(update_sq);
    st->version_distance = sqrt(version_sq);
    return 0;
}

int nb_train(const nb_train_options *o, nb_train_result *res) {
    if (o->pipeline >= 0) return train_pipeline(o, res);
    int T = o->seq_len ? o->seq_len : o->model.context;
    if (nb_config_validate(&o->model) || train_check_options(o, T) || nb_delay_validate(&o->delay, o->steps, o->stages))
        return -1;
    nb_fs_lock locks[2];
    if (train_lock_run(o, locks)) return -1;
    run_state r;
    memset(&r, 0, sizeof r);
    memset(res, 0, sizeof *res);
    res->final_val_loss = NAN;
    int rc = -1;
    if (nb_model_create(&r.model, &o->model, o->stages, o->split)) goto done;
    nb_model_init(&r.model, o->seed);
    if (nb_loader_open(&r.train, o->train_pattern, o->batch, T, o->model.vocab_size, o->data_seed, 0, 1)) goto done;
    if (o->val_pattern && nb_loader_open(&r.val, o->val_pattern, o->batch, T, o->model.vocab_size, 0, 0, 1)) goto done;
    int P = r.model.n_stages;
    r.acts = calloc((size_t)P, sizeof *r.acts);
    r.opt = calloc((size_t)P, sizeof *r.opt);
    r.step_buf = calloc((size_t)P, sizeof *r.step_buf);
    r.stash = calloc((size_t)P, sizeof *r.stash);
    r.weights = calloc((size_t)P, sizeof *r.weights);
    r.inputs = malloc(sizeof(int) * (size_t)o->batch * T);
    r.targets = malloc(sizeof(int) * (size_t)o->batch * T);
    if (!r.acts || !r.opt || !r.step_buf || !r.stash || !r.weights || !r.inputs || !r.targets) {
        nb_fail("out of memory");
        goto done;
    }
    for (int i = 0; i < P; i++) {
        if (!(r.acts[i] = nb_acts_create(&r.model.stages[i], o->batch, T))) goto done;
        nb_stage *s = &r.model.stages[i];
        if (nb_optimizer_create(&r.opt[i], &o->optim, s->tensors, s->n_tensors, s->n_params)) goto done;
        if (!(r.step_buf[i] = calloc(r.model.stages[i].n_params, sizeof(float)))) { nb_fail("out of memory"); goto done; }
        if (nb_stash_create(&r.stash[i], &o->delay, i, P, o->steps, s->params, s->n_params)) goto done;
    }
    train_parts parts = {&r.model, r.opt, r.stash, r.train};
    int start = 0;
    double t_load = nb_now();
    if (o->resume_dir && train_state_load(o->resume_dir, &parts, &start, o)) goto done;
    if (o->resume_dir && !o->quiet) train_report_checkpoint("loaded", o->resume_dir, nb_now() - t_load);
    /* (train_lock_run made --save-dir and --out.) A resumed run continues the metrics of the run it resumes. */
    if (o->out_dir && !(r.metrics = train_open_metrics(o->out_dir, o->resume_dir ? start : -1))) goto done;
    nb_schedule sched = o->schedule;
    sched.total_steps = o->steps;
    const double tokens_per_step = (double)o->batch * T * o->microbatches;
    const double flops_per_token = nb_model_train_flops_per_token(&o->model, T);
    if (!o->quiet)
        printf("model %zu parameters, %d stage(s), %d thread(s), batch %d x %d tokens x %d micro-batches = %.0f tokens/step, "
               "optimizer %s\n", nb_config_param_count(&o->model), P, omp_get_max_threads(), o->batch, T, o->microbatches,
               tokens_per_step, nb_optimizer_name(o->optim.kind));
    if (!o->quiet) {
        char delay[256];
        nb_delay_describe(&o->delay, delay, sizeof delay);
        size_t extra = 0;
        for (int i = 0; i < P; i++) extra += nb_stash_bytes(r.stash[i]);
        printf("%s; %.1f MiB of weight versions and EF buffers\n", delay, extra / 1048576.0);
    }
    if (!o->quiet && o->resume_dir) printf("resumed from %s at step %d\n", o->resume_dir, start);
    double train_seconds = 0, loss = NAN;
    char last_saved[4200];   /* the newest complete checkpoint of this run, named when a save fails */
    snprintf(last_saved, sizeof last_saved, "%s", o->resume_dir ? o->resume_dir : "");
    r.last_saved = last_saved;
    int proven = 0;  /* --keep: the newest periodic checkpoint whose weights gave a finite step */
    for (int step = start; step < o->steps; step++) {
        float lr = nb_schedule_lr(&sched, step);
        double t0 = nb_now();
        step_stats st;
        if (train_step(&r, o, step, lr, &st)) goto done;
        loss = st.loss;
        double dt = nb_now() - t0;
        train_seconds += dt;
        int last = step == o->steps - 1;
        double val = NAN;
        if (r.val && train_evaluates(o, step, last)) {
            if (evaluate(&r, o, &val)) goto done;
            if (!isfinite(val)) {
                train_diverged(step, "the validation loss", val, last_saved);
                goto done;
            }
        }
        if (!o->quiet && (last || step % o->log_every == 0 || !isnan(val))) {
            printf("step %5d/%d | loss %.4f | lr %.3e | %6.0f tok/s | %5.1f GFLOP/s", step + 1, o->steps, loss, lr,
                   tokens_per_step / dt, tokens_per_step * flops_per_token / dt * 1e-9);
            if (!isnan(val)) printf(" | val %.4f", val);
            printf("\n");
            fflush(stdout);
        }
        if (r.metrics) {
            train_metrics m = {step, loss, lr, tokens_per_step * (step + 1), train_seconds, tokens_per_step / dt,
                               st.update_norm, st.max_tau, st.version_distance, o->clip > 0 ? st.grad_norm : NAN, val};
            if (train_write_metrics(r.metrics, o->out_dir, &m)) goto done;
        }
        if (!isnan(val)) res->final_val_loss = val;
        int stopping = train_stop_requested() && !last;
        if (o->save_dir && (last || stopping || (o->save_every && (step + 1) % o->save_every == 0))) {
            char dir[4200];
            snprintf(dir, sizeof dir, "%s/step_%06d", o->save_dir, step + 1);
            double t_save = nb_now();
            double weights_sq = weights_sum_squares(&r.model);
            if (!isfinite(weights_sq)) {
                train_diverged(step, "the weights' sum of squares", weights_sq, last_saved);
                goto done;
            }
            /* The metrics lines of the steps the checkpoint holds are on disk before it is. */
            if (train_sync_metrics(r.metrics, o->out_dir)) goto done;
            if (train_state_save(dir, &parts, step + 1, o)) {
                train_save_failed(dir, last_saved);
                goto done;
            }
            snprintf(last_saved, sizeof last_saved, "%s", dir);
            if (!o->quiet) train_report_checkpoint("saved", dir, nb_now() - t_save);
        }
        /* With validation data, the proof is a finite validation loss of the weights saved; without,
         * this step's finite loss and gradients on versions no older than step - max_tau. */
        if (!r.val) train_weights_proven(o, step - st.max_tau, &proven);
        else if (!isnan(val)) train_weights_proven(o, step + 1, &proven);
        if (stopping) {
            if (o->save_dir)
                nb_fail("stopped on request after step %d; resume with --resume %s/step_%06d", step + 1, o->save_dir, step + 1);
            else
                nb_fail("stopped on request after step %d (no --save-dir: nothing saved)", step + 1);
            goto done;
        }
    }
    res->steps = o->steps;
    res->final_train_loss = loss;
    res->seconds = train_seconds;
    res->tokens_per_s = train_seconds > 0 ? tokens_per_step * (o->steps - start) / train_seconds : 0;
    res->weights_hash = nb_model_weights_hash(&r.model);
    res->primary = 1;
    if (o->out_dir && train_write_summary(o, res, T, NULL)) goto done;
    if (o->export_dir && nb_export_hf(&r.model, o->export_dir)) goto done;
    rc = 0;
done:
    run_free(&r);
    train_unlock_run(locks);
    return rc;
}
