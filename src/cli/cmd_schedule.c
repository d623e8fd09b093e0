/* nobubble schedule: generates a pipeline schedule (GPipe, 1F1B, PipeDream, 2BW, interleaved 1F1B, ZB-H1),
 * validates it, simulates it (as its lowering, nb_pipe_simulate) with per-stage costs and prints the timeline
 * as text, the bubble fraction, per-stage idle fraction, peak in-flight activations and weight versions;
 * --svg writes the timeline as a picture, --json prints the numbers as JSON, --compare one table of every
 * kind side by side. See docs/schedules.md. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cli/args.h"
#include "cli/commands.h"
#include "cli/schedule_lowered.h"
#include "nobubble/pipeline.h"
#include "util/decimal.h"
#include "util/range.h"

/* %s: the kinds, "gpipe|1f1b|pipedream|2bw|interleaved|zbh1|sequential" (kinds_text). */
static const char usage_format[] =
    "usage: nobubble schedule --kind %s --stages P --microbatches M [--steps S]\n"
    "                         [--chunks V] [--forward-cost F[,F...]] [--backward-cost B[,B...]]\n"
    "                         [--backward-weight-cost W[,W...]] [--update-cost U[,U...]] [--comm-cost C]\n"
    "                         [--svg FILE] [--json]\n"
    "                         [--lowered [--tied] [--clip] [--eval-every N [--eval-batches B]] [--save-every N]\n"
    "                                    [--act-bytes A] [--bandwidth BW]]\n"
    "       nobubble schedule --compare --stages P --microbatches M [--steps S] [--chunks V] [costs] [--json]\n"
    "Simulates a pipeline schedule lock-step and prints its timeline, bubble fraction, idle fraction,\n"
    "peak in-flight activations and weight versions per stage. A cost list has one value or one per stage.\n"
    "PipeDream updates after every micro-batch: it runs M x S micro-batches (M x S optimizer steps).\n"
    "Interleaved runs V model chunks per stage, each at 1/V of the stage's costs (M a multiple of P); zbh1\n"
    "splits each backward into its input gradient (B) and its weight gradient (W, --backward-weight-cost).\n"
    "--compare prints every pipeline kind's bubble fraction, peak activations and weight versions side by side.\n"
    "--lowered shows instead the lists a run executes: per stage and for the coordinator, every action with\n"
    "every message as a SEND and its RECV, validated and simulated with the messages' costs.";

#define GRID_MAX_CELLS 2000
#define GRID_MAX_TOTAL 200000
#define SVG_MAX_ACTIONS 1000000

/* One value for every stage, or one per stage; each a finite number > 0 (>= 0 when zero_ok). */
/* Costs are finite, at most MAX_COST, so that every time the simulator adds up stays far from overflow. */
#define MAX_COST 1e9
/* Stages x micro-batches x steps at most this: the simulation holds the schedule's lowered lists, about
 * 6 low-level actions per pass with their times and pairing (about 4 GB and 15 s of CPU at the cap). */
#define MAX_PASSES 10000000LL

static double *parse_costs(const char *flag, const char *text, int P, int zero_ok) {
    double *out = malloc(sizeof(double) * (size_t)P);
    char *buf = strdup(text);
    if (!out || !buf) {
        fprintf(stderr, "nobubble schedule: out of memory\n");
        goto fail;
    }
    int n = 0;
    for (char *p = buf;; n++) {
        char *comma = strchr(p, ','), *end;
        if (comma) *comma = 0;
        errno = 0;
        double v = strtod(p, &end);
        if (!nb_is_decimal(p, 0) || errno || end == p || *end || !isfinite(v)) {
            fprintf(stderr, "nobubble schedule: %s '%s': '%s' is not a decimal number (expected %s)\n", flag, text, p,
                    zero_ok ? "numbers >= 0" : "numbers > 0");
            goto fail;
        }
        if (zero_ok ? v < 0 : v <= 0) {
            fprintf(stderr, "nobubble schedule: %s '%s': %g: expected %s\n", flag, text, v,
                    zero_ok ? "a cost >= 0" : "a cost > 0");
            goto fail;
        }
        if (v > MAX_COST) {
            fprintf(stderr, "nobubble schedule: %s '%s': %g: expected a cost of at most %g\n", flag, text, v, MAX_COST);
            goto fail;
        }
        if (n < P) out[n] = v;
        if (!comma) break;
        p = comma + 1;
    }
    n++;
    if (n != 1 && P == 1) {
        fprintf(stderr, "nobubble schedule: %s '%s': %d values: expected one value\n", flag, text, n);
        goto fail;
    }
    if (n != 1 && n != P) {
        fprintf(stderr, "nobubble schedule: %s '%s': %d values for %d stages: expected 1 value or %d (one per stage)\n",
                flag, text, n, P, P);
        goto fail;
    }
    if (n == 1)
        for (int s = 1; s < P; s++) out[s] = out[0];
    free(buf);
    return out;
fail:
    free(out);
    free(buf);
    return NULL;
}

