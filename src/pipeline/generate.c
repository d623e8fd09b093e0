/* Pipeline schedules as data: the generators for GPipe, 1F1B, PipeDream, PipeDream-2BW, interleaved
 * 1F1B and ZB-H1 (docs/schedules.md). */
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include "nobubble/pipeline.h"
#include "util/error.h"
#include "util/range.h"

/* One row per nb_pipe_kind: its name (--pipeline's and `schedule --kind`'s, summary.json's pipeline.kind),
 * the --delay of the one-process run with the same weight versions, and whether the trainer executes it
 * (every kind now: interleaved as the pipeline of its virtual stages, nb_pipe_virtualize).
 * The pipelines come first; "sequential", the one-process run's order, is accepted by `schedule --kind`
 * but is not a pipeline. */
static const struct {
    const char *name, *delay;
    int executed;
} kinds[] = {
    [NB_PIPE_GPIPE] = {"gpipe", "sync", 1},
    [NB_PIPE_1F1B] = {"1f1b", "sync", 1},
    [NB_PIPE_PIPEDREAM] = {"pipedream", "pipedream", 1},
    [NB_PIPE_2BW] = {"2bw", "2bw", 1},
    [NB_PIPE_INTERLEAVED] = {"interleaved", "sync", 1},
    [NB_PIPE_ZBH1] = {"zbh1", "sync", 1},
    [NB_PIPE_SEQUENTIAL] = {"sequential", "sync", 1},
};
#define N_KINDS (int)(sizeof kinds / sizeof kinds[0])

const char *nb_pipe_kind_names(int i) { return (unsigned)i < NB_PIPE_SEQUENTIAL ? kinds[i].name : NULL; }

void nb_pipe_kind_list(char *buf, size_t size) { nb_names_join(nb_pipe_kind_names, ", ", buf, size); }

int nb_pipe_kind_parse(const char *text, nb_pipe_kind *out) {
    for (int k = 0; k < N_KINDS; k++)
        if (!strcmp(text, kinds[k].name)) {
            *out = (nb_pipe_kind)k;
            return 0;
        }
    char list[96];
    nb_pipe_kind_list(list, sizeof list);
    return nb_fail("--kind '%s': expected one of %s", text, list);
}

const char *nb_pipe_kind_name(nb_pipe_kind kind) {
    return (unsigned)kind < N_KINDS ? kinds[kind].name : "unknown";
}

int nb_pipe_kind_check_executed(nb_pipe_kind kind) {
    if ((unsigned)kind < N_KINDS && kinds[kind].executed) return 0;
    return nb_fail("--pipeline %s: schedules only, not executed yet; use nobubble schedule", nb_pipe_kind_name(kind));
}

const char *nb_pipe_delay_name(nb_pipe_kind kind) {
    return (unsigned)kind < N_KINDS ? kinds[kind].delay : "sync";
}

int nb_pipe_version_rule(nb_pipe_kind kind, int n_stages, int stage, int step) {
    int v;
    switch (kind) {
    case NB_PIPE_2BW: v = step - 1; break;
    case NB_PIPE_PIPEDREAM: v = step - (n_stages - 1 - stage); break;
    default: v = step; break;  /* the synchronous ones: gpipe, 1f1b, interleaved, zbh1, sequential */
    }
    return v < 0 ? 0 : v;
}

int nb_pipe_alloc(nb_pipe_schedule *out, nb_pipe_kind kind, int n_stages, int n_micro, int n_steps,
                  const size_t *counts) {
    memset(out, 0, sizeof *out);
    if ((unsigned)kind >= N_KINDS)
        return nb_fail("schedule kind %d: expected an nb_pipe_kind, 0 to %d", (int)kind, N_KINDS - 1);
    if (n_stages < 1) return nb_fail("stages = %d: expected P >= 1", n_stages);
    if (n_micro < 1) return nb_fail("micro-batches = %d: expected M >= 1", n_micro);
    if (n_steps < 1) return nb_fail("steps = %d: expected S >= 1", n_steps);
    if ((long long)n_micro * n_steps > INT_MAX / 2)
        return nb_fail("micro-batches x steps = %lld: too many (at most %d)", (long long)n_micro * n_steps, INT_MAX / 2);
    out->kind = kind;
    out->n_stages = n_stages;
    out->n_micro = n_micro;
    out->n_steps = n_steps;
    out->n_chunks = 1;
    out->start = malloc(sizeof(size_t) * ((size_t)n_stages + 1));
    if (!out->start) return nb_fail("out of memory for a schedule of %d stages", n_stages);
    size_t total = 0;
    for (int s = 0; s < n_stages; s++) {
        out->start[s] = total;
        total += counts[s];
    }
    out->start[n_stages] = total;
    out->actions = malloc(sizeof(nb_pipe_action) * (total ? total : 1));
    if (!out->actions) {
        nb_pipe_free(out);
        return nb_fail("out of memory for a schedule of %zu actions", total);
    }
    return 0;
}

