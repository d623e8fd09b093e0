/* nobubble: optimizers and learning-rate schedules.
 *
 * An optimizer computes the step d_t for a stage's tensors from their gradients, the current
 * weights and the scheduled learning rate, and advances its own state; applying w -= d is the
 * trainer's job, so that delays and error feedback can wrap any optimizer without touching it
 * (docs/rules.md, whose rules and defaults these follow exactly).
 *
 * Groups: Muon, NorMuon, SOAP and MARS apply their rule to matrix tensors only and AdamW (aux_beta1,
 * aux_beta2, eps, weight decay) at the auxiliary learning rate to embed and gain tensors;
 * AdamW, Adan, Lion and SGD apply to every group. Weight decay never applies to gains. */
#ifndef NOBUBBLE_OPTIM_H
#define NOBUBBLE_OPTIM_H
#include <stddef.h>
#include "nobubble/common.h"
#include "nobubble/model.h"

typedef enum {
    NB_OPT_SGD,
    NB_OPT_ADAMW,
    NB_OPT_MUON,
    NB_OPT_LION,
    NB_OPT_ADAN,
    NB_OPT_MARS,
    NB_OPT_SOAP,
    NB_OPT_NORMUON,
    NB_OPT_COUNT
} nb_optimizer_kind;

typedef struct nb_optim_params {
    nb_optimizer_kind kind;
    float beta1, beta2, beta3;  /* AdamW (0.9, 0.95), Lion (0.9, 0.99), MARS (0.95, 0.99), SOAP (0.95, 0.95),
                                   NorMuon (beta2 0.95, its per-row second moment),
                                   Adan in code form (0.98, 0.92, 0.99) */
    float eps;                  /* 1e-8 */
    float weight_decay;         /* decoupled: d += lr * wd * w (0) */
    float momentum;             /* SGD (0.9), Muon and NorMuon (0.95) */
    int nesterov;               /* SGD (0), Muon and NorMuon (1) */
    int ns_steps;               /* Muon's and NorMuon's Newton-Schulz iterations (5) */
    float gamma;                /* MARS (0.025) */
    int precond_every;          /* SOAP's eigenbasis refresh interval (10) */
    int max_precond_dim;        /* SOAP: sides larger than this get no preconditioner (10000) */
    float aux_beta1, aux_beta2; /* the AdamW of embed and gain tensors under Muon, NorMuon, SOAP, MARS (0.9, 0.95) */
} nb_optim_params;

/* ---- the optimizers, one descriptor each ----
 * What the rest of nobubble knows about an optimizer is its row of src/optim/optimizers.c (name, default
 * learning rate, the sheet's hyperparameters, its rule) and its rule's file (the step, the state buffers it
 * keeps, which tensors it takes): the settings table (train.h) takes names and defaults from here, the
 * dispatch takes the rule, and checkpoints name the state after it ("adamw.m:<tensor>"). Adding one:
 * docs/optimizers.md, "Adding an optimizer". */
struct nb_optim_rule;   /* the update rule (src/optim/rules.h) */
typedef struct nb_optimizer_desc {
    const char *name;                 /* "adamw": --optimizer NAME, summary.json, the prefix of its state's names */
    float lr;                         /* nobubble train's default --lr (docs/optimizers.md) */
    const struct nb_optim_rule *rule;
    nb_optim_params defaults;         /* the sheet's hyperparameters (docs/rules.md; nb_optim_defaults) */
    const char *reads;                /* the flags of its own rule's hyperparameters, space-separated ("--beta1
                                         --beta2 --eps"; --lr and --wd every rule reads, and the auxiliary AdamW's
                                         --aux-* and --eps go with any tensor a rule leaves to it) */
} nb_optimizer_desc;
/* The descriptor of kind; NULL when kind is not an optimizer. */
const nb_optimizer_desc *nb_optimizer_desc_of(nb_optimizer_kind kind);
/* The i-th optimizer's name, NULL past the last: lists in messages, the settings table's enum row. */
const char *nb_optimizer_names(int i);

/* The sheet's defaults for an optimizer. */
nb_optim_params nb_optim_defaults(nb_optimizer_kind kind);
/* "sgd", "adamw", "muon", "lion", "adan", "mars", "soap", "normuon"; the error lists the valid names. */
int nb_optimizer_parse(const char *name, nb_optimizer_kind *out);
const char *nb_optimizer_name(nb_optimizer_kind kind);
/* The ranges of the hyperparameters, one row per field of nb_optim_params that has one (the settings table
 * parses, shows and documents its flags with them), ended by a row without a flag. */
extern const nb_range nb_optim_ranges[];
/* Checks every hyperparameter against nb_optim_ranges (and the kind); the error names the flag (--beta1,
 * --precond-every, ...), the value and the range. */
int nb_optim_validate(const nb_optim_params *p);

/* The state of one optimizer over one stage's tensors. */
typedef struct nb_optimizer nb_optimizer;