/* Whether a schedule splits its backwards (B and W actions). */
static int splits_backward(const nb_pipe_schedule *sc) {
    for (size_t i = 0; i < nb_pipe_n_actions(sc); i++)
        if (sc->actions[i].op == NB_PIPE_BACKWARD_WEIGHT) return 1;
    return 0;
}

/* An action's letter in the grid: F, B (a whole backward, or a split one's input gradient), W, U. */
static char letter_of(nb_pipe_op op) {
    switch (op) {
    case NB_PIPE_FORWARD: return 'F';
    case NB_PIPE_BACKWARD: case NB_PIPE_BACKWARD_INPUT: return 'B';
    case NB_PIPE_BACKWARD_WEIGHT: return 'W';
    case NB_PIPE_UPDATE: return 'U';
    }
    return '?';
}

/* One grid row: the actions of stage s (of one chunk when chunk >= 0: the cells where the stage runs
 * another chunk are blank), '.' where the stage is idle. */
static void grid_row(const nb_pipe_schedule *sc, const nb_pipe_sim *sim, int s, int chunk, double unit, char *row,
                     long cells) {
    memset(row, '.', (size_t)cells);
    row[cells] = 0;
    for (size_t i = sc->start[s]; i < sc->start[s + 1]; i++) {
        const nb_pipe_action *a = &sc->actions[i];
        long c0 = lround(sim->t_start[i] / unit), c1 = lround(sim->t_finish[i] / unit);
        if (sim->t_finish[i] <= sim->t_start[i]) continue; /* zero-length update */
        if (c1 <= c0) c1 = c0 + 1;
        if (c1 > cells) c1 = cells;
        char label[24];
        const char letter = letter_of(a->op);
        const int other = chunk >= 0 && a->op != NB_PIPE_UPDATE && a->chunk != chunk;
        int len = snprintf(label, sizeof label, "%c%d", letter, a->op == NB_PIPE_UPDATE ? a->step : a->mb);
        for (long c = c0; c < c1; c++) {
            long k = c - c0;
            row[c] = other ? ' ' : (c1 - c0 >= len && k < len) ? label[k] : (k == 0 ? letter : (char)(letter + 32));
        }
    }
}

/* The text grid: one row per stage (per stage and chunk with chunks), one cell per `unit` of time. */
static void print_grid(const nb_pipe_schedule *sc, const nb_pipe_sim *sim, double unit) {
    const int P = sc->n_stages, v = sc->n_chunks;
    const double cells_d = ceil(sim->makespan / unit - 1e-9);   /* compared before any cast to an integer */
    if (!(cells_d <= GRID_MAX_CELLS) || cells_d * P * v > GRID_MAX_TOTAL) {
        printf("(timeline grid skipped: %d stages x %.4g cells is too large to print; use --svg or --json)\n", P * v,
               cells_d);
        return;
    }
    const long cells = (long)cells_d;
    char *row = malloc((size_t)cells + 1);
    if (!row) return;
    printf("one cell = %g time unit%s; F forward, B %s, U update, followed by the micro-batch (step for U) "
           "where it fits; . idle%s\n", unit, unit == 1 ? "" : "s",
           splits_backward(sc) ? "input gradient, W weight gradient" : "backward",
           v > 1 ? "; a row per stage and chunk, blank where the stage runs another chunk" : "");
    printf("%-*s", v > 1 ? 14 : 9, "time");
    for (long c = 0; c < cells; c++) {
        if (c % 10 == 0) {
            int w = printf("%ld", (long)(c * unit + 0.5));
            c += w - 1;
        } else putchar(' ');
    }
    putchar('\n');
    for (int s = 0; s < P; s++)
        for (int c = 0; c < v; c++) {
            grid_row(sc, sim, s, v > 1 ? c : -1, unit, row, cells);
            char name[32];
            if (v > 1) snprintf(name, sizeof name, "stage %d c%d", s, c);
            else snprintf(name, sizeof name, "stage %d", s);
            printf("%-*s%s\n", v > 1 ? 14 : 9, name, row);
        }
    free(row);
}

