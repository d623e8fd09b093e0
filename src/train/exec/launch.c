/* nb_train: a run's setup. The model, the schedule (the one-process run's sequential order, or a
 * pipeline's), its lowering, and the endpoints on a transport: the one-process run drives every
 * endpoint from this thread over a hub; a threads pipeline runs a thread per stage and the coordinator
 * here; an MPI pipeline runs a rank per stage, rank 0 driving stage 0 and the coordinator. */
#define _GNU_SOURCE /* CPU sets, pthread_setaffinity_np */
#include <math.h>
#include <omp.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "backend/backend.h"
#include "nobubble/checkpoint.h"
#include "nobubble/data.h"
#include "train/exec/exec.h"
#include "train/run/run.h"
#include "train/run/state.h"
#include "util/clock.h"
#include "util/error.h"
#include "util/fs.h"
#include "util/memory.h"
#include "util/signals.h"

/* --data-parallel D > 1 on a pipeline (threads refuse it: check_replicas): each replica's share of the step
 * is a whole schedule of its kind, and the world known from the launcher's variables is D x --stages,
 * before anything is built. */
static int check_replicas_pipeline(const nb_train_options *o, nb_pipe_kind kind) {
    const int D = o->data_parallel;
    const long long want = (long long)o->stages * D;
    if (D == 1) return 0;
    if (kind == NB_PIPE_PIPEDREAM && o->microbatches != D)
        return nb_fail("--pipeline pipedream updates after every micro-batch of each replica: expected --microbatches "
                       "%d (one per replica of --data-parallel %d), got %d", D, D, o->microbatches);
    if ((kind == NB_PIPE_1F1B || kind == NB_PIPE_2BW) && o->microbatches / D < o->stages)
        return nb_fail("--microbatches %d over --data-parallel %d replicas is %d per replica: --pipeline %s needs at "
                       "least --stages (%d) per replica", o->microbatches, D, o->microbatches / D,
                       nb_pipe_kind_name(kind), o->stages);
    const int world = nb_mpi_world_size();
    if (world == 0)
        return nb_fail("--stages %d x --data-parallel %d on --transport mpi needs %lld processes, one per stage of each "
                       "replica, but this process was not started by an MPI launcher (mpirun -np %lld)", o->stages, D,
                       want, want);
    if (world > 0 && world != want)
        return nb_fail("--stages %d x --data-parallel %d = %lld processes, but mpirun started %d: expected mpirun -np "
                       "%lld (one process per stage of each replica)", o->stages, D, want, world, want);
    return 0;
}

/* What a stage on a device does not run yet (docs/gpu.md), refused before anything is made. */
static int check_device_options(const nb_train_options *o) {
    const char *dev = o->device;
    if (!dev || !*dev || !strcmp(dev, "cpu")) return 0;
    if (!nb_backend_device_named(dev))   /* a name no build knows: said before what a device lacks */
        return nb_fail("--device: device '%s': expected %s", dev, nb_backend_devices());
    /* written for the GPU and checked on the guarded device, but not yet run on a GPU: only when asked for */
    const int ns = o->optim.kind == NB_OPT_MUON || o->optim.kind == NB_OPT_NORMUON;
    const char *unproven = nb_config_moe_blocks(&o->model) > 0 ? "a mixture of experts"
                           : o->optim.kind == NB_OPT_SGD      ? "--optimizer sgd"
                           : ns && o->precision != NB_PRECISION_FP32
                               ? "Newton-Schulz with bf16 operands (--optimizer muon or normuon under bf16 or auto)"
                               : NULL;
    if (!strcmp(dev, "cuda") && unproven && !nb_backend_cuda_next_asked())
        return nb_fail("--device cuda: %s on the GPU is written but has not yet run on one (docs/gpu.md): "
                       "NB_CUDA_KERNELS=next runs it", unproven);
    return 0;
}

