/* Saving and restoring the full training state (see state.h). Every buffer is recorded under its
 * tensor's name, never under a stage, so that a checkpoint of one split resumes into any other:
 * each per-stage buffer (weights, optimizer state, weight versions, EF) is laid out by the stage's
 * named tensor table, which is all the mapping needs. */
#define _GNU_SOURCE   /* renameat2 */
#include "train/run/state.h"
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "model/stage.h"
#include "nobubble/checkpoint.h"
#include "train/run/run.h"
#include "train/run/run_fields.h"
#include "train/run/state_meta.h"
#include "util/error.h"
#include "util/fs.h"

#define STATE_FORMAT "2"
static const char embed_name[] = "model.embed_tokens.weight";
/* A checkpoint folder holds one process's files (state.safetensors, model.safetensors, config.json)
 * or a pipeline's, a part per stage (state-0000k-of-0000P.safetensors, model-0000k-of-0000P.safetensors,
 * config.json) with two indexes. The state file or index is the completion marker: written last,
 * removed first. */
static const char *const markers[] = {"state.safetensors", "state.safetensors.index.json"};

/* Whether a folder entry is one of a checkpoint's files, or a killed write's temporary of one. */
static int is_checkpoint_file(const char *name) {
    static const char *const prefixes[] = {"state.", "state-", "model.", "model-", "config.json"};
    for (size_t i = 0; i < sizeof prefixes / sizeof prefixes[0]; i++)
        if (!strncmp(name, prefixes[i], strlen(prefixes[i]))) return 1;
    return 0;
}

/* ------------------------------------------------------------------ the buffers, tensor by tensor */
typedef struct {
    const char *key;        /* its name in state.safetensors */
    float *data;
    size_t n;
    int copy;               /* a tied copy: not saved; loaded from its embedding's buffer of the same kind */
    int age;                /* a weight version: w_{t-age} (0: not a version) */
    const float *newer;     /* a version: the next newer one (the weights for age 1) */
    int ef;                 /* the error-feedback buffer: saved only where EF ran at the last step */
    const nb_stage *device; /* the stage, where data is its device's memory (copied through the host); else NULL */
} state_buf;
typedef int (*buffer_visit)(void *ctx, const state_buf *b);

static const nb_stage *device_of(const nb_stage *s) { return nb_stage_on_device(s) ? s : NULL; }

/* A tied copy's buffers are its embedding's (the copy follows it exactly), so they go by its name. */
static const char *saved_name(const nb_tensor *t) { return t->tied_copy ? embed_name : t->name; }

/* The optimizer's buffers of tensor t: they come in tensor order, named "rule.buffer:tensor", from
 * index *k on. */
static int visit_optimizer(const train_parts *p, int i, const nb_tensor *t, int *k, buffer_visit visit, void *ctx) {
    char key[256];
    for (; *k < nb_optimizer_state_count(p->opt[i]); (*k)++) {
        const char *sn;
        float *data;
        size_t n;
        nb_optimizer_state(p->opt[i], *k, &sn, &data, &n);
        const char *colon = strrchr(sn, ':');
        if (!colon || strcmp(colon + 1, t->name)) return 0;
        snprintf(key, sizeof key, "%.*s:%s", (int)(colon - sn), sn, saved_name(t));
        state_buf b = {key, data, n, t->tied_copy, 0, NULL, 0,
                       nb_optimizer_state_on_device(p->opt[i], *k) ? device_of(&p->model->stages[i]) : NULL};
        if (visit(ctx, &b)) return -1;
    }
    return 0;
}

/* Weight versions by age, not by ring slot: w_v lives in slot v mod tau_max, and before step t the ring
 * holds w_{t-1} .. w_{t-tau_max} (w_0 standing for negative v, as at the start). */
static int visit_versions(const train_parts *p, int i, const nb_tensor *t, int next_step, buffer_visit visit, void *ctx) {
    nb_stage *s = &p->model->stages[i];
    size_t count;
    float *v = nb_stash_versions(p->stash[i], &count);
    int tau = s->n_params && v ? (int)(count / s->n_params) : 0;
    const float *newer = s->params + t->offset;
    char key[256];
    for (int age = 1; age <= tau; age++) {
        int slot = ((next_step - age) % tau + tau) % tau;
        float *data = v + (size_t)slot * s->n_params + t->offset;
        snprintf(key, sizeof key, "version.%d:%s", age, saved_name(t));
        state_buf b = {key, data, t->numel, t->tied_copy, age, newer, 0, device_of(s)};
        if (visit(ctx, &b)) return -1;
        newer = data;
    }
    return 0;
}

