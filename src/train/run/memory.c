/* The memory a run needs, estimated from its options before anything large is allocated, and the
 * check that refuses a run that cannot fit (train.h, "memory"). Each term follows what the code
 * allocates: the stages (model/stage.c, model/acts.c), the worker's buffers and slots (worker.c), the
 * optimizer (optim/optimizer.c), the weight versions (delay/delay.c). */
#include <math.h>
#include <stdint.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "nobubble/pipeline.h"
#include "nobubble/runtime.h"
#include "nobubble/train.h"
#include "train/run/run.h"
#include "util/error.h"
#include "util/memory.h"

/* The process besides what the estimate counts: the binary and its libraries (oneDNN, OpenBLAS, MPI),
 * the threads' stacks, oneDNN's GEMM buffers, the loaders' pages, glibc's arenas. Measured on the
 * smallest runs (docs/limits.md, "Memory"), rounded up. */
#define RUNTIME_BYTES (64.0 * 1048576)

static void add_total(nb_memory_estimate *e) {
    e->total = e->weights + e->gradients + e->optimizer + e->versions + e->activations + e->scratch + e->runtime;
}

/* Weights, gradients and the RoPE tables of a stage as nb_stage_init allocates them (a tied model in one
 * stage also accumulates the head's gradient apart). */
static void stage_tensors(const nb_stage *st, nb_memory_estimate *e) {
    const nb_config *c = &st->cfg;
    const double n = (double)st->n_params, embed = (double)c->vocab_size * c->d_model;
    e->weights += sizeof(float) * n;
    e->gradients += sizeof(float) * (n + (st->has_head && st->has_embed && c->tied ? embed : 0));
    e->scratch += sizeof(float) * (double)c->context * (c->d_model / c->n_heads);
}

/* An interleaved run's virtual stages' schedule for its first steps (at most 3: the peaks repeat), whose
 * peaks the estimate counts (no closed form: they depend on the chunks). */
static int interleaved_schedule(const nb_train_options *o, nb_pipe_schedule *out) {
    nb_pipe_schedule il;
    const nb_pipe_gen_options go = {train_chunks(o)};
    if (nb_pipe_generate_ex(&il, NB_PIPE_INTERLEAVED, o->stages, train_schedule_microbatches(o),
                            o->steps < 3 ? o->steps : 3, &go))
        return -1;
    const int rc = nb_pipe_virtualize(&il, out);
    nb_pipe_free(&il);
    return rc;
}

/* One stage of a training run: its tensors, the worker's buffers (worker.c stage_alloc: the update d,
 * the received activations and their gradient, the head's gradient a split tied embedding receives,
 * the loader's step positions), the optimizer, the weight versions and the activation slots. */
static int train_stage(const nb_train_options *o, const nb_pipe_schedule *virt, nb_stage *st, int T, int S,
                       nb_memory_estimate *e) {
    const nb_config *c = &st->cfg;
    const int P = train_model_stages(o), s = st->index;
    const double n = (double)st->n_params, embed = (double)c->vocab_size * c->d_model;
    const double message = sizeof(float) * (double)o->batch * T * c->d_model;
    stage_tensors(st, e);
    e->gradients += sizeof(float) * (n + (c->tied && st->has_embed && !st->has_head ? embed : 0));
    /* --data-parallel: the sum over replicas' two copies of the stage's gradient (its own and another
     * replica's: src/mpi/mpi.c), or one process's sum of the step's groups so far (worker.c); in buckets, at
     * most D copies (each bucket in flight holds its own values and the D - 1 others') */
    const double dp_copies = !train_replicas_are_ranks(o) ? 1.0
                             : train_dp_buckets(o) && o->data_parallel > 2 ? o->data_parallel : 2.0;
    if (o->data_parallel > 1)
        e->gradients += dp_copies * sizeof(float) * (n + (c->tied && st->has_embed && st->has_head ? embed : 0));
    e->scratch += 2 * message + (st->has_embed ? 8.0 * S : 0);
    size_t per_thread = 0, state = nb_optimizer_state_bytes(&o->optim, st->tensors, st->n_tensors, &per_thread);
    if (state == (size_t)-1) return nb_fail("out of memory");
    e->optimizer += (double)state + (double)per_thread * omp_get_max_threads();
    const int tau = nb_delay_tau_max(&o->delay, s, P);
    e->versions += (double)nb_stash_bytes_for(&o->delay, s, P, st->n_params);
    if (st->precision == NB_PRECISION_BF16) e->versions += sizeof(uint16_t) * n * (tau + 2);
    const nb_pipe_kind kind = o->pipeline >= 0 ? (nb_pipe_kind)o->pipeline : NB_PIPE_SEQUENTIAL;
    const int M = train_schedule_microbatches(o);
    const int peak = virt ? nb_pipe_stage_peak(virt, s) : nb_pipe_peak_in_flight(kind, P, M, S, s);
    if (peak < 0) {
        nb_pipe_kind_check_executed(kind);  /* its message, where that is why */
        return -1;
    }
    const int slots = peak + (o->val_pattern ? 1 : 0);
    e->activations += (double)slots * nb_acts_bytes(st, o->batch, T);
    /* ZB-H1: each micro-batch in flight also holds the output gradients its W will read */
    if (kind == NB_PIPE_ZBH1) e->activations += (double)peak * nb_wgrad_bytes(st, o->batch, T);
    e->scratch += (double)nb_stage_scratch_bytes(st, o->batch, T);
    return 0;
}

