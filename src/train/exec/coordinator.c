/* The coordinator role of the executor (endpoint P): it computes nothing and keeps the run's books.
 * From the stages' messages it makes the progress and metrics lines, checks the validation loss,
 * completes checkpoints (once every stage's part is written, after the metrics lines they cover are
 * on disk), proves checkpoints before --keep prunes, decides where a run stopped on request ends, and
 * at the end writes the results, summary.json and the Hugging Face export. */
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "backend/backend.h"
#include "backend/peak.h"
#include "nobubble/checkpoint.h"
#include "train/exec/exec.h"
#include "train/outputs/outputs.h"
#include "train/outputs/tensorboard.h"
#include "train/run/run.h"
#include "train/run/state.h"
#include "train/settings/config_file.h"
#include "util/clock.h"
#include "util/error.h"
#include "util/memory.h"

typedef struct {
    exec_run *run;
    exec_endpoint **stages;  /* when they share this process */
    nb_train_result *res;
    exec_stats *in;          /* this step's statistics, one per stage */
    exec_saved *saved;       /* this checkpoint's parts, one per stage */
    exec_report *reports;    /* at the end, one per stage */
    double val;              /* this step's validation loss (NAN: none) */
    double staleness;        /* and the router's staleness with it (NAN: none) */
    exec_eval eval_in;       /* the last stage's EVAL_LOSS message */
    int end_msg, committed_msg;
    FILE *metrics;
    train_tb tb;              /* --tensorboard's event file (tb.f NULL: none) */
    double t0, commit_aside;  /* when the run started; seconds this driver spent committing */
    double train_s;           /* training seconds up to the last step reported */
    double last_loss;
    double step_tau;          /* the reported step's largest delay, for --keep's proof after its commit */
    int proven, stopped;
    double peak_gflops;       /* the machine's fp32 peak measured at the start, for MFU (0: not measured) */
    double gemm_s, routing_s; /* with step_times: the products' and MoE routing's seconds counted up to the last
                                 step reported */
    int moe_blocks;           /* a mixture of experts: the MoE blocks whose loads metrics.jsonl lists */
    float *load_max, *load_min;
} coordinator;

/* The peak measurement's budget: it runs once, before the first step, only when progress lines are
 * printed; nb_measure_fp32_peak takes about 1.2 times this (growing its loop, then the best of 3). */
#define PEAK_SECONDS 0.25

/* Every replica's (--data-parallel): the step's micro-batches. */
static double tokens_per_step(const exec_run *run) { return (double)run->o->batch * run->T * run->step_micro; }

/* Seconds spent evaluating and saving, not training: every stage's when one thread drives them all, else
 * the stage that spent the most (they evaluate together). */
static double aside_seconds(const coordinator *c) {
    double sum = 0, most = 0;
    for (int i = 0; i < c->run->P; i++) {
        sum += c->in[i].aside;
        if (c->in[i].aside > most) most = c->in[i].aside;
    }
    return c->run->single_driver ? sum + c->commit_aside : most;
}

static void newest_checkpoint(coordinator *c, char *buf, size_t size) { exec_last_saved(c->run, buf, size); }

/* --keep's proof (train_weights_proven): with validation data, a finite validation loss of the weights
 * after step t; without, every stage ran step t with a finite loss and gradient on versions no older
 * than t - tau. */
static void prove(coordinator *c, int t, double tau) {
    const nb_train_options *o = c->run->o;
    int version;
    if (!o->val_pattern) version = t - (int)tau;
    else if (!isnan(c->val)) version = t + 1;
    else return;
    exec_checkpoint_proven(c->run, version);
    train_weights_proven(o, version, &c->proven);
}

static int saves_at(const exec_endpoint *e, int t) {
    const exec_run *run = e->run;
    return run->o->save_dir && ((run->save_at && run->save_at[t]) || t == e->end - 1);
}

