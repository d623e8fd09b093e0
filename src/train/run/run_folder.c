/* What a new run finds in the folders it writes (--out, --save-dir) and where --resume points:
 * a folder that already holds a run is refused unless --force (start afresh: that run's files are
 * removed, nothing else, and only once the new run has loaded everything it needs) or --resume, whose
 * --out must hold nothing or the run it continues; a --resume that names a save folder picks its newest
 * complete checkpoint (docs/checkpoints.md, "Starting again, resuming"). */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "nobubble/checkpoint.h"
#include "nobubble/train.h"
#include "nobubble/model.h"
#include "train/run/run.h"
#include "train/run/run_fields.h"
#include "train/run/state.h"
#include "util/error.h"
#include "util/fs.h"

/* The files a run writes into --out (summary.json last), and the folder of its usual --export. */
static const char *const run_files[] = {"summary.json", "metrics.jsonl", NB_TRAIN_CONFIG_FILE};
enum { N_RUN_FILES = sizeof run_files / sizeof run_files[0] };
static const char export_folder[] = "hf";

static int is_file(const char *dir, const char *name) {
    char path[4400];
    struct stat st;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return lstat(path, &st) == 0 && !S_ISDIR(st.st_mode);
}

static int is_folder(const char *dir, const char *name) {
    char path[4400];
    struct stat st;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return lstat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* "step_NNNNNN" as a run names its checkpoints (the step in six digits, more past 999,999; nothing after):
 * its step, else -1. Only that spelling: the folder a resume opens is named from the step again. */
static long checkpoint_step(const char *name) {
    if (strncmp(name, "step_", 5)) return -1;
    const char *d = name + 5;
    size_t n = strspn(d, "0123456789");
    if (n < 6 || n > 9 || d[n]) return -1;
    const long step = strtol(d, NULL, 10);
    char canonical[32];
    snprintf(canonical, sizeof canonical, "step_%06ld", step);
    return strcmp(canonical, name) ? -1 : step;
}

/* Lists (into what, comma-separated) the run files dir holds; returns how many. */
static int list_run(const char *dir, char *what, size_t size) {
    int n = 0;
    what[0] = 0;
    for (int i = 0; i < N_RUN_FILES; i++)
        if (is_file(dir, run_files[i]))
            n++, snprintf(what + strlen(what), size - strlen(what), "%s%s", n > 1 ? ", " : "", run_files[i]);
    if (is_folder(dir, export_folder) && is_file(dir, "hf/model.safetensors"))
        n++, snprintf(what + strlen(what), size - strlen(what), "%s%s/", n > 1 ? ", " : "", export_folder);
    int steps = 0;
    DIR *d = opendir(dir);
    for (struct dirent *e; d && (e = readdir(d));)
        if (checkpoint_step(e->d_name) >= 0 && is_folder(dir, e->d_name)) steps++;
    if (d) closedir(d);
    if (steps)
        n++, snprintf(what + strlen(what), size - strlen(what), "%s%d step_NNNNNN checkpoint(s)", n > 1 ? ", " : "",
                      steps);
    return n;
}

/* --force: the run's files, the export's files in hf/ (then hf/ itself when that empties it), and (with
 * checkpoints) the checkpoints' files of every step_NNNNNN folder; never anything else (docs/checkpoints.md). */
static int clear_run(const char *dir, const char *flag, int checkpoints) {
    char path[4400];
    for (int i = 0; i < N_RUN_FILES; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, run_files[i]);
        if (is_file(dir, run_files[i]) && unlink(path) && errno != ENOENT)
            return nb_fail("%s %s --force: cannot remove %s: %s", flag, dir, path, strerror(errno));
    }
    snprintf(path, sizeof path, "%s/%s", dir, export_folder);
    if (is_folder(dir, export_folder) && nb_export_hf_clear(path)) return -1;
    DIR *d = checkpoints ? opendir(dir) : NULL;
    int rc = 0;
    for (struct dirent *e; d && !rc && (e = readdir(d));) {
        if (checkpoint_step(e->d_name) < 0 || !is_folder(dir, e->d_name)) continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        rc = train_state_remove(path);
    }
    if (d) closedir(d);
    return rc;
}

