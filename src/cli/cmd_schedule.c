/* nobubble schedule: generates a pipeline schedule (GPipe, 1F1B, PipeDream, 2BW), validates it,
 * simulates it (as its lowering, nb_pipe_simulate) with per-stage costs and prints the timeline as text, the bubble
 * fraction, per-stage idle fraction, peak in-flight activations and weight versions; --svg writes
 * the timeline as a picture, --json prints the numbers as JSON. See docs/schedules.md. */
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

/* %s: the kinds, "gpipe|1f1b|pipedream|2bw|sequential" (kinds_text). */
static const char usage_format[] =
    "usage: nobubble schedule --kind %s --stages P --microbatches M [--steps S]\n"
    "                         [--forward-cost F[,F...]] [--backward-cost B[,B...]] [--update-cost U[,U...]]\n"
    "                         [--comm-cost C] [--svg FILE] [--json]\n"
    "                         [--lowered [--tied] [--clip] [--eval-every N [--eval-batches B]] [--save-every N]\n"
    "                                    [--act-bytes A] [--bandwidth BW]]\n"
    "Simulates a pipeline schedule lock-step and prints its timeline, bubble fraction, idle fraction,\n"
    "peak in-flight activations and weight versions per stage. A cost list has one value or one per stage.\n"
    "PipeDream updates after every micro-batch: it runs M x S micro-batches (M x S optimizer steps).\n"
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