/* MPI ranks of this run on this machine (Open MPI says; 1 elsewhere). */
static int local_processes(const nb_train_options *o) {
    const char *local = getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
    if (o->pipeline < 0 || o->transport != NB_TRANSPORT_MPI) return 1;
    return local && atoi(local) > 0 ? atoi(local) : 1;
}

int nb_train_memory_estimate(const nb_train_options *o, nb_memory_estimate *e) {
    memset(e, 0, sizeof *e);
    const int T = o->seq_len ? o->seq_len : o->model.context;
    const int S = train_schedule_steps(o);
    const int mpi = o->pipeline >= 0 && o->transport == NB_TRANSPORT_MPI;
    int balanced[NB_TRAIN_MAX_STAGES];
    const int *split = o->split;
    const int parts = train_model_stages(o);  /* an interleaved run's virtual stages */
    if (parts < 1 || parts > NB_TRAIN_MAX_STAGES) return nb_fail("stages = %d: out of range", parts);
    if (!split && o->pipeline >= 0) {
        if (nb_config_balanced_split(&o->model, T, parts, balanced)) return -1;
        split = balanced;
    }
    nb_pipe_schedule virt;  /* interleaved: its virtual stages' peaks */
    memset(&virt, 0, sizeof virt);
    if (o->pipeline == NB_PIPE_INTERLEAVED && interleaved_schedule(o, &virt)) return -1;
    nb_model m;
    if (nb_model_layout(&m, &o->model, parts, split)) {
        nb_pipe_free(&virt);
        return -1;
    }
    const nb_precision precision = nb_precision_choose(o->precision);
    int rc = 0;
    /* One process holds every stage; an MPI rank its worker's stages w, w + workers, ... (one, or an
     * interleaved worker's v), whichever: the largest. */
    const int workers = mpi ? o->stages : 1;
    for (int w = 0; w < workers && !rc; w++) {
        nb_memory_estimate held;
        memset(&held, 0, sizeof held);
        for (int s = w; s < m.n_stages && !rc; s += workers) {
            nb_memory_estimate one;
            memset(&one, 0, sizeof one);
            m.stages[s].precision = precision;   /* what nb_acts_bytes and the scratch's sizes read */
            rc = train_stage(o, virt.start ? &virt : NULL, &m.stages[s], T, S, &one);
            held.weights += one.weights, held.gradients += one.gradients, held.optimizer += one.optimizer;
            held.versions += one.versions, held.activations += one.activations, held.scratch += one.scratch;
        }
        add_total(&held);
        if (w == 0 || held.total > e->total) *e = held;
    }
    nb_model_free(&m);
    nb_pipe_free(&virt);
    e->runtime = RUNTIME_BYTES;
    e->processes = local_processes(o);
    add_total(e);
    return rc;
}

int nb_infer_memory_estimate(const nb_config *c, int B, int T, int kv_len, nb_memory_estimate *e) {
    memset(e, 0, sizeof *e);
    nb_model m;
    if (nb_model_layout(&m, c, 1, NULL)) return -1;
    const nb_stage *st = &m.stages[0];
    stage_tensors(st, e);
    e->gradients = 0;   /* allocated by nb_model_create but never written: no resident memory */
    if (B > 0) {
        e->activations = (double)nb_acts_bytes(st, B, T);
        e->scratch += (double)nb_stage_scratch_bytes(st, B, T);
    }
    /* generate.c: keys and values of every layer, and one position's work vectors */
    const double hd = c->d_model / c->n_heads;
    e->scratch += sizeof(float) * ((double)kv_len * 2 * c->n_layers * c->n_kv_heads * hd + kv_len);
    e->scratch += sizeof(float) * (double)c->vocab_size;   /* one position's logits */
    nb_model_free(&m);
    e->runtime = RUNTIME_BYTES;
    e->processes = 1;
    add_total(e);
    return 0;
}

static double gib(double bytes) { return bytes / (1024.0 * 1048576); }

void nb_memory_describe(const nb_memory_estimate *e, char *buf, size_t size) {
    /* GiB, or MiB for a run under 1 GiB (where every part would read 0.00 GiB) */
    const int mib = e->total < 1024.0 * 1048576;
    const double u = mib ? 1048576.0 : 1024.0 * 1048576;
    snprintf(buf, size,
             "about %.*f %s%s (weights %.*f, gradients %.*f, optimizer state %.*f, weight versions and EF %.*f, "
             "activations %.*f, scratch %.*f, runtime %.*f)",
             mib ? 0 : 1, e->total / u, mib ? "MiB" : "GiB", e->processes > 1 ? " per process" : "",
             mib ? 0 : 1, e->weights / u, mib ? 0 : 1, e->gradients / u, mib ? 0 : 1, e->optimizer / u,
             mib ? 0 : 1, e->versions / u, mib ? 0 : 1, e->activations / u, mib ? 0 : 1, e->scratch / u,
             mib ? 0 : 1, e->runtime / u);
}

int nb_memory_check(nb_memory_estimate *e, const char *override) {
    e->available = nb_memory_available(e->available_source, sizeof e->available_source);
    const double need = e->total * (e->processes > 1 ? e->processes : 1);
    if (!(need > e->available)) return 0;
    char what[512], ranks[64] = "";
    nb_memory_describe(e, what, sizeof what);
    if (e->processes > 1) snprintf(ranks, sizeof ranks, " x %d processes on this machine", e->processes);
    return nb_fail("the model needs %s%s and %.1f GiB is available (%s); use %s to run anyway", what, ranks,
                   gib(e->available), e->available_source, override);
}