void nb_pipe_free(nb_pipe_schedule *s) {
    if (!s) return;
    free(s->start);
    free(s->actions);
    free(s->versions);
    s->start = NULL;
    s->actions = NULL;
    s->versions = NULL;
}

int nb_pipe_step_version(const nb_pipe_schedule *s, int stage, int step) {
    if (s->versions) return s->versions[(size_t)step * s->n_stages + stage];
    return nb_pipe_version_rule(s->kind, s->n_stages, stage, step);
}

int nb_pipe_truncate(const nb_pipe_schedule *full, int n_steps, nb_pipe_schedule *out) {
    const int P = full->n_stages;
    if (n_steps < 1 || n_steps > full->n_steps)
        return nb_fail("truncating a schedule of %d steps to %d: expected 1 .. %d", full->n_steps, n_steps, full->n_steps);
    if (full->kind == NB_PIPE_GPIPE || full->kind == NB_PIPE_INTERLEAVED || full->kind == NB_PIPE_ZBH1) {
        const nb_pipe_gen_options o = {full->n_chunks};  /* synchronous: each step flushes */
        return nb_pipe_generate_ex(out, full->kind, P, full->n_micro, n_steps, &o);
    }
    int *versions = malloc(sizeof(int) * (size_t)n_steps * P);
    if (!versions) return nb_fail("out of memory");
    for (int t = 0; t < n_steps; t++)
        for (int s = 0; s < P; s++) versions[(size_t)t * P + s] = nb_pipe_step_version(full, s, t);
    int rc = nb_pipe_generate_versions(out, full->kind, P, full->n_micro, n_steps, versions);
    free(versions);
    return rc;
}

size_t nb_pipe_common_prefix(const nb_pipe_schedule *a, const nb_pipe_schedule *b, int stage) {
    size_t n = 0, na = a->start[stage + 1] - a->start[stage], nb = b->start[stage + 1] - b->start[stage];
    const nb_pipe_action *x = a->actions + a->start[stage], *y = b->actions + b->start[stage];
    while (n < na && n < nb && x[n].op == y[n].op && x[n].mb == y[n].mb && x[n].step == y[n].step &&
           x[n].version == y[n].version && x[n].chunk == y[n].chunk)
        n++;
    return n;
}

size_t nb_pipe_n_actions(const nb_pipe_schedule *s) { return s->start ? s->start[s->n_stages] : 0; }

typedef struct {
    const nb_pipe_schedule *sc;
    nb_pipe_action *a;
    int stage;
} emitter;

static void emit_chunk(emitter *e, nb_pipe_op op, int mb, int step, int chunk) {
    const nb_pipe_schedule *sc = e->sc;
    nb_pipe_action *a = e->a++;
    a->op = op;
    a->mb = op == NB_PIPE_UPDATE ? -1 : mb;
    a->step = step;
    a->version = op == NB_PIPE_UPDATE ? step : nb_pipe_step_version(sc, e->stage, step);
    a->chunk = chunk;
}

static void emit(emitter *e, nb_pipe_op op, int mb, int step) { emit_chunk(e, op, mb, step, 0); }

/* GPipe: per step all forwards, all backwards (in micro-batch order), the update. */
static void gen_gpipe(emitter *e) {
    const int M = e->sc->n_micro;
    for (int t = 0; t < e->sc->n_steps; t++) {
        for (int i = 0; i < M; i++) emit(e, NB_PIPE_FORWARD, t * M + i, t);
        for (int i = 0; i < M; i++) emit(e, NB_PIPE_BACKWARD, t * M + i, t);
        emit(e, NB_PIPE_UPDATE, -1, t);
    }
}

