/* The projection (docs/projection.md): the schedule simulator run on costs that come from a model's
 * shape and a device's rates, with messages that take latency + bytes / bandwidth and a ring all-reduce
 * per stage and step when there are data-parallel replicas. Everything here is arithmetic on the
 * shapes and one nb_low_simulate per layout; what a projection is worth is measured in BENCHMARKS.md
 * (predicted against real runs). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "nobubble/pipeline.h"
#include "util/error.h"

/* Steps simulated, and the steady window measured in them: from the end of step STEADY_FROM - 1's
 * updates to the end of step STEADY_TO's (the first step fills the pipeline; the last drains it). */
#define PROJ_STEPS 6
#define STEADY_FROM 2
#define STEADY_TO 4

double nb_proj_allreduce_seconds(double bytes, int n_replicas, double latency, double bytes_per_second) {
    if (n_replicas <= 1) return 0.0;
    const double D = n_replicas;
    return 2.0 * (D - 1) * (latency + bytes / (D * bytes_per_second));
}

static double kv_dim(const nb_proj_shape *m) { return (double)m->d_model * m->n_kv_heads / m->n_heads; }

double nb_proj_block_params(const nb_proj_shape *m) {
    const double d = m->d_model;
    return 2 * d * d + 2 * d * kv_dim(m) + 3 * d * m->d_ffn + 2 * d;
}

double nb_proj_params(const nb_proj_shape *m) {
    const double embed = (double)m->vocab * m->d_model;
    return embed * (m->tied ? 1 : 2) + m->n_layers * nb_proj_block_params(m) + m->d_model;
}

/* Projections 2 T (2 d^2 + 2 d kv + 3 d f); scores and weighted sum over the causal half, 2 x T^2 d / 2
 * multiply-adds each: 2 T^2 d. */
double nb_proj_block_flops(const nb_proj_shape *m) {
    const double T = m->seq, d = m->d_model;
    return 2 * T * (2 * d * d + 2 * d * kv_dim(m) + 3 * d * m->d_ffn) + 2 * T * T * d;
}

double nb_proj_head_flops(const nb_proj_shape *m) { return 2.0 * m->seq * m->d_model * m->vocab; }

static int check_shape(const nb_proj_shape *m) {
    if (m->n_layers < 1 || m->d_model < 1 || m->d_ffn < 1 || m->n_heads < 1 || m->n_kv_heads < 1 || m->vocab < 1 ||
        m->seq < 1)
        return nb_fail("projection: shape n_layers %d, d_model %d, d_ffn %d, n_heads %d, n_kv_heads %d, vocab %d, "
                       "seq %d: expected all >= 1", m->n_layers, m->d_model, m->d_ffn, m->n_heads, m->n_kv_heads,
                       m->vocab, m->seq);
    if (m->n_heads % m->n_kv_heads)
        return nb_fail("projection: n_heads %d is not a multiple of n_kv_heads %d", m->n_heads, m->n_kv_heads);
    return 0;
}

/* The slowest stage's work, in blocks' time, when the last stage takes `last` blocks and the head. */
static double slowest(int L, int P, int last, double head_in_blocks) {
    const double rest = P > 1 ? ceil((double)(L - last) / (P - 1)) : 0;
    const double tail = last + head_in_blocks;
    return rest > tail ? rest : tail;
}

int nb_proj_split(const nb_proj_shape *m, int P, int *blocks) {
    if (check_shape(m)) return -1;
    const int L = m->n_layers;
    if (P < 1 || P > L) return nb_fail("projection: %d stages for %d blocks: expected 1 to %d", P, L, L);
    const double head = nb_proj_head_flops(m) / nb_proj_block_flops(m);
    int best = L - (P - 1);
    for (int last = P > 1 ? 0 : L; last <= L - (P - 1); last++)
        if (slowest(L, P, last, head) < slowest(L, P, best, head)) best = last;
    if (P == 1) best = L;
    /* The others share L - best as evenly as they can, the first ones taking the remainder. */
    for (int s = 0; s < P - 1; s++) blocks[s] = (L - best) / (P - 1) + (s < (L - best) % (P - 1));
    blocks[P - 1] = best;
    return 0;
}

static int check_device(const nb_proj_device *d) {
    const double positive[] = {d->flops_per_second, d->backward_ratio, d->bytes_per_second, d->act_bytes,
                               d->grad_bytes};
    static const char *const names[] = {"flops per second", "backward ratio", "bandwidth", "activation bytes",
                                        "gradient bytes"};
    for (int i = 0; i < 5; i++)
        if (!(positive[i] > 0) || !isfinite(positive[i]))
            return nb_fail("projection: %s = %g: expected a finite number > 0", names[i], positive[i]);
    if (!(d->weight_share > 0 && d->weight_share < 1))
        return nb_fail("projection: weight share = %g: expected a number between 0 and 1 (W's part of a backward)",
                       d->weight_share);
    const double nonneg[] = {d->update_seconds_per_param, d->state_bytes_per_param, d->version_bytes_per_param,
                             d->latency};
    static const char *const names0[] = {"update seconds per parameter", "state bytes per parameter",
                                         "version bytes per parameter", "latency"};
    for (int i = 0; i < 4; i++)
        if (!(nonneg[i] >= 0) || !isfinite(nonneg[i]))
            return nb_fail("projection: %s = %g: expected a finite number >= 0", names0[i], nonneg[i]);
    return 0;
}

