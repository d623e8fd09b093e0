/* Sweeps: every point of a grid as a `nobubble train` child process, J at a time, resumable.
 *
 * DIR/runs/<point>/ holds command.txt (the point's train arguments, written before the run
 * starts), train.log (the child's output) and the run's metrics.jsonl and summary.json. A point
 * is complete when summary.json exists (the trainer writes it last, atomically) and command.txt
 * equals its command now; any other folder is a run that was interrupted, failed or belongs to
 * an older grid, and is replaced by a fresh run. With --save-every the points also save checkpoints
 * into DIR/runs/<point>/checkpoints, and an interrupted point whose command is unchanged resumes from
 * its newest usable one instead (removed once the point completes). */
#define _XOPEN_SOURCE 700
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <math.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif
#include "experiments/exp.h"
#include "nobubble/experiments.h"
#include "util/clock.h"
#include "util/error.h"
#include "util/fs.h"
#include "util/signals.h"

extern char **environ;

/* How long terminated children get to finish their step before SIGKILL. */
#define STOP_GRACE_S 10.0

/* Stop requests so far: 1 terminates the children (SIGKILL after the grace time), 2 kills them now. */
static atomic_int stop_requested;
void nb_sweep_request_stop(void) { atomic_fetch_add(&stop_requested, 1); }

typedef enum { PT_PENDING, PT_RUNNING, PT_SKIPPED, PT_DONE, PT_FAILED, PT_INTERRUPTED } pt_state;

typedef struct {
    pt_state state;
    pid_t pid;
    int exit_status;   /* exit code, or 128 + signal */
    double started;
} pt_status;

/* How a point starts: afresh, or resumed from a checkpoint of its earlier, interrupted run. */
typedef struct {
    char checkpoint[4400];   /* the step folder to resume from; "" for a fresh run */
    long step;
    char passed_over[2048];  /* newer checkpoint folders found unusable, and why */
} pt_start;

typedef struct {
    const nb_grid *g;
    const nb_sweep_options *o;
    pt_status *st;
    char **envp;
    int n, finished, running;
    nb_fs_lock lock;   /* on --out, for the sweep's life */
    nb_buf earlier;    /* results.csv's rows of points an earlier sweep of this folder ran that this grid lacks */
} sweep;

/* ------------------------------------------------------------ files */
static void run_dir(const sweep *s, int i, char *out, size_t size) {
    snprintf(out, size, "%s/runs/%s", s->o->out_dir, nb_grid_point_name(s->g, i));
}

/* The point's --save-dir under --save-every: inside its own folder, so that it goes with it. */
static void save_dir(const sweep *s, int i, char *out, size_t size) {
    snprintf(out, size, "%s/runs/%s/checkpoints", s->o->out_dir, nb_grid_point_name(s->g, i));
}

static int exists(const char *dir, const char *file) {
    char path[4400];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    return access(path, F_OK) == 0;
}

/* The point's command as one line: `train ARGS`, each shell-quoted where needed. */
static int command_text(const nb_grid *g, int i, nb_buf *b) {
    int argc;
    const char *const *argv = nb_grid_point_args(g, i, &argc);
    if (nb_buf_printf(b, "train")) return -1;
    for (int k = 0; k < argc; k++)
        if (nb_buf_put(b, " ", 1) || nbx_shell_quote(b, argv[k])) return -1;
    return nb_buf_put(b, "\n", 1);
}

char *nb_grid_point_command(const nb_grid *g, int point) {
    nb_buf b = {0};
    if (command_text(g, point, &b)) {
        nb_buf_free(&b);
        return NULL;
    }
    return b.p;
}

static int same_command(const char *dir, const char *cmd) {
    char path[4400], *text;
    size_t n;
    snprintf(path, sizeof path, "%s/command.txt", dir);
    if (access(path, F_OK) || nb_fs_read_file(path, &text, &n, NULL)) return 0;
    int same = !strcmp(text, cmd);
    free(text);
    return same;
}

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb; (void)ftw;
    return flag == FTW_DP ? rmdir(path) : unlink(path);
}