/* 1F1B with a flush per step: warm-up of P - 1 - s forwards, alternate forward/backward,
 * cool-down backwards, the update. */
static void gen_1f1b(emitter *e) {
    const int M = e->sc->n_micro, P = e->sc->n_stages;
    int W = P - 1 - e->stage;
    if (W > M) W = M;
    for (int t = 0; t < e->sc->n_steps; t++) {
        const int base = t * M;
        for (int i = 0; i < W; i++) emit(e, NB_PIPE_FORWARD, base + i, t);
        for (int i = 0; i < M - W; i++) {
            emit(e, NB_PIPE_FORWARD, base + W + i, t);
            emit(e, NB_PIPE_BACKWARD, base + i, t);
        }
        for (int i = M - W; i < M; i++) emit(e, NB_PIPE_BACKWARD, base + i, t);
        emit(e, NB_PIPE_UPDATE, -1, t);
    }
}

/* Interleaved 1F1B's k-th forward (or backward) of step t on a stage: the step's micro-batches in groups of
 * P, each group through chunk 0, 1, .., v - 1 for the forwards and v - 1, .., 0 for the backwards
 * (Megatron-LM's order; M a multiple of P). */
static void emit_unit(emitter *e, nb_pipe_op op, int t, int k) {
    const int P = e->sc->n_stages, v = e->sc->n_chunks, c = (k / P) % v;
    const int mb = t * e->sc->n_micro + k / (P * v) * P + k % P;
    emit_chunk(e, op, mb, t, op == NB_PIPE_FORWARD ? c : v - 1 - c);
}

/* Interleaved 1F1B (Narayanan et al. 2021) with a flush per step: 1F1B over the step's M x v (micro-batch,
 * chunk) units in emit_unit's order, after a warm-up of 2 (P - 1 - s) + (v - 1) P forwards (Megatron-LM's,
 * at most M v); with v = 1 the warm-up is 1F1B's P - 1 - s, and the schedule is 1F1B's. */
static void gen_interleaved(emitter *e) {
    const int P = e->sc->n_stages, v = e->sc->n_chunks, units = e->sc->n_micro * v, s = e->stage;
    int W = v == 1 ? P - 1 - s : 2 * (P - 1 - s) + (v - 1) * P;
    if (W > units) W = units;
    for (int t = 0; t < e->sc->n_steps; t++) {
        for (int k = 0; k < W; k++) emit_unit(e, NB_PIPE_FORWARD, t, k);
        for (int k = 0; k < units - W; k++) {
            emit_unit(e, NB_PIPE_FORWARD, t, k + W);
            emit_unit(e, NB_PIPE_BACKWARD, t, k);
        }
        for (int k = units - W; k < units; k++) emit_unit(e, NB_PIPE_BACKWARD, t, k);
        emit(e, NB_PIPE_UPDATE, -1, t);
    }
}

/* ZB-H1 (Qi et al. 2023, the memory-efficient handcrafted schedule) with a flush per step: 1F1B's order of
 * forwards and input gradients (B), each B followed by a weight gradient (W) of the oldest micro-batch
 * whose W is due, the first s W's of stage s held back to the end of the step. So every stage has P
 * micro-batches in flight (forward done, W not), stage 0 as in 1F1B, and the held-back W's fill the
 * cool-down's idle time. Needs M >= P. */
static void gen_zbh1(emitter *e) {
    const int M = e->sc->n_micro, s = e->stage, W = e->sc->n_stages - 1 - s;
    for (int t = 0; t < e->sc->n_steps; t++) {
        const int base = t * M;
        int nw = 0;  /* the step's W's emitted */
        for (int i = 0; i < W; i++) emit(e, NB_PIPE_FORWARD, base + i, t);
        for (int i = 0; i < M; i++) {
            if (i + W < M) emit(e, NB_PIPE_FORWARD, base + i + W, t);
            emit(e, NB_PIPE_BACKWARD_INPUT, base + i, t);
            if (i >= s) emit(e, NB_PIPE_BACKWARD_WEIGHT, base + nw++, t);
        }
        while (nw < M) emit(e, NB_PIPE_BACKWARD_WEIGHT, base + nw++, t);
        emit(e, NB_PIPE_UPDATE, -1, t);
    }
}