/* The picture's box styles: forward, backward (or B), W, update; idle. */
enum { SVG_FWD, SVG_BWD, SVG_WGT, SVG_UPD, SVG_IDLE, SVG_STYLES };
static const char *const svg_names[SVG_STYLES] = {"forward", "backward", "weight gradient", "update", "idle"};
static const char *const svg_colors[SVG_STYLES] = {"#4e79a7", "#f28e2b", "#e15759", "#59a14f", "#e6e6e6"};
static const char *const svg_classes[SVG_STYLES] = {"fwd", "bwd", "wgt", "upd", "idle"};

static int svg_style(nb_pipe_op op) {
    switch (op) {
    case NB_PIPE_FORWARD: return SVG_FWD;
    case NB_PIPE_BACKWARD: case NB_PIPE_BACKWARD_INPUT: return SVG_BWD;
    case NB_PIPE_BACKWARD_WEIGHT: return SVG_WGT;
    case NB_PIPE_UPDATE: break;
    }
    return SVG_UPD;
}

static void svg_legend(FILE *f, double left, int split) {
    int x = 0;
    for (int k = 0; k < SVG_STYLES; k++) {
        if (k == SVG_WGT && !split) continue;
        const char *name = k == SVG_BWD && split ? "input gradient" : svg_names[k];
        fprintf(f, "<rect class=\"legend\" x=\"%g\" y=\"32\" width=\"14\" height=\"14\" fill=\"%s\" stroke=\"#999\"/>"
                "<text x=\"%g\" y=\"43\">%s</text>\n", left + x, svg_colors[k], left + x + 18, name);
        x += k == SVG_WGT || (k == SVG_BWD && split) ? 120 : 100;
    }
}

static int write_svg(const char *path, const nb_pipe_schedule *sc, const nb_pipe_sim *sim, const char *title) {
    const size_t n = nb_pipe_n_actions(sc);
    if (n > SVG_MAX_ACTIONS) {
        fprintf(stderr, "nobubble schedule: --svg %s: %zu actions is too many for a picture (at most %d); "
                "use fewer stages, micro-batches or steps, or --json\n", path, n, SVG_MAX_ACTIONS);
        return -1;
    }
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "nobubble schedule: --svg %s: cannot write: %s\n", path, strerror(errno));
        return -1;
    }
    const int P = sc->n_stages, v = sc->n_chunks;
    const double left = 70, top = 64, plot_w = 1100;
    const double px = sim->makespan > 0 ? plot_w / sim->makespan : 1;
    const double row_h = P <= 48 ? 20 : (900.0 / P > 1 ? 900.0 / P : 1), box_h = row_h > 4 ? row_h - 2 : row_h;
    const double width = left + plot_w + 20, height = top + P * row_h + 30;
    schedule_svg_begin(f, width, height, title);
    fprintf(f, "<text x=\"%g\" y=\"20\" font-size=\"14\">%s</text>\n", left, title);
    svg_legend(f, left, splits_backward(sc));
    for (int s = 0; s < P; s++) {
        const double y = top + s * row_h;
        if (row_h >= 10) fprintf(f, "<text x=\"4\" y=\"%g\">stage %d</text>\n", y + row_h * 0.7, s);
        double t = 0;
        for (size_t i = sc->start[s]; i <= sc->start[s + 1]; i++) {
            double t0 = i < sc->start[s + 1] ? sim->t_start[i] : sim->makespan;
            if (t0 > t + 1e-12)
                fprintf(f, "<rect class=\"idle\" x=\"%.3f\" y=\"%.2f\" width=\"%.3f\" height=\"%.2f\" fill=\"%s\"/>\n",
                        left + t * px, y, (t0 - t) * px, box_h, svg_colors[SVG_IDLE]);
            if (i == sc->start[s + 1]) break;
            const nb_pipe_action *a = &sc->actions[i];
            const int k = svg_style(a->op);
            char chunk[24] = "";
            if (v > 1 && k != SVG_UPD) snprintf(chunk, sizeof chunk, " chunk %d", a->chunk);
            double w = (sim->t_finish[i] - t0) * px;
            if (w < 1.5 && k == SVG_UPD) w = 1.5; /* a zero-cost update still shows as a thin bar */
            /* odd chunks lighter, so that a stage's chunks tell apart */
            fprintf(f, "<rect class=\"%s\" x=\"%.3f\" y=\"%.2f\" width=\"%.3f\" height=\"%.2f\" fill=\"%s\"%s%s>"
                    "<title>stage %d%s: %s %d, version %d, t = %g..%g</title></rect>\n",
                    svg_classes[k], left + t0 * px, y, w, box_h, svg_colors[k],
                    w > 3 ? " stroke=\"#fff\" stroke-width=\"0.5\"" : "", a->chunk % 2 ? " fill-opacity=\"0.55\"" : "",
                    s, chunk, k == SVG_UPD ? "update of step" : svg_names[k], k == SVG_UPD ? a->step : a->mb, a->version,
                    t0, sim->t_finish[i]);
            char num[16];
            int len = snprintf(num, sizeof num, "%d", k == SVG_UPD ? a->step : a->mb);
            if (k != SVG_UPD && row_h >= 10 && w >= 7.0 * len + 2)
                fprintf(f, "<text x=\"%.3f\" y=\"%.2f\" fill=\"#fff\" text-anchor=\"middle\">%s</text>\n",
                        left + t0 * px + w / 2, y + row_h * 0.7, num);
            t = sim->t_finish[i];
        }
    }
    fprintf(f, "<text x=\"%g\" y=\"%g\">time 0 .. %g</text>\n", left, top + P * row_h + 18, sim->makespan);
    fprintf(f, "</svg>\n");
    if (fclose(f)) {
        fprintf(stderr, "nobubble schedule: --svg %s: write failed: %s\n", path, strerror(errno));
        return -1;
    }
    return 0;
}