/* Every buffer of stage i in one order, so that saving and loading cannot disagree about what the state
 * holds; per tensor: weights, optimizer buffers, versions, EF. */
static int visit_stage(const train_parts *p, int i, int next_step, buffer_visit visit, void *ctx) {
    nb_stage *s = &p->model->stages[i];
    char key[256];
    int k = 0;
    size_t n_ef;
    float *ef = nb_stash_ef_buffer(p->stash[i], &n_ef);
    for (int ti = 0; ti < s->n_tensors; ti++) {
        const nb_tensor *t = &s->tensors[ti];
        snprintf(key, sizeof key, "param:%s", saved_name(t));
        state_buf w = {key, s->params + t->offset, t->numel, t->tied_copy, 0, NULL, 0, device_of(s)};
        if (visit(ctx, &w) || visit_optimizer(p, i, t, &k, visit, ctx) ||
            visit_versions(p, i, t, next_step, visit, ctx))
            return -1;
        snprintf(key, sizeof key, "ef:%s", saved_name(t));
        state_buf e = {key, ef ? ef + t->offset : NULL, t->numel, t->tied_copy, 0, NULL, 1, device_of(s)};
        if (ef && visit(ctx, &e)) return -1;
    }
    if (k != nb_optimizer_state_count(p->opt[i]))
        return nb_fail("stage %d: the optimizer's buffers do not follow the stage's tensor table", i);
    return 0;
}

/* ------------------------------------------------------------------ saving */
typedef struct {
    nb_st_tensor *t;
    int n, cap;
    char **meta;   /* key, value, key, value, ... */
    int n_meta;    /* strings, twice the pairs */
    int cap_meta;
    int ef_running;  /* of the stage being visited */
    float **copies;  /* the host's copies of a device's buffers, until the file is written */
    int n_copies, cap_copies;
} state_list;

static int add_tensor(state_list *l, const char *name, const float *data, size_t n) {
    if (l->n == l->cap) {
        int cap = l->cap ? 2 * l->cap : 64;
        nb_st_tensor *t = realloc(l->t, sizeof *t * (size_t)cap);
        if (!t) return nb_fail("out of memory");
        l->t = t;
        l->cap = cap;
    }
    nb_st_tensor *t = &l->t[l->n];
    memset(t, 0, sizeof *t);
    if (!(t->name = strdup(name))) return nb_fail("out of memory");
    l->n++;
    t->ndim = 1;
    t->shape[0] = (int64_t)n;
    t->data = data;
    return 0;
}

