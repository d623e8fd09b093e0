/* The table of a training run's settings (train.h, "the settings of a training run") and the
 * defaults it gives. The parser, --help, the checks, summary.json and the checkpoint's run metadata
 * walk it (settings_parse.c, summary.c, run_fields.c). What the parts below train own is read from them,
 * not written again here: the names of enum values (each part's one table), the optimizers' defaults
 * (their descriptors, optim.h) and the ranges of the optimizer's, the schedule's and the delay's numbers
 * (nb_optim_ranges, nb_schedule_ranges, nb_delay_ranges; nb_setting_range). */
#include <stddef.h>
#include <string.h>
#include "nobubble/pipeline.h"
#include "nobubble/runtime.h"
#include "nobubble/train.h"
#include "train/settings/settings_value.h"

#define AT(field) offsetof(nb_train_options, field)
#define STEPS ((double)NB_TRAIN_MAX_STEPS)

/* Shorthands for the rows: a model field, an integer in [lo, hi], a number in [lo, hi]. */
#define MODEL_FIELDS(n, t, pol) \
    .name = #n, .type = t, .offset = AT(model.n), .min = 1, .max = 0, .resume = pol, .checkpoint_key = #n, \
    .summary_key = "model." #n
#define MODEL(n, t, pol) {MODEL_FIELDS(n, t, pol)}
#define INT_RANGE(lo, hi) .type = NB_SET_INT, .min = (lo), .max = (hi)
#define NUM_RANGE(lo, hi) .type = NB_SET_FLOAT, .min = (lo), .max = (hi)
#define NO_RANGE .min = 1, .max = 0
/* A number whose range the part owning its field keeps (nb_setting_range finds it). */
#define PART_RANGE(t) .type = t, NO_RANGE
/* An optimizer's hyperparameter: its default is the run's optimizer's, its range nb_optim_ranges'. */
#define BY_OPTIMIZER(t) PART_RANGE(t), .by_optimizer = 1

