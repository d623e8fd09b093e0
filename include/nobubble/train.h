/* nobubble: the trainer. One process runs the model's stages in sequence: M micro-batches of
 * B sequences are accumulated per optimizer step, in micro-batch order 0..M-1, each
 * contributing 1/M of its mean-loss gradient (a pipeline must reproduce exactly this sum).
 * Each stage runs on the weight version its delay gives (delay.h): a one-process simulation of
 * what a PipeDream or PipeDream-2BW pipeline computes. */
#ifndef NOBUBBLE_TRAIN_H
#define NOBUBBLE_TRAIN_H
#include <stddef.h>
#include <stdint.h>
#include "nobubble/delay.h"
#include "nobubble/model.h"
#include "nobubble/optim.h"

/* The ranges nb_train checks before it allocates or runs anything (docs/limits.md lists every flag's):
 * steps, warmup, eval/log/save intervals and the sync phases up to NB_TRAIN_MAX_STEPS; batch 1 to
 * NB_TRAIN_MAX_BATCH sequences; micro-batches per step and eval batches 1 to NB_TRAIN_MAX_MICROBATCHES;
 * stages 1 to NB_TRAIN_MAX_STAGES (the executor keeps per-stage tables of that size on the stack);
 * and a micro-batch's largest activation, batch x seq x max(vocab_size, d_ffn, d_model) values, at most
 * NB_TRAIN_MAX_ACT_VALUES (2^31 - 1: GEMM dimensions are 32-bit; 8 GiB of floats). */
#define NB_TRAIN_MAX_STEPS 100000000
/* The resolved configuration a run writes into its --out folder (train --config reads it back). */
#define NB_TRAIN_CONFIG_FILE "train_config.json"
/* The data folder of a run that names none (train's default --data). */
#define NB_TRAIN_DEFAULT_DATA "data/bible"
#define NB_TRAIN_MAX_BATCH 65536
#define NB_TRAIN_MAX_MICROBATCHES 4096
#define NB_TRAIN_MAX_STAGES 1024
#define NB_TRAIN_MAX_ACT_VALUES 2147483647LL

/* One step of a run as the executor timed it (nb_train_options.step_times: what `nobubble bench`
 * reports). */
typedef struct nb_step_time {
    double wall;    /* seconds from the end of the step before (the run's start for its first) to the end of
                       this one, evaluation and checkpoints excluded: the time metrics.jsonl's tokens_per_s
                       is of */
    double update;  /* seconds of the step's GRADS and APPLY actions (the tied sum, Taylor, the gradient norm,
                       clipping, the optimizer's step, the delay's apply, the update's norm), every stage's
                       summed */
    double gemm;    /* seconds inside the products (nb_gemm_timing's count, src/backend/backend.h) of the
                       stages in this process */
    double routing; /* a mixture of experts: seconds of its layers outside their products (routing, grouping,
                       the weighted sums; nb_routing_seconds), counted like gemm; 0 for a dense model */
} nb_step_time;