static int add_meta(state_list *l, const char *key, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int add_meta(state_list *l, const char *key, const char *fmt, ...) {
    if (l->n_meta + 2 > l->cap_meta) {
        int cap = l->cap_meta ? 2 * l->cap_meta : 64;
        char **m = realloc(l->meta, sizeof *m * (size_t)cap);
        if (!m) return nb_fail("out of memory");
        l->meta = m;
        l->cap_meta = cap;
    }
    va_list ap, ap2;
    va_start(ap, fmt);
    va_copy(ap2, ap);
    int len = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    char *v = len >= 0 ? malloc((size_t)len + 1) : NULL;
    if (v) vsnprintf(v, (size_t)len + 1, fmt, ap2);
    va_end(ap2);
    char *k = strdup(key);
    if (!v || !k) {
        free(v);
        free(k);
        return nb_fail("out of memory");
    }
    l->meta[l->n_meta++] = k;
    l->meta[l->n_meta++] = v;
    return 0;
}

/* A device's buffer copied to the host for the file (kept until free_list): the data to write. */
static const float *host_copy(state_list *l, const state_buf *b) {
    if (!b->device) return b->data;
    if (l->n_copies == l->cap_copies) {
        const int cap = l->cap_copies ? 2 * l->cap_copies : 64;
        float **c = realloc(l->copies, sizeof *c * (size_t)cap);
        if (!c) return NULL;
        l->copies = c, l->cap_copies = cap;
    }
    float *h = malloc(sizeof(float) * (b->n ? b->n : 1));
    if (!h) return NULL;
    nb_stage_to_host(b->device, h, b->data, sizeof(float) * b->n);
    return l->copies[l->n_copies++] = h;
}

static void free_list(state_list *l) {
    for (int i = 0; i < l->n_copies; i++) free(l->copies[i]);
    free(l->copies);
    for (int i = 0; i < l->n; i++) free((char *)l->t[i].name);
    for (int i = 0; i < l->n_meta; i++) free(l->meta[i]);
    free(l->t);
    free(l->meta);
}

static int visit_save(void *ctx, const state_buf *b) {
    state_list *l = ctx;
    if (b->copy || (b->ef && !l->ef_running)) return 0;
    const float *data = host_copy(l, b);
    if (!data) return nb_fail("out of memory for a copy of %s", b->key);
    return add_tensor(l, b->key, data, b->n);
}

/* Stage i's buffers and its tensors' update counts (a tied copy's count is its embedding's). */
static int gather_stage(state_list *l, const train_parts *p, int i, int next_step) {
    nb_stage *s = &p->model->stages[i];
    l->ef_running = nb_stash_ef_running(p->stash[i]);
    if (visit_stage(p, i, next_step, visit_save, l)) return -1;
    long *counts = malloc(sizeof(long) * (size_t)(s->n_tensors ? s->n_tensors : 1));
    if (!counts) return nb_fail("out of memory");
    nb_optimizer_get_counts(p->opt[i], counts);
    int rc = 0;
    char key[256];
    for (int t = 0; t < s->n_tensors && !rc; t++) {
        if (s->tensors[t].tied_copy) continue;
        snprintf(key, sizeof key, "count:%s", s->tensors[t].name);
        rc = add_meta(l, key, "%ld", counts[t]);
    }
    free(counts);
    return rc;
}

/* What every file of the state records: its format, the split, the step, the optimizer's steps (equal on
 * every stage of [first, last]: each steps once per training step). */
static int gather_step(state_list *l, const train_parts *p, int first, int last, int next_step) {
    long steps = nb_optimizer_steps(p->opt[first]);
    for (int i = first + 1; i <= last; i++)
        if (nb_optimizer_steps(p->opt[i]) != steps) return nb_fail("stage %d's optimizer is at another step", i);
    return add_meta(l, "state_format", STATE_FORMAT) || add_meta(l, "stages", "%d", p->model->n_stages) ||
           add_meta(l, "next_step", "%d", next_step) || add_meta(l, "optimizer_steps", "%ld", steps);
}

/* The run's configuration and the loader's position: in the one file, or in the first stage's part. */
static int gather_run(state_list *l, const train_parts *p, const nb_train_options *o) {
    run_field fields[RUN_FIELDS_MAX];
    int n = run_fields(o, p->model->n_stages, fields), rc = 0;
    char key[80];
    for (int i = 0; i < n && !rc; i++) {
        snprintf(key, sizeof key, "run.%s", fields[i].key);
        rc = add_meta(l, key, "%s", fields[i].value);
    }
    rc = rc || add_meta(l, "loader_position", "%" PRIu64, nb_loader_position(p->train));
    rc = rc || add_meta(l, "loader_fingerprint", "%" PRIu64, nb_loader_fingerprint(p->train));
    return rc;
}

/* Removes a checkpoint folder written by train_state_save or a pipeline's parts: the completion marker
 * first (so that a half-removed folder is never taken for a checkpoint), the other files, temporaries a
 * killed save left, then the folder. Anything else in it stays, and so does the folder then. A folder
 * that is a symbolic link is refused: nothing is deleted through it. */
int train_state_remove(const char *dir) {
    return nb_fs_remove_files(dir, markers, (int)(sizeof markers / sizeof markers[0]), is_checkpoint_file,
                              "checkpoint folder");
}

/* Where a save is about to write or replace a folder of ours, a symbolic link is refused. */
static int refuse_link(const char *dir, const char *path) {
    if (!nb_fs_is_link(path)) return 0;
    return nb_fail("checkpoint %s: %s is a symbolic link, not a folder nobubble wrote: refusing to write or delete "
                   "through it (remove the link yourself)", dir, path);
}

/* Puts the finished folder tmp in place as dir: one rename when dir does not exist yet. An existing dir
 * (a run saving the same step again) is swapped with tmp in one step where the file system allows, so
 * that dir always holds one complete checkpoint; elsewhere its marker goes first (a crash in between
 * leaves it incomplete, never mixed). */
static int install(const char *tmp, const char *dir) {
    if (refuse_link(dir, dir)) return -1;
    if (rename(tmp, dir) == 0) return 0;
    if (errno != EEXIST && errno != ENOTEMPTY)
        return nb_fail("checkpoint %s: cannot rename %s into place: %s", dir, tmp, strerror(errno));
#ifdef RENAME_EXCHANGE
    if (renameat2(AT_FDCWD, tmp, AT_FDCWD, dir, RENAME_EXCHANGE) == 0) {
        train_state_remove(tmp);   /* now the old checkpoint */
        return 0;
    }
#endif
    /* No atomic exchange here: the old checkpoint leaves its name whole, then the new one takes it. */
    char gone[4300];
    snprintf(gone, sizeof gone, "%s" STATE_DELETING, dir);
    if (train_state_remove(gone)) return -1;
    if (rename(dir, gone)) return nb_fail("checkpoint %s: cannot move it aside to %s: %s", dir, gone, strerror(errno));
    if (rename(tmp, dir)) return nb_fail("checkpoint %s: cannot replace it with %s: %s", dir, tmp, strerror(errno));
    train_state_remove(gone);
    return 0;
}

/* A checkpoint folder goes in two moves so that a kill at any moment leaves either the whole checkpoint
 * under its name or nothing there: renamed out of its committed name to DIR.deleting (which no reader
 * takes for a checkpoint), then its files removed. A DIR.deleting that a killed removal left is removed
 * first, and every such leftover goes when a run starts (train_state_clean_leftovers). */
int train_state_discard(const char *dir) {
    char gone[4300];
    if (refuse_link(dir, dir)) return -1;
    snprintf(gone, sizeof gone, "%s" STATE_DELETING, dir);
    if (train_state_remove(gone)) return -1;
    if (rename(dir, gone)) {
        if (errno == ENOENT) return 0;
        return nb_fail("checkpoint %s: cannot rename it to %s before removing it: %s", dir, gone, strerror(errno));
    }
    train_fault_point("prune", 0);
    return train_state_remove(gone);
}

/* "step_NNNNNN.deleting" or "step_NNNNNN.partial": what a killed removal or save left. */
static int is_leftover(const char *name) {
    if (strncmp(name, "step_", 5)) return 0;
    const char *end = name + 5 + strspn(name + 5, "0123456789");
    return end > name + 5 && (!strcmp(end, STATE_DELETING) || !strcmp(end, ".partial"));
}

void train_state_clean_leftovers(const char *save_dir) {
    DIR *d = opendir(save_dir);
    for (struct dirent *e; d && (e = readdir(d));) {
        char path[4400];
        if (!is_leftover(e->d_name)) continue;
        snprintf(path, sizeof path, "%s/%s", save_dir, e->d_name);
        if (train_state_remove(path)) fprintf(stderr, "warning: %s\n", nb_last_error());
    }
    if (d) closedir(d);
}

/* The end of a save whose files are in tmp (rc: whether writing them failed): installed as dir, the
 * rename itself made durable; or, on failure, tmp removed so that nothing else changed. */
static int finish_save(int rc, const char *tmp, const char *dir) {
    if (!rc) rc = install(tmp, dir);
    if (rc) {
        train_state_remove(tmp);
        return -1;
    }
    char *parent = nb_fs_dirname(dir);
    if (parent) nb_fs_fsync_dir(parent);
    free(parent);
    return 0;
}

/* Writes everything into DIR.partial (cleared of a killed save's leftovers first), then installs it:
 * a folder named DIR exists only complete, and a failed save (a full disk) changes nothing else. */
int train_state_save(const char *dir, const train_parts *p, int next_step, const nb_train_options *o) {
    char tmp[4200], path[4300];
    snprintf(tmp, sizeof tmp, "%s.partial", dir);
    if (refuse_link(dir, tmp) || refuse_link(dir, dir) || train_state_remove(tmp)) return -1;
    if (mkdir(tmp, 0777)) return nb_fail("checkpoint %s: cannot create %s: %s", dir, tmp, strerror(errno));
    state_list l;
    memset(&l, 0, sizeof l);
    int rc = nb_export_hf(p->model, tmp);
    for (int i = 0; i < p->model->n_stages && !rc; i++) rc = gather_stage(&l, p, i, next_step);
    if (!rc) rc = gather_step(&l, p, 0, p->model->n_stages - 1, next_step) || gather_run(&l, p, o);
    snprintf(path, sizeof path, "%s/state.safetensors", tmp);
    if (!rc) rc = nb_st_write(path, l.t, l.n, (const char *const *)l.meta, l.n_meta / 2);
    free_list(&l);
    return finish_save(rc, tmp, dir);
}

/* ------------------------------------------------------------------ a pipeline's parts */
/* Stage `stage`'s part, written into DIR.partial as soon as that stage has made update next_step - 1:
 * its weights (model-0000k-of-0000P.safetensors) and state (state-0000k-of-0000P.safetensors); the
 * first stage's part also holds the run's configuration and loader position (p->train, positioned
 * at the step boundary). Every part records the step, so that parts of two saves are never mixed.
 * The stages write at the same time; nothing is complete until train_state_commit. */
int train_state_save_part(const char *dir, const train_parts *p, int stage, int next_step, const nb_train_options *o) {
    char tmp[4200], path[4500], file[256];
    snprintf(tmp, sizeof tmp, "%s.partial", dir);
    if (mkdir(tmp, 0777) && errno != EEXIST) return nb_fail("checkpoint %s: cannot create %s: %s", dir, tmp, strerror(errno));
    if (refuse_link(dir, tmp)) return -1;
    state_list l;
    memset(&l, 0, sizeof l);
    int rc = nb_export_hf_part(p->model, stage, tmp, next_step) || gather_stage(&l, p, stage, next_step) ||
             gather_step(&l, p, stage, stage, next_step) || add_meta(&l, "part", "%d", stage + 1) ||
             (stage == 0 && gather_run(&l, p, o));
    nb_st_part_name(file, sizeof file, "state", stage + 1, p->model->n_stages);
    snprintf(path, sizeof path, "%s/%s", tmp, file);
    if (!rc) rc = nb_st_write(path, l.t, l.n, (const char *const *)l.meta, l.n_meta / 2);
    free_list(&l);
    return rc;
}

/* Whether name is one of the files a P-part checkpoint consists of. */
static int is_part_file(const char *name, int P) {
    char want[256];
    if (!strcmp(name, "config.json") || !strcmp(name, "model.safetensors.index.json")) return 1;
    for (int k = 1; k <= P; k++) {
        nb_st_part_name(want, sizeof want, "model", k, P);
        if (!strcmp(name, want)) return 1;
        nb_st_part_name(want, sizeof want, "state", k, P);
        if (!strcmp(name, want)) return 1;
    }
    return 0;
}

/* Leftovers of a killed save of the same step (temporaries, parts of another split) are removed, so
 * that the folder holds exactly this checkpoint. */
static void remove_strays(const char *tmp, int P) {
    char path[4500];
    DIR *d = opendir(tmp);
    for (struct dirent *e; d && (e = readdir(d));) {
        if (!is_checkpoint_file(e->d_name) || is_part_file(e->d_name, P)) continue;
        snprintf(path, sizeof path, "%s/%s", tmp, e->d_name);
        unlink(path);
    }
    if (d) closedir(d);
}

/* Once every stage has written its part: config.json and the model's index (Hugging Face's sharded
 * layout), the state's index last (the completion marker), then DIR.partial renamed to DIR. */
int train_state_commit(const char *dir, const nb_model *m) {
    char tmp[4200], path[4500];
    snprintf(tmp, sizeof tmp, "%s.partial", dir);
    if (refuse_link(dir, tmp)) return -1;
    remove_strays(tmp, m->n_stages);
    int rc = 0;
    for (int k = 1; k <= m->n_stages && !rc; k++)
        for (int kind = 0; kind < 2 && !rc; kind++) {
            char file[256];
            struct stat st;
            nb_st_part_name(file, sizeof file, kind ? "state" : "model", k, m->n_stages);
            snprintf(path, sizeof path, "%s/%s", tmp, file);
            if (stat(path, &st))
                rc = nb_fail("checkpoint %s: part %s is missing (is --save-dir on a file system every process sees?)",
                             dir, path);
        }
    snprintf(path, sizeof path, "%s/state.safetensors.index.json", tmp);
    rc = rc || nb_export_hf_index(m, tmp) || nb_st_write_index(path, NULL, 0, m->n_stages, 0);
    return finish_save(rc, tmp, dir);
}

void train_state_abort(const char *dir) {
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.partial", dir);
    if (train_state_remove(tmp)) fprintf(stderr, "warning: %s\n", nb_last_error());
}

/* ------------------------------------------------------------------ loading */
typedef struct {
    const nb_st_set *set;      /* state.safetensors, or the parts its index names */
    const char *where;         /* how errors name it */
    int override;
    int ef_found, ef_wanted;   /* EF buffers of the stage's own (not copied) tensors */
    int filled;                /* versions the checkpoint lacked, filled from newer ones (--override) */
} load_ctx;

static int read_buffer(const nb_st_file *f, const nb_st_entry *e, const state_buf *b) {
    const size_t n = b->n;
    if (e->dtype != NB_ST_F32)
        return nb_fail("%s: tensor '%s' is %s; a training state holds F32 only", f->path, e->name, nb_st_dtype_name(e->dtype));
    if (e->numel != n)
        return nb_fail("%s: tensor '%s' has %zu values, this run needs %zu", f->path, e->name, e->numel, n);
    if (!b->device) return nb_st_read_f32(f, e->name, b->data, n);
    float *h = malloc(sizeof(float) * (n ? n : 1));  /* read on the host, then copied to the device */
    if (!h) return nb_fail("%s: out of memory reading '%s'", f->path, e->name);
    const int rc = nb_st_read_f32(f, e->name, h, n);
    if (!rc) nb_stage_from_host(b->device, b->data, h, sizeof(float) * n);
    free(h);
    return rc;
}

static int visit_load(void *ctx, const state_buf *b) {
    load_ctx *c = ctx;
    const nb_st_file *in = NULL;
    const nb_st_entry *e = nb_st_set_find(c->set, b->key, &in);
    if (b->ef) {   /* absent where EF did not run at the last step: it starts afresh there */
        c->ef_wanted += !b->copy;
        c->ef_found += e && !b->copy;
        return e ? read_buffer(in, e, b) : 0;
    }
    if (!e && b->age && c->override) {   /* another delay or split needs older versions than were kept */
        if (b->device) nb_stage_copy(b->device, b->data, b->newer, sizeof(float) * b->n);
        else memcpy(b->data, b->newer, sizeof(float) * b->n);
        c->filled++;
        return 0;
    }
    if (!e && b->age)
        return nb_fail("%s: no tensor '%s': the checkpoint keeps fewer weight versions than this run's delay needs",
                       c->where, b->key);
    if (!e) return nb_fail("%s: no tensor '%s' (the state of this model and optimizer)", c->where, b->key);
    return read_buffer(in, e, b);
}

/* Stage i's update counts and step count (steps: the saved optimizer step), from whichever part holds
 * each tensor's. */
static int restore_counts(const load_ctx *c, const train_parts *p, int i, const state_meta *sm) {
    nb_stage *s = &p->model->stages[i];
    long *counts = malloc(sizeof(long) * (size_t)(s->n_tensors ? s->n_tensors : 1));
    if (!counts) return nb_fail("out of memory");
    int rc = 0;
    for (int t = 0; t < s->n_tensors && !rc; t++) {
        long long n;
        rc = state_meta_count(c->set, c->where, sm, saved_name(&s->tensors[t]), &n);
        counts[t] = (long)n;
    }
    if (!rc) nb_optimizer_restore(p->opt[i], counts, (long)sm->optimizer_steps);
    free(counts);
    return rc;
}

static int load_stage(load_ctx *c, const train_parts *p, int i, const state_meta *sm) {
    c->ef_found = c->ef_wanted = 0;
    if (visit_stage(p, i, (int)sm->next_step, visit_load, c) || restore_counts(c, p, i, sm)) return -1;
    nb_stash_set_ef_running(p->stash[i], c->ef_wanted > 0 && c->ef_found == c->ef_wanted);
    return 0;
}

/* The loader's position; with another batch shape (--override) the one that has seen about as many
 * tokens. */
static int seek_loader(const nb_st_file *f, const train_parts *p, const nb_train_options *o) {
    unsigned long long position;
    if (state_meta_loader(f, o->batch, o->seq_len ? o->seq_len : o->model.context, &position)) return -1;
    return nb_loader_seek(p->train, (uint64_t)position);
}

/* Everything before any buffer is read: the format, the configuration, the step (f: the file or the
 * first stage's part, which records the run). */
static int check_checkpoint(const nb_st_set *set, const train_parts *p, const nb_train_options *o, char *overridden,
                            size_t size, state_meta *sm) {
    const nb_st_file *f = &set->files[0];
    const char *format = nb_st_meta(f, "state_format");
    if (!format || strcmp(format, STATE_FORMAT))
        return nb_fail("%s: state format %s, this nobubble reads format %s (a state saved before tensors were "
                       "recorded by name cannot be resumed; its model.safetensors still loads)",
                       f->path, format ? format : "not recorded", STATE_FORMAT);
    uint64_t fingerprint = p->train ? nb_loader_fingerprint(p->train) : 0;
    if (run_fields_check(f, o, p->model->n_stages, p->train ? &fingerprint : NULL, overridden, size) ||
        state_meta_steps(set, sm))   /* a pipeline's parts belong to one save: the same step in each */
        return -1;
    if (sm->next_step > o->steps)
        return nb_fail("--resume %s: the checkpoint is at step %lld, past this run's %d steps (--steps may grow, "
                       "not shrink below the checkpoint)", o->resume_dir, sm->next_step, o->steps);
    return 0;
}

static void report_load(const nb_st_file *f, const train_parts *p, const nb_train_options *o, const char *overridden,
                        int filled) {
    if (overridden[0])
        fprintf(stderr, "warning: --resume %s --override: continuing with %s\n", o->resume_dir, overridden);
    if (filled)
        fprintf(stderr, "warning: --resume %s: %d weight version(s) this run's delay needs are older than the "
                        "checkpoint keeps; they start as the oldest it keeps (as a fresh run starts from w_0)\n",
                o->resume_dir, filled);
    const char *saved = nb_st_meta(f, "stages");
    if (!o->quiet && saved && atoi(saved) != p->model->n_stages)
        printf("checkpoint of %s stage(s) mapped by tensor name onto %d\n", saved, p->model->n_stages);
}

int train_state_load_stages(const char *dir, const train_parts *p, int first, int last, int *next_step,
                            const nb_train_options *o) {
    char overridden[1024] = "", where[4200];
    nb_st_set set;
    if (nb_st_set_open(dir, "state", &set)) return -1;
    const nb_st_file *head = &set.files[0];
    if (set.n == 1) snprintf(where, sizeof where, "%s", head->path);
    else snprintf(where, sizeof where, "%s/state.safetensors.index.json (its %d parts)", dir, set.n);
    state_meta sm = {0, 0};
    int rc = check_checkpoint(&set, p, o, overridden, sizeof overridden, &sm);
    load_ctx c = {&set, where, o->resume_override, 0, 0, 0};
    for (int i = first; i <= last && !rc; i++) rc = load_stage(&c, p, i, &sm);
    if (!rc && p->train) rc = seek_loader(head, p, o);
    if (!rc && first == 0) report_load(head, p, o, overridden, c.filled);
    *next_step = (int)sm.next_step;
    nb_st_set_close(&set);
    return rc;
}

int train_state_step(const char *dir, long long *next_step) {
    nb_st_set set;
    if (nb_st_set_open(dir, "state", &set)) return -1;
    state_meta sm = {0, 0};
    int rc = state_meta_steps(&set, &sm);
    nb_st_set_close(&set);
    *next_step = sm.next_step;
    return rc;
}

int train_state_load(const char *dir, const train_parts *p, int *next_step, const nb_train_options *o) {
    return train_state_load_stages(dir, p, 0, p->model->n_stages - 1, next_step, o);
}