/* Removes an old run folder; only one the sweep made (it has command.txt), never anything else. */
static int remove_run(const char *dir) {
    if (!exists(dir, "command.txt"))
        return nb_fail("%s exists but has no command.txt, so nobubble sweep did not make it; remove it or "
                       "choose another --out", dir);
    if (nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS))
        return nb_fail("%s: cannot remove the old run: %s", dir, strerror(errno));
    return 0;
}

/* A completed point's checkpoints folder: its checkpoints were only there to resume it. Links inside
 * are removed, never followed (FTW_PHYS). A failure is a warning: the point's results are complete. */
static void remove_checkpoints(const sweep *s, int i) {
    char dir[4400];
    save_dir(s, i, dir, sizeof dir);
    if (access(dir, F_OK) == 0 && nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS))
        fprintf(stderr, "nobubble sweep: warning: %s: cannot remove the completed point's checkpoints: %s\n", dir,
                strerror(errno));
}

static void sweep_log(const sweep *s, const char *what, int i, const char *extra) {
    char path[4200];
    snprintf(path, sizeof path, "%s/sweep.log", s->o->out_dir);
    FILE *f = fopen(path, "a");
    if (!f) return;  /* the log is for people; the sweep does not depend on it */
    fprintf(f, "%ld %s %s%s%s\n", (long)time(NULL), what, nb_grid_point_name(s->g, i), extra ? " " : "", extra ? extra : "");
    fclose(f);
}

/* The last non-empty line of the child's log, to say why a point failed. */
static void last_log_line(const char *dir, char *out, size_t size) {
    char path[4400], *text;
    size_t n;
    snprintf(path, sizeof path, "%s/train.log", dir);
    snprintf(out, size, "(no output; see %.400s)", path);
    if (access(path, F_OK) || nb_fs_read_file(path, &text, &n, NULL)) return;
    while (n && (text[n - 1] == '\n' || text[n - 1] == '\r')) text[--n] = 0;
    char *line = strrchr(text, '\n');
    if (n) snprintf(out, size, "%s", line ? line + 1 : text);
    free(text);
}

/* ------------------------------------------------------------ children */
/* The environment of every child: ours, with OMP_NUM_THREADS = max(1, cores / jobs). */
static char **child_env(int jobs) {
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    long threads = cores / jobs > 1 ? cores / jobs : 1;
    int n = 0;
    while (environ[n]) n++;
    char **env = calloc((size_t)n + 2, sizeof *env);
    if (!env) return NULL;
    int k = 0;
    for (int i = 0; i < n; i++)
        if (strncmp(environ[i], "OMP_NUM_THREADS=", 16)) env[k++] = environ[i];
    static char omp[64];
    snprintf(omp, sizeof omp, "OMP_NUM_THREADS=%ld", threads);
    env[k] = omp;
    return env;
}

/* Between fork and exec only async-signal-safe calls: the child's own process group (so that a
 * terminal's Ctrl-C reaches the sweep, which stops the children itself), death with the sweep
 * (so that a killed sweep leaves no orphan writing into a folder the next sweep replaces), the
 * default signal mask and dispositions (the sweep blocks the stop signals; a mask survives exec),
 * and its output into train.log. */
static void exec_child(const char *exe, char **argv, char **envp, int log_fd, pid_t parent) {
    setpgid(0, 0);
    nb_signals_child_reset();
#ifdef __linux__
    prctl(PR_SET_PDEATHSIG, SIGKILL);
#endif
    if (getppid() != parent) _exit(127);
    dup2(log_fd, 1);  /* the copies lose close-on-exec; the original closes at exec */
    dup2(log_fd, 2);
    execve(exe, argv, envp);
    static const char msg[] = "nobubble sweep: cannot run the nobubble binary\n";
    ssize_t w = write(2, msg, sizeof msg - 1);
    (void)w;
    _exit(127);
}