typedef struct nb_train_options {
    nb_config model;
    int stages;                 /* split of the model in this process (1) */
    const int *split;           /* blocks of each of the stages (NULL: an even split, earlier stages
                                   taking the remainder); any split gives the same weights */
    const char *data_dir;       /* a folder made by `prepare` (or llm.c's shards): when train_pattern is NULL, its
                                   training and validation shards; with vocab_from_data, its tokenizer's
                                   vocabulary; with export_dir, its tokenizer beside the export. NULL and no
                                   train_pattern: NB_TRAIN_DEFAULT_DATA. As `train --data DIR` does */
    int vocab_from_data;        /* 1 (the default): the model's vocab_size is the data folder's tokenizer's,
                                   when it has one; 0: model.vocab_size as given (--set vocab_size=N) */
    const char *train_pattern;  /* glob of training shards (NULL: data_dir's) */
    const char *val_pattern;    /* glob of validation shards (NULL: data_dir's, or no evaluation) */
    int batch;                  /* B sequences per micro-batch (8) */
    int seq_len;                /* T tokens per sequence (0: the model's context) */
    int microbatches;           /* M micro-batches per optimizer step (1) */
    int steps;                  /* optimizer steps (100) */
    nb_optim_params optim;      /* AdamW with weight decay 0.1 by default */
    nb_schedule schedule;       /* lr 1e-3, lr_min 0, warmup 0, cosine; total_steps = steps */
    float aux_lr;               /* embed and gain tensors under Muon, NorMuon, SOAP, MARS (1e-3); scheduled
                                   like lr: aux_lr x lr_t / lr */
    float clip;                 /* global gradient-norm clipping over all stages (0: off) */
    nb_delay_options delay;     /* which weight versions forward/backward use, and mitigations (sync) */
    int eval_every;             /* evaluate every N steps and at the end (0: only at the end) */
    int eval_batches;           /* validation micro-batches per evaluation (8) */
    int log_every;              /* progress line every N steps (10) */
    uint64_t seed;              /* weights (1) */
    uint64_t data_seed;         /* order of training windows (0: sequential) */
    const char *out_dir;        /* metrics.jsonl and summary.json (NULL: none) */
    const char *export_dir;     /* the final weights as a Hugging Face folder (NULL: none) */
    const char *tensorboard_dir; /* the metrics also as TensorBoard event files there (NULL: none) */
    const char *save_dir;       /* checkpoints: save_dir/step_NNNNNN every save_every steps and at the end */
    int save_every;             /* (0: only at the end, when save_dir is given) */
    int keep;                   /* keep only the newest K checkpoints of this run (0: all) */
    const char *resume_dir;     /* a checkpoint folder to continue from (NULL: a fresh start) */
    int resume_override;        /* resume even when the configuration differs (a warning lists what); see
                                   docs/checkpoints.md for what may change without it */
    const char *init_from;      /* a Hugging Face folder whose weights start the run (step 0, fresh optimizer
                                   state; model must equal its config.json); with resume_dir, only the model
                                   comes from it (NULL: weights from seed) */
    int quiet;                  /* no progress lines */
    int force;                  /* start afresh where out_dir or save_dir holds an earlier run: its files
                                   are removed once the run has loaded what it needs (nb_train_check_folders;
                                   without it such a run is refused) */
    /* Real pipeline workers (docs/executor.md): one per stage of `stages`, running the
     * schedule's lowered actions and exchanging activations through a transport. Bitwise equal to the
     * one-process run with the schedule's delay (gpipe, 1f1b: sync; 2bw; pipedream), whatever the GEMM
     * threads of each (docs/executor.md, "Thread counts"; native bf16 matmuls: give both the same). */
    int pipeline;               /* an nb_pipe_kind, or -1: one process simulates the delay (-1) */
    int transport;              /* an nb_transport_kind (threads) */
    int chunks;                 /* --pipeline interleaved: model chunks (virtual stages) per worker, >= 2 (0: 2);
                                   the model is split into stages x chunks parts, worker s holding parts
                                   s, s + stages, ... (docs/schedules.md); 0 for every other kind */
    int data_parallel;          /* D replicas of the run (docs/data-parallel.md) (1): each step's `microbatches`
                                   (a multiple of D) split into D contiguous groups, one per replica, each group's
                                   gradient summed from zero and the D sums added in replica order before the
                                   update. On MPI (pipeline, transport mpi) D x stages ranks; in one process
                                   (no pipeline) the groups one after another, ending on the same weights; a
                                   threads pipeline refuses D > 1 */
    int threads_per_stage;      /* GEMM threads per worker (0: the process's cores / stages, at least 1) */
    nb_precision precision;     /* fp32, bf16, or auto (resolved by nb_train before it runs: bf16 where the
                                   CPU has bf16 instructions, fp32 elsewhere) (fp32) */
    const char *gemm;           /* the backend that runs the products (nobubble/backend.h: "tiles",
                                   "hybrid:widen", ...; NULL: the build's default); nb_train opens it */
    const char *device;         /* where the stages' memory is (nb_backend_open_device): "cpu" (NULL), "cuda",
                                   or "guarded" (the CPU behind a device's boundary, for checks) */
    float peer_timeout;         /* seconds a stage waits for a message before the run fails naming the
                                   stage it waited for: a stalled or vanished MPI rank (300; 0: no limit) */
    float dp_bucket_mib;        /* data parallelism over MPI: the gradient's sum over the replicas in buckets of
                                   about this many MiB, each started during the step's last backward once final,
                                   so that it moves while the backward computes; the same bits whatever the size
                                   (docs/data-parallel.md, "Buckets") (25; 0: one sum at REDUCE) */
    int memory_check;           /* refuse a run whose estimated memory exceeds what is available, before
                                   anything is allocated (nb_train_memory_estimate, nb_memory_check) (1) */
    nb_step_time *step_times;   /* NULL, or room for every step of the run (steps; x microbatches under
                                   pipedream): the process that reports the run writes each step's times
                                   there, and counts the time in products meanwhile (a process-wide count:
                                   one such run at a time) (NULL) */
} nb_train_options;