/* The progress line of step t: loss, lr, tokens/s and GFLOP/s of the step (evaluation and checkpoints
 * excluded), MFU against the peak measured at the start, the wall time since the start and the
 * remaining steps at the mean wall time per step so far (evaluations and checkpoints included). */
static void print_progress(const coordinator *c, int t, double loss, float lr, double tps) {
    const exec_run *run = c->run;
    const double gflops = tps * nb_model_train_flops_per_token(&run->o->model, run->T) * 1e-9;
    const double elapsed = nb_now() - c->t0;
    const int done = t + 1 - run->start, left = run->S - (t + 1);
    char el[32], eta[32];
    nb_format_duration(elapsed, el, sizeof el);
    nb_format_duration(done > 0 ? elapsed / done * left : 0, eta, sizeof eta);
    printf("step %5d/%d | loss %.4f | lr %.3e | %6.0f tok/s | %5.1f GFLOP/s", t + 1, run->S, loss, lr, tps, gflops);
    if (c->peak_gflops > 0) printf(" | MFU %4.1f%%", 100 * gflops / c->peak_gflops);
    printf(" | %s elapsed | ETA %s", el, eta);
    if (!isnan(c->val)) printf(" | val %.4f", c->val);
    printf("\n");
    fflush(stdout);
}

/* Step t's scalars as one TensorBoard event at step t + 1 (metrics.jsonl's numbering); the validation
 * loss only at evaluations. Beside metrics.jsonl's
 * values, the step's GFLOP/s and its MFU (a fraction of the fp32 peak measured at the start, when it was),
 * as the progress line prints them. */
static int write_tensorboard(const coordinator *c, train_tb *tb, const train_metrics *m) {
    const double gflops = m->tokens_per_s * nb_model_train_flops_per_token(&c->run->o->model, c->run->T) * 1e-9;
    train_tb_scalar s[13] = {{"train/loss", (float)m->loss},
                            {"train/lr", (float)m->lr},
                            {"train/tokens_per_s", (float)m->tokens_per_s},
                            {"train/update_norm", (float)m->update_norm},
                            {"delay/tau", (float)m->tau},
                            {"delay/version_distance", (float)m->version_distance}};
    int n = 6;
    s[n++] = (train_tb_scalar){"train/gflops", (float)gflops};
    if (c->peak_gflops > 0) s[n++] = (train_tb_scalar){"train/mfu", (float)(gflops / c->peak_gflops)};
    if (!isnan(m->grad_norm)) s[n++] = (train_tb_scalar){"train/grad_norm", (float)m->grad_norm};
    if (!isnan(m->taylor_ratio)) s[n++] = (train_tb_scalar){"delay/taylor_ratio", (float)m->taylor_ratio};
    if (!isnan(m->val_loss)) s[n++] = (train_tb_scalar){"val/loss", (float)m->val_loss};
    if (!isnan(m->aux_loss)) s[n++] = (train_tb_scalar){"moe/aux_loss", (float)m->aux_loss};
    if (!isnan(m->router_staleness)) s[n++] = (train_tb_scalar){"moe/router_staleness", (float)m->router_staleness};
    return train_tb_write(tb, m->step + 1, s, n);
}

/* A mixture of experts: the stages' expert loads gathered in model order into load_max and load_min, and
 * the mean of every MoE block's load-balancing loss (the stages' sums added in stage order); NAN for a
 * dense model (no key in metrics.jsonl). */
static double moe_loads(coordinator *c) {
    const exec_run *run = c->run;
    if (!c->moe_blocks) return NAN;
    double aux = 0;
    int n = 0;
    for (int i = 0; i < run->P; i++) {
        const exec_stats *in = &c->in[i];
        aux += in->aux;
        for (int j = 0; j < in->moe_blocks && j < EXEC_MOE_BLOCKS && n < c->moe_blocks; j++, n++) {
            c->load_max[n] = in->load_max[j];
            c->load_min[n] = in->load_min[j];
        }
    }
    return aux / nb_config_moe_blocks(&run->o->model);
}