static int check_pipeline_options(const nb_train_options *o) {
    nb_pipe_kind kind = (nb_pipe_kind)o->pipeline;
    char list[96];
    if (!nb_pipe_kind_names(kind)) {
        nb_pipe_kind_list(list, sizeof list);
        return nb_fail("--pipeline %d: expected one of %s", o->pipeline, list);
    }
    if (nb_pipe_kind_check_executed(kind)) return -1;
    if (o->chunks && kind != NB_PIPE_INTERLEAVED)
        return nb_fail("--chunks %d: only --pipeline interleaved has model chunks", o->chunks);
    if (kind == NB_PIPE_INTERLEAVED) {
        const int V = train_model_stages(o);
        if (o->chunks == 1)
            return nb_fail("--chunks 1: an interleaved pipeline has at least 2 chunks per worker (1 is --pipeline 1f1b)");
        if (o->split)
            return nb_fail("--split with --pipeline interleaved: the model is split into --stages x --chunks = %d "
                           "parts, balanced by their FLOPs; leave --split out", V);
        if (V > o->model.n_layers)
            return nb_fail("--pipeline interleaved: --stages %d x --chunks %d = %d parts for %d blocks: expected at "
                           "most one part per block", o->stages, train_chunks(o), V, o->model.n_layers);
        const int M = train_schedule_microbatches(o);  /* a replica's, when the replicas are ranks */
        if (M % o->stages)
            return M == o->microbatches
                       ? nb_fail("--pipeline interleaved: --microbatches %d is not a multiple of --stages %d",
                                 o->microbatches, o->stages)
                       : nb_fail("--pipeline interleaved: --microbatches %d over --data-parallel %d is %d per replica, "
                                 "not a multiple of --stages %d", o->microbatches, o->data_parallel, M, o->stages);
    }
    nb_delay_options want = o->delay;
    nb_delay_parse(nb_pipe_delay_name(kind), &want);
    if (o->delay.mode != want.mode)
        return nb_fail("--pipeline %s runs with --delay %s (its weight versions), not --delay %s", nb_pipe_kind_name(kind),
                       nb_delay_mode_name(want.mode), nb_delay_mode_name(o->delay.mode));
    if (kind == NB_PIPE_PIPEDREAM && o->data_parallel == 1 && o->microbatches != 1)
        return nb_fail("--pipeline pipedream updates after every micro-batch: expected --microbatches 1, got %d "
                       "(each update's batch is --batch sequences)", o->microbatches);
    if ((kind == NB_PIPE_GPIPE || kind == NB_PIPE_ZBH1) &&
        (o->delay.sync_start || o->delay.sync_cooldown || o->delay.ef || o->delay.taylor > 0))
        return nb_fail("--pipeline %s is synchronous: --sync-start, --sync-cooldown, --ef and --taylor do not apply",
                       nb_pipe_kind_name(kind));
    if (!nb_transport_names(o->transport)) {
        nb_transport_list(list, sizeof list);
        return nb_fail("--transport %d: expected one of %s", o->transport, list);
    }
    if (o->transport == NB_TRANSPORT_MPI && !nb_mpi_available())
        return nb_fail("--transport mpi: %s", NB_MPI_MISSING);
    return check_replicas_pipeline(o, kind);
}

/* The schedule: GPipe and ZB-H1 as generated; interleaved as generated for its workers, then as the
 * pipeline of its virtual stages; the others with each step's version from the delay options (synchronous
 * start and cooldown make some steps flush; the one-process run any delay at all). */
static int make_schedule(const nb_train_options *o, int S, nb_pipe_schedule *sc, nb_pipe_schedule *isc) {
    const int P = train_model_stages(o), M = train_schedule_microbatches(o);
    const nb_pipe_kind kind = o->pipeline >= 0 ? (nb_pipe_kind)o->pipeline : NB_PIPE_SEQUENTIAL;
    if (kind == NB_PIPE_INTERLEAVED) {
        const nb_pipe_gen_options go = {train_chunks(o)};
        return nb_pipe_generate_ex(isc, kind, o->stages, M, o->steps, &go) || nb_pipe_validate(isc) ||
               nb_pipe_virtualize(isc, sc) || nb_pipe_validate(sc);
    }
    if (kind == NB_PIPE_GPIPE || kind == NB_PIPE_ZBH1)  /* synchronous at every step: the generators' own */
        return nb_pipe_generate(sc, kind, P, M, o->steps) || nb_pipe_validate(sc);
    int *versions = malloc(sizeof(int) * (size_t)S * P);
    if (!versions) return nb_fail("out of memory");
    for (int t = 0; t < S; t++)
        for (int s = 0; s < P; s++) {
            int v = t - nb_delay_tau(&o->delay, s, P, t, S);
            versions[(size_t)t * P + s] = v > 0 ? v : 0;  /* versions before 0 are w_0 */
        }
    int rc = kind == NB_PIPE_SEQUENTIAL ? nb_pipe_generate_sequential(sc, P, M, S, versions)
                                        : nb_pipe_generate_versions(sc, kind, P, M, S, versions);
    free(versions);
    return rc || nb_pipe_validate(sc);
}

