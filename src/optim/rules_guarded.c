/* The optimizer's rules on the guarded device (backend/guarded.h): the CPU's rules on the mirrors of the
 * tensor's buffers, with the inner CPU backend running their products. */
#include "backend/guarded.h"
#include "optim/rules.h"

static int guarded_step(const nb_backend *be, const nb_optim_rule *rule, tensor_state *ts, const rule_ctx *c,
                        const float *g, const float *w, float *d) {
    tensor_state here = *ts;
    for (int b = 0; b < here.n_buf; b++) here.buf[b] = nb_guarded_host(be, ts->buf[b]);
    rule_ctx ctx = *c;
    ctx.be = nb_guarded_inner(be);
    const int rc = rule->step(&here, &ctx, nb_guarded_host(be, g), nb_guarded_host(be, w), nb_guarded_host(be, d));
    ts->count = here.count;
    return rc;
}

static const nb_rule_ops guarded_rules = {.step = guarded_step};

const nb_rule_ops *nb_rule_ops_guarded(void) { return &guarded_rules; }