/* With --taylor: ||correction|| / ||gradient|| over every stage (0 at a step without delay, where
 * nothing is corrected); NAN without --taylor (no key in metrics.jsonl). */
static double taylor_ratio(const nb_train_options *o, const exec_stats *sum) {
    if (!(o->delay.taylor > 0)) return NAN;
    return sum->taylor_grad_sq > 0 ? sqrt(sum->taylor_sq) / sqrt(sum->taylor_grad_sq) : 0.0;
}

/* With step_times, step t's entry: its wall time (dt), its update's seconds over the stages, and the
 * products' seconds counted since the step before (in a one-process run every stage's update t comes
 * before any action of step t + 1, so the step's time and its products' are the step's alone). */
static void record_step_time(coordinator *c, int t, double dt, double update) {
    nb_step_time *times = c->run->o->step_times;
    if (!times) return;
    const double gemm = nb_gemm_seconds(), routing = nb_routing_seconds();
    times[t] = (nb_step_time){dt, update, gemm - c->gemm_s, routing - c->routing_s};
    c->gemm_s = gemm, c->routing_s = routing;
}

/* Step t: the stages' statistics summed in stage order, the progress line and the metrics line (a failed
 * write stops the run), the validation loss checked. */
static int report(exec_endpoint *e, int t) {
    coordinator *c = e->role;
    exec_run *run = c->run;
    const nb_train_options *o = run->o;
    exec_stats sum = c->in[0];
    for (int i = 1; i < run->P; i++) {
        sum.grad_sq += c->in[i].grad_sq;  /* in stage order, as --clip's sum: the same number */
        sum.update_sq += c->in[i].update_sq;
        sum.version_sq += c->in[i].version_sq;
        sum.taylor_sq += c->in[i].taylor_sq;
        sum.taylor_grad_sq += c->in[i].taylor_grad_sq;
        sum.update += c->in[i].update;
        if (c->in[i].tau > sum.tau) sum.tau = c->in[i].tau;
    }
    sum.loss = c->in[run->P - 1].loss;
    const double train_s = nb_now() - c->t0 - aside_seconds(c), dt = train_s - c->train_s;
    c->train_s = train_s;
    record_step_time(c, t, dt, sum.update);
    c->last_loss = sum.loss;
    if (!isnan(c->val) && !isfinite(c->val)) return train_diverged(t, "the validation loss", c->val);
    const float lr = nb_schedule_lr(&run->sched, t);
    const double tps = dt > 0 ? tokens_per_step(run) / dt : 0;
    const int last = t == e->end - 1;
    if (!o->quiet && (last || t % o->log_every == 0 || !isnan(c->val))) print_progress(c, t, sum.loss, lr, tps);
    if (!isnan(c->val)) c->res->final_val_loss = c->val;
    const double taylor = taylor_ratio(o, &sum);
    const double aux = moe_loads(c);
    if (c->metrics) {
        train_metrics m = {t, sum.loss, lr, tokens_per_step(run) * (t + 1), train_s, tps, sqrt(sum.update_sq),
                           (int)sum.tau, sqrt(sum.version_sq), sqrt(sum.grad_sq), c->val, taylor,
                           aux, c->moe_blocks, c->load_max, c->load_min, c->staleness};
        if (train_write_metrics(c->metrics, o->out_dir, &m)) return -1;
    }
    if (c->tb.f) {
        train_metrics m = {t, sum.loss, lr, 0, train_s, tps, sqrt(sum.update_sq), (int)sum.tau, sqrt(sum.version_sq),
                           sqrt(sum.grad_sq), c->val, taylor, aux, 0, NULL, NULL, c->staleness};
        if (write_tensorboard(c, &c->tb, &m)) return -1;
    }
    c->step_tau = sum.tau;
    if (!saves_at(e, t)) prove(c, t, sum.tau);  /* else after the commit: it may be this step's checkpoint */
    return 0;
}

