/* A test shim (LD_PRELOAD, built by tests/cli_files.sh; not part of any nobubble target): a rename
 * (or renameat2) onto the path NB_KILL_AFTER_RENAME_TO succeeds, then the process dies by SIGKILL at
 * once, as a kill -9 landing just after a checkpoint folder is committed would do it. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void maybe_kill(const char *to) {
    const char *want = getenv("NB_KILL_AFTER_RENAME_TO");
    if (want && to && !strcmp(to, want)) raise(SIGKILL);
}

int rename(const char *from, const char *to) {
    static int (*real)(const char *, const char *);
    if (!real) real = (int (*)(const char *, const char *))dlsym(RTLD_NEXT, "rename");
    int rc = real(from, to);
    if (rc == 0) maybe_kill(to);
    return rc;
}

int renameat2(int olddirfd, const char *from, int newdirfd, const char *to, unsigned int flags) {
    static int (*real)(int, const char *, int, const char *, unsigned int);
    if (!real) real = (int (*)(int, const char *, int, const char *, unsigned int))dlsym(RTLD_NEXT, "renameat2");
    int rc = real(olddirfd, from, newdirfd, to, flags);
    if (rc == 0) maybe_kill(to);
    return rc;
}
