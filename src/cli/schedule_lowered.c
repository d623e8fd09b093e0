/* nobubble schedule --lowered (docs/schedules.md, "The lowered form"): the schedule's per-endpoint lists
 * with every message explicit, validated and simulated with the messages' costs, printed as text (one
 * action a line), JSON or an SVG timeline with an arrow per message. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cli/schedule_lowered.h"

/* Above these the lists are not printed (text) or written (JSON, SVG): the numbers still are. */
#define TEXT_MAX_ACTIONS 20000
#define FILE_MAX_ACTIONS 1000000

void schedule_svg_begin(FILE *f, double width, double height, const char *title) {
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" "
            "font-family=\"sans-serif\" font-size=\"11\">\n", width, height, width, height);
    fprintf(f, "<title>%s</title>\n", title);
}

void schedule_print_costs(FILE *f, const char *name, const double *c, int P) {
    int same = 1;
    for (int s = 1; s < P; s++) same &= c[s] == c[0];
    fprintf(f, "%s ", name);
    if (same) fprintf(f, "%g", c[0]);
    else
        for (int s = 0; s < P; s++) fprintf(f, "%s%g", s ? "," : "", c[s]);
}

/* The steps after which to evaluate or save: every n-th (n > 0), none when n = 0. */
static unsigned char *every_nth(int n_steps, int n) {
    unsigned char *at = calloc((size_t)n_steps, 1);
    for (int t = 0; at && n > 0 && t < n_steps; t++) at[t] = (t + 1) % n == 0;
    return at;
}

static int lower(const nb_pipe_schedule *sc, const schedule_lowered_args *a, nb_low_schedule *l) {
    unsigned char *eval_at = every_nth(sc->n_steps, a->eval_every), *save_at = every_nth(sc->n_steps, a->save_every);
    nb_low_options o = {0};
    o.tied = a->tied;
    o.clip = a->clip;
    o.eval_batches = a->eval_every > 0 ? a->eval_batches : 0;
    o.eval_at = eval_at;
    o.save_at = save_at;
    o.save_final = a->save_every > 0;  /* as a run with --save-dir saves its last step */
    int rc = eval_at && save_at ? nb_pipe_lower(sc, &o, l) : -1;
    if (!eval_at || !save_at) fprintf(stderr, "nobubble schedule: out of memory\n");
    else if (rc || nb_low_validate(l)) {
        fprintf(stderr, "nobubble schedule: %s\n", nb_last_error());
        rc = -1;
    }
    free(eval_at);
    free(save_at);
    return rc;
}

static void options_text(const schedule_lowered_args *a, char *buf, size_t size) {
    int n = snprintf(buf, size, "%s%s", a->tied ? ", tied" : "", a->clip ? ", clip" : "");
    if (a->eval_every > 0 && n >= 0 && (size_t)n < size)
        n += snprintf(buf + n, size - (size_t)n, ", eval every %d (%d batches)", a->eval_every, a->eval_batches);
    if (a->save_every > 0 && n >= 0 && (size_t)n < size) snprintf(buf + n, size - (size_t)n, ", save every %d", a->save_every);
}

static void print_lists(const nb_low_schedule *l, const nb_low_sim *sim) {
    const size_t total = l->start[l->n_stages + 1];
    if (total > TEXT_MAX_ACTIONS) {
        printf("(action lists skipped: %zu actions is too many to print (at most %d); use --json)\n", total, TEXT_MAX_ACTIONS);
        return;
    }
    char who[32], what[96], when[48];
    for (int e = 0; e <= l->n_stages; e++) {
        printf("%s: %zu actions (index, time, action)\n", nb_low_endpoint_text(e, l->n_stages, who, sizeof who),
               l->start[e + 1] - l->start[e]);
        for (size_t g = l->start[e]; g < l->start[e + 1]; g++) {
            if (sim->t_finish[g] > sim->t_start[g]) snprintf(when, sizeof when, "%g..%g", sim->t_start[g], sim->t_finish[g]);
            else snprintf(when, sizeof when, "%g", sim->t_start[g]);
            printf("  %6zu  %-16s %s\n", g - l->start[e], when, nb_low_action_text(&l->actions[g], l->n_stages, what, sizeof what));
        }
    }
}