/* After step t, where the run ends: a stop on request moves the end to the first step every endpoint
 * can still end after (exec_stop_end), which saves a checkpoint. */
static int decide(exec_endpoint *e, int t) {
    coordinator *c = e->role;
    if (!c->stopped && train_stop_requested()) {
        const int end = exec_stop_end(c->run, t);
        if (end < 0) return -1;
        if (end < c->run->S) {
            if (exec_switch_end(e, end)) return -1;
            c->stopped = 1;
        }
    }
    c->end_msg = e->end;
    return 0;
}

/* The checkpoint after step t: the metrics lines it covers flushed to disk first; then the stages' parts
 * completed (or, when this process holds every stage, the whole state written). A failure fails the run,
 * naming the newest complete checkpoint, which is intact. */
static int commit(exec_endpoint *e, int t) {
    coordinator *c = e->role;
    exec_run *run = c->run;
    const nb_train_options *o = run->o;
    const double t0 = nb_now();
    char dir[4200], previous[4200];
    snprintf(dir, sizeof dir, "%s/step_%06d", o->save_dir, t + 1);
    newest_checkpoint(c, previous, sizeof previous);
    int rc = train_sync_metrics(c->metrics, o->out_dir);
    if (run->low_opt.save_whole) {
        rc = rc || exec_stages_save_whole(run, c->stages, dir, t);
    } else {
        for (int i = 0; i < run->P && !rc; i++)
            if (c->saved[i].failed) rc = nb_fail("%s", c->saved[i].error);
        if (rc) train_state_abort(dir);  /* every stage is done with the folder */
        rc = rc || train_state_commit(dir, run->model);
    }
    if (rc) {
        train_save_failed(dir, previous);
        return -1;
    }
    exec_checkpoint_saved(run, dir, t + 1);
    if (!o->quiet) train_report_checkpoint("saved", dir, nb_now() - t0);
    train_fault_point("after_save", t + 1);
    c->committed_msg = 1;
    c->commit_aside += nb_now() - t0;
    prove(c, t, c->step_tau);
    return 0;
}

/* ---- the end ---- */

/* The share of the time (evaluation and checkpoints excluded) a stage was not computing. */
static double idle_fraction(double busy, double wall, double aside) { return 1.0 - busy / (wall - aside); }

/* A worker's report (a stage's own, or an interleaved worker's): its virtual stages w, w + workers, ... run
 * one after another on its one thread (or rank), so their busy and aside times and their actions' costs add;
 * its wall is its longest stage's. */
static exec_report worker_report(const coordinator *c, int w) {
    const exec_run *run = c->run;
    exec_report t = {0};
    for (int s = w; s < run->P; s += run->workers) {
        const exec_report *r = &c->reports[s];
        t.busy += r->busy, t.aside += r->aside, t.steady_busy += r->steady_busy, t.steady_aside += r->steady_aside;
        t.wall = fmax(t.wall, r->wall), t.steady_wall = fmax(t.steady_wall, r->steady_wall);
        t.bytes += r->bytes, t.slots += r->slots;
        t.forward += r->forward, t.backward += r->backward, t.update += r->update;
    }
    return t;
}