const nb_setting nb_settings[] = {
    /* The model: its shape fixes the saved tensors' sizes; context, rope theta and the norm's epsilon
     * do not (they change what the weights compute, so they may change only with --override). */
    MODEL(vocab_size, NB_SET_INT, NB_RESUME_FIXED),
    MODEL(d_model, NB_SET_INT, NB_RESUME_FIXED),
    MODEL(n_layers, NB_SET_INT, NB_RESUME_FIXED),
    MODEL(n_heads, NB_SET_INT, NB_RESUME_FIXED),
    MODEL(n_kv_heads, NB_SET_INT, NB_RESUME_FIXED),
    MODEL(d_ffn, NB_SET_INT, NB_RESUME_FIXED),
    MODEL(context, NB_SET_INT, NB_RESUME_OVERRIDE),
    MODEL(rope_theta, NB_SET_DOUBLE, NB_RESUME_OVERRIDE),
    MODEL(norm_eps, NB_SET_DOUBLE, NB_RESUME_OVERRIDE),
    MODEL(tied, NB_SET_BOOL, NB_RESUME_FIXED),
    /* Mixture of experts: the experts and where they are fix the tensors; how many a token uses and the
     * auxiliary loss's weight change only what is computed. A checkpoint from before them is dense. */
    {MODEL_FIELDS(n_experts, NB_SET_INT, NB_RESUME_FIXED), .unrecorded = "0"},
    {MODEL_FIELDS(experts_per_token, NB_SET_INT, NB_RESUME_OVERRIDE), .unrecorded = "0"},
    {MODEL_FIELDS(moe_every, NB_SET_INT, NB_RESUME_FIXED), .unrecorded = "0"},
    {MODEL_FIELDS(aux_coef, NB_SET_DOUBLE, NB_RESUME_OVERRIDE), .unrecorded = "0"},

    /* The run's shape. */
    {.name = "stages", .flag = "--stages", INT_RANGE(1, NB_TRAIN_MAX_STAGES), .offset = AT(stages), .def = 1, .metavar = "P",
     .help = "split the model into P stages", .resume = NB_RESUME_SPLIT, .checkpoint_key = "stages",
     .summary_key = "run.stages"},
    {.name = "batch", .flag = "--batch", INT_RANGE(1, NB_TRAIN_MAX_BATCH), .offset = AT(batch), .def = 8,
     .metavar = "B", .help = "sequences per micro-batch", .resume = NB_RESUME_OVERRIDE, .checkpoint_key = "batch",
     .summary_key = "run.batch"},
    {.name = "seq", .flag = "--seq", INT_RANGE(0, 1048576), .offset = AT(seq_len), .def = 0, .metavar = "T",
     .help = "tokens per sequence", .zero_means = "the model's context", .resume = NB_RESUME_OVERRIDE,
     .checkpoint_key = "seq", .summary_key = "run.seq_len"},
    {.name = "microbatches", .flag = "--microbatches", INT_RANGE(1, NB_TRAIN_MAX_MICROBATCHES),
     .offset = AT(microbatches), .def = 1, .metavar = "M", .help = "micro-batches accumulated per step",
     .resume = NB_RESUME_OVERRIDE, .checkpoint_key = "microbatches", .summary_key = "run.microbatches"},
    {.name = "steps", .flag = "--steps", INT_RANGE(1, STEPS), .offset = AT(steps), .def = 100, .metavar = "N",
     .help = "optimizer steps", .resume = NB_RESUME_FREE, .summary_key = "run.steps"},

    /* The optimizer and its schedule: the kind (and SOAP's largest preconditioned side) fixes which
     * buffers a checkpoint holds; the rest is what the run computes. */
    {.name = "optimizer", .flag = "--optimizer", .type = NB_SET_ENUM, NO_RANGE, .offset = AT(optim.kind),
     .names = nb_optimizer_names, .def = NB_OPT_ADAMW, .metavar = "NAME", .help = "the update rule",
     .resume = NB_RESUME_FIXED, .checkpoint_key = "optimizer", .summary_key = "run.optimizer"},
    {.name = "lr", .flag = "--lr", BY_OPTIMIZER(NB_SET_FLOAT), .offset = AT(schedule.lr), .metavar = "LR",
     .help = "peak learning rate", .resume = NB_RESUME_OVERRIDE, .checkpoint_key = "lr", .summary_key = "run.lr"},
    {.name = "aux_lr", .flag = "--aux-lr", NUM_RANGE(0, NB_RANGE_HUGE), .min_open = 1, .offset = AT(aux_lr),
     .def = 1e-3, .metavar = "LR", .help = "AdamW lr of embeddings and gains under muon, normuon, soap, mars",
     .resume = NB_RESUME_OVERRIDE, .checkpoint_key = "aux_lr", .summary_key = "run.aux_lr"},
    {.name = "lr_min", .flag = "--lr-min", PART_RANGE(NB_SET_FLOAT), .offset = AT(schedule.lr_min), .def = 0,
     .metavar = "LR", .help = "final learning rate of cosine and wsd (at most --lr)",
     .resume = NB_RESUME_OVERRIDE, .checkpoint_key = "lr_min", .summary_key = "run.lr_min"},
    {.name = "warmup", .flag = "--warmup", PART_RANGE(NB_SET_INT), .offset = AT(schedule.warmup), .def = 0,
     .metavar = "N", .help = "linear warmup steps", .resume = NB_RESUME_OVERRIDE, .checkpoint_key = "warmup",
     .summary_key = "run.warmup"},
    {.name = "schedule", .flag = "--schedule", .type = NB_SET_ENUM, NO_RANGE, .offset = AT(schedule.kind),
     .names = nb_schedule_names, .def = NB_SCHEDULE_COSINE, .metavar = "NAME", .help = "learning-rate schedule",
     .resume = NB_RESUME_OVERRIDE, .checkpoint_key = "schedule", .summary_key = "run.schedule"},
    {.name = "cooldown", .flag = "--cooldown", PART_RANGE(NB_SET_FLOAT), .offset = AT(schedule.cooldown), .def = 0.2,
     .metavar = "F", .help = "wsd: fraction of the steps spent decaying", .resume = NB_RESUME_OVERRIDE,
     .checkpoint_key = "cooldown", .summary_key = "run.cooldown"},
    {.name = "clip", .flag = "--clip", NUM_RANGE(0, NB_RANGE_HUGE), .offset = AT(clip), .def = 0, .metavar = "C",
     .help = "clip the global gradient norm to C", .zero_means = "off", .resume = NB_RESUME_OVERRIDE,
     .checkpoint_key = "clip", .summary_key = "run.clip"},
    {.name = "beta1", .flag = "--beta1", BY_OPTIMIZER(NB_SET_FLOAT), .offset = AT(optim.beta1), .metavar = "B1",
     .help = "beta1", .resume = NB_RESUME_OVERRIDE, .checkpoint_key = "beta1", .summary_key = "run.beta1"},
    {.name = "beta2", .flag = "--beta2", BY_OPTIMIZER(NB_SET_FLOAT), .offset = AT(optim.beta2), .metavar = "B2",
     .help = "beta2 (normuon: of its per-row second moment)", .resume = NB_RESUME_OVERRIDE,
     .checkpoint_key = "beta2", .summary_key = "run.beta2"},
    {.name = "beta3", .flag = "--beta3", BY_OPTIMIZER(NB_SET_FLOAT), .offset = AT(optim.beta3), .metavar = "B3",
     .help = "adan's beta3", .resume = NB_RESUME_OVERRIDE, .checkpoint_key = "beta3", .summary_key = "run.beta3"},
    {.name = "eps", .flag = "--eps", BY_OPTIMIZER(NB_SET_FLOAT), .offset = AT(optim.eps), .metavar = "EPS",
     .help = "epsilon", .resume = NB_RESUME_OVERRIDE, .checkpoint_key = "eps", .summary_key = "run.eps"},
    /* nobubble train's own default for every optimizer, not the sheet's 0 (docs/optimizers.md) */
    {.name = "wd", .flag = "--wd", PART_RANGE(NB_SET_FLOAT), .offset = AT(optim.weight_decay), .def = 0.1,
     .metavar = "WD", .help = "decoupled weight decay of matrices and embeddings (every optimizer)",
     .resume = NB_RESUME_OVERRIDE, .checkpoint_key = "wd", .summary_key = "run.wd"},
    {.name = "momentum", .flag = "--momentum", BY_OPTIMIZER(NB_SET_FLOAT), .offset = AT(optim.momentum),
     .metavar = "MU", .help = "sgd, muon and normuon momentum", .resume = NB_RESUME_OVERRIDE,
     .checkpoint_key = "momentum", .summary_key = "run.momentum"},
    {.name = "nesterov", .flag = "--nesterov", .off_flag = "--no-nesterov", BY_OPTIMIZER(NB_SET_BOOL),
     .offset = AT(optim.nesterov), .metavar = "", .help = "Nesterov momentum (--no-nesterov: plain)",
     .resume = NB_RESUME_OVERRIDE, .checkpoint_key = "nesterov", .summary_key = "run.nesterov"},
    {.name = "ns_steps", .flag = "--ns-steps", BY_OPTIMIZER(NB_SET_INT), .offset = AT(optim.ns_steps), .metavar = "N",
     .help = "muon and normuon Newton-Schulz iterations", .resume = NB_RESUME_OVERRIDE,
     .checkpoint_key = "ns_steps", .summary_key = "run.ns_steps"},
    {.name = "gamma", .flag = "--gamma", BY_OPTIMIZER(NB_SET_FLOAT), .offset = AT(optim.gamma), .metavar = "G",
     .help = "mars gradient-correction scale", .resume = NB_RESUME_OVERRIDE, .checkpoint_key = "gamma",
     .summary_key = "run.gamma"},
    {.name = "precond_every", .flag = "--precond-every", BY_OPTIMIZER(NB_SET_INT), .offset = AT(optim.precond_every),
     .metavar = "N", .help = "soap eigenbasis refresh interval", .resume = NB_RESUME_OVERRIDE,
     .checkpoint_key = "precond_every", .summary_key = "run.precond_every"},
    {.name = "max_precond_dim", .flag = "--max-precond-dim", BY_OPTIMIZER(NB_SET_INT),
     .offset = AT(optim.max_precond_dim), .metavar = "N", .help = "soap: larger sides are not preconditioned",
     .resume = NB_RESUME_FIXED,
     .checkpoint_key = "max_precond_dim", .summary_key = "run.max_precond_dim"},
    {.name = "aux_beta1", .flag = "--aux-beta1", BY_OPTIMIZER(NB_SET_FLOAT), .offset = AT(optim.aux_beta1),
     .metavar = "B1", .help = "beta1 of the auxiliary AdamW", .resume = NB_RESUME_OVERRIDE,
     .checkpoint_key = "aux_beta1", .summary_key = "run.aux_beta1"},
    {.name = "aux_beta2", .flag = "--aux-beta2", BY_OPTIMIZER(NB_SET_FLOAT), .offset = AT(optim.aux_beta2),
     .metavar = "B2", .help = "beta2 of the auxiliary AdamW", .resume = NB_RESUME_OVERRIDE,
     .checkpoint_key = "aux_beta2", .summary_key = "run.aux_beta2"},

    /* Seeds and data. */
    {.name = "seed", .flag = "--seed", .type = NB_SET_U64, .min = 0, .max = 18446744073709551615.0,
     .offset = AT(seed), .def = 1, .metavar = "S", .help = "weight initialization seed",
     .resume = NB_RESUME_OVERRIDE, .checkpoint_key = "seed", .summary_key = "run.seed"},
    {.name = "data_seed", .flag = "--data-seed", .type = NB_SET_U64, .min = 0, .max = 18446744073709551615.0,
     .offset = AT(data_seed), .def = 0, .metavar = "S", .help = "order of training windows",
     .zero_means = "sequential", .resume = NB_RESUME_OVERRIDE, .checkpoint_key = "data_seed",
     .summary_key = "run.data_seed"},
    {.name = "train", .flag = "--train", .type = NB_SET_STRING, NO_RANGE, .offset = AT(train_pattern),
     .metavar = "GLOB", .help = "training shards (instead of --data)", .resume = NB_RESUME_FREE,
     .summary_key = "run.train"},
    {.name = "val", .flag = "--val", .type = NB_SET_STRING, NO_RANGE, .offset = AT(val_pattern), .metavar = "GLOB",
     .help = "validation shards", .resume = NB_RESUME_FREE, .summary_key = "run.val"},
    {.name = "eval_every", .flag = "--eval-every", INT_RANGE(0, STEPS), .offset = AT(eval_every), .def = 0,
     .metavar = "N", .help = "validation loss every N steps, and at the end", .zero_means = "at the end only",
     .resume = NB_RESUME_FREE, .summary_key = "run.eval_every"},
    {.name = "eval_batches", .flag = "--eval-batches", INT_RANGE(1, NB_TRAIN_MAX_MICROBATCHES),
     .offset = AT(eval_batches), .def = 8, .metavar = "N", .help = "validation micro-batches per evaluation (at most what the split holds: each window once)",
     .resume = NB_RESUME_FREE, .summary_key = "run.eval_batches"},
    {.name = "log_every", .flag = "--log-every", INT_RANGE(1, STEPS), .offset = AT(log_every), .def = 10,
     .metavar = "N", .help = "progress line every N steps", .resume = NB_RESUME_FREE},

    /* The delay and its mitigations. --delay and --ef each set two fields; the rows without a flag
     * are their second halves, kept for summary.json's keys. */
    {.name = "delay", .flag = "--delay", .type = NB_SET_DELAY, NO_RANGE, .offset = AT(delay), .def = NB_DELAY_SYNC,
     .metavar = "MODE", .help = "the weight versions' delay, per stage of --stages",
     .resume = NB_RESUME_OVERRIDE, .checkpoint_key = "delay", .summary_key = "delay.mode"},
    {.name = "tau", .type = NB_SET_INT, NO_RANGE, .offset = AT(delay.tau), .def = 0, .resume = NB_RESUME_FREE,
     .summary_key = "delay.tau"},
    {.name = "ef", .flag = "--ef", PART_RANGE(NB_SET_EF), .offset = AT(delay), .def = 0,
     .metavar = "ALPHA", .help = "error feedback on the step (the paper's correction: 1)", .zero_means = NULL,
     .resume = NB_RESUME_OVERRIDE, .checkpoint_key = "ef", .summary_key = "delay.ef"},
    {.name = "ef_alpha", .type = NB_SET_FLOAT, NO_RANGE, .offset = AT(delay.ef_alpha), .def = 1,
     .resume = NB_RESUME_FREE, .summary_key = "delay.ef_alpha"},
    {.name = "taylor", .flag = "--taylor", PART_RANGE(NB_SET_FLOAT), .offset = AT(delay.taylor), .def = 0,
     .metavar = "LAMBDA", .help = "delay-compensated gradient (DC-ASGD)", .zero_means = "off",
     .resume = NB_RESUME_OVERRIDE, .checkpoint_key = "taylor", .summary_key = "delay.taylor"},
    {.name = "sync_start", .flag = "--sync-start", INT_RANGE(0, STEPS), .offset = AT(delay.sync_start), .def = 0,
     .metavar = "K", .help = "no delay for the first K steps", .resume = NB_RESUME_OVERRIDE,
     .checkpoint_key = "sync_start", .summary_key = "delay.sync_start"},
    {.name = "sync_cooldown", .flag = "--sync-cooldown", INT_RANGE(0, STEPS), .offset = AT(delay.sync_cooldown),
     .def = 0, .metavar = "K", .help = "no delay for the last K steps", .resume = NB_RESUME_OVERRIDE,
     .checkpoint_key = "sync_cooldown", .summary_key = "delay.sync_cooldown"},

    /* Files and checkpoints: where the run writes, never what it computes. */
    {.name = "out", .flag = "--out", .type = NB_SET_STRING, NO_RANGE, .offset = AT(out_dir), .metavar = "DIR",
     .help = "write DIR/metrics.jsonl and DIR/summary.json", .resume = NB_RESUME_FREE},
    {.name = "export", .flag = "--export", .type = NB_SET_STRING, NO_RANGE, .offset = AT(export_dir),
     .metavar = "DIR", .help = "write the final weights as a Hugging Face folder (model.safetensors, config.json)",
     .resume = NB_RESUME_FREE},
    {.name = "tensorboard", .flag = "--tensorboard", .type = NB_SET_STRING, NO_RANGE, .offset = AT(tensorboard_dir),
     .metavar = "DIR", .help = "also write the metrics as TensorBoard event files into DIR (a new file per run)",
     .resume = NB_RESUME_FREE},
    {.name = "save_dir", .flag = "--save-dir", .type = NB_SET_STRING, NO_RANGE, .offset = AT(save_dir),
     .metavar = "DIR", .help = "checkpoints DIR/step_NNNNNN (weights + full training state) at the end",
     .resume = NB_RESUME_FREE},
    {.name = "save_every", .flag = "--save-every", INT_RANGE(0, STEPS), .offset = AT(save_every), .def = 0,
     .metavar = "N", .help = "also a checkpoint every N steps (needs --save-dir)", .zero_means = "only at the end",
     .resume = NB_RESUME_FREE},
    {.name = "keep", .flag = "--keep", INT_RANGE(0, 1000000), .offset = AT(keep), .def = 0, .metavar = "K",
     .help = "keep only the newest K periodic checkpoints", .zero_means = "all", .resume = NB_RESUME_FREE},
    {.name = "resume", .flag = "--resume", .type = NB_SET_STRING, NO_RANGE, .offset = AT(resume_dir),
     .metavar = "DIR", .help = "continue from a checkpoint folder (same model, optimizer, delay, data; any --stages); "
                               "latest: --save-dir's newest; auto: that, or a fresh start when it has none",
     .resume = NB_RESUME_FREE},
    {.name = "override", .flag = "--override", .type = NB_SET_BOOL, NO_RANGE, .offset = AT(resume_override),
     .def = 0, .metavar = "", .help = "--resume even where this run's settings differ (a warning lists them)",
     .resume = NB_RESUME_FREE},
    {.name = "init_from", .flag = "--init-from", .type = NB_SET_STRING, NO_RANGE, .offset = AT(init_from),
     .metavar = "DIR", .help = "start from a Hugging Face model's weights (DIR/config.json gives the model; step 0)",
     .resume = NB_RESUME_FREE, .summary_key = "run.init_from"},
    {.name = "force", .flag = "--force", .type = NB_SET_BOOL, NO_RANGE, .offset = AT(force), .def = 0,
     .metavar = "", .help = "start afresh where --out or --save-dir holds an earlier run (removes its files)",
     .resume = NB_RESUME_FREE},
    {.name = "quiet", .flag = "--quiet", .type = NB_SET_BOOL, NO_RANGE, .offset = AT(quiet), .def = 0,
     .metavar = "", .help = "no progress lines", .resume = NB_RESUME_FREE},
    /* An action like --force: never written into the run's train_config.json (config_file.c), so that
     * --config of a run's own file checks memory again; a file may still give it explicitly. */
    {.name = "memory_check", .flag = "--memory-check", .off_flag = "--no-memory-check", .type = NB_SET_BOOL,
     NO_RANGE, .offset = AT(memory_check), .def = 1, .metavar = "",
     .help = "refuse a run whose estimated memory exceeds the available memory, before allocating (the default; "
             "--no-memory-check: run anyway)",
     .resume = NB_RESUME_FREE},

    /* The arithmetic: bf16 changes what the weights compute, so a resume may change it only with --override;
     * checkpoints from before this row ran fp32. summary.json and checkpoints record auto's choice. */
    {.name = "precision", .flag = "--precision", .type = NB_SET_ENUM, NO_RANGE, .offset = AT(precision),
     .names = nb_precision_names, .def = NB_PRECISION_FP32, .metavar = "P",
     .help = "GEMM operands fp32 or bf16 (fp32 accumulation, master weights and optimizer state); auto: bf16 where "
             "the CPU has bf16 instructions",
     .resume = NB_RESUME_OVERRIDE, .checkpoint_key = "precision", .unrecorded = "fp32", .summary_key = "run.precision"},
    /* The backend: which library runs which product. Each is deterministic, but two may round differently,
     * so a resume on another is allowed and named in summary.json (docs/executor.md, "Thread counts"). */
    {.name = "gemm", .flag = "--gemm", .type = NB_SET_STRING, NO_RANGE, .offset = AT(gemm), .metavar = "NAME",
     .help = "the backend of the products (not given: the environment's NB_GEMM, else the build's default)",
     .resume = NB_RESUME_FREE, .summary_key = "run.gemm"},
    /* Where the stages' memory is (docs/gpu.md). A checkpoint is the same files on every device, so a run
     * resumes on another. */
    {.name = "device", .flag = "--device", .type = NB_SET_STRING, NO_RANGE, .offset = AT(device), .metavar = "DEV",
     .help = "where the stages' memory is: cpu, cuda (-DNB_CUDA=ON builds; an NVIDIA GPU), or guarded (the CPU "
             "behind a device's boundary, for checks)",
     .resume = NB_RESUME_FREE, .summary_key = "run.device"},

    /* Real pipeline workers. */
    {.name = "pipeline", .flag = "--pipeline", .type = NB_SET_ENUM, NO_RANGE, .offset = AT(pipeline),
     .names = nb_pipe_kind_names, .def = -1, .metavar = "KIND",
     .help = "real workers, one per stage (sets --delay)", .resume = NB_RESUME_FREE},
    {.name = "transport", .flag = "--transport", .type = NB_SET_ENUM, NO_RANGE, .offset = AT(transport),
     .names = nb_transport_names, .def = 0, .metavar = "NAME",
     .help = "one process (threads) or one process per stage (mpi: mpirun -np P)", .resume = NB_RESUME_FREE},
    {.name = "chunks", .flag = "--chunks", INT_RANGE(0, 64), .offset = AT(chunks), .def = 0, .metavar = "V",
     .help = "--pipeline interleaved: model chunks per worker (the model in stages x V parts)", .zero_means = "2",
     .resume = NB_RESUME_FREE},
    /* Data parallelism: the gradient's sum is grouped by replica, so a resume into another D rounds otherwise
     * (docs/data-parallel.md). */
    {.name = "data_parallel", .flag = "--data-parallel", INT_RANGE(1, NB_TRAIN_MAX_MICROBATCHES),
     .offset = AT(data_parallel), .def = 1, .metavar = "D",
     .help = "D replicas, each taking M / D of a step's micro-batches, their gradients summed in replica order "
             "(mpi: mpirun -np D x P; without --pipeline one process computes the same)",
     .resume = NB_RESUME_OVERRIDE, .checkpoint_key = "data_parallel", .unrecorded = "1",
     .summary_key = "run.data_parallel"},
    {.name = "threads_per_stage", .flag = "--threads-per-stage", INT_RANGE(0, 1024), .offset = AT(threads_per_stage),
     .def = 0, .metavar = "N", .help = "GEMM threads of each pipeline worker", .zero_means = "cores / stages",
     .resume = NB_RESUME_FREE},
    {.name = "peer_timeout", .flag = "--peer-timeout", NUM_RANGE(0, 1000000), .offset = AT(peer_timeout), .def = 300,
     .metavar = "S", .help = "a pipeline stage waiting S seconds for another fails the run, naming it",
     .zero_means = "no limit", .resume = NB_RESUME_FREE},
    /* How the sum over replicas overlaps the backward: never what is computed (docs/data-parallel.md, "Buckets"). */
    {.name = "dp_bucket_mib", .flag = "--dp-bucket-mib", NUM_RANGE(0, 65536), .offset = AT(dp_bucket_mib), .def = 25,
     .metavar = "MIB",
     .help = "--data-parallel over MPI: sum the gradient over the replicas in buckets of about MIB MiB, each started "
             "in the step's last backward once its values are final",
     .zero_means = "one sum after the backward", .resume = NB_RESUME_FREE, .summary_key = "run.dp_bucket_mib"},
};
const int nb_settings_count = (int)(sizeof nb_settings / sizeof nb_settings[0]);
_Static_assert(sizeof nb_settings / sizeof nb_settings[0] <= NB_SETTINGS_MAX, "NB_SETTINGS_MAX is too small");
/* Enum settings are stored through an int. */
_Static_assert(sizeof(nb_optimizer_kind) == sizeof(int) && sizeof(nb_schedule_kind) == sizeof(int) &&
                   sizeof(nb_precision) == sizeof(int),
               "enums stored as int");

const nb_setting *nb_setting_by_flag(const char *flag) {
    for (int i = 0; i < nb_settings_count; i++) {
        const nb_setting *s = &nb_settings[i];
        if ((s->flag && !strcmp(s->flag, flag)) || (s->off_flag && !strcmp(s->off_flag, flag))) return s;
    }
    return NULL;
}

const nb_setting *nb_setting_by_name(const char *name) {
    for (int i = 0; i < nb_settings_count; i++)
        if (!strcmp(nb_settings[i].name, name)) return &nb_settings[i];
    return NULL;
}