static void print_text(const nb_pipe_schedule *sc, const char *kind, const nb_low_schedule *l, const nb_low_sim *sim,
                       const schedule_lowered_args *a) {
    char opts[160], who[32];
    options_text(a, opts, sizeof opts);
    printf("lowered %s: %d stages and the coordinator, %d micro-batches per step, %d steps%s%s\n", kind, sc->n_stages,
           sc->n_micro, sc->n_steps, *opts ? "; " : "", *opts ? opts + 2 : "");
    printf("costs: ");
    schedule_print_costs(stdout, "forward", a->forward, sc->n_stages);
    schedule_print_costs(stdout, ", backward", a->backward, sc->n_stages);
    schedule_print_costs(stdout, ", update", a->update, sc->n_stages);
    printf(", eval = forward, comm %g between stages (none to the coordinator), ACT/GRAD/EVAL_ACT %g bytes", a->comm,
           a->act_bytes);
    if (a->bandwidth > 0) printf(" at %g bytes per unit of time\n", a->bandwidth);
    else printf(" (bandwidth unlimited)\n");
    print_lists(l, sim);
    printf("makespan %g\n%-12s %10s %10s %7s %8s\n", sim->makespan, "endpoint", "busy", "idle", "idle%", "actions");
    for (int e = 0; e <= l->n_stages; e++)
        printf("%-12s %10g %10g %6.1f%% %8zu\n", nb_low_endpoint_text(e, l->n_stages, who, sizeof who), sim->busy[e],
               sim->idle[e], sim->makespan > 0 ? 100 * sim->idle[e] / sim->makespan : 0.0, l->start[e + 1] - l->start[e]);
    printf("%-12s %10s %12s\n", "message", "count", "bytes");
    for (int k = 0; k < NB_MSG_KINDS; k++)
        if (sim->msg_count[k]) printf("%-12s %10lld %12g\n", nb_msg_kind_name((nb_msg_kind)k), sim->msg_count[k], sim->msg_bytes[k]);
    if (a->svg) printf("wrote %s\n", a->svg);
}

static void print_json_action(const nb_low_action *x, double t0, double t1) {
    printf("{\"op\": \"%s\", \"step\": %d", nb_low_op_name(x->op), x->step);
    if (x->op == NB_LOW_SEND || x->op == NB_LOW_RECV)
        printf(", \"msg\": \"%s\", \"peer\": %d, \"index\": %d", nb_msg_kind_name(x->msg), x->peer, x->index);
    if (x->chunk) printf(", \"chunk\": %d", x->chunk);
    else if (x->op == NB_LOW_FORWARD || x->op == NB_LOW_BACKWARD || x->op == NB_LOW_BACKWARD_INPUT ||
             x->op == NB_LOW_BACKWARD_WEIGHT)
        printf(", \"mb\": %d, \"version\": %d", x->mb, x->version);
    else if (x->op == NB_LOW_EVAL) printf(", \"index\": %d", x->index);
    printf(", \"start\": %.17g, \"finish\": %.17g}", t0, t1);
}

static void print_json(const nb_pipe_schedule *sc, const char *kind, const nb_low_schedule *l, const nb_low_sim *sim,
                       const schedule_lowered_args *a) {
    char who[32];
    printf("{\"kind\": \"%s\", \"lowered\": true, \"stages\": %d, \"coordinator\": %d, \"microbatches\": %d, "
           "\"optimizer_steps\": %d, \"tied\": %s, \"clip\": %s, \"eval_every\": %d, \"eval_batches\": %d, "
           "\"save_every\": %d, \"comm_cost\": %.17g, \"act_bytes\": %.17g, \"bandwidth\": %.17g, \"makespan\": %.17g, "
           "\"actions\": %zu, \"messages\": {", kind, sc->n_stages, sc->n_stages, sc->n_micro, sc->n_steps,
           a->tied ? "true" : "false", a->clip ? "true" : "false", a->eval_every, a->eval_every > 0 ? a->eval_batches : 0,
           a->save_every, a->comm, a->act_bytes, a->bandwidth, sim->makespan, l->start[l->n_stages + 1]);
    for (int k = 0, n = 0; k < NB_MSG_KINDS; k++)
        if (sim->msg_count[k])
            printf("%s\"%s\": {\"count\": %lld, \"bytes\": %.17g}", n++ ? ", " : "", nb_msg_kind_name((nb_msg_kind)k),
                   sim->msg_count[k], sim->msg_bytes[k]);
    printf("}, \"endpoints\": [");
    for (int e = 0; e <= l->n_stages; e++) {
        printf("%s\n  {\"endpoint\": %d, \"name\": \"%s\", \"busy\": %.17g, \"idle\": %.17g, \"actions\": [", e ? "," : "", e,
               nb_low_endpoint_text(e, l->n_stages, who, sizeof who), sim->busy[e], sim->idle[e]);
        for (size_t g = l->start[e]; g < l->start[e + 1]; g++) {
            printf("%s\n    ", g > l->start[e] ? "," : "");
            print_json_action(&l->actions[g], sim->t_start[g], sim->t_finish[g]);
        }
        printf("]}");
    }
    printf("\n]%s%s%s}\n", a->svg ? ", \"svg\": \"" : "", a->svg ? a->svg : "", a->svg ? "\"" : "");
}