typedef struct nb_train_result {
    int steps;
    double final_train_loss;    /* mean over the last step's micro-batches */
    double final_val_loss;      /* NAN without validation data */
    double tokens_per_s;        /* training tokens / wall time of the steps (evaluation excluded) */
    double seconds;
    uint64_t weights_hash;      /* nb_model_weights_hash of the final weights */
    int primary;                /* this process reports the run (0 only on MPI ranks > 0, which hold
                                   one stage and leave the results above unset) */
    /* A run resumed from a checkpoint at its last step (or past it) trains nothing: */
    int already_complete;       /* its results were all there (summary.json, the export): nothing was
                                   read beyond the checkpoint's step, nothing written; steps is the
                                   checkpoint's, the results above are unset */
    int summary_rebuilt;        /* summary.json was missing (a kill after the final save): rebuilt from
                                   metrics.jsonl and the checkpoint's weights, nothing else changed */
    int tokenizer_exported;     /* the data folder's tokenizer went beside the export (export_dir) */
} nb_train_result;

/* The settings table's defaults (adamw's where they differ by optimizer) and the tiny model. */
void nb_train_defaults(nb_train_options *o);

/* The validation loss of a saved model (a Hugging Face folder), as training measures it: what `nobubble
 * eval` runs. The shards: val_pattern, else data_dir's (NB_TRAIN_DEFAULT_DATA) *_val_*.bin. */
typedef struct {
    const char *checkpoint;     /* model.safetensors + config.json (required) */
    const char *data_dir, *val_pattern;
    int batch, seq, batches;    /* B sequences of T tokens (0: the model's context), `batches` micro-batches */
    int memory_check;           /* refuse a model that does not fit the available memory (1) */
    const char *gemm;           /* the backend (NULL: the default) */
    const char *device;         /* where the model's memory is (nb_backend_open_device; NULL: the CPU's) */
} nb_eval_options;
typedef struct {
    double val_loss;            /* mean cross-entropy over the tokens */
    int tokens;
    char val_pattern[4200];     /* the shards read */
} nb_eval_result;
void nb_eval_defaults(nb_eval_options *o);   /* batch 8, batches 8, memory_check 1 */
int nb_eval(const nb_eval_options *o, nb_eval_result *r);

/* Text continued from a prompt by a saved model, token by token with a key/value cache: what `nobubble
 * sample` runs. The tokenizer: `tokenizer`, else the folder's tokenizer.json, else
 * NB_TRAIN_DEFAULT_DATA's. Greedy at temperature 0, else softmax(logits / T) over the top k from a seeded
 * generator (the same seed, the same text). Each generated token's bytes go to on_text (may be NULL) as
 * they come; generation stops at the end-of-text token. */