/* The settings that `train --config DIR/train_config.json` would give (the run that wrote DIR), into *was, and
 * which rows the file gave (a->given); *file owns its strings (nb_train_config_free). */
static int read_run_settings(const char *path, nb_train_options *was, nb_settings_args *a, nb_train_config_file **file) {
    nb_train_defaults(was);
    nb_settings_begin(a, was);
    *file = NULL;
    if (nb_settings_read_config(a, path, file) || nb_settings_finish(a)) return -1;
    for (int i = 0; i < nb_train_config_model_count(*file); i++)
        if (nb_config_override(&was->model, nb_train_config_model_set(*file, i)))
            return nb_fail("%s: %s", path, nb_last_error());
    return 0;
}

/* Under --resume: whether --out holds the files of another computation than the one resumed. Compared: each
 * setting a checkpoint records that fixes the saved state or what the run computes (the latter not under
 * --override, which may change them), between --out's train_config.json and this run; the others (--steps,
 * --stages outside PipeDream, the folders) may differ, since a run and its resumption compute the same
 * steps. 1 with the differences in diff, 0 when none or when --out has no train_config.json, -1 when that
 * file cannot be read (nb_fail). */
static int out_holds_other_run(const nb_train_options *o, char *diff, size_t size, int *fixed) {
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", o->out_dir, NB_TRAIN_CONFIG_FILE);
    diff[0] = 0;
    *fixed = 0;
    if (!is_file(o->out_dir, NB_TRAIN_CONFIG_FILE)) return 0;
    nb_train_options was;
    static nb_settings_args a;   /* its given[] is NB_SETTINGS_MAX bytes */
    nb_train_config_file *file;
    if (read_run_settings(path, &was, &a, &file)) {
        nb_train_config_free(file);
        return nb_fail("--out %s holds a run whose settings cannot be read, so --resume cannot tell whether it is the "
                       "run it continues: %s. Give another --out, or --force to replace that run's files",
                       o->out_dir, nb_last_error());
    }
    static run_field now[RUN_FIELDS_MAX], then[RUN_FIELDS_MAX];   /* 5 KB each: off the stack */
    const int n = run_fields(o, train_model_stages(o), now), m = run_fields(&was, train_model_stages(&was), then);
    nb_train_config_free(file);
    for (int i = 0; i < n && i < m; i++) {
        if (now[i].kind == RUN_FIELD_FREE || (now[i].kind == RUN_FIELD_OVERRIDE && o->resume_override)) continue;
        const nb_setting *s = now[i].setting;
        /* a setting the file does not hold (written before its row existed): its default says nothing */
        if (s->flag && !a.given[s - nb_settings]) continue;
        if (!strcmp(now[i].value, then[i].value)) continue;
        *fixed |= now[i].kind == RUN_FIELD_FIXED;
        size_t at = strlen(diff);
        if (at < size)
            snprintf(diff + at, size - at, "%s%s%s %s (this run: %s)", at ? "; " : "", s->flag ? "" : "model ",
                     s->flag ? s->flag : s->name, then[i].value, now[i].value);
    }
    return diff[0] != 0;
}

/* Where a check stands: before the run starts (the options not resolved yet: the command line's usage
 * check), once the run holds the folders' locks, or once it has loaded what it needs and is about to write
 * (the one pass that removes files, under --force). */
typedef enum { FOLDER_ASK, FOLDER_HELD, FOLDER_CLEAR } folder_pass;

/* --resume's --out: nothing, or the run it continues; with --force another run's files go (its
 * checkpoints stay: the one resumed may be among them). */
static int check_resumed_out(const nb_train_options *o, folder_pass pass) {
    char diff[1024], what[512];
    int fixed;
    if (pass == FOLDER_ASK || !list_run(o->out_dir, what, sizeof what)) return 0;
    const int other = out_holds_other_run(o, diff, sizeof diff, &fixed);
    if (other < 0 && !o->force) return -1;
    if (other == 0) return 0;
    if (!o->force)
        return nb_fail("--out %s holds another run (%s; its train_config.json, from the last run that wrote there, "
                       "differs from this run in %s): resuming %s into it would mix the two runs' metrics. Give another "
                       "--out, or --force to replace that run's files%s", o->out_dir, what, diff, o->resume_dir,
                       fixed ? "" : ", or --override if it is this run continued with other settings");
    if (pass != FOLDER_CLEAR) return 0;
    if (clear_run(o->out_dir, "--out", 0)) return -1;
    fprintf(stderr, "nobubble train: --force: removed another run's files from %s (%s)\n", o->out_dir, what);
    return 0;
}

