/* Runs a fuzz target's entry point once on every file of the given folders (its corpus: seeds and the
 * inputs that once crashed it), in name order, so that the normal test build (gcc, ASan) keeps them as
 * regression tests. Fails when a folder cannot be read or holds no file. */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "fuzz_input.h"

static int cmp_names(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static int run_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "%s: cannot open\n", path);
        return -1;
    }
    size_t cap = 4096, n = 0;
    unsigned char *buf = malloc(cap);
    for (size_t k; buf && (k = fread(buf + n, 1, cap - n, f)) > 0;) {
        n += k;
        if (n < cap) continue;
        unsigned char *grown = realloc(buf, cap * 2);
        if (!grown) free(buf);
        buf = grown;
        cap *= 2;
    }
    fclose(f);
    if (!buf) {
        fprintf(stderr, "%s: out of memory\n", path);
        return -1;
    }
    LLVMFuzzerTestOneInput(buf, n);
    free(buf);
    return 0;
}

static int run_folder(const char *folder) {
    DIR *d = opendir(folder);
    if (!d) {
        fprintf(stderr, "%s: cannot open the folder\n", folder);
        return -1;
    }
    char **names = NULL;
    size_t n = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] == '.') continue;
        char **grown = realloc(names, sizeof *names * (n + 1));
        if (!grown || !(grown[n] = strdup(e->d_name))) {
            fprintf(stderr, "out of memory\n");
            exit(2);
        }
        names = grown;
        n++;
    }
    closedir(d);
    qsort(names, n, sizeof *names, cmp_names);
    int rc = n ? 0 : -1;
    if (!n) fprintf(stderr, "%s: no inputs\n", folder);
    for (size_t i = 0; i < n; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", folder, names[i]);
        if (run_file(path)) rc = -1;
        free(names[i]);
    }
    free(names);
    printf("%s: %zu inputs\n", folder, n);
    return rc;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s CORPUS_FOLDER...\n", argv[0]);
        return 2;
    }
    int rc = 0;
    for (int i = 1; i < argc; i++) rc |= run_folder(argv[i]) != 0;
    return rc;
}