/* Sequential: per step, each micro-batch forward and at once backward (through every stage, in the
 * one-process order), then the update: one activation slot per stage, for any P and M. */
static void gen_sequential(emitter *e) {
    const int M = e->sc->n_micro;
    for (int t = 0; t < e->sc->n_steps; t++) {
        for (int i = 0; i < M; i++) {
            emit(e, NB_PIPE_FORWARD, t * M + i, t);
            emit(e, NB_PIPE_BACKWARD, t * M + i, t);
        }
        emit(e, NB_PIPE_UPDATE, -1, t);
    }
}

/* 2BW and PipeDream: one 1F1B stream over all micro-batches with no flush; the update of step t
 * right after the stage's last backward of step t (for PipeDream every micro-batch is a step). */
static void gen_stream(emitter *e) {
    const int M = e->sc->n_micro, P = e->sc->n_stages, N = M * e->sc->n_steps;
    int W = P - 1 - e->stage;
    if (W > N) W = N;
    for (int j = 0; j < W; j++) emit(e, NB_PIPE_FORWARD, j, j / M);
    for (int i = 0; i < N; i++) {
        if (i + W < N) emit(e, NB_PIPE_FORWARD, i + W, (i + W) / M);
        emit(e, NB_PIPE_BACKWARD, i, i / M);
        if ((i + 1) % M == 0) emit(e, NB_PIPE_UPDATE, -1, i / M);
    }
}

/* The stream with versions from a table: greedily a forward while at most W = P - 1 - s are in
 * flight and its version exists, else the oldest backward (and the update a step's last backward
 * completes). With the kind's own versions this is exactly gen_stream (and gen_1f1b for 1F1B). */
static void gen_versioned(emitter *e) {
    const int M = e->sc->n_micro, N = M * e->sc->n_steps, W = e->sc->n_stages - 1 - e->stage;
    int nf = 0, nbk = 0, updates = 0;
    while (nbk < N) {
        if (nf < N && nf - nbk <= W && nb_pipe_step_version(e->sc, e->stage, nf / M) <= updates) {
            emit(e, NB_PIPE_FORWARD, nf, nf / M);
            nf++;
            continue;
        }
        emit(e, NB_PIPE_BACKWARD, nbk, nbk / M);
        if (++nbk % M == 0) {
            emit(e, NB_PIPE_UPDATE, -1, nbk / M - 1);
            updates++;
        }
    }
}

int nb_pipe_generate_versions(nb_pipe_schedule *out, nb_pipe_kind kind, int n_stages, int n_micro, int n_steps,
                              const int *versions) {
    memset(out, 0, sizeof *out);
    if (kind != NB_PIPE_1F1B && kind != NB_PIPE_2BW && kind != NB_PIPE_PIPEDREAM && kind != NB_PIPE_SEQUENTIAL)
        return nb_fail("schedule %s: a version table needs a stream schedule (1f1b, 2bw, pipedream or sequential)",
                       nb_pipe_kind_name(kind));
    if (kind == NB_PIPE_PIPEDREAM && n_micro != 1)
        return nb_fail("pipedream updates after every micro-batch: expected M = 1 with a version table, got %d", n_micro);
    for (int t = 0; versions && t < n_steps; t++)
        for (int s = 0; s < n_stages; s++) {
            int v = versions[(size_t)t * n_stages + s];
            if (v < 0 || v > t)
                return nb_fail("schedule: version %d for stage %d at step %d: expected 0 <= version <= %d", v, s, t, t);
        }
    if (nb_pipe_generate(out, kind, n_stages, n_micro, n_steps)) return -1;
    if (!versions) return 0;
    size_t bytes = sizeof(int) * (size_t)n_steps * (size_t)n_stages;
    if (!(out->versions = malloc(bytes))) {
        nb_pipe_free(out);
        return nb_fail("out of memory for a version table of %d steps", n_steps);
    }
    memcpy(out->versions, versions, bytes);
    for (int s = 0; s < n_stages; s++) {  /* again, each action on its version from the table */
        emitter e = {out, out->actions + out->start[s], s};
        if (kind == NB_PIPE_SEQUENTIAL) gen_sequential(&e);
        else gen_versioned(&e);
        /* A flush has the same actions in another order: the count is unchanged. */
        if (e.a != out->actions + out->start[s + 1]) {
            nb_pipe_free(out);
            return nb_fail("internal: versioned schedule of stage %d has the wrong length", s);
        }
    }
    return 0;
}