/* A folder another command owns: a sweep's (its grid.txt or results.csv) or prepared data (manifest.json).
 * A run's files there would mix with that command's (a report reads a sweep folder as the sweep's). */
static int check_foreign(const char *dir, const char *flag) {
    static const char *const owned[][2] = {{"grid.txt", "a sweep"}, {"results.csv", "a sweep"},
                                           {"manifest.json", "prepared data"}};
    for (size_t i = 0; i < sizeof owned / sizeof owned[0]; i++)
        if (is_file(dir, owned[i][0]))
            return nb_fail("%s %s holds %s (%s): give the run a folder of its own", flag, dir, owned[i][1], owned[i][0]);
    return 0;
}

static int check_folder(const char *dir, const char *flag, const nb_train_options *o, folder_pass pass) {
    char what[512];
    if (!dir) return 0;
    if (check_foreign(dir, flag)) return -1;
    if (o->resume_dir) return !strcmp(flag, "--out") ? check_resumed_out(o, pass) : 0;
    if (!list_run(dir, what, sizeof what)) return 0;
    if (!o->force) {
        /* A run still writing there: the lock's message (naming its pid) says more than this one. */
        nb_fs_lock lock;
        nb_fs_lock_init(&lock);
        if (pass == FOLDER_ASK && nb_fs_lock_dir(&lock, dir, flag)) return -1;
        nb_fs_unlock(&lock);
        return nb_fail("%s %s already holds a run (%s): give --force to start afresh (it removes those), or "
                       "--resume to continue it", flag, dir, what);
    }
    if (pass != FOLDER_CLEAR) return 0;
    if (clear_run(dir, flag, 1)) return -1;
    fprintf(stderr, "nobubble train: --force: removed the earlier run's files from %s (%s)\n", dir, what);
    return 0;
}

/* --export DIR: a folder that holds a model is another run's export or a model of yours: refused unless
 * --force (its export's files go at the claim, the tokenizer's too, so none outlives the model it came with)
 * or --resume (the run it continues exports there again). A path that is not a folder is refused now, not
 * when the run ends. An export inside --out (its hf/) is the --out check's. */
static int check_export(const nb_train_options *o, folder_pass pass) {
    if (!o->export_dir) return 0;
    const int occupied = nb_export_hf_refuse_occupied(o->export_dir, "--export", o->force || o->resume_dir);
    if (occupied < 0) return -1;
    if (!occupied || o->resume_dir || pass != FOLDER_CLEAR) return 0;
    if (nb_export_hf_clear(o->export_dir)) return -1;
    fprintf(stderr, "nobubble train: --force: removed the earlier export's files from %s\n", o->export_dir);
    return 0;
}

static int check_folders(const nb_train_options *o, folder_pass pass) {
    return check_folder(o->out_dir, "--out", o, pass) || check_folder(o->save_dir, "--save-dir", o, pass) ||
           check_export(o, pass);
}

int nb_train_check_folders(const nb_train_options *o) { return check_folders(o, FOLDER_ASK); }

int train_check_held_folders(const nb_train_options *o) { return check_folders(o, FOLDER_HELD); }

int train_claim_folders(const nb_train_options *o) { return check_folders(o, FOLDER_CLEAR); }

/* ------------------------------------------------------------------ the run's hold on its folders */
void train_folders_init(train_folders *f) {
    for (int i = 0; i < TRAIN_FOLDERS; i++) {
        nb_fs_lock_init(&f->locks[i]);
        f->paths[i] = f->made[i] = NULL;
    }
}

/* path without its trailing slashes (malloc'ed; "/" stays "/"), NULL when out of memory. */
static char *trimmed(const char *path) {
    char *p = strdup(path);
    for (size_t n = p ? strlen(p) : 0; n > 1 && p[n - 1] == '/'; n--) p[n - 1] = 0;
    return p;
}

