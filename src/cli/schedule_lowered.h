/* nobubble schedule --lowered: a schedule lowered to per-endpoint lists (every message explicit, the
 * coordinator last), validated, simulated with its messages, and shown as text, JSON or SVG. */
#ifndef NB_CLI_SCHEDULE_LOWERED_H
#define NB_CLI_SCHEDULE_LOWERED_H
#include <stdio.h>
#include "nobubble/pipeline.h"

typedef struct {
    int tied, clip, eval_every, eval_batches, save_every;  /* the lowering's options, as flags */
    double act_bytes, bandwidth;                           /* bytes of ACT, GRAD, EVAL_ACT; bytes per second */
    const double *forward, *backward, *update;             /* per stage (EVAL costs a forward) */
    double comm;                                           /* latency between stages */
    const char *svg;                                       /* NULL: no picture */
    int json;
    const double *backward_weight;                         /* per stage, W's part of a split backward (NULL: half) */
} schedule_lowered_args;

/* Lowers sc, validates and simulates it, and prints it; the process exit status (0, 1 when the
 * picture cannot be written, 2 when lowering or validation fails). */
int schedule_lowered(const nb_pipe_schedule *sc, const char *kind_name, const schedule_lowered_args *a);
/* "NAME c" when every stage's cost is c, else "NAME c0,c1,..." (both forms of the schedule's text). */
void schedule_print_costs(FILE *f, const char *name, const double *c, int P);
/* The start of an SVG picture of the given size with its title (both the schedule's pictures). */
void schedule_svg_begin(FILE *f, double width, double height, const char *title);
#endif
