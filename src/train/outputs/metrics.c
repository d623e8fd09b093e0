/* metrics.jsonl, one JSON line per step, shared by both trainers: writing a line, and opening the
 * file so that a resumed run continues the lines of the steps it did not redo. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "train/outputs/outputs.h"
#include "util/error.h"
#include "util/fs.h"
#include "util/json.h"

int train_write_metrics(FILE *f, const char *out_dir, const train_metrics *m) {
    errno = 0;
    int bad = fprintf(f, "{\"step\": %d, \"train_loss\": %.9g, \"lr\": %.7g, \"tokens\": %.0f, \"time_s\": %.6f, "
                         "\"tokens_per_s\": %.1f, \"update_norm\": %.9g, \"tau\": %d, \"version_distance\": %.9g",
                      m->step + 1, m->loss, m->lr, m->tokens, m->time_s, m->tokens_per_s, m->update_norm, m->tau,
                      m->version_distance) < 0;
    if (!isnan(m->grad_norm)) bad |= fprintf(f, ", \"grad_norm\": %.9g", m->grad_norm) < 0;
    if (!isnan(m->taylor_ratio)) bad |= fprintf(f, ", \"taylor_ratio\": %.9g", m->taylor_ratio) < 0;
    if (!isnan(m->val_loss)) bad |= fprintf(f, ", \"val_loss\": %.9g", m->val_loss) < 0;
    if (!isnan(m->aux_loss)) bad |= fprintf(f, ", \"aux_loss\": %.9g", m->aux_loss) < 0;
    if (!isnan(m->router_staleness)) bad |= fprintf(f, ", \"router_staleness\": %.6g", m->router_staleness) < 0;
    for (int k = 0; k < 2 && m->moe_blocks > 0; k++) {
        const float *load = k ? m->load_min : m->load_max;
        bad |= fprintf(f, ", \"expert_load_%s\": [", k ? "min" : "max") < 0;
        for (int j = 0; j < m->moe_blocks; j++) bad |= fprintf(f, "%s%.6g", j ? ", " : "", load[j]) < 0;
        bad |= fprintf(f, "]") < 0;
    }
    bad |= fprintf(f, "}\n") < 0;
    bad |= fflush(f) != 0;
    if (bad || ferror(f))
        return nb_fail("%s/metrics.jsonl: cannot write the line of step %d: %s; the run stops here", out_dir,
                       m->step + 1, errno ? strerror(errno) : "write error");
    return 0;
}

int train_sync_metrics(FILE *f, const char *out_dir) {
    if (!f) return 0;
    errno = 0;
    if (fflush(f) || ferror(f) || fdatasync(fileno(f)))
        return nb_fail("%s/metrics.jsonl: cannot write it to disk: %s; the run stops here", out_dir,
                       errno ? strerror(errno) : "write error");
    return 0;
}

/* Whether a line of metrics.jsonl is a whole JSON object (newline included: a line cut by a kill is
 * not) of a step 1..last_step. */
static int keep_line(const char *line, size_t n, int last_step) {
    if (n < 2 || line[n - 1] != '\n') return 0;
    nb_json v;
    if (nb_json_parse(line, n - 1, &v, "metrics.jsonl line")) return 0;
    const nb_json *step = nb_json_get(&v, "step");
    int keep = step && step->type == NB_JNUM && step->is_int && step->i >= 1 && step->i <= last_step;
    nb_json_free(&v);
    return keep;
}

/* Copies the lines to keep from `in` to `out`; non-zero on a write error. */
static int copy_kept(FILE *in, FILE *out, int last_step) {
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    int bad = 0;
    while (!bad && (n = getline(&line, &cap, in)) > 0)
        if (keep_line(line, (size_t)n, last_step)) bad = fwrite(line, 1, (size_t)n, out) != (size_t)n;
    free(line);
    return bad || ferror(in);
}

/* Rewrites path with only the lines of steps 1..last_step: into a temporary renamed over it, so that
 * a crash meanwhile leaves the old file, whose lines are kept. */