/* The highest folder of path that does not exist yet, which creating path creates (malloc'ed); NULL when
 * path exists (or out of memory: then nothing is removed later, the safe side). */
static char *first_missing(const char *path) {
    struct stat st;
    /* a ".." makes the text's parents other folders than the path's: nothing is recorded, nothing removed */
    if (!strcmp(path, "..") || !strncmp(path, "../", 3) || strstr(path, "/../") ||
        (strlen(path) >= 3 && !strcmp(path + strlen(path) - 3, "/..")))
        return NULL;
    char *p = lstat(path, &st) ? trimmed(path) : NULL;
    for (char *slash; p && (slash = strrchr(p, '/')) && slash != p;) {
        *slash = 0;
        if (!lstat(p, &st)) {
            *slash = '/';
            break;
        }
    }
    return p;
}

/* Removes path and its parents up to made while they are empty folders (rmdir refuses any other). */
static void remove_made(const char *path, const char *made) {
    char *p = trimmed(path);
    while (p && !rmdir(p) && strcmp(p, made)) {
        char *slash = strrchr(p, '/');
        if (!slash || slash == p) break;
        *slash = 0;
    }
    free(p);
}

/* mkdir -p of path (flag names it in errors), recording path and the highest folder it created. */
static int make_folder(const char *path, const char *flag, char **kept, char **made) {
    *made = first_missing(path);
    *kept = *made ? strdup(path) : NULL;
    return nb_fs_mkdirs(path, flag);
}

int train_lock_run(const nb_train_options *o, train_folders *f) {
    train_folders_init(f);
    if (o->save_dir && (make_folder(o->save_dir, "--save-dir", &f->paths[0], &f->made[0]) ||
                        nb_fs_lock_dir(&f->locks[0], o->save_dir, "--save-dir")))
        return -1;
    if (o->save_dir) train_state_clean_leftovers(o->save_dir);
    if (o->out_dir && (make_folder(o->out_dir, "--out", &f->paths[1], &f->made[1]) || nb_fs_lock_dir(&f->locks[1], o->out_dir, "--out")))
        return -1;
    if (o->export_dir && (make_folder(o->export_dir, "--export", &f->paths[2], &f->made[2]) ||
                          nb_fs_lock_dir(&f->locks[2], o->export_dir, "--export")))
        return -1;
    return train_check_held_folders(o);
}

void train_unlock_run(train_folders *f, int failed) {
    for (int i = TRAIN_FOLDERS - 1; i >= 0; i--) nb_fs_unlock(&f->locks[i]);
    /* The lock files are gone: a folder this run made and never wrote into is empty again. --export first,
     * then --out: each may lie inside the next (hf/ in --out, --out in --save-dir). */
    for (int i = TRAIN_FOLDERS - 1; i >= 0; i--) {
        if (failed && f->made[i] && f->paths[i]) remove_made(f->paths[i], f->made[i]);
        free(f->made[i]);
        free(f->paths[i]);
        f->made[i] = f->paths[i] = NULL;
    }
}

/* ------------------------------------------------------------------ --resume SAVE_DIR */
/* Reads every tensor of the open state set, so that each is checked against its checksum. */
static int verify_tensors(const nb_st_set *set) {
    for (int p = 0; p < set->n; p++)
        if (nb_st_verify(&set->files[p], NULL)) return -1;
    return 0;
}

/* Why checkpoint folder path cannot be resumed from (into why), or 0 when it can; with verify, a
 * tensor whose bytes do not match their checksum makes it unusable too. */
static int unusable(const char *path, int verify, char *why, size_t size) {
    if (!is_file(path, "state.safetensors") && !is_file(path, "state.safetensors.index.json")) {
        snprintf(why, size, "incomplete (no state.safetensors or state.safetensors.index.json)");
        return 1;
    }
    nb_st_set set;
    if (nb_st_set_open(path, "state", &set)) {
        snprintf(why, size, "unreadable: %s", nb_last_error());
        return 1;
    }
    int bad = verify && verify_tensors(&set);
    if (bad) snprintf(why, size, "corrupt: %s", nb_last_error());
    nb_st_set_close(&set);
    return bad;
}

