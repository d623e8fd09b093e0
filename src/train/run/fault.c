/* Test hooks that kill the process at named points of a run, so that tests can check what a kill -9
 * there leaves (a file of its own: every part of the trainer may call it, and it calls none of them). */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include "train/run/run.h"

/* Test hook: NB_TRAIN_FAULT=WHERE:STEP kills the process (SIGKILL, as kill -9 would) at that point of
 * the run, so that tests can check what a kill there leaves: "after_save:N" once the checkpoint of step N
 * is complete, "prune:0" while --keep removes a checkpoint (between its rename and its files' removal). */
void train_fault_point(const char *where, int step) {
    const char *spec = getenv("NB_TRAIN_FAULT");
    const size_t n = strlen(where);
    if (spec && !strncmp(spec, where, n) && spec[n] == ':' && atoi(spec + n + 1) == step) raise(SIGKILL);
}