static int trim_metrics(const char *path, int last_step) {
    if (access(path, F_OK) && errno == ENOENT) return 0;
    FILE *in = nb_fs_fopen_regular(path, NULL);
    if (!in) return -1;
    nb_afile out;
    if (nb_afile_open(&out, path)) {
        fclose(in);
        return -1;
    }
    int bad = copy_kept(in, out.f, last_step);
    int err = errno;
    fclose(in);
    if (bad) {
        nb_afile_abort(&out);
        return nb_fail("%s: cannot keep the lines of steps 1..%d for the resumed run: %s", path, last_step,
                       strerror(err));
    }
    if (nb_afile_commit(&out))
        return nb_fail("%s: cannot keep the lines of steps 1..%d for the resumed run: %s", path, last_step,
                       nb_last_error());
    return 0;
}

FILE *train_open_metrics(const char *out_dir, int resumed_at) {
    char path[4200];
    snprintf(path, sizeof path, "%s/metrics.jsonl", out_dir);
    /* The run that saved the checkpoint may have gone on (and been killed) after it: its lines of the
     * steps this run redoes go, else they would appear twice. */
    if (resumed_at >= 0 && trim_metrics(path, resumed_at)) return NULL;
    /* O_NOFOLLOW: a symbolic link at the path is refused, never written (or emptied) through. */
    int fd = open(path, O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC | (resumed_at >= 0 ? O_APPEND : O_TRUNC), 0666);
    FILE *f = fd >= 0 ? fdopen(fd, resumed_at >= 0 ? "a" : "w") : NULL;
    if (!f) {
        nb_fail("%s: cannot write: %s", path, errno == ELOOP ? "it is a symbolic link (remove it)" : strerror(errno));
        if (fd >= 0) close(fd);
    }
    return f;
}

/* One line's numbers for train_metrics_final; 0 when the line is not a whole step line. */
static int read_line(const char *line, size_t n, long long *step, double *loss, double *time_s, double *val) {
    nb_json v;
    if (n < 2 || line[n - 1] != '\n' || nb_json_parse(line, n - 1, &v, "metrics.jsonl line")) return 0;
    const nb_json *s = nb_json_get(&v, "step"), *l = nb_json_get(&v, "train_loss"), *t = nb_json_get(&v, "time_s"),
                  *vl = nb_json_get(&v, "val_loss");
    int ok = s && s->type == NB_JNUM && s->is_int && l && l->type == NB_JNUM && t && t->type == NB_JNUM;
    if (ok) {
        *step = s->i, *loss = l->num, *time_s = t->num;
        *val = vl && vl->type == NB_JNUM ? vl->num : NAN;
    }
    nb_json_free(&v);
    return ok;
}

int train_metrics_final(const char *out_dir, int last_step, double tokens_per_step, nb_train_result *res) {
    char path[4200];
    snprintf(path, sizeof path, "%s/metrics.jsonl", out_dir);
    FILE *f = nb_fs_fopen_regular(path, NULL);
    if (!f) return nb_fail("cannot rebuild summary.json: %s", nb_last_error());
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    long long step = 0, last = 0;
    double loss = NAN, time_s = 0, val = NAN, prev_time = 0;
    int segment = 0;   /* lines since the last resume (time_s starts again from 0 at each) */
    while ((n = getline(&line, &cap, f)) > 0) {
        double t, v;
        if (!read_line(line, (size_t)n, &step, &loss, &t, &v)) continue;
        segment = t < prev_time ? 1 : segment + 1;
        prev_time = time_s = t, last = step;
        if (!isnan(v)) val = v;
    }
    free(line);
    fclose(f);
    if (last != last_step)
        return nb_fail("%s ends at step %lld, not at the checkpoint's step %d: summary.json cannot be rebuilt from it",
                       path, last, last_step);
    res->final_train_loss = loss;
    res->final_val_loss = val;
    res->seconds = time_s;
    res->tokens_per_s = time_s > 0 ? tokens_per_step * segment / time_s : 0;
    return 0;
}
