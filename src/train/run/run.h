/* Internal: the rules every run follows, whoever drives it (run_rules.c, and run_folder.c, data_dir.c,
 * fault.c beside it): option checks, the run's folders, divergence, --keep's proof, stopping, the data
 * folder. What a run writes as it goes (metrics.jsonl, summary.json) is train/outputs/outputs.h's. */
#ifndef NB_TRAIN_RUN_RUN_H
#define NB_TRAIN_RUN_RUN_H
#include <stdio.h>
#include "nobubble/data.h"
#include "nobubble/train.h"
#include "util/fs.h"

int train_check_options(const nb_train_options *o, int T);
/* The batches an evaluation of `asked` reads from the validation loader l (B x T windows of pattern): at
 * most what l holds, so that every window counts once (more would count its first windows again, a loss
 * over fewer distinct tokens than it reports). A cut is said on stderr when say, naming flag. */
int train_eval_batches(const nb_loader *l, int asked, int B, int T, const char *flag, const char *pattern, int say);
/* --data-parallel (docs/data-parallel.md): whether the replicas are MPI ranks (D > 1 on an MPI pipeline; else
 * one process computes their groups in turn); the micro-batches per step of a process's schedule (the
 * step's, or one replica's share where the replicas are ranks; 1 under --pipeline pipedream); the schedule's
 * steps (--steps, times a replica's micro-batches per step under --pipeline pipedream: an update each). */
int train_replicas_are_ranks(const nb_train_options *o);
/* Whether the replicas' sum of the gradient goes in buckets started during the backward (--dp-bucket-mib > 0,
 * replicas as MPI ranks, a schedule of whole backwards: not ZB-H1's split one). */
int train_dp_buckets(const nb_train_options *o);
int train_schedule_microbatches(const nb_train_options *o);
/* Model chunks per worker: --chunks (0: 2) under --pipeline interleaved, else 1. */
int train_chunks(const nb_train_options *o);
/* The parts the model is split into: stages x chunks (an interleaved run's virtual stages), else stages. */
int train_model_stages(const nb_train_options *o);
int train_schedule_steps(const nb_train_options *o);
/* Checkpoints: "checkpoint saved DIR: size in time"; a failed save's message (nb_fail), naming the
 * previous checkpoint ("" when none); removing this run's periodic checkpoints beyond --keep. */
void train_report_checkpoint(const char *what, const char *dir, double seconds);
void train_save_failed(const char *dir, const char *previous);
void train_prune_checkpoints(const nb_train_options *o, int saved_step, int every);
/* The steps of dir's checkpoint folders (step_NNNNNN, as a run names them), newest first (malloc'ed into
 * *steps, NULL when none); their count, 0 when dir holds none or is no folder. */
int train_list_steps(const char *dir, long **steps);
/* Divergence (docs/checkpoints.md, "A run that diverges"): a step whose loss, gradient norm or update is
 * not finite stops the run before that step's update is applied (or, for the update, before anything
 * is saved), and no non-finite weights are ever saved, so every checkpoint on disk is a good one.
 * train_diverged fails (nb_fail) naming the step (1-based, as progress lines count) and what became
 * non-finite. Weights can be finite and still give a non-finite validation loss, and a delayed step runs
 * on older weights than the newest, so the newest checkpoint is not always a good one to resume from:
 * train_checkpoints says which proved good (--keep's proof). */
typedef struct {
    char good[4200];      /* the newest checkpoint whose weights proved finite (--keep's proof), "" when none */
    char unproven[2048];  /* the ones saved after it, not proven: "A, B" ("" when none) */
    int validated;        /* the proof is a finite validation loss (else a finite step on the weights) */
} train_checkpoints;
int train_diverged(int step, const char *what, double value);
#define TRAIN_DIVERGED_SAYS "the run stopped before applying that step"
/* Once the run has stopped (every thread joined, so that nothing is proven or pruned any more), the
 * advice a divergence's message ends with: the checkpoint to resume from and those not to. Appended to
 * nb_last_error() when it is a divergence's (of this process or of a stage whose failure it carries). */