/* The pipelines and the sequential order, joined by sep: "gpipe, 1f1b, pipedream, 2bw, interleaved, zbh1 or
 * sequential". */
static void kinds_text(const char *sep, const char *last_sep, char *buf, size_t size) {
    char bar[96];
    nb_names_join(nb_pipe_kind_names, sep, bar, sizeof bar);
    snprintf(buf, size, "%s%s%s", bar, last_sep, nb_pipe_kind_name(NB_PIPE_SEQUENTIAL));
}

/* The settings of one invocation, as parsed and checked. */
typedef struct {
    int P, M, S, v;                    /* v: --chunks, 0 when not given (interleaved: 2) */
    double *f, *b, *w, *u, comm;       /* per stage; w NULL: half the backward */
    const char *svg;
    int json;
} schedule_args;

static nb_pipe_costs costs_of(const schedule_args *a) {
    nb_pipe_costs c = {a->f, a->b, a->u, a->comm, a->w};
    return c;
}

/* Generates (with the chunks of --chunks) and simulates one kind; prints the error and returns -1. */
static int run_kind(nb_pipe_kind kind, const schedule_args *a, nb_pipe_schedule *sc, nb_pipe_sim *sim) {
    const nb_pipe_gen_options go = {kind == NB_PIPE_INTERLEAVED ? a->v : 0};
    const nb_pipe_costs costs = costs_of(a);
    memset(sim, 0, sizeof *sim);
    if (nb_pipe_generate_ex(sc, kind, a->P, a->M, a->S, &go) || nb_pipe_simulate(sc, &costs, sim)) {
        fprintf(stderr, "nobubble schedule: %s\n", nb_last_error());
        return -1;
    }
    return 0;
}

static void print_cost_line(const schedule_args *a, int split) {
    printf("costs: ");
    schedule_print_costs(stdout, "forward", a->f, a->P);
    schedule_print_costs(stdout, ", backward", a->b, a->P);
    if (split && a->w) {
        schedule_print_costs(stdout, " (weight gradient", a->w, a->P);
        printf(")");
    } else if (split) printf(" (half input gradient, half weight gradient)");
    schedule_print_costs(stdout, ", update", a->u, a->P);
    printf(", comm %g\n", a->comm);
}

static double max_of(const double *x, int n) {
    double m = x[0];
    for (int i = 1; i < n; i++) m = x[i] > m ? x[i] : m;
    return m;
}