static void print_pipeline(const coordinator *c, double tokens_per_s) {
    const exec_run *run = c->run;
    const nb_train_options *o = run->o;
    char replicas[64] = "";
    if (run->D > 1) snprintf(replicas, sizeof replicas, " x %d replicas (replica 0's stages below)", run->D);
    printf("pipeline %s, %d stage(s)%s on %s, %d GEMM thread(s) each: %.0f tok/s\n", nb_pipe_kind_name(run->sc.kind),
           run->P, replicas, nb_transport_name((nb_transport_kind)o->transport), run->threads, tokens_per_s);
    for (int i = 0; i < run->P; i++) {
        const nb_stage *st = &run->model->stages[i];
        printf("  stage %d: blocks %d..%d%s%s\n", i, st->first_block, st->first_block + st->n_blocks - 1,
               st->has_embed ? ", embedding" : "", st->has_head ? ", head and loss" : "");
    }
    for (int i = 0; i < run->P; i++) {
        const exec_report *r = &c->reports[i];
        printf("  stage %d: busy %.2f s, idle %.1f%% (steady state, steps %d..%d: %.1f%%), %d activation slot(s), "
               "%.1f MiB\n", i, r->busy, 100 * idle_fraction(r->busy, r->wall, r->aside), run->steady_from + 1,
               run->steady_to, 100 * idle_fraction(r->steady_busy, r->steady_wall, r->steady_aside), (int)r->slots,
               r->bytes / 1048576.0);
    }
    for (int w = 0; run->workers < run->P && w < run->workers; w++) {
        const exec_report r = worker_report(c, w);
        printf("  worker %d (stages %d", w, w);
        for (int s = w + run->workers; s < run->P; s += run->workers) printf(", %d", s);
        printf("): busy %.2f s, idle %.1f%% (steady state: %.1f%%), %.1f MiB\n", r.busy,
               100 * idle_fraction(r.busy, r.wall, r.aside), 100 * idle_fraction(r.steady_busy, r.steady_wall, r.steady_aside),
               r.bytes / 1048576.0);
    }
    /* The sum over the replicas: what the backward overlapped (docs/data-parallel.md, "Buckets"). */
    for (int i = 0; run->D > 1 && i < run->P; i++) {
        const exec_report *r = &c->reports[i];
        printf("  stage %d: gradient summed over %d replicas: %.0f bucket(s) started in backwards, %.0f of them summed "
               "before REDUCE; REDUCE %.3f s in all, %.3f s of it finishing buckets\n", i, run->D, r->buckets,
               r->buckets_early, r->reduce, r->bucket_wait);
    }
    /* The measured costs as a `nobubble schedule` command, to project the run to other depths (an
     * interleaved run's per worker: its chunks' summed, as the schedule's costs are). */
    const int W = run->workers;
    printf("  measured costs (ms): nobubble schedule --kind %s --stages %d", nb_pipe_kind_name(run->sc.kind), W);
    if (W < run->P) printf(" --chunks %d", run->P / W);
    printf(" --microbatches %d", run->sc.n_micro);
    const char *flags[3] = {"--forward-cost", "--backward-cost", "--update-cost"};
    for (int op = 0; op < 3; op++) {
        printf(" %s ", flags[op]);
        for (int w = 0; w < W; w++) {
            const exec_report r = worker_report(c, w);
            printf("%s%.3f", w ? "," : "", 1e3 * (op == 0 ? r.forward : op == 1 ? r.backward : r.update));
        }
    }
    printf("\n");
}

/* The pipeline's section of summary.json; measured: whether the stages' times are this run's (a run
 * resumed at its last step measured none, and a summary holds no value nothing measured). */