typedef struct {
    const char *checkpoint, *prompt, *tokenizer;
    int tokens, top_k;          /* at most `tokens` new tokens (64); top_k 0: all (40) */
    float temperature;          /* (0.8) */
    uint64_t seed;              /* (1) */
    int memory_check;           /* (1) */
    const char *gemm;           /* the backend (NULL: the default) */
    void (*on_text)(const char *bytes, size_t n, void *ctx);
    void *ctx;
} nb_sample_options;
typedef struct {
    int generated;              /* tokens generated (the end-of-text token not counted) */
    int refused;                /* on failure: 1 when the input was refused (a usage error), 0 for a failure */
} nb_sample_result;
void nb_sample_defaults(nb_sample_options *o);
int nb_sample(const nb_sample_options *o, nb_sample_result *r);

/* Saved files checked before they are needed, as a resume, eval or import reads them: what `nobubble
 * verify` runs. path: a .safetensors file (its header, the header's checksum and every tensor's, each
 * tensor read whole), a checkpoint or export folder (each safetensors file in it, sharded through its
 * index; its config.json as eval reads it; its model loaded as eval loads it, every name and shape), or a
 * save folder (each of its step_NNNNNN checkpoints, oldest first, as a resume names them); a folder that is
 * none of these (a run's --out, a folder of runs) is searched for them at any depth (links not followed).
 * report is called once for each file and folder checked, with failure NULL and what was checked when it
 * passed, else with why it failed; nothing stops at a failure. */
typedef struct {
    const char *path;
    int memory_check;           /* refuse to load a model that does not fit the available memory (1); the
                                   files are still read */
    void (*report)(void *ctx, const char *path, const char *failure, const char *what);
    void *ctx;
} nb_verify_options;
void nb_verify_defaults(nb_verify_options *o);   /* memory_check 1 */
/* The number of failures reported (0: everything passed). */
int nb_verify(const nb_verify_options *o);

/* A run described by train's flags as text (for bindings, e.g. the Python package): nb_run_new gives the
 * defaults; nb_run_set(r, "--lr", "3e-3") applies one flag through the settings table (value NULL for a
 * flag without one), "--model NAME" resets the model to a preset (give it first), "--set FIELD=VALUE"
 * changes one model field, "--data DIR" is data_dir (its tokenizer's vocabulary unless --set vocab_size is
 * given); errors name the flag. nb_run_train resolves what depends on the flags (per-optimizer defaults,
 * --resume latest|auto and a save folder's newest checkpoint, the folders' earlier runs) and trains, as
 * `nobubble train` does. One nb_run_train per run. */
typedef struct nb_run nb_run;
nb_run *nb_run_new(void);
int nb_run_set(nb_run *r, const char *flag, const char *value);
int nb_run_train(nb_run *r, nb_train_result *res);
const nb_train_options *nb_run_options(nb_run *r);
void nb_run_free(nb_run *r);
/* The validation loss as training reports it, of a model of one stage (as `nobubble eval` loads it):
 * the loader reset, then the mean over `batches` micro-batches of their mean cross-entropy, on the
 * current weights, each batch computed by the stage role's own evaluation (src/train/exec/worker.c)
 * (inputs and targets: room for one micro-batch; acts: a slot of that shape). */
struct nb_loader;
int nb_evaluate(nb_model *m, nb_acts *acts, struct nb_loader *val, int batches, int *inputs, int *targets,
                double *loss);
/* Asks a running nb_train to stop after the current step, saving a checkpoint first when it has a
 * save_dir. Thread-safe and async-signal-safe; the CLI calls it from a thread that takes the stop
 * signals with sigwait (a handler interrupting oneDNN's GEMM can corrupt memory: util/signals.h).
 * nb_train then fails with a message saying where it stopped. The request applies to the run in progress,
 * or to the next one when none is; each nb_train consumes it when it returns, so that a later run of the
 * same process is not stopped by it. */
void nb_train_request_stop(void);

/* ---- memory ----
 * What a process of a run needs, estimated from its options alone (the model's layout, the optimizer's
 * rules, the delay, the schedule's activation slots) before anything large is allocated, so that a run
 * that cannot fit is refused in milliseconds instead of being killed by the kernel minutes later. Its
 * accuracy against measured peaks is in docs/limits.md ("Memory"). All figures in bytes. */
