/* Lowered actions and endpoints as text: the words of the validator's messages and of
 * `nobubble schedule --lowered`. A file of its own so that the validator and the run it calls
 * both use it without calling each other. */
#include <stdio.h>
#include "nobubble/pipeline.h"
#include "pipeline/lowered_dry_run.h"

char *nb_low_endpoint_text(int e, int n_stages, char *buf, size_t size) {
    if (e == n_stages) snprintf(buf, size, "coordinator");
    else snprintf(buf, size, "stage %d", e);
    return buf;
}

char *nb_low_action_text(const nb_low_action *a, int n_stages, char *buf, size_t size) {
    char peer[32], chunk[24] = "";
    if (a->chunk) snprintf(chunk, sizeof chunk, "%s chunk %d", lowered_is_message(a->op) ? "," : "", a->chunk);
    if (lowered_is_message(a->op))
        snprintf(buf, size, "%s %s(%d%s) %s %s", nb_low_op_name(a->op), nb_msg_kind_name(a->msg), a->index, chunk,
                 a->op == NB_LOW_SEND ? "->" : "<-", nb_low_endpoint_text(a->peer, n_stages, peer, sizeof peer));
    else if (a->op == NB_LOW_FORWARD || a->op == NB_LOW_BACKWARD || a->op == NB_LOW_BACKWARD_INPUT ||
             a->op == NB_LOW_BACKWARD_WEIGHT)
        snprintf(buf, size, "%s mb %d%s (step %d, version %d)", nb_low_op_name(a->op), a->mb, chunk, a->step, a->version);
    else if (a->op == NB_LOW_EVAL) snprintf(buf, size, "EVAL(%d) after step %d", a->index, a->step);
    else if (a->op == NB_LOW_FINISH) snprintf(buf, size, "FINISH");
    else snprintf(buf, size, "%s(%d)", nb_low_op_name(a->op), a->step);
    return buf;
}