static void pipeline_summary(const coordinator *c, int measured, char *buf, size_t size) {
    const exec_run *run = c->run;
    size_t n = (size_t)snprintf(buf, size, "\"pipeline\": {\"kind\": \"%s\", \"transport\": \"%s\", "
                                "\"threads_per_stage\": %d, \"steady_steps\": [%d, %d]%s",
                                nb_pipe_kind_name(run->sc.kind), nb_transport_name((nb_transport_kind)run->o->transport),
                                run->threads, run->steady_from + 1, run->steady_to, measured ? ", \"stages\": [" : "}");
    if (!measured) return;
    for (int i = 0; i < run->P && n < size; i++) {
        const exec_report *r = &c->reports[i];
        n += (size_t)snprintf(buf + n, size - n,
                              "%s{\"busy_s\": %.6f, \"eval_s\": %.6f, \"wall_s\": %.6f, \"idle_fraction\": %.6f, "
                              "\"steady_idle_fraction\": %.6f, \"memory_bytes\": %.0f, \"forward_s\": %.6g, "
                              "\"backward_s\": %.6g, \"update_s\": %.6g",
                              i ? ", " : "", r->busy, r->aside, r->wall, idle_fraction(r->busy, r->wall, r->aside),
                              idle_fraction(r->steady_busy, r->steady_wall, r->steady_aside), r->bytes, r->forward,
                              r->backward, r->update);
        /* data parallelism: REDUCE and the buckets the backwards started (docs/data-parallel.md, "Buckets") */
        if (run->D > 1 && n < size)
            n += (size_t)snprintf(buf + n, size - n, ", \"reduce_s\": %.6f, \"bucket_wait_s\": %.6f, \"buckets\": %.0f, "
                                  "\"buckets_early\": %.0f", r->reduce, r->bucket_wait, r->buckets, r->buckets_early);
        if (n < size) n += (size_t)snprintf(buf + n, size - n, "}");
    }
    if (n < size) n += (size_t)snprintf(buf + n, size - n, "]");
    /* interleaved: each worker's time, its virtual stages' together */
    for (int w = 0; run->workers < run->P && w < run->workers && n < size; w++) {
        const exec_report r = worker_report(c, w);
        n += (size_t)snprintf(buf + n, size - n, "%s{\"stages\": [", w ? ", " : ", \"workers\": [");
        for (int s = w; s < run->P && n < size; s += run->workers)
            n += (size_t)snprintf(buf + n, size - n, "%s%d", s > w ? ", " : "", s);
        if (n < size)
            n += (size_t)snprintf(buf + n, size - n, "], \"busy_s\": %.6f, \"idle_fraction\": %.6f, "
                                  "\"steady_idle_fraction\": %.6f, \"memory_bytes\": %.0f}%s", r.busy,
                                  idle_fraction(r.busy, r.wall, r.aside),
                                  idle_fraction(r.steady_busy, r.steady_wall, r.steady_aside), r.bytes,
                                  w == run->workers - 1 ? "]" : "");
    }
    if (n < size) snprintf(buf + n, size - n, "}");
}

/* summary.json's "memory": the estimate, what was available, and this process's measured peak (VmHWM). */
static size_t memory_summary(const nb_memory_estimate *m, int measured, char *buf, size_t size) {
    char peak[32] = "null";
    if (measured) snprintf(peak, sizeof peak, "%.0f", nb_memory_peak_rss());
    const int n = snprintf(buf, size,
                           "\"memory\": {\"estimate_bytes\": %.0f, \"weights\": %.0f, \"gradients\": %.0f, "
                           "\"optimizer\": %.0f, \"versions\": %.0f, \"activations\": %.0f, \"scratch\": %.0f, "
                           "\"runtime\": %.0f, \"processes\": %d, \"available_bytes\": %.0f, \"available_source\": "
                           "\"%s\", \"peak_rss_bytes\": %s}",
                           m->total, m->weights, m->gradients, m->optimizer, m->versions, m->activations, m->scratch,
                           m->runtime, m->processes, isfinite(m->available) ? m->available : -1,
                           m->available_source, peak);
    return n > 0 && (size_t)n < size ? (size_t)n : 0;
}

/* The run's results, summary.json and the export; a run stopped on request fails here, saying where to
 * resume from. */