typedef struct nb_memory_estimate {
    double weights;       /* fp32 weights */
    double gradients;     /* gradients, the update d, tied-embedding gradient buffers */
    double optimizer;     /* the optimizer's state and its per-thread scratch */
    double versions;      /* weight versions kept for delayed steps, the EF buffer, bf16 copies */
    double activations;   /* activation slots: one per micro-batch in flight, and the evaluation's */
    double scratch;       /* stages' scratch, message buffers, RoPE tables, the key/value cache */
    double runtime;       /* the process itself: libraries, threads, loaders (a measured constant) */
    double total;         /* the sum: one process */
    int processes;        /* processes of the run on this machine, each needing about `total` (MPI ranks
                             on the node, else 1) */
    double available;     /* set by nb_memory_check: what the machine has left (INFINITY: unknown) */
    char available_source[160];  /* ... and where that figure comes from ("MemAvailable", ...) */
} nb_memory_estimate;
/* A training run's process (nb_train's; an MPI rank: its largest stage's). */
int nb_train_memory_estimate(const nb_train_options *o, nb_memory_estimate *e);
/* Inference on one stage: the weights, a B x T activation slot and its scratch for a forward (B = 0:
 * none), a key/value cache of kv_len positions (0: none). What eval, sample and export hold. */
int nb_infer_memory_estimate(const nb_config *c, int B, int T, int kv_len, nb_memory_estimate *e);
/* Fills e->available and refuses (nb_fail) when processes x total exceeds it: "the model needs about
 * 27.3 GiB (weights 5.1, ...) and 21.9 GiB is available (MemAvailable); use OVERRIDE to run anyway". */
int nb_memory_check(nb_memory_estimate *e, const char *override);
/* "about 1.2 GiB (weights 0.3, gradients 0.6, ...)" into buf. */
void nb_memory_describe(const nb_memory_estimate *e, char *buf, size_t size);
int nb_train(const nb_train_options *o, nb_train_result *r);

/* Whether the folders the run writes may be used: out_dir or save_dir holding an earlier run
 * (summary.json, metrics.jsonl, NB_TRAIN_CONFIG_FILE, an hf/ export, step_NNNNNN checkpoints) is an
 * error naming it, unless resume_dir (the run continues) or force (nb_train removes those once it has
 * loaded what it needs, before it writes). nb_train checks again, and with resume_dir refuses an out_dir
 * whose NB_TRAIN_CONFIG_FILE is another computation's (unless force); a run it refuses leaves no folder
 * it created. */
int nb_train_check_folders(const nb_train_options *o);
/* --resume latest and --resume auto, into a folder: latest is save_dir (whose newest complete checkpoint
 * nb_train_find_checkpoint then picks), an error when it holds none; auto is the same when save_dir holds
 * a checkpoint, else no resume (a fresh start). Any other resume_dir is left as it is (a folder named
 * "latest" is ./latest). Needs save_dir. */
int nb_train_resolve_resume(nb_train_options *o);
/* What `train` resolves before it starts, for any caller of nb_train: --resume latest|auto
 * (nb_train_resolve_resume), then --resume's checkpoint (nb_train_find_checkpoint, into resume_path,
 * which resume_dir then points to; a note on stderr when it is not the folder given), then the folders'
 * earlier runs (nb_train_check_folders). */
int nb_train_resolve_folders(nb_train_options *o, char *resume_path, size_t size);
/* The checkpoint --resume DIR means, into out: DIR itself when it is a checkpoint folder (or not a
 * save folder at all: loading it then says what is wrong); for a save folder (--save-dir, holding
 * step_NNNNNN folders) its newest complete and readable checkpoint, each newer one skipped with a
 * line on stderr saying why. None usable: an error naming DIR. */
