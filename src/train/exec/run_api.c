/* nb_run: a run described by train's flags as text, for programs and bindings that would rather not fill
 * nb_train_options field by field (the Python package, python/nobubble). The same rules as the command
 * line: the settings table parses and checks each flag, --model and --set make the model, --data the
 * data folder (its vocabulary unless --set vocab_size is given). */
#include <stdlib.h>
#include <string.h>
#include "nobubble/train.h"
#include "util/error.h"

enum { RUN_MAX_STRINGS = 256 };

struct nb_run {
    nb_train_options o;
    nb_settings_args a;
    int finished, vocab_given;
    char *strings[RUN_MAX_STRINGS];  /* the values string settings point to */
    int n_strings;
    char resume_path[4400];
};

nb_run *nb_run_new(void) {
    nb_run *r = calloc(1, sizeof *r);
    if (!r) {
        nb_fail("out of memory for a run's settings");
        return NULL;
    }
    nb_train_defaults(&r->o);
    nb_settings_begin(&r->a, &r->o);
    return r;
}

void nb_run_free(nb_run *r) {
    if (!r) return;
    for (int i = 0; i < r->n_strings; i++) free(r->strings[i]);
    free(r);
}

static const char *keep(nb_run *r, const char *value) {
    if (r->n_strings == RUN_MAX_STRINGS) {
        nb_fail("more than %d text settings in one run", RUN_MAX_STRINGS);
        return NULL;
    }
    char *copy = strdup(value);
    if (!copy) nb_fail("out of memory");
    return copy ? (r->strings[r->n_strings++] = copy) : NULL;
}

int nb_run_set(nb_run *r, const char *flag, const char *value) {
    if (r->finished) return nb_fail("%s: the run has started; make a new one", flag);
    if (!strcmp(flag, "--model")) {
        if (!value) return nb_fail("--model: expected a preset name");
        return nb_config_preset(value, &r->o.model);
    }
    if (!strcmp(flag, "--set")) {
        if (!value || nb_config_override(&r->o.model, value)) return value ? -1 : nb_fail("--set: expected FIELD=VALUE");
        if (!strncmp(value, "vocab_size=", 11)) r->vocab_given = 1;
        return 0;
    }
    if (!strcmp(flag, "--data")) {
        const char *dir = value ? keep(r, value) : NULL;
        if (!dir) return value ? -1 : nb_fail("--data: expected a folder");
        r->o.data_dir = dir;
        return 0;
    }
    const char *kept = value ? keep(r, value) : NULL;
    if (value && !kept) return -1;
    return nb_settings_arg(&r->a, flag, kept);
}

const nb_train_options *nb_run_options(nb_run *r) { return &r->o; }

int nb_run_train(nb_run *r, nb_train_result *res) {
    memset(res, 0, sizeof *res);
    /* one training per run (train.h): a second would train again from the start, over the first's results */
    if (r->finished) return nb_fail("nb_run_train: this run was trained already; make a new one (nb_run_new)");
    if (nb_settings_finish(&r->a)) return -1;
    r->o.vocab_from_data = !r->vocab_given;
    r->finished = 1;
    if (nb_train_resolve_folders(&r->o, r->resume_path, sizeof r->resume_path)) return -1;
    return nb_train(&r->o, res);
}