/* The text grid: one row per stage, one cell per `unit` of time. */
static void print_grid(const nb_pipe_schedule *sc, const nb_pipe_sim *sim, double unit) {
    const int P = sc->n_stages;
    const double cells_d = ceil(sim->makespan / unit - 1e-9);   /* compared before any cast to an integer */
    if (!(cells_d <= GRID_MAX_CELLS) || cells_d * P > GRID_MAX_TOTAL) {
        printf("(timeline grid skipped: %d stages x %.4g cells is too large to print; use --svg or --json)\n", P, cells_d);
        return;
    }
    const long cells = (long)cells_d;
    char *row = malloc((size_t)cells + 1);
    if (!row) return;
    printf("one cell = %g time unit%s; F forward, B backward, U update, followed by the micro-batch (step for U) "
           "where it fits; . idle\n", unit, unit == 1 ? "" : "s");
    printf("%-9s", "time");
    for (long c = 0; c < cells; c++) {
        if (c % 10 == 0) {
            int w = printf("%ld", (long)(c * unit + 0.5));
            c += w - 1;
        } else putchar(' ');
    }
    putchar('\n');
    for (int s = 0; s < P; s++) {
        memset(row, '.', (size_t)cells);
        row[cells] = 0;
        for (size_t i = sc->start[s]; i < sc->start[s + 1]; i++) {
            const nb_pipe_action *a = &sc->actions[i];
            long c0 = lround(sim->t_start[i] / unit), c1 = lround(sim->t_finish[i] / unit);
            if (sim->t_finish[i] <= sim->t_start[i]) continue; /* zero-length update */
            if (c1 <= c0) c1 = c0 + 1;
            if (c1 > cells) c1 = cells;
            char label[24];
            char letter = a->op == NB_PIPE_FORWARD ? 'F' : a->op == NB_PIPE_BACKWARD ? 'B' : 'U';
            int len = snprintf(label, sizeof label, "%c%d", letter, a->op == NB_PIPE_UPDATE ? a->step : a->mb);
            for (long c = c0; c < c1; c++) {
                long k = c - c0;
                row[c] = (c1 - c0 >= len && k < len) ? label[k] : (k == 0 ? letter : (char)(letter + 32));
            }
        }
        printf("stage %-3d%s\n", s, row);
    }
    free(row);
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
    const int P = sc->n_stages;
    const double left = 70, top = 64, plot_w = 1100;
    const double px = sim->makespan > 0 ? plot_w / sim->makespan : 1;
    const double row_h = P <= 48 ? 20 : (900.0 / P > 1 ? 900.0 / P : 1), box_h = row_h > 4 ? row_h - 2 : row_h;
    const double width = left + plot_w + 20, height = top + P * row_h + 30;
    schedule_svg_begin(f, width, height, title);
    fprintf(f, "<text x=\"%g\" y=\"20\" font-size=\"14\">%s</text>\n", left, title);
    static const char *const names[] = {"forward", "backward", "update", "idle"};
    static const char *const colors[] = {"#4e79a7", "#f28e2b", "#59a14f", "#e6e6e6"};
    static const char *const classes[] = {"fwd", "bwd", "upd", "idle"};
    for (int k = 0; k < 4; k++) {
        double x = left + k * 100;
        fprintf(f, "<rect class=\"legend\" x=\"%g\" y=\"32\" width=\"14\" height=\"14\" fill=\"%s\" stroke=\"#999\"/>"
                "<text x=\"%g\" y=\"43\">%s</text>\n", x, colors[k], x + 18, names[k]);
    }
    for (int s = 0; s < P; s++) {
        const double y = top + s * row_h;
        if (row_h >= 10) fprintf(f, "<text x=\"4\" y=\"%g\">stage %d</text>\n", y + row_h * 0.7, s);
        double t = 0;
        for (size_t i = sc->start[s]; i <= sc->start[s + 1]; i++) {
            double t0 = i < sc->start[s + 1] ? sim->t_start[i] : sim->makespan;
            if (t0 > t + 1e-12)
                fprintf(f, "<rect class=\"idle\" x=\"%.3f\" y=\"%.2f\" width=\"%.3f\" height=\"%.2f\" fill=\"%s\"/>\n",
                        left + t * px, y, (t0 - t) * px, box_h, colors[3]);
            if (i == sc->start[s + 1]) break;
            const nb_pipe_action *a = &sc->actions[i];
            const int k = a->op == NB_PIPE_FORWARD ? 0 : a->op == NB_PIPE_BACKWARD ? 1 : 2;
            double w = (sim->t_finish[i] - t0) * px;
            if (w < 1.5 && k == 2) w = 1.5; /* a zero-cost update still shows as a thin bar */
            fprintf(f, "<rect class=\"%s\" x=\"%.3f\" y=\"%.2f\" width=\"%.3f\" height=\"%.2f\" fill=\"%s\"%s>"
                    "<title>stage %d: %s %d, version %d, t = %g..%g</title></rect>\n",
                    classes[k], left + t0 * px, y, w, box_h, colors[k], w > 3 ? " stroke=\"#fff\" stroke-width=\"0.5\"" : "",
                    s, k == 2 ? "update of step" : names[k], k == 2 ? a->step : a->mb, a->version, t0, sim->t_finish[i]);
            char num[16];
            int len = snprintf(num, sizeof num, "%d", k == 2 ? a->step : a->mb);
            if (k < 2 && row_h >= 10 && w >= 7.0 * len + 2)
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

/* The pipelines and the sequential order, joined by sep: "gpipe, 1f1b, pipedream, 2bw or sequential". */
static void kinds_text(const char *sep, const char *last_sep, char *buf, size_t size) {
    char bar[96];
    nb_names_join(nb_pipe_kind_names, sep, bar, sizeof bar);
    snprintf(buf, size, "%s%s%s", bar, last_sep, nb_pipe_kind_name(NB_PIPE_SEQUENTIAL));
}

int cmd_schedule(int argc, char **argv) {
    char kinds[128], usage[sizeof usage_format + sizeof kinds], kind_help[64 + sizeof kinds];
    kinds_text("|", "|", kinds, sizeof kinds);
    snprintf(usage, sizeof usage, usage_format, kinds);
    kinds_text(", ", " or ", kinds, sizeof kinds);
    snprintf(kind_help, sizeof kind_help, "K      schedule: %s (required)", kinds);
    const char *kind_s = NULL, *fwd_s = "1", *bwd_s = "2", *upd_s = "0", *comm_s = "0", *svg = NULL;
    int P = 0, M = 0, S = 1, json = 0, lowered = 0, tied = 0, clip = 0, eval_every = 0, eval_batches = 1, save_every = 0;
    float act_bytes = 0, bandwidth = 0;
    const cli_option opts[] = {
        {"--kind", OPT_STR, &kind_s, kind_help},
        {"--stages", OPT_INT, &P, "P      pipeline stages (required) " CLI_RANGE(1, 1024)},
        {"--microbatches", OPT_INT, &M, "M      micro-batches per optimizer step (required; 1f1b and 2bw need M >= P) " CLI_RANGE(1, 4096)},
        {"--steps", OPT_INT, &S, "S      optimizer steps (1; pipedream: M x S micro-batches, one step each) " CLI_RANGE(1, 100000)},
        {"--forward-cost", OPT_STR, &fwd_s, "F[,F..] forward time per stage, > 0 (1)"},
        {"--backward-cost", OPT_STR, &bwd_s, "B[,B..] backward time per stage, > 0 (2)"},
        {"--update-cost", OPT_STR, &upd_s, "U[,U..] optimizer update time per stage, >= 0 (0)"},
        {"--comm-cost", OPT_STR, &comm_s, "C      latency of a send between neighbours, >= 0 (0)"},
        {"--svg", OPT_STR, &svg, "FILE   write the timeline as an SVG picture"},
        {"--json", OPT_FLAG, &json, "       print the numbers as JSON instead of text"},
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
    nb_pipe_kind kind;
    if (!kind_s) {
        nb_pipe_kind_list(kinds, sizeof kinds);
        fprintf(stderr, "nobubble schedule: --kind is required (one of %s)\n", kinds);
        return 2;
    }
    if (nb_pipe_kind_parse(kind_s, &kind)) {
        fprintf(stderr, "nobubble schedule: %s\n", nb_last_error());
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
    if (!lowered && (tied || clip || eval_every || eval_batches != 1 || save_every || act_bytes || bandwidth)) {
        fprintf(stderr, "nobubble schedule: --tied, --clip, --eval-every, --eval-batches, --save-every, --act-bytes and "
                "--bandwidth describe the lowered lists: add --lowered\n");
        return 2;
    }
    if ((long long)P * M * S > MAX_PASSES) {
        fprintf(stderr, "nobubble schedule: --stages %d x --microbatches %d x --steps %d = %lld: too many passes to "
                "simulate (at most %lld)\n", P, M, S, (long long)P * M * S, MAX_PASSES);
        return 2;
    }
    if ((kind == NB_PIPE_1F1B || kind == NB_PIPE_2BW) && M < P) {
        fprintf(stderr, "nobubble schedule: --microbatches %d with --stages %d: %s needs M >= P micro-batches per step\n",
                M, P, kind_s);
        return 2;
    }
    double *f = parse_costs("--forward-cost", fwd_s, P, 0), *b = f ? parse_costs("--backward-cost", bwd_s, P, 0) : NULL;
    double *u = b ? parse_costs("--update-cost", upd_s, P, 1) : NULL, *cc = u ? parse_costs("--comm-cost", comm_s, 1, 1) : NULL;
    nb_pipe_schedule sc = {0};
    nb_pipe_sim sim = {0};
    int status = 2;
    if (!cc) goto out;
    /* nb_pipe_simulate validates the schedule itself; the lowered lists need the schedule's own checks first */
    if (nb_pipe_generate(&sc, kind, P, M, S) || (lowered && nb_pipe_validate(&sc))) {
        fprintf(stderr, "nobubble schedule: %s\n", nb_last_error());
        goto out;
    }
    if (lowered) {
        const schedule_lowered_args la = {tied, clip, eval_every, eval_batches, save_every, act_bytes, bandwidth,
                                          f, b, u, cc[0], svg, json};
        status = schedule_lowered(&sc, kind_s, &la);
        goto out;
    }
    nb_pipe_costs costs = {f, b, u, cc[0], NULL};
    if (nb_pipe_simulate(&sc, &costs, &sim)) {
        fprintf(stderr, "nobubble schedule: %s\n", nb_last_error());
        goto out;
    }
    status = 1;
    char title[256];
    snprintf(title, sizeof title, "%s: %d stages, %d micro-batches x %d steps; bubble fraction %.4f (%.1f%% idle)",
             kind_s, P, M, S, sim.bubble_fraction, 100 * sim.bubble_fraction);
    if (svg && write_svg(svg, &sc, &sim, title)) goto out;
    const int N = sc.n_micro * sc.n_steps;
    if (json) {
        printf("{\"kind\": \"%s\", \"stages\": %d, \"microbatches\": %d, \"steps\": %d, \"microbatches_total\": %d, "
               "\"optimizer_steps\": %d, \"comm_cost\": %.17g, \"makespan\": %.17g, \"bubble_fraction\": %.17g, "
               "\"steady_state_from_step\": %d, \"steady_state_idle_fraction\": %.17g, \"actions\": %zu, \"per_stage\": [",
               kind_s, P, M, S, N, sc.n_steps, cc[0], sim.makespan, sim.bubble_fraction, sim.steady_from_step,
               sim.steady_idle_fraction, nb_pipe_n_actions(&sc));
        for (int s = 0; s < P; s++)
            printf("%s\n  {\"stage\": %d, \"forward_cost\": %.17g, \"backward_cost\": %.17g, \"update_cost\": %.17g, "
                   "\"busy\": %.17g, \"idle\": %.17g, \"idle_fraction\": %.17g, \"peak_activations\": %d, "
                   "\"peak_versions\": %d}", s ? "," : "", s, f[s], b[s], u[s], sim.busy[s], sim.idle[s],
                   sim.makespan > 0 ? sim.idle[s] / sim.makespan : 0.0, sim.peak_activations[s], sim.peak_versions[s]);
        printf("\n]%s%s%s}\n", svg ? ", \"svg\": \"" : "", svg ? svg : "", svg ? "\"" : "");
    } else {
        printf("schedule %s: %d stages, %d micro-batches per step, %d steps (%d micro-batches, %d optimizer steps)\ncosts: ",
               kind_s, P, sc.n_micro, sc.n_steps, N, sc.n_steps);
        schedule_print_costs(stdout, "forward", f, P);
        schedule_print_costs(stdout, ", backward", b, P);
        schedule_print_costs(stdout, ", update", u, P);
        printf(", comm %g\n", cc[0]);
        double unit = 1;
        for (int s = 0; s < P; s++) {
            if (f[s] < unit) unit = f[s];
            if (b[s] < unit) unit = b[s];
            if (u[s] > 0 && u[s] < unit) unit = u[s];
        }
        if (cc[0] > 0 && cc[0] < unit) unit = cc[0];
        print_grid(&sc, &sim, unit);
        double idle = 0;
        for (int s = 0; s < P; s++) idle += sim.idle[s];
        printf("makespan %g; bubble fraction %.4f (idle %g of %d stages x %g)\n", sim.makespan, sim.bubble_fraction,
               idle, P, sim.makespan);
        printf("steady-state idle fraction %.4f (steps %d..%d, to the end)\n", sim.steady_idle_fraction,
               sim.steady_from_step, sc.n_steps - 1);
        printf("%-6s %10s %10s %7s %12s %13s\n", "stage", "busy", "idle", "idle%", "peak acts", "peak versions");
        for (int s = 0; s < P; s++)
            printf("%-6d %10g %10g %6.1f%% %12d %13d\n", s, sim.busy[s], sim.idle[s],
                   sim.makespan > 0 ? 100 * sim.idle[s] / sim.makespan : 0.0, sim.peak_activations[s],
                   sim.peak_versions[s]);
        if (svg) printf("wrote %s\n", svg);
    }
    status = 0;
out:
    free(f); free(b); free(u); free(cc);
    nb_pipe_sim_free(&sim);
    nb_pipe_free(&sc);
    return status;
}