int nb_train_find_checkpoint(const char *dir, char *out, size_t size);
/* A save folder's newest checkpoint that a resume can load, for a caller that chooses between resuming
 * and starting afresh (the CLI gives it to nobubble sweep): 1 with its folder in out and its step in
 * *step; 0 when dir holds none (or does not exist). Each newer step_NNNNNN folder passed over is
 * reported to skipped (may be NULL) with why. With verify, every tensor of the state is also read and
 * checked against its checksum, so that a corrupt checkpoint is passed over here rather than failing
 * the resumed run. */
typedef void (*nb_train_skip_fn)(void *ctx, const char *folder, const char *why);
int nb_train_latest_checkpoint(const char *dir, int verify, char *out, size_t size, long *step,
                               nb_train_skip_fn skipped, void *ctx);

/* ---- the settings of a training run, as one table (src/train/settings/settings.c) ----
 *
 * Every setting of `nobubble train` is one row: its name, its flag, its type, where it lives in
 * nb_train_options, its default (the run's optimizer's, from its descriptor, for the optimizer's
 * hyperparameters), its range, its help line, what a resume may do with it, and its keys in
 * summary.json and in a checkpoint's run metadata. The flag parser, --help, nb_train_defaults, the
 * range checks of nb_train, summary.json and the checkpoint's "run.KEY" metadata all walk this table
 * (src/train/settings/settings*.c), so a setting is added or changed in one place. What the parts below own
 * is read from them: enum names, the optimizers' defaults and the ranges of the optimizer's, the
 * schedule's and the delay's numbers. Model fields are rows too (no flag of their own: `--set
 * NAME=VALUE`, validated by nb_config_validate, which config.json shares). */
typedef enum {
    NB_SET_INT,      /* int */
    NB_SET_U64,      /* uint64_t */
    NB_SET_FLOAT,    /* float */
    NB_SET_DOUBLE,   /* double (model fields) */
    NB_SET_BOOL,     /* int 0/1: the flag sets 1, its off_flag 0; summary true/false */
    NB_SET_STRING,   /* const char * (NULL: none) */
    NB_SET_ENUM,     /* an int-sized enum, by name; -1 (when the default) means none */
    NB_SET_DELAY,    /* nb_delay_options' mode and tau: "sync" | "2bw" | "pipedream" | "fixed:TAU" */
    NB_SET_EF,       /* nb_delay_options' ef and ef_alpha: --ef ALPHA turns error feedback on */
} nb_setting_type;

/* What a run resumed from a checkpoint may do with a setting that differs from the checkpoint's:
 *   FIXED     never (it shapes the saved tensors: the model's shape, the optimizer);
 *   OVERRIDE  only with --override, which prints a warning naming it (what the run computes);
 *   FREE      anything (not compared);
 *   SPLIT     free, except under --delay pipedream, where it is OVERRIDE (the stages: stage s of a
 *             PipeDream run computes on weights P-1-s steps old; any other split is bitwise equal). */
typedef enum { NB_RESUME_FIXED, NB_RESUME_OVERRIDE, NB_RESUME_FREE, NB_RESUME_SPLIT } nb_resume_policy;

typedef struct nb_setting {
    const char *name;          /* "lr"; model fields: their --set name */
    const char *flag;          /* "--lr"; NULL: none of its own (model fields, parts of another flag) */
    const char *off_flag;      /* NB_SET_BOOL: the flag that sets 0 ("--no-nesterov"), or NULL */
    nb_setting_type type;
    size_t offset;             /* offsetof(nb_train_options, ...) */
    const char *(*names)(int value);  /* NB_SET_ENUM: the name of value 0, 1, ..., NULL past the last: the
                                         owning part's one table (nb_optimizer_names, nb_transport_names, ...) */
    double def;                /* the default (an enum's value; strings: none); by_optimizer rows: unused */
    int by_optimizer;          /* 1: the default is the run's optimizer's (its descriptor, optim.h: --lr's is its
                                  lr, any other its defaults' field the row sets), applied when not given */
    double min, max;           /* the range (numbers, --ef); min > max: none, or the owning part's: the fields
                                  of nb_optim_params and --ef's and --taylor's have theirs in nb_optim_ranges and
                                  nb_delay_ranges (nb_setting_range reads either) */
    int min_open, max_open;    /* 1: that end is excluded, "(0..1e+09]" */
    const char *metavar;       /* "LR" */
    const char *help;          /* "peak learning rate" */
    const char *zero_means;    /* what 0 means ("the model's context"), shown by --help, or NULL */
    nb_resume_policy resume;
    const char *checkpoint_key;  /* "lr" for metadata "run.lr", or NULL: not recorded */
    const char *unrecorded;      /* the value of a checkpoint written before this row existed ("fp32"), or
                                    NULL: such a checkpoint differs */
    const char *summary_key;     /* "run.lr": SECTION.KEY in summary.json, or NULL: not written */
} nb_setting;

