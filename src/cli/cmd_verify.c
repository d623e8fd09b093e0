/* nobubble verify: a checkpoint, an export or a save folder read as a resume, eval or import reads it, and
 * every tensor read whole, so that each is checked against its checksum and each header against its own.
 * For checkpoints copied to another machine or kept for weeks: damage is found now, not when a resume or an
 * evaluation of them is days away. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "cli/args.h"
#include "cli/commands.h"
#include "nobubble/checkpoint.h"
#include "nobubble/model.h"

static const char usage[] =
    "usage: nobubble verify PATH... [--quiet]\n"
    "Reads each PATH as a resume, eval or import would, and every tensor in it whole: a .safetensors file (its\n"
    "header, its header's checksum and each tensor's), a checkpoint or export folder (each safetensors file in it,\n"
    "sharded or not, its config.json, and its model loaded as eval loads it), or a save folder (each step_NNNNNN\n"
    "checkpoint in it). One line per file and folder; exit 1 when anything fails.";

typedef struct {
    int quiet, failed;
} verify_run;

static void say_ok(const verify_run *v, const char *fmt_path, const char *what) {
    if (!v->quiet) printf("%s: ok: %s\n", fmt_path, what);
}

static void say_failed(verify_run *v, const char *path, const char *why) {
    printf("%s: FAILED: %s\n", path, why);
    v->failed++;
}

/* One open file, read whole: its line. */
static void verify_open_file(verify_run *v, const nb_st_file *f) {
    int checked = 0;
    if (nb_st_verify(f, &checked)) {
        say_failed(v, f->path, nb_last_error());
        return;
    }
    char what[200];
    snprintf(what, sizeof what, "%d tensor%s, %d with a checksum; %s", f->n, f->n == 1 ? "" : "s", checked,
             nb_st_meta(f, NB_ST_HEADER_CHECKSUM_KEY) ? "the header's checksum matches"
                                                     : "no header checksum (written before it, or by another tool)");
    say_ok(v, f->path, what);
}

static void verify_file(verify_run *v, const char *path) {
    nb_st_file f;
    if (nb_st_open(path, &f)) {
        say_failed(v, path, nb_last_error());
        return;
    }
    verify_open_file(v, &f);
    nb_st_close(&f);
}

/* dir/BASE.safetensors, or the parts of dir/BASE.safetensors.index.json, as a resume or an import opens them:
 * 1 when every file passed. */
static int verify_set(verify_run *v, const char *dir, const char *base) {
    nb_st_set set;
    const int failed = v->failed;
    if (nb_st_set_open(dir, base, &set)) {
        char path[4200];
        snprintf(path, sizeof path, "%s/%s.safetensors", dir, base);
        say_failed(v, path, nb_last_error());
        return 0;
    }
    for (int p = 0; p < set.n; p++) verify_open_file(v, &set.files[p]);
    nb_st_set_close(&set);
    return v->failed == failed;
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

static int is_dir(const char *dir, const char *name) {
    char path[4200];
    struct stat st;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return !stat(path, &st) && S_ISDIR(st.st_mode);
}

/* A step_NNNNNN name (a save folder's checkpoint). */
static int is_step_name(const char *name) {
    if (strncmp(name, "step_", 5) || !name[5]) return 0;
    for (const char *c = name + 5; *c; c++)
        if (*c < '0' || *c > '9') return 0;
    return 1;
}

static int by_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* dir's entries that pick says are wanted, as malloc'ed names (their base for safetensors), sorted and unique. */
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

static char *pick_step(const char *dir, const char *name) {
    return is_step_name(name) && is_dir(dir, name) ? strdup(name) : NULL;
}

/* BASE of BASE.safetensors and of BASE.safetensors.index.json; parts go through their index. */
static char *pick_base(const char *dir, const char *name) {
    (void)dir;
    const char *end = ends_with(name, ".safetensors.index.json") ? ".safetensors.index.json"
                      : ends_with(name, ".safetensors") && !is_part_name(name) ? ".safetensors"
                                                                                : NULL;
    return end && strlen(name) > strlen(end) ? strndup(name, strlen(name) - strlen(end)) : NULL;
}

static void free_names(char **names, int n) {
    for (int i = 0; i < n; i++) free(names[i]);
    free(names);
}

/* config.json as eval reads it, and (has_model: the model's files passed) the model loaded into one as eval
 * loads it (every name and shape). */
static void verify_model(verify_run *v, const char *dir, int has_model) {
    char path[4200];
    snprintf(path, sizeof path, "%s/config.json", dir);
    nb_config cfg;
    if (nb_hf_read_config(dir, &cfg)) {
        say_failed(v, path, nb_last_error());
        return;
    }
    say_ok(v, path, "a model nobubble runs");
    if (!has_model) return;
    nb_model m;
    if (nb_model_create(&m, &cfg, 1, NULL, NULL)) {
        say_failed(v, dir, nb_last_error());
        return;
    }
    char what[120];
    snprintf(what, sizeof what, "the model loads (%zu parameters, every tensor's name and shape as config.json says)",
             nb_config_param_count(&cfg));
    if (nb_import_hf(&m, dir)) say_failed(v, dir, nb_last_error());
    else say_ok(v, dir, what);
    nb_model_free(&m);
}

static void verify_folder(verify_run *v, const char *dir) {
    char **steps, **bases;
    const int n_steps = list_names(dir, pick_step, &steps), n_bases = list_names(dir, pick_base, &bases);
    char sub[4200];
    for (int i = 0; i < n_steps; i++) {
        snprintf(sub, sizeof sub, "%s/%s", dir, steps[i]);
        verify_folder(v, sub);
    }
    int has_model = 0;   /* model.safetensors (or its parts), every file passed: then the load is tried */
    for (int i = 0; i < n_bases; i++) {
        const int passed = verify_set(v, dir, bases[i]);
        has_model |= passed && !strcmp(bases[i], "model");
    }
    snprintf(sub, sizeof sub, "%s/config.json", dir);
    struct stat st;
    const int has_config = !stat(sub, &st);
    if (has_config) verify_model(v, dir, has_model);
    if (!n_steps && !n_bases && !has_config)
        say_failed(v, dir, "holds no .safetensors file, step_NNNNNN folder or config.json (expected a checkpoint, an "
                           "export or a save folder)");
    free_names(steps, n_steps);
    free_names(bases, n_bases);
}

int cmd_verify(int argc, char **argv) {
    verify_run v = {0, 0};
    const cli_option opts[] = {
        {"--quiet", OPT_FLAG, &v.quiet, "       print the failures only"},
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
    for (int i = 0; i < n_paths; i++) {
        struct stat st;
        if (stat(paths[i], &st)) say_failed(&v, paths[i], "no such file or folder");
        else if (S_ISDIR(st.st_mode)) verify_folder(&v, paths[i]);
        else verify_file(&v, paths[i]);
    }
    free(paths);
    if (v.failed) printf("verify: %d failure%s\n", v.failed, v.failed == 1 ? "" : "s");
    return v.failed ? 1 : 0;
}