/* The flags a point gets besides its command: --out, --quiet and, with --save-every, its checkpoints
 * (and --resume when it continues). Into argv from n; returns the new count. */
static int sweep_flags(const sweep *s, int i, const char *dir, const pt_start *from, const char **argv, int n,
                       char bufs[3][4400]) {
    argv[n++] = "--out";
    argv[n++] = dir;
    argv[n++] = "--quiet";
    if (s->o->save_every <= 0) return n;
    save_dir(s, i, bufs[0], sizeof bufs[0]);
    snprintf(bufs[1], sizeof bufs[1], "%d", s->o->save_every);
    snprintf(bufs[2], sizeof bufs[2], "%d", s->o->keep);
    argv[n++] = "--save-dir";
    argv[n++] = bufs[0];
    argv[n++] = "--save-every";
    argv[n++] = bufs[1];
    argv[n++] = "--keep";
    argv[n++] = bufs[2];
    if (from->checkpoint[0]) {
        argv[n++] = "--resume";
        argv[n++] = from->checkpoint;
    }
    return n;
}

/* The sweep.log line of a start: `start POINT`, or `resume POINT from step S`, naming any checkpoint
 * passed over (and, for a fresh start, why none was usable). */
static void log_start(sweep *s, int i, const pt_start *from) {
    char extra[2200];
    if (from->checkpoint[0]) {
        snprintf(extra, sizeof extra, "from step %ld%s%s%s", from->step, from->passed_over[0] ? " (passed over " : "",
                 from->passed_over, from->passed_over[0] ? ")" : "");
        sweep_log(s, "resume", i, extra);
        if (!s->o->quiet)
            printf("%s: resuming from step %ld%s\n", nb_grid_point_name(s->g, i), from->step,
                   from->passed_over[0] ? " (newer checkpoints unusable: see sweep.log)" : "");
    } else if (from->passed_over[0]) {
        snprintf(extra, sizeof extra, "(from scratch: no usable checkpoint: %s)", from->passed_over);
        sweep_log(s, "start", i, extra);
    } else {
        sweep_log(s, "start", i, NULL);
    }
}

static int launch(sweep *s, int i, const char *dir, const pt_start *from) {
    int argc;
    const char *const *args = nb_grid_point_args(s->g, i, &argc);
    const char **argv = calloc((size_t)argc + 16, sizeof *argv);
    if (!argv) return nb_fail("out of memory");
    argv[0] = s->o->exe;
    argv[1] = "train";
    for (int k = 0; k < argc; k++) argv[2 + k] = args[k];
    char bufs[3][4400];
    sweep_flags(s, i, dir, from, argv, 2 + argc, bufs);
    char log[4400];
    snprintf(log, sizeof log, "%s/train.log", dir);
    /* A resumed run's output follows the interrupted one's. */
    int fd = open(log, O_WRONLY | O_CREAT | O_CLOEXEC | (from->checkpoint[0] ? O_APPEND : O_TRUNC), 0644);
    if (fd < 0) {
        free(argv);
        return nb_fail("%s: cannot create: %s", log, strerror(errno));
    }
    pid_t parent = getpid(), pid = fork();
    if (pid == 0) exec_child(s->o->exe, (char **)argv, s->envp, fd, parent);
    int e = errno;
    close(fd);
    free(argv);
    if (pid < 0) return nb_fail("cannot start a child process: %s", strerror(e));
    s->st[i] = (pt_status){PT_RUNNING, pid, 0, nb_now()};
    s->running++;
    log_start(s, i, from);
    return 0;
}

/* Whether point i continues its earlier run: --save-every, the same command (so the same run), no
 * summary, and a usable checkpoint (*from names it; otherwise it lists those passed over). */
