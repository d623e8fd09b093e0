/* The lowered lists' simulator (nb_low_simulate): the validator's run with times, every message
 * costed (latency and bytes over the link's bandwidth). docs/schedules.md, "The lowered form". */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "nobubble/pipeline.h"
#include "pipeline/lowered_dry_run.h"
#include "util/error.h"

static int check_cost(const char *name, int stage, double v) {
    if (v >= 0 && isfinite(v)) return 0;
    if (stage < 0) return nb_fail("lowered costs: %s = %g: expected a finite number >= 0", name, v);
    return nb_fail("lowered costs: %s of stage %d = %g: expected a finite number >= 0", name, stage, v);
}

static int check_costs(const nb_low_costs *c, int P) {
    const double *arrays[] = {c->forward, c->backward, c->update, c->eval, c->backward_input, c->backward_weight,
                              c->reduce};
    static const char *const names[] = {"forward", "backward", "update", "eval", "backward input", "backward weight",
                                        "reduce"};
    for (int i = 0; i < 7; i++)
        for (int s = 0; arrays[i] && s < P; s++)
            if (check_cost(names[i], s, arrays[i][s])) return -1;
    if (check_cost("save", -1, c->save) || check_cost("action", -1, c->action) || check_cost("latency", -1, c->latency) ||
        check_cost("coordinator latency", -1, c->coordinator_latency) ||
        check_cost("bytes per second", -1, c->bytes_per_second))
        return -1;
    for (int k = 0; k < NB_MSG_KINDS; k++)
        if (check_cost(nb_msg_kind_name((nb_msg_kind)k), -1, c->bytes[k])) return -1;
    return 0;
}

void nb_low_sim_free(nb_low_sim *sim) {
    if (!sim) return;
    free(sim->busy);
    free(sim->idle);
    free(sim->t_start);
    free(sim->t_finish);
    free(sim->match);
    memset(sim, 0, sizeof *sim);
}

/* Makespan, busy and idle per endpoint, and the messages (counted at their SEND). */
static void summarize(const nb_low_schedule *l, const nb_low_costs *c, nb_low_sim *out) {
    const size_t total = l->start[l->n_stages + 1];
    for (size_t g = 0; g < total; g++)
        if (out->t_finish[g] > out->makespan) out->makespan = out->t_finish[g];
    for (int e = 0; e <= l->n_stages; e++) {
        for (size_t g = l->start[e]; g < l->start[e + 1]; g++) {
            const nb_low_action *a = &l->actions[g];
            out->busy[e] += out->t_finish[g] - out->t_start[g];
            if (a->op != NB_LOW_SEND) continue;
            out->msg_count[a->msg]++;
            out->msg_bytes[a->msg] += c->bytes[a->msg];
        }
        out->idle[e] = out->makespan - out->busy[e];
    }
}

int nb_low_simulate(const nb_low_schedule *l, const nb_low_costs *costs, nb_low_sim *out) {
    memset(out, 0, sizeof *out);
    size_t *partner;
    if (lowered_prepare(l, &partner)) return -1;
    if (check_costs(costs, l->n_stages)) {
        free(partner);
        return -1;
    }
    const size_t E = (size_t)l->n_stages + 1, total = l->start[l->n_stages + 1];
    out->n_endpoints = (int)E;
    out->busy = calloc(E, sizeof(double));
    out->idle = calloc(E, sizeof(double));
    out->t_start = malloc(sizeof(double) * (total ? total : 1));
    out->t_finish = malloc(sizeof(double) * (total ? total : 1));
    int rc;
    if (!out->busy || !out->idle || !out->t_start || !out->t_finish)
        rc = nb_fail("out of memory simulating a lowered schedule of %zu actions", total);
    else if (!(rc = lowered_dry_run(l, partner, costs, out->t_start, out->t_finish)))
        summarize(l, costs, out);
    if (rc) {
        free(partner);
        nb_low_sim_free(out);
        return rc;
    }
    for (size_t g = 0; g < total; g++)  /* the pairing filled only the messages' entries */
        if (!lowered_is_message(l->actions[g].op)) partner[g] = (size_t)-1;
    out->match = partner;
    return 0;
}
