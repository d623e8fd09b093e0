/* Saved files checked before they are needed (nb_verify, `nobubble verify`): a checkpoint, an export or a
 * save folder read as a resume, eval or import reads it, every tensor read whole so that each is checked
 * against its checksum and each header against its own. For checkpoints copied to another machine or kept
 * for weeks: damage is found now, not when a resume or an evaluation of them is days away. A save folder's
 * checkpoints are found as a resume finds them (train_list_steps); a folder that is none of these is searched
 * for them (a run's --out holds its export and save folder). */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "nobubble/checkpoint.h"
#include "nobubble/model.h"
#include "nobubble/train.h"
#include "train/run/run.h"
#include "util/error.h"

typedef struct {
    const nb_verify_options *o;
    int failed;
} verify_run;

static void passed(const verify_run *v, const char *path, const char *what) {
    if (v->o->report) v->o->report(v->o->ctx, path, NULL, what);
}

static void failed(verify_run *v, const char *path, const char *why) {
    v->failed++;
    if (v->o->report) v->o->report(v->o->ctx, path, why, NULL);
}

/* One open file, read whole. */
static void verify_open_file(verify_run *v, const nb_st_file *f) {
    int checked = 0;
    if (nb_st_verify(f, &checked)) {
        failed(v, f->path, nb_last_error());
        return;
    }
    char what[200];
    snprintf(what, sizeof what, "%d tensor%s, %d with a checksum; %s", f->n, f->n == 1 ? "" : "s", checked,
             nb_st_meta(f, NB_ST_HEADER_CHECKSUM_KEY) ? "the header's checksum matches"
                                                     : "no header checksum (written before it, or by another tool)");
    passed(v, f->path, what);
}

static void verify_file(verify_run *v, const char *path) {
    nb_st_file f;
    if (nb_st_open(path, &f)) {
        failed(v, path, nb_last_error());
        return;
    }
    verify_open_file(v, &f);
    nb_st_close(&f);
}

/* dir/BASE.safetensors, or the parts of dir/BASE.safetensors.index.json, as a resume or an import opens them:
 * 1 when every file passed. */
static int verify_set(verify_run *v, const char *dir, const char *base) {
    nb_st_set set;
    const int failures = v->failed;
    if (nb_st_set_open(dir, base, &set)) {
        char path[4200];
        snprintf(path, sizeof path, "%s/%s.safetensors", dir, base);
        failed(v, path, nb_last_error());
        return 0;
    }
    for (int p = 0; p < set.n; p++) verify_open_file(v, &set.files[p]);
    nb_st_set_close(&set);
    return v->failed == failures;
}

static int ends_with(const char *s, const char *end) {
    const size_t n = strlen(s), m = strlen(end);
    return n >= m && !strcmp(s + n - m, end);
}

/* "BASE-0000k-of-0000n.safetensors": a part, opened through its index's base. */
static int is_part_name(const char *name) {
    const size_t n = strlen(name), tail = strlen("-00001-of-00002.safetensors");
    if (n <= tail || !ends_with(name, ".safetensors")) return 0;
    const char *t = name + n - tail;
    for (int i = 1; i <= 5; i++)
        if (t[i] < '0' || t[i] > '9' || t[i + 9] < '0' || t[i + 9] > '9') return 0;
    return t[0] == '-' && !strncmp(t + 6, "-of-", 4);
}

/* BASE of a BASE.safetensors or BASE.safetensors.index.json entry of dir (malloc'ed), NULL for anything else;
 * parts go through their index. */
static char *safetensors_base(const char *dir, const char *name) {
    (void)dir;
    const char *end = ends_with(name, ".safetensors.index.json") ? ".safetensors.index.json"
                      : ends_with(name, ".safetensors") && !is_part_name(name) ? ".safetensors"
                                                                                : NULL;
    return end && strlen(name) > strlen(end) ? strndup(name, strlen(name) - strlen(end)) : NULL;
}

static int by_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* dir's entries that pick names (malloc'ed; NULL: not wanted), sorted and unique: a safetensors file and its
 * index name one set. Their count; *out malloc'ed. */
static int list_names(const char *dir, char *(*pick)(const char *dir, const char *name), char ***out) {
    DIR *d = opendir(dir);
    char **names = NULL;
    int n = 0, cap = 0;
    for (struct dirent *e; d && (e = readdir(d));) {
        char *name = pick(dir, e->d_name);
        if (!name) continue;
        if (n == cap) {
            char **grown = realloc(names, (size_t)(cap = cap ? 2 * cap : 16) * sizeof *grown);
            if (!grown) { free(name); break; }
            names = grown;
        }
        names[n++] = name;
    }
    if (d) closedir(d);
    if (n) qsort(names, (size_t)n, sizeof *names, by_name);
    int kept = 0;
    for (int i = 0; i < n; i++) {
        if (kept && !strcmp(names[kept - 1], names[i])) free(names[i]);
        else names[kept++] = names[i];
    }
    *out = names;
    return kept;
}

