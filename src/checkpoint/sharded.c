/* Sharded safetensors: a set of part files with an index, as Hugging Face saves large models
 * (model.safetensors.index.json + model-00001-of-0000N.safetensors ...). A pipeline run writes its
 * checkpoint this way, a part per stage, so that every stage (thread or MPI process) writes its
 * own weights and state and nothing has to be gathered in one place. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "util/json.h"
#include "nobubble/checkpoint.h"
#include "util/error.h"
#include "util/fs.h"

void nb_st_part_name(char *buf, size_t size, const char *base, int k, int n) {
    snprintf(buf, size, "%s-%05d-of-%05d.safetensors", base, k, n);
}

void nb_st_set_close(nb_st_set *s) {
    for (int i = 0; i < s->n; i++) nb_st_close(&s->files[i]);
    free(s->files);
    memset(s, 0, sizeof *s);
}

static int exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0;
}

/* A part named by an index: a plain file name in the index's folder, never a path elsewhere. */
/* A part's name, read from the index, is joined to the index's folder: it must not leave it. */
static int check_part_name(const char *index, const char *name) {
    char what[4400];
    snprintf(what, sizeof what, "%.4300s: part", index);
    return nb_fs_check_name(name, what);
}

static int add_name(char ***names, int *n, const char *name) {
    for (int i = 0; i < *n; i++)
        if (!strcmp((*names)[i], name)) return 0;
    char **grown = realloc(*names, sizeof *grown * (size_t)(*n + 1));
    if (!grown) return nb_fail("out of memory");
    *names = grown;
    if (!(grown[*n] = strdup(name))) return nb_fail("out of memory");
    (*n)++;
    return 0;
}

/* The parts an index names, in order: "metadata": {"parts": N} names BASE-0000k-of-N for k = 1..N
 * (nobubble's training-state index, whose writer does not know every part's tensors); the values of
 * "weight_map" name the parts of Hugging Face's index, in the order they first appear. */
static int index_parts(const char *path, const nb_json *root, const char *base, char ***names, int *n) {
    const nb_json *meta = nb_json_get(root, "metadata"), *map = nb_json_get(root, "weight_map");
    const nb_json *parts = meta && meta->type == NB_JOBJ ? nb_json_get(meta, "parts") : NULL;
    if (parts) {
        if (parts->type != NB_JNUM || !parts->is_int || parts->i < 1 || parts->i > 99999)
            return nb_fail("%s: \"metadata\".\"parts\" is not an integer from 1 to 99999", path);
        char name[512];
        for (int k = 1; k <= (int)parts->i; k++) {
            nb_st_part_name(name, sizeof name, base, k, (int)parts->i);
            if (add_name(names, n, name)) return -1;
        }
    }
    if (map && map->type != NB_JOBJ) return nb_fail("%s: \"weight_map\" is not an object", path);
    for (size_t i = 0; map && i < map->n; i++) {
        if (map->items[i].type != NB_JSTR)
            return nb_fail("%s: \"weight_map\".\"%s\" is not a file name", path, map->keys[i]);
        if (check_part_name(path, map->items[i].str) || add_name(names, n, map->items[i].str)) return -1;
    }
    if (!*n) return nb_fail("%s: names no parts (expected \"weight_map\" or \"metadata\".\"parts\")", path);
    return 0;
}

/* Every tensor the map names is in the part it names. */
static int check_map(const char *path, const nb_json *root, const nb_st_set *s) {
    const nb_json *map = nb_json_get(root, "weight_map");
    for (size_t i = 0; map && i < map->n; i++) {
        const nb_st_file *in = NULL;
        const nb_st_entry *e = nb_st_set_find(s, map->keys[i], &in);
        const char *slash = in ? strrchr(in->path, '/') : NULL;
        if (!e || strcmp(slash ? slash + 1 : in->path, map->items[i].str))
            return nb_fail("%s: tensor '%s' is not in %s, where the index puts it", path, map->keys[i], map->items[i].str);
    }
    return 0;
}

/* No tensor in two parts: which one to read would be a guess. */
static int check_disjoint(const nb_st_set *s) {
    for (int i = 1; i < s->n; i++)
        for (int e = 0; e < s->files[i].n; e++)
            for (int j = 0; j < i; j++)
                if (nb_st_find(&s->files[j], s->files[i].entries[e].name))
                    return nb_fail("tensor '%s' is in both %s and %s", s->files[i].entries[e].name, s->files[j].path,
                                   s->files[i].path);
    return 0;
}

/* Parts of one save: a part that records its step ("next_step", as a pipeline's checkpoint parts do)
 * must agree with every other part, and then every part must record it. */