/* When the run evaluates and saves (train_evaluates; every --save-every steps and at the end). */
static int plan_steps(exec_run *run) {
    const nb_train_options *o = run->o;
    run->eval_at = calloc((size_t)run->S, 1);
    run->save_at = calloc((size_t)run->S, 1);
    if (!run->eval_at || !run->save_at) return nb_fail("out of memory");
    for (int t = 0; t < run->S; t++) {
        run->eval_at[t] = o->val_pattern && train_evaluates(o, t, t == run->S - 1);
        run->save_at[t] = o->save_dir && o->save_every && (t + 1) % o->save_every == 0;
    }
    run->low_opt = (nb_low_options){.tied = o->model.tied, .clip = o->clip > 0,
                                    .eval_batches = o->val_pattern ? o->eval_batches : 0, .eval_at = run->eval_at,
                                    .save_at = run->save_at, .save_final = o->save_dir != NULL,
                                    .save_whole = run->single_driver,
                                    .gather_params = o->pipeline >= 0 && o->transport == NB_TRANSPORT_MPI,
                                    .replicas = o->data_parallel};
    return 0;
}

static int cpu_count(int **cpus) {
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set)) return 1;
    int n = CPU_COUNT(&set);
    if (!(*cpus = malloc(sizeof(int) * (size_t)(n ? n : 1)))) return 1;
    for (int c = 0, k = 0; c < CPU_SETSIZE && k < n; c++)
        if (CPU_ISSET(c, &set)) (*cpus)[k++] = c;
    return n;
}

/* GEMM threads per driver: the one-process run all of OpenMP's; a threads pipeline the cores over the
 * stages; an MPI rank the CPUs mpirun bound it to (or its share of the node's when unbound). */
static int threads_per_driver(const nb_train_options *o, int n_cpus) {
    int n;
    if (o->pipeline < 0) return omp_get_max_threads();
    if (o->threads_per_stage) return o->threads_per_stage;
    if (o->transport == NB_TRANSPORT_MPI) {
        const char *local = getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
        int per_node = local && atoi(local) > 0 ? atoi(local) : 1;
        n = n_cpus >= sysconf(_SC_NPROCESSORS_ONLN) ? n_cpus / per_node : n_cpus;
    } else {
        n = n_cpus / o->stages;
    }
    return n < 1 ? 1 : n;
}

/* The run's first lines: the model and batch, the delay and the memory its versions take here. */
static void print_start(const exec_run *run, const exec_endpoint *eps, int first, int last, int stride) {
    const nb_train_options *o = run->o;
    if (o->quiet) return;
    char experts[128] = "";
    if (o->model.n_experts > 0)
        snprintf(experts, sizeof experts, " (%zu active per token: %d of %d experts in %d MoE block(s))",
                 nb_config_active_param_count(&o->model), o->model.experts_per_token, o->model.n_experts,
                 nb_config_moe_blocks(&o->model));
    char replicas[160] = "";
    if (run->D > 1)
        snprintf(replicas, sizeof replicas, " over %d replicas (%s, %d micro-batches each, gradients summed in replica "
                 "order)", run->D, run->groups > 1 ? "computed in turn by this process" : "MPI ranks",
                 run->step_micro / run->D);
    printf("model %zu parameters%s, %d stage(s), %d thread(s), batch %d x %d tokens x %d micro-batches = %.0f "
           "tokens/step%s, optimizer %s\n", nb_config_param_count(&o->model), experts, run->P, run->threads, o->batch,
           run->T, run->step_micro, (double)o->batch * run->T * run->step_micro, replicas,
           nb_optimizer_name(o->optim.kind));
    char delay[256];
    nb_delay_describe(&o->delay, delay, sizeof delay);
    size_t extra = 0;
    for (int s = first; s <= last; s += stride) extra += exec_stage_stash_bytes(&eps[s]);
    printf("%s; %.1f MiB of weight versions and EF buffers\n", delay, extra / 1048576.0);
    char mem[512];
    nb_memory_describe(&run->mem, mem, sizeof mem);
    printf("memory: %s estimated, %.1f GiB available (%s)\n", mem, run->mem.available / 1073741824.0,
           run->mem.available_source);
    if (o->precision == NB_PRECISION_BF16) {
        size_t copies = 0;
        for (int s = first; s <= last; s += stride) copies += sizeof(nb_bf16) * run->model->stages[s].n_params;
        printf("precision bf16: GEMM operands bf16, accumulation, weights, gradients and optimizer state fp32; "
               "%.1f MiB per weight version cast to bf16 (%d version(s) at most)\n", copies / 1048576.0,
               nb_delay_tau_max(&o->delay, 0, run->P) + 2);
    }
    fflush(stdout);
}