static int can_resume(const sweep *s, int i, const char *dir, const char *cmd, pt_start *from) {
    memset(from, 0, sizeof *from);
    if (s->o->save_every <= 0 || access(dir, F_OK) || !same_command(dir, cmd)) return 0;
    char sdir[4400];
    save_dir(s, i, sdir, sizeof sdir);
    if (access(sdir, F_OK)) return 0;
    int found = s->o->find_checkpoint(sdir, from->checkpoint, sizeof from->checkpoint, &from->step,
                                      from->passed_over, sizeof from->passed_over) == 1;
    if (!found) from->checkpoint[0] = 0;
    return found;
}

/* Whether a run folder holds the complete run of command cmd: a summary, and that command. */
static int run_complete(const char *dir, const char *cmd) {
    return exists(dir, "summary.json") && same_command(dir, cmd);
}

/* Whether point i's folder holds its complete run, under the command this grid gives it. */
static int complete_on_disk(const sweep *s, int i) {
    char dir[4200];
    nb_buf cmd = {0};
    run_dir(s, i, dir, sizeof dir);
    const int complete = command_text(s->g, i, &cmd) == 0 && run_complete(dir, cmd.p);
    nb_buf_free(&cmd);
    return complete;
}

/* A point this sweep has not reached (or will not, once stopped) but an earlier sweep completed: done
 * all the same, in results.csv and in the counts, so that a report read while a resumed sweep runs, or
 * after it stops, does not take earlier results for missing ones. */
static int done_earlier(const sweep *s, int i) {
    return (s->st[i].state == PT_PENDING || s->st[i].state == PT_INTERRUPTED) && complete_on_disk(s, i);
}

/* Starts point i, or skips it when its run is complete with the same command. */
static int start_point(sweep *s, int i) {
    char dir[4200];
    nb_buf cmd = {0};
    static pt_start from;   /* large; one point starts at a time */
    run_dir(s, i, dir, sizeof dir);
    int rc = command_text(s->g, i, &cmd);
    if (!rc && run_complete(dir, cmd.p)) {
        s->st[i].state = PT_SKIPPED;
        s->finished++;
        if (!s->o->quiet) printf("[%d/%d] %s: already complete, skipped\n", s->finished, s->n, nb_grid_point_name(s->g, i));
        sweep_log(s, "skip", i, NULL);
    } else if (!rc && can_resume(s, i, dir, cmd.p, &from)) {
        rc = launch(s, i, dir, &from);   /* its folder, command.txt and metrics.jsonl are kept */
    } else {
        char cpath[4400];
        snprintf(cpath, sizeof cpath, "%s/command.txt", dir);
        if (!rc && access(dir, F_OK) == 0) rc = remove_run(dir);
        if (!rc) rc = nb_fs_mkdirs(dir, NULL);
        if (!rc) rc = nb_fs_write_atomic(cpath, cmd.p, cmd.n);
        if (!rc) rc = launch(s, i, dir, &from);
    }
    nb_buf_free(&cmd);
    return rc;
}

static void report_finished(sweep *s, int i) {
    char dir[4200], why[512];
    run_dir(s, i, dir, sizeof dir);
    const char *name = nb_grid_point_name(s->g, i);
    pt_status *p = &s->st[i];
    s->finished++;
    if (p->state == PT_DONE) {
        nbx_run r;
        char extra[64];
        snprintf(extra, sizeof extra, "%.1fs", nb_now() - p->started);
        sweep_log(s, "done", i, extra);
        if (s->o->quiet) return;
        if (nbx_run_read(dir, &r) == 0) {
            printf("[%d/%d] %s: done in %.1f s, train loss %.4f, val loss %.4f\n", s->finished, s->n, name,
                   nb_now() - p->started, r.final_train_loss, r.final_val_loss);
            nbx_run_free(&r);
        } else {
            printf("[%d/%d] %s: done, but %s\n", s->finished, s->n, name, nb_last_error());
        }
    } else if (p->state == PT_FAILED) {
        char extra[64];
        snprintf(extra, sizeof extra, "exit %d", p->exit_status);
        sweep_log(s, "failed", i, extra);
        last_log_line(dir, why, sizeof why);
        printf("[%d/%d] %s: FAILED (exit status %d): %s\n", s->finished, s->n, name, p->exit_status, why);
    } else {
        sweep_log(s, "interrupted", i, NULL);
        if (!s->o->quiet) printf("[%d/%d] %s: interrupted\n", s->finished, s->n, name);
    }
    fflush(stdout);
}