/* A folder below dir to search (not a link, which could lead back up; not a hidden one). */
static char *pick_subfolder(const char *dir, const char *name) {
    char path[4200];
    struct stat st;
    if (name[0] == '.' || (size_t)snprintf(path, sizeof path, "%s/%s", dir, name) >= sizeof path) return NULL;
    return !lstat(path, &st) && S_ISDIR(st.st_mode) ? strdup(name) : NULL;
}

static void free_names(char **names, int n) {
    for (int i = 0; i < n; i++) free(names[i]);
    free(names);
}

/* The model of a folder whose files passed, loaded into one as eval loads it (every name and shape), after
 * the same memory check as eval's: a model that cannot fit is a failure here too, not a process killed. */
static void verify_load(verify_run *v, const char *dir, const nb_config *cfg) {
    nb_memory_estimate mem;
    if (nb_infer_memory_estimate(cfg, 0, 0, 0, &mem) ||
        (v->o->memory_check && nb_memory_check(&mem, "--no-memory-check"))) {
        failed(v, dir, nb_last_error());
        return;
    }
    nb_model m;
    if (nb_model_create(&m, cfg, 1, NULL, NULL)) {
        failed(v, dir, nb_last_error());
        return;
    }
    char what[120];
    snprintf(what, sizeof what, "the model loads (%zu parameters, every tensor's name and shape as config.json says)",
             nb_config_param_count(cfg));
    if (nb_import_hf(&m, dir)) failed(v, dir, nb_last_error());
    else passed(v, dir, what);
    nb_model_free(&m);
}

/* config.json as eval reads it, and (model_passed: the model's files passed) the model loaded. */
static void verify_model(verify_run *v, const char *dir, int model_passed) {
    char path[4200];
    snprintf(path, sizeof path, "%s/config.json", dir);
    nb_config cfg;
    if (nb_hf_read_config(dir, &cfg)) {
        failed(v, path, nb_last_error());
        return;
    }
    passed(v, path, "a model nobubble runs");
    if (model_passed) verify_load(v, dir, &cfg);
}

/* A checkpoint, an export or a save folder, verified: 0 when dir is none of them (holds no safetensors file,
 * config.json or step_NNNNNN folder), and nothing is said. */
static int verify_folder(verify_run *v, const char *dir) {
    long *steps;
    char **bases, sub[4200];
    const int n_steps = train_list_steps(dir, &steps), n_bases = list_names(dir, safetensors_base, &bases);
    for (int i = n_steps - 1; i >= 0; i--) {   /* oldest first */
        snprintf(sub, sizeof sub, "%s/step_%06ld", dir, steps[i]);
        if (!verify_folder(v, sub))   /* a checkpoint's folder with nothing in it: what a resume skips */
            failed(v, sub, "holds no .safetensors file or config.json (an incomplete checkpoint)");
    }
    int model_passed = 0;   /* model.safetensors (or its parts), every file passed: then the load is tried */
    for (int i = 0; i < n_bases; i++) {
        const int set_passed = verify_set(v, dir, bases[i]);
        model_passed |= set_passed && !strcmp(bases[i], "model");
    }
    snprintf(sub, sizeof sub, "%s/config.json", dir);
    struct stat st;
    const int has_config = !stat(sub, &st);
    if (has_config) verify_model(v, dir, model_passed);
    free(steps);
    free_names(bases, n_bases);
    return n_steps || n_bases || has_config;
}

/* dir, or where it is none of them (a run's --out, a sweep's folder, a folder of runs) the folders below it
 * that are, at any depth: how many were verified. */
static int verify_tree(verify_run *v, const char *dir) {
    if (verify_folder(v, dir)) return 1;
    char **subs, sub[4200];
    const int n = list_names(dir, pick_subfolder, &subs);
    int found = 0;
    for (int i = 0; i < n; i++) {
        snprintf(sub, sizeof sub, "%s/%s", dir, subs[i]);
        found += verify_tree(v, sub);
    }
    free_names(subs, n);
    return found;
}

void nb_verify_defaults(nb_verify_options *o) {
    memset(o, 0, sizeof *o);
    o->memory_check = 1;
}

int nb_verify(const nb_verify_options *o) {
    verify_run v = {o, 0};
    struct stat st;
    if (!o->path) failed(&v, "(none)", "no path given (expected a .safetensors file, a checkpoint, an export or a "
                                       "save folder)");
    else if (stat(o->path, &st)) failed(&v, o->path, "no such file or folder");
    else if (S_ISDIR(st.st_mode)) {
        if (!verify_tree(&v, o->path))
            failed(&v, o->path, "holds no .safetensors file, step_NNNNNN folder or config.json, nor does any folder "
                                "below it (expected a checkpoint, an export, a save folder or folders holding them)");
    }
    else verify_file(&v, o->path);
    return v.failed;
}