/* The stages this process holds (first, first + stride, ... up to last: an MPI rank's one, or an interleaved
 * worker's), set up, resumed, and the run lowered from where it resumes. */
static int setup_stages(exec_run *run, exec_endpoint *eps, int first, int last, int stride) {
    /* --init-from: each process reads its own stages' weights, before the stages copy them as w_0 */
    if (run->o->init_from && !run->o->resume_dir) {
        const double t = nb_now();
        if (stride == 1 && nb_import_hf_stages(run->model, run->o->init_from, first, last)) return -1;
        for (int s = first; stride > 1 && s <= last; s += stride)  /* a worker's stages, one by one */
            if (nb_import_hf_stages(run->model, run->o->init_from, s, s)) return -1;
        if (!run->o->quiet && first == 0)
            printf("initialized from %s (%.1f s): step 0, fresh optimizer state\n", run->o->init_from, nb_now() - t);
    }
    for (int s = first; s <= last; s += stride)
        if (exec_stage_init(&eps[s], run, s)) return -1;
    if (run->o->resume_dir) {
        const double t = nb_now();
        for (int s = first; s <= last; s += stride)
            if (exec_stage_resume(&eps[s])) return -1;
        exec_checkpoint_resumed(run, run->o->resume_dir);
        if (!run->o->quiet && first == 0) {
            train_report_checkpoint("loaded", run->o->resume_dir, nb_now() - t);
            printf("resumed from %s at step %d\n", run->o->resume_dir, run->start);
        }
    }
    run->low_opt.from_step = run->start;
    /* Nothing runs unless every message sent is received and nothing deadlocks. */
    return nb_pipe_lower(&run->sc, &run->low_opt, &run->low) || nb_low_validate(&run->low);
}

/* ---- the three ways to run the endpoints ---- */

static int run_one_process(exec_run *run, exec_endpoint *eps, nb_train_result *res) {
    const int P = run->P;
    exec_endpoint *all[NB_TRAIN_MAX_STAGES + 1];
    for (int i = 0; i <= P; i++) all[i] = &eps[i];
    if (setup_stages(run, eps, 0, P - 1, 1) || exec_coordinator_init(&eps[P], run, all, res)) return -1;
    nb_hub *hub = nb_hub_create(P + 1);
    if (!hub) return nb_fail("out of memory");
    for (int i = 0; i <= P; i++) eps[i].link = nb_hub_link(hub, i);
    print_start(run, eps, 0, P - 1, 1);
    int rc = exec_drive(all, P + 1, 1);
    nb_hub_free(hub);
    return rc;
}

/* A worker thread: its stage's endpoint, or an interleaved worker's endpoints (its virtual stages s,
 * s + P, ...), driven in turn as their messages allow. */
enum { MAX_CHUNKS = 64 };
typedef struct {
    exec_endpoint *e[MAX_CHUNKS];
    int n, worker;
    const int *cpus;
    int n_cpus, pin;
} stage_thread;

/* An interleaved worker's plan: its computes in its schedule's order, chunk c being its endpoint c. */
static int worker_plan(const exec_run *run, int worker, exec_plan_step **plan, size_t *n) {
    const nb_pipe_schedule *il = &run->isc;
    const size_t first = il->start[worker], count = il->start[worker + 1] - first;
    long ordinal[MAX_CHUNKS] = {0};
    *n = 0;
    if (!(*plan = malloc(sizeof **plan * (count ? count : 1)))) return nb_fail("worker %d: out of memory for its plan", worker);
    for (size_t k = first; k < first + count; k++)
        if (il->actions[k].op != NB_PIPE_UPDATE)
            (*plan)[(*n)++] = (exec_plan_step){il->actions[k].chunk, ordinal[il->actions[k].chunk]++};
    return 0;
}