static int write_results(const sweep *s);

static void reap(sweep *s, pid_t pid, int status) {
    for (int i = 0; i < s->n; i++) {
        if (s->st[i].state != PT_RUNNING || s->st[i].pid != pid) continue;
        char dir[4200];
        run_dir(s, i, dir, sizeof dir);
        int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
        s->st[i].exit_status = code;
        if (code == 0 && exists(dir, "summary.json")) s->st[i].state = PT_DONE;
        else s->st[i].state = atomic_load(&stop_requested) ? PT_INTERRUPTED : PT_FAILED;
        if (code == 0 && s->st[i].state == PT_FAILED) s->st[i].exit_status = -1;  /* exit 0 but no summary */
        if (s->st[i].state == PT_DONE && s->o->save_every > 0) remove_checkpoints(s, i);
        s->running--;
        report_finished(s, i);
        /* After every point, so that a long sweep's tables can be read (`nobubble report`) while it
         * runs; the points still to come read not_run. A failure here is a warning: the final
         * write reports it. */
        if (write_results(s)) fprintf(stderr, "nobubble sweep: warning: results.csv not updated: %s\n", nb_last_error());
        return;
    }
}

static void sleep_briefly(void) {
    struct timespec ts = {0, 50 * 1000 * 1000};
    nanosleep(&ts, NULL);
}

/* Reaps one finished child, or sleeps a moment. */
static void wait_some(sweep *s) {
    int status;
    pid_t pid = waitpid(-1, &status, WNOHANG);
    if (pid > 0) reap(s, pid, status);
    else sleep_briefly();
}

/* SIGTERM to every child (the trainer finishes its step and exits), SIGKILL after a grace time. */
static void stop_children(sweep *s) {
    for (int i = 0; i < s->n; i++)
        if (s->st[i].state == PT_RUNNING) kill(s->st[i].pid, SIGTERM);
    double t0 = nb_now();
    int killed = 0;
    while (s->running > 0) {
        if (!killed && (nb_now() - t0 > STOP_GRACE_S || atomic_load(&stop_requested) > 1)) {
            for (int i = 0; i < s->n; i++)
                if (s->st[i].state == PT_RUNNING) kill(s->st[i].pid, SIGKILL);
            killed = 1;
        }
        wait_some(s);
    }
}

/* ------------------------------------------------------------ results.csv */
static int result_row(const sweep *s, int i, nb_buf *b) {
    char dir[4200];
    run_dir(s, i, dir, sizeof dir);
    if (nb_buf_printf(b, "%s", nb_grid_point_name(s->g, i))) return -1;
    for (int a = 0; a < nb_grid_n_axes(s->g); a++)
        if (nb_buf_printf(b, ",%s", nb_grid_point_label(s->g, i, a))) return -1;
    const pt_status *p = &s->st[i];
    if (p->state == PT_DONE || p->state == PT_SKIPPED || done_earlier(s, i)) {
        nbx_run r;
        if (nbx_run_read(dir, &r)) return -1;
        int rc = nb_buf_printf(b, ",%.9g,", r.final_train_loss) ||
                 (!isnan(r.final_val_loss) && nb_buf_printf(b, "%.9g", r.final_val_loss)) || nb_buf_put(b, ",", 1) ||
                 (!isnan(r.best_val_loss) && nb_buf_printf(b, "%.9g", r.best_val_loss)) ||
                 nb_buf_printf(b, ",%.0f,%.3f,done,0\n", r.tokens[r.n - 1], r.seconds);
        nbx_run_free(&r);
        return rc ? -1 : 0;
    }
    if (p->state == PT_FAILED) return nb_buf_printf(b, ",,,,,,failed,%d\n", p->exit_status);
    return nb_buf_printf(b, ",,,,,,%s,\n", p->state == PT_INTERRUPTED ? "interrupted" : "not_run");
}