int nb_pipe_generate(nb_pipe_schedule *out, nb_pipe_kind kind, int n_stages, int n_micro, int n_steps) {
    return nb_pipe_generate_ex(out, kind, n_stages, n_micro, n_steps, NULL);
}

/* v for kind: the options' (interleaved: 2 when 0), else 1; -1 when the options give chunks to another kind. */
static int chunks_of(nb_pipe_kind kind, const nb_pipe_gen_options *o) {
    const int v = o ? o->n_chunks : 0;
    if (kind == NB_PIPE_INTERLEAVED) {
        if (v < 0) return nb_fail("--chunks %d: expected v >= 1 model chunks per stage", v);
        return v ? v : 2;
    }
    if (v > 1) return nb_fail("--chunks %d: only interleaved has model chunks, not %s", v, nb_pipe_kind_name(kind));
    return 1;
}

int nb_pipe_generate_ex(nb_pipe_schedule *out, nb_pipe_kind kind, int n_stages, int n_micro, int n_steps,
                        const nb_pipe_gen_options *options) {
    memset(out, 0, sizeof *out);
    if (n_stages < 1) return nb_fail("--stages %d: expected P >= 1", n_stages);
    if (n_micro < 1) return nb_fail("--microbatches %d: expected M >= 1", n_micro);
    if (n_steps < 1) return nb_fail("--steps %d: expected S >= 1", n_steps);
    const int v = chunks_of(kind, options);
    if (v < 1) return -1;
    if ((kind == NB_PIPE_1F1B || kind == NB_PIPE_2BW || kind == NB_PIPE_ZBH1) && n_micro < n_stages)
        return nb_fail("--microbatches %d with --stages %d: %s needs M >= P micro-batches per step", n_micro,
                       n_stages, nb_pipe_kind_name(kind));
    if (kind == NB_PIPE_INTERLEAVED && n_micro % n_stages)
        return nb_fail("--microbatches %d with --stages %d: interleaved needs M a multiple of P micro-batches per step",
                       n_micro, n_stages);
    if ((long long)n_micro * n_steps * v > INT_MAX / 4)
        return nb_fail("--microbatches %d x --steps %d%s: too many micro-batches (at most %d)", n_micro, n_steps,
                       v > 1 ? " x --chunks" : "", INT_MAX / 4);
    if (kind == NB_PIPE_PIPEDREAM) {  /* one update per micro-batch */
        n_steps *= n_micro;
        n_micro = 1;
    }
    /* a forward and a backward per micro-batch and chunk (ZB-H1: a B and a W), an update per step */
    const size_t per_stage = (kind == NB_PIPE_ZBH1 ? 3 : 2) * (size_t)n_micro * (size_t)n_steps * (size_t)v + (size_t)n_steps;
    if ((double)per_stage * n_stages > 4e8)
        return nb_fail("schedule of %d stages x %zu actions: too large (at most 4e8 actions)", n_stages, per_stage);
    size_t *counts = calloc((size_t)n_stages, sizeof(size_t));
    if (!counts) return nb_fail("out of memory");
    for (int s = 0; s < n_stages; s++) counts[s] = per_stage;
    int rc = nb_pipe_alloc(out, kind, n_stages, n_micro, n_steps, counts);
    free(counts);
    if (rc) return rc;
    out->n_chunks = v;
    for (int s = 0; s < n_stages; s++) {
        emitter e = {out, out->actions + out->start[s], s};
        switch (kind) {
        case NB_PIPE_GPIPE: gen_gpipe(&e); break;
        case NB_PIPE_1F1B: gen_1f1b(&e); break;
        case NB_PIPE_PIPEDREAM: case NB_PIPE_2BW: gen_stream(&e); break;
        case NB_PIPE_INTERLEAVED: gen_interleaved(&e); break;
        case NB_PIPE_ZBH1: gen_zbh1(&e); break;
        case NB_PIPE_SEQUENTIAL: gen_sequential(&e); break;
        }
    }
    return 0;
}