/* The weights are the same in any order; the speed is the schedule's only in its own. */
static void warn_unplanned(int worker, long unplanned) {
    if (unplanned)
        fprintf(stderr, "warning: interleaved worker %d ran %ld compute(s) outside the interleaved order (its next "
                "planned one waited over 5 s for its inputs)\n", worker, unplanned);
}

static void *stage_main(void *arg) {
    stage_thread *t = arg;
    const exec_run *run = t->e[0]->run;
    if (t->pin && t->cpus && t->n_cpus > 0) {
        cpu_set_t set;
        CPU_ZERO(&set);
        for (int k = 0; k < run->threads; k++) CPU_SET(t->cpus[(t->worker * run->threads + k) % t->n_cpus], &set);
        pthread_setaffinity_np(pthread_self(), sizeof set, &set);
    }
    omp_set_num_threads(run->threads);
    if (!run->isc.start) {
        exec_drive(t->e, t->n, 0);
        return NULL;
    }
    /* interleaved: the worker's computes in its schedule's order */
    exec_plan_step *plan;
    size_t n;
    if (worker_plan(run, t->worker, &plan, &n)) {
        nb_link_fail(t->e[0]->link, nb_last_error());
        return NULL;
    }
    long unplanned;
    if (!exec_drive_planned(t->e, t->n, plan, n, &unplanned)) warn_unplanned(t->worker, unplanned);
    free(plan);
    return NULL;
}