extern const nb_setting nb_settings[];
extern const int nb_settings_count;
enum { NB_SETTINGS_MAX = 96 };

/* The row with this flag (or off_flag); NULL when none. */
const nb_setting *nb_setting_by_flag(const char *flag);
/* The row with this name; NULL when none. */
const nb_setting *nb_setting_by_name(const char *name);
/* The row's range into r (its own, or the part's that owns its field); 0 when it has none. */
int nb_setting_range(const nb_setting *s, nb_range *r);
/* Whether the row has a range to check. */
int nb_setting_has_range(const nb_setting *s);

/* Parsing a run's flags: nb_train_defaults, then one call per flag, then nb_settings_finish. */
typedef struct {
    nb_train_options *o;
    unsigned char given[NB_SETTINGS_MAX];   /* by row: given on the command line (1) or by --config (2) */
} nb_settings_args;
void nb_settings_begin(nb_settings_args *a, nb_train_options *o);
/* Applies `flag VALUE` (value NULL for a boolean flag). Fails (nb_fail) naming the flag, the value and
 * what was expected: "--batch 0: out of range, expected an integer from 1 to 65536". */
int nb_settings_arg(nb_settings_args *a, const char *flag, const char *value);
/* The defaults that depend on other settings: per-optimizer values of the rows not given (--lr,
 * --beta1, ...), and --pipeline's delay (an explicit --delay must agree with it). */
int nb_settings_finish(nb_settings_args *a);

/* train --config FILE: a JSON object of settings, keyed by a flag's name without "--" ("lr", "aux-lr";
 * the row's name "aux_lr" too) or a model field ("n_layers"), each value of its row's type (integers,
 * numbers, true/false, strings; a u64 also as a string of digits). Each is applied as its flag would be
 * (the same range checks), marking the row given by the file (given 2: a flag given afterwards
 * overrides it). Model fields are kept as "FIELD=VALUE" for the caller to apply after the model's
 * preset, as --set's. Errors name the file, the key and what was expected; unknown keys, duplicate
 * keys and other types are refused. The handle owns the strings string settings point to: free it
 * after the run. nb_settings_parse_config reads text (name: how errors call it). */
typedef struct nb_train_config_file nb_train_config_file;
int nb_settings_read_config(nb_settings_args *a, const char *path, nb_train_config_file **out);
int nb_settings_parse_config(nb_settings_args *a, const char *text, size_t n, const char *name,
                             nb_train_config_file **out);
int nb_train_config_model_count(const nb_train_config_file *f);
const char *nb_train_config_model_set(const nb_train_config_file *f, int i);
void nb_train_config_free(nb_train_config_file *f);

/* The --help line of a row (without the flag): "LR     peak learning rate (adamw 0.001, ...) (0..1e+09]". */
void nb_setting_help(const nb_setting *s, char *buf, size_t size);
/* The value as text, the way a checkpoint records it ("0.001", "fixed:2", "off", "1"). */
void nb_setting_format(const nb_setting *s, const nb_train_options *o, char *buf, size_t size);
/* Checks every row with a range and a flag against it (what the parser checks, for callers of
 * nb_train that fill the options themselves); the error names the flag like the parser's. */
int nb_settings_check(const nb_train_options *o);
#endif
