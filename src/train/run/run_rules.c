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
#include "backend/backend.h"
#include "nobubble/checkpoint.h"
#include "nobubble/data.h"
#include "nobubble/delay.h"
#include "nobubble/pipeline.h"
#include "nobubble/runtime.h"
#include "nobubble/train.h"
#include "train/run/run.h"
#include "train/run/state.h"
#include "util/clock.h"
#include "util/error.h"
#include "util/fs.h"

/* Set by the CLI's signal thread (or a handler: a lock-free atomic is async-signal-safe). */
static atomic_int stop_requested;

void nb_train_request_stop(void) { atomic_store(&stop_requested, 1); }
int train_stop_requested(void) { return atomic_load(&stop_requested); }
void train_stop_consume(void) { atomic_store(&stop_requested, 0); }

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

int train_diverged(int step, const char *what, double value) {
    return nb_fail("%s became %g at step %d: " TRAIN_DIVERGED_SAYS " or saving anything after it", what, value,
                   step + 1);
}

void train_diverged_advice(const train_checkpoints *saved) {
    char said[2048], others[2400] = "";
    snprintf(said, sizeof said, "%s", nb_last_error());
    if (!strstr(said, TRAIN_DIVERGED_SAYS)) return;
    if (saved->unproven[0])
        snprintf(others, sizeof others, "; not from %s, saved after it without a finite %s of their weights", saved->unproven,
                 saved->validated ? "validation loss" : "step");
    if (saved->good[0])
        nb_fail("%s; resume from %s, the newest checkpoint whose weights proved finite (or an earlier one), with a lower "
                "--lr and --override%s", said, saved->good, others);
    else
        nb_fail("%s; no checkpoint of this run proved finite (resume from an earlier run's checkpoint with a lower --lr "
                "and --override, or start again with a lower --lr)%s", said, others);
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
        if (train_state_discard(dir)) fprintf(stderr, "warning: --keep %d: %s\n", o->keep, nb_last_error());
    }
}

int train_eval_batches(const nb_loader *l, int asked, int B, int T, const char *flag, const char *pattern, int say) {
    const size_t held = nb_loader_batches_per_epoch(l);
    if ((size_t)asked <= held) return asked;
    if (say)
        fprintf(stderr, "note: %s %d: the validation shards %s hold %zu batches of %d x %d tokens: evaluating those %zu "
                "(each window once)\n", flag, asked, pattern, held, B, T, held);
    return (int)held;
}

int train_replicas_are_ranks(const nb_train_options *o) {
    return o->data_parallel > 1 && o->pipeline >= 0 && o->transport == NB_TRANSPORT_MPI;
}

int train_dp_buckets(const nb_train_options *o) {
    return train_replicas_are_ranks(o) && o->dp_bucket_mib > 0 && o->pipeline != NB_PIPE_ZBH1;
}

/* A replica's share of the step's micro-batches (at least 1: the checks refuse a share that is not whole). */
static int replica_microbatches(const nb_train_options *o) {
    const int m = o->data_parallel > 1 ? o->microbatches / o->data_parallel : o->microbatches;
    return m > 1 ? m : 1;
}

int train_schedule_microbatches(const nb_train_options *o) {
    if (o->pipeline == NB_PIPE_PIPEDREAM) return 1;
    return train_replicas_are_ranks(o) ? replica_microbatches(o) : o->microbatches;
}

int train_chunks(const nb_train_options *o) {
    if (o->pipeline != NB_PIPE_INTERLEAVED) return 1;
    return o->chunks > 0 ? o->chunks : 2;
}

int train_model_stages(const nb_train_options *o) { return o->stages * train_chunks(o); }

int train_schedule_steps(const nb_train_options *o) {
    return o->steps * (o->pipeline == NB_PIPE_PIPEDREAM ? replica_microbatches(o) : 1);
}

/* --data-parallel D > 1: the step's micro-batches split evenly, and a way to run the replicas. */
static int check_replicas(const nb_train_options *o) {
    const int D = o->data_parallel;
    if (D == 1) return 0;
    if (o->microbatches % D)
        return nb_fail("--microbatches %d does not divide across --data-parallel %d replicas: expected a multiple of %d "
                       "(each replica takes M / D of a step's micro-batches)", o->microbatches, D, D);
    if (o->pipeline >= 0 && o->transport != NB_TRANSPORT_MPI)
        return nb_fail("--data-parallel %d with --transport threads: run the replicas as MPI ranks (mpirun -np %lld "
                       "... --transport mpi), or leave --pipeline out (one process computes the replicas' groups in "
                       "turn, ending on the same weights)", D, (long long)D * o->stages);
    return 0;
}

int train_check_options(const nb_train_options *o, int T) {
    /* Every flag's range (the settings table), then what depends on other values. */
    if (nb_settings_check(o) || check_replicas(o)) return -1;
    if (T < 1 || T > o->model.context)
        return nb_fail("--seq %d: expected 1 <= seq <= the model's context (%d)", T, o->model.context);
    if (nb_config_check_batch(&o->model, o->batch, T)) return -1;
    if (nb_schedule_validate(&o->schedule) || nb_optim_validate(&o->optim)) return -1;
    if (!o->train_pattern) return nb_fail("no training data given");
    if (o->save_every > 0 && !o->save_dir) return nb_fail("--save-every needs --save-dir");
    if (o->keep > 0 && o->save_every <= 0) return nb_fail("--keep needs --save-every");
    if (o->resume_override && !o->resume_dir) return nb_fail("--override needs --resume");
    if (o->export_dir && o->model.n_experts > 0 && o->model.moe_every != 1)
        return nb_fail("--export %s: a mixture of experts with moe_every = %d has no Hugging Face architecture "
                       "(Mixtral's blocks are all MoE blocks: moe_every = 1)", o->export_dir, o->model.moe_every);
    return 0;
}