static int finish(exec_endpoint *e) {
    coordinator *c = e->role;
    exec_run *run = c->run;
    const nb_train_options *o = run->o;
    char newest[4200];
    newest_checkpoint(c, newest, sizeof newest);
    if (c->stopped) {
        if (o->save_dir) return nb_fail("stopped on request after step %d; resume with --resume %s", e->end, newest);
        return nb_fail("stopped on request after step %d (no --save-dir: nothing saved)", e->end);
    }
    nb_train_result *res = c->res;
    const int ran = run->S - run->start;
    res->steps = run->S;
    res->final_train_loss = ran > 0 ? c->last_loss : NAN;
    res->seconds = ran > 0 ? c->train_s : 0;
    res->tokens_per_s = res->seconds > 0 ? tokens_per_step(run) * ran / res->seconds : 0;
    res->weights_hash = nb_model_weights_hash(run->model);
    res->primary = 1;
    /* Resumed at the last step: nb_train went no further when every result was there. Here summary.json
     * or the export is missing: a summary that exists stays as the run wrote it; a missing one is rebuilt
     * from the metrics, never written with values no step measured. */
    int write_summary = o->out_dir != NULL;
    if (ran == 0 && o->out_dir) {
        if (nb_fs_exists_in(o->out_dir, "summary.json")) write_summary = 0;
        else if (train_metrics_final(o->out_dir, run->S, tokens_per_step(run), res)) return -1;
        else res->summary_rebuilt = 1;
    }
    char extra[8192];
    const int pipeline = o->pipeline >= 0;
    /* The peak is of this process: a resume that trained nothing measured no peak of the run. */
    const size_t n = memory_summary(&run->mem, ran > 0, extra, sizeof extra);
    if (pipeline && n + 4 < sizeof extra) {
        snprintf(extra + n, sizeof extra - n, ",\n  ");
        pipeline_summary(c, ran > 0, extra + n + 4, sizeof extra - n - 4);
    }
    if (pipeline && ran > 0 && !o->quiet) {
        print_pipeline(c, res->tokens_per_s);
        fflush(stdout);
    }
    if (c->metrics && (ferror(c->metrics) || fflush(c->metrics))) return nb_fail("%s/metrics.jsonl: write failed", o->out_dir);
    if (train_tb_close(&c->tb)) return -1;
    if (write_summary && train_write_summary(o, res, run->T, extra)) return -1;
    if (o->export_dir && (nb_export_hf(run->model, o->export_dir) ||
                          nb_export_hf_generation_config(run->model, o->export_dir)))
        return -1;
    return 0;
}

static int coordinator_act(exec_endpoint *e, const nb_low_action *a) {
    switch (a->op) {
    case NB_LOW_REPORT: return report(e, a->step);
    case NB_LOW_DECIDE: return decide(e, a->step);
    case NB_LOW_COMMIT: return commit(e, a->step);
    case NB_LOW_FINISH: return finish(e);
    default: return nb_fail("coordinator: action %s is a stage's", nb_low_op_name(a->op));
    }
}

static int coordinator_buffer(exec_endpoint *e, const nb_low_action *a, void **data, size_t *bytes) {
    coordinator *c = e->role;
    const int i = a->peer;
    nb_stage *st;
    switch (a->msg) {
    case NB_MSG_STATS: return *data = &c->in[i], *bytes = sizeof c->in[i], 0;
    case NB_MSG_EVAL_LOSS: return *data = &c->eval_in, *bytes = sizeof c->eval_in, 0;
    case NB_MSG_END: return *data = &c->end_msg, *bytes = sizeof c->end_msg, 0;
    case NB_MSG_SAVED: return *data = &c->saved[i], *bytes = sizeof c->saved[i], 0;
    case NB_MSG_COMMITTED: return *data = &c->committed_msg, *bytes = sizeof c->committed_msg, 0;
    case NB_MSG_DONE: return *data = &c->reports[i], *bytes = sizeof c->reports[i], 0;
    case NB_MSG_PARAMS:
        /* A process holds only its own stage's weights: the others arrive here at the end. */
        st = &c->run->model->stages[i];
        if (!st->params && nb_model_alloc_stage(c->run->model, i)) return -1;
        return *data = st->params, *bytes = sizeof(float) * st->n_params, 0;
    default: return nb_fail("coordinator: message kind %s", nb_msg_kind_name(a->msg));
    }
}

/* A new step's validation loss is absent until its EVAL_LOSS arrives; the evaluation's seconds, which the
 * step's STATS could not carry, come with it. */