/* Box styles of the lowered picture: the computing actions and the coordinator's. */
enum { BOX_FWD, BOX_BWD, BOX_UPD, BOX_EVAL, BOX_SAVE, BOX_COORD, BOX_WGT, BOX_KINDS };
static const char *const box_names[BOX_KINDS] = {"forward", "backward", "update", "eval", "save", "coordinator", "weight grad"};
static const char *const box_classes[BOX_KINDS] = {"fwd", "bwd", "upd", "eval", "save", "coord", "wgt"};
static const char *const box_colors[BOX_KINDS] = {"#4e79a7", "#f28e2b", "#59a14f", "#b07aa1", "#9c755f", "#8c8c8c", "#e15759"};

static int box_of(nb_low_op op) {
    switch (op) {
    case NB_LOW_FORWARD: return BOX_FWD;
    case NB_LOW_BACKWARD: case NB_LOW_BACKWARD_INPUT: return BOX_BWD;
    case NB_LOW_BACKWARD_WEIGHT: return BOX_WGT;
    case NB_LOW_GRADS: case NB_LOW_APPLY: case NB_LOW_REDUCE: return BOX_UPD;
    case NB_LOW_EVAL: return BOX_EVAL;
    case NB_LOW_SAVE: return BOX_SAVE;
    case NB_LOW_SEND: case NB_LOW_RECV: return -1;
    default: return BOX_COORD;
    }
}

/* The geometry of the picture: endpoint e's row starts at top + e * row_h; time t is at left + t * px. */
typedef struct {
    double left, top, px, row_h;
} frame;

static void svg_boxes(FILE *f, const nb_low_schedule *l, const nb_low_sim *sim, const frame *fr, int e) {
    char what[96];
    for (size_t g = l->start[e]; g < l->start[e + 1]; g++) {
        const int k = box_of(l->actions[g].op);
        if (k < 0) continue;
        double w = (sim->t_finish[g] - sim->t_start[g]) * fr->px;
        if (w < 1.5) w = 1.5;  /* an instant (a zero-cost update, the coordinator's bookkeeping) still shows */
        fprintf(f, "<rect class=\"%s\" x=\"%.3f\" y=\"%.2f\" width=\"%.3f\" height=\"%.2f\" fill=\"%s\"><title>%s</title></rect>\n",
                box_classes[k], fr->left + sim->t_start[g] * fr->px, fr->top + e * fr->row_h, w, fr->row_h - 2, box_colors[k],
                nb_low_action_text(&l->actions[g], l->n_stages, what, sizeof what));
    }
}

/* One arrow per message, from its SEND's finish on the sender's row to its RECV's start on the receiver's. */
static void svg_arrows(FILE *f, const nb_low_schedule *l, const nb_low_sim *sim, const frame *fr, int e) {
    char what[96];
    for (size_t g = l->start[e]; g < l->start[e + 1]; g++) {
        const nb_low_action *x = &l->actions[g];
        if (x->op != NB_LOW_SEND) continue;
        const size_t r = sim->match[g];
        fprintf(f, "<line class=\"msg\" x1=\"%.3f\" y1=\"%.2f\" x2=\"%.3f\" y2=\"%.2f\" stroke=\"#333\" stroke-width=\"0.7\" "
                "marker-end=\"url(#arrow)\"><title>%s at %g, received at %g</title></line>\n",
                fr->left + sim->t_finish[g] * fr->px, fr->top + (e + 0.5) * fr->row_h, fr->left + sim->t_start[r] * fr->px,
                fr->top + (x->peer + 0.5) * fr->row_h, nb_low_action_text(x, l->n_stages, what, sizeof what),
                sim->t_finish[g], sim->t_start[r]);
    }
}