static int check_one_save(const nb_st_set *s) {
    const nb_st_file *first = NULL;
    for (int i = 0; i < s->n; i++)
        if (nb_st_meta(&s->files[i], "next_step")) {
            first = &s->files[i];
            break;
        }
    if (!first) return 0;
    const char *step = nb_st_meta(first, "next_step");
    for (int i = 0; i < s->n; i++) {
        const char *other = nb_st_meta(&s->files[i], "next_step");
        if (!other)
            return nb_fail("%s records no step while %s is of step %s: parts of two saves", s->files[i].path,
                           first->path, step);
        if (strcmp(other, step))
            return nb_fail("%s is of step %s, %s of step %s: parts of two checkpoints", s->files[i].path, other,
                           first->path, step);
    }
    return 0;
}

static int open_index(const char *dir, const char *path, const char *base, nb_st_set *s) {
    nb_json root;
    if (nb_json_read_file(path, NULL, NB_JSON_UNIQUE_KEYS, &root)) return -1;
    int r = 0;
    char **names = NULL;
    int n = 0;
    if (root.type != NB_JOBJ) r = nb_fail("%s: not a JSON object", path);
    if (!r) r = index_parts(path, &root, base, &names, &n);
    if (!r && !(s->files = calloc((size_t)n, sizeof *s->files))) r = nb_fail("out of memory");
    for (int i = 0; i < n && !r; i++) {
        char part[4600];
        snprintf(part, sizeof part, "%s/%s", dir, names[i]);
        if (!exists(part)) r = nb_fail("%s: part %s is missing", path, part);
        else if (!(r = nb_st_open(part, &s->files[i]))) s->n++;
    }
    if (!r) r = check_disjoint(s) || check_map(path, &root, s) || check_one_save(s);
    for (int i = 0; i < n; i++) free(names[i]);
    free(names);
    nb_json_free(&root);
    if (r) nb_st_set_close(s);
    return r;
}

int nb_st_set_open(const char *dir, const char *base, nb_st_set *s) {
    char single[4400], index[4400];
    memset(s, 0, sizeof *s);
    snprintf(single, sizeof single, "%s/%s.safetensors", dir, base);
    snprintf(index, sizeof index, "%s/%s.safetensors.index.json", dir, base);
    if (!exists(single) && exists(index)) return open_index(dir, index, base, s);
    if (!(s->files = calloc(1, sizeof *s->files))) return nb_fail("out of memory");
    if (nb_st_open(single, &s->files[0])) {
        if (!exists(single)) nb_fail("%s: no %s.safetensors and no %s.safetensors.index.json", dir, base, base);
        nb_st_set_close(s);
        return -1;
    }
    s->n = 1;
    return 0;
}

const nb_st_entry *nb_st_set_find(const nb_st_set *s, const char *name, const nb_st_file **in) {
    for (int i = 0; i < s->n; i++) {
        const nb_st_entry *e = nb_st_find(&s->files[i], name);
        if (e) {
            if (in) *in = &s->files[i];
            return e;
        }
    }
    return NULL;
}

const char *nb_st_set_meta(const nb_st_set *s, const char *key) {
    for (int i = 0; i < s->n; i++) {
        const char *v = nb_st_meta(&s->files[i], key);
        if (v) return v;
    }
    return NULL;
}

int nb_st_set_read_f32(const nb_st_set *s, const char *name, float *out, size_t n) {
    const nb_st_file *in = NULL;
    if (!nb_st_set_find(s, name, &in)) return nb_fail("%s: no tensor '%s'", s->n ? s->files[0].path : "(no files)", name);
    return nb_st_read_f32(in, name, out, n);
}

int nb_st_write_index(const char *path, const nb_st_index_entry *map, int n, int parts, uint64_t total_size) {
    nb_buf b = {0};
    int r = nb_buf_printf(&b, "{\n  \"metadata\": {");
    if (parts > 0) r = r || nb_buf_printf(&b, "\"parts\": %d%s", parts, map ? ", " : "");
    if (map) r = r || nb_buf_printf(&b, "\"total_size\": %llu", (unsigned long long)total_size);
    r = r || nb_buf_printf(&b, "},\n  \"weight_map\": {");
    for (int i = 0; i < n && !r; i++) {
        r = nb_buf_printf(&b, "%s\n    ", i ? "," : "") || nb_buf_json_str(&b, map[i].name, strlen(map[i].name)) ||
            nb_buf_printf(&b, ": ") || nb_buf_json_str(&b, map[i].file, strlen(map[i].file));
    }
    r = r || nb_buf_printf(&b, "%s}\n}\n", n ? "\n  " : "");
    if (r) {
        nb_buf_free(&b);
        return nb_fail("%s: out of memory", path);
    }
    r = nb_fs_write_atomic(path, b.p, b.n);
    nb_buf_free(&b);
    return r;
}