int nb_pipe_generate_sequential(nb_pipe_schedule *out, int n_stages, int n_micro, int n_steps, const int *versions) {
    return nb_pipe_generate_versions(out, NB_PIPE_SEQUENTIAL, n_stages, n_micro, n_steps, versions);
}

/* As the generators above emit: sequential one at a time; GPipe a step's M; 1F1B its warm-up W = P - 1 - s
 * and one more, within a step's M; ZB-H1 P on every stage (its W's held back), within a step's M; the
 * streams (2BW, PipeDream, and any versions) the same as 1F1B over all micro-batches of the run.
 * Interleaved's depends on its chunks: -1 (nb_pipe_simulate's peak_activations has it). */
int nb_pipe_peak_in_flight(nb_pipe_kind kind, int n_stages, int n_micro, int n_steps, int stage) {
    const long depth = (long)n_stages - stage, all = (long)n_micro * n_steps;
    long peak;
    switch (kind) {
    case NB_PIPE_SEQUENTIAL: peak = 1; break;
    case NB_PIPE_GPIPE: peak = n_micro; break;
    case NB_PIPE_1F1B: peak = depth < n_micro ? depth : n_micro; break;
    case NB_PIPE_ZBH1: peak = n_stages < n_micro ? n_stages : n_micro; break;
    case NB_PIPE_INTERLEAVED: return nb_fail("interleaved: its peak in flight depends on its chunks (nb_pipe_simulate)");
    default: peak = depth < all ? depth : all; break;
    }
    return peak > 1 ? (int)peak : 1;
}

int nb_pipe_stage_peak(const nb_pipe_schedule *sc, int s) {
    int held = 0, peak = 1;
    for (size_t k = sc->start[s]; k < sc->start[s + 1]; k++) {
        const nb_pipe_op op = sc->actions[k].op;
        if (op == NB_PIPE_FORWARD && ++held > peak) peak = held;
        if (op == NB_PIPE_BACKWARD || op == NB_PIPE_BACKWARD_WEIGHT) held--;
    }
    return peak;
}

int nb_pipe_virtualize(const nb_pipe_schedule *il, nb_pipe_schedule *out) {
    memset(out, 0, sizeof *out);
    const int P = il->n_stages, v = il->n_chunks > 0 ? il->n_chunks : 1, V = P * v;
    if (il->kind != NB_PIPE_INTERLEAVED || v < 2)
        return nb_fail("schedule %s with %d chunk(s): only an interleaved schedule has virtual stages",
                       nb_pipe_kind_name(il->kind), v);
    size_t *counts = calloc((size_t)V, sizeof *counts);
    if (!counts) return nb_fail("out of memory");
    for (int s = 0; s < P; s++)
        for (size_t k = il->start[s]; k < il->start[s + 1]; k++) {
            const nb_pipe_action *a = &il->actions[k];
            if (a->op == NB_PIPE_UPDATE)
                for (int c = 0; c < v; c++) counts[c * P + s]++;
            else
                counts[a->chunk * P + s]++;
        }
    int rc = nb_pipe_alloc(out, NB_PIPE_INTERLEAVED, V, il->n_micro, il->n_steps, counts);
    if (!rc) {
        for (int k = 0; k < V; k++) counts[k] = out->start[k];  /* now each stage's next free place */
        for (int s = 0; s < P; s++)
            for (size_t k = il->start[s]; k < il->start[s + 1]; k++) {
                nb_pipe_action a = il->actions[k];
                const int c = a.chunk;
                a.chunk = 0;
                if (a.op == NB_PIPE_UPDATE)
                    for (int j = 0; j < v; j++) out->actions[counts[j * P + s]++] = a;
                else
                    out->actions[counts[c * P + s]++] = a;
            }
    }
    free(counts);
    return rc;
}