static int max_int(const int *x, int n) {
    int m = x[0];
    for (int i = 1; i < n; i++) m = x[i] > m ? x[i] : m;
    return m;
}

/* One row of --compare. */
typedef struct {
    int chunks, versions, trained;
    double bubble, makespan, acts;
} compare_row;

/* --compare: every pipeline kind with the same sizes and costs, one row each; all simulated before any is
 * printed, so that a kind the sizes do not fit refuses the whole table. */
static int compare(const schedule_args *a) {
    compare_row rows[16];
    int n = 0;
    for (; nb_pipe_kind_names(n) && n < 16; n++) {
        nb_pipe_schedule sc;
        nb_pipe_sim sim;
        if (run_kind((nb_pipe_kind)n, a, &sc, &sim)) return 2;
        /* the busiest stage's activations, in micro-batches of a whole stage; the most versions any stage holds */
        rows[n] = (compare_row){sc.n_chunks, max_int(sim.peak_versions, a->P), !nb_pipe_kind_check_executed((nb_pipe_kind)n),
                                sim.bubble_fraction, sim.makespan, max_of(sim.peak_activation_mbs, a->P)};
        nb_pipe_sim_free(&sim);
        nb_pipe_free(&sc);
    }
    if (a->json)
        printf("{\"compare\": true, \"stages\": %d, \"microbatches\": %d, \"steps\": %d, \"chunks\": %d, \"kinds\": [",
               a->P, a->M, a->S, a->v ? a->v : 2);
    else {
        printf("compare: %d stages, %d micro-batches per step, %d step%s; interleaved with %d chunks per stage\n", a->P,
               a->M, a->S, a->S == 1 ? "" : "s", a->v ? a->v : 2);
        print_cost_line(a, 1);
        printf("%-12s %8s %10s %10s %9s  %s\n", "kind", "bubble", "makespan", "peak acts", "versions", "trained");
    }
    for (int k = 0; k < n; k++) {
        const compare_row *r = &rows[k];
        if (a->json)
            printf("%s\n  {\"kind\": \"%s\", \"chunks\": %d, \"bubble_fraction\": %.17g, \"makespan\": %.17g, "
                   "\"peak_activations\": %.17g, \"peak_versions\": %d, \"trained\": %s}", k ? "," : "",
                   nb_pipe_kind_names(k), r->chunks, r->bubble, r->makespan, r->acts, r->versions,
                   r->trained ? "true" : "false");
        else
            printf("%-12s %8.4f %10g %10g %9d  %s\n", nb_pipe_kind_names(k), r->bubble, r->makespan, r->acts, r->versions,
                   r->trained ? "yes" : "no (schedule only)");
    }
    if (a->json) printf("\n]}\n");
    else
        printf("peak acts: the most micro-batches whose activations the busiest stage holds (forward done, backward or W "
               "not); versions: the most weight versions a stage holds\n");
    return 0;
}

/* The grid's cell: the shortest action (each chunk's share; B and W where the backward is split), at most 1. */
static double grid_unit(const nb_pipe_schedule *sc, const schedule_args *a) {
    double unit = 1, buf[4 * 1024];
    nb_low_costs lc;
    const nb_pipe_costs costs = costs_of(a);
    if (a->P > 1024 || nb_pipe_action_costs(sc, &costs, buf, &lc)) return unit;
    const int split = splits_backward(sc);
    for (int s = 0; s < a->P; s++) {
        const double shortest[] = {lc.forward[s], split ? lc.backward_input[s] : lc.backward[s],
                                   split ? lc.backward_weight[s] : lc.backward[s], a->u[s] > 0 ? a->u[s] : 1};
        for (int i = 0; i < 4; i++) unit = shortest[i] < unit ? shortest[i] : unit;
    }
    if (a->comm > 0 && a->comm < unit) unit = a->comm;
    return unit;
}