int nb_proj_stage_costs(const nb_proj_shape *m, const nb_proj_device *dev, int P, int micro_batch, double *buf,
                        nb_proj_stages *out) {
    memset(out, 0, sizeof *out);
    if (check_device(dev)) return -1;
    if (micro_batch < 1) return nb_fail("projection: micro-batch of %d sequences: expected >= 1", micro_batch);
    int *blocks = malloc(sizeof(int) * (size_t)P);
    if (!blocks) return nb_fail("out of memory splitting %d stages", P);
    if (nb_proj_split(m, P, blocks)) {
        free(blocks);
        return -1;
    }
    double *fwd = buf, *bwd = buf + P, *upd = buf + 2 * P, *params = buf + 3 * P, *act = buf + 4 * P;
    const double b = micro_batch, embed = (double)m->vocab * m->d_model;
    for (int s = 0; s < P; s++) {
        const int last = s == P - 1;
        const double flops = blocks[s] * nb_proj_block_flops(m) + (last ? nb_proj_head_flops(m) : 0);
        fwd[s] = b * flops / dev->flops_per_second;
        bwd[s] = dev->backward_ratio * fwd[s];
        /* Stage 0 holds the embedding; the last the head (a tied model's copy of it when P > 1) and the
         * final norm. */
        params[s] = blocks[s] * nb_proj_block_params(m) + (s == 0 ? embed : 0) +
                    (last ? (m->tied && P == 1 ? 0 : embed) + m->d_model : 0);
        upd[s] = params[s] * dev->update_seconds_per_param;
        act[s] = b * (blocks[s] * 34.0 * m->seq * m->d_model + (last ? 4.0 * m->seq * m->vocab : 0));
    }
    free(blocks);
    out->forward = fwd;
    out->backward = bwd;
    out->update = upd;
    out->params = params;
    out->act_memory = act;
    out->act_message = b * m->seq * m->d_model * dev->act_bytes;
    return 0;
}

static int check_layout(const nb_proj_layout *l) {
    if (l->kind != NB_PIPE_GPIPE && l->kind != NB_PIPE_1F1B && l->kind != NB_PIPE_2BW && l->kind != NB_PIPE_INTERLEAVED &&
        l->kind != NB_PIPE_ZBH1)
        return nb_fail("projection: pipeline %s: expected gpipe, 1f1b, 2bw, interleaved or zbh1",
                       nb_pipe_kind_name(l->kind));
    if (l->n_stages < 1 || l->n_replicas < 1 || l->n_micro < 1 || l->micro_batch < 1 || l->n_chunks < 0)
        return nb_fail("projection: P = %d, D = %d, M = %d, micro-batch %d, chunks %d: expected all >= 1",
                       l->n_stages, l->n_replicas, l->n_micro, l->micro_batch, l->n_chunks);
    return 0;
}

/* The most micro-batch chunks whose activations a stage holds (nb_pipe_stage_peak), the largest over the
 * stages in *units, and the bytes a stage holds in activations (each chunk's share act_memory / v) in
 * *bytes, the largest over the stages. */
static void peak_activations(const nb_pipe_schedule *sc, const double *act_memory, int *units, double *bytes) {
    const int v = sc->n_chunks > 0 ? sc->n_chunks : 1;
    *units = 0;
    *bytes = 0;
    for (int s = 0; s < sc->n_stages; s++) {
        const int most = nb_pipe_stage_peak(sc, s);
        if (most > *units) *units = most;
        const double b = act_memory ? most * act_memory[s] / v : 0;
        if (b > *bytes) *bytes = b;
    }
}

/* The end of each step: the last stage's APPLY of it to finish (ends[PROJ_STEPS]). */
static void step_ends(const nb_low_schedule *l, const nb_low_sim *sim, double *ends) {
    for (int t = 0; t < PROJ_STEPS; t++) ends[t] = 0;
    for (int e = 0; e < l->n_stages; e++)
        for (size_t g = l->start[e]; g < l->start[e + 1]; g++) {
            const nb_low_action *a = &l->actions[g];
            if (a->op == NB_LOW_APPLY && a->step >= 0 && a->step < PROJ_STEPS && sim->t_finish[g] > ends[a->step])
                ends[a->step] = sim->t_finish[g];
        }
}