void train_diverged_advice(const train_checkpoints *saved);
/* Test hook (NB_TRAIN_FAULT=WHERE:STEP): SIGKILL at a named point of the run; fault.c and its callers name them. */
void train_fault_point(const char *where, int step);
/* --keep prunes only behind proof: a checkpoint counts toward the newest K once a step has run on its
 * weights with a finite loss and gradient, or, with validation data, once its validation loss was
 * finite (training batches can be finite where validation ones are not), so a run that diverges right
 * after a save keeps the good checkpoints before it. `version`: the oldest weight version the latest
 * finite step ran on (step - tau), or the step just saved when its validation loss was finite;
 * *proven: the newest proven checkpoint so far (0 at the start), updated. */
void train_weights_proven(const nb_train_options *o, int version, int *proven);
/* Whether the validation loss is measured after step `step` (when there is validation data): at the
 * end, every --eval-every steps, and with --keep at every periodic checkpoint, whose proof it is. */
int train_evaluates(const nb_train_options *o, int step, int last);
/* The folders a run writes: their locks (locks[0] --save-dir, locks[1] --out, locks[2] --export) and, for
 * each, its path and the highest folder of that path the run created (made[i], NULL where the path existed). */
enum { TRAIN_FOLDERS = 3 };
typedef struct {
    nb_fs_lock locks[TRAIN_FOLDERS];
    char *paths[TRAIN_FOLDERS], *made[TRAIN_FOLDERS];
} train_folders;
void train_folders_init(train_folders *f);
/* Creates the folders the run writes (--save-dir, --out, --export) and takes their locks (.nobubble.lock,
 * held for the run's life; nb_fs_lock_dir): a second run naming any of them is refused (--export is written
 * only at the end, so without its lock another run could write a model there in between, and this run's
 * export would replace it unseen). Then checks them again
 * (nb_train_check_folders, and under --resume that --out holds nothing or the run it continues), removing
 * nothing yet. train_unlock_run releases the locks (safe on a failed or absent lock); after a run that
 * failed (failed != 0) it removes the folders this run created where they are still empty, so that a
 * refused run leaves nothing behind. */
int train_lock_run(const nb_train_options *o, train_folders *f);
void train_unlock_run(train_folders *f, int failed);
int train_check_held_folders(const nb_train_options *o);
/* Under --force, the earlier run's files go: called once the run has loaded everything it needs (data,
 * weights, checkpoint) and before it writes anything, so that a run refused before then leaves them. */
int train_claim_folders(const nb_train_options *o);
/* Whether SIGINT/SIGTERM asked the run to stop (nb_train_request_stop). */
int train_stop_requested(void);
/* The request answered: nb_train clears it when it returns (nb_train_request_stop). */
void train_stop_consume(void);

/* data_dir.c: the facts of a run's data folder. With no train pattern: the folder's (data_dir, else
 * NB_TRAIN_DEFAULT_DATA) training and validation shards (prepare's numbered ones, else llm.c's single
 * files; no validation when it has none, said on stderr), into g, which must outlive the run; and, with
 * vocab_from_data, the vocabulary of its tokenizer.json. Fails naming the folder when data_dir comes
 * with a train pattern, when its tokenizer does not load, or when it has more tokens than an imported
 * model's vocabulary. */
typedef struct {
    char train[4200], val[4200];
} train_data_globs;
int train_resolve_data(nb_train_options *o, train_data_globs *g);
/* After a run with an export: the data folder's tokenizer.json and tokenizer_config.json beside the
 * exported model (and its end-of-text token in the model's config where it is not the last id), so that
 * `nobubble sample` finds them; *copied says whether there was one. */
int train_export_tokenizer(const nb_train_options *o, int *copied);
#endif