static void print_json(const char *kind, const nb_pipe_schedule *sc, const nb_pipe_sim *sim, const schedule_args *a) {
    const int P = a->P;
    printf("{\"kind\": \"%s\", \"stages\": %d, \"microbatches\": %d, \"steps\": %d, \"chunks\": %d, "
           "\"microbatches_total\": %d, \"optimizer_steps\": %d, \"comm_cost\": %.17g, \"makespan\": %.17g, "
           "\"bubble_fraction\": %.17g, \"steady_state_from_step\": %d, \"steady_state_idle_fraction\": %.17g, "
           "\"actions\": %zu, \"per_stage\": [",
           kind, P, a->M, a->S, sc->n_chunks, sc->n_micro * sc->n_steps, sc->n_steps, a->comm, sim->makespan,
           sim->bubble_fraction, sim->steady_from_step, sim->steady_idle_fraction, nb_pipe_n_actions(sc));
    for (int s = 0; s < P; s++)
        printf("%s\n  {\"stage\": %d, \"forward_cost\": %.17g, \"backward_cost\": %.17g, \"update_cost\": %.17g, "
               "\"busy\": %.17g, \"idle\": %.17g, \"idle_fraction\": %.17g, \"peak_activations\": %d, "
               "\"peak_activation_microbatches\": %.17g, \"peak_versions\": %d}", s ? "," : "", s, a->f[s], a->b[s],
               a->u[s], sim->busy[s], sim->idle[s], sim->makespan > 0 ? sim->idle[s] / sim->makespan : 0.0,
               sim->peak_activations[s], sim->peak_activation_mbs[s], sim->peak_versions[s]);
    printf("\n]%s%s%s}\n", a->svg ? ", \"svg\": \"" : "", a->svg ? a->svg : "", a->svg ? "\"" : "");
}

static void print_text(const char *kind, const nb_pipe_schedule *sc, const nb_pipe_sim *sim, const schedule_args *a) {
    const int P = a->P, N = sc->n_micro * sc->n_steps;
    char chunks[48] = "";
    if (sc->n_chunks > 1) snprintf(chunks, sizeof chunks, " x %d chunks", sc->n_chunks);
    printf("schedule %s: %d stages%s, %d micro-batches per step, %d steps (%d micro-batches, %d optimizer steps)\n", kind,
           P, chunks, sc->n_micro, sc->n_steps, N, sc->n_steps);
    print_cost_line(a, splits_backward(sc));
    print_grid(sc, sim, grid_unit(sc, a));
    double idle = 0;
    for (int s = 0; s < P; s++) idle += sim->idle[s];
    printf("makespan %g; bubble fraction %.4f (idle %g of %d stages x %g)\n", sim->makespan, sim->bubble_fraction, idle,
           P, sim->makespan);
    printf("steady-state idle fraction %.4f (steps %d..%d, to the end)\n", sim->steady_idle_fraction,
           sim->steady_from_step, sc->n_steps - 1);
    printf("%-6s %10s %10s %7s %12s %13s\n", "stage", "busy", "idle", "idle%", "peak acts", "peak versions");
    for (int s = 0; s < P; s++)
        printf("%-6d %10g %10g %6.1f%% %12g %13d\n", s, sim->busy[s], sim->idle[s],
               sim->makespan > 0 ? 100 * sim->idle[s] / sim->makespan : 0.0, sim->peak_activation_mbs[s],
               sim->peak_versions[s]);
    if (sc->n_chunks > 1) printf("peak acts in micro-batches of a whole stage (a chunk's are 1/%d)\n", sc->n_chunks);
    if (a->svg) printf("wrote %s\n", a->svg);
}

/* One kind: simulated and printed (text, JSON, SVG); the exit status. */
static int one_kind(nb_pipe_kind kind, const char *kind_s, const schedule_args *a) {
    nb_pipe_schedule sc = {0};
    nb_pipe_sim sim = {0};
    int status = 2;
    if (run_kind(kind, a, &sc, &sim)) goto out;
    status = 1;
    char title[256];
    snprintf(title, sizeof title, "%s: %d stages, %d micro-batches x %d steps; bubble fraction %.4f (%.1f%% idle)",
             kind_s, a->P, a->M, a->S, sim.bubble_fraction, 100 * sim.bubble_fraction);
    if (a->svg && write_svg(a->svg, &sc, &sim, title)) goto out;
    if (a->json) print_json(kind_s, &sc, &sim, a);
    else print_text(kind_s, &sc, &sim, a);
    status = 0;
out:
    nb_pipe_sim_free(&sim);
    nb_pipe_free(&sc);
    return status;
}