/* The header line this grid's results.csv has (without its newline), into b. */
static int results_header(const sweep *s, nb_buf *b) {
    int rc = nb_buf_printf(b, "point");
    for (int a = 0; a < nb_grid_n_axes(s->g) && !rc; a++) rc = nb_buf_printf(b, ",%s", nb_grid_axis_name(s->g, a));
    return rc || nb_buf_printf(b, ",%s", NBX_RESULT_COLUMNS);
}

static int write_results(const sweep *s) {
    nb_buf b = {0};
    char path[4200];
    snprintf(path, sizeof path, "%s/results.csv", s->o->out_dir);
    int rc = results_header(s, &b) || nb_buf_put(&b, "\n", 1);
    for (int i = 0; i < s->n && !rc; i++) rc = result_row(s, i, &b);
    if (!rc && s->earlier.n) rc = nb_buf_put(&b, s->earlier.p, s->earlier.n);
    if (!rc) rc = nb_fs_write_atomic(path, b.p, b.n);
    nb_buf_free(&b);
    return rc;
}

/* ------------------------------------------------------------ the sweep */
/* Under --save-every the sweep owns each point's checkpoint flags (alone or as --save-dir=X): a grid
 * that gives one too would leave the point two values, the later one winning silently. */
static int check_save_flags(const sweep *s) {
    static const char *const owned[] = {"--save-dir", "--save-every", "--keep"};
    for (int i = 0; i < s->n; i++) {
        int argc;
        const char *const *args = nb_grid_point_args(s->g, i, &argc);
        for (int k = 0; k < argc; k++)
            for (size_t f = 0; f < sizeof owned / sizeof owned[0]; f++) {
                size_t n = strlen(owned[f]);
                if (!strncmp(args[k], owned[f], n) && (!args[k][n] || args[k][n] == '='))
                    return nb_fail("point %s: %s: with sweep --save-every the sweep gives each point --save-dir "
                                   "DIR/runs/<point>/checkpoints --save-every N --keep K; leave %s out of the grid "
                                   "(or run the sweep without --save-every)",
                                   nb_grid_point_name(s->g, i), args[k], owned[f]);
            }
    }
    return 0;
}

static int in_grid(const sweep *s, const char *name, size_t n) {
    for (int i = 0; i < s->n; i++) {
        const char *p = nb_grid_point_name(s->g, i);
        if (strlen(p) == n && !memcmp(p, name, n)) return 1;
    }
    return 0;
}

/* A folder that an earlier sweep of another grid wrote (a study's phases share one): results.csv keeps the
 * rows of its points that this grid lacks, after this grid's, so that no finished result leaves the table.
 * Where the columns differ such rows cannot stay in one table: refused, naming the folder, before anything
 * is written. */
static int keep_earlier_rows(sweep *s) {
    char path[4200];
    snprintf(path, sizeof path, "%s/results.csv", s->o->out_dir);
    if (!nb_fs_exists_in(s->o->out_dir, "results.csv")) return 0;
    char *text;
    size_t len;
    if (nb_fs_read_file(path, &text, &len, "sweep results")) return -1;
    nb_buf header = {0};
    int rc = results_header(s, &header);
    const char *eol = memchr(text, '\n', len);
    size_t head = eol ? (size_t)(eol - text) : len;
    if (head && text[head - 1] == '\r') head--;   /* a table saved with CRLF line ends: the same columns */
    const int same = !rc && head == header.n && !memcmp(text, header.p, head);
    for (const char *line = eol ? eol + 1 : text + len; !rc && line < text + len;) {
        const char *end = memchr(line, '\n', (size_t)(text + len - line));
        const size_t n = end ? (size_t)(end - line) + 1 : (size_t)(text + len - line);
        const char *comma = memchr(line, ',', n);
        if (comma && !in_grid(s, line, (size_t)(comma - line))) {
            if (!same)
                rc = nb_fail("--out %s: its results.csv holds points of another grid (%.*s, ...) under other columns (%.*s; "
                             "this grid's: %s): they cannot stay in one table. Give this grid another --out",
                             s->o->out_dir, (int)(comma - line), line, (int)(head < 200 ? head : 200), text, header.p);
            else
                rc = nb_buf_put(&s->earlier, line, n) || (!end && nb_buf_put(&s->earlier, "\n", 1));
        }
        line += n;
    }
    nb_buf_free(&header);
    free(text);
    return rc;
}

