/* The optimizers, one row each (optim.h, "the optimizers, one descriptor each"), and the ranges of their
 * hyperparameters. Adding an optimizer: docs/optimizers.md, "Adding an optimizer". */
#include <stddef.h>
#include "optim/rules.h"
#include "util/error.h"
#include "util/range.h"

/* The sheet's values (docs/rules.md) that every optimizer shares. Weight decay is the sheet's 0;
 * `nobubble train`'s own default, 0.1, is the settings table's. */
#define SHEET_SHARED                                                                                          \
    .eps = 1e-8f, .weight_decay = 0.0f, .ns_steps = 5, .gamma = 0.025f, .precond_every = 10,                  \
    .max_precond_dim = 10000, .aux_beta1 = 0.9f, .aux_beta2 = 0.95f

/* lr: nobubble's choice (docs/optimizers.md; NorMuon takes Muon's). beta1, beta2, momentum are spelled for
 * every row, also where its rule does not read them, because --help shows each optimizer's. */
static const nb_optimizer_desc optimizers[NB_OPT_COUNT] = {
    [NB_OPT_SGD] = {"sgd", 0.05f, &sgd_rule,
                    {.kind = NB_OPT_SGD, .beta1 = 0.9f, .beta2 = 0.95f, .momentum = 0.9f, SHEET_SHARED},
                    "--momentum --nesterov"},
    [NB_OPT_ADAMW] = {"adamw", 1e-3f, &adamw_rule,
                      {.kind = NB_OPT_ADAMW, .beta1 = 0.9f, .beta2 = 0.95f, .momentum = 0.9f, SHEET_SHARED},
                    "--beta1 --beta2 --eps"},
    [NB_OPT_MUON] = {"muon", 0.02f, &muon_rule,
                     {.kind = NB_OPT_MUON, .beta1 = 0.9f, .beta2 = 0.95f, .momentum = 0.95f, .nesterov = 1,
                      SHEET_SHARED},
                    "--momentum --nesterov --ns-steps"},
    [NB_OPT_LION] = {"lion", 3e-4f, &lion_rule,
                     {.kind = NB_OPT_LION, .beta1 = 0.9f, .beta2 = 0.99f, .momentum = 0.9f, SHEET_SHARED},
                    "--beta1 --beta2"},
    [NB_OPT_ADAN] = {"adan", 1e-3f, &adan_rule,
                     {.kind = NB_OPT_ADAN, .beta1 = 0.98f, .beta2 = 0.92f, .beta3 = 0.99f, .momentum = 0.9f,
                      SHEET_SHARED},
                    "--beta1 --beta2 --beta3 --eps"},
    [NB_OPT_MARS] = {"mars", 1e-3f, &mars_rule,
                     {.kind = NB_OPT_MARS, .beta1 = 0.95f, .beta2 = 0.99f, .momentum = 0.9f, SHEET_SHARED},
                    "--beta1 --beta2 --eps --gamma"},
    [NB_OPT_SOAP] = {"soap", 1e-3f, &soap_rule,
                     {.kind = NB_OPT_SOAP, .beta1 = 0.95f, .beta2 = 0.95f, .momentum = 0.9f, SHEET_SHARED},
                    "--beta1 --beta2 --eps --precond-every --max-precond-dim"},
    /* beta2: its per-row second moment's */
    [NB_OPT_NORMUON] = {"normuon", 0.02f, &normuon_rule,
                        {.kind = NB_OPT_NORMUON, .beta1 = 0.9f, .beta2 = 0.95f, .momentum = 0.95f, .nesterov = 1,
                         SHEET_SHARED},
                    "--beta2 --momentum --nesterov --ns-steps"},
};

#define AT(field) offsetof(nb_optim_params, field)
#define BETA(flag, field) {flag, AT(field), 0, 0, 1, 0, 1}
const nb_range nb_optim_ranges[] = {
    BETA("--beta1", beta1),
    BETA("--beta2", beta2),
    BETA("--beta3", beta3),
    BETA("--momentum", momentum),
    BETA("--aux-beta1", aux_beta1),
    BETA("--aux-beta2", aux_beta2),
    {"--eps", AT(eps), 0, 0, 1, 1, 0},
    {"--wd", AT(weight_decay), 0, 0, NB_RANGE_HUGE, 0, 0},
    {"--ns-steps", AT(ns_steps), 1, 1, 100, 0, 0},
    {"--gamma", AT(gamma), 0, 0, NB_RANGE_HUGE, 0, 0},
    /* at most the longest run (train.h's NB_TRAIN_MAX_STEPS): a longer interval never refreshes */
    {"--precond-every", AT(precond_every), 1, 1, 1e8, 0, 0},
    {"--max-precond-dim", AT(max_precond_dim), 1, 1, 1000000, 0, 0},
    {NULL, 0, 0, 0, 0, 0, 0},
};

const nb_optimizer_desc *nb_optimizer_desc_of(nb_optimizer_kind kind) {
    return (unsigned)kind < NB_OPT_COUNT ? &optimizers[kind] : NULL;
}

const char *nb_optimizer_names(int i) {
    const nb_optimizer_desc *d = nb_optimizer_desc_of((nb_optimizer_kind)i);
    return d ? d->name : NULL;
}

const char *nb_optimizer_name(nb_optimizer_kind kind) {
    const nb_optimizer_desc *d = nb_optimizer_desc_of(kind);
    return d ? d->name : "unknown";
}

int nb_optimizer_parse(const char *name, nb_optimizer_kind *out) {
    int k;
    if (nb_names_parse(nb_optimizer_names, "--optimizer", name, &k)) return -1;
    *out = (nb_optimizer_kind)k;
    return 0;
}

nb_optim_params nb_optim_defaults(nb_optimizer_kind kind) {
    const nb_optimizer_desc *d = nb_optimizer_desc_of(kind);
    nb_optim_params p = d ? d->defaults : optimizers[NB_OPT_ADAMW].defaults;
    p.kind = kind;
    return p;
}

int nb_optim_validate(const nb_optim_params *p) {
    if (!nb_optimizer_desc_of(p->kind)) return nb_fail("unknown optimizer kind %d", (int)p->kind);
    for (const nb_range *r = nb_optim_ranges; r->flag; r++)
        if (nb_range_check(r, p)) return -1;
    return 0;
}
