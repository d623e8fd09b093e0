/* nobubble: the launcher, a static program that blocks the stop signals and runs the real binary,
 * nobubble-core, with them still blocked (a signal mask survives exec; a pending signal stays pending).
 *
 * Why a second program: the real binary links oneDNN, OpenBLAS, OpenMP, MPI and more, and the dynamic
 * loader spends milliseconds mapping and relocating them before main() runs. A SIGTERM in that time met
 * the default disposition and killed the process (exit 143, no message) in 7 of 10 tries of a start
 * followed at once by a signal (RELIABILITY.md, "A signal in the first milliseconds"). Static, this
 * program has no loader to wait for: its first instruction of main runs microseconds after exec. */
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* Where the real binary is, relative to this one: beside it (the build folder), or the installed
 * layout's libexec folder (bin/nobubble and libexec/nobubble-core). */
static const char *const core_places[] = {"nobubble-core", "../libexec/nobubble-core"};

int main(int argc, char **argv) {
    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGINT);
    sigaddset(&stop, SIGTERM);
    sigaddset(&stop, SIGUSR1);
    sigprocmask(SIG_BLOCK, &stop, NULL);
    (void)argc;
    char self[PATH_MAX], core[PATH_MAX + 64];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) {
        fprintf(stderr, "nobubble: cannot find its own place (/proc/self/exe): is /proc mounted?\n");
        return 127;
    }
    self[n] = 0;
    char *slash = strrchr(self, '/');
    if (slash) slash[1] = 0;
    for (size_t i = 0; i < sizeof core_places / sizeof core_places[0]; i++) {
        snprintf(core, sizeof core, "%s%s", self, core_places[i]);
        if (access(core, X_OK) == 0) {
            execv(core, argv);
            break;
        }
    }
    fprintf(stderr, "nobubble: cannot run the real binary (%snobubble-core or %s../libexec/nobubble-core): "
            "expected it beside this launcher, as the build and `cmake --install` put it\n", self, self);
    return 127;
}