static int by_step_descending(const void *a, const void *b) {
    long x = *(const long *)a, y = *(const long *)b;
    return (x < y) - (x > y);
}

int train_list_steps(const char *dir, long **steps) {
    int n = 0, cap = 0;
    *steps = NULL;
    DIR *d = opendir(dir);
    for (struct dirent *e; d && (e = readdir(d));) {
        long s = checkpoint_step(e->d_name);
        if (s < 0 || !is_folder(dir, e->d_name)) continue;
        if (n == cap) {
            long *grown = realloc(*steps, (size_t)(cap = cap ? 2 * cap : 16) * sizeof *grown);
            if (!grown) break;
            *steps = grown;
        }
        (*steps)[n++] = s;
    }
    if (d) closedir(d);
    if (n > 1) qsort(*steps, (size_t)n, sizeof **steps, by_step_descending);  /* *steps is NULL when n is 0 */
    return n;
}

int nb_train_latest_checkpoint(const char *dir, int verify, char *out, size_t size, long *step,
                               nb_train_skip_fn skipped, void *ctx) {
    long *steps;
    int n = train_list_steps(dir, &steps), found = 0;
    for (int i = 0; i < n && !found; i++) {
        char path[4200], why[1024];
        snprintf(path, sizeof path, "%s/step_%06ld", dir, steps[i]);
        if (unusable(path, verify, why, sizeof why)) {
            if (skipped) skipped(ctx, path, why);
            continue;
        }
        if ((size_t)snprintf(out, size, "%s", path) >= size) break;
        *step = steps[i];
        found = 1;
    }
    free(steps);
    return found;
}

static void say_skipped(void *dir, const char *path, const char *why) {
    fprintf(stderr, "nobubble train: --resume %s: skipping %s: %s\n", (const char *)dir, path, why);
}

int nb_train_resolve_resume(nb_train_options *o) {
    if (!o->resume_dir || (strcmp(o->resume_dir, "latest") && strcmp(o->resume_dir, "auto"))) return 0;
    if (!o->save_dir)
        return nb_fail("--resume %s: needs --save-dir, the folder whose newest checkpoint it resumes", o->resume_dir);
    long *steps;
    const int n = train_list_steps(o->save_dir, &steps);
    free(steps);
    if (n > 0) o->resume_dir = o->save_dir;    /* its newest complete checkpoint: nb_train_find_checkpoint */
    else if (!strcmp(o->resume_dir, "auto")) o->resume_dir = NULL;  /* none yet: a fresh start */
    else return nb_fail("--resume latest: --save-dir %s holds no checkpoint (step_NNNNNN) yet; --resume auto starts "
                        "afresh when there is none", o->save_dir);
    return 0;
}

int nb_train_resolve_folders(nb_train_options *o, char *resume_path, size_t size) {
    if (nb_train_resolve_resume(o)) return -1;
    if (o->resume_dir) {
        const char *given = o->resume_dir;
        if (nb_train_find_checkpoint(given, resume_path, size)) return -1;
        if (strcmp(resume_path, given))
            fprintf(stderr, "nobubble train: --resume %s: its newest complete checkpoint is %s\n", given, resume_path);
        o->resume_dir = resume_path;
    }
    return nb_train_check_folders(o);
}

int nb_train_find_checkpoint(const char *dir, char *out, size_t size) {
    if ((size_t)snprintf(out, size, "%s", dir) >= size)   /* a cut path would name another folder */
        return nb_fail("--resume %s: the path is longer than the %zu bytes given for it", dir, size);
    if (is_file(dir, "state.safetensors") || is_file(dir, "state.safetensors.index.json")) return 0;
    long *steps, step;
    int n = train_list_steps(dir, &steps);
    free(steps);
    if (n == 0) return 0;   /* not a save folder: loading it says what is wrong */
    if (!nb_train_latest_checkpoint(dir, 0, out, size, &step, say_skipped, (void *)dir))
        return nb_fail("--resume %s: none of its %d step_NNNNNN folders is a complete checkpoint (each skipped above)",
                       dir, n);
    return 0;
}