static int run_threads(exec_run *run, exec_endpoint *eps, nb_train_result *res, const int *cpus, int n_cpus) {
    const int P = run->P;
    exec_endpoint *all[NB_TRAIN_MAX_STAGES + 1];
    for (int i = 0; i <= P; i++) all[i] = &eps[i];
    if (setup_stages(run, eps, 0, P - 1, 1) || exec_coordinator_init(&eps[P], run, all, res)) return -1;
    nb_hub *hub = nb_hub_create(P + 1);
    const int W = run->workers;
    pthread_t *tids = calloc((size_t)W, sizeof *tids);
    stage_thread *ts = calloc((size_t)W, sizeof *ts);
    int rc = 0, started = 0;
    if (!hub || !tids || !ts) rc = nb_fail("out of memory");
    for (int i = 0; !rc && i <= P; i++) {
        eps[i].link = nb_hub_link(hub, i);
        nb_link_set_timeout(eps[i].link, run->o->peer_timeout);
    }
    print_start(run, eps, 0, P - 1, 1);
    /* The workers start with the stop signals blocked (they run the GEMMs; a signal is taken by the CLI's
     * signal thread, or a handler on this thread, which only waits: util/signals.h). */
    sigset_t old;
    nb_signals_block(&old);
    for (; !rc && started < W; started++) {
        stage_thread *t = &ts[started];
        *t = (stage_thread){.worker = started, .cpus = cpus, .n_cpus = n_cpus, .pin = 1};
        for (int k = started; k < P && t->n < MAX_CHUNKS; k += W) t->e[t->n++] = &eps[k];
        if (pthread_create(&tids[started], NULL, stage_main, t)) {
            nb_link_fail(eps[started].link, "could not start its thread");
            rc = nb_fail("could not start the thread of stage %d", started);
        }
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (!rc) rc = exec_drive(&all[P], 1, 0);
    char why[1200];
    snprintf(why, sizeof why, "%s", nb_last_error());
    for (int i = 0; i < started; i++) pthread_join(tids[i], NULL);
    /* The first failure is the cause: a stage's, or the coordinator's own (a stop on request). */
    const char *failure = hub ? nb_hub_failure(hub) : NULL;
    char own[64];
    snprintf(own, sizeof own, "stage %d failed: ", P);
    if (rc) rc = failure && strncmp(failure, own, strlen(own)) ? nb_fail("%s", failure) : nb_fail("%s", why);
    else if (failure) rc = nb_fail("%s", failure);
    nb_hub_free(hub);
    free(tids);
    free(ts);
    return rc;
}

/* A rank per worker of each replica (a worker: a stage, or an interleaved pipeline's virtual stages w, w +
 * workers, ...): rank 0 (replica 0's worker 0) also holds the coordinator, and only it takes the run's
 * folders; every replica starts from the same weights (the same seed, --init-from or checkpoint). */
static int run_mpi(exec_run *run, exec_endpoint *eps, nb_train_result *res) {
    const int P = run->P, W = run->workers, chunks = P / W;
    nb_link *links[MAX_CHUNKS + 1];
    int n_links = 0;
    if (chunks > MAX_CHUNKS) return nb_fail("--chunks %d: expected at most %d", chunks, MAX_CHUNKS);
    if (nb_mpi_links_placed(links, &n_links, P, P + 1, run->D, W)) return -1;
    const int w = nb_link_stage(links[0]), first = w == 0 && nb_link_replica(links[0]) == 0;
    run->replica = nb_link_replica(links[0]);
    nb_model_keep_worker(run->model, w, W);  /* this process holds its own stages only */
    if (!run->o->init_from || run->o->resume_dir) nb_model_init(run->model, run->o->seed);  /* its stages only */
    exec_endpoint *mine[MAX_CHUNKS + 1];
    for (int i = 0; i < n_links; i++) mine[i] = &eps[nb_link_stage(links[i])];
    int rc = first && train_lock_run(run->o, &run->folders);
    rc = rc || setup_stages(run, eps, w, P - 1, W);
    /* --force removes the earlier run's files in the coordinator's init, once this run has loaded what it needs:
     * every rank's stages, not only rank 0's, so all wait here (a rank that failed to load ends them all below,
     * through nb_link_fail, and the files stay) */
    if (!rc && run->o->force) rc = nb_mpi_barrier();
    rc = rc || (first && exec_coordinator_init(&eps[P], run, NULL, res));
    for (int i = 0; i < n_links; i++) {
        mine[i]->link = links[i];
        nb_link_set_timeout(links[i], run->o->peer_timeout);
    }
    omp_set_num_threads(run->threads);
    if (!rc && first) print_start(run, eps, 0, P - 1, W);  /* its own stages */
    exec_plan_step *plan = NULL;
    size_t n_plan = 0;
    if (!rc && run->isc.start) rc = worker_plan(run, w, &plan, &n_plan);
    /* a failure ends every rank (MPI_Abort): rank 0 first gives back its folders' locks and removes the folders it
     * made that are still empty, as a one-process run's end does (train_unlock_run, again later: a no-op) */
    if (rc && first) train_unlock_run(&run->folders, 1);
    if (rc) nb_link_fail(links[0], nb_last_error());
    else if (run->isc.start) {  /* interleaved */
        long unplanned;
        if (!(rc = exec_drive_planned(mine, n_links, plan, n_plan, &unplanned))) warn_unplanned(w, unplanned);
    }
    else rc = exec_drive(mine, n_links, 0);
    free(plan);
    for (int i = 0; i < n_links; i++) nb_link_close(links[i]);
    return rc;
}

/* ---- the run ---- */

static int make_run(exec_run *run, const nb_train_options *o, int T, int S) {
    const int pipeline = o->pipeline >= 0;
    run->o = o;
    run->T = T;
    run->P = train_model_stages(o);
    run->workers = o->stages;
    run->M = train_schedule_microbatches(o);
    run->D = o->data_parallel;
    run->groups = train_replicas_are_ranks(o) ? 1 : run->D;
    run->step_micro = run->M * (run->D / run->groups);
    run->S = S;
    run->sched = o->schedule;
    run->sched.total_steps = S;
    run->single_driver = !pipeline;
    run->steady_from = S / 2;
    run->steady_to = S - 1 > run->steady_from ? S - 1 : S;
    /* Without --split a pipeline's stages are balanced by their FLOPs (the last also runs the head); the
     * one-process run splits evenly. Any split gives the same weights. */
    int balanced[NB_TRAIN_MAX_STAGES];
    const int *split = o->split;
    if (!split && pipeline) {
        if (nb_config_balanced_split(&o->model, T, run->P, balanced)) return -1;
        split = balanced;
    }
    if (nb_model_create(run->model, &o->model, run->P, split, run->backend)) return -1;
    /* Else the weights are imported; an MPI rank initializes its own stage once it knows it (run_mpi): the
     * others' weights, written here, would be resident for nothing (every tensor draws its own stream). */
    const int mpi = pipeline && o->transport == NB_TRANSPORT_MPI;
    if ((!o->init_from || o->resume_dir) && !mpi) nb_model_init(run->model, o->seed);
    return make_schedule(o, S, &run->sc, &run->isc) || plan_steps(run);
}

/* auto: bf16 where oneDNN reports bf16 instructions, fp32 elsewhere; the choice is what summary.json and
 * checkpoints record. bf16 without them runs, widened to fp32 GEMMs (no faster than fp32): said once. */
static nb_train_options *resolve_precision(const nb_train_options *o, nb_train_options *copy) {
    *copy = *o;
    const int native = nb_bf16_native();
    copy->precision = nb_precision_choose(o->precision);
    if (!o->quiet && o->precision == NB_PRECISION_AUTO)
        printf("precision: auto chose %s (oneDNN reports %s: %s)\n", nb_precision_name(copy->precision),
               nb_cpu_isa_name(), native ? "bf16 instructions" : "no bf16 instructions");
    else if (!o->quiet && o->precision == NB_PRECISION_BF16 && !native)
        printf("precision: bf16 emulated (oneDNN reports %s, no bf16 instructions): bf16 numbers from fp32 GEMMs, "
               "no faster than fp32\n", nb_cpu_isa_name());
    return copy;
}

/* Whether this process reports the run: every process but an MPI rank > 0 (known from the launcher's
 * variables before MPI starts). */
static int reporting_process(const nb_train_options *o) {
    if (o->pipeline < 0 || o->transport != NB_TRANSPORT_MPI) return 1;
    const char *rank = getenv("OMPI_COMM_WORLD_RANK");
    if (!rank) rank = getenv("PMI_RANK");
    return !rank || atoi(rank) == 0;
}

/* A resume from a checkpoint at the run's last step trains nothing. With every result the run writes in
 * place (summary.json in --out, the model in --export) it has nothing to do: nothing is built or
 * written, and it returns 1. With one missing it goes on (0) to rebuild it (finish()), which the summary
 * needs the run's own metrics.jsonl for: without them it is refused (-1) before anything is written. A
 * checkpoint past the last step is refused by the load (--steps may not shrink), changing nothing. */
static int resume_at_end(const nb_train_options *o, nb_train_result *res) {
    long long next;
    if (!o->resume_dir || train_state_step(o->resume_dir, &next) || next != o->steps) return 0;  /* the load says why */
    if (train_check_held_folders(o)) return -1;   /* an --out that holds another run's results is not this run's */
    const int summary = !o->out_dir || nb_fs_exists_in(o->out_dir, "summary.json");
    if (summary && (!o->export_dir || nb_fs_exists_in(o->export_dir, "model.safetensors"))) {
        res->steps = (int)next;
        res->already_complete = 1;
        res->primary = reporting_process(o);
        return 1;
    }
    if (!summary && !nb_fs_exists_in(o->out_dir, "metrics.jsonl"))
        return nb_fail("--resume %s is at step %lld, this run's last: nothing to train, and --out %s holds neither the "
                       "run's summary.json nor the metrics.jsonl to rebuild it from (give the run's own --out; "
                       "`nobubble eval` measures the checkpoint's model)", o->resume_dir, next, o->out_dir);
    return 0;
}

/* What can be checked before the model is built, in milliseconds, so that a mistake is not found after
 * minutes and gigabytes of building: the data's shards exist, and the run fits in memory (unless
 * --no-memory-check). The estimate goes to the start lines and summary.json. */
static int check_before_building(const nb_train_options *o, nb_memory_estimate *mem) {
    if (nb_loader_check_pattern(o->train_pattern) || (o->val_pattern && nb_loader_check_pattern(o->val_pattern)))
        return -1;
    if (nb_train_memory_estimate(o, mem)) return -1;
    if (o->memory_check) return nb_memory_check(mem, "--no-memory-check");
    mem->available = nb_memory_available(mem->available_source, sizeof mem->available_source);
    return 0;
}

/* --eval-batches as each evaluation reads it (train_eval_batches: every window at most once), before the
 * stages are made; summary.json and train_config.json record the number used. */
static int fit_eval_batches(nb_train_options *o, int T) {
    if (!o->val_pattern) return 0;
    nb_loader *l;
    if (nb_loader_open(&l, o->val_pattern, o->batch, T, o->model.vocab_size, 0, 0, 1)) return -1;
    o->eval_batches = train_eval_batches(l, o->eval_batches, o->batch, T, "--eval-batches", o->val_pattern,
                                         reporting_process(o));
    nb_loader_free(l);
    return 0;
}

static int train(const nb_train_options *given, nb_train_result *res);

/* A stop request applies to the run in progress, or to the next one when none is (a signal while the
 * command line starts); each run consumes it when it returns, so that a later run of the same process
 * (a library user's, a binding's) is not stopped by a request that was already answered. */
int nb_train(const nb_train_options *given, nb_train_result *res) {
    const int rc = train(given, res);
    train_stop_consume();
    return rc;
}

static int train(const nb_train_options *given, nb_train_result *res) {
    nb_train_options resolved;
    train_data_globs globs;  /* the data folder's shard patterns, for the run's life */
    const nb_train_options *o = resolve_precision(given, &resolved);
    memset(res, 0, sizeof *res);
    res->final_val_loss = NAN;
    if (train_resolve_data(&resolved, &globs)) return -1;
    const int T = o->seq_len ? o->seq_len : o->model.context;
    if (nb_config_validate(&o->model) || train_check_options(o, T)) return -1;
    if (o->pipeline >= 0 && check_pipeline_options(o)) return -1;
    const int S = train_schedule_steps(o);
    if (nb_delay_validate(&o->delay, S, train_model_stages(o))) return -1;
    if (check_device_options(o)) return -1;
    nb_backend *backend;
    if (nb_backend_open_device(o->device, o->gemm, &backend))
        return nb_fail("%s: %s", o->device && *o->device && strcmp(o->device, "cpu") ? "--device" : "--gemm",
                       nb_last_error());
    resolved.gemm = nb_backend_name(backend);  /* summary.json names the one that ran */
    const int at_end = resume_at_end(o, res);
    if (at_end) {
        nb_backend_close(backend);
        return at_end > 0 ? 0 : -1;
    }
    nb_model model;
    memset(&model, 0, sizeof model);
    exec_run run;
    memset(&run, 0, sizeof run);
    run.model = &model;
    run.backend = backend;
    pthread_mutex_init(&run.saved_mu, NULL);
    train_folders_init(&run.folders);
    int *cpus = NULL, n_cpus = cpu_count(&cpus);
    run.threads = threads_per_driver(o, n_cpus);
    const int endpoints = train_model_stages(o);  /* the stages' (an interleaved run's virtual stages) */
    exec_endpoint *eps = calloc((size_t)endpoints + 1, sizeof *eps);
    int rc = -1;
    const int mpi = o->pipeline >= 0 && o->transport == NB_TRANSPORT_MPI;
    if (o->step_times) nb_gemm_timing(1);  /* the products' share of each step (nb_step_time.gemm) */
    if (!eps) nb_fail("out of memory");
    else if (check_before_building(o, &run.mem) || fit_eval_batches(&resolved, T)) ;
    else if (!mpi && train_lock_run(o, &run.folders)) ;
    else if (make_run(&run, o, T, S)) ;
    else if (o->pipeline < 0) rc = run_one_process(&run, eps, res);
    else if (!mpi) rc = run_threads(&run, eps, res, cpus, n_cpus);
    else rc = run_mpi(&run, eps, res);
    if (o->step_times) nb_gemm_timing(0);
    if (!rc && reporting_process(o) && !res->already_complete && train_export_tokenizer(o, &res->tokenizer_exported))
        rc = -1;
    if (rc && run.o && reporting_process(o)) {   /* every thread has stopped: the proofs are final */
        train_checkpoints saved;
        exec_checkpoints(&run, &saved);
        train_diverged_advice(&saved);
    }
    for (int i = 0; eps && i < endpoints; i++) exec_stage_free(&eps[i]);
    if (eps) exec_coordinator_free(&eps[endpoints]);
    free(eps);
    free(cpus);
    free(run.eval_at);
    free(run.save_at);
    nb_low_free(&run.low);
    nb_pipe_free(&run.sc);
    nb_pipe_free(&run.isc);
    nb_model_free(&model);
    nb_backend_close(backend);
    train_unlock_run(&run.folders, rc);
    pthread_mutex_destroy(&run.saved_mu);
    return rc;
}