/* tensors[0..n_tensors) describe a parameter buffer of n_params floats (offsets, shapes,
 * groups), e.g. a stage's table; backend (NULL: nb_backend_default()) runs the rules' products: the
 * stage's (nb_stage.backend). */
int nb_optimizer_create(nb_optimizer **out, const nb_optim_params *p, const nb_tensor *tensors, int n_tensors,
                        size_t n_params, const nb_backend *backend);
void nb_optimizer_free(nb_optimizer *o);
/* Bytes of the state nb_optimizer_create would allocate for these tensors (each rule's buffers), without
 * allocating it; *scratch_per_thread (may be NULL): the bytes of the scratch it keeps per OpenMP thread
 * (the largest matrix's Newton-Schulz or SOAP work). (size_t)-1 when out of memory for the plan, or when
 * p's kind is not an optimizer. */
size_t nb_optimizer_state_bytes(const nb_optim_params *p, const nb_tensor *tensors, int n_tensors,
                                size_t *scratch_per_thread);
/* d = U(grads, state, w, lr) for every tensor; embed and gain tensors of Muon, NorMuon, SOAP and MARS
 * use aux_lr. Advances the state (and the step count). -1 (nb_last_error) when memory for its scratch runs
 * out or SOAP's eigen-decomposition fails: the state is then partly advanced, and the run must stop. */
int nb_optimizer_step(nb_optimizer *o, const float *grads, const float *w, float lr, float aux_lr, float *d);
/* The run's precision (NB_PRECISION_FP32, the default, or NB_PRECISION_BF16; AUTO is refused: resolve it
 * first). Under bf16, Muon's and NorMuon's Newton-Schulz products take bf16 operands with fp32
 * accumulation (docs/precision.md); the state, the other rules and the step d stay fp32. */
int nb_optimizer_set_precision(nb_optimizer *o, nb_precision p);
/* Steps taken so far. */
long nb_optimizer_steps(const nb_optimizer *o);
/* Each tensor's update count (bias correction), for checkpoints: counts[n_tensors]. */
void nb_optimizer_get_counts(const nb_optimizer *o, long *counts);
/* Restores the counts and the step count saved with the state buffers. */
void nb_optimizer_restore(nb_optimizer *o, const long *counts, long steps);
/* The state, buffer by buffer, for checkpoints: names like "adamw.m:model.norm.weight". */
int nb_optimizer_state_count(const nb_optimizer *o);
int nb_optimizer_state(const nb_optimizer *o, int i, const char **name, float **data, size_t *numel);
/* 1 when buffer i is in the memory of the optimizer's device (made on a backend whose memory is a device's),
 * 0 when it is the host's (every buffer on the host's memory; SOAP's on a device, whose rule runs on the host). */
int nb_optimizer_state_on_device(const nb_optimizer *o, int i);

/* ---- learning-rate schedules (docs/rules.md, section 6) ---- */
typedef enum { NB_SCHEDULE_COSINE, NB_SCHEDULE_WSD, NB_SCHEDULE_CONSTANT } nb_schedule_kind;
typedef struct nb_schedule {
    nb_schedule_kind kind;
    float lr, lr_min;
    int warmup, total_steps;
    float cooldown;  /* WSD: the fraction of all steps spent decaying linearly to lr_min (0.2) */
} nb_schedule;

/* Linear warmup from lr/warmup at t = 0 to lr at t = warmup - 1; then cosine from lr to lr_min
 * over the remaining steps, or constant, or WSD (constant, then linear to lr_min over the last
 * cooldown x total_steps steps). */
float nb_schedule_lr(const nb_schedule *s, int step);
/* Parses "cosine", "wsd" or "constant"; the error lists them. */
int nb_schedule_parse(const char *name, nb_schedule_kind *out);
const char *nb_schedule_name(nb_schedule_kind kind);   /* "cosine", "wsd", "constant" */
/* The i-th schedule's name, NULL past the last (the settings table's enum row). */
const char *nb_schedule_names(int i);
/* The ranges of lr, lr_min, warmup and cooldown (the settings table parses, shows and documents those flags
 * with them), ended by a row without a flag. */
extern const nb_range nb_schedule_ranges[];
/* Checks the fields against nb_schedule_ranges, and lr_min <= lr. */
int nb_schedule_validate(const nb_schedule *s);

/* ---- gradient clipping ---- */
/* Each on the memory of backend be (a stage's: nb_stage.backend; NULL: the host's), where a device's
 * memory is computed on the device and only the number comes back. */
/* Sum of squares of the gradients in buf over the given tensors, skipping tied copies (so
 * that a tied embedding split across stages counts once); in double, in tensor order. */
double nb_grad_sum_squares(const nb_backend *be, const float *buf, const nb_tensor *tensors, int n_tensors);
/* ||a - b||^2 over the tensors, a tied copy skipped (the distance between two weight versions). */
double nb_distance_sq(const nb_backend *be, const float *a, const float *b, const nb_tensor *tensors, int n_tensors);
/* Multiplies n values by scale. */
void nb_scale(const nb_backend *be, float *buf, size_t n, float scale);
#endif