/* A training run's folder (or prepared data): the sweep's files would mix with its own. */
static int check_foreign(const sweep *s) {
    static const char *const owned[] = {"summary.json", "metrics.jsonl", "train_config.json", "manifest.json"};
    for (size_t i = 0; i < sizeof owned / sizeof owned[0]; i++)
        if (nb_fs_exists_in(s->o->out_dir, owned[i]))
            return nb_fail("--out %s holds %s (%s): give the sweep a folder of its own", s->o->out_dir,
                           i < 3 ? "a training run" : "prepared data", owned[i]);
    return 0;
}

static int prepare(sweep *s) {
    char path[4200];
    snprintf(path, sizeof path, "%s/runs", s->o->out_dir);
    if (check_foreign(s) || nb_fs_mkdirs(path, NULL)) return -1;
    /* One sweep per folder: a second would run the same points into the same run folders. */
    if (nb_fs_lock_dir(&s->lock, s->o->out_dir, "--out") || keep_earlier_rows(s)) return -1;
    snprintf(path, sizeof path, "%s/grid.txt", s->o->out_dir);
    const char *text = nb_grid_text(s->g);
    if (nb_fs_write_atomic(path, text, strlen(text))) return -1;
    if (!(s->st = calloc((size_t)s->n, sizeof *s->st)) || !(s->envp = child_env(s->o->jobs)))
        return nb_fail("out of memory");
    return 0;
}

static int run_points(sweep *s) {
    int next = 0;
    while (next < s->n || s->running > 0) {
        if (atomic_load(&stop_requested)) {
            stop_children(s);
            break;
        }
        while (!atomic_load(&stop_requested) && s->running < s->o->jobs && next < s->n)
            if (start_point(s, next++)) {
                stop_children(s);
                return -1;
            }
        if (s->running > 0) wait_some(s);
    }
    for (int i = 0; i < s->n; i++)
        if (s->st[i].state == PT_PENDING) s->st[i].state = PT_INTERRUPTED;
    return 0;
}

int nb_sweep_run(const nb_grid *g, const nb_sweep_options *o, nb_sweep_result *r) {
    memset(r, 0, sizeof *r);
    if (o->jobs < 1) return nb_fail("--jobs %d: expected at least 1", o->jobs);
    if (o->save_every < 0 || o->keep < 0)
        return nb_fail("--save-every %d --keep %d: expected 0 or more", o->save_every, o->keep);
    if (o->save_every > 0 && !o->find_checkpoint) return nb_fail("--save-every needs a way to find checkpoints");
    sweep s = {g, o, NULL, NULL, nb_grid_n_points(g), 0, 0, {-1, ""}, {0}};
    if (o->save_every > 0 && check_save_flags(&s)) return -1;
    int rc = prepare(&s);
    if (!rc) rc = run_points(&s);
    if (!rc) rc = write_results(&s);
    for (int i = 0; s.st && i < s.n; i++) {
        pt_state st = done_earlier(&s, i) ? PT_SKIPPED : s.st[i].state;
        r->done += st == PT_DONE || st == PT_SKIPPED;
        r->ran += st == PT_DONE;
        r->failed += st == PT_FAILED;
        r->interrupted += st == PT_INTERRUPTED;
    }
    free(s.st);
    free(s.envp);
    nb_buf_free(&s.earlier);
    nb_fs_unlock(&s.lock);
    return rc;
}