/* The stages' busy share of the window [t0, t1): every action's time inside it. */
static double busy_share(const nb_low_schedule *l, const nb_low_sim *sim, double t0, double t1) {
    double busy = 0;
    for (int e = 0; e < l->n_stages; e++)
        for (size_t g = l->start[e]; g < l->start[e + 1]; g++) {
            const double a = fmax(sim->t_start[g], t0), b = fmin(sim->t_finish[g], t1);
            if (b > a) busy += b - a;
        }
    return busy / (l->n_stages * (t1 - t0));
}

int nb_proj_simulate(const nb_proj_layout *layout, const nb_proj_device *dev, const nb_proj_stages *st, int seq,
                     nb_proj_result *out) {
    memset(out, 0, sizeof *out);
    if (check_layout(layout) || check_device(dev)) return -1;
    const int P = layout->n_stages, D = layout->n_replicas;
    nb_pipe_gen_options go = {layout->kind == NB_PIPE_INTERLEAVED ? (layout->n_chunks ? layout->n_chunks : 2) : 0};
    nb_pipe_schedule sc;
    if (nb_pipe_generate_ex(&sc, layout->kind, P, layout->n_micro, PROJ_STEPS, &go)) return -1;
    double *buf = malloc(sizeof(double) * 6 * (size_t)P);
    nb_low_schedule l;
    memset(&l, 0, sizeof l);
    nb_low_sim sim;
    memset(&sim, 0, sizeof sim);
    int rc = -1;
    if (!buf) {
        nb_fail("out of memory projecting %d stages", P);
        goto done;
    }
    double *weight = buf + 4 * P, *reduce = buf + 5 * P;
    for (int s = 0; s < P; s++) {
        weight[s] = st->backward_weight ? st->backward_weight[s] : dev->weight_share * st->backward[s];
        const double params = st->params ? st->params[s] : 0;
        reduce[s] = nb_proj_allreduce_seconds(params * dev->grad_bytes, D, dev->latency, dev->bytes_per_second);
        if (reduce[s] > out->reduce_s) out->reduce_s = reduce[s];
    }
    const nb_pipe_costs pc = {st->forward, st->backward, st->update, dev->latency, weight};
    nb_low_costs lc;
    if (nb_pipe_action_costs(&sc, &pc, buf, &lc)) goto done;
    lc.bytes[NB_MSG_ACT] = lc.bytes[NB_MSG_GRAD] = st->act_message;
    lc.bytes_per_second = dev->bytes_per_second;
    lc.reduce = reduce;
    const nb_low_options lo = {.replicas = D};
    if (nb_pipe_lower(&sc, &lo, &l) || nb_low_simulate(&l, &lc, &sim)) goto done;
    double ends[PROJ_STEPS];
    step_ends(&l, &sim, ends);
    out->step_s = (ends[STEADY_TO] - ends[STEADY_FROM - 1]) / (STEADY_TO - STEADY_FROM + 1);
    out->idle_fraction = 1 - busy_share(&l, &sim, ends[STEADY_FROM - 1], ends[STEADY_TO]);
    out->tokens_per_s = seq > 0 ? (double)D * layout->n_micro * layout->micro_batch * seq / out->step_s : 0;
    out->act_message_bytes = st->act_message;
    double act_bytes;
    peak_activations(&sc, st->act_memory, &out->peak_activations, &act_bytes);
    /* The memory of the stage that holds the most: its state, 2BW's second weight version, and its peak
     * activations (taken on the stage with the most; their sum bounds the worst stage from above). */
    const int extra_versions = layout->kind == NB_PIPE_2BW ? 1 : 0;
    double state = 0;
    for (int s = 0; s < P; s++) {
        const double params = st->params ? st->params[s] : 0;
        const double b = params * (dev->state_bytes_per_param + extra_versions * dev->version_bytes_per_param);
        if (b > state) state = b;
    }
    out->memory_bytes = state + act_bytes;
    out->stage_forward_s[0] = out->stage_forward_s[1] = st->forward[0];
    for (int s = 1; s < P; s++) {
        out->stage_forward_s[0] = fmin(out->stage_forward_s[0], st->forward[s]);
        out->stage_forward_s[1] = fmax(out->stage_forward_s[1], st->forward[s]);
    }
    rc = 0;
done:
    nb_low_sim_free(&sim);
    nb_low_free(&l);
    nb_pipe_free(&sc);
    free(buf);
    return rc;
}

int nb_proj_run(const nb_proj_shape *m, const nb_proj_device *dev, const nb_proj_layout *layout, nb_proj_result *out) {
    memset(out, 0, sizeof *out);
    if (check_layout(layout)) return -1;
    const int P = layout->n_stages;
    double *buf = malloc(sizeof(double) * 5 * (size_t)P);
    if (!buf) return nb_fail("out of memory projecting %d stages", P);
    nb_proj_stages st;
    int rc = nb_proj_stage_costs(m, dev, P, layout->micro_batch, buf, &st);
    if (!rc) rc = nb_proj_simulate(layout, dev, &st, m->seq, out);
    free(buf);
    return rc;
}