static int coordinator_received(exec_endpoint *e, const nb_low_action *a) {
    coordinator *c = e->role;
    if (a->msg == NB_MSG_STATS && a->peer == 0) c->val = c->staleness = NAN;
    if (a->msg == NB_MSG_EVAL_LOSS) {
        c->val = c->eval_in.loss;
        c->staleness = c->eval_in.router_staleness;
        if (c->eval_in.aside > c->in[a->peer].aside) c->in[a->peer].aside = c->eval_in.aside;
    }
    return 0;
}

/* The fp32 peak of the threads the run computes with on this machine (every stage's, at most the
 * machine's cores), which MFU is against; printed with the time it took. */
static void measure_peak(coordinator *c) {
    const exec_run *run = c->run;
    const long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    int threads = run->o->pipeline >= 0 ? run->P * (run->D / run->groups) * run->threads : run->threads;
    if (cpus > 0 && threads > cpus) threads = (int)cpus;
    const char *isa = "";
    const double t0 = nb_now();
    c->peak_gflops = nb_measure_fp32_peak(threads, PEAK_SECONDS, &isa);
    if (!c->run->o->quiet)
        printf("fp32 peak %.1f GFLOP/s (%s FMAs on %d thread(s), measured in %.2f s): MFU is against it\n",
               c->peak_gflops, isa, threads, nb_now() - t0);
    fflush(stdout);
}

int exec_coordinator_init(exec_endpoint *e, exec_run *run, exec_endpoint **stages, nb_train_result *res) {
    const int P = run->P;
    coordinator *c = calloc(1, sizeof *c);
    if (!c) return nb_fail("out of memory");
    *e = (exec_endpoint){.run = run, .id = P, .low = &run->low, .end = run->S, .buffer = coordinator_buffer,
                         .act = coordinator_act, .received = coordinator_received, .role = c};
    c->run = run;
    c->stages = stages;
    c->res = res;
    c->val = c->staleness = NAN;
    c->in = calloc((size_t)P, sizeof *c->in);
    c->saved = calloc((size_t)P, sizeof *c->saved);
    c->reports = calloc((size_t)P, sizeof *c->reports);
    if (!c->in || !c->saved || !c->reports) return nb_fail("out of memory");
    if ((c->moe_blocks = nb_config_moe_blocks(&run->o->model)) > 0) {
        c->load_max = calloc((size_t)c->moe_blocks, sizeof(float));
        c->load_min = calloc((size_t)c->moe_blocks, sizeof(float));
        if (!c->load_max || !c->load_min) return nb_fail("out of memory for the expert loads of %d blocks", c->moe_blocks);
    }
    /* The run's settings, once the stages hold their weights (a refused --resume changes no file); a
     * resumed run continues the metrics of the run it resumes. */
    if (train_claim_folders(run->o)) return -1;   /* --force: the earlier run's files go only now */
    if (run->o->out_dir && train_write_config(run->o)) return -1;
    if (run->o->out_dir && !(c->metrics = train_open_metrics(run->o->out_dir, run->o->resume_dir ? run->start : -1)))
        return -1;
    if (run->o->tensorboard_dir && train_tb_open(&c->tb, run->o->tensorboard_dir)) return -1;
    if (!run->o->quiet || run->o->tensorboard_dir) measure_peak(c);  /* the progress line's MFU, and TensorBoard's */
    c->gemm_s = nb_gemm_seconds(), c->routing_s = nb_routing_seconds();
    c->t0 = nb_now();
    return 0;
}

void exec_coordinator_free(exec_endpoint *e) {
    coordinator *c = e ? e->role : NULL;
    if (!c) return;
    nb_low_free(&e->cut);
    free(c->in);
    free(c->load_max);
    free(c->load_min);
    free(c->saved);
    free(c->reports);
    if (c->metrics) fclose(c->metrics);
    train_tb_close(&c->tb);   /* a run that failed: its error is already said */
    free(c);
    e->role = NULL;
}