static int write_svg(const char *path, const nb_low_schedule *l, const nb_low_sim *sim, const char *title) {
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "nobubble schedule: --svg %s: cannot write: %s\n", path, strerror(errno));
        return -1;
    }
    const int E = l->n_stages + 1;
    const double plot_w = 1100, row_h = E <= 48 ? 24 : (900.0 / E > 3 ? 900.0 / E : 3);
    const frame fr = {90, 64, sim->makespan > 0 ? plot_w / sim->makespan : 1, row_h};
    const double width = fr.left + plot_w + 20, height = fr.top + E * row_h + 30;
    char who[32];
    schedule_svg_begin(f, width, height, title);
    fprintf(f, "<defs><marker id=\"arrow\" viewBox=\"0 0 6 6\" refX=\"6\" refY=\"3\" markerWidth=\"6\" markerHeight=\"6\" "
            "orient=\"auto\"><path d=\"M0,0 L6,3 L0,6 z\" fill=\"#333\"/></marker></defs>\n");
    fprintf(f, "<text x=\"%g\" y=\"20\" font-size=\"14\">%s</text>\n", fr.left, title);
    for (int k = 0; k < BOX_KINDS; k++)
        fprintf(f, "<rect class=\"legend\" x=\"%g\" y=\"32\" width=\"14\" height=\"14\" fill=\"%s\" stroke=\"#999\"/>"
                "<text x=\"%g\" y=\"43\">%s</text>\n", fr.left + k * 100, box_colors[k], fr.left + k * 100 + 18, box_names[k]);
    for (int e = 0; e < E; e++) {
        if (row_h >= 10)
            fprintf(f, "<text x=\"4\" y=\"%g\">%s</text>\n", fr.top + (e + 0.7) * row_h,
                    nb_low_endpoint_text(e, l->n_stages, who, sizeof who));
        svg_boxes(f, l, sim, &fr, e);
    }
    for (int e = 0; e < E; e++) svg_arrows(f, l, sim, &fr, e);
    fprintf(f, "<text x=\"%g\" y=\"%g\">time 0 .. %g</text>\n</svg>\n", fr.left, fr.top + E * row_h + 18, sim->makespan);
    if (fclose(f)) {
        fprintf(stderr, "nobubble schedule: --svg %s: write failed: %s\n", path, strerror(errno));
        return -1;
    }
    return 0;
}

/* The schedule's costs per action (a chunk's the stage's / v, a split backward's B and W), an EVAL a
 * forward of the whole stage, and the messages' bytes. */
static int costs_of(const nb_pipe_schedule *sc, const schedule_lowered_args *a, double *buf, nb_low_costs *c) {
    const nb_pipe_costs pc = {a->forward, a->backward, a->update, a->comm, a->backward_weight};
    if (nb_pipe_action_costs(sc, &pc, buf, c)) {
        fprintf(stderr, "nobubble schedule: %s\n", nb_last_error());
        return -1;
    }
    c->eval = a->forward;
    c->bytes_per_second = a->bandwidth;
    c->bytes[NB_MSG_ACT] = c->bytes[NB_MSG_GRAD] = c->bytes[NB_MSG_EVAL_ACT] = a->act_bytes;
    return 0;
}

int schedule_lowered(const nb_pipe_schedule *sc, const char *kind, const schedule_lowered_args *a) {
    nb_low_schedule l = {0};
    nb_low_sim sim = {0};
    int status = 2;
    nb_low_costs costs;
    double *buf = malloc(sizeof(double) * 4 * (size_t)sc->n_stages);
    if (!buf) fprintf(stderr, "nobubble schedule: out of memory\n");
    if (!buf || costs_of(sc, a, buf, &costs) || lower(sc, a, &l)) goto out;
    if (nb_low_simulate(&l, &costs, &sim)) {
        fprintf(stderr, "nobubble schedule: %s\n", nb_last_error());
        goto out;
    }
    status = 1;
    const size_t total = l.start[l.n_stages + 1];
    if ((a->json || a->svg) && total > FILE_MAX_ACTIONS) {
        fprintf(stderr, "nobubble schedule: --lowered %s: %zu actions is too many (at most %d); use fewer stages, "
                "micro-batches or steps\n", a->svg ? "--svg" : "--json", total, FILE_MAX_ACTIONS);
        goto out;
    }
    char title[256];
    snprintf(title, sizeof title, "lowered %s: %d stages and the coordinator, %d micro-batches x %d steps; makespan %g",
             kind, sc->n_stages, sc->n_micro, sc->n_steps, sim.makespan);
    if (a->svg && write_svg(a->svg, &l, &sim, title)) goto out;
    if (a->json) print_json(sc, kind, &l, &sim, a);
    else print_text(sc, kind, &l, &sim, a);
    status = 0;
out:
    nb_low_sim_free(&sim);
    nb_low_free(&l);
    free(buf);
    return status;
}