/* --lowered: the schedule's lists with every message; the exit status. */
static int lowered_kind(nb_pipe_kind kind, const char *kind_s, const schedule_args *a, const schedule_lowered_args *la) {
    nb_pipe_schedule sc = {0};
    const nb_pipe_gen_options go = {kind == NB_PIPE_INTERLEAVED ? a->v : 0};
    int status = 2;
    /* the lowered lists need the schedule's own checks first */
    if (nb_pipe_generate_ex(&sc, kind, a->P, a->M, a->S, &go) || nb_pipe_validate(&sc))
        fprintf(stderr, "nobubble schedule: %s\n", nb_last_error());
    else status = schedule_lowered(&sc, kind_s, la);
    nb_pipe_free(&sc);
    return status;
}

int cmd_schedule(int argc, char **argv) {
    char kinds[128], usage[sizeof usage_format + sizeof kinds], kind_help[64 + sizeof kinds];
    kinds_text("|", "|", kinds, sizeof kinds);
    snprintf(usage, sizeof usage, usage_format, kinds);
    kinds_text(", ", " or ", kinds, sizeof kinds);
    snprintf(kind_help, sizeof kind_help, "K      schedule: %s (required, unless --compare)", kinds);
    const char *kind_s = NULL, *pipeline_s = NULL, *fwd_s = "1", *bwd_s = "2", *wgt_s = NULL, *upd_s = "0", *comm_s = "0", *svg = NULL;
    int P = 0, M = 0, S = 1, v = 0, json = 0, cmp = 0, lowered = 0, tied = 0, clip = 0, eval_every = 0, eval_batches = 1,
        save_every = 0;
    float act_bytes = 0, bandwidth = 0;
    const cli_option opts[] = {
        {"--kind", OPT_STR, &kind_s, kind_help},
        {"--pipeline", OPT_STR, &pipeline_s, "K      the same as --kind (train's name for it)"},
        {"--stages", OPT_INT, &P, "P      pipeline stages (required) " CLI_RANGE(1, 1024)},
        {"--microbatches", OPT_INT, &M, "M      micro-batches per optimizer step (required; 1f1b, 2bw and zbh1 need M >= P, interleaved a multiple of P) " CLI_RANGE(1, 4096)},
        {"--steps", OPT_INT, &S, "S      optimizer steps (1; pipedream: M x S micro-batches, one step each) " CLI_RANGE(1, 100000)},
        {"--chunks", OPT_INT, &v, "V      interleaved: model chunks (virtual stages) per stage (2) " CLI_RANGE(1, 64)},
        {"--forward-cost", OPT_STR, &fwd_s, "F[,F..] forward time per stage, > 0 (1)"},
        {"--backward-cost", OPT_STR, &bwd_s, "B[,B..] backward time per stage, > 0 (2)"},
        {"--backward-weight-cost", OPT_STR, &wgt_s, "W[,W..] zbh1: the weight gradient's part of the backward, 0 < W < B (B / 2)"},
        {"--update-cost", OPT_STR, &upd_s, "U[,U..] optimizer update time per stage, >= 0 (0)"},
        {"--comm-cost", OPT_STR, &comm_s, "C      latency of a send between neighbours, >= 0 (0)"},
        {"--svg", OPT_STR, &svg, "FILE   write the timeline as an SVG picture"},
        {"--json", OPT_FLAG, &json, "       print the numbers as JSON instead of text"},
        {"--compare", OPT_FLAG, &cmp, "       every pipeline kind side by side: bubble, peak activations, weight versions"},
        {"--lowered", OPT_FLAG, &lowered, "       show the lowered lists (every message explicit, and the coordinator)"},
        {"--tied", OPT_FLAG, &tied, "       lowered: a tied embedding (its gradient and weights between the end stages)"},
        {"--clip", OPT_FLAG, &clip, "       lowered: global-norm clipping (every stage's norm to every other)"},
        {"--eval-every", OPT_INT, &eval_every, "N      lowered: evaluate after every N-th step (0: never) " CLI_RANGE(0, 100000)},
        {"--eval-batches", OPT_INT, &eval_batches, "B      lowered: validation batches per evaluation (1) " CLI_RANGE(1, 4096)},
        {"--save-every", OPT_INT, &save_every, "N      lowered: save after every N-th step and the last (0: never) " CLI_RANGE(0, 100000)},
        {"--act-bytes", OPT_FLOAT, &act_bytes, "A      lowered: bytes of an ACT, GRAD or EVAL_ACT message (0) " CLI_RANGE(0, 1000000000000)},
        {"--bandwidth", OPT_FLOAT, &bandwidth, "BW     lowered: bytes per unit of time on a link (0: unlimited) " CLI_RANGE(0, 1000000000000000)},
    };
    int rc = cli_parse(usage, argc, argv, opts, (int)(sizeof opts / sizeof opts[0]));
    if (rc) return rc > 0 ? 0 : 2;
    if (kind_s && pipeline_s && strcmp(kind_s, pipeline_s)) {
        fprintf(stderr, "nobubble schedule: --kind %s and --pipeline %s: one name for the same setting, given two values\n",
                kind_s, pipeline_s);
        return 2;
    }
    if (!kind_s) kind_s = pipeline_s;
    nb_pipe_kind kind = NB_PIPE_GPIPE;
    if (cmp && (kind_s || lowered || svg)) {
        fprintf(stderr, "nobubble schedule: --compare runs every kind and prints one table: leave out %s\n",
                kind_s ? "--kind" : lowered ? "--lowered" : "--svg");
        return 2;
    }
    if (!cmp && !kind_s) {
        fprintf(stderr, "nobubble schedule: --kind is required (one of %s), or --compare\n", kinds);
        return 2;
    }
    if (kind_s && nb_pipe_kind_parse(kind_s, &kind)) {
        fprintf(stderr, "nobubble schedule: --kind '%s': expected one of %s\n", kind_s, kinds);
        return 2;
    }
    if (P < 1) {
        fprintf(stderr, "nobubble schedule: --stages %d: expected P >= 1 (required)\n", P);
        return 2;
    }
    if (M < 1) {
        fprintf(stderr, "nobubble schedule: --microbatches %d: expected M >= 1 (required)\n", M);
        return 2;
    }
    if (S < 1) {
        fprintf(stderr, "nobubble schedule: --steps %d: expected S >= 1\n", S);
        return 2;
    }
    if (!cmp && v && kind != NB_PIPE_INTERLEAVED) {
        fprintf(stderr, "nobubble schedule: --chunks %d: only --kind interleaved has model chunks (or --compare)\n", v);
        return 2;
    }
    if (!cmp && wgt_s && kind != NB_PIPE_ZBH1) {
        fprintf(stderr, "nobubble schedule: --backward-weight-cost: only --kind zbh1 splits the backward (or --compare)\n");
        return 2;
    }
    if (!lowered && (tied || clip || eval_every || eval_batches != 1 || save_every || act_bytes || bandwidth)) {
        fprintf(stderr, "nobubble schedule: --tied, --clip, --eval-every, --eval-batches, --save-every, --act-bytes and "
                "--bandwidth describe the lowered lists: add --lowered\n");
        return 2;
    }
    const long long chunks = kind == NB_PIPE_INTERLEAVED || cmp ? (v ? v : 2) : 1;
    if ((long long)P * M * S * chunks > MAX_PASSES) {
        fprintf(stderr, "nobubble schedule: --stages %d x --microbatches %d x --steps %d%s = %lld: too many passes to "
                "simulate (at most %lld)\n", P, M, S, chunks > 1 ? " x --chunks" : "", (long long)P * M * S * chunks,
                MAX_PASSES);
        return 2;
    }
    schedule_args a = {P, M, S, v, NULL, NULL, NULL, NULL, 0, svg, json};
    double *cc = NULL;
    int status = 2;
    if (!(a.f = parse_costs("--forward-cost", fwd_s, P, 0)) || !(a.b = parse_costs("--backward-cost", bwd_s, P, 0)) ||
        (wgt_s && !(a.w = parse_costs("--backward-weight-cost", wgt_s, P, 0))) ||
        !(a.u = parse_costs("--update-cost", upd_s, P, 1)) || !(cc = parse_costs("--comm-cost", comm_s, 1, 1)))
        goto out;
    a.comm = cc[0];
    if (cmp) status = compare(&a);
    else if (lowered) {
        const schedule_lowered_args la = {tied, clip, eval_every, eval_batches, save_every, act_bytes, bandwidth,
                                          a.f, a.b, a.u, a.comm, svg, json, a.w};
        status = lowered_kind(kind, kind_s, &a, &la);
    } else status = one_kind(kind, kind_s, &a);
out:
    free(a.f); free(a.b); free(a.w); free(a.u); free(cc);
    return status;
}
