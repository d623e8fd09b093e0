/* Saving and restoring the full training state (see state.h). */
#include "train/state.h"
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "nobubble/checkpoint.h"
#include "util/error.h"

enum { MAX_META = 64, META_LEN = 4096 };

typedef struct {
    nb_st_tensor *t;
    int n, cap;
    char *meta[MAX_META];
    int n_meta;
} state_list;

static int add_tensor(state_list *l, const char *name, const float *data, size_t n) {
    if (l->n == l->cap) {
        int cap = l->cap ? 2 * l->cap : 64;
        nb_st_tensor *t = realloc(l->t, sizeof *t * (size_t)cap);
        if (!t) return nb_fail("out of memory");
        l->t = t;
        l->cap = cap;
    }
    nb_st_tensor *t = &l->t[l->n++];
    memset(t, 0, sizeof *t);
    t->name = strdup(name);
    t->ndim = 1;
    t->shape[0] = (int64_t)n;
    t->data = data;
    return t->name ? 0 : nb_fail("out of memory");
}

static void add_meta(state_list *l, const char *key, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void add_meta(state_list *l, const char *key, const char *fmt, ...) {
    if (l->n_meta + 2 > MAX_META) return;
    char *v = malloc(META_LEN);
    if (!v) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(v, META_LEN, fmt, ap);
    va_end(ap);
    l->meta[l->n_meta++] = strdup(key);
    l->meta[l->n_meta++] = v;
}

static void free_list(state_list *l) {
    for (int i = 0; i < l->n; i++) free((char *)l->t[i].name);
    for (int i = 0; i < l->n_meta; i++) free(l->meta[i]);
    free(l->t);
}

/* Every float buffer of stage i's state, named as in state.safetensors, handed to visit in one
 * order, so that saving and loading cannot disagree about what the state holds. */
typedef int (*buffer_visit)(void *ctx, const char *name, float *data, size_t n);

static int visit_stage_buffers(const train_parts *p, int i, buffer_visit visit, void *ctx) {
    nb_stage *s = &p->model->stages[i];
    char name[512];
    snprintf(name, sizeof name, "stage%d/params", i);
    if (visit(ctx, name, s->params, s->n_params)) return -1;
    for (int k = 0; k < nb_optimizer_state_count(p->opt[i]); k++) {
        const char *sn;
        float *data;
        size_t n;
        nb_optimizer_state(p->opt[i], k, &sn, &data, &n);
        snprintf(name, sizeof name, "stage%d/%s", i, sn);
        if (visit(ctx, name, data, n)) return -1;
    }
    size_t n;
    float *v = nb_stash_versions(p->stash[i], &n);
    snprintf(name, sizeof name, "stage%d/versions", i);
    if (v && visit(ctx, name, v, n)) return -1;
    float *e = nb_stash_ef_buffer(p->stash[i], &n);
    snprintf(name, sizeof name, "stage%d/ef", i);
    if (e && visit(ctx, name, e, n)) return -1;
    return 0;
}

static int visit_save(void *ctx, const char *name, float *data, size_t n) { return add_tensor(ctx, name, data, n); }

/* What must match between the saved run and the resuming one. */
static void identity(const nb_train_options *o, int n_stages, char *buf, size_t size) {
    char cfg[1024], delay[256];
    nb_config_json(&o->model, cfg, sizeof cfg);
    nb_delay_describe(&o->delay, delay, sizeof delay);
    snprintf(buf, size, "model %s; stages %d; optimizer %s; %s; batch %d x %d, micro-batches %d", cfg, n_stages,
             nb_optimizer_name(o->optim.kind), delay, o->batch, o->seq_len ? o->seq_len : o->model.context,
             o->microbatches);
}

int train_state_save(const char *dir, const train_parts *p, int next_step, const nb_train_options *o) {
    if (mkdir(dir, 0777) && errno != EEXIST) return nb_fail("checkpoint %s: cannot create it: %s", dir, strerror(errno));
    if (nb_export_hf(p->model, dir)) return -1;
    state_list l;
    memset(&l, 0, sizeof l);
    char name[512], key[64], ident[2048];
    int rc = 0;
    for (int i = 0; i < p->model->n_stages && !rc; i++) {
        nb_stage *s = &p->model->stages[i];
        rc |= visit_stage_buffers(p, i, visit_save, &l);
        long *counts = malloc(sizeof(long) * (size_t)(s->n_tensors ? s->n_tensors : 1));
        char *list = malloc(META_LEN);
        if (!counts || !list) rc = nb_fail("out of memory");
        if (!rc) {
            nb_optimizer_get_counts(p->opt[i], counts);
            size_t at = 0;
            for (int t = 0; t < s->n_tensors && at < META_LEN - 32; t++)
                at += (size_t)snprintf(list + at, META_LEN - at, "%s%ld", t ? "," : "", counts[t]);
            snprintf(key, sizeof key, "stage%d.counts", i);
            add_meta(&l, key, "%s", list);
            snprintf(key, sizeof key, "stage%d.steps", i);
            add_meta(&l, key, "%ld", nb_optimizer_steps(p->opt[i]));
            snprintf(key, sizeof key, "stage%d.ef_running", i);
            add_meta(&l, key, "%d", nb_stash_ef_running(p->stash[i]));
        }
        free(counts);
        free(list);
    }
    identity(o, p->model->n_stages, ident, sizeof ident);
    add_meta(&l, "run", "%s", ident);
    add_meta(&l, "next_step", "%d", next_step);
    add_meta(&l, "loader_position", "%" PRIu64, nb_loader_position(p->train));
    add_meta(&l, "loader_fingerprint", "%" PRIu64, nb_loader_fingerprint(p->train));
    snprintf(name, sizeof name, "%s/state.safetensors", dir);
    if (!rc) rc = nb_st_write(name, l.t, l.n, (const char *const *)l.meta, l.n_meta / 2);
    free_list(&l);
    return rc;
}

/* Reads tensor name (exactly n floats) into out. */
static int read_exact(void *ctx, const char *name, float *out, size_t n) {
    const nb_st_file *f = ctx;
    const nb_st_entry *e = nb_st_find(f, name);
    if (!e) return nb_fail("%s: no tensor %s", f->path, name);
    if (e->numel != n) return nb_fail("%s: tensor %s has %zu values, the run needs %zu", f->path, name, e->numel, n);
    return nb_st_read_f32(f, name, out, n);
}

static int meta_long(const nb_st_file *f, const char *key, long long *out) {
    const char *v = nb_st_meta(f, key);
    char *end;
    if (!v) return nb_fail("%s: no metadata %s", f->path, key);
    errno = 0;
    *out = strtoll(v, &end, 10);
    if (errno || end == v || *end) return nb_fail("%s: metadata %s = '%s' is not an integer", f->path, key, v);
    return 0;
}

int train_state_load(const char *dir, const train_parts *p, int *next_step, const nb_train_options *o) {
    char path[4096], ident[2048], key[64];
    snprintf(path, sizeof path, "%s/state.safetensors", dir);
    nb_st_file f;
    if (nb_st_open(path, &f)) return -1;
    int rc = 0;
    identity(o, p->model->n_stages, ident, sizeof ident);
    const char *saved = nb_st_meta(&f, "run");
    if (!saved || strcmp(saved, ident))
        rc = nb_fail("--resume %s: the checkpoint is of another run (saved: %s; this run: %s)", dir,
                     saved ? saved : "nothing", ident);
    for (int i = 0; i < p->model->n_stages && !rc; i++) {
        nb_stage *s = &p->model->stages[i];
        rc |= visit_stage_buffers(p, i, read_exact, &f);
        long long steps, running;
        snprintf(key, sizeof key, "stage%d.steps", i);
        if (!rc) rc = meta_long(&f, key, &steps);
        snprintf(key, sizeof key, "stage%d.ef_running", i);
        if (!rc) rc = meta_long(&f, key, &running);
        snprintf(key, sizeof key, "stage%d.counts", i);
        const char *list = nb_st_meta(&f, key);
        long *counts = malloc(sizeof(long) * (size_t)(s->n_tensors ? s->n_tensors : 1));
        if (!rc && (!list || !counts)) rc = nb_fail("%s: no metadata %s", path, key);
        for (int t = 0; t < s->n_tensors && !rc; t++) {
            char *end;
            counts[t] = strtol(list, &end, 10);
            if (end == list || (*end != ',' && *end != 0) || (t < s->n_tensors - 1 && *end != ','))
                rc = nb_fail("%s: metadata %s does not list %d counts", path, key, s->n_tensors);
            list = end + (*end == ',');
        }
        if (!rc) {
            nb_optimizer_restore(p->opt[i], counts, (long)steps);
            nb_stash_set_ef_running(p->stash[i], (int)running);
        }
        free(counts);
    }
    long long step = 0, position = 0;
    if (!rc) rc = meta_long(&f, "next_step", &step);
    if (!rc) rc = meta_long(&f, "loader_position", &position);
    const char *fp = nb_st_meta(&f, "loader_fingerprint");
    if (!rc && (!fp || strtoull(fp, NULL, 10) != nb_loader_fingerprint(p->train)))
        rc = nb_fail("--resume %s: the training data (shards, batch, seed) differ from the saved run's", dir);
    if (!rc) rc = nb_loader_seek(p->train, (uint64_t)position);
    if (!rc && (step < 0 || step > o->steps))
        rc = nb_fail("--resume %s: the checkpoint is at step %lld, past this run's %d steps", dir, step, o->steps);
    *next_step = (int)step;
    nb_st_close(&f);
    return rc;
}
