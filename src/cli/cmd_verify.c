/* nobubble verify: nb_verify (include/nobubble/train.h) on each path given, a line for each file and folder
 * it checks. */
#include <stdio.h>
#include <stdlib.h>
#include "cli/args.h"
#include "cli/commands.h"
#include "nobubble/train.h"

static const char usage[] =
    "usage: nobubble verify PATH... [--quiet] [--no-memory-check]\n"
    "Reads each PATH as a resume, eval or import would, and every tensor in it whole: a .safetensors file (its\n"
    "header, its header's checksum and each tensor's), a checkpoint or export folder (each safetensors file in it,\n"
    "sharded or not, its config.json, and its model loaded as eval loads it), or a save folder (each step_NNNNNN\n"
    "checkpoint in it); a folder that is none of these (a run's --out, a folder of runs) is searched for them.\n"
    "One line per file and folder; exit 1 when anything fails. A model that would not fit the available memory\n"
    "is not loaded (a failure) unless --no-memory-check.";

/* One line per file and folder checked (failures always, passes unless --quiet). */
static void say(void *quiet, const char *path, const char *failure, const char *what) {
    if (failure) printf("%s: FAILED: %s\n", path, failure);
    else if (!*(const int *)quiet) printf("%s: ok: %s\n", path, what);
}

int cmd_verify(int argc, char **argv) {
    int quiet = 0, no_memory_check = 0, failures = 0;
    const cli_option opts[] = {
        {"--quiet", OPT_FLAG, &quiet, "       print the failures only"},
        CLI_MEMORY_OPTION(no_memory_check),
    };
    /* the paths out of argv, then the options */
    const char **paths = calloc((size_t)argc, sizeof *paths);
    int n_paths = 0, out = 1;
    if (!paths) {
        fprintf(stderr, "nobubble verify: out of memory\n");
        return 1;
    }
    for (int i = 1; i < argc; i++) {
        if (argv[i][0] == '-' && argv[i][1]) argv[out++] = argv[i];
        else paths[n_paths++] = argv[i];
    }
    argv[out] = NULL;
    int rc = cli_parse(usage, out, argv, opts, (int)(sizeof opts / sizeof opts[0]));
    if (rc || !n_paths) {
        if (!rc) fprintf(stderr, "nobubble verify: expected at least one PATH (usage: nobubble verify PATH...)\n");
        free(paths);
        return rc > 0 ? 0 : 2;
    }
    nb_verify_options o;
    nb_verify_defaults(&o);
    o.memory_check = !no_memory_check, o.report = say, o.ctx = &quiet;
    for (int i = 0; i < n_paths; i++) {
        o.path = paths[i];
        failures += nb_verify(&o);
    }
    free(paths);
    if (failures) printf("verify: %d failure%s\n", failures, failures == 1 ? "" : "s");
    return failures ? 1 : 0;
}
